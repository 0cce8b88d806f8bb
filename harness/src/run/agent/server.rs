//! The fake model endpoint: an HTTP/1.1 server on a loopback listener the runner bound, which
//! answers an agent CLI's generation requests with what a [`Handler`] scripts, answers the
//! other endpoints itself ([`api::auxiliary`]), and records every exchange so the runner can see
//! which instruction files the CLI put in front of the model.
//!
//! The client is third-party software, so everything it sends is bounded: a body over
//! [`MAX_BODY`] is refused with 413, a body that is not JSON gets 400, and the log keeps at most
//! [`MAX_EXCHANGES`] exchanges. Nothing a client sends makes the server panic.
//!
//! Threads: tiny_http reads each connection on its own thread (keep-alive included) and queues
//! the requests; one worker thread of ours takes them off the queue in arrival order, so the
//! handler sees them one at a time and in that order. [`Server::stop`] ends the worker and the
//! accept loop; a connection thread of tiny_http's ends when its client closes the connection
//! (the runner ends the CLI first), and its idle pool threads within five seconds.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::api::{self, Api, Encoded, Reply};

/// The largest request body read: 64 MiB. A larger one is refused with 413, unread, and logged
/// with a `null` body.
pub const MAX_BODY: usize = 64 << 20;

/// The most exchanges the log keeps: 10,000. Past that one note is kept instead (an exchange
/// with status 0, see [`Server::exchanges`]), so a client in a request loop cannot grow the log
/// without bound.
pub const MAX_EXCHANGES: usize = 10_000;

/// The most bytes of a reply the log keeps: 1 MiB. The client is always sent the whole reply.
pub const MAX_LOGGED_REPLY: usize = 1 << 20;

/// Over this declared length (1 GiB) a refused body is not even drained: tiny_http drains an
/// unread body into one buffer of the remaining length, so a `Content-Length` near `usize::MAX`
/// would abort the process on allocation. Such a connection is answered and then abandoned
/// (its socket and tiny_http thread stay until the process exits).
const MAX_DRAINED: usize = 1 << 30;

/// How long the worker waits for a request before it looks at the stop flag again.
const POLL: Duration = Duration::from_millis(50);

/// How long [`Server::stop`] waits for the worker, which may be answering a last request.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// Header values that are credentials, logged as `<redacted>` (compared case-insensitively).
const SECRET_HEADERS: [&str; 4] = ["authorization", "proxy-authorization", "x-api-key", "x-goog-api-key"];

/// A request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    /// Arrival number, from 0.
    pub seq: u64,
    /// The HTTP method (`POST`).
    pub method: String,
    /// The path with its query string; the value of a `key` query parameter (Gemini's API key)
    /// is logged as `<redacted>`.
    pub path: String,
    /// The headers in the order sent; the values of credential headers (`authorization`,
    /// `proxy-authorization`, `x-api-key`, `x-goog-api-key`) are `<redacted>`.
    pub headers: Vec<(String, String)>,
    /// The body as JSON: `null` when it is empty, not JSON, or over [`MAX_BODY`].
    pub body: Value,
    /// The body's length in bytes: as read, or as declared when it was refused unread.
    pub raw_len: usize,
}

/// One request and the answer sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The request.
    pub incoming: Incoming,
    /// The HTTP status sent; 0 for the "log full" note.
    pub status: u16,
    /// The body sent, at most [`MAX_LOGGED_REPLY`] bytes of it (cut on a character boundary,
    /// with a note of the length).
    pub reply: String,
    /// Milliseconds from the server's start to the request's arrival.
    pub at_ms: u64,
}

/// Scripts the fake model: what it answers to each generation request.
pub trait Handler: Send {
    /// The reply to `request`, a generation request of `api`. A panic here is answered with a
    /// 500 in the API's error shape, and the server goes on.
    fn reply(&mut self, api: Api, request: &Incoming) -> Reply;
}

/// A running fake model endpoint. Dropping it stops it as [`Server::stop`] does.
pub struct Server {
    addr: SocketAddr,
    /// A second handle on the listening socket, kept to shut it down: tiny_http wakes its accept
    /// loop by connecting to the address, which reaches nothing when the listener was bound in
    /// another network namespace.
    listener: Option<TcpListener>,
    http: Option<Arc<tiny_http::Server>>,
    worker: Option<JoinHandle<()>>,
    stopping: Arc<AtomicBool>,
    log: Arc<Mutex<Log>>,
}

#[derive(Default)]
struct Log {
    exchanges: Vec<Exchange>,
    /// Exchanges not recorded since the log filled.
    dropped: u64,
}

impl Server {
    /// Serves `api` on `listener`, which the caller bound (e.g. to `127.0.0.1:0`, perhaps inside
    /// another network namespace, so it is never re-bound here). Every generation request goes
    /// to `handler`, one at a time and in arrival order; the other endpoints are answered by
    /// [`api::auxiliary`] without it.
    pub fn start(listener: TcpListener, api: Api, handler: Box<dyn Handler>) -> std::io::Result<Server> {
        let addr = listener.local_addr()?;
        let kept = listener.try_clone()?;
        let http = tiny_http::Server::from_listener(listener, None).map_err(std::io::Error::other)?;
        let http = Arc::new(http);
        let stopping = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Log::default()));
        let worker = {
            let (http, stopping, log) = (Arc::clone(&http), Arc::clone(&stopping), Arc::clone(&log));
            std::thread::Builder::new()
                .name("fake-model".to_owned())
                .spawn(move || work(&http, api, handler, &stopping, &log))?
        };
        Ok(Server { addr, listener: Some(kept), http: Some(http), worker: Some(worker), stopping, log })
    }

    /// The base URL to give the CLI: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The log so far, in arrival order. When the log is full its last entry is a note: an
    /// exchange with status 0, an empty method and path, and a reply saying how many exchanges
    /// were not recorded.
    pub fn exchanges(&self) -> Vec<Exchange> {
        lock(&self.log).exchanges.clone()
    }

    /// Stops accepting, waits (at most five seconds) for the worker to finish the request it is
    /// answering, and returns the log.
    pub fn stop(mut self) -> Vec<Exchange> {
        self.shut_down();
        std::mem::take(&mut lock(&self.log).exchanges)
    }

    fn shut_down(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(listener) = self.listener.take() {
            // Wakes tiny_http's blocked accept() with an error, which ends its accept loop and
            // closes the socket; an error here only means it is already shut.
            let _ = rustix::net::shutdown(&listener, rustix::net::Shutdown::Read);
        }
        if let Some(worker) = self.worker.take() {
            let deadline = Instant::now() + STOP_WAIT;
            while !worker.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            // A worker still reading a stalled client's body is left to finish on its own.
            if worker.is_finished() {
                let _ = worker.join();
            }
        }
        self.http = None;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shut_down();
    }
}

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    // A poisoned log is still a log: nothing panics while holding it, but a lost log is worse
    // than a half-written entry.
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The worker: answers requests off tiny_http's queue, in arrival order, until told to stop.
fn work(http: &tiny_http::Server, api: Api, mut handler: Box<dyn Handler>, stopping: &AtomicBool, log: &Mutex<Log>) {
    let started = Instant::now();
    let mut seq = 0;
    while !stopping.load(Ordering::SeqCst) {
        match http.recv_timeout(POLL) {
            Ok(Some(request)) => {
                let at_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                let mut request = request;
                let (exchange, encoded, abandon) = serve(&mut request, seq, at_ms, api, handler.as_mut());
                // Logged before it is sent, so a client that has its answer finds it in the log.
                record(&mut lock(log), exchange);
                respond(request, &encoded, abandon);
                seq += 1;
            }
            Ok(None) => {}
            // The accept loop failed (or was shut down): requests already queued are still
            // answered, and the worker keeps polling until it is stopped.
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// What reading a request body gave.
enum Body {
    Read(Vec<u8>),
    TooLarge(usize),
    Broken,
}

fn read_body(request: &mut tiny_http::Request) -> Body {
    if let Some(declared) = request.body_length().filter(|&n| n > MAX_BODY) {
        return Body::TooLarge(declared);
    }
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_BODY).unwrap_or(u64::MAX).saturating_add(1);
    match request.as_reader().take(limit).read_to_end(&mut bytes) {
        Ok(n) if n > MAX_BODY => Body::TooLarge(n),
        Ok(_) => Body::Read(bytes),
        Err(_) => Body::Broken,
    }
}

/// Reads one request and works out its answer: the log entry, the response, and whether the
/// connection is to be abandoned (see [`MAX_DRAINED`]).
fn serve(
    request: &mut tiny_http::Request,
    seq: u64,
    at_ms: u64,
    api: Api,
    handler: &mut dyn Handler,
) -> (Exchange, Encoded, bool) {
    let method = request.method().as_str().to_owned();
    let path = redact_query(request.url());
    let headers = request
        .headers()
        .iter()
        .map(|h| {
            let name = h.field.as_str().as_str().to_owned();
            let secret = SECRET_HEADERS.iter().any(|s| name.eq_ignore_ascii_case(s));
            let value = if secret { "<redacted>".to_owned() } else { h.value.as_str().to_owned() };
            (name, value)
        })
        .collect();
    let mut incoming = Incoming { seq, method, path, headers, body: Value::Null, raw_len: 0 };
    let mut abandon = false;
    let encoded = match read_body(request) {
        Body::TooLarge(n) => {
            incoming.raw_len = n;
            abandon = n > MAX_DRAINED;
            api::error(
                api,
                413,
                &format!("request body of {n} bytes is over the {} MiB this server reads", MAX_BODY >> 20),
            )
        }
        Body::Broken => api::error(api, 400, "request body could not be read"),
        Body::Read(bytes) => {
            incoming.raw_len = bytes.len();
            let parsed = if bytes.is_empty() { Ok(Value::Null) } else { serde_json::from_slice(&bytes) };
            match parsed {
                Err(e) => api::error(api, 400, &format!("request body is not JSON ({e})")),
                Ok(body) => {
                    incoming.body = body;
                    answer(api, &incoming, handler)
                }
            }
        }
    };
    let exchange = Exchange { incoming, status: encoded.status, reply: clip_reply(encoded.body.clone()), at_ms };
    (exchange, encoded, abandon)
}

fn answer(api: Api, incoming: &Incoming, handler: &mut dyn Handler) -> Encoded {
    let (method, path, body) = (incoming.method.as_str(), incoming.path.as_str(), &incoming.body);
    if !api::is_generation(api, method, path) {
        return api::auxiliary(api, method, path, body);
    }
    match std::panic::catch_unwind(AssertUnwindSafe(|| handler.reply(api, incoming))) {
        Ok(reply) => api::encode(api, &reply, api::wants_stream(api, path, body), &api::model(api, path, body)),
        Err(_) => api::error(api, 500, "the fake model's handler panicked"),
    }
}

fn respond(request: tiny_http::Request, encoded: &Encoded, abandon: bool) {
    let mut response = tiny_http::Response::from_string(encoded.body.as_str()).with_status_code(encoded.status);
    if let Ok(header) = tiny_http::Header::from_bytes("Content-Type", encoded.content_type) {
        response.add_header(header);
    }
    // A failed write means the client went away; there is no one left to tell.
    if abandon {
        // `upgrade` hands back the connection with its unread body instead of dropping (and so
        // draining) it, see MAX_DRAINED; forgetting the stream keeps tiny_http from draining it
        // later. tiny_http writes only the head of an upgrade response, without Content-Length,
        // so the protocol name (our own constant text) carries the two headers that let the
        // client read the answer and close the connection, and the body is written here.
        let headers = format!("none\r\nContent-Length: {}\r\nConnection: close", encoded.body.len());
        let mut stream = request.upgrade(&headers, response);
        let _ = stream.write_all(encoded.body.as_bytes()).and_then(|()| stream.flush());
        std::mem::forget(stream);
    } else {
        let _ = request.respond(response);
    }
}

fn record(log: &mut Log, exchange: Exchange) {
    if log.exchanges.len() < MAX_EXCHANGES {
        log.exchanges.push(exchange);
        return;
    }
    log.dropped += 1;
    let reply =
        format!("log full: the log keeps {MAX_EXCHANGES} exchanges, and {} later were not recorded", log.dropped);
    if log.dropped == 1 {
        let incoming =
            Incoming { method: String::new(), path: String::new(), headers: Vec::new(), ..exchange.incoming };
        log.exchanges.push(Exchange { incoming, status: 0, reply, at_ms: exchange.at_ms });
    } else if let Some(note) = log.exchanges.last_mut() {
        note.reply = reply;
    }
}

/// The path with the value of a `key` query parameter replaced by `<redacted>`.
fn redact_query(url: &str) -> String {
    let Some((path, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let pairs: Vec<&str> =
        query.split('&').map(|pair| if pair.starts_with("key=") { "key=<redacted>" } else { pair }).collect();
    format!("{path}?{}", pairs.join("&"))
}

fn clip_reply(mut reply: String) -> String {
    if reply.len() <= MAX_LOGGED_REPLY {
        return reply;
    }
    let len = reply.len();
    let mut end = MAX_LOGGED_REPLY;
    while !reply.is_char_boundary(end) {
        end -= 1;
    }
    reply.truncate(end);
    reply.push_str(&format!("... [cut: {len} bytes in all]"));
    reply
}

#[cfg(test)]
mod tests {
    use super::api::Call;
    use super::*;
    use rstest::rstest;
    use serde_json::json;
    use std::io::{BufRead, BufReader};
    use std::net::TcpStream;

    /// Calls `Read` on its first generation request and says "done" on every later one.
    struct Script {
        calls: usize,
    }

    impl Handler for Script {
        fn reply(&mut self, _: Api, request: &Incoming) -> Reply {
            self.calls += 1;
            if request.body["panic"] == true {
                panic!("scripted panic");
            }
            if self.calls == 1 {
                Reply::Tools(vec![Call { id: "toolu_1".into(), name: "Read".into(), args: json!({"file_path": "/x"}) }])
            } else {
                Reply::Text("done".into())
            }
        }
    }

    fn start(api: Api) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Server::start(listener, api, Box::new(Script { calls: 0 })).unwrap()
    }

    fn connect(server: &Server) -> BufReader<TcpStream> {
        let stream = TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        BufReader::new(stream)
    }

    /// Sends raw bytes and reads one response: its status, headers (lowercased names) and body.
    fn send(conn: &mut BufReader<TcpStream>, raw: &[u8]) -> (u16, Vec<(String, String)>, String) {
        conn.get_mut().write_all(raw).unwrap();
        let mut line = String::new();
        conn.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            conn.read_line(&mut line).unwrap();
            let Some((name, value)) = line.trim_end().split_once(": ") else { break };
            headers.push((name.to_ascii_lowercase(), value.to_owned()));
        }
        let len: usize = headers.iter().find(|(n, _)| n == "content-length").unwrap().1.parse().unwrap();
        let mut body = vec![0; len];
        conn.read_exact(&mut body).unwrap();
        (status, headers, String::from_utf8(body).unwrap())
    }

    fn post(path: &str, body: &str) -> Vec<u8> {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: sk-secret\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
        headers.iter().find(|(n, _)| n == name).map_or("", |(_, v)| v.as_str())
    }

    #[test]
    fn a_conversation_is_answered_and_logged() {
        let server = start(Api::AnthropicMessages);
        assert!(server.url().starts_with("http://127.0.0.1:"));
        let mut conn = connect(&server);
        let request = r#"{"model":"m1","messages":[{"role":"user","content":"go"}],"stream":true}"#;

        // The first generation request gets the tool call, streamed.
        let (status, headers, body) = send(&mut conn, &post("/v1/messages?beta=true", request));
        assert_eq!((status, header(&headers, "content-type")), (200, "text/event-stream"));
        assert!(body.starts_with("event: message_start\n"), "{body}");
        assert!(body.contains(r#""partial_json":"{\"file_path\":\"/x\"}""#), "{body}");

        // The same connection is reused (keep-alive): count_tokens skips the handler.
        let (status, _, body) = send(&mut conn, &post("/v1/messages/count_tokens?beta=true", request));
        assert_eq!((status, body.as_str()), (200, r#"{"input_tokens":1}"#));

        // The second generation request gets the text, not streamed this time.
        let (status, headers, body) = send(&mut conn, &post("/v1/messages", r#"{"model":"m1"}"#));
        assert_eq!((status, header(&headers, "content-type")), (200, "application/json"));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["content"], json!([{"type": "text", "text": "done"}]));

        let (status, _, body) = send(&mut conn, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status, 404);
        assert!(body.contains("not_found_error"), "{body}");

        assert_eq!(server.exchanges().len(), 4);
        let log = server.stop();
        let seen: Vec<(u64, &str, &str, u16)> = log
            .iter()
            .map(|e| (e.incoming.seq, e.incoming.method.as_str(), e.incoming.path.as_str(), e.status))
            .collect();
        assert_eq!(
            seen,
            [
                (0, "POST", "/v1/messages?beta=true", 200),
                (1, "POST", "/v1/messages/count_tokens?beta=true", 200),
                (2, "POST", "/v1/messages", 200),
                (3, "GET", "/v1/models", 404),
            ]
        );
        let first = &log[0];
        assert_eq!(first.incoming.body["model"], "m1");
        assert_eq!(first.incoming.raw_len, request.len());
        assert!(first.reply.contains("toolu_1"));
        assert!(first.incoming.headers.contains(&("x-api-key".to_owned(), "<redacted>".to_owned())));
        assert!(!format!("{log:?}").contains("sk-secret"));
        assert!(log.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    }

    #[test]
    fn gemini_requests_are_answered_by_path() {
        let server = start(Api::Gemini);
        let mut conn = connect(&server);
        let (status, _, body) = send(
            &mut conn,
            &post("/v1beta/models/g1:streamGenerateContent?alt=sse&key=AIza-secret", r#"{"contents":[]}"#),
        );
        assert_eq!(status, 200);
        let data: Value =
            serde_json::from_str(body.strip_prefix("data: ").unwrap().strip_suffix("\r\n\r\n").unwrap()).unwrap();
        assert_eq!(data["candidates"][0]["content"]["parts"][0]["functionCall"]["name"], "Read");
        assert_eq!(data["modelVersion"], "g1");
        let (status, _, body) = send(&mut conn, &post("/v1beta/models/g1:countTokens", r#"{"contents":[]}"#));
        assert_eq!((status, body.as_str()), (200, r#"{"totalTokens":1}"#));
        let log = server.stop();
        assert_eq!(log[0].incoming.path, "/v1beta/models/g1:streamGenerateContent?alt=sse&key=<redacted>");
    }

    #[rstest]
    #[case::oversize_declared(format!("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", MAX_BODY + 1).into_bytes(), 413, MAX_BODY + 1, "request_too_large")]
    #[case::absurd_declared(format!("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", usize::MAX).into_bytes(), 413, usize::MAX, "request_too_large")]
    #[case::not_json(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nnot j".to_vec(), 400, 5, "invalid_request_error")]
    #[case::not_utf8(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n\xff\xfe".to_vec(), 400, 2, "invalid_request_error")]
    fn a_bad_body_is_refused_and_logged(
        #[case] raw: Vec<u8>,
        #[case] status: u16,
        #[case] raw_len: usize,
        #[case] kind: &str,
    ) {
        let server = start(Api::AnthropicMessages);
        {
            let mut conn = connect(&server);
            let (got, _, body) = send(&mut conn, &raw);
            assert_eq!(got, status);
            assert!(body.contains(kind), "{body}");
        }
        // The server still answers, on a new connection.
        let mut conn = connect(&server);
        let (got, _, _) = send(&mut conn, &post("/v1/messages", "{}"));
        assert_eq!(got, 200);
        let log = server.stop();
        assert_eq!(log.len(), 2);
        assert_eq!(
            (log[0].status, log[0].incoming.body.clone(), log[0].incoming.raw_len),
            (status, Value::Null, raw_len)
        );
    }

    #[test]
    fn garbage_is_answered_by_tiny_http_and_not_logged() {
        let server = start(Api::AnthropicMessages);
        let mut conn = connect(&server);
        let (status, _, _) = send(&mut conn, b"\x00\x01 GARBAGE\r\n\r\n");
        assert_eq!(status, 400);
        assert_eq!(server.stop(), []);
    }

    #[test]
    fn a_panicking_handler_gets_a_500_and_the_server_goes_on() {
        let server = start(Api::Gemini);
        let mut conn = connect(&server);
        let (status, _, body) = send(&mut conn, &post("/v1beta/models/g:generateContent", r#"{"panic":true}"#));
        assert_eq!(status, 500);
        assert!(body.contains("INTERNAL"), "{body}");
        let (status, _, _) = send(&mut conn, &post("/v1beta/models/g:generateContent", "{}"));
        assert_eq!(status, 200);
        assert_eq!(server.stop().len(), 2);
    }

    #[test]
    fn after_stop_the_port_is_closed() {
        let server = start(Api::AnthropicMessages);
        let addr = server.addr;
        let log = server.stop();
        assert!(log.is_empty());
        // tiny_http's accept loop closes the listener once shut down; give it a moment.
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(addr).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(TcpStream::connect(addr).is_err());
    }

    fn exchange(seq: u64) -> Exchange {
        let incoming = Incoming {
            seq,
            method: "POST".into(),
            path: "/v1/messages".into(),
            headers: vec![],
            body: Value::Null,
            raw_len: 0,
        };
        Exchange { incoming, status: 200, reply: String::new(), at_ms: seq }
    }

    #[test]
    fn a_full_log_keeps_one_note() {
        let mut log = Log::default();
        for seq in 0..(MAX_EXCHANGES as u64 + 3) {
            record(&mut log, exchange(seq));
        }
        assert_eq!(log.exchanges.len(), MAX_EXCHANGES + 1);
        let note = log.exchanges.last().unwrap();
        assert_eq!((note.status, note.incoming.seq, note.incoming.method.as_str()), (0, MAX_EXCHANGES as u64, ""));
        assert_eq!(note.reply, "log full: the log keeps 10000 exchanges, and 3 later were not recorded");
    }

    #[rstest]
    #[case::no_query("/v1/messages", "/v1/messages")]
    #[case::key("/m:g?alt=sse&key=AIza", "/m:g?alt=sse&key=<redacted>")]
    #[case::key_first("/m:g?key=AIza&alt=sse", "/m:g?key=<redacted>&alt=sse")]
    #[case::other_keys("/m:g?monkey=1&keys=2", "/m:g?monkey=1&keys=2")]
    fn query_keys_are_redacted(#[case] url: &str, #[case] want: &str) {
        assert_eq!(redact_query(url), want);
    }

    #[test]
    fn a_long_reply_is_clipped_in_the_log_on_a_character_boundary() {
        let reply = "é".repeat(MAX_LOGGED_REPLY);
        let clipped = clip_reply(reply);
        assert!(clipped.len() < MAX_LOGGED_REPLY + 100);
        assert!(clipped.ends_with(&format!("... [cut: {} bytes in all]", 2 * MAX_LOGGED_REPLY)));
        assert_eq!(clip_reply("short".into()), "short");
    }
}
