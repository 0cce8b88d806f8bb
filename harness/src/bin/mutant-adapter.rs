//! `mutant-adapter`: a proxy that wraps any persistent adapter and injects one known bug into what
//! passes through, so that the suite can be tested as an outsider would test it: every bug must
//! fail the gate (`conformance run` exits 1 or 2), and `none` must pass.
//!
//! `mutant-adapter --list` prints the bugs, one a line.
//!
//! ```sh
//! conformance run --adapter "mutant-adapter reverse-order -- target/debug/reference-adapter"
//! ```
//!
//! The bugs: `none`; `hello-nothing` (declares no profile and no capability); `hello-misspelt`
//! (declares `Modules` and `root-file`); `empty-record` (appends an empty record wherever none
//! is due); `reverse-order` (activated modules in reverse); `flip-supersedes`;
//! `drop-diagnostic` (the first diagnostic of every step); `crlf` (sent content with CRLF line
//! ends, hashed as sent); `tool-name-trigger` (triggers on the tool's name instead of
//! `details.fileAccess`); `leak-canaries` (reads every file of the sandbox the case's root
//! lies in at `open`, and shows each canary it finds there in the observation of every `touch`,
//! as a loader that read what it must not would: the suite must flag each leak, labelled by the
//! case's `canary_basis`); `section-append-4k` (4 KiB appended to every section text that is not
//! empty); `section-drop-closing` (a section text that names files it left out loses its last
//! paragraph, the closing line); `strip-final-newline` (each file's sent content, and the section
//! text, without its final newline, hashed as sent). The first two violate seed 002's budget
//! sentences and must fail `--level seed`; the last differs only from D-CONTENT-1 and the layout
//! decisions, and must pass it (harness/tests/verdict_strength.rs); `refuse-zero-options` (an
//! `open` whose options set a number to 0 is refused with `refused_option`, as seed 002's own
//! package refuses one at construction: a difference from the decision that gives 0 its meaning);
//! `write-project` (writes a cache file, `.loader-cache`, into the root of every host case it
//! opens, as a loader that keeps its state in the project: a difference from D-TREE-1 in every
//! case whose tree is on disk).

use std::io::{self, BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const BUGS: &[&str] = &[
    "none",
    "hello-nothing",
    "hello-misspelt",
    "empty-record",
    "reverse-order",
    "flip-supersedes",
    "drop-diagnostic",
    "crlf",
    "tool-name-trigger",
    "leak-canaries",
    "section-append-4k",
    "section-drop-closing",
    "strip-final-newline",
    "refuse-zero-options",
    "write-project",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args == ["--list"] {
        println!("{}", BUGS.join("\n"));
        return ExitCode::SUCCESS;
    }
    let (bug, command) = match args.as_slice() {
        [bug, dashes, rest @ ..] if dashes == "--" && !rest.is_empty() && BUGS.contains(&bug.as_str()) => {
            (bug.clone(), rest.join(" "))
        }
        _ => {
            eprintln!("usage: mutant-adapter BUG -- COMMAND...   (BUG: {})", BUGS.join(", "));
            return ExitCode::from(2);
        }
    };
    match proxy(&bug, &command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mutant-adapter: {e}");
            ExitCode::FAILURE
        }
    }
}

fn proxy(bug: &str, command: &str) -> io::Result<()> {
    let mut child = Command::new("sh").arg("-c").arg(command).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    let (Some(mut to_child), Some(from_child)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("the wrapped adapter started without its pipes"));
    };
    let mut replies = BufReader::new(from_child).lines();
    let mut out = io::stdout().lock();
    let mut canaries: Vec<String> = Vec::new();
    for line in io::stdin().lock().lines() {
        let line = line?;
        let mut request: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if bug == "leak-canaries" && request.get("type").and_then(Value::as_str) == Some("open") {
            canaries = request
                .pointer("/open/root")
                .and_then(Value::as_str)
                .and_then(|root| std::path::Path::new(root).parent().map(sandbox_canaries))
                .unwrap_or_default();
        }
        if bug == "tool-name-trigger" {
            trigger_on_tool_name(&mut request);
        }
        if bug == "refuse-zero-options" {
            if let Some(reply) = refuse_zero(&request) {
                writeln!(out, "{reply}")?;
                out.flush()?;
                continue;
            }
        }
        writeln!(to_child, "{}", if request.is_null() { line.clone() } else { request.to_string() })?;
        to_child.flush()?;
        let Some(reply) = replies.next() else { break };
        let reply = reply?;
        let mut value: Value = match serde_json::from_str(&reply) {
            Ok(v) => v,
            Err(_) => {
                writeln!(out, "{reply}")?;
                out.flush()?;
                continue;
            }
        };
        mutate(bug, &request, &mut value);
        if bug == "write-project" && request.get("type").and_then(Value::as_str) == Some("open") {
            // Only a root on this host's disk (an in-memory tree has nothing to write into).
            if let Some(root) = request.pointer("/open/root").and_then(Value::as_str) {
                let root = std::path::Path::new(root);
                if root.is_absolute() && root.is_dir() {
                    let _ = std::fs::write(root.join(".loader-cache"), "cached\n");
                }
            }
        }
        if bug == "leak-canaries" && request.pointer("/step/op").and_then(Value::as_str) == Some("touch") {
            if let Some(obs) = value.get_mut("observation") {
                let leaked = json!({"code": "file.unreadable", "path": "", "message": canaries.join(" ")});
                match obs.get_mut("diagnostics") {
                    Some(Value::Array(d)) => d.push(leaked),
                    _ => obs["diagnostics"] = json!([leaked]),
                }
            }
        }
        writeln!(out, "{value}")?;
        out.flush()?;
    }
    drop(to_child);
    let _ = child.wait();
    Ok(())
}

/// Every `CANARY-…` token in the files below `dir` (the case's sandbox), links not followed.
fn sandbox_canaries(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => {
                    let text = std::fs::read(entry.path()).map(|b| String::from_utf8_lossy(&b).into_owned());
                    let text = text.unwrap_or_default();
                    for (at, _) in text.match_indices("CANARY-") {
                        let tail = text.get(at..).unwrap_or_default();
                        found.push(tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect());
                    }
                }
                _ => {}
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The refusal of an `open` whose options set a number to 0, naming the option.
fn refuse_zero(request: &Value) -> Option<Value> {
    if request.get("type").and_then(Value::as_str) != Some("open") {
        return None;
    }
    let options = request.pointer("/open/options")?.as_object()?;
    let (name, _) = options.iter().find(|(_, v)| v.as_u64() == Some(0))?;
    Some(json!({
        "seq": request.get("seq").cloned().unwrap_or(Value::Null),
        "ok": false,
        "error": format!("{name} must be a positive finite number"),
        "refused_option": name,
    }))
}

/// A loader that decides triggering by the tool's name: read, write and edit that succeeded.
fn trigger_on_tool_name(request: &mut Value) {
    let Some(step) = request.get_mut("step") else { return };
    if step.get("op").and_then(Value::as_str) != Some("touch") {
        return;
    }
    let by_name = matches!(step.get("tool").and_then(Value::as_str), Some("read" | "write" | "edit"))
        && step.get("outcome").and_then(Value::as_str) == Some("ok");
    let path = step.get("path").cloned().unwrap_or(Value::Null);
    if let Some(map) = step.as_object_mut() {
        if by_name {
            map.insert("file_access".into(), path);
        } else {
            map.remove("file_access");
        }
    }
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn mutate(bug: &str, request: &Value, reply: &mut Value) {
    let is_next_request = request.pointer("/step/op").and_then(Value::as_str) == Some("next_request");
    if let Some(hello) = reply.get_mut("hello") {
        match bug {
            "hello-nothing" => {
                hello["profiles"] = json!([]);
                hello["capabilities"] = json!([]);
            }
            "hello-misspelt" => {
                hello["profiles"] = json!(["Modules", "root-file"]);
                hello["capabilities"] = json!(["rule-modules", "nested_files"]);
            }
            _ => {}
        }
        return;
    }
    let Some(obs) = reply.get_mut("observation") else { return };
    match bug {
        "empty-record" if is_next_request && obs.get("activation").is_none() && obs.get("section").is_none() => {
            obs["activation"] = json!({"modules": [], "rendered": ""});
        }
        "reverse-order" => {
            if let Some(Value::Array(modules)) = obs.pointer_mut("/activation/modules") {
                modules.reverse();
            }
        }
        "flip-supersedes" => {
            if let Some(Value::Array(modules)) = obs.pointer_mut("/activation/modules") {
                for m in modules {
                    let was = m.get("supersedes").and_then(Value::as_bool).unwrap_or(false);
                    m["supersedes"] = Value::Bool(!was);
                }
            }
        }
        "drop-diagnostic" => {
            if let Some(Value::Array(diags)) = obs.get_mut("diagnostics") {
                if !diags.is_empty() {
                    diags.remove(0);
                }
            }
        }
        "section-append-4k" => {
            if let Some(Value::String(text)) = obs.pointer_mut("/section/text") {
                if !text.is_empty() {
                    text.push_str(&format!("\n\n{}", "x".repeat(4096)));
                }
            }
        }
        "section-drop-closing" => {
            let names_some = obs.pointer("/section/omitted").and_then(Value::as_array).is_some_and(|o| !o.is_empty());
            if let Some(Value::String(text)) = obs.pointer_mut("/section/text") {
                if let Some(at) = text.rfind("\n\n").filter(|_| names_some) {
                    text.truncate(at);
                }
            }
        }
        "strip-final-newline" => {
            for list in ["/startup", "/activation/modules"] {
                if let Some(Value::Array(files)) = obs.pointer_mut(list) {
                    for f in files {
                        if let Some(content) = f.get("content").and_then(Value::as_str) {
                            let stripped = content.strip_suffix('\n').unwrap_or(content).to_string();
                            f["sha256"] = Value::String(sha256_hex(&stripped));
                            f["content"] = Value::String(stripped);
                        }
                    }
                }
            }
            if let Some(Value::String(text)) = obs.pointer_mut("/section/text") {
                if text.ends_with('\n') {
                    text.pop();
                }
            }
        }
        "crlf" => {
            for list in ["/startup", "/activation/modules"] {
                if let Some(Value::Array(files)) = obs.pointer_mut(list) {
                    for f in files {
                        if let Some(content) = f.get("content").and_then(Value::as_str) {
                            let crlf = content.replace("\r\n", "\n").replace('\n', "\r\n");
                            f["sha256"] = Value::String(sha256_hex(&crlf));
                            f["content"] = Value::String(crlf);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}
