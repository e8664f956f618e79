//! A job's files on the submit side: which input files it names, where its
//! output files go, and the spool of a job submitted with `--spool`.
//!
//! Two ways a job's files travel, as in HTCondor:
//!
//! - **From the submitter's directories** (the default): the schedd reads
//!   the inputs and writes the outputs and the event log at the paths of the
//!   job ad, with the owner's rights (the schedd's `userfs`).
//! - **Spooled** (`andes submit --spool`, condor_submit -spool): the
//!   submitting command reads the inputs itself and uploads them; the job ad
//!   names them in [`SPOOLED_INPUT`]. The schedd keeps the outputs and the
//!   event log in its own spool ([`spooled_dir`]), and the job stays in the
//!   queue once completed (`LeaveJobInQueue`) until its owner fetches them
//!   with `andes transfer-data` (condor_transfer_data). The schedd never
//!   touches the submitter's paths for such a job.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use andes_beneath::{Beneath, Kind};
use andes_protocol::pool::{FileData, safe_relative_name};
use classad::{ClassAd, Value};

use crate::ids::{JobId, JobSelector};
use andes_protocol::pool::{STDERR_NAME, STDIN_NAME, STDOUT_NAME};

/// `SpooledInput`: the input files of a job submitted with `andes submit
/// -spool`, uploaded beforehand: `name=sha256:<hex>` pairs, comma separated.
/// The schedd reads them from its own store, never from the submitter's
/// directories.
pub const SPOOLED_INPUT: &str = "SpooledInput";

/// The (name, digest) pairs of a [`SPOOLED_INPUT`] list; malformed items are
/// skipped (the submit refuses them).
pub fn spooled_inputs(list: &str) -> Vec<(String, String)> {
    list.split(',')
        .filter_map(|item| {
            let (name, digest) = item.trim().rsplit_once('=')?;
            Some((name.trim().to_string(), digest.trim().to_string()))
        })
        .filter(|(n, d)| !n.is_empty() && d.starts_with("sha256:"))
        .collect()
}

/// `sha256:<hex>` of a module.
pub fn module_digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Input files a job may name at most.
pub const MAX_INPUT_FILES: usize = 10_000;

/// The name of a spooled job's event log in its spool directory.
pub const SPOOLED_LOG: &str = "_andes_userlog";

/// `LeaveJobInQueue` of a spooled job: it stays in the queue once completed
/// until its output is fetched (`StageOutFinish` set), or for ten days.
pub const SPOOLED_LEAVE_IN_QUEUE: &str = "JobStatus == 4 && StageOutFinish =?= undefined && \
     (CompletionDate =?= undefined || CompletionDate == 0 || time() - CompletionDate < 864000)";

fn str_attr<N: classad::NameRef + ?Sized>(job: &ClassAd, name: &N) -> Option<String> {
    match job.eval_attr(name) {
        Value::Str(s) => Some(s.to_string()),
        _ => None,
    }
}

/// True when the job was submitted with `--spool`: its inputs were uploaded,
/// its outputs stay in the schedd's spool.
pub fn is_spooled(job: &ClassAd) -> bool {
    matches!(job.eval_attr(classad::name!(SPOOLED_INPUT)), Value::Str(_))
}

/// The job's initial working directory (`Iwd`), where relative paths start.
pub fn iwd_of(job: &ClassAd) -> PathBuf {
    PathBuf::from(str_attr(job, classad::name!("Iwd")).unwrap_or_else(|| ".".into()))
}

/// `p` against `iwd` unless absolute.
pub fn resolve(iwd: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() { p.to_path_buf() } else { iwd.join(p) }
}

/// The bytes a job's input files may hold in all: its RequestDisk, else 1 GiB.
pub fn input_limit(job: &ClassAd) -> u64 {
    match job.eval_attr(classad::name!("RequestDisk")) {
        Value::Int(kib) if kib > 0 => (kib as u64).saturating_mul(1024),
        _ => 1 << 30,
    }
}

/// A file transfer that failed: what and where, and the Unix errno behind
/// it (0 when there is none), which HTCondor gives as the HoldReasonSubCode
/// of its transfer holds (12 output, 13 input).
#[derive(Debug, Clone, PartialEq)]
pub struct TransferError {
    /// What failed, naming the file.
    pub message: String,
    /// The operating system's error number, or 0.
    pub errno: i32,
}

impl TransferError {
    /// `message`, with `e`'s error number.
    pub fn io(message: String, e: &std::io::Error) -> TransferError {
        TransferError { message, errno: e.raw_os_error().unwrap_or(0) }
    }
}

impl From<String> for TransferError {
    fn from(message: String) -> TransferError {
        TransferError { message, errno: 0 }
    }
}

impl From<&str> for TransferError {
    fn from(message: &str) -> TransferError {
        TransferError { message: message.to_string(), errno: 0 }
    }
}

impl std::fmt::Display for TransferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TransferError {}

/// `PreserveRelativePaths` (`preserve_relative_paths`): a file or directory
/// named by a relative path in a transfer list keeps that path in the
/// sandbox and back, not only its base name.
pub const PRESERVE_RELATIVE_PATHS: &str = "PreserveRelativePaths";

/// `TransferOutputRemaps` (`transfer_output_remaps`): `name = newname` pairs
/// separated by `;` (`\=` and `\;` escape), where an output file returned
/// as `name` is written instead (see [`parse_remaps`], [`remap`]).
pub const OUTPUT_REMAPS: &str = "TransferOutputRemaps";

/// How many remaps may apply one after another to one name before they are
/// taken for a cycle (HTCondor's `MAX_REMAP_RECURSIONS`).
pub const MAX_REMAP_DEPTH: usize = 128;

/// The most `name = newname` pairs a job's remaps may hold: each output file
/// of up to [`MAX_REMAP_DEPTH`] steps is then a bounded amount of work
/// (`andes submit` refuses more, with the same figure).
pub const MAX_REMAPS: usize = 1_000;

/// True when the job asks for [`PRESERVE_RELATIVE_PATHS`].
pub fn preserves_relative_paths(job: &ClassAd) -> bool {
    matches!(job.eval_attr(classad::name!(PRESERVE_RELATIVE_PATHS)), Value::Bool(true))
}

/// The `name = newname` pairs of a [`OUTPUT_REMAPS`] value, in order, as
/// HTCondor reads them: pairs separated by `;`, each split at its first `=`,
/// spaces around either trimmed, `\=` and `\;` standing for the character
/// itself (a backslash before anything else is kept); empty pairs are
/// skipped. A pair without `=`, or with nothing on one side, is an error.
/// `andes submit` reads the command the same way.
pub fn parse_remaps(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut side = [String::new(), String::new()];
    let mut at = 0;
    let mut chars = text.chars().peekable();
    let mut finish = |side: &mut [String; 2], at: usize| -> Result<(), String> {
        let (name, target) = (side[0].trim().to_string(), side[1].trim().to_string());
        side[0].clear();
        side[1].clear();
        if at == 0 {
            return if name.is_empty() {
                Ok(())
            } else {
                Err(format!("{name:?} is not a remap: write it as name = newname"))
            };
        }
        if name.is_empty() || target.is_empty() {
            return Err(format!(
                "\"{name} = {target}\" is not a remap: the name and the new name must both be given"
            ));
        }
        if out.len() == MAX_REMAPS {
            return Err(format!("more than {MAX_REMAPS} remaps"));
        }
        out.push((name, target));
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some('=' | ';')) => {
                side[at].push(chars.next().unwrap_or_default());
            }
            ';' => {
                finish(&mut side, at)?;
                at = 0;
            }
            '=' if at == 0 => at = 1,
            '\t' | '\n' | '\r' => {}
            c => side[at].push(c),
        }
    }
    finish(&mut side, at)?;
    Ok(out)
}

/// Where output file `name` goes by the `remaps` ([`parse_remaps`]), as
/// HTCondor finds it: the first pair naming it exactly, then the remaps of
/// what that gives (so `a = b; b = c` sends `a` to `c`); a name no pair
/// names goes where its parent directory goes, if some pair remaps that
/// (`d = out` sends `d/x` to `out/x`). `None`: no remap applies. A chain
/// longer than [`MAX_REMAP_DEPTH`] is a cycle, an error.
pub fn remap(remaps: &[(String, String)], name: &str) -> Result<Option<String>, String> {
    remap_in(&index_remaps(remaps), name)
}

/// The remaps by name, the first pair naming each.
fn index_remaps(remaps: &[(String, String)]) -> HashMap<&str, &str> {
    let mut by_name = HashMap::with_capacity(remaps.len());
    for (n, to) in remaps {
        by_name.entry(n.as_str()).or_insert(to.as_str());
    }
    by_name
}

/// [`remap`] over remaps indexed by name.
fn remap_in(rules: &HashMap<&str, &str>, name: &str) -> Result<Option<String>, String> {
    fn find(rules: &HashMap<&str, &str>, name: &str, depth: usize) -> Option<Option<String>> {
        if depth > MAX_REMAP_DEPTH {
            return None;
        }
        if let Some(&to) = rules.get(name) {
            let further = find(rules, to, depth + 1)?;
            return Some(Some(further.unwrap_or_else(|| to.to_string())));
        }
        match name.rsplit_once('/') {
            Some((parent, entry)) if !parent.is_empty() => {
                Some(find(rules, parent, depth + 1)?.map(|p| format!("{p}/{entry}")))
            }
            _ => Some(None),
        }
    }
    find(rules, name, 0)
        .ok_or_else(|| format!("transfer_output_remaps make a cycle for output file {name}"))
}

/// True when `target` is a URL (`scheme://...`), as HTCondor's remaps may
/// name for its file transfer plugins: andes has none, and writes no output
/// to a URL.
pub fn is_url(target: &str) -> bool {
    target.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

/// The sandbox name of `item`, a relative path in a transfer list, when
/// the job preserves relative paths: its components without `.` and empty
/// ones. A path that leaves its directory (`..`) or is no plain relative
/// name is refused: nothing is ever placed outside the sandbox.
pub fn preserved_name(item: &str) -> Result<String, String> {
    let parts: Vec<&str> = item.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let name = parts.join("/");
    if parts.contains(&"..") || !safe_relative_name(&name) {
        return Err(format!(
            "{item} cannot keep its relative path in the job's sandbox \
             (preserve_relative_paths): a preserved path must stay beneath the job's directory"
        ));
    }
    Ok(name)
}

/// The input files a job names on the submit side, as (name in the sandbox,
/// path): TransferInput (a file under its base name, a directory with its
/// contents under its base name; with [`PRESERVE_RELATIVE_PATHS`], a relative
/// one under its relative path, see [`preserved_name`]) and the stdin file
/// (`In`). Listing a directory reads the submitter's file system: call it
/// with their rights.
pub fn input_files(job: &ClassAd) -> Result<Vec<(String, PathBuf)>, String> {
    let iwd = iwd_of(job);
    let preserve = preserves_relative_paths(job);
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let push = |name: String, path: PathBuf, out: &mut Vec<(String, PathBuf)>| {
        if out.len() >= MAX_INPUT_FILES {
            return Err(format!("more than {MAX_INPUT_FILES} input files"));
        }
        out.push((name, path));
        Ok(())
    };
    if let Some(list) = str_attr(job, classad::name!("TransferInput")) {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let path = resolve(&iwd, item);
            let base = if preserve && !Path::new(item).is_absolute() {
                preserved_name(item)?
            } else {
                path.file_name()
                    .map(|b| b.to_string_lossy().to_string())
                    .ok_or_else(|| format!("input file {item} has no name"))?
            };
            if path.is_dir() {
                let mut stack = vec![(path.clone(), base)];
                while let Some((dir, prefix)) = stack.pop() {
                    let rd = std::fs::read_dir(&dir).map_err(|e| {
                        format!("cannot read input directory {}: {e}", dir.display())
                    })?;
                    for e in rd.flatten() {
                        let name = format!("{prefix}/{}", e.file_name().to_string_lossy());
                        let p = e.path();
                        if p.is_dir() {
                            stack.push((p, name));
                        } else {
                            push(name, p, &mut out)?;
                        }
                    }
                }
            } else {
                push(base, path, &mut out)?;
            }
        }
    }
    if let Some(input) = str_attr(job, classad::name!("In"))
        && input != "/dev/null"
    {
        push(STDIN_NAME.to_string(), resolve(&iwd, &input), &mut out)?;
    }
    Ok(out)
}

/// A job's input files: those small enough to travel in the activation, and
/// the big ones ([`andes_protocol::pool::STREAM_OVER`]) named by SHA-256, each
/// with its file open for the upload that goes before the activation.
#[derive(Debug, Default)]
pub struct Inputs {
    /// Every input file, in order (the big ones as streamed).
    pub files: Vec<FileData>,
    /// The big ones' contents: SHA-256 (hex) → the open file.
    pub sources: Vec<(String, std::fs::File)>,
}

impl Inputs {
    /// Adds a file opened for reading (`len` bytes): carried when small
    /// (and the files carried stay within [`andes_protocol::pool::INLINE_BUDGET`]),
    /// else streamed. `total` and `limit` bound the bytes of all.
    pub fn add(
        &mut self,
        name: String,
        mut file: std::fs::File,
        len: u64,
        total: &mut u64,
        limit: u64,
    ) -> Result<(), String> {
        *total = total.saturating_add(len);
        if *total > limit {
            return Err(format!(
                "the input files exceed the job's RequestDisk ({} KiB)",
                limit / 1024
            ));
        }
        let inline: u64 = self.files.iter().map(|f| f.data.len() as u64).sum();
        if len > andes_protocol::pool::STREAM_OVER
            || inline + len > andes_protocol::pool::INLINE_BUDGET
        {
            let (sha, len) = andes_protocol::stream::file_sha256(&mut file)
                .map_err(|e| format!("cannot read input file {name}: {e}"))?;
            let sha = hex::encode(sha);
            self.files.push(FileData::streamed(name, len, Some(sha.clone())));
            self.sources.push((sha, file));
        } else {
            use std::io::Read;
            let mut data = Vec::with_capacity(len as usize);
            file.take(andes_protocol::pool::STREAM_OVER + 1)
                .read_to_end(&mut data)
                .map_err(|e| format!("cannot read input file {name}: {e}"))?;
            self.files.push(FileData::inline(name, data));
        }
        Ok(())
    }

    /// True when some file is streamed.
    pub fn streams(&self) -> bool {
        !self.sources.is_empty()
    }

    /// Every file with its bytes in memory (for a destination that takes whole
    /// bodies only: the schedd's upload store).
    pub fn into_inline(self) -> Result<Vec<FileData>, String> {
        use std::io::Read;
        let sources: HashMap<String, std::fs::File> = self.sources.into_iter().collect();
        let mut out = Vec::with_capacity(self.files.len());
        for f in self.files {
            let Some(s) = &f.streamed else {
                out.push(f);
                continue;
            };
            let sha = s.sha256.clone().unwrap_or_default();
            let mut data = Vec::new();
            let mut file = sources
                .get(&sha)
                .and_then(|f| f.try_clone().ok())
                .ok_or_else(|| format!("input file {} is not open", f.name))?;
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))
                .and_then(|_| file.read_to_end(&mut data))
                .map_err(|e| format!("cannot read input file {}: {e}", f.name))?;
            out.push(FileData::inline(f.name, data));
        }
        Ok(out)
    }
}

/// Opens `files` (as [`input_files`] lists them), at most `limit` bytes in all:
/// small ones read, big ones left open for streaming. Call it with the owner's
/// rights: the files are opened with them.
pub fn read_files(files: &[(String, PathBuf)], limit: u64) -> Result<Inputs, TransferError> {
    let mut out = Inputs::default();
    let mut total = 0u64;
    let failed = |path: &Path, e: std::io::Error| {
        TransferError::io(format!("cannot read input file {}: {e}", path.display()), &e)
    };
    for (name, path) in files {
        let file = std::fs::File::open(path).map_err(|e| failed(path, e))?;
        let len = file.metadata().map_err(|e| failed(path, e))?.len();
        out.add(name.clone(), file, len, &mut total, limit)?;
    }
    Ok(out)
}

/// Where each output file goes on the submit side: the streams to `Out` and
/// `Err`, the rest into `Iwd` under their own names, or where the job's
/// [`OUTPUT_REMAPS`] send them (relative to `Iwd`, or absolute; see
/// [`remap`]). `None` for a stream the job does not keep. The name is the
/// host's, checked before any remap; a remap to a URL is refused.
pub fn output_path(job: &ClassAd, name: &str) -> Result<Option<PathBuf>, String> {
    OutputPlaces::of(job)?.path(name)
}

/// Where a job's output files go ([`output_path`]), its remaps read once
/// for all of its files.
pub struct OutputPlaces {
    iwd: PathBuf,
    out: Option<String>,
    err: Option<String>,
    remaps: Vec<(String, String)>,
}

impl OutputPlaces {
    /// The places of `job`'s outputs; its remaps must read.
    pub fn of(job: &ClassAd) -> Result<OutputPlaces, String> {
        let remaps = match str_attr(job, OUTPUT_REMAPS) {
            None => Vec::new(),
            Some(text) => parse_remaps(&text)
                .map_err(|e| format!("transfer_output_remaps = {text:?}: {e}"))?,
        };
        Ok(OutputPlaces {
            iwd: iwd_of(job),
            out: str_attr(job, classad::name!("Out")),
            err: str_attr(job, classad::name!("Err")),
            remaps,
        })
    }

    /// Where output file `name` (as the host named it) goes, as [`output_path`].
    pub fn path(&self, name: &str) -> Result<Option<PathBuf>, String> {
        self.paths(std::iter::once(name)).next().unwrap_or(Ok(None))
    }

    /// [`OutputPlaces::path`] of each of `names`, the remaps indexed once.
    pub fn paths<'n>(
        &'n self,
        names: impl IntoIterator<Item = &'n str> + 'n,
    ) -> impl Iterator<Item = Result<Option<PathBuf>, String>> + 'n {
        let rules = index_remaps(&self.remaps);
        names.into_iter().map(move |name| self.place(&rules, name))
    }

    fn place(&self, rules: &HashMap<&str, &str>, name: &str) -> Result<Option<PathBuf>, String> {
        if !safe_relative_name(name) {
            return Err(format!("the host sent an output file named {name:?}"));
        }
        let iwd = &self.iwd;
        Ok(match name {
            STDOUT_NAME => self.out.as_deref().map(|p| resolve(iwd, p)),
            STDERR_NAME => self.err.as_deref().map(|p| resolve(iwd, p)),
            name if rules.is_empty() => Some(iwd.join(name)),
            name => match remap_in(rules, name)? {
                None => Some(iwd.join(name)),
                Some(to) if is_url(&to) => {
                    return Err(format!(
                        "transfer_output_remaps sends output file {name} to the URL {to}; \
                             andes writes output files to paths only"
                    ));
                }
                Some(to) => Some(resolve(iwd, &to)),
            },
        })
    }
}

/// Writes `data` (what `fill` writes, the bytes it returns written) as the
/// output file at `path`, made if missing, without following a link there,
/// and only as a regular file: a job's output never lands where a link in
/// its directory points, nor in a FIFO or a device. An older file of that
/// name is written over from its start, then cut to the new length; one that
/// cannot be written whole is left empty, never part old and part new. (A
/// file truncated to nothing first is, on ext4, flushed to disk when it is
/// closed: that made most of a short job's cost to the schedd.)
pub fn write_output(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<u64>,
) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let mut f = o.open(path).map_err(|e| {
        if e.raw_os_error() == Some(libc_eloop()) {
            std::io::Error::other(format!("{} is a symbolic link", path.display()))
        } else {
            e
        }
    })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other(format!("{} is not a regular file", path.display())));
    }
    match fill(&mut f) {
        Ok(n) if n < m.len() => f.set_len(n),
        Ok(_) => Ok(()),
        Err(e) => {
            let _ = f.set_len(0);
            Err(e)
        }
    }
}

fn libc_eloop() -> i32 {
    #[cfg(unix)]
    return libc::ELOOP;
    #[cfg(not(unix))]
    -1
}

/// Writes the output files into the submitter's directories (the streams to
/// `Out` and `Err`, the rest into `Iwd`): their bytes, or for a streamed one
/// the contents of its staged file in `staged` (opened by the schedd, copied
/// here). Call it with the owner's rights.
pub fn write_outputs(
    job: &ClassAd,
    outputs: &[FileData],
    staged: &mut HashMap<String, std::fs::File>,
) -> Result<(), TransferError> {
    let places = OutputPlaces::of(job)?;
    let targets: Vec<_> = places.paths(outputs.iter().map(|f| f.name.as_str())).collect();
    for (f, target) in outputs.iter().zip(targets) {
        let Some(target) = target? else { continue };
        // One look for a directory that is there (the common case), rather
        // than a mkdir that fails.
        if let Some(parent) = target.parent().filter(|p| !p.is_dir()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                TransferError::io(format!("cannot create {}: {e}", parent.display()), &e)
            })?;
        }
        let written = match (&f.streamed, staged.get_mut(&f.name)) {
            (None, _) => write_output(&target, |to| {
                std::io::Write::write_all(to, &f.data).map(|()| f.data.len() as u64)
            }),
            (Some(_), Some(from)) => write_output(&target, |to| std::io::copy(from, to)),
            (Some(_), None) => Err(std::io::Error::other("it was not transferred")),
        };
        written.map_err(|e| {
            TransferError::io(format!("cannot write output file {}: {e}", target.display()), &e)
        })?;
    }
    Ok(())
}

/// Where a spooled job's outputs and event log are kept: `SPOOL/spooled/<id>`.
pub fn spooled_dir(spool: &Path, id: JobId) -> PathBuf {
    spool.join("spooled").join(id.to_string())
}

/// Keeps a spooled job's output files in its spool directory (under their
/// sandbox names), following no link.
pub fn keep_spooled_outputs(
    dir: &Path,
    outputs: &[FileData],
    staged: &HashMap<String, PathBuf>,
) -> Result<(), String> {
    let b = Beneath::create(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for f in outputs {
        if !safe_relative_name(&f.name) || f.name == SPOOLED_LOG {
            return Err(format!("the host sent an output file named {:?}", f.name));
        }
        if f.streamed.is_none() {
            b.write_atomic(&f.name, &f.data, true).map_err(|e| format!("spooling output {e}"))?;
            continue;
        }
        // A streamed one, staged under SPOOL too: moved in, synced.
        let from = staged
            .get(&f.name)
            .ok_or_else(|| format!("output file {} was not transferred", f.name))?;
        if let Some((parent, _)) = f.name.rsplit_once('/') {
            b.create_dirs(parent).map_err(|e| format!("spooling output {e}"))?;
        }
        let moved = std::fs::File::open(from).and_then(|x| x.sync_all()).and_then(|()| {
            std::fs::rename(from, dir.join(&f.name))
                .or_else(|_| std::fs::copy(from, dir.join(&f.name)).map(|_| ()))
        });
        moved.map_err(|e| format!("spooling output {}: {e}", f.name))?;
    }
    Ok(())
}

/// A spooled job's kept output files (the small ones' bytes, the big ones
/// named as streamed) and its event log's text (at most `limit` bytes).
pub fn spooled_outputs(dir: &Path, limit: u64) -> Result<(Vec<FileData>, String), String> {
    let b = match Beneath::open(dir) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), String::new()));
        }
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut files = Vec::new();
    let mut log = String::new();
    let mut carried = 0u64;
    for e in b.walk("", MAX_INPUT_FILES).map_err(|e| e.to_string())? {
        let last = e.path.rsplit('/').next().unwrap_or(&e.path);
        // A write cut short leaves its temporary file (`.NAME.tmpPID`) behind.
        if e.kind != Kind::File || (last.starts_with('.') && last.contains(".tmp")) {
            continue;
        }
        if e.path == SPOOLED_LOG {
            let data = b.read(&e.path, limit).map_err(|e| e.to_string())?;
            log = String::from_utf8_lossy(&data).into_owned();
        } else if e.len > andes_protocol::pool::STREAM_OVER
            || carried + e.len > andes_protocol::pool::INLINE_BUDGET
        {
            // Fetched on its own, as a stream.
            files.push(FileData::streamed(e.path, e.len, None));
        } else {
            let data = b.read(&e.path, e.len).map_err(|e| e.to_string())?;
            carried += data.len() as u64;
            files.push(FileData::inline(e.path, data));
        }
    }
    Ok((files, log))
}

/// Removes the spool directories of spooled jobs that are no longer in the
/// queue (`keep` says which are).
pub fn sweep_spooled(spool: &Path, keep: impl Fn(JobId) -> bool) -> usize {
    let dir = spool.join("spooled");
    let Ok(rd) = std::fs::read_dir(&dir) else { return 0 };
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Ok(JobSelector::Job(id)) = name.parse::<JobSelector>()
            && keep(id)
        {
            continue;
        }
        if Beneath::open(&e.path()).and_then(|b| b.clear()).is_ok()
            && std::fs::remove_dir(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    /// An output file is made new, or an old one of that name is written
    /// over and cut to the new length (a shorter output leaves nothing of the
    /// longer one); one that fails midway is left empty; a link or a
    /// directory in its place is refused.
    #[test]
    fn an_output_replaces_what_was_there_and_never_follows_a_link() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        let put = |data: &'static [u8]| {
            write_output(&p, |f| f.write_all(data).map(|()| data.len() as u64))
        };
        put(b"a long first output").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"a long first output");
        put(b"short").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"short");
        put(b"longer than short").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"longer than short");
        let failed = write_output(&p, |f| {
            f.write_all(b"half")?;
            Err(std::io::Error::other("the disk is full"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"", "never part old, part new");
        #[cfg(unix)]
        {
            let target = d.path().join("target");
            std::fs::write(&target, b"keep").unwrap();
            std::os::unix::fs::symlink(&target, d.path().join("link")).unwrap();
            assert!(write_output(&d.path().join("link"), |_| Ok(0)).is_err());
            assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        }
        std::fs::create_dir(d.path().join("dir")).unwrap();
        assert!(write_output(&d.path().join("dir"), |_| Ok(0)).is_err());
    }

    /// A job's remaps are bounded, and a job's outputs are placed with
    /// them read once: a long list on many files is no long work.
    #[test]
    fn remaps_are_bounded_and_read_once_per_job() {
        let list = |n: usize| (0..n).map(|i| format!("f{i} = g{i}")).collect::<Vec<_>>().join(";");
        assert!(parse_remaps(&list(MAX_REMAPS + 1)).unwrap_err().contains("more than"));
        // A chain through every pair but the last, on 10,000 names.
        let chain: String =
            (0..MAX_REMAPS - 1).map(|i| format!("c{i} = c{}", i + 1)).collect::<Vec<_>>().join(";");
        let mut job = ClassAd::new();
        job.insert_value("Iwd", "/home/u");
        job.insert_value(OUTPUT_REMAPS, chain.as_str());
        let places = OutputPlaces::of(&job).unwrap();
        let names: Vec<String> = (0..10_000).map(|i| format!("n{i}")).collect();
        let t = std::time::Instant::now();
        let got: Vec<_> = places.paths(names.iter().map(String::as_str)).collect();
        assert!(got.iter().all(|p| p.as_ref().unwrap().is_some()));
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
        // The chain is longer than a remap may go: a cycle, said so.
        assert!(places.path("c0").unwrap_err().contains("cycle"));
        assert_eq!(places.path("c999").unwrap(), Some(PathBuf::from("/home/u/c999")));
    }

    #[test]
    fn remaps_read_as_htcondor_reads_them() {
        let r = parse_remaps(" a.txt = results/a.txt ;b=c/d; ;x\\=1 = y\\;z ; w = u=v;").unwrap();
        assert_eq!(
            r,
            pairs(&[("a.txt", "results/a.txt"), ("b", "c/d"), ("x=1", "y;z"), ("w", "u=v")])
        );
        assert_eq!(parse_remaps("").unwrap(), []);
        assert_eq!(parse_remaps("a\\b=c").unwrap(), pairs(&[("a\\b", "c")]));
        for bad in ["a", "a=b;c", "=b", "a=", " = "] {
            assert!(parse_remaps(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_remap_follows_chains_and_parent_directories_and_stops_at_a_cycle() {
        let r = pairs(&[("a", "b"), ("b", "c/b"), ("d", "/abs/e"), ("x", "x2")]);
        assert_eq!(remap(&r, "a").unwrap().as_deref(), Some("c/b"));
        assert_eq!(remap(&r, "b").unwrap().as_deref(), Some("c/b"));
        assert_eq!(remap(&r, "d/f/g").unwrap().as_deref(), Some("/abs/e/f/g"));
        assert_eq!(remap(&r, "q").unwrap(), None);
        assert_eq!(remap(&r, "q/x").unwrap(), None);
        let cycle = pairs(&[("a", "b"), ("b", "a")]);
        assert!(remap(&cycle, "a").unwrap_err().contains("cycle"));
        assert!(is_url("s3://bucket/key") && is_url("private+gdrive://x"));
        assert!(!is_url("results/out.txt") && !is_url("/a://b") && !is_url("://x"));
    }

    #[test]
    fn a_preserved_path_stays_beneath_the_sandbox() {
        assert_eq!(preserved_name("data/in.txt").unwrap(), "data/in.txt");
        assert_eq!(preserved_name("./data//sub/").unwrap(), "data/sub");
        for bad in ["../x", "data/../../x", "a/..", ".", "./", "a\\b", "c:d"] {
            assert!(preserved_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn remapped_outputs_go_where_the_remaps_say_and_names_are_checked_first() {
        let mut job = ClassAd::new();
        job.insert_value("Iwd", "/home/u/run");
        job.insert_value("Out", "out.txt");
        job.insert_value(OUTPUT_REMAPS, "out.txt = results/out.txt; d = /tmp/d; u = s3://b/k");
        let at = |job: &ClassAd, n: &str| output_path(job, n);
        assert_eq!(at(&job, "out.txt").unwrap(), Some("/home/u/run/results/out.txt".into()));
        assert_eq!(at(&job, "d/x").unwrap(), Some("/tmp/d/x".into()));
        assert_eq!(at(&job, "other").unwrap(), Some("/home/u/run/other".into()));
        // The streams go where `output` and `error` say, remaps or not.
        assert_eq!(at(&job, STDOUT_NAME).unwrap(), Some("/home/u/run/out.txt".into()));
        assert!(at(&job, "u").unwrap_err().contains("URL"));
        // A host's name is refused before any remap could apply to it.
        job.insert_value(OUTPUT_REMAPS, "../x = ok");
        assert!(at(&job, "../x").is_err());
        job.insert_value(OUTPUT_REMAPS, "broken");
        assert!(at(&job, "a").unwrap_err().contains("transfer_output_remaps"));
    }

    #[test]
    fn preserved_inputs_keep_their_relative_paths_and_never_leave_the_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data/sub")).unwrap();
        std::fs::write(dir.path().join("data/in.txt"), b"x").unwrap();
        std::fs::write(dir.path().join("data/sub/w"), b"y").unwrap();
        let abs = dir.path().join("data/in.txt");
        let mut job = ClassAd::new();
        job.insert_value("Iwd", dir.path().to_str().unwrap());
        let list = format!("data/in.txt, ./data/sub/, {}", abs.display());
        job.insert_value("TransferInput", list.as_str());
        let names = |job: &ClassAd| -> Vec<String> {
            let mut n: Vec<String> = input_files(job).unwrap().into_iter().map(|f| f.0).collect();
            n.sort();
            n
        };
        assert_eq!(names(&job), ["in.txt", "in.txt", "sub/w"]);
        job.insert_value(PRESERVE_RELATIVE_PATHS, true);
        assert_eq!(names(&job), ["data/in.txt", "data/sub/w", "in.txt"]);
        job.insert_value("TransferInput", "../x");
        assert!(input_files(&job).unwrap_err().contains("beneath"));
    }

    #[test]
    fn inputs_ride_in_the_message_only_while_small_and_within_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..8 {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, vec![i as u8; 600 << 10]).unwrap();
            files.push((format!("f{i}"), p));
        }
        let big = dir.path().join("big");
        std::fs::write(&big, vec![9u8; (1 << 20) + 1]).unwrap();
        files.push(("big".into(), big));
        let inputs = read_files(&files, 1 << 30).unwrap();
        let carried: Vec<&str> =
            inputs.files.iter().filter(|f| f.streamed.is_none()).map(|f| f.name.as_str()).collect();
        // 6 × 600 KiB fit in 4 MiB; the seventh would not; the big one never.
        assert_eq!(carried, ["f0", "f1", "f2", "f3", "f4", "f5"]);
        assert_eq!(inputs.sources.len(), 3);
        for f in inputs.files.iter().filter(|f| f.streamed.is_some()) {
            let sha = f.streamed.as_ref().unwrap().sha256.clone().unwrap();
            let (_, file) = inputs.sources.iter().find(|(s, _)| *s == sha).unwrap();
            let mut file = file.try_clone().unwrap();
            let (d, len) = andes_protocol::stream::file_sha256(&mut file).unwrap();
            assert_eq!((hex::encode(d), len), (sha, f.len()));
        }
        // Everything counts toward RequestDisk.
        let e = read_files(&files, 5 << 20).unwrap_err();
        assert!(e.message.contains("RequestDisk"), "{e}");
        // And comes back whole for a destination that takes only bytes.
        let all = read_files(&files, 1 << 30).unwrap().into_inline().unwrap();
        assert!(all.iter().all(|f| f.streamed.is_none() && f.data.len() as u64 == f.len()));
        assert_eq!(all.len(), 9);
    }
}

/// Uploads a job's input files to a schedd (`PUT /v1/uploads/DIGEST`, each
/// content once: `sent` holds the digests already there) and marks the job
/// spooled, as condor_submit -spool does: its `SpooledInput` names them, and
/// `LeaveJobInQueue` keeps it, completed, until its output is fetched.
/// `andes submit --spool` and the job router (sending a routed job to
/// another pool) both send files this way.
pub async fn spool_inputs(
    c: &andes_protocol::Client,
    job: &mut ClassAd,
    inputs: Inputs,
    sent: &mut std::collections::HashSet<String>,
    now: i64,
) -> Result<(), String> {
    let mut sources: HashMap<String, std::fs::File> = inputs.sources.into_iter().collect();
    let mut list = Vec::with_capacity(inputs.files.len());
    for f in inputs.files {
        let digest = match &f.streamed {
            Some(s) => format!("sha256:{}", s.sha256.clone().unwrap_or_default()),
            None => module_digest(&f.data),
        };
        if !sent.contains(&digest) {
            let path = format!("/v1/uploads/{digest}");
            // Big files as streams (read from disk as they go), small ones whole.
            let r = match &f.streamed {
                Some(s) => {
                    let sha = s.sha256.clone().unwrap_or_default();
                    let file = sources
                        .remove(&sha)
                        .ok_or_else(|| format!("input file {} is not open", f.name))?;
                    c.upload(http::Method::PUT, &path, file, &[]).await
                }
                None => c.upload_bytes(http::Method::PUT, &path, f.data.into(), &[]).await,
            }
            .map_err(|e| format!("uploading input file {}: {e}", f.name))?;
            if !r.status.is_success() {
                return Err(format!(
                    "uploading input file {} failed: {}",
                    f.name,
                    r.error_reason().unwrap_or_else(|| r.status.to_string())
                ));
            }
            sent.insert(digest.clone());
        }
        list.push(format!("{}={digest}", f.name));
    }
    job.insert_value(SPOOLED_INPUT, list.join(","));
    job.insert_value("StageInStart", now);
    job.insert_value("StageInFinish", now);
    let leave =
        classad::parse_expr(SPOOLED_LEAVE_IN_QUEUE).map_err(|e| format!("LeaveJobInQueue: {e}"))?;
    job.insert("LeaveJobInQueue", leave);
    Ok(())
}

/// A spooled job's output fetched from its schedd: the answer (its ad,
/// carried files and event log) and the streamed files, staged in a
/// directory of their own that lives as long as this.
pub struct Fetched {
    /// The schedd's answer.
    pub reply: crate::api::TransferReply,
    /// The streamed files.
    pub staged: Staged,
}

/// Why a spooled job's output could not be fetched.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchError {
    /// What failed, naming the job and the file.
    pub message: String,
    /// Asking again cannot help: the output is over the limit the fetcher
    /// set, so the schedd it comes from is not to be believed.
    pub refused: bool,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for FetchError {
    fn from(message: String) -> Self {
        FetchError { message, refused: false }
    }
}

/// Fetches spooled job `id`'s output from a schedd (`POST /v1/transfer`,
/// and `/v1/transfer/file` for each big file), checking each streamed file
/// arrived whole. The files may hold at most `limit` bytes in all, as the
/// schedd states their sizes (and no streamed file is read past its stated
/// size): more is refused before anything is downloaded. Nothing is written
/// where the output goes: see [`write_outputs`].
pub async fn fetch_spooled(
    c: &andes_protocol::Client,
    id: JobId,
    limit: u64,
) -> Result<Fetched, FetchError> {
    use crate::api::{TransferFileRequest, TransferReply, TransferRequest};
    let reply: TransferReply = c
        .call(http::Method::POST, "/v1/transfer", Some(&TransferRequest { job: id }))
        .await
        .map_err(|e| e.to_string())?;
    let total = reply.files.iter().fold(0u64, |t, f| {
        t.saturating_add(f.streamed.as_ref().map_or(f.data.len() as u64, |s| s.size))
    });
    if total > limit {
        return Err(FetchError {
            message: format!(
                "job {id}: its output files come to {total} bytes, more than the {limit} bytes \
                 of its RequestDisk"
            ),
            refused: true,
        });
    }
    let dir = tempfile::tempdir().map_err(|e| format!("a staging directory: {e}"))?;
    let mut staged = Staged::default();
    for (n, f) in reply.files.iter().enumerate() {
        let Some(s) = &f.streamed else { continue };
        let p = dir.path().join(n.to_string());
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        let req = TransferFileRequest { job: id, name: f.name.clone() };
        let (w, _) =
            c.download("/v1/transfer/file", &req, file, s.size).await.map_err(|e| e.to_string())?;
        if w.len != s.size {
            return Err(format!(
                "job {id}: output file {} came with {} of its {} bytes",
                f.name, w.len, s.size
            )
            .into());
        }
        staged.files.insert(f.name.clone(), p);
    }
    staged.dir = Some(dir);
    Ok(Fetched { reply, staged })
}

/// Output files fetched as streams, staged in a directory of the schedd's
/// (removed when this is dropped): name → staged path.
#[derive(Debug, Default)]
pub struct Staged {
    /// The directory they are staged in, removed when this is dropped.
    pub dir: Option<tempfile::TempDir>,
    /// Each file's staged path, by its name.
    pub files: HashMap<String, PathBuf>,
}

impl Staged {
    /// Puts `f` at `to` (a path of the schedd's own): its bytes, or its staged
    /// file moved there.
    pub fn place(&self, f: &FileData, to: &Path) -> std::io::Result<()> {
        match (&f.streamed, self.files.get(&f.name)) {
            (None, _) => std::fs::write(to, &f.data),
            (Some(_), Some(staged)) => {
                std::fs::rename(staged, to).or_else(|_| std::fs::copy(staged, to).map(|_| ()))
            }
            (Some(_), None) => {
                Err(std::io::Error::other(format!("output file {} was not transferred", f.name)))
            }
        }
    }

    /// The staged files, opened (by the schedd) for copying where only the
    /// owner may write.
    pub fn open(&self) -> Result<HashMap<String, std::fs::File>, String> {
        self.files
            .iter()
            .map(|(n, p)| {
                std::fs::File::open(p)
                    .map(|f| (n.clone(), f))
                    .map_err(|e| format!("staged output file {n}: {e}"))
            })
            .collect()
    }
}
