//! The model wire APIs an agent CLI speaks, seen from the model's side: what a request puts in
//! front of the model ([`segments`], [`tool_results`], [`offers_tools`]), which endpoint it is
//! ([`is_generation`], [`auxiliary`]), and how a scripted [`Reply`] is encoded so that the real
//! SDK accepts it ([`encode`]).
//!
//! Each API is one [`Api`] variant and one private module below (`anthropic`, `gemini`, `chat`,
//! `responses`); the public functions only dispatch, so adding an API is one more variant and one
//! more module. Request bodies come from third-party software: every reader
//! here takes any JSON, skips what it does not know, and never panics.

use std::fmt;

use serde_json::{json, Value};

/// A model wire API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// Anthropic's Messages API (`POST /v1/messages`), spoken by Claude Code.
    AnthropicMessages,
    /// Google's Gemini API (`POST /v1beta/models/{model}:generateContent`), spoken by Gemini CLI.
    Gemini,
    /// OpenAI's chat completions (`POST /v1/chat/completions`), spoken by opencode, Qwen Code and
    /// Continue's CLI.
    OpenaiChat,
    /// OpenAI's Responses API (`POST /v1/responses`), spoken by Codex.
    OpenaiResponses,
}

/// Where a piece of request text sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Place {
    /// The system prompt: Anthropic's `system` field (a string or an array of text blocks),
    /// Gemini's `systemInstruction`.
    System,
    /// The text parts of the first user message.
    FirstUser,
    /// The text parts of a later user message.
    User,
    /// Text inside a tool result: Anthropic's `tool_result` block content, any string inside
    /// Gemini's `functionResponse.response`.
    ToolResult,
    /// A message whose role is `system` inside the conversation itself (Claude Code 2.1.197 sent
    /// one in `messages`).
    SeparateSystem,
    /// An assistant (Anthropic) or model (Gemini) turn: its text and its tool calls' arguments.
    Assistant,
    /// Anything else: tool descriptions, messages of an unknown role. Tool schemas are skipped.
    Other,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Place::System => "system",
            Place::FirstUser => "first user message",
            Place::User => "user message",
            Place::ToolResult => "tool result",
            Place::SeparateSystem => "separate system message",
            Place::Assistant => "assistant",
            Place::Other => "other",
        })
    }
}

/// One piece of text the model would read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    /// Where it sits.
    pub place: Place,
    /// Which message holds it: 0 for the system prompt (and for tool descriptions), and `i + 1`
    /// for the message at index `i` of Anthropic's `messages` or Gemini's `contents`, so the
    /// first message is 1 and never shares a number with the system prompt.
    pub message: usize,
    /// The text itself, unchanged.
    pub text: String,
}

/// One tool call the fake model makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call's id (Anthropic's `tool_use.id`). When empty, [`encode`] makes one from the
    /// call's name and position. Gemini's wire form has no id, so it is unused there.
    pub id: String,
    /// The tool's name, as the CLI offered it (`Read`, `read_file`).
    pub name: String,
    /// The arguments, a JSON object. `null` is sent as `{}`.
    pub args: Value,
}

/// What the fake model answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Call these tools, in this order, and stop for their results.
    Tools(Vec<Call>),
    /// Say this and end the turn.
    Text(String),
}

/// An encoded HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

/// The `Content-Type` of a JSON body.
pub const JSON: &str = "application/json";
/// The `Content-Type` of a server-sent-event stream.
pub const EVENT_STREAM: &str = "text/event-stream";

/// Every text the model would read in a request `body`, in the order of the conversation: the
/// system prompt, then each message's parts, then the tool descriptions.
pub fn segments(api: Api, body: &Value) -> Vec<Segment> {
    match api {
        Api::AnthropicMessages => anthropic::segments(body),
        Api::Gemini => gemini::segments(body),
        Api::OpenaiChat => chat::segments(body),
        Api::OpenaiResponses => responses::segments(body),
    }
}

/// Whether the request offers the model any tool: Anthropic's non-empty `tools`, or a non-empty
/// `functionDeclarations` in one of Gemini's `tools`.
pub fn offers_tools(api: Api, body: &Value) -> bool {
    match api {
        Api::AnthropicMessages | Api::OpenaiChat | Api::OpenaiResponses => array(body.get("tools")).next().is_some(),
        Api::Gemini => gemini::declarations(body).next().is_some(),
    }
}

/// How many tool results the conversation holds: Anthropic `tool_result` blocks in user
/// messages, Gemini `functionResponse` parts.
pub fn tool_results(api: Api, body: &Value) -> usize {
    match api {
        Api::AnthropicMessages => array(body.get("messages"))
            .filter(|m| role(m) == "user")
            .flat_map(|m| array(m.get("content")))
            .filter(|b| kind(b) == "tool_result")
            .count(),
        // Gemini CLI 0.61.0 replays a resumed conversation with its function responses doubled:
        // a response with an id counts once however often it appears.
        Api::Gemini => {
            let responses: Vec<&Value> = array(body.get("contents"))
                .flat_map(|c| array(c.get("parts")))
                .filter_map(|p| p.get("functionResponse"))
                .collect();
            let ids: std::collections::BTreeSet<&str> = responses.iter().filter_map(|r| str_at(r, "id")).collect();
            ids.len() + responses.iter().filter(|r| str_at(r, "id").is_none()).count()
        }
        Api::OpenaiChat => array(body.get("messages")).filter(|m| role(m) == "tool").count(),
        Api::OpenaiResponses => responses::items(body).filter(|i| responses::is_output(i)).count(),
    }
}

/// The texts of the failed tool results in the conversation's last message (the batch just
/// answered): Anthropic's `tool_result` blocks with `is_error`, Gemini's function responses with
/// an `error`.
pub fn failed_results(api: Api, body: &Value) -> Vec<String> {
    let text_of = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match api {
        Api::AnthropicMessages => array(body.get("messages"))
            .last()
            .into_iter()
            .flat_map(|m| array(m.get("content")))
            .filter(|b| kind(b) == "tool_result" && b.get("is_error").and_then(Value::as_bool) == Some(true))
            .map(|b| b.get("content").map(text_of).unwrap_or_default())
            .collect(),
        Api::Gemini => array(body.get("contents"))
            .last()
            .into_iter()
            .flat_map(|c| array(c.get("parts")))
            .filter_map(|p| p.get("functionResponse"))
            .filter_map(|r| r.get("response").and_then(|x| x.get("error")))
            .map(text_of)
            .collect(),
        // Neither OpenAI API marks a tool result as failed: a failure is only text.
        Api::OpenaiChat | Api::OpenaiResponses => Vec::new(),
    }
}

/// The names of the offered tools, in the order offered (for error messages).
pub fn tool_names(api: Api, body: &Value) -> Vec<String> {
    let tools: Box<dyn Iterator<Item = &Value>> = match api {
        Api::AnthropicMessages | Api::OpenaiResponses => Box::new(array(body.get("tools"))),
        Api::Gemini => Box::new(gemini::declarations(body)),
        // `{"type": "function", "function": {"name": ..}}`.
        Api::OpenaiChat => Box::new(array(body.get("tools")).map(|t| t.get("function").unwrap_or(t))),
    };
    tools.filter_map(|t| str_at(t, "name")).map(str::to_owned).collect()
}

/// Whether the client asked for a server-sent-event stream: Anthropic's and OpenAI's body
/// `stream: true`, Gemini's `:streamGenerateContent` endpoint.
pub fn wants_stream(api: Api, url_path: &str, body: &Value) -> bool {
    match api {
        Api::AnthropicMessages | Api::OpenaiChat | Api::OpenaiResponses => {
            body.get("stream").and_then(Value::as_bool).unwrap_or(false)
        }
        Api::Gemini => path_only(url_path).ends_with(":streamGenerateContent"),
    }
}

/// The model the request names: Anthropic's and OpenAI's body `model`, Gemini's `{model}` in
/// `/v1beta/models/{model}:generateContent`. Empty when there is none.
pub fn model(api: Api, url_path: &str, body: &Value) -> String {
    match api {
        Api::AnthropicMessages | Api::OpenaiChat | Api::OpenaiResponses => {
            str_at(body, "model").unwrap_or_default().to_owned()
        }
        Api::Gemini => gemini::model_in_path(url_path).unwrap_or_default().to_owned(),
    }
}

/// Whether `method url_path` is the endpoint that generates: Anthropic's `POST /v1/messages`
/// (with any query string, e.g. `?beta=true`), Gemini's `POST .../models/{m}:generateContent`
/// or `:streamGenerateContent`, OpenAI's `POST .../chat/completions` and `POST .../responses`.
/// A prefix before `/v1` is allowed, so a base URL with a path works too.
pub fn is_generation(api: Api, method: &str, url_path: &str) -> bool {
    if !method.eq_ignore_ascii_case("POST") {
        return false;
    }
    let path = path_only(url_path);
    match api {
        Api::AnthropicMessages => path.ends_with("/v1/messages"),
        Api::Gemini => {
            gemini::model_in_path(url_path).is_some()
                && (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"))
        }
        Api::OpenaiChat => path.ends_with("/chat/completions"),
        Api::OpenaiResponses => path.ends_with("/responses"),
    }
}

/// Encodes `reply` as the API's response to a generation request, streamed as server-sent
/// events when `stream` is set; `model` is echoed back as the real services do.
pub fn encode(api: Api, reply: &Reply, stream: bool, model: &str) -> Encoded {
    let (content_type, body) = match (api, stream) {
        (Api::AnthropicMessages, false) => (JSON, anthropic::message(reply, model).to_string()),
        (Api::AnthropicMessages, true) => (EVENT_STREAM, anthropic::events(reply, model)),
        (Api::Gemini, false) => (JSON, gemini::response(reply, model).to_string()),
        (Api::Gemini, true) => (EVENT_STREAM, gemini::events(reply, model)),
        (Api::OpenaiChat, false) => (JSON, chat::completion(reply, model).to_string()),
        (Api::OpenaiChat, true) => (EVENT_STREAM, chat::chunks(reply, model)),
        (Api::OpenaiResponses, false) => (JSON, responses::response(reply, model, "completed").to_string()),
        (Api::OpenaiResponses, true) => (EVENT_STREAM, responses::events(reply, model)),
    };
    Encoded { status: 200, content_type, body }
}

/// A reply to an endpoint that does not generate: Anthropic's `POST /v1/messages/count_tokens`
/// answers `{"input_tokens": n}`, Gemini's `:countTokens` answers `{"totalTokens": n}` (n is a
/// rough estimate: a token per four characters of [`segments`]); anything else is a 404 in the
/// API's error shape.
pub fn auxiliary(api: Api, method: &str, url_path: &str, body: &Value) -> Encoded {
    let path = path_only(url_path);
    let post = method.eq_ignore_ascii_case("POST");
    match api {
        Api::AnthropicMessages if post && path.ends_with("/v1/messages/count_tokens") => {
            ok(json!({ "input_tokens": estimate_tokens(api, body) }))
        }
        Api::Gemini if post && gemini::model_in_path(url_path).is_some() && path.ends_with(":countTokens") => {
            // countTokens takes either `contents` or a whole `generateContentRequest`.
            let request = body.get("generateContentRequest").unwrap_or(body);
            ok(json!({ "totalTokens": estimate_tokens(api, request) }))
        }
        // A reachability probe (Claude Code 2.1.197 sends `HEAD /` at every start).
        _ if method.eq_ignore_ascii_case("HEAD") => ok(json!({})),
        _ => error(api, 404, &format!("no endpoint '{} {}'", clip(method, 16), clip(url_path, 200))),
    }
}

/// An error response in the API's JSON error shape: Anthropic's
/// `{"type":"error","error":{"type":..,"message":..}}`, Gemini's
/// `{"error":{"code":..,"message":..,"status":..}}`, OpenAI's
/// `{"error":{"message":..,"type":..,"param":null,"code":null}}`.
pub fn error(api: Api, status: u16, message: &str) -> Encoded {
    let body = match api {
        Api::AnthropicMessages => {
            let kind = match status {
                400 => "invalid_request_error",
                404 => "not_found_error",
                413 => "request_too_large",
                _ => "api_error",
            };
            json!({ "type": "error", "error": { "type": kind, "message": message } })
        }
        Api::Gemini => {
            let kind = match status {
                400 | 413 => "INVALID_ARGUMENT",
                404 => "NOT_FOUND",
                _ => "INTERNAL",
            };
            json!({ "error": { "code": status, "message": message, "status": kind } })
        }
        Api::OpenaiChat | Api::OpenaiResponses => {
            let kind = match status {
                400 | 404 | 413 => "invalid_request_error",
                _ => "server_error",
            };
            json!({ "error": { "message": message, "type": kind, "param": null, "code": null } })
        }
    };
    Encoded { status, content_type: JSON, body: body.to_string() }
}

fn ok(body: Value) -> Encoded {
    Encoded { status: 200, content_type: JSON, body: body.to_string() }
}

/// A token per four characters of what the model reads, at least one.
fn estimate_tokens(api: Api, body: &Value) -> usize {
    let chars: usize = segments(api, body).iter().map(|s| s.text.chars().count()).sum();
    (chars / 4).max(1)
}

/// The path without its query string.
fn path_only(url_path: &str) -> &str {
    url_path.split_once('?').map_or(url_path, |(path, _)| path)
}

/// The elements of a JSON array, none for anything else.
fn array(v: Option<&Value>) -> std::slice::Iter<'_, Value> {
    v.and_then(Value::as_array).map_or([].iter(), |a| a.iter())
}

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn role(message: &Value) -> &str {
    str_at(message, "role").unwrap_or_default()
}

fn kind(block: &Value) -> &str {
    str_at(block, "type").unwrap_or_default()
}

/// At most `max` characters of `s`, for quoting client input in a message.
fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", s.get(..end).unwrap_or_default()),
        None => s.to_owned(),
    }
}

/// A stable made-up id: `prefix` and the FNV-1a hash of `seed`, so the same reply encodes the
/// same way twice (snapshots stay stable) and ids look like the real ones to a client.
fn fake_id(prefix: &str, seed: &str) -> String {
    let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{prefix}{hash:016x}")
}

/// The id of the `index`-th call of a reply: the script's, or a stable made-up one with `prefix`.
fn call_id(prefix: &str, call: &Call, index: usize) -> String {
    if call.id.is_empty() {
        fake_id(prefix, &format!("{index}:{}", call.name))
    } else {
        call.id.clone()
    }
}

/// The arguments of a call as the JSON object the APIs require.
fn args_object(call: &Call) -> Value {
    if call.args.is_null() {
        json!({})
    } else {
        call.args.clone()
    }
}

/// JSON on one SSE `data:` line. serde_json leaves U+2028 and U+2029 unescaped; JavaScript's `.`
/// does not match them, so @google/genai's line pattern (`/^data: (.*)\r\n\r\n/`) would stall
/// on a reply holding one. Escaping them keeps the JSON equal and the line matchable.
fn sse_json(v: &Value) -> String {
    v.to_string().replace('\u{2028}', "\\u2028").replace('\u{2029}', "\\u2029")
}

/// Anthropic's Messages API.
mod anthropic {
    use super::{args_object, array, call_id, fake_id, kind, role, sse_json, str_at, Place, Reply, Segment};
    use serde_json::{json, Value};

    pub(super) fn segments(body: &Value) -> Vec<Segment> {
        let mut out = Vec::new();
        push_texts(&mut out, Place::System, 0, body.get("system"));
        let mut seen_user = false;
        for (i, m) in array(body.get("messages")).enumerate() {
            let n = i + 1;
            match role(m) {
                "user" => {
                    let place = if seen_user { Place::User } else { Place::FirstUser };
                    seen_user = true;
                    match m.get("content") {
                        Some(Value::Array(blocks)) => {
                            for b in blocks {
                                match kind(b) {
                                    "tool_result" => push_texts(&mut out, Place::ToolResult, n, b.get("content")),
                                    _ => push_block(&mut out, place, n, b),
                                }
                            }
                        }
                        content => push_texts(&mut out, place, n, content),
                    }
                }
                "assistant" => match m.get("content") {
                    Some(Value::Array(blocks)) => {
                        for b in blocks {
                            match kind(b) {
                                "tool_use" => {
                                    let input = b.get("input").map(Value::to_string).unwrap_or_default();
                                    out.push(Segment { place: Place::Assistant, message: n, text: input });
                                }
                                "thinking" => push_str(&mut out, Place::Assistant, n, str_at(b, "thinking")),
                                _ => push_block(&mut out, Place::Assistant, n, b),
                            }
                        }
                    }
                    content => push_texts(&mut out, Place::Assistant, n, content),
                },
                "system" => push_texts(&mut out, Place::SeparateSystem, n, m.get("content")),
                _ => push_texts(&mut out, Place::Other, n, m.get("content")),
            }
        }
        for tool in array(body.get("tools")) {
            push_str(&mut out, Place::Other, 0, str_at(tool, "description"));
        }
        out
    }

    /// A string, or the text blocks of an array of content blocks.
    fn push_texts(out: &mut Vec<Segment>, place: Place, message: usize, content: Option<&Value>) {
        match content {
            Some(Value::String(s)) => push_str(out, place, message, Some(s)),
            Some(Value::Array(blocks)) => blocks.iter().for_each(|b| push_block(out, place, message, b)),
            _ => {}
        }
    }

    fn push_block(out: &mut Vec<Segment>, place: Place, message: usize, block: &Value) {
        if kind(block) == "text" {
            push_str(out, place, message, str_at(block, "text"));
        }
    }

    fn push_str(out: &mut Vec<Segment>, place: Place, message: usize, text: Option<&str>) {
        if let Some(text) = text {
            out.push(Segment { place, message, text: text.to_owned() });
        }
    }

    /// The content blocks of a reply, each with its tool-use id where it is a call.
    fn blocks(reply: &Reply) -> Vec<Value> {
        match reply {
            Reply::Text(text) => vec![json!({ "type": "text", "text": text })],
            Reply::Tools(calls) => calls
                .iter()
                .enumerate()
                .map(|(i, call)| {
                    json!({ "type": "tool_use", "id": call_id("toolu_", call, i), "name": call.name, "input": args_object(call) })
                })
                .collect(),
        }
    }

    fn stop_reason(reply: &Reply) -> &'static str {
        match reply {
            Reply::Tools(calls) if !calls.is_empty() => "tool_use",
            _ => "end_turn",
        }
    }

    fn message_id(reply: &Reply, model: &str) -> String {
        fake_id("msg_", &format!("{model}:{reply:?}"))
    }

    /// The whole message of a non-streamed reply.
    pub(super) fn message(reply: &Reply, model: &str) -> Value {
        json!({
            "id": message_id(reply, model),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks(reply),
            "stop_reason": stop_reason(reply),
            "stop_sequence": null,
            "usage": { "input_tokens": 1, "output_tokens": 1 },
        })
    }

    /// The event stream of a streamed reply: `message_start`; per content block
    /// `content_block_start` (the block with empty input or text), one `content_block_delta`
    /// (the whole input JSON as `partial_json`, or the whole text) and `content_block_stop`;
    /// then `message_delta` with the stop reason, and `message_stop`.
    pub(super) fn events(reply: &Reply, model: &str) -> String {
        let mut events = vec![(
            "message_start",
            json!({
                "type": "message_start",
                "message": {
                    "id": message_id(reply, model),
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": { "input_tokens": 1, "output_tokens": 1 },
                },
            }),
        )];
        for (index, block) in blocks(reply).into_iter().enumerate() {
            let (start, delta) = match block.get("input") {
                Some(input) => {
                    let mut start = block.clone();
                    if let Some(map) = start.as_object_mut() {
                        map.insert("input".to_owned(), json!({}));
                    }
                    (start, json!({ "type": "input_json_delta", "partial_json": input.to_string() }))
                }
                None => (
                    json!({ "type": "text", "text": "" }),
                    json!({ "type": "text_delta", "text": str_at(&block, "text").unwrap_or_default() }),
                ),
            };
            events.push((
                "content_block_start",
                json!({ "type": "content_block_start", "index": index, "content_block": start }),
            ));
            events.push((
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": index, "delta": delta }),
            ));
            events.push(("content_block_stop", json!({ "type": "content_block_stop", "index": index })));
        }
        events.push((
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": { "stop_reason": stop_reason(reply), "stop_sequence": null },
                "usage": { "output_tokens": 1 },
            }),
        ));
        events.push(("message_stop", json!({ "type": "message_stop" })));
        events.iter().map(|(name, data)| format!("event: {name}\ndata: {}\n\n", sse_json(data))).collect()
    }
}

/// Google's Gemini API.
mod gemini {
    use super::{args_object, array, path_only, role, sse_json, str_at, Place, Reply, Segment};
    use serde_json::{json, Value};

    /// `{model}` in `.../models/{model}:method`, if the path has that shape.
    pub(super) fn model_in_path(url_path: &str) -> Option<&str> {
        let (_, rest) = path_only(url_path).rsplit_once("/models/")?;
        let (model, _) = rest.split_once(':')?;
        Some(model).filter(|m| !m.is_empty() && !m.contains('/'))
    }

    /// Every function declaration of every tool.
    pub(super) fn declarations(body: &Value) -> impl Iterator<Item = &Value> {
        array(body.get("tools")).flat_map(|t| array(t.get("functionDeclarations")))
    }

    pub(super) fn segments(body: &Value) -> Vec<Segment> {
        let mut out = Vec::new();
        match body.get("systemInstruction") {
            Some(Value::String(s)) => out.push(Segment { place: Place::System, message: 0, text: s.clone() }),
            Some(content) => push_parts(&mut out, Place::System, 0, content),
            None => {}
        }
        let mut seen_user = false;
        for (i, content) in array(body.get("contents")).enumerate() {
            let place = match role(content) {
                // A content without a role is the user's, as the API reads it.
                "user" | "" => {
                    let place = if seen_user { Place::User } else { Place::FirstUser };
                    seen_user = true;
                    place
                }
                "model" => Place::Assistant,
                "system" => Place::SeparateSystem,
                _ => Place::Other,
            };
            push_parts(&mut out, place, i + 1, content);
        }
        for declaration in declarations(body) {
            if let Some(text) = str_at(declaration, "description") {
                out.push(Segment { place: Place::Other, message: 0, text: text.to_owned() });
            }
        }
        out
    }

    fn push_parts(out: &mut Vec<Segment>, place: Place, message: usize, content: &Value) {
        for part in array(content.get("parts")) {
            if let Some(text) = str_at(part, "text") {
                out.push(Segment { place, message, text: text.to_owned() });
            } else if let Some(call) = part.get("functionCall") {
                let args = call.get("args").map(Value::to_string).unwrap_or_default();
                out.push(Segment { place, message, text: args });
            } else if let Some(response) = part.get("functionResponse") {
                let mut texts = Vec::new();
                strings(response.get("response"), &mut texts);
                out.extend(texts.into_iter().map(|text| Segment { place: Place::ToolResult, message, text }));
            }
        }
    }

    /// Every string value inside `v`, depth first. serde_json bounds the depth of what it parses
    /// (128), so the recursion is bounded for any request body.
    fn strings(v: Option<&Value>, out: &mut Vec<String>) {
        match v {
            Some(Value::String(s)) => out.push(s.clone()),
            Some(Value::Array(items)) => items.iter().for_each(|i| strings(Some(i), out)),
            Some(Value::Object(map)) => map.values().for_each(|i| strings(Some(i), out)),
            _ => {}
        }
    }

    pub(super) fn response(reply: &Reply, model: &str) -> Value {
        let parts: Vec<Value> = match reply {
            Reply::Text(text) => vec![json!({ "text": text })],
            Reply::Tools(calls) => calls
                .iter()
                .map(|call| json!({ "functionCall": { "name": call.name, "args": args_object(call) } }))
                .collect(),
        };
        json!({
            "candidates": [{
                "content": { "role": "model", "parts": parts },
                "finishReason": "STOP",
                "index": 0,
            }],
            "usageMetadata": { "promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2 },
            "modelVersion": model,
        })
    }

    /// The reply as one server-sent event. The line ends with CRLF CRLF, as the real service
    /// sends it: @google/genai accepts `\n\n` or `\r\n\r\n`, and the older @google/generative-ai
    /// only `\r\n`.
    pub(super) fn events(reply: &Reply, model: &str) -> String {
        format!("data: {}\r\n\r\n", sse_json(&response(reply, model)))
    }
}

/// Where an OpenAI message sits, by its role and whether the conversation has had an assistant
/// or tool turn yet. Before the first one, system and developer messages are the system prompt
/// (message 0) and every user message is the opening turn (message 1, however many the CLI split
/// it into: Codex sends its AGENTS.md text and its environment as separate user messages before
/// the prompt). After it, each message has a number of its own, from 2.
struct Numbering {
    opened: bool,
    next: usize,
}

impl Numbering {
    fn new() -> Numbering {
        Numbering { opened: false, next: 2 }
    }

    /// The place and number of the next message of `role`.
    fn place(&mut self, role: &str) -> (Place, usize) {
        match (role, self.opened) {
            ("system" | "developer", false) => (Place::System, 0),
            ("user", false) => (Place::FirstUser, 1),
            _ => {
                self.opened = true;
                let n = self.next;
                self.next += 1;
                let place = match role {
                    "system" | "developer" => Place::SeparateSystem,
                    "user" => Place::User,
                    "assistant" => Place::Assistant,
                    "tool" => Place::ToolResult,
                    _ => Place::Other,
                };
                (place, n)
            }
        }
    }
}

/// A string, or the `text` of each part of an array of content parts (`text`, `input_text`,
/// `output_text`; parts without text, such as images, are skipped).
fn push_content(out: &mut Vec<Segment>, place: Place, message: usize, content: Option<&Value>) {
    match content {
        Some(Value::String(s)) => out.push(Segment { place, message, text: s.clone() }),
        Some(Value::Array(parts)) => {
            for part in parts {
                if let Some(text) = str_at(part, "text") {
                    out.push(Segment { place, message, text: text.to_owned() });
                }
            }
        }
        _ => {}
    }
}

/// The arguments of a call as the JSON text OpenAI's wire forms carry.
fn args_text(call: &Call) -> String {
    args_object(call).to_string()
}

/// A stable creation time for the replies (2023-11-14): a client reads it, none checks it.
const CREATED: u64 = 1_700_000_000;

/// OpenAI's chat completions.
mod chat {
    use super::{
        args_text, array, call_id, fake_id, role, sse_json, str_at, Numbering, Place, Reply, Segment, CREATED,
    };
    use serde_json::{json, Value};

    pub(super) fn segments(body: &Value) -> Vec<Segment> {
        let mut out = Vec::new();
        let mut numbering = Numbering::new();
        for m in array(body.get("messages")) {
            let (place, n) = numbering.place(role(m));
            super::push_content(&mut out, place, n, m.get("content"));
            // Older clients send a reasoning text beside the content.
            for key in ["reasoning_content", "reasoning"] {
                if let Some(text) = str_at(m, key) {
                    out.push(Segment { place, message: n, text: text.to_owned() });
                }
            }
            for call in array(m.get("tool_calls")) {
                if let Some(args) = call.get("function").and_then(|f| str_at(f, "arguments")) {
                    out.push(Segment { place: Place::Assistant, message: n, text: args.to_owned() });
                }
            }
        }
        for tool in array(body.get("tools")) {
            if let Some(text) = tool.get("function").and_then(|f| str_at(f, "description")) {
                out.push(Segment { place: Place::Other, message: 0, text: text.to_owned() });
            }
        }
        out
    }

    fn finish_reason(reply: &Reply) -> &'static str {
        match reply {
            Reply::Tools(calls) if !calls.is_empty() => "tool_calls",
            _ => "stop",
        }
    }

    fn completion_id(reply: &Reply, model: &str) -> String {
        fake_id("chatcmpl-", &format!("{model}:{reply:?}"))
    }

    fn usage() -> Value {
        json!({ "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 })
    }

    /// The whole completion of a non-streamed reply.
    pub(super) fn completion(reply: &Reply, model: &str) -> Value {
        let message = match reply {
            Reply::Text(text) => json!({ "role": "assistant", "content": text }),
            Reply::Tools(calls) => {
                let calls: Vec<Value> = calls
                    .iter()
                    .enumerate()
                    .map(|(i, call)| {
                        json!({
                            "id": call_id("call_", call, i),
                            "type": "function",
                            "function": { "name": call.name, "arguments": args_text(call) },
                        })
                    })
                    .collect();
                json!({ "role": "assistant", "content": null, "tool_calls": calls })
            }
        };
        json!({
            "id": completion_id(reply, model),
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [{ "index": 0, "message": message, "finish_reason": finish_reason(reply) }],
            "usage": usage(),
        })
    }

    /// The chunks of a streamed reply, each a `data:` line: the role; per tool call one delta
    /// with its id and name (empty arguments) and one with the whole arguments, or the whole
    /// text in one delta; then an empty delta with the finish reason and the usage, and
    /// `data: [DONE]`.
    pub(super) fn chunks(reply: &Reply, model: &str) -> String {
        let id = completion_id(reply, model);
        let chunk = |delta: Value, finish: Value| {
            json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }],
            })
        };
        let mut chunks = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
        match reply {
            Reply::Text(text) => chunks.push(chunk(json!({ "content": text }), Value::Null)),
            Reply::Tools(calls) => {
                for (i, call) in calls.iter().enumerate() {
                    let start = json!({ "tool_calls": [{
                        "index": i,
                        "id": call_id("call_", call, i),
                        "type": "function",
                        "function": { "name": call.name, "arguments": "" },
                    }] });
                    chunks.push(chunk(start, Value::Null));
                    let args = json!({ "tool_calls": [{ "index": i, "function": { "arguments": args_text(call) } }] });
                    chunks.push(chunk(args, Value::Null));
                }
            }
        }
        let mut last = chunk(json!({}), json!(finish_reason(reply)));
        if let Some(map) = last.as_object_mut() {
            map.insert("usage".to_owned(), usage());
        }
        chunks.push(last);
        let mut out: String = chunks.iter().map(|c| format!("data: {}\n\n", sse_json(c))).collect();
        out.push_str("data: [DONE]\n\n");
        out
    }
}

/// OpenAI's Responses API.
mod responses {
    use super::{args_text, array, fake_id, role, sse_json, str_at, Call, Numbering, Place, Reply, Segment, CREATED};
    use serde_json::{json, Value};

    /// The items of `input` (a bare string is one user message).
    pub(super) fn items(body: &Value) -> std::slice::Iter<'_, Value> {
        array(body.get("input"))
    }

    fn item_type(item: &Value) -> &str {
        // A message may leave out its type (`{"role": "user", "content": ..}`).
        str_at(item, "type").unwrap_or(if item.get("role").is_some() { "message" } else { "" })
    }

    /// Whether an item is a tool's output.
    pub(super) fn is_output(item: &Value) -> bool {
        matches!(item_type(item), "function_call_output" | "custom_tool_call_output" | "local_shell_call_output")
    }

    pub(super) fn segments(body: &Value) -> Vec<Segment> {
        let mut out = Vec::new();
        if let Some(text) = str_at(body, "instructions") {
            out.push(Segment { place: Place::System, message: 0, text: text.to_owned() });
        }
        if let Some(text) = str_at(body, "input") {
            out.push(Segment { place: Place::FirstUser, message: 1, text: text.to_owned() });
        }
        let mut numbering = Numbering::new();
        for item in items(body) {
            match item_type(item) {
                "message" => {
                    let (place, n) = numbering.place(role(item));
                    super::push_content(&mut out, place, n, item.get("content"));
                }
                "function_call" | "custom_tool_call" => {
                    let (_, n) = numbering.place("assistant");
                    let args = str_at(item, "arguments").or_else(|| str_at(item, "input"));
                    if let Some(args) = args {
                        out.push(Segment { place: Place::Assistant, message: n, text: args.to_owned() });
                    }
                }
                _ if is_output(item) => {
                    let (_, n) = numbering.place("tool");
                    super::push_content(&mut out, Place::ToolResult, n, item.get("output"));
                }
                "reasoning" => {
                    let (_, n) = numbering.place("assistant");
                    for part in array(item.get("summary")) {
                        if let Some(text) = str_at(part, "text") {
                            out.push(Segment { place: Place::Assistant, message: n, text: text.to_owned() });
                        }
                    }
                }
                _ => {}
            }
        }
        for tool in array(body.get("tools")) {
            if let Some(text) = str_at(tool, "description") {
                out.push(Segment { place: Place::Other, message: 0, text: text.to_owned() });
            }
        }
        out
    }

    fn response_id(reply: &Reply, model: &str) -> String {
        fake_id("resp_", &format!("{model}:{reply:?}"))
    }

    /// The output items of a reply: a `function_call` per call, or one assistant `message`.
    fn output(reply: &Reply, model: &str) -> Vec<Value> {
        match reply {
            Reply::Text(text) => vec![json!({
                "type": "message",
                "id": fake_id("msg_", &format!("{model}:{text}")),
                "status": "completed",
                "role": "assistant",
                "content": [{ "type": "output_text", "text": text, "annotations": [] }],
            })],
            Reply::Tools(calls) => calls.iter().enumerate().map(|(i, call)| function_call(call, i)).collect(),
        }
    }

    fn function_call(call: &Call, index: usize) -> Value {
        let seed = format!("{index}:{}", call.name);
        let id = super::call_id("call_", call, index);
        json!({
            "type": "function_call",
            "id": fake_id("fc_", &seed),
            "status": "completed",
            "call_id": id,
            "name": call.name,
            "arguments": args_text(call),
        })
    }

    /// The whole response object, with `status` (`in_progress` has no output yet).
    pub(super) fn response(reply: &Reply, model: &str, status: &str) -> Value {
        let (output, usage) = if status == "completed" {
            let usage = json!({
                "input_tokens": 1,
                "input_tokens_details": { "cached_tokens": 0 },
                "output_tokens": 1,
                "output_tokens_details": { "reasoning_tokens": 0 },
                "total_tokens": 2,
            });
            (output(reply, model), usage)
        } else {
            (Vec::new(), Value::Null)
        };
        json!({
            "id": response_id(reply, model),
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "model": model,
            "output": output,
            "parallel_tool_calls": true,
            "tool_choice": "auto",
            "tools": [],
            "error": null,
            "incomplete_details": null,
            "usage": usage,
        })
    }

    /// The event stream of a streamed reply, each `event: TYPE` with its `data:` (the type again
    /// and a `sequence_number`): `response.created`, `response.in_progress`; per output item
    /// `response.output_item.added` (a call with empty arguments, a message with no content), its
    /// deltas (`response.function_call_arguments.delta`/`.done`, or `response.content_part.added`,
    /// `response.output_text.delta`/`.done`, `response.content_part.done`) and
    /// `response.output_item.done` (the whole item); then `response.completed` with the whole
    /// response.
    pub(super) fn events(reply: &Reply, model: &str) -> String {
        let mut events: Vec<Value> = vec![
            json!({ "type": "response.created", "response": response(reply, model, "in_progress") }),
            json!({ "type": "response.in_progress", "response": response(reply, model, "in_progress") }),
        ];
        for (index, item) in output(reply, model).into_iter().enumerate() {
            let item_id = str_at(&item, "id").unwrap_or_default().to_owned();
            let mut added = item.clone();
            if let Some(map) = added.as_object_mut() {
                map.insert("status".to_owned(), json!("in_progress"));
                if map.contains_key("arguments") {
                    map.insert("arguments".to_owned(), json!(""));
                } else {
                    map.insert("content".to_owned(), json!([]));
                }
            }
            events.push(json!({ "type": "response.output_item.added", "output_index": index, "item": added }));
            if let Some(args) = str_at(&item, "arguments") {
                let at = json!({ "item_id": item_id, "output_index": index });
                events.push(with(&at, json!({ "type": "response.function_call_arguments.delta", "delta": args })));
                events.push(with(&at, json!({ "type": "response.function_call_arguments.done", "arguments": args })));
            } else {
                let text = item.pointer("/content/0/text").and_then(Value::as_str).unwrap_or_default().to_owned();
                let at = json!({ "item_id": item_id, "output_index": index, "content_index": 0 });
                let empty = json!({ "type": "output_text", "text": "", "annotations": [] });
                let part = json!({ "type": "output_text", "text": text, "annotations": [] });
                events.push(with(&at, json!({ "type": "response.content_part.added", "part": empty })));
                events.push(with(&at, json!({ "type": "response.output_text.delta", "delta": text })));
                events.push(with(&at, json!({ "type": "response.output_text.done", "text": text })));
                events.push(with(&at, json!({ "type": "response.content_part.done", "part": part })));
            }
            events.push(json!({ "type": "response.output_item.done", "output_index": index, "item": item }));
        }
        events.push(json!({ "type": "response.completed", "response": response(reply, model, "completed") }));
        events
            .into_iter()
            .enumerate()
            .map(|(n, mut event)| {
                if let Some(map) = event.as_object_mut() {
                    map.insert("sequence_number".to_owned(), json!(n));
                }
                let name = str_at(&event, "type").unwrap_or_default().to_owned();
                format!("event: {name}\ndata: {}\n\n", sse_json(&event))
            })
            .collect()
    }

    /// `event` with the fields of `at` added.
    fn with(at: &Value, mut event: Value) -> Value {
        if let (Some(map), Some(at)) = (event.as_object_mut(), at.as_object()) {
            for (k, v) in at {
                map.insert(k.clone(), v.clone());
            }
        }
        event
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use std::collections::BTreeMap;

    fn anthropic_body() -> Value {
        json!({
            "model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "sys two"}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                    {"type": "text", "text": "go"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "reading"},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/x"}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "...file..."},
                    {"type": "text", "text": "<system-reminder>nested</system-reminder>"},
                ]},
                {"role": "system", "content": "separate"},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t2", "content": [
                        {"type": "text", "text": "block result"},
                        {"type": "image", "source": {}},
                    ]},
                ]},
            ],
            "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {}}, {"name": "Bash", "input_schema": {}}],
            "stream": true,
        })
    }

    fn gemini_body() -> Value {
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "context"}, {"text": "go"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "/x"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "...file..."}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "glob", "response": {"content": ["a", {"b": "c"}], "n": 2}}},
                    {"text": "later"},
                ]},
            ],
            "systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]},
            "tools": [{"functionDeclarations": [{"name": "read_file", "description": "Reads"}, {"name": "glob"}]}],
        })
    }

    fn triples(segments: Vec<Segment>) -> Vec<(Place, usize, String)> {
        segments.into_iter().map(|s| (s.place, s.message, s.text)).collect()
    }

    fn t(place: Place, message: usize, text: &str) -> (Place, usize, String) {
        (place, message, text.to_owned())
    }

    #[test]
    fn anthropic_segments_follow_the_conversation() {
        use Place::*;
        assert_eq!(
            triples(segments(Api::AnthropicMessages, &anthropic_body())),
            vec![
                t(System, 0, "You are Claude Code."),
                t(System, 0, "sys two"),
                t(FirstUser, 1, "<system-reminder>ctx</system-reminder>"),
                t(FirstUser, 1, "go"),
                t(Assistant, 2, "reading"),
                t(Assistant, 2, r#"{"file_path":"/x"}"#),
                t(ToolResult, 3, "...file..."),
                t(User, 3, "<system-reminder>nested</system-reminder>"),
                t(SeparateSystem, 4, "separate"),
                t(ToolResult, 5, "block result"),
                t(Other, 0, "Reads a file"),
            ]
        );
    }

    #[test]
    fn gemini_segments_follow_the_conversation() {
        use Place::*;
        assert_eq!(
            triples(segments(Api::Gemini, &gemini_body())),
            vec![
                t(System, 0, "You are Gemini CLI."),
                t(FirstUser, 1, "context"),
                t(FirstUser, 1, "go"),
                t(Assistant, 2, r#"{"file_path":"/x"}"#),
                t(ToolResult, 3, "...file..."),
                t(ToolResult, 4, "a"),
                t(ToolResult, 4, "c"),
                t(User, 4, "later"),
                t(Other, 0, "Reads"),
            ]
        );
    }

    #[rstest]
    #[case::anthropic_string_system(Api::AnthropicMessages, json!({"system": "s", "messages": [{"role": "user", "content": "hi"}]}), vec![t(Place::System, 0, "s"), t(Place::FirstUser, 1, "hi")])]
    #[case::gemini_string_system(Api::Gemini, json!({"systemInstruction": "s", "contents": [{"parts": [{"text": "hi"}]}]}), vec![t(Place::System, 0, "s"), t(Place::FirstUser, 1, "hi")])]
    #[case::anthropic_unknown_shapes_are_skipped(Api::AnthropicMessages, json!({"system": 3, "messages": [{"role": "user", "content": [7, {"type": "text"}]}, "x", {"role": "wizard", "content": "w"}]}), vec![t(Place::Other, 3, "w")])]
    #[case::gemini_unknown_shapes_are_skipped(Api::Gemini, json!({"contents": {"role": "user"}, "systemInstruction": {"parts": 1}}), vec![])]
    #[case::not_an_object(Api::Gemini, json!([1, 2]), vec![])]
    #[case::null(Api::AnthropicMessages, Value::Null, vec![])]
    fn segments_of_odd_bodies(#[case] api: Api, #[case] body: Value, #[case] want: Vec<(Place, usize, String)>) {
        assert_eq!(triples(segments(api, &body)), want);
    }

    #[rstest]
    #[case::anthropic(Api::AnthropicMessages, anthropic_body(), true, 2, vec!["Read", "Bash"])]
    #[case::gemini(Api::Gemini, gemini_body(), true, 2, vec!["read_file", "glob"])]
    #[case::anthropic_empty_tools(Api::AnthropicMessages, json!({"tools": []}), false, 0, vec![])]
    #[case::gemini_empty_declarations(Api::Gemini, json!({"tools": [{"functionDeclarations": []}, {"googleSearch": {}}]}), false, 0, vec![])]
    fn tools_offered_and_results_held(
        #[case] api: Api,
        #[case] body: Value,
        #[case] offers: bool,
        #[case] results: usize,
        #[case] names: Vec<&str>,
    ) {
        assert_eq!(offers_tools(api, &body), offers);
        assert_eq!(tool_results(api, &body), results);
        assert_eq!(tool_names(api, &body), names);
    }

    #[rstest]
    #[case::anthropic(Api::AnthropicMessages, "POST", "/v1/messages", true)]
    #[case::anthropic_beta(Api::AnthropicMessages, "POST", "/v1/messages?beta=true", true)]
    #[case::anthropic_prefixed(Api::AnthropicMessages, "POST", "/proxy/v1/messages", true)]
    #[case::anthropic_get(Api::AnthropicMessages, "GET", "/v1/messages", false)]
    #[case::anthropic_count(Api::AnthropicMessages, "POST", "/v1/messages/count_tokens?beta=true", false)]
    #[case::gemini(Api::Gemini, "POST", "/v1beta/models/gemini-2.5-pro:generateContent", true)]
    #[case::gemini_stream(Api::Gemini, "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", true)]
    #[case::gemini_count(Api::Gemini, "POST", "/v1beta/models/gemini-2.5-pro:countTokens", false)]
    #[case::gemini_no_model(Api::Gemini, "POST", "/v1beta/models/:generateContent", false)]
    #[case::gemini_list(Api::Gemini, "GET", "/v1beta/models", false)]
    fn generation_endpoints(#[case] api: Api, #[case] method: &str, #[case] path: &str, #[case] want: bool) {
        assert_eq!(is_generation(api, method, path), want);
    }

    #[rstest]
    #[case::anthropic_stream(Api::AnthropicMessages, "/v1/messages", json!({"model": "m1", "stream": true}), true, "m1")]
    #[case::anthropic_no_stream(Api::AnthropicMessages, "/v1/messages", json!({"model": "m1"}), false, "m1")]
    #[case::anthropic_no_model(Api::AnthropicMessages, "/v1/messages", json!({"stream": "yes"}), false, "")]
    #[case::gemini_stream(Api::Gemini, "/v1beta/models/g1:streamGenerateContent?alt=sse", json!({}), true, "g1")]
    #[case::gemini_no_stream(Api::Gemini, "/v1beta/models/g1:generateContent", json!({"stream": true}), false, "g1")]
    fn stream_and_model(
        #[case] api: Api,
        #[case] path: &str,
        #[case] body: Value,
        #[case] stream: bool,
        #[case] name: &str,
    ) {
        assert_eq!(wants_stream(api, path, &body), stream);
        assert_eq!(model(api, path, &body), name);
    }

    fn read_call() -> Reply {
        Reply::Tools(vec![
            Call { id: "toolu_1".into(), name: "Read".into(), args: json!({"file_path": "/x/AGENTS.md", "n": [1, 2]}) },
            Call { id: String::new(), name: "Glob".into(), args: Value::Null },
        ])
    }

    /// Parses an Anthropic event stream into (event name, data) pairs, checking its framing.
    fn parse_anthropic_sse(body: &str) -> Vec<(String, Value)> {
        assert!(body.ends_with("\n\n"));
        body.trim_end()
            .split("\n\n")
            .map(|event| {
                let (name, data) = event.split_once('\n').unwrap();
                let name = name.strip_prefix("event: ").unwrap();
                let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(data["type"], name);
                (name.to_owned(), data)
            })
            .collect()
    }

    #[test]
    fn anthropic_stream_of_tool_calls_round_trips() {
        let encoded = encode(Api::AnthropicMessages, &read_call(), true, "m1");
        assert_eq!((encoded.status, encoded.content_type), (200, EVENT_STREAM));
        let events = parse_anthropic_sse(&encoded.body);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let start = &events[0].1["message"];
        assert_eq!((start["content"].clone(), start["model"].clone()), (json!([]), json!("m1")));
        assert!(start["id"].as_str().unwrap().starts_with("msg_"));
        let first = &events[1].1;
        assert_eq!(first["content_block"], json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}));
        assert_eq!(first["index"], 0);
        assert_eq!(events[4].1["index"], 1);
        assert!(events[4].1["content_block"]["id"].as_str().unwrap().starts_with("toolu_"));
        // The partial_json of each block, concatenated, parses to the call's arguments.
        for (index, want) in [(0, json!({"file_path": "/x/AGENTS.md", "n": [1, 2]})), (1, json!({}))] {
            let json: String = events
                .iter()
                .filter(|(n, d)| n == "content_block_delta" && d["index"] == index)
                .map(|(_, d)| {
                    assert_eq!(d["delta"]["type"], "input_json_delta");
                    d["delta"]["partial_json"].as_str().unwrap().to_owned()
                })
                .collect();
            assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), want);
        }
        assert_eq!(events[7].1["delta"], json!({"stop_reason": "tool_use", "stop_sequence": null}));
        assert!(events[7].1["usage"]["output_tokens"].is_u64());
    }

    #[test]
    fn anthropic_stream_of_text_round_trips() {
        let encoded = encode(Api::AnthropicMessages, &Reply::Text("done \u{2028} ok".into()), true, "m1");
        assert!(!encoded.body.contains('\u{2028}'));
        let events = parse_anthropic_sse(&encoded.body);
        assert_eq!(events.len(), 6);
        assert_eq!(events[1].1["content_block"], json!({"type": "text", "text": ""}));
        assert_eq!(events[2].1["delta"], json!({"type": "text_delta", "text": "done \u{2028} ok"}));
        assert_eq!(events[4].1["delta"]["stop_reason"], "end_turn");
    }

    #[test]
    fn anthropic_message_without_stream() {
        let encoded = encode(Api::AnthropicMessages, &read_call(), false, "m1");
        assert_eq!(encoded.content_type, JSON);
        let mut v: Value = serde_json::from_str(&encoded.body).unwrap();
        assert!(v["id"].as_str().unwrap().starts_with("msg_"));
        assert!(v["content"][1]["id"].as_str().unwrap().starts_with("toolu_"));
        v["id"] = json!("ID");
        v["content"][1]["id"] = json!("ID2");
        assert_eq!(
            v,
            json!({
                "id": "ID", "type": "message", "role": "assistant", "model": "m1",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/x/AGENTS.md", "n": [1, 2]}},
                    {"type": "tool_use", "id": "ID2", "name": "Glob", "input": {}},
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            })
        );
        let text: Value =
            serde_json::from_str(&encode(Api::AnthropicMessages, &Reply::Text("hi".into()), false, "m").body).unwrap();
        assert_eq!(
            (text["content"].clone(), text["stop_reason"].clone()),
            (json!([{"type": "text", "text": "hi"}]), json!("end_turn"))
        );
    }

    #[test]
    fn the_same_reply_encodes_the_same_way_twice() {
        assert_eq!(
            encode(Api::AnthropicMessages, &read_call(), true, "m"),
            encode(Api::AnthropicMessages, &read_call(), true, "m")
        );
    }

    #[rstest]
    #[case::tools(read_call(), json!([
        {"functionCall": {"name": "Read", "args": {"file_path": "/x/AGENTS.md", "n": [1, 2]}}},
        {"functionCall": {"name": "Glob", "args": {}}},
    ]))]
    #[case::text(Reply::Text("hi".into()), json!([{"text": "hi"}]))]
    fn gemini_reply_round_trips(#[case] reply: Reply, #[case] parts: Value) {
        let want = json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
            "modelVersion": "g1",
        });
        let plain = encode(Api::Gemini, &reply, false, "g1");
        assert_eq!((plain.status, plain.content_type), (200, JSON));
        assert_eq!(serde_json::from_str::<Value>(&plain.body).unwrap(), want);
        let stream = encode(Api::Gemini, &reply, true, "g1");
        assert_eq!(stream.content_type, EVENT_STREAM);
        let data = stream.body.strip_prefix("data: ").unwrap().strip_suffix("\r\n\r\n").unwrap();
        assert!(!data.contains('\n'));
        assert_eq!(serde_json::from_str::<Value>(data).unwrap(), want);
    }

    #[rstest]
    #[case::anthropic_count(Api::AnthropicMessages, "POST", "/v1/messages/count_tokens?beta=true", json!({"messages": [{"role": "user", "content": "twelve chars"}]}), 200, json!({"input_tokens": 3}))]
    #[case::anthropic_count_empty(Api::AnthropicMessages, "POST", "/v1/messages/count_tokens", json!({}), 200, json!({"input_tokens": 1}))]
    #[case::gemini_count(Api::Gemini, "POST", "/v1beta/models/g:countTokens", json!({"contents": [{"parts": [{"text": "eight ch"}]}]}), 200, json!({"totalTokens": 2}))]
    #[case::gemini_count_request(Api::Gemini, "POST", "/v1beta/models/g:countTokens", json!({"generateContentRequest": {"contents": [{"parts": [{"text": "eight ch"}]}]}}), 200, json!({"totalTokens": 2}))]
    #[case::anthropic_unknown(Api::AnthropicMessages, "GET", "/v1/models", Value::Null, 404, json!({"type": "error", "error": {"type": "not_found_error", "message": "no endpoint 'GET /v1/models'"}}))]
    #[case::gemini_unknown(Api::Gemini, "GET", "/v1beta/models", Value::Null, 404, json!({"error": {"code": 404, "message": "no endpoint 'GET /v1beta/models'", "status": "NOT_FOUND"}}))]
    fn auxiliary_endpoints(
        #[case] api: Api,
        #[case] method: &str,
        #[case] path: &str,
        #[case] body: Value,
        #[case] status: u16,
        #[case] want: Value,
    ) {
        let got = auxiliary(api, method, path, &body);
        assert_eq!((got.status, got.content_type), (status, JSON));
        assert_eq!(serde_json::from_str::<Value>(&got.body).unwrap(), want);
    }

    /// opencode 1.18.33's second request of m-nest-002, trimmed: two system messages (the root
    /// file in the second), the prompt, a read and its result with the nested file appended.
    fn chat_body() -> Value {
        json!({
            "model": "fake-model",
            "messages": [
                {"role": "system", "content": "You are opencode, an interactive CLI tool."},
                {"role": "system", "content": "Instructions from: /p/project/AGENTS.md\n# Root\n"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "toolu_conformance_0001", "type": "function",
                     "function": {"name": "read", "arguments": "{\"filePath\":\"/p/project/src/a.ts\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "toolu_conformance_0001",
                 "content": "<path>/p/project/src/a.ts</path>\n<content>\n1: export {};\n</content>\n\n<system-reminder>\nInstructions from: /p/project/src/AGENTS.md\n# Src\n\n</system-reminder>"},
                {"role": "tool", "tool_call_id": "t2", "content": [{"type": "text", "text": "export {};\n"}]},
                {"role": "system", "content": "late"},
                {"role": "user", "content": [{"type": "text", "text": "more"}, {"type": "image_url", "image_url": {}}]},
            ],
            "tools": [
                {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {}}},
                {"type": "function", "function": {"name": "bash", "parameters": {}}},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    }

    /// Codex 0.171.0's second request of m-root-201, trimmed: developer messages, the AGENTS.md
    /// text and the environment as user messages before the prompt, a shell call and its output.
    fn responses_body() -> Value {
        json!({
            "model": "gpt-5-codex",
            "instructions": "You are Codex.",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "# AGENTS.md instructions for /p/project\n\n<INSTRUCTIONS>\n# Project\n</INSTRUCTIONS>"},
                    {"type": "input_text", "text": "<environment_context>\n  <cwd>/p/project</cwd>\n</environment_context>"},
                ]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"cat /p/project/src/api/x.ts\"}", "call_id": "toolu_conformance_0001"},
                {"type": "function_call_output", "call_id": "toolu_conformance_0001", "output": "Process exited with code 0\nOutput:\nexport {};\n"},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]},
                {"role": "assistant", "content": [{"type": "output_text", "text": "said"}]},
                {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "patched"}]},
            ],
            "tools": [
                {"type": "function", "name": "exec_command", "description": "Runs a command", "parameters": {}},
                {"type": "web_search"},
            ],
            "stream": true,
        })
    }

    #[test]
    fn openai_chat_segments_follow_the_conversation() {
        use Place::*;
        assert_eq!(
            triples(segments(Api::OpenaiChat, &chat_body())),
            vec![
                t(System, 0, "You are opencode, an interactive CLI tool."),
                t(System, 0, "Instructions from: /p/project/AGENTS.md\n# Root\n"),
                t(FirstUser, 1, "go"),
                t(Assistant, 2, ""),
                t(Assistant, 2, r#"{"filePath":"/p/project/src/a.ts"}"#),
                t(ToolResult, 3, "<path>/p/project/src/a.ts</path>\n<content>\n1: export {};\n</content>\n\n<system-reminder>\nInstructions from: /p/project/src/AGENTS.md\n# Src\n\n</system-reminder>"),
                t(ToolResult, 4, "export {};\n"),
                t(SeparateSystem, 5, "late"),
                t(User, 6, "more"),
                t(Other, 0, "Read a file"),
            ]
        );
    }

    #[test]
    fn openai_responses_segments_follow_the_conversation() {
        use Place::*;
        assert_eq!(
            triples(segments(Api::OpenaiResponses, &responses_body())),
            vec![
                t(System, 0, "You are Codex."),
                t(System, 0, "You are a coding agent running in the Codex CLI."),
                t(
                    FirstUser,
                    1,
                    "# AGENTS.md instructions for /p/project\n\n<INSTRUCTIONS>\n# Project\n</INSTRUCTIONS>"
                ),
                t(FirstUser, 1, "<environment_context>\n  <cwd>/p/project</cwd>\n</environment_context>"),
                t(FirstUser, 1, "go"),
                t(Assistant, 2, r#"{"cmd":"cat /p/project/src/api/x.ts"}"#),
                t(ToolResult, 3, "Process exited with code 0\nOutput:\nexport {};\n"),
                t(Assistant, 4, "thinking"),
                t(Assistant, 5, "said"),
                t(ToolResult, 6, "patched"),
                t(Other, 0, "Runs a command"),
            ]
        );
    }

    #[rstest]
    #[case::chat_not_an_array(Api::OpenaiChat, json!({"messages": {"role": "user"}, "tools": "x"}), vec![])]
    #[case::chat_unknown_shapes_are_skipped(Api::OpenaiChat, json!({"messages": [7, {"role": "wizard", "content": "w"}, {"role": "user", "content": 3}]}), vec![t(Place::Other, 3, "w")])]
    #[case::responses_string_input(Api::OpenaiResponses, json!({"input": "go"}), vec![t(Place::FirstUser, 1, "go")])]
    #[case::responses_unknown_items_are_skipped(Api::OpenaiResponses, json!({"input": [3, {"type": "web_search_call"}, {"type": "function_call", "arguments": 1}]}), vec![])]
    fn openai_segments_of_odd_bodies(#[case] api: Api, #[case] body: Value, #[case] want: Vec<(Place, usize, String)>) {
        assert_eq!(triples(segments(api, &body)), want);
    }

    #[rstest]
    #[case::chat(Api::OpenaiChat, chat_body(), true, 2, vec!["read", "bash"])]
    #[case::responses(Api::OpenaiResponses, responses_body(), true, 2, vec!["exec_command"])]
    #[case::chat_title_request(Api::OpenaiChat, json!({"messages": [{"role": "user", "content": "Generate a title"}]}), false, 0, vec![])]
    fn openai_tools_offered_and_results_held(
        #[case] api: Api,
        #[case] body: Value,
        #[case] offers: bool,
        #[case] results: usize,
        #[case] names: Vec<&str>,
    ) {
        assert_eq!(offers_tools(api, &body), offers);
        assert_eq!(tool_results(api, &body), results);
        assert_eq!(tool_names(api, &body), names);
        assert_eq!(failed_results(api, &body), Vec::<String>::new());
    }

    #[rstest]
    #[case::chat(Api::OpenaiChat, "POST", "/v1/chat/completions", true)]
    #[case::chat_unversioned(Api::OpenaiChat, "POST", "/chat/completions", true)]
    #[case::chat_get(Api::OpenaiChat, "GET", "/v1/chat/completions", false)]
    #[case::chat_models(Api::OpenaiChat, "GET", "/v1/models", false)]
    #[case::responses(Api::OpenaiResponses, "POST", "/v1/responses", true)]
    #[case::responses_compact(Api::OpenaiResponses, "POST", "/v1/responses/compact", false)]
    #[case::responses_is_not_chat(Api::OpenaiResponses, "POST", "/v1/chat/completions", false)]
    fn openai_generation_endpoints(#[case] api: Api, #[case] method: &str, #[case] path: &str, #[case] want: bool) {
        assert_eq!(is_generation(api, method, path), want);
    }

    #[rstest]
    #[case::chat_stream(Api::OpenaiChat, json!({"model": "m1", "stream": true}), true, "m1")]
    #[case::chat_no_stream(Api::OpenaiChat, json!({"model": "m1"}), false, "m1")]
    #[case::responses_stream(Api::OpenaiResponses, json!({"model": "gpt-5-codex", "stream": true}), true, "gpt-5-codex")]
    #[case::responses_no_model(Api::OpenaiResponses, json!({"stream": 1}), false, "")]
    fn openai_stream_and_model(#[case] api: Api, #[case] body: Value, #[case] stream: bool, #[case] name: &str) {
        assert_eq!(wants_stream(api, "/v1/x", &body), stream);
        assert_eq!(model(api, "/v1/x", &body), name);
    }

    /// The JSON of each `data:` line of a chat completions stream, up to `[DONE]`, checking its
    /// framing.
    fn parse_chat_sse(body: &str) -> Vec<Value> {
        let events: Vec<&str> = body.strip_suffix("\n\n").unwrap().split("\n\n").collect();
        assert_eq!(events.last(), Some(&"data: [DONE]"));
        events[..events.len() - 1]
            .iter()
            .map(|e| {
                let data: Value = serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap();
                assert_eq!(data["object"], "chat.completion.chunk");
                data
            })
            .collect()
    }

    #[test]
    fn openai_chat_stream_of_tool_calls_round_trips() {
        let encoded = encode(Api::OpenaiChat, &read_call(), true, "m1");
        assert_eq!((encoded.status, encoded.content_type), (200, EVENT_STREAM));
        let chunks = parse_chat_sse(&encoded.body);
        assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        // Put together as a client does: the first delta of an index has its id and name, the
        // arguments are the concatenation of every delta's.
        let mut calls: BTreeMap<u64, (String, String, String)> = BTreeMap::new();
        for c in &chunks {
            assert_eq!(c["model"], "m1");
            for d in c["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
                let entry = calls.entry(d["index"].as_u64().unwrap()).or_default();
                if let Some(id) = d["id"].as_str() {
                    assert!(entry.0.is_empty());
                    entry.0 = id.to_owned();
                    entry.1 = d["function"]["name"].as_str().unwrap().to_owned();
                }
                entry.2.push_str(d["function"]["arguments"].as_str().unwrap());
            }
        }
        let calls: Vec<(String, String, Value)> =
            calls.into_values().map(|(id, name, args)| (id, name, serde_json::from_str(&args).unwrap())).collect();
        assert_eq!(calls[0], ("toolu_1".into(), "Read".into(), json!({"file_path": "/x/AGENTS.md", "n": [1, 2]})));
        assert!(calls[1].0.starts_with("call_"));
        assert_eq!((calls[1].1.as_str(), &calls[1].2), ("Glob", &json!({})));
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"][0], json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}));
        assert_eq!(last["usage"]["total_tokens"], 2);
    }

    #[test]
    fn openai_chat_stream_of_text_round_trips() {
        let encoded = encode(Api::OpenaiChat, &Reply::Text("done \u{2028} ok".into()), true, "m1");
        assert!(!encoded.body.contains('\u{2028}'));
        let chunks = parse_chat_sse(&encoded.body);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1]["choices"][0]["delta"], json!({"content": "done \u{2028} ok"}));
        assert_eq!(chunks[2]["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn openai_chat_completion_without_stream() {
        let v: Value = serde_json::from_str(&encode(Api::OpenaiChat, &read_call(), false, "m1").body).unwrap();
        assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!((v["object"].clone(), v["model"].clone()), (json!("chat.completion"), json!("m1")));
        let choice = &v["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], Value::Null);
        assert_eq!(
            choice["message"]["tool_calls"][0],
            json!({"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": "{\"file_path\":\"/x/AGENTS.md\",\"n\":[1,2]}"}})
        );
        assert_eq!(choice["message"]["tool_calls"][1]["function"]["arguments"], "{}");
        let text: Value =
            serde_json::from_str(&encode(Api::OpenaiChat, &Reply::Text("hi".into()), false, "m").body).unwrap();
        assert_eq!(
            text["choices"][0],
            json!({"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"})
        );
    }

    /// Parses a Responses event stream into (event name, data) pairs, checking its framing and
    /// its sequence numbers.
    fn parse_responses_sse(body: &str) -> Vec<(String, Value)> {
        let events = parse_anthropic_sse(body);
        for (n, (_, data)) in events.iter().enumerate() {
            assert_eq!(data["sequence_number"], n);
        }
        events
    }

    #[test]
    fn openai_responses_stream_of_tool_calls_round_trips() {
        let encoded = encode(Api::OpenaiResponses, &read_call(), true, "gpt");
        assert_eq!((encoded.status, encoded.content_type), (200, EVENT_STREAM));
        let events = parse_responses_sse(&encoded.body);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let per_call = [
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
        ];
        let want: Vec<&str> = ["response.created", "response.in_progress"]
            .into_iter()
            .chain(per_call)
            .chain(per_call)
            .chain(["response.completed"])
            .collect();
        assert_eq!(names, want);
        assert_eq!(events[0].1["response"]["status"], "in_progress");
        assert_eq!(events[2].1["item"]["arguments"], "");
        let done: Vec<&Value> =
            events.iter().filter(|(n, _)| n == "response.output_item.done").map(|(_, d)| &d["item"]).collect();
        assert_eq!(
            (done[0]["type"].clone(), done[0]["call_id"].clone(), done[0]["name"].clone()),
            (json!("function_call"), json!("toolu_1"), json!("Read"))
        );
        let args: Value = serde_json::from_str(done[0]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"file_path": "/x/AGENTS.md", "n": [1, 2]}));
        assert!(done[1]["call_id"].as_str().unwrap().starts_with("call_"));
        assert_eq!(events[3].1["item_id"], done[0]["id"]);
        let completed = &events.last().unwrap().1["response"];
        assert_eq!((completed["status"].clone(), completed["model"].clone()), (json!("completed"), json!("gpt")));
        assert_eq!(completed["output"].as_array().unwrap().len(), 2);
        assert_eq!(completed["id"], events[0].1["response"]["id"]);
        assert!(completed["id"].as_str().unwrap().starts_with("resp_"));
    }

    #[test]
    fn openai_responses_stream_of_text_round_trips() {
        let encoded = encode(Api::OpenaiResponses, &Reply::Text("Done.".into()), true, "gpt");
        let events = parse_responses_sse(&encoded.body);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
        assert_eq!(events[2].1["item"]["content"], json!([]));
        assert_eq!(events[4].1["delta"], "Done.");
        let item = &events[7].1["item"];
        assert_eq!((item["type"].clone(), item["role"].clone()), (json!("message"), json!("assistant")));
        assert_eq!(item["content"], json!([{"type": "output_text", "text": "Done.", "annotations": []}]));
    }

    #[test]
    fn openai_responses_without_stream() {
        let v: Value = serde_json::from_str(&encode(Api::OpenaiResponses, &read_call(), false, "gpt").body).unwrap();
        assert_eq!((v["object"].clone(), v["status"].clone()), (json!("response"), json!("completed")));
        assert_eq!(v["output"][0]["arguments"], "{\"file_path\":\"/x/AGENTS.md\",\"n\":[1,2]}");
        assert_eq!(v["usage"]["total_tokens"], 2);
    }

    #[rstest]
    #[case::chat(Api::OpenaiChat, 404, "invalid_request_error")]
    #[case::responses(Api::OpenaiResponses, 500, "server_error")]
    fn openai_errors(#[case] api: Api, #[case] status: u16, #[case] kind: &str) {
        let got = error(api, status, "no");
        assert_eq!(got.status, status);
        let body: Value = serde_json::from_str(&got.body).unwrap();
        assert_eq!(body, json!({"error": {"message": "no", "type": kind, "param": null, "code": null}}));
        let unknown = auxiliary(api, "GET", "/v1/models", &Value::Null);
        assert_eq!(unknown.status, 404);
    }

    #[rstest]
    #[case::system(Place::System, "system")]
    #[case::first_user(Place::FirstUser, "first user message")]
    #[case::user(Place::User, "user message")]
    #[case::tool_result(Place::ToolResult, "tool result")]
    #[case::separate_system(Place::SeparateSystem, "separate system message")]
    #[case::assistant(Place::Assistant, "assistant")]
    #[case::other(Place::Other, "other")]
    fn place_labels(#[case] place: Place, #[case] label: &str) {
        assert_eq!(place.to_string(), label);
    }

    #[test]
    fn api_names_are_kebab_case() {
        assert_eq!(serde_json::to_value(Api::AnthropicMessages).unwrap(), "anthropic-messages");
        assert_eq!(serde_json::to_value(Api::OpenaiChat).unwrap(), "openai-chat");
        assert_eq!(serde_json::from_value::<Api>(json!("openai-responses")).unwrap(), Api::OpenaiResponses);
        assert_eq!(serde_json::from_value::<Api>(json!("gemini")).unwrap(), Api::Gemini);
    }

    #[test]
    fn a_long_path_is_clipped_in_the_error() {
        let got = auxiliary(Api::Gemini, "GET", &"é".repeat(500), &Value::Null);
        assert!(got.body.len() < 600, "{}", got.body);
    }
}
