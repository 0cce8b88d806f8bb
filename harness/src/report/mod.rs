//! Reporting: the formats of one run ([`formats`]: human, JSON, JUnit, Markdown, badges), several
//! implementations side by side ([`matrix`]), saved reports read back and shards merged
//! ([`merge`]), one case explained or reproduced ([`explain`]), the readable diffs they show
//! ([`diff`]), and the escaping and length caps every string from outside passes through on its
//! way in ([`escape`]).

pub mod diff;
pub mod escape;
pub mod explain;
pub mod formats;
pub mod matrix;
pub mod merge;
