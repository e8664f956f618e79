//! HTCondor submit description files, expanded into job ClassAds.
//!
//! This is the client side of `andes submit`: [`parse`] reads a submit
//! description into [`Statement`]s with line numbers, and [`expand`] runs it
//! against a [`Context`] (cluster id, queue date, owner, initial directory,
//! environment, extra `-a` lines, batch name) to produce one job ClassAd per
//! proc, with HTCondor's attribute names, plus the Wasm modules the jobs run
//! (path, SHA-256 digest, bytes) for the client to upload.
//!
//! ```
//! use andes_submit::{Context, MemFs, expand, parse};
//! let mut fs = MemFs::new();
//! fs.add("/home/u/job.wasm", b"\0asm\x01\0\0\0".to_vec());
//! let sub = parse("executable = job.wasm\narguments = \"-n $(Process)\"\nqueue 2\n", "job.sub")?;
//! let ctx = Context::new(7, 1_700_000_000, "/home/u").with_fs(&fs);
//! let out = expand(&sub, &ctx)?;
//! assert_eq!(out.jobs.len(), 2);
//! assert_eq!(out.jobs[1].eval_attr("Arguments").as_str(), Some("-n 1"));
//! assert_eq!(out.jobs[0].eval_attr("Cmd").as_str(), Some("/home/u/job.wasm"));
//! assert!(out.modules[0].digest.starts_with("sha256:"));
//! # Ok::<(), andes_submit::SubmitError>(())
//! ```
//!
//! File access (the executable, `queue ... from FILE`, `matching` globs,
//! input-file sizes) goes through the [`FileSystem`] trait with paths as
//! the job ad spells them (relative paths resolve against the initial
//! directory). [`RealFs`] reads the local disk; [`MappedFs`] maps a prefix
//! such as `/iwd` onto a real directory; [`MemFs`] serves files from memory.
#![forbid(unsafe_code)]

mod expand;
mod fs;
mod job;
mod macros;
pub mod parse;
mod remaps;
pub use remaps::MAX_REMAPS;
mod run;

use std::fmt;

pub use expand::{
    DEFAULT_MAX_AD_BYTES, DEFAULT_MAX_JOBS, Module, Submission, expand, expand_value, itemdata,
};
pub use fs::{FileSystem, MappedFs, MemFs, RealFs};
pub use parse::{
    ItemSource, MatchKind, QueueStatement, Statement, StatementKind, SubmitDescription, parse,
};

/// What kind of problem a [`SubmitError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A line is not a statement of the submit language.
    Syntax,
    /// A `queue` statement is malformed, or its items cannot be produced.
    Queue,
    /// No `queue` statement.
    NoQueue,
    /// `executable` is missing.
    MissingExecutable,
    /// The executable could not be read.
    Io,
    /// The executable is not a WebAssembly module.
    NotWasm,
    /// The universe is not one HTCondor knows.
    UnknownUniverse,
    /// The universe is one HTCondor knows but andes does not run Wasm jobs in.
    UnsupportedUniverse,
    /// A command's value is not valid (a non-boolean `hold`, a non-integer
    /// `priority`, a bad `arguments` or `environment` string, ...).
    InvalidValue,
    /// A value that must be a ClassAd expression does not parse.
    Expression,
    /// Macro expansion failed (a cycle, a bad macro function, too large).
    Macro,
    /// Deferral or cron commands in the scheduler universe.
    DeferralInSchedulerUniverse,
    /// The description would make more jobs than allowed, or job ads larger
    /// in total than [`Context::max_ad_bytes`].
    TooManyJobs,
}

/// A submit error: what is wrong and where (`file:line` when known).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmitError {
    kind: ErrorKind,
    source: String,
    line: Option<usize>,
    message: String,
}

impl SubmitError {
    pub(crate) fn new(
        kind: ErrorKind,
        source: &str,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        SubmitError { kind, source: source.to_string(), line, message: message.into() }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The source name (file name, or `<command line>` for `-a` lines).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The 1-based line, when the error belongs to one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The message without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.source, self.message),
            None => write!(f, "{}: {}", self.source, self.message),
        }
    }
}

impl std::error::Error for SubmitError {}

/// Everything [`expand`] needs besides the description itself.
pub struct Context<'a> {
    /// The cluster id (`ClusterId`, `$(Cluster)`).
    pub cluster_id: i64,
    /// The queue date (`QDate`), seconds since the epoch.
    pub qdate: i64,
    /// The submitting user (`Owner`); `None` leaves `Owner` out.
    pub owner: Option<String>,
    /// The initial directory as the job ad writes it (`Iwd`); `initialdir`
    /// resolves against it.
    pub iwd: String,
    /// The environment `$ENV(NAME)` reads.
    pub env: Vec<(String, String)>,
    /// Extra command lines (`andes submit -a 'cmd = value'`), applied in
    /// order just before every `queue` statement, as condor_submit does.
    pub extra_lines: Vec<String>,
    /// Submit commands given as `name=value` arguments (`andes submit FILE
    /// name=value`), applied in order before the file's first line, as
    /// condor_submit does.
    pub defines: Vec<String>,
    /// `andes submit -queue OPTS`: the queue statement `queue OPTS`, used in
    /// place of the file's last one (or at its end, when it has none).
    pub queue: Option<String>,
    /// Overrides `batch_name` (`JobBatchName`).
    pub batch_name: Option<String>,
    /// Where files are read; relative paths are joined to the initial
    /// directory first.
    pub fs: &'a dyn FileSystem,
    /// The most jobs one description may make ([`DEFAULT_MAX_JOBS`]).
    pub max_jobs: usize,
    /// The most bytes all its job ads may take, printed
    /// ([`DEFAULT_MAX_AD_BYTES`]).
    pub max_ad_bytes: usize,
    /// Seed for `$RANDOM_INTEGER()` and `$RANDOM_CHOICE()`.
    pub seed: u64,
}

impl<'a> Context<'a> {
    /// A context reading the local disk, with no owner, environment, extra
    /// lines or batch name.
    pub fn new(cluster_id: i64, qdate: i64, iwd: impl Into<String>) -> Context<'static> {
        Context {
            cluster_id,
            qdate,
            owner: None,
            iwd: iwd.into(),
            env: Vec::new(),
            extra_lines: Vec::new(),
            defines: Vec::new(),
            queue: None,
            batch_name: None,
            fs: &RealFs,
            max_jobs: DEFAULT_MAX_JOBS,
            max_ad_bytes: DEFAULT_MAX_AD_BYTES,
            seed: 0,
        }
    }

    /// The same context reading files through `fs`.
    pub fn with_fs<'b>(self, fs: &'b dyn FileSystem) -> Context<'b> {
        Context {
            cluster_id: self.cluster_id,
            qdate: self.qdate,
            owner: self.owner,
            iwd: self.iwd,
            env: self.env,
            extra_lines: self.extra_lines,
            defines: self.defines,
            queue: self.queue,
            batch_name: self.batch_name,
            fs,
            max_jobs: self.max_jobs,
            max_ad_bytes: self.max_ad_bytes,
            seed: self.seed,
        }
    }
}
