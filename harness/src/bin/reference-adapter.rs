//! `reference-adapter`: the reference behind the adapter protocol (harness/PROTOCOL.md), built by
//! the harness so that the reference library holds no wire types, and so that
//! the project's own CI exercises the protocol end to end and the suite through this process must
//! give exactly the in-process results. By default it answers one JSON request per stdin line with
//! one reply per stdout line; with `--one-shot` it reads a whole case from stdin and prints its
//! observations. It never panics on input: whatever it cannot use is answered with `"ok": false`
//! (or, in one-shot mode, with `"error"`).

use std::io::{self, BufRead, Read, Write};
use std::process::ExitCode;

use harness::run::driver::{reference_hello, Driver};
use harness::run::wire::{Hello, Observation, OpenCase, StepOp, PROTOCOL_VERSION as PROTOCOL};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request; the harness's side of the same shape is `harness::run::adapter::Request`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Request {
    Hello {
        seq: u64,
        protocol: String,
    },
    Open {
        seq: u64,
        // The case id is for logs; the reference needs nothing from it.
        #[serde(rename = "case")]
        _case: String,
        // Boxed: an open case is far larger than the other requests.
        open: Box<OpenCase>,
    },
    Step {
        seq: u64,
        // Read by `step_from`, not by serde (see there).
        step: Value,
    },
    Close {
        seq: u64,
    },
}

/// A reply (`harness::run::adapter::Reply`).
#[derive(Serialize, Default)]
struct Reply {
    seq: Option<u64>,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    hello: Option<Hello>,
    #[serde(skip_serializing_if = "Option::is_none")]
    observation: Option<Observation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The one-shot input (`harness::run::adapter::OneShotRequest`). Steps stay JSON until they are run,
/// so that `{"op": "restart"}` and a bad step each get their own message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OneShot {
    protocol: String,
    #[serde(rename = "case")]
    _case: String,
    open: OpenCase,
    steps: Vec<Value>,
}

/// The one-shot output (`harness::run::adapter::OneShotReply`).
#[derive(Serialize)]
struct OneShotReply {
    observations: Vec<Observation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let written = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => serve(),
        ["--one-shot"] => one_shot(),
        _ => {
            eprintln!("usage: reference-adapter [--one-shot] (see harness/PROTOCOL.md)");
            return ExitCode::from(2);
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        // The harness has gone away; there is nobody left to tell but stderr.
        Err(e) => {
            eprintln!("reference-adapter: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The persistent mode: one reply per request line until stdin closes.
fn serve() -> io::Result<()> {
    let mut out = io::stdout().lock();
    let mut driver = None;
    for (index, line) in io::stdin().lock().split(b'\n').enumerate() {
        let line = line?;
        // A blank line is not a request (and gets no reply), which helps a human at a terminal.
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let reply = answer(index + 1, &line, &mut driver);
        writeln!(out, "{}", encode(&reply, reply.seq))?;
        out.flush()?;
    }
    Ok(())
}

/// Answers one request line (`n` is its 1-based line number).
fn answer(n: usize, line: &[u8], driver: &mut Option<Driver>) -> Reply {
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => return refusal(None, format!("line {n}: not JSON: {e}")),
    };
    let seq = value.get("seq").and_then(Value::as_u64);
    let request: Request = match serde_json::from_value(value) {
        Ok(request) => request,
        Err(e) => return refusal(seq, format!("line {n}: not a request: {e}")),
    };
    let seq = Some(match &request {
        Request::Hello { seq, .. } | Request::Open { seq, .. } | Request::Step { seq, .. } | Request::Close { seq } => {
            *seq
        }
    });
    match run(request, driver) {
        Ok(reply) => Reply { seq, ok: true, ..reply },
        Err(e) => refusal(seq, e),
    }
}

/// Runs one request against the driver; the reply's `seq` and `ok` are filled in by the caller.
fn run(request: Request, driver: &mut Option<Driver>) -> Result<Reply, String> {
    Ok(match request {
        Request::Hello { protocol, .. } => {
            if protocol != PROTOCOL {
                return Err(format!("protocol '{protocol}' is not supported (this adapter speaks '{PROTOCOL}')"));
            }
            Reply { hello: Some(reference_hello()), ..Reply::default() }
        }
        Request::Open { open, .. } => {
            // Opening replaces any case still open, even when the new one fails to open.
            *driver = None;
            let (opened, observation) = Driver::open(*open)?;
            *driver = Some(opened);
            Reply { observation: Some(observation), ..Reply::default() }
        }
        Request::Step { step, .. } => {
            let step = step_from(step)?;
            let driver = driver.as_mut().ok_or("no case is open (open one first)")?;
            Reply { observation: Some(driver.step(&step)?), ..Reply::default() }
        }
        Request::Close { .. } => {
            *driver = None;
            Reply::default()
        }
    })
}

/// Reads a step.
fn step_from(value: Value) -> Result<StepOp, String> {
    serde_json::from_value(value).map_err(|e| format!("not a step: {e}"))
}

fn refusal(seq: Option<u64>, error: String) -> Reply {
    Reply { seq, ok: false, error: Some(error), ..Reply::default() }
}

/// The reply as one line. Encoding cannot fail for these types, but if it ever did, the harness
/// still gets a well-formed refusal rather than silence.
fn encode<T: Serialize>(reply: &T, seq: Option<u64>) -> String {
    serde_json::to_string(reply).unwrap_or_else(|e| {
        let seq = seq.map_or("null".to_string(), |s| s.to_string());
        let error = Value::String(format!("cannot encode the reply: {e}"));
        format!(r#"{{"seq":{seq},"ok":false,"error":{error}}}"#)
    })
}

/// The one-shot mode: the whole case from stdin, one reply object on stdout.
fn one_shot() -> io::Result<()> {
    let mut input = Vec::new();
    io::stdin().lock().read_to_end(&mut input)?;
    let mut observations = Vec::new();
    let error = run_case(&input, &mut observations).err();
    let reply = OneShotReply { observations, error };
    let mut out = io::stdout().lock();
    writeln!(out, "{}", encode(&reply, None))?;
    out.flush()
}

/// Runs a one-shot case, pushing one observation per step until a step fails.
fn run_case(input: &[u8], observations: &mut Vec<Observation>) -> Result<(), String> {
    let case: OneShot = serde_json::from_slice(input).map_err(|e| format!("input: not a one-shot case: {e}"))?;
    if case.protocol != PROTOCOL {
        return Err(format!("protocol '{}' is not supported (this adapter speaks '{PROTOCOL}')", case.protocol));
    }
    let (mut driver, _) = Driver::open(case.open).map_err(|e| format!("open: {e}"))?;
    for (index, step) in case.steps.into_iter().enumerate() {
        let observation = if step.get("op").and_then(Value::as_str) == Some("restart") {
            driver.restart()
        } else {
            step_from(step).and_then(|step| driver.step(&step))
        };
        observations.push(observation.map_err(|e| format!("step {index}: {e}"))?);
    }
    Ok(())
}
