//! Running an unmodified agent CLI against a fake model: the two wire APIs the CLIs speak
//! ([`api`]: reading what a request puts in front of the model, encoding scripted replies the
//! real SDKs accept) and the loopback HTTP server that answers and records every request
//! ([`server`]). The runner that starts the CLI and scripts the replies lives elsewhere; these
//! modules know nothing of cases or steps.

pub mod api;
pub mod server;
