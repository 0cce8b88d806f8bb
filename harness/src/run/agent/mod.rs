//! Running an unmodified agent CLI (Claude Code, Gemini CLI, ...) against a fake model endpoint
//! and judging it by what it puts in front of the model. In the order a case travels:
//!
//! 1. [`recipe`]: what varies by product, as data (`harness/agents/*.toml`);
//! 2. [`dialect`]: the case's tree and steps in the agent's file names, and observed paths back;
//! 3. [`jail`]: a network namespace with only loopback, in which the endpoint is bound and the
//!    CLI started;
//! 4. [`server`] and [`api`]: the loopback HTTP endpoint that answers and records every request,
//!    and the two wire APIs (reading what a request puts in front of the model, encoding scripted
//!    replies the real SDKs accept);
//! 5. [`runner`]: the [`crate::Implementation`] that launches the CLI and turns the case's steps
//!    into the conversation;
//! 6. [`extract`]: which instruction files a request holds, and where.

pub mod api;
pub mod dialect;
pub mod extract;
pub mod jail;
pub mod recipe;
pub mod runner;
pub mod server;
