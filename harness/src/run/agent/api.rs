//! The model wire APIs an agent CLI speaks, seen from the model's side: what a request puts in
//! front of the model ([`segments`], [`tool_results`], [`offers_tools`]), which endpoint it is
//! ([`is_generation`], [`auxiliary`]), and how a scripted [`Reply`] is encoded so that the real
//! SDK accepts it ([`encode`]).
//!
//! Each API is one [`Api`] variant and one private module below (`anthropic`, `gemini`); the
//! public functions only dispatch, so adding an API (OpenAI chat or responses) is one more
//! variant and one more module. Request bodies come from third-party software: every reader
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
    }
}

/// Whether the request offers the model any tool: Anthropic's non-empty `tools`, or a non-empty
/// `functionDeclarations` in one of Gemini's `tools`.
pub fn offers_tools(api: Api, body: &Value) -> bool {
    match api {
        Api::AnthropicMessages => array(body.get("tools")).next().is_some(),
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
    }
}

/// The names of the offered tools, in the order offered (for error messages).
pub fn tool_names(api: Api, body: &Value) -> Vec<String> {
    let tools: Box<dyn Iterator<Item = &Value>> = match api {
        Api::AnthropicMessages => Box::new(array(body.get("tools"))),
        Api::Gemini => Box::new(gemini::declarations(body)),
    };
    tools.filter_map(|t| str_at(t, "name")).map(str::to_owned).collect()
}

/// Whether the client asked for a server-sent-event stream: Anthropic's body `stream: true`,
/// Gemini's `:streamGenerateContent` endpoint.
pub fn wants_stream(api: Api, url_path: &str, body: &Value) -> bool {
    match api {
        Api::AnthropicMessages => body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        Api::Gemini => path_only(url_path).ends_with(":streamGenerateContent"),
    }
}

/// The model the request names: Anthropic's body `model`, Gemini's `{model}` in
/// `/v1beta/models/{model}:generateContent`. Empty when there is none.
pub fn model(api: Api, url_path: &str, body: &Value) -> String {
    match api {
        Api::AnthropicMessages => str_at(body, "model").unwrap_or_default().to_owned(),
        Api::Gemini => gemini::model_in_path(url_path).unwrap_or_default().to_owned(),
    }
}

/// Whether `method url_path` is the endpoint that generates: Anthropic's `POST /v1/messages`
/// (with any query string, e.g. `?beta=true`), Gemini's `POST .../models/{m}:generateContent`
/// or `:streamGenerateContent`. A prefix before `/v1` is allowed, so a base URL with a path
/// works too.
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
/// `{"error":{"code":..,"message":..,"status":..}}`.
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
    use super::{args_object, array, fake_id, kind, role, sse_json, str_at, Call, Place, Reply, Segment};
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
                    json!({ "type": "tool_use", "id": tool_id(call, i), "name": call.name, "input": args_object(call) })
                })
                .collect(),
        }
    }

    fn tool_id(call: &Call, index: usize) -> String {
        if call.id.is_empty() {
            fake_id("toolu_", &format!("{index}:{}", call.name))
        } else {
            call.id.clone()
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

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

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
        assert_eq!(serde_json::from_value::<Api>(json!("gemini")).unwrap(), Api::Gemini);
    }

    #[test]
    fn a_long_path_is_clipped_in_the_error() {
        let got = auxiliary(Api::Gemini, "GET", &"é".repeat(500), &Value::Null);
        assert!(got.body.len() < 600, "{}", got.body);
    }
}
