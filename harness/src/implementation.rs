//! What the harness drives: an [`Implementation`] opens a case, runs its steps and restarts. The
//! reference runs in-process ([`InProcess`]); any other implementation runs behind the adapter
//! protocol ([`crate::adapter::ProcessAdapter`]).

use reference::driver::{Driver, Observation, OpenCase, StepOp};
use serde::{Deserialize, Serialize};

/// What an implementation says of itself (`hello`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hello {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its language.
    pub language: String,
    /// The profiles it supports.
    pub profiles: Vec<String>,
    /// The features it supports; a case needing another is UNSUPPORTED.
    pub features: Vec<String>,
}

/// How a request to an implementation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImplError {
    /// The implementation answered the request with an error: the case is ERROR.
    Refused(String),
    /// The process exited, or wrote something that is not a reply: the case is CRASH.
    Crash {
        /// What went wrong.
        reason: String,
        /// The last lines of its stderr.
        stderr: String,
    },
    /// No reply within the step timeout: the case is TIMEOUT.
    Timeout {
        /// The last lines of its stderr.
        stderr: String,
    },
    /// The implementation cannot be used at all (it cannot be started, refused `hello`, or
    /// crashed or timed out more often than allowed): the run ends with exit code 2.
    Fatal(String),
}

impl std::fmt::Display for ImplError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImplError::Refused(m) => write!(f, "implementation error: {m}"),
            ImplError::Crash { reason, stderr } => write!(f, "crash: {reason}\nstderr tail:\n{stderr}"),
            ImplError::Timeout { stderr } => write!(f, "timeout\nstderr tail:\n{stderr}"),
            ImplError::Fatal(m) => write!(f, "fatal: {m}"),
        }
    }
}

/// An implementation under test.
pub trait Implementation {
    /// `hello`: name, version, language, profiles and features.
    fn hello(&mut self) -> Result<Hello, ImplError>;
    /// Opens a case (`open.resume` is false).
    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError>;
    /// Runs one step of the open case.
    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError>;
    /// Restarts: the session is dropped (for a process, the process is killed and started again)
    /// and the case is opened again with `open.resume` true and the same state directory.
    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError>;
    /// Closes the case.
    fn close(&mut self) -> Result<(), ImplError>;
    /// Tells the implementation which case comes next (for its logs). The default ignores it.
    fn set_case(&mut self, _id: &str) {}
    /// Whether the implementation takes a whole case at once ([`Implementation::run_whole`])
    /// rather than step by step. The default is false.
    fn is_one_shot(&self) -> bool {
        false
    }
    /// Runs a whole case at once: one observation per script step. Only one-shot
    /// implementations answer; the default is `None`.
    fn run_whole(
        &mut self,
        _case: &str,
        _open: &OpenCase,
        _steps: &[crate::adapter::ScriptStep],
    ) -> Option<Result<Vec<Observation>, ImplError>> {
        None
    }
}

/// Every feature in spec-cases/features.yaml that the reference implements.
pub use reference::driver::FEATURES as REFERENCE_FEATURES;

/// The reference's own `hello` (the same data `reference-adapter` answers with).
pub fn reference_hello() -> Hello {
    let h = reference::driver::hello_fields();
    Hello {
        name: h.name.into(),
        version: h.version.into(),
        language: h.language.into(),
        profiles: h.profiles.iter().map(|s| s.to_string()).collect(),
        features: h.features.iter().map(|s| s.to_string()).collect(),
    }
}

/// The reference, in-process.
#[derive(Debug, Default)]
pub struct InProcess {
    driver: Option<Driver>,
}

impl Implementation for InProcess {
    fn hello(&mut self) -> Result<Hello, ImplError> {
        Ok(reference_hello())
    }

    fn open(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        let (driver, obs) = Driver::open(open.clone()).map_err(ImplError::Refused)?;
        self.driver = Some(driver);
        Ok(obs)
    }

    fn step(&mut self, op: &StepOp) -> Result<Observation, ImplError> {
        let driver = self.driver.as_mut().ok_or_else(|| ImplError::Refused("no open case".into()))?;
        driver.step(op).map_err(ImplError::Refused)
    }

    fn restart(&mut self, open: &OpenCase) -> Result<Observation, ImplError> {
        // In-process, a restart is the session dropped and resumed from the same state
        // directory, with the tree as it is now.
        match self.driver.as_mut() {
            Some(driver) => driver.restart().map_err(ImplError::Refused),
            None => self.open(open),
        }
    }

    fn close(&mut self) -> Result<(), ImplError> {
        self.driver = None;
        Ok(())
    }
}
