//! `fake-agent` end to end against a scripted model endpoint in the test: a loopback server that
//! answers each request with the next canned reply and keeps what it was sent, so that each test
//! can check which instruction files the agent put in front of the model, and where.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// One request the server received.
#[derive(Debug, Clone)]
struct Request {
    target: String,
    body: Value,
}

/// A scripted endpoint: it answers the n-th request with the n-th reply, then stops listening,
/// so that one request too many fails the agent instead of hanging it.
struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    fn start(replies: Vec<(&'static str, String)>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for (content_type, reply) in replies {
                let (stream, _) = listener.accept().unwrap();
                let mut reader = BufReader::new(stream);
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap();
                        }
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let target = request_line.split(' ').nth(1).unwrap().to_owned();
                log.lock().unwrap().push(Request { target, body: serde_json::from_slice(&body).unwrap() });
                let mut stream = reader.into_inner();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    reply.len()
                );
                stream.write_all(head.as_bytes()).unwrap();
                stream.write_all(reply.as_bytes()).unwrap();
            }
        });
        Server { base, seen }
    }

    fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream";

fn anthropic_text(text: &str) -> (&'static str, String) {
    (JSON, json!({"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}).to_string())
}

fn anthropic_tool(id: &str, name: &str, input: Value) -> (&'static str, String) {
    let reply = json!({
        "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
        "stop_reason": "tool_use",
    });
    (JSON, reply.to_string())
}

fn anthropic_read(id: &str, path: &str) -> (&'static str, String) {
    anthropic_tool(id, "Read", json!({"file_path": path}))
}

fn sse(events: &[Value]) -> String {
    events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())).collect()
}

fn anthropic_stream_text(text: &str) -> (&'static str, String) {
    let (head, tail) = text.split_at(text.len() / 2);
    let events = [
        json!({"type": "message_start", "message": {"role": "assistant", "content": []}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": head}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": tail}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        json!({"type": "message_stop"}),
    ];
    (SSE, sse(&events))
}

fn anthropic_stream_read(id: &str, path: &str) -> (&'static str, String) {
    let input = json!({"file_path": path}).to_string();
    let (head, tail) = input.split_at(5);
    let events = [
        json!({"type": "message_start", "message": {"role": "assistant", "content": []}}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": id, "name": "Read", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": head}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": tail}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        json!({"type": "message_stop"}),
    ];
    (SSE, sse(&events))
}

fn gemini_text(text: &str) -> (&'static str, String) {
    let reply =
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]});
    (JSON, reply.to_string())
}

fn gemini_read(path: &str) -> (&'static str, String) {
    let call = json!({"functionCall": {"name": "read_file", "args": {"file_path": path}}});
    let reply = json!({"candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": "STOP"}]});
    (JSON, reply.to_string())
}

const API_RULE: &str = "---\npaths:\n  - \"src/api/**\"\n---\nAPI rule body.\n";

/// The project every test starts from: a root file, a nested one, an unconditional rule and a
/// rule conditional on `src/api/**`.
fn project() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for (path, text) in [
        ("AGENTS.md", "Root instructions.\n"),
        ("src/AGENTS.md", "Nested src instructions.\n"),
        ("src/api/x.ts", "export const x = 1;\n"),
        (".fake/rules/general.md", "General rule.\n"),
        (".fake/rules/api.md", API_RULE),
    ] {
        let path = root.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

/// The project root as the agent sees it (its cwd, symlinks resolved).
fn real(root: &Path) -> PathBuf {
    root.canonicalize().unwrap()
}

fn run_agent(root: &Path, home: &Path, server: &Server, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fake-agent"))
        .env_clear()
        .env("HOME", home)
        .env("FAKE_AGENT_BASE_URL", &server.base)
        .envs(env.iter().copied())
        .current_dir(root)
        .args(args)
        .output()
        .unwrap()
}

fn succeeded(output: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {:?}, stderr: {stderr}", output.status);
    serde_json::from_slice(&output.stdout).unwrap()
}

fn reminder(path: &Path, content: &str) -> String {
    format!("<system-reminder>\nContents of {}:\n{content}\n</system-reminder>", path.display())
}

fn anthropic_system(request: &Request) -> &str {
    request.body["system"][0]["text"].as_str().unwrap()
}

/// Checks the requests of a run that read `src/api/x.ts` once, answered `done`: a title request
/// without tools, a first main request with only the startup files, then the tool result with
/// the nested file and the conditional rule after it.
fn check_anthropic_read(root: &Path, requests: &[Request], stream: bool) {
    let real = real(root);
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert!(requests.iter().all(|r| r.target == "/v1/messages"));
    assert!(requests.iter().all(|r| r.body["stream"] == json!(stream)));
    let title = &requests[0].body;
    assert!(title.get("tools").is_none());
    assert_eq!(title["messages"][0]["content"][0]["text"], "Write a title for: read x");

    let system = anthropic_system(&requests[1]);
    let expected = format!(
        "You are fake-agent.\nContents of {}:\nRoot instructions.\n\nContents of {}:\nGeneral rule.\n\n",
        real.join("AGENTS.md").display(),
        real.join(".fake/rules/general.md").display()
    );
    assert_eq!(system, expected);
    assert_eq!(requests[1].body["tools"].as_array().unwrap().len(), 3);
    assert_eq!(requests[1].body["messages"].as_array().unwrap().len(), 1);

    let messages = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[1]["content"][0]["input"], json!({"file_path": "src/api/x.ts"}));
    let results = &messages[2]["content"];
    assert_eq!(
        results,
        &json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": "export const x = 1;\n"},
            {"type": "text", "text": reminder(&real.join("src/AGENTS.md"), "Nested src instructions.\n")},
            {"type": "text", "text": reminder(&real.join(".fake/rules/api.md"), "API rule body.\n")},
        ])
    );
    assert_eq!(anthropic_system(&requests[2]), system);
}

#[test]
fn anthropic_read_attaches_the_nested_file_and_the_conditional_rule_after_the_tool_result() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let server =
        Server::start(vec![anthropic_text("Title"), anthropic_read("t1", "src/api/x.ts"), anthropic_text("done")]);
    let out = succeeded(&run_agent(root.path(), home.path(), &server, &[], &["-p", "read x"]));
    assert_eq!(out["result"], "done");
    assert!(out["session_id"].as_str().is_some_and(|id| !id.is_empty()));
    check_anthropic_read(root.path(), &server.requests(), false);
}

#[test]
fn anthropic_stream_assembles_tool_input_from_partial_json() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        anthropic_stream_text("Title"),
        anthropic_stream_read("t1", "src/api/x.ts"),
        anthropic_stream_text("all done"),
    ]);
    let out =
        succeeded(&run_agent(root.path(), home.path(), &server, &[("FAKE_AGENT_STREAM", "1")], &["-p", "read x"]));
    assert_eq!(out["result"], "all done");
    check_anthropic_read(root.path(), &server.requests(), true);
}

#[test]
fn a_file_attached_with_the_same_content_is_not_attached_again_but_a_changed_one_is() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let real = real(root.path());
    let edited = "Nested src instructions, edited.\n";
    let server = Server::start(vec![
        anthropic_text("Title"),
        anthropic_read("t1", "src/api/x.ts"),
        anthropic_read("t2", "./src/api/x.ts"),
        anthropic_tool("t3", "Write", json!({"file_path": "src/AGENTS.md", "content": edited})),
        anthropic_tool("t4", "Edit", json!({"file_path": "src/api/x.ts", "old_string": "1", "new_string": "2"})),
        anthropic_text("done"),
    ]);
    succeeded(&run_agent(root.path(), home.path(), &server, &[], &["-p", "read x"]));
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let last = requests[5].body["messages"].as_array().unwrap();
    assert_eq!(
        last[4]["content"],
        json!([{"type": "tool_result", "tool_use_id": "t2", "content": "export const x = 1;\n"}])
    );
    let wrote = format!("wrote {} bytes to {}", edited.len(), real.join("src/AGENTS.md").display());
    assert_eq!(
        last[6]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t3", "content": wrote},
            {"type": "text", "text": reminder(&real.join("src/AGENTS.md"), edited)},
        ])
    );
    let edit = format!("edited {}", real.join("src/api/x.ts").display());
    assert_eq!(last[8]["content"], json!([{"type": "tool_result", "tool_use_id": "t4", "content": edit}]));
    assert_eq!(std::fs::read_to_string(root.path().join("src/api/x.ts")).unwrap(), "export const x = 2;\n");
}

#[test]
fn a_failed_tool_call_is_an_error_result_without_reminders() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(vec![
        anthropic_text("Title"),
        anthropic_read("t1", "src/api/missing.ts"),
        anthropic_text("done"),
    ]);
    succeeded(&run_agent(root.path(), home.path(), &server, &[], &["-p", "read x"]));
    let results = server.requests()[2].body["messages"][2]["content"].clone();
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0]["is_error"], true);
}

#[test]
fn gemini_read_appends_the_reminders_to_the_function_response_output() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let real = real(root.path());
    let server = Server::start(vec![gemini_text("Title"), gemini_read("src/api/x.ts"), gemini_text("done")]);
    let out =
        succeeded(&run_agent(root.path(), home.path(), &server, &[("FAKE_AGENT_API", "gemini")], &["-p", "read x"]));
    assert_eq!(out["result"], "done");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| r.target == "/v1beta/models/fake-model:generateContent"));
    assert!(requests[0].body.get("tools").is_none());
    let system = requests[1].body["systemInstruction"]["parts"][0]["text"].as_str().unwrap();
    assert!(system.contains("Root instructions.") && system.contains("General rule."), "{system}");
    assert!(!system.contains("API rule body.") && !system.contains("Nested src instructions."), "{system}");
    let names: Vec<&str> = requests[1].body["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_file", "write_file", "replace"]);
    let contents = requests[2].body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(contents[1]["role"], "model");
    let output = format!(
        "export const x = 1;\n\n{}\n{}",
        reminder(&real.join("src/AGENTS.md"), "Nested src instructions.\n"),
        reminder(&real.join(".fake/rules/api.md"), "API rule body.\n")
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": output}}}]})
    );
}

#[test]
fn continue_keeps_the_messages_and_the_attached_set_and_rebuilds_the_system_prompt() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let first =
        Server::start(vec![anthropic_text("Title"), anthropic_read("t1", "src/api/x.ts"), anthropic_text("done")]);
    let one = succeeded(&run_agent(root.path(), home.path(), &first, &[], &["-p", "read x"]));

    std::fs::write(root.path().join("AGENTS.md"), "Root instructions, edited.\n").unwrap();
    let second =
        Server::start(vec![anthropic_text("Title"), anthropic_read("t2", "src/api/x.ts"), anthropic_text("again")]);
    let two = succeeded(&run_agent(root.path(), home.path(), &second, &[], &["--continue", "-p", "read x again"]));
    assert_eq!(two["result"], "again");
    assert_eq!(two["session_id"], one["session_id"]);

    let requests = second.requests();
    assert_eq!(requests.len(), 3);
    let system = anthropic_system(&requests[1]);
    assert!(system.contains("Root instructions, edited.") && !system.contains("Root instructions.\n"), "{system}");
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[..3], first.requests()[2].body["messages"].as_array().unwrap()[..]);
    assert_eq!(messages[3], json!({"role": "assistant", "content": [{"type": "text", "text": "done"}]}));
    assert_eq!(messages[4], json!({"role": "user", "content": [{"type": "text", "text": "read x again"}]}));
    // The nested file and the rule were attached in the first run with the same content.
    let results = &requests[2].body["messages"][6]["content"];
    assert_eq!(results, &json!([{"type": "tool_result", "tool_use_id": "t2", "content": "export const x = 1;\n"}]));
}

#[test]
fn continue_without_a_session_fails_with_a_message() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let server = Server::start(Vec::new());
    let output = run_agent(root.path(), home.path(), &server, &[], &["--continue", "-p", "x"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no session to continue"));
}

#[test]
fn without_home_it_fails_with_a_message() {
    let root = project();
    let output = Command::new(env!("CARGO_BIN_EXE_fake-agent"))
        .env_clear()
        .env("FAKE_AGENT_BASE_URL", "http://127.0.0.1:9")
        .current_dir(root.path())
        .args(["-p", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("HOME is not set"));
}

#[test]
fn an_unreachable_endpoint_exits_2() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    // The server takes no request: its listener is gone once the script is spent.
    let server = Server::start(Vec::new());
    std::thread::sleep(std::time::Duration::from_millis(50));
    let output = run_agent(root.path(), home.path(), &server, &[], &["-p", "x"]);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn gemini_stream_joins_the_chunks_of_each_reply() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let chunk =
        |parts: Value| format!("data: {}\n\n", json!({"candidates": [{"content": {"role": "model", "parts": parts}}]}));
    let call = json!([{"functionCall": {"name": "read_file", "args": {"file_path": "src/api/x.ts"}, "id": "c1"}}]);
    let server = Server::start(vec![
        (SSE, chunk(json!([{"text": "Ti"}])) + &chunk(json!([{"text": "tle"}]))),
        (SSE, chunk(json!([{"text": "Reading. "}])) + &chunk(call)),
        (SSE, chunk(json!([{"text": "do"}])) + &chunk(json!([{"text": "ne"}]))),
    ]);
    let env = [("FAKE_AGENT_API", "gemini"), ("FAKE_AGENT_STREAM", "1")];
    let out = succeeded(&run_agent(root.path(), home.path(), &server, &env, &["-p", "read x"]));
    assert_eq!(out["result"], "done");
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.target == "/v1beta/models/fake-model:streamGenerateContent?alt=sse"));
    let contents = requests[2].body["contents"].as_array().unwrap();
    assert_eq!(contents[1]["parts"][0], json!({"text": "Reading. "}));
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(response["id"], "c1");
    let output = response["response"]["output"].as_str().unwrap();
    assert!(output.starts_with("export const x = 1;\n\n<system-reminder>\n"), "{output}");
    assert!(output.ends_with("API rule body.\n\n</system-reminder>"), "{output}");
}

#[test]
fn other_frontmatter_and_an_oversized_file_are_left_out_with_a_line_on_stderr() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join(".fake/rules/described.md"), "---\ndescription: x\n---\nDescribed.\n").unwrap();
    std::fs::write(root.path().join(".fake/rules/big.md"), "b".repeat(262_145)).unwrap();
    std::fs::write(root.path().join(".fake/rules/fits.md"), "f".repeat(262_144)).unwrap();
    let server = Server::start(vec![anthropic_text("Title"), anthropic_text("done")]);
    let output = run_agent(root.path(), home.path(), &server, &[], &["-p", "x"]);
    succeeded(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("described.md: ignored, frontmatter line 'description: x' is not allowed"), "{stderr}");
    assert!(stderr.contains("big.md: skipped, over the 262144-byte limit"), "{stderr}");
    let system = anthropic_system(&server.requests()[1]).to_owned();
    assert!(!system.contains("Described.") && !system.contains("bbb"));
    assert!(system.contains(&"f".repeat(262_144)));
}

#[test]
fn claude_md_is_the_root_file_when_there_is_no_agents_md() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    std::fs::remove_file(root.path().join("AGENTS.md")).unwrap();
    std::fs::write(root.path().join("CLAUDE.md"), "Claude root.\n").unwrap();
    let server = Server::start(vec![anthropic_text("Title"), anthropic_text("done")]);
    succeeded(&run_agent(root.path(), home.path(), &server, &[], &["-p", "x"]));
    let system = anthropic_system(&server.requests()[1]).to_owned();
    assert!(system.contains(&format!("Contents of {}:\nClaude root.\n", real(root.path()).join("CLAUDE.md").display())));
}

#[test]
fn a_model_that_asks_for_tools_for_50_rounds_stops_the_agent_with_exit_3() {
    let root = project();
    let home = tempfile::tempdir().unwrap();
    let mut replies = vec![anthropic_text("Title")];
    replies.extend((0..50).map(|n| anthropic_read(&format!("t{n}"), "src/api/x.ts")));
    let server = Server::start(replies);
    let output = run_agent(root.path(), home.path(), &server, &[], &["-p", "x"]);
    assert_eq!(output.status.code(), Some(3), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(server.requests().len(), 51);
}
