//! The pool's messages between daemons: the negotiator's match notices, the
//! schedd's claims and activations, and the execute host's job reports. The
//! schedd and the host meet only here (neither crate depends on the other).
//!
//! ClassAds travel as text in new ClassAd syntax; files as base64.
//!
//! | route (on the host) | role | body → reply |
//! | --- | --- | --- |
//! | `POST /v1/host/match` | negotiator | [`MatchNotice`] → 204 |
//! | `POST /v1/host/claim` | schedd | [`ClaimRequest`] → [`ClaimReply`] |
//! | `GET/PUT /v1/host/modules/{digest}` | schedd | module bytes |
//! | `PUT /v1/host/inputs/{sha256}` | schedd (the claimant, [`CLAIM_HEADER`]) | an input file larger than [`STREAM_OVER`], streamed → 204 |
//! | `POST /v1/host/output` | schedd (the claimant) | [`OutputRequest`] → the output file, streamed |
//! | `POST /v1/host/saved` | schedd (the claimant) | [`SavedStateRequest`] → a cooperative job's saved state, streamed |
//! | `POST /v1/host/snapshot` | schedd (the claimant) | [`SnapshotFileRequest`] → a part of a checkpoint, streamed |
//! | `POST /v1/host/activate` | schedd (the claimant) | [`ActivateRequest`] (a job, and perhaps more queued behind it) → [`JobReport`] |
//! | `POST /v1/host/wait` | schedd (the claimant) | [`WaitRequest`] → [`JobReport`] |
//! | `POST /v1/host/edit` | schedd (the claimant) | [`EditRequest`] → 204 |
//! | `POST /v1/host/withdraw` | schedd (the claimant) | [`WithdrawRequest`] → [`WithdrawReply`] |
//! | `POST /v1/host/vacate` | schedd (the claimant) | [`VacateJobRequest`] → 204 |
//! | `POST /v1/host/tail` | schedd (the claimant) | [`TailRequest`] → [`TailReply`] |
//! | `POST /v1/host/release` | schedd (the claimant) | [`ReleaseRequest`] → 204 |
//!
//! | route (on the schedd) | role | body → reply |
//! | --- | --- | --- |
//! | `POST /v1/negotiate/demand` | negotiator | [`DemandRequest`] → [`DemandReply`] |
//! | `POST /v1/negotiate/matches` | negotiator | [`MatchesRequest`] → [`MatchesReply`] |
//!
//! The collector's bodies are [`CollectorUpdate`], [`CollectorInvalidate`] and
//! [`CollectorQuery`]; its routes are in `andes-schedd`'s collector module.
//!
//! A claim id is a secret the host makes for each slot offer. The host gives it
//! only to the collector, in the slot's private ad; the negotiator passes it only
//! to the schedd it matched; the schedd presents it, over a signed request, to
//! claim the slot, and from then on only that schedd's identity may use the claim.

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A file named in a message (an input file, an output file): carried in it when
/// small, else moved as a stream of its own ([`Streamed`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileData {
    /// Its name relative to the sandbox (no `..`, not absolute).
    pub name: String,
    /// Its bytes, when carried in the message (empty when streamed).
    #[serde(serialize_with = "ser_b64", deserialize_with = "de_b64", default)]
    pub data: Vec<u8>,
    /// Set when the file is larger than [`STREAM_OVER`]: it moves as a streamed
    /// body of its own (`PUT /v1/host/inputs/{sha256}` before an activation,
    /// `POST /v1/host/output` after a job's end), never inside a JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed: Option<Streamed>,
}

/// The largest module a host takes, bytes: what `andes submit` accepts.
pub const MAX_MODULE: u64 = 512 << 20;

/// Files larger than this move as streams of their own, not inside messages.
pub const STREAM_OVER: u64 = 1 << 20;

/// Lines of a job's own log (`andes:job/log`) a run's end carries at most;
/// each becomes a generic event (008) in the job's user log.
pub const MAX_REPORTED_LOG_LINES: usize = 100;

/// Characters of one reported log line kept at most.
pub const MAX_REPORTED_LOG_LINE: usize = 1000;

/// A job's log lines as a run's end reports them: at most
/// [`MAX_REPORTED_LOG_LINES`], each one line of at most
/// [`MAX_REPORTED_LOG_LINE`] characters with control characters made
/// spaces; when there were more, the last says how many were left out.
/// The host bounds what it sends with this, and the schedd what it takes.
pub fn bounded_log<S: AsRef<str>>(lines: &[S], more: u64) -> Vec<String> {
    let all = (lines.len() as u64).saturating_add(more);
    let keep = match all <= MAX_REPORTED_LOG_LINES as u64 {
        true => lines.len(),
        false => lines.len().min(MAX_REPORTED_LOG_LINES - 1),
    };
    let mut out: Vec<String> = lines[..keep]
        .iter()
        .map(|l| {
            l.as_ref()
                .chars()
                .take(MAX_REPORTED_LOG_LINE)
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect()
        })
        .collect();
    if all > keep as u64 {
        out.push(format!(
            "... and {} more lines of the job's log, not reported",
            all - keep as u64
        ));
    }
    out
}

/// The most bytes of files one message carries in all (well inside every
/// daemon's body limit once in base64): past it, even small files stream.
pub const INLINE_BUDGET: u64 = 4 << 20;

/// How a streamed file is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Streamed {
    /// Its length, bytes.
    pub size: u64,
    /// Its SHA-256 (hex), when the sender names it by content (input files,
    /// uploaded before the activation that names them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl FileData {
    /// A file carried in the message.
    pub fn inline(name: impl Into<String>, data: Vec<u8>) -> FileData {
        FileData { name: name.into(), data, streamed: None }
    }

    /// A file that moves as a stream of its own.
    pub fn streamed(name: impl Into<String>, size: u64, sha256: Option<String>) -> FileData {
        FileData { name: name.into(), data: Vec::new(), streamed: Some(Streamed { size, sha256 }) }
    }

    /// Its length, wherever its bytes are.
    pub fn len(&self) -> u64 {
        self.streamed.as_ref().map_or(self.data.len() as u64, |s| s.size)
    }

    /// True when it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The name the sandbox gives a job's standard input (HTCondor's
/// `_condor_stdin`): a contract between the host and the schedd.
pub const STDIN_NAME: &str = "_andes_stdin";
/// The sandbox name of a job's standard output.
pub const STDOUT_NAME: &str = "_andes_stdout";
/// The sandbox name of a job's standard error.
pub const STDERR_NAME: &str = "_andes_stderr";

/// The header naming the claim an input file is uploaded for
/// (`PUT /v1/host/inputs/{sha256}`). A claim id is a secret: it never goes in a path.
pub const CLAIM_HEADER: &str = "andes-claim";

/// `POST /v1/host/output`: one output file of a job that ended on a claim, which
/// its report named as streamed. Answered with the file as a streamed body.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OutputRequest {
    /// The claim.
    pub claim_id: String,
    /// The job's `GlobalJobId`.
    pub job: String,
    /// The output file's name, as the report gave it.
    pub name: String,
}

fn ser_b64<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(data))
}

fn de_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = String::deserialize(d)?;
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .map_err(|e| serde::de::Error::custom(format!("file data is not base64: {e}")))
}

/// True if `name` may be used as a sandbox-relative file name: not empty,
/// relative, no `..` or `.` components, no backslashes or NULs, at most
/// 255 bytes per component and 4096 in all.
pub fn safe_relative_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 4096
        && !name.starts_with('/')
        && !name.contains('\\')
        && !name.contains('\0')
        && !name.contains(':')
        && name.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && c.len() <= 255)
}

/// The public form of a claim id, for logs and messages: the slot it names
/// and the first bytes of its SHA-256, as HTCondor logs a claim's public part
/// only. A claim id is a bearer secret: whoever holds it may use the slot.
pub fn public_claim_id(claim_id: &str) -> String {
    use sha2::Digest;
    let slot = claim_id.split_once('#').map_or("?", |(s, _)| s);
    let slot: String = slot.chars().filter(char::is_ascii_alphanumeric).take(16).collect();
    let h = sha2::Sha256::digest(claim_id.as_bytes());
    format!("{slot}#{}…", hex::encode(&h[..4]))
}

/// `POST /v1/host/match`: the negotiator tells a host that a slot was matched.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatchNotice {
    /// The slot's `Name`.
    pub slot: String,
    /// The claim id of the match.
    pub claim_id: String,
    /// The slot is claimed and the negotiator matched it by user priority
    /// (PREEMPTION_REQUIREMENTS), not by the machine's RANK: its claim may
    /// preempt the current one although RANK does not prefer it. Without this
    /// word from the negotiator, a claim on a claimed slot preempts only when
    /// the slot's RANK strictly prefers it.
    #[serde(default)]
    pub priority: bool,
}

/// `POST /v1/host/claim`: a schedd claims a slot with the id the negotiator gave it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimRequest {
    /// The claim id.
    pub claim_id: String,
    /// The user the claim is for (`RemoteOwner`).
    pub owner: String,
    /// The submitter using it (`RemoteUser`), if not the owner.
    #[serde(default)]
    pub user: Option<String>,
    /// The schedd's name (`ClientMachine`).
    pub client_machine: String,
    /// The request (job) ad.
    pub ad: String,
    /// The claiming schedd's incarnation (random, new at each start): a host
    /// that sees a new one releases the claims of the old that run no job.
    #[serde(default)]
    pub incarnation: Option<String>,
    /// Seconds between the schedd's keep-alives (its ALIVE_INTERVAL): a claim
    /// that runs no job and is not heard from for MAX_CLAIM_ALIVES_MISSED of
    /// them is released.
    #[serde(default)]
    pub alive_interval: Option<u64>,
}

/// `POST /v1/host/alive`: the schedd still holds these claims (HTCondor's
/// claim keep-alive). Also tells the host the schedd's incarnation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AliveRequest {
    /// The schedd's incarnation.
    pub incarnation: String,
    /// The claims it holds on this host.
    #[serde(default)]
    pub claims: Vec<String>,
}

/// The answer to a keep-alive.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct AliveReply {
    /// Claims named that the host no longer holds for the caller.
    pub unknown: Vec<String>,
    /// Claims of the caller's earlier incarnations the host released.
    pub released: u32,
}

/// The answer to a claim.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimReply {
    /// True if the slot is now claimed by the caller.
    pub accepted: bool,
    /// Why not.
    #[serde(default)]
    pub reason: Option<String>,
    /// The slot's ad when claimed.
    #[serde(default)]
    pub slot_ad: Option<String>,
}

/// `POST /v1/host/activate`: run a job on a claim.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ActivateRequest {
    /// The claim.
    pub claim_id: String,
    /// The job ad, `$$()` references expanded against the slot's ad.
    pub job: String,
    /// `CmdDigest` of the module; the host answers 409 [`NEED_MODULE`] if it lacks it.
    pub module_digest: String,
    /// The input files (transfer_input_files and the stdin file).
    #[serde(default)]
    pub inputs: Vec<FileData>,
    /// JobLeaseDuration: seconds the host keeps the job without hearing from
    /// the schedd.
    pub lease_secs: u64,
    /// Milliseconds the host may wait for the job to end before answering
    /// (so a short job costs one round trip); 0 answers at once.
    #[serde(default)]
    pub wait_ms: u64,
    /// The state the job saved in an earlier run, which its `load` returns.
    #[serde(default)]
    pub saved_state: Option<SavedState>,
    /// The transparent checkpoint the job resumes from (a module compiled by
    /// `andes compile`), with every file content it names.
    #[serde(default)]
    pub snapshot: Option<SnapshotData>,
    /// More jobs for the claim, run one after another as each ends (each in
    /// an empty sandbox), without waiting for the schedd: a claim running
    /// short jobs costs one round trip per batch rather than per job. Their
    /// ends come in [`JobReport::ended`].
    #[serde(default)]
    pub more: Vec<QueuedJob>,
    /// Queues this activation's jobs behind those the claim runs or holds
    /// queued, rather than starting afresh (a schedd sends a claim's next
    /// batch of short jobs while the last one runs, so the slot never waits
    /// for it). The ends of earlier jobs stay in the claim's reports until
    /// [`acked`](Self::acked) covers them. Carries no checkpoint.
    #[serde(default)]
    pub append: bool,
    /// The ends the schedd has committed: every [`JobEnd`] of the claim up to
    /// this report version, which the host forgets. With `append` only (an
    /// activation that starts afresh acknowledges every end sent before it).
    #[serde(default)]
    pub acked: u64,
    /// Answers once this activation's first job has started (every job queued
    /// ahead of it has ended), or the claim ended, or `wait_ms` passed, rather
    /// than once all its jobs have ended.
    #[serde(default)]
    pub reply_at_start: bool,
}

/// A job queued behind the one an activation runs ([`ActivateRequest::more`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueuedJob {
    /// The job ad, `$$()` references expanded against the slot's ad; with
    /// [`delta`](Self::delta), only what differs from the activation's first.
    pub job: String,
    /// `job` holds only the attributes that differ from the activation's
    /// first job ad ([`ActivateRequest::job`]), bound over a copy of it, and
    /// [`unset`](Self::unset) names those of the first this job lacks (a
    /// batch of one cluster's jobs carries its ad once, not once a job).
    /// Sent only to a slot whose ad has `HasJobAdDeltas`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delta: bool,
    /// With [`delta`](Self::delta): the first job ad's attributes this job
    /// does not have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
    /// `CmdDigest` of the module; the host must have it (409 [`NEED_MODULE`]).
    pub module_digest: String,
    /// The input files.
    #[serde(default)]
    pub inputs: Vec<FileData>,
}

/// How one job of a claim ended (an entry of [`JobReport::ended`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobEnd {
    /// Its `GlobalJobId`.
    pub job: String,
    /// The report's version when it ended.
    pub version: u64,
    /// Its last update (usage), as an ad.
    pub update: String,
    /// Its ending (exit or hold attributes), as an ad.
    pub ending: String,
    /// Its output files.
    #[serde(default)]
    pub outputs: Vec<FileData>,
    /// Evicted rather than ended on its own.
    #[serde(default)]
    pub evicted: bool,
    /// The lines the job wrote to its log in the run ([`bounded_log`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<String>,
    /// How long the job itself ran on the host, in microseconds (its
    /// RemoteWallClockTime, finer): what tells a short job from a long one
    /// whatever the schedd waited besides. `None` from a host that does not
    /// say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_us: Option<u64>,
}

/// A transparent checkpoint on the wire: the signed snapshot and the contents
/// of the sandbox files it names (blobs, by BLAKE3) that the receiver lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotData {
    /// The snapshot's content hash (BLAKE3, hex, as its trailer holds it):
    /// its identity, which the shadow passes back as [`WaitRequest::snapshot`].
    pub hash: String,
    /// The signed snapshot, when carried in the message (empty when streamed).
    #[serde(serialize_with = "ser_b64", deserialize_with = "de_b64", default)]
    pub bytes: Vec<u8>,
    /// Set when the snapshot is larger than [`STREAM_OVER`]: its bytes move as a
    /// stream of their own (from the host: `POST /v1/host/snapshot`; to the host:
    /// uploaded as an input file by SHA-256 before the activation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed: Option<Streamed>,
    /// File contents, each named by its BLAKE3 (hex). From the host: those the
    /// shadow's last kept snapshot does not name; to the host: all of them. A
    /// big one is streamed like the snapshot's bytes.
    #[serde(default)]
    pub blobs: Vec<FileData>,
    /// True when the job stopped after it (the snapshot of a vacate).
    #[serde(default)]
    pub stopping: bool,
}

/// `POST /v1/host/snapshot`: a streamed part of the transparent checkpoint a
/// report named (its bytes, or one file content). Answered with it, streamed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotFileRequest {
    /// The claim.
    pub claim_id: String,
    /// The snapshot's hash, as the report gave it.
    pub hash: String,
    /// A file content's BLAKE3, or none for the snapshot's own bytes.
    #[serde(default)]
    pub blob: Option<String>,
}

/// The state a cooperative job saved (the guest SDK's `checkpoint.save`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedState {
    /// Counts the job's saves in this run, from 1.
    pub seq: u64,
    /// The bytes it saved, when carried (empty when streamed).
    #[serde(serialize_with = "ser_b64", deserialize_with = "de_b64", default)]
    pub data: Vec<u8>,
    /// Set when the state is larger than [`STREAM_OVER`]: it moves as a stream
    /// of its own (from the host: `POST /v1/host/saved`; to the host: uploaded
    /// as an input file by SHA-256 before the activation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streamed: Option<Streamed>,
}

/// `POST /v1/host/saved`: the saved state a report named as streamed.
/// Answered with it, streamed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SavedStateRequest {
    /// The claim.
    pub claim_id: String,
    /// Its `seq`, as the report gave it.
    pub seq: u64,
}

/// The reason of the 409 a host answers when it lacks the module: `PUT` it to
/// `/v1/host/modules/{digest}` and activate again.
pub const NEED_MODULE: &str = "need module";

/// The reason of the 409 a host answers to an activation of a preempting
/// claim while the slot's previous job is still leaving: activate again later.
pub const CLAIM_PENDING: &str = "claim pending";

/// How a host's refusal of a claim or an activation starts when it refuses
/// because it quarantined the job: it stopped while evaluating that job's
/// ad, and will not evaluate it again. The schedd holds the job.
pub const QUARANTINED: &str = "quarantined job ";

/// A host's refusal of job `gid` (its GlobalJobId), which it quarantined.
pub fn quarantined_refusal(gid: &str) -> String {
    format!(
        "{QUARANTINED}{gid}: the execute host stopped while evaluating this job's ad against its \
         policy; it does not evaluate it again (release the job once its expressions are fixed)"
    )
}

/// The GlobalJobId a refusal names, when it is [`quarantined_refusal`]'s.
pub fn quarantined_job(reason: &str) -> Option<&str> {
    reason.strip_prefix(QUARANTINED)?.split_once(':').map(|(gid, _)| gid)
}

/// `POST /v1/host/wait`: the shadow's long poll for the starter's updates.
/// Each one renews the job's lease.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WaitRequest {
    /// The claim.
    pub claim_id: String,
    /// The version of the last report seen; the host answers when it has a
    /// newer one, or when the next periodic update is due.
    pub since: u64,
    /// The `seq` of the last saved state received in this run: a report
    /// carries the job's saved state only when it is newer.
    #[serde(default)]
    pub saved_seq: u64,
    /// The hash of the transparent checkpoint the shadow keeps for the job
    /// (durably): a report carries the job's latest snapshot only when it is
    /// another, with the file contents this one does not name.
    #[serde(default)]
    pub snapshot: Option<String>,
    /// The asking schedd's incarnation: a schedd that restarted and follows
    /// a running job again takes the claim over for its new incarnation.
    #[serde(default)]
    pub incarnation: Option<String>,
    /// Seconds: the schedd wants a report at least this often (a job whose
    /// periodic policy reads its usage); the host answers at the earlier of
    /// this and its STARTER_UPDATE_INTERVAL, never more often than every
    /// second.
    #[serde(default)]
    pub report_within: Option<u64>,
    /// Milliseconds: with jobs queued on the claim behind the running one,
    /// the host answers once they have all ended (or the claim is gone), or
    /// this long after the request, whichever comes first, rather than at
    /// the next newer report. A shadow following a batch of short jobs asks
    /// it, so that their ends come in one report, not one request each.
    /// 0: at the next newer report.
    #[serde(default)]
    pub settle_ms: u64,
}

/// What a job is doing on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunState {
    /// No job on the claim (it ended and the report was taken, or none started).
    Idle,
    /// Running.
    Running,
    /// Suspended by the startd's policy.
    Suspended,
    /// Ended: [`JobReport::ending`] says how.
    Exited,
}

/// The starter's update (`starter → shadow` in the job-ad flow).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobReport {
    /// Grows with every change; pass it back as [`WaitRequest::since`].
    pub version: u64,
    /// What the job is doing.
    pub state: RunState,
    /// The job's `GlobalJobId`, if a job is on the claim.
    #[serde(default)]
    pub job: Option<String>,
    /// RemoteUserCpu, RemoteSysCpu, ImageSize, DiskUsage, JobState,
    /// WasmFuelConsumed and, on exit, ExitCode/ExitBySignal/ExitSignal, as an ad.
    pub update: String,
    /// When exited: the ending (exit or hold attributes) as an ad.
    #[serde(default)]
    pub ending: Option<String>,
    /// When exited: the output files.
    #[serde(default)]
    pub outputs: Vec<FileData>,
    /// True if the job was evicted (vacated, preempted, killed by the host's
    /// policy) rather than ending on its own: the job goes back to idle.
    #[serde(default)]
    pub evicted: bool,
    /// When exited: the lines the job wrote to its log ([`bounded_log`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<String>,
    /// False once the host has ended the claim (preempted, released, expired).
    pub claim_alive: bool,
    /// The job's last saved state, when newer than the shadow has.
    #[serde(default)]
    pub saved_state: Option<SavedState>,
    /// The job's latest transparent checkpoint, when it is not the one the
    /// shadow keeps ([`WaitRequest::snapshot`]).
    #[serde(default)]
    pub snapshot: Option<SnapshotData>,
    /// Jobs of the claim's current activation that ended after the version
    /// the shadow had seen ([`WaitRequest::since`]), in order; the last of
    /// them may be the job above.
    #[serde(default)]
    pub ended: Vec<JobEnd>,
    /// Jobs of the activation still waiting for their turn on the claim.
    #[serde(default)]
    pub queued: u32,
}

/// `POST /v1/host/edit`: qedit of a running job reaches the host's copy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EditRequest {
    /// The claim.
    pub claim_id: String,
    /// The attributes, as an ad.
    pub attrs: String,
}

/// `POST /v1/host/withdraw`: a job queued on a claim behind others was held
/// or removed: the host drops it unless it has started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WithdrawRequest {
    /// The claim.
    pub claim_id: String,
    /// The job's ClusterId.
    pub cluster: u32,
    /// The job's ProcId.
    pub proc: u32,
}

/// The answer to a [`WithdrawRequest`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WithdrawReply {
    /// True when the job was still queued and will not run; false when it
    /// is not among the claim's queued jobs (it started, or ended).
    pub withdrawn: bool,
}

/// `POST /v1/host/vacate`: the claim's running job is vacated as the
/// startd's policy vacates it (condor_vacate_job): asked to leave, it
/// checkpoints if it can and ends evicted, within the slot's vacate time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VacateJobRequest {
    /// The claim.
    pub claim_id: String,
}

/// The most bytes one tail request returns.
pub const MAX_TAIL: u64 = 1 << 20;

/// `POST /v1/host/tail` (and the schedd's `POST /v1/tail`): a running job's
/// standard output or error as it is written (condor_tail).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TailRequest {
    /// The claim whose running job's stream is read.
    #[serde(default)]
    pub claim_id: String,
    /// Its standard error instead of its output.
    #[serde(default)]
    pub stderr: bool,
    /// Where to read from; none: the last `max` bytes.
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most this many bytes (at most [`MAX_TAIL`]).
    pub max: u64,
}

/// What a [`TailRequest`] found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TailReply {
    /// Where `data` starts in the stream.
    pub offset: u64,
    /// The bytes.
    #[serde(serialize_with = "ser_b64", deserialize_with = "de_b64", default)]
    pub data: Vec<u8>,
    /// The stream's length now.
    pub size: u64,
}

/// `POST /v1/host/release`: the schedd is done with a claim (any job on it is killed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReleaseRequest {
    /// The claim.
    pub claim_id: String,
}

/// One group of a schedd's idle jobs that match alike (an autocluster).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DemandGroup {
    /// The autocluster id (the schedd's own numbering).
    pub autocluster: u32,
    /// The submitter (`Owner@UidDomain` style name).
    pub submitter: String,
    /// A representative job ad, `$$()` not expanded.
    pub ad: String,
    /// Idle jobs in the group.
    pub idle: u32,
}

/// `POST /v1/negotiate/demand`: the negotiator asks for the idle jobs,
/// grouped by the attributes that matter to this pool's machines.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DemandRequest {
    /// The job attributes that can change a match (the autocluster key).
    #[serde(default)]
    pub significant: Vec<String>,
}

/// The schedd's idle demand, for one negotiation cycle.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DemandReply {
    /// The schedd's name.
    pub schedd: String,
    /// Its groups.
    pub groups: Vec<DemandGroup>,
    /// Running jobs per submitter.
    #[serde(default)]
    pub running: Vec<(String, u32)>,
}

/// One match the negotiator hands a schedd.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatchGrant {
    /// The autocluster matched.
    pub autocluster: u32,
    /// The slot's ad (public part).
    pub slot_ad: String,
    /// The claim id to claim it with.
    pub claim_id: String,
    /// The host's address (`host:port`).
    pub host_address: String,
    /// True when this match preempts a running claim (rank or priority).
    #[serde(default)]
    pub preempting: bool,
}

/// An autocluster the negotiator could not match, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatchRejection {
    /// The autocluster.
    pub autocluster: u32,
    /// LastRejMatchReason.
    pub reason: String,
    /// The negotiator quarantined the request (it stopped or failed while
    /// matching it, and will not match it again): the schedd holds the
    /// autocluster's idle jobs with `reason`.
    #[serde(default)]
    pub quarantined: bool,
}

/// `POST /v1/negotiate/matches`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MatchesRequest {
    /// The matches.
    pub matches: Vec<MatchGrant>,
    /// The rejections.
    #[serde(default)]
    pub rejections: Vec<MatchRejection>,
}

/// What the schedd did with the matches.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MatchesReply {
    /// Matches it will claim.
    pub taken: u32,
    /// The claim ids of the matches it will claim: only their hosts hear of
    /// the match (a slot put in the Matched state for a match nobody claims
    /// would refuse every other for MATCH_TIMEOUT).
    #[serde(default)]
    pub claimed: Vec<String>,
}

/// `POST /v1/collector/update`: publish an ad (machine ads from hosts,
/// Scheduler and Submitter ads from schedds).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CollectorUpdate {
    /// The ad's type: `Machine`, `Scheduler`, `Submitter` or `Negotiator`.
    pub kind: String,
    /// The ad.
    pub ad: String,
    /// Its private part (a slot's `ClaimId`), never shown to queries. In a
    /// delta, absent means the private part is unchanged.
    #[serde(default)]
    pub private: Option<String>,
    /// The number the publisher gives this ad of its slot, new at each ad it
    /// sends: a later delta names it as its `base`. Only to a collector whose
    /// reply said it takes deltas ([`CollectorUpdatesReply::takes_deltas`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<u64>,
    /// When set, `ad` is a delta: the `Name`, and the attributes that differ
    /// from the ad of serial `base` this publisher sent before (which the
    /// collector must hold, else it refuses the delta as stale, and the
    /// whole ad is sent again); `unset` names those the new ad lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<u64>,
    /// In a delta: the attributes of the base ad the new ad lacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unset: Vec<String>,
}

impl CollectorUpdate {
    /// A whole ad of `kind`, with its private part.
    pub fn whole(kind: &str, ad: String, private: Option<String>) -> CollectorUpdate {
        CollectorUpdate {
            kind: kind.into(),
            ad,
            private,
            serial: None,
            base: None,
            unset: Vec::new(),
        }
    }
}

/// `POST /v1/collector/updates`: several ads in one request (what a host's
/// slots changed in one round), applied in order, each as its own update; at
/// most [`MAX_COLLECTOR_UPDATES`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CollectorUpdates {
    /// The updates, in order.
    pub updates: Vec<CollectorUpdate>,
}

/// The most updates one [`CollectorUpdates`] request may carry.
pub const MAX_COLLECTOR_UPDATES: usize = 1024;

/// The collector's answer to [`CollectorUpdates`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CollectorUpdatesReply {
    /// Seconds the ads live unless refreshed (the least of theirs).
    pub lifetime: i64,
    /// The collector's incarnation (see [`CollectorUpdateReply`]).
    pub incarnation: String,
    /// The updates refused, by index in the request, with why; the others
    /// were kept.
    #[serde(default)]
    pub refused: Vec<(usize, String)>,
    /// The deltas refused because the collector no longer holds their base
    /// (it restarted, the ad expired or was replaced), by index: their
    /// publisher sends those ads whole.
    #[serde(default)]
    pub stale: Vec<usize>,
    /// Whether this collector takes deltas ([`CollectorUpdate::base`]).
    #[serde(default)]
    pub takes_deltas: bool,
}

/// `POST /v1/collector/invalidate`: withdraw an ad.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CollectorInvalidate {
    /// The ad's type.
    pub kind: String,
    /// Its `Name`.
    pub name: String,
}

/// The collector's answer to an update.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CollectorUpdateReply {
    /// Seconds the ad lives unless refreshed (its `ClassAdLifetime`, else
    /// CLASSAD_LIFETIME).
    pub lifetime: i64,
    /// The collector's incarnation (random, new at each start): a publisher
    /// that sees it change sends all its ads again at once, since a
    /// restarted collector holds none.
    #[serde(default)]
    pub incarnation: String,
}

/// `POST /v1/collector/query`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CollectorQuery {
    /// Only ads of this type (none: every type).
    #[serde(default)]
    pub kind: Option<String>,
    /// Only ads for which this expression is true.
    #[serde(default)]
    pub constraint: Option<String>,
    /// Only these attributes (none: all).
    #[serde(default)]
    pub projection: Vec<String>,
}

/// The ads a collector query found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CollectorQueryReply {
    /// The ads, in new ClassAd syntax.
    pub ads: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_log_is_bounded_in_lines_and_characters_and_says_what_it_left_out() {
        let long = "x".repeat(MAX_REPORTED_LOG_LINE + 10);
        assert_eq!(
            bounded_log(&["a\nb", long.as_str()], 0),
            ["a b".to_string(), "x".repeat(MAX_REPORTED_LOG_LINE)]
        );
        let full: Vec<String> = (0..MAX_REPORTED_LOG_LINES).map(|i| i.to_string()).collect();
        assert_eq!(bounded_log(&full, 0), full);
        let over = bounded_log(&full, 5);
        assert_eq!(over.len(), MAX_REPORTED_LOG_LINES);
        assert_eq!(over[MAX_REPORTED_LOG_LINES - 2], (MAX_REPORTED_LOG_LINES - 2).to_string());
        assert_eq!(over.last().unwrap(), "... and 6 more lines of the job's log, not reported");
        assert!(bounded_log::<&str>(&[], 0).is_empty());
    }

    #[test]
    fn file_data_round_trips_as_base64() {
        let f = FileData::inline("out/x.bin", vec![0, 1, 2, 255]);
        let j = serde_json::to_string(&f).unwrap();
        assert_eq!(j, r#"{"name":"out/x.bin","data":"AAEC/w=="}"#);
        assert_eq!(serde_json::from_str::<FileData>(&j).unwrap(), f);
        let bad = r#"{"name":"x","data":"***"}"#;
        assert!(serde_json::from_str::<FileData>(bad).unwrap_err().to_string().contains("base64"));
    }

    #[test]
    fn relative_names() {
        for ok in ["a", "a/b.txt", "dir/sub/file"] {
            assert!(safe_relative_name(ok), "{ok}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a\\b", "c:x", "a\0"] {
            assert!(!safe_relative_name(bad), "{bad:?}");
        }
    }
}
