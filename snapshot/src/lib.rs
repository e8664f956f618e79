//! andes checkpoint snapshots: the state of a Wasm job (its linear memories,
//! mutable globals, WASI state and sandbox files) as one versioned, signed
//! and portable file, with the bytes of its memories and files kept by
//! content beside it.
//!
//! # Layout
//!
//! ```text
//! offset   size  what
//! 0        8     magic "ANDESNAP"
//! 8        4     format version (u32 LE), read before anything else
//! 12       4     header length H (u32 LE), at most MAX_HEADER
//! 16       ...   body: one section per linear memory (see below)
//! end-128-H H    header: JSON (Header): module, job, platform, globals, WASI,
//!                files, packs
//! end-128  32    signer's ed25519 public key
//! end-96   32    BLAKE3 of every byte before the signer's key
//! end-64   64    ed25519 signature, by the signer, of SIGNATURE_CONTEXT ++ that hash
//! ```
//!
//! A memory section (format 2 and 3) is `u64 length`, `u32 chunks`, then per 64 KiB
//! chunk a table entry: a kind byte, the pack (`u32`, an index into the
//! header's `packs`), the offset in it (`u64`) and the stored length (`u32`).
//! Each chunk is first XORed with the module's initial image (its active
//! data segments), so pages the job never changed, and pages of zeros, store
//! nothing; the rest are LZ4 blocks, or raw where LZ4 does not pay. Packs are
//! blobs of the job's [`BlobStore`] (BLAKE3-named, like the sandbox's files):
//! a snapshot built on the last one ([`Builder::building_on`]) writes only
//! the chunks that changed into a new pack and names the older packs for the
//! rest (see [`Chain`]). From format 3 a section ends with `u32 patches` and
//! a patch table: per patched chunk (in chunk order) its index (`u32`), a kind
//! byte, pack, offset and stored length as above, and which of its 4 KiB
//! pages the patch holds (`u16`, page 0 the lowest bit): those pages replace
//! the chunk's entry's. Format 1 sections, which held their chunks inline,
//! and format 2's, without patches, are still read.
//!
//! # Trust
//!
//! [`open`] checks, before it uses a single byte of the header or body: the
//! magic, the version, the length, the content hash, that the signer is
//! trusted, the signature, that the snapshot is of the module at hand, and
//! that every chunk lies inside a pack it names. [`Opened::load_packs`]
//! checks each pack against its BLAKE3. Every refusal is a [`SnapshotError`]
//! that says which check failed.
//!
//! Nothing in a snapshot depends on the host's OS or CPU: [`platform`] is
//! derived from the format and instrumentation versions only.
#![forbid(unsafe_code)]

mod blobs;
mod chain;
mod memory;
mod pages;

pub use chain::{Anchors, Chain, ChunkSource, MAX_PACKS, PackEntry};

pub use blobs::{
    BlobStore, HashCache, MAX_SANDBOX_ENTRIES, blob_hash, is_hash, list_files, restore_files,
    safe_relative, scan_sandbox,
};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The first eight bytes of every snapshot.
pub const MAGIC: &[u8; 8] = b"ANDESNAP";
/// The format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 3;
/// The largest header accepted, in bytes.
pub const MAX_HEADER: usize = 16 << 20;
/// Memory is encoded in chunks of this many bytes (one Wasm page).
pub const CHUNK: usize = 64 * 1024;
/// What the signature covers besides the content hash: a domain separator,
/// so a snapshot signature is never valid as anything else.
pub const SIGNATURE_CONTEXT: &[u8] = b"andes snapshot v1\0";
const PREFIX: usize = 16;
const TRAILER: usize = 32 + 32 + 64;

/// `CheckpointPlatform`: the snapshot format version and, for transparent
/// checkpoints, the instrumentation version. Nothing else: a snapshot taken
/// on one OS or CPU restores on any other host with the same platform.
pub fn platform(instrumentation: Option<u32>) -> String {
    match instrumentation {
        Some(v) => format!("andes-snapshot-{FORMAT_VERSION}/instrumentation-{v}"),
        None => format!("andes-snapshot-{FORMAT_VERSION}"),
    }
}

/// Why a snapshot was refused or could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The file does not start with [`MAGIC`].
    #[error("not an andes snapshot (it does not start with `ANDESNAP`)")]
    NotASnapshot,
    /// Written by a newer andes.
    #[error(
        "snapshot format version {found} is newer than this andes reads (version {FORMAT_VERSION})"
    )]
    FutureVersion {
        /// The file's version.
        found: u32,
    },
    /// Too short for its own header and trailer.
    #[error("snapshot truncated: {len} bytes, too short for {what}")]
    Truncated {
        /// The file's length.
        len: usize,
        /// What did not fit.
        what: &'static str,
    },
    /// The content hash does not match: a changed byte, or a cut.
    #[error(
        "snapshot corrupted: its content does not match its hash (a changed, truncated or extended file)"
    )]
    HashMismatch,
    /// The signer is not a trusted host.
    #[error("snapshot signed by key {signer}, which this host does not trust")]
    Untrusted {
        /// The signer's public key, hex.
        signer: String,
    },
    /// The signature does not verify.
    #[error("snapshot signature is invalid (signer {signer})")]
    BadSignature {
        /// The signer's public key, hex.
        signer: String,
    },
    /// The snapshot is of another module.
    #[error("snapshot is of module sha256:{found}, not of this module (sha256:{expected})")]
    WrongModule {
        /// The snapshot's module.
        found: String,
        /// The module at hand.
        expected: String,
    },
    /// The header is malformed.
    #[error("snapshot header: {0}")]
    Header(String),
    /// A memory section is malformed, or does not fit.
    #[error("snapshot memory {index}: {message}")]
    Memory {
        /// Which memory.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A memory pack is missing or damaged.
    #[error("snapshot memory pack {hash}: {message}")]
    Pack {
        /// The pack's BLAKE3, hex.
        hash: String,
        /// What is wrong.
        message: String,
    },
    /// A sandbox file could not be stored or restored.
    #[error("snapshot file {path}: {message}")]
    File {
        /// The file's path in the sandbox.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A value of a global, bit-exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "lowercase")]
pub enum GlobalValue {
    /// `i32`.
    I32(i32),
    /// `i64`.
    I64(i64),
    /// `f32`, as its bits.
    F32(u32),
    /// `f64`, as its bits.
    F64(u64),
}

/// A mutable global, by the export name the host reads it through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Global {
    /// Its export name.
    pub name: String,
    /// Its value.
    pub value: GlobalValue,
}

/// One open WASI descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    /// The descriptor number the guest holds.
    pub fd: u32,
    /// What it is.
    pub kind: DescriptorKind,
}

/// What a WASI descriptor refers to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DescriptorKind {
    /// A preopened directory, or one the guest opened.
    Dir {
        /// Its path inside the sandbox (`.` for the sandbox itself).
        path: String,
        /// The name the guest sees for a preopen; `None` for opened ones.
        preopen: Option<String>,
    },
    /// A file.
    File {
        /// Its path inside the sandbox.
        path: String,
        /// Opened for reading.
        read: bool,
        /// Opened for writing.
        write: bool,
        /// Opened in append mode.
        append: bool,
        /// The file offset.
        offset: u64,
    },
}

/// The WASI state a guest sees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WasiState {
    /// argv.
    pub args: Vec<String>,
    /// The environment.
    pub env: Vec<(String, String)>,
    /// Open descriptors other than stdin, stdout and stderr.
    pub descriptors: Vec<Descriptor>,
    /// The guest's monotonic clock at the snapshot, nanoseconds: after a
    /// restore it continues from here, never backwards.
    pub monotonic_ns: u64,
    /// The offset of stdin in its file.
    pub stdin_offset: u64,
    /// Bytes written to stdout so far.
    pub stdout_offset: u64,
    /// Bytes written to stderr so far.
    pub stderr_offset: u64,
}

/// A file of the sandbox as it was at the snapshot, content-addressed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Its path inside the sandbox, `/`-separated, relative.
    pub path: String,
    /// Its length.
    pub size: u64,
    /// BLAKE3 of its content, hex: its name in the [`BlobStore`].
    pub blake3: String,
}

/// One linear memory's place in the body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryInfo {
    /// Its length in bytes.
    pub bytes: u64,
    /// BLAKE3 (hex) of the initial image it was diffed against.
    pub base: String,
    /// The section's offset in the body.
    pub offset: u64,
    /// The section's length.
    pub len: u64,
}

/// How the job's call stack was captured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unwound {
    /// The instrumentation version of the module (`andes compile`).
    pub instrumentation: u32,
    /// Which memory holds the unwound stack.
    pub memory: u32,
    /// Where, in it, the unwind data structure starts.
    pub data: u64,
}

/// What a snapshot says about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// `CheckpointPlatform` (see [`platform`]).
    pub platform: String,
    /// The module's SHA-256, hex.
    pub module_sha256: String,
    /// The job's identity (`GlobalJobId`, or what the runner names it).
    pub job: String,
    /// When the snapshot was taken, Unix milliseconds.
    pub created_ms: i64,
    /// The unwound call stack, for a transparent checkpoint.
    pub unwound: Option<Unwound>,
    /// Linear memories, in index order (filled by the [`Builder`]).
    #[serde(default)]
    pub memories: Vec<MemoryInfo>,
    /// Mutable globals.
    pub globals: Vec<Global>,
    /// WASI state.
    pub wasi: WasiState,
    /// The sandbox's files.
    pub files: Vec<FileEntry>,
    /// The packs holding the memories' chunks (filled by the [`Builder`]).
    #[serde(default)]
    pub packs: Vec<PackEntry>,
    /// Usage and counters carried across restores (fuel, CPU time, ...).
    #[serde(default)]
    pub usage: BTreeMap<String, f64>,
}

impl Header {
    /// A header for a snapshot of `module_sha256` for `job`, taken at `created_ms`.
    pub fn new(module_sha256: &[u8; 32], job: &str, created_ms: i64) -> Header {
        Header {
            platform: platform(None),
            module_sha256: hex::encode(module_sha256),
            job: job.to_string(),
            created_ms,
            unwound: None,
            memories: Vec::new(),
            globals: Vec::new(),
            wasi: WasiState::default(),
            files: Vec::new(),
            packs: Vec::new(),
            usage: BTreeMap::new(),
        }
    }

    /// Every content the snapshot names, files and packs: what must travel
    /// with it and be kept beside it for it to be restored.
    pub fn contents(&self) -> impl Iterator<Item = Content<'_>> {
        let files = self.files.iter().map(|f| Content {
            blake3: &f.blake3,
            size: f.size,
            file: Some(&f.path),
        });
        files.chain(self.packs.iter().map(|p| Content {
            blake3: &p.blake3,
            size: p.size,
            file: None,
        }))
    }
}

/// A content a snapshot names (see [`Header::contents`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Content<'a> {
    /// Its BLAKE3, hex: its name in a [`BlobStore`].
    pub blake3: &'a str,
    /// Its length.
    pub size: u64,
    /// The sandbox file it is the content of; `None` for a memory pack.
    pub file: Option<&'a str>,
}

impl std::fmt::Display for Content<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.file {
            Some(path) => write!(f, "file {path}"),
            None => write!(f, "memory pack {}", self.blake3),
        }
    }
}

/// Builds a snapshot.
pub struct Builder {
    header: Header,
    tables: chain::Tables,
}

/// A snapshot built by [`Builder::finish`]: the signed file, the new pack
/// of memory chunks it names (to be stored in the job's [`BlobStore`]
/// before the file is kept: [`Sealed::store_pack`]), and the chain the
/// job's next snapshot builds on.
#[derive(Clone, Debug)]
pub struct Sealed {
    /// The snapshot file.
    pub bytes: Vec<u8>,
    /// Its header, as written.
    pub header: Header,
    /// The pack of the chunks this snapshot wrote, by BLAKE3 (hex); `None`
    /// when nothing changed.
    pub pack: Option<(String, Vec<u8>)>,
    /// What the next snapshot of the job builds on.
    pub chain: Chain,
}

impl Sealed {
    /// Stores the new pack, if any, in `store`.
    pub fn store_pack(&self, store: &BlobStore) -> std::io::Result<()> {
        match &self.pack {
            Some((hash, bytes)) => store.put_named(hash, bytes),
            None => Ok(()),
        }
    }
}

impl Builder {
    /// Starts a snapshot with `header` (its `memories` and `packs` are filled
    /// in here).
    pub fn new(header: Header) -> Builder {
        Builder::reusing(header, Vec::new())
    }

    /// Like [`Builder::new`], writing the new pack into `buffer` (cleared
    /// first): a job checkpointed again and again reuses the last pack's
    /// memory.
    pub fn reusing(mut header: Header, mut buffer: Vec<u8>) -> Builder {
        header.memories.clear();
        header.packs.clear();
        buffer.clear();
        let mut tables = chain::Tables::default();
        tables.pack = buffer;
        Builder { header, tables }
    }

    /// Builds on `previous`, the chain of the job's last snapshot: chunks
    /// [`Builder::memory_changed`] is told did not change are named where
    /// that snapshot keeps them. Call before adding memories.
    pub fn building_on(mut self, previous: &Chain) -> Builder {
        let pack = std::mem::take(&mut self.tables.pack);
        self.tables = chain::Tables::building_on(previous);
        self.tables.pack = pack;
        self
    }

    /// Adds the next linear memory, diffed against `base`, its initial
    /// image (the module's active data segments; see [`initial_image`]):
    /// every chunk is looked at.
    pub fn memory(&mut self, bytes: &[u8], base: &Image) {
        self.tables.memory(&bytes, base, &|_| true);
    }

    /// Adds the next linear memory, of which only the chunks (of [`CHUNK`]
    /// bytes) `changed` names may differ from the snapshot built on: the
    /// others are taken from it unread.
    pub fn memory_changed(&mut self, bytes: &[u8], base: &Image, changed: &dyn Fn(usize) -> bool) {
        self.tables.memory(&bytes, base, changed);
    }

    /// The chunks of the next memory, of `len` bytes diffed against `base`
    /// with only the chunks `changed` names changed, that
    /// [`Builder::memory_from`] (or [`Builder::memory_changed`]) will read,
    /// in order: the others are taken from the snapshot built on, or zero.
    pub fn to_read(&self, len: usize, base: &Image, changed: &dyn Fn(usize) -> bool) -> Vec<usize> {
        self.tables.to_read(len, base, changed)
    }

    /// [`Builder::memory_changed`] reading the memory through `source`.
    pub fn memory_from(
        &mut self,
        source: &dyn ChunkSource,
        base: &Image,
        changed: &dyn Fn(usize) -> bool,
    ) {
        self.tables.memory(source, base, changed);
    }

    /// The header so far.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Seals the snapshot: `sign` signs with the key whose public half is `public`.
    pub fn finish(self, public: &[u8; 32], sign: impl FnOnce(&[u8]) -> [u8; 64]) -> Sealed {
        let mut header = self.header;
        let (packs, sections, chain, pack) = self.tables.seal();
        header.packs = packs;
        let mut out = Vec::with_capacity(PREFIX + sections.iter().map(Vec::len).sum::<usize>());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        for (m, section) in chain.memories.iter().zip(&sections) {
            let offset = (out.len() - PREFIX) as u64;
            out.extend_from_slice(section);
            header.memories.push(MemoryInfo {
                bytes: m.bytes,
                base: m.base.clone(),
                offset,
                len: section.len() as u64,
            });
        }
        let json = serde_json::to_vec(&header).unwrap_or_default();
        out.reserve(json.len() + TRAILER);
        out[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&json);
        let hash = content_hash(&out);
        out.extend_from_slice(public);
        out.extend_from_slice(hash.as_bytes());
        let mut msg = SIGNATURE_CONTEXT.to_vec();
        msg.extend_from_slice(hash.as_bytes());
        out.extend_from_slice(&sign(&msg));
        let pack =
            header.packs.last().filter(|_| !pack.is_empty()).map(|p| (p.blake3.clone(), pack));
        Sealed { bytes: out, header, pack, chain }
    }
}

/// A memory's initial image (what instantiation writes into it: see
/// [`initial_image`]) and the BLAKE3 hash that names it, computed once.
/// Every snapshot of a job diffs its memory against the image and names it
/// by the hash; an image of some megabytes hashed at each snapshot would
/// hold the job still for milliseconds.
#[derive(Clone, Debug)]
pub struct Image {
    bytes: std::sync::Arc<[u8]>,
    hash: String,
}

impl Image {
    /// The image of `bytes`.
    pub fn new(bytes: impl Into<std::sync::Arc<[u8]>>) -> Image {
        let bytes = bytes.into();
        let hash = blob_hash(&bytes);
        Image { bytes, hash }
    }

    /// The empty image: a memory no data segment writes (the checkpoint
    /// stack, any memory but the first).
    pub fn none() -> &'static Image {
        static NONE: std::sync::LazyLock<Image> = std::sync::LazyLock::new(|| Image::new([]));
        &NONE
    }

    /// The image's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its BLAKE3 hash, hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

/// The initial image of memory 0 of a module: its active data segments with
/// constant offsets laid out from address 0 (what instantiation writes).
/// `segments` are (offset, bytes); overlapping segments apply in order.
pub fn initial_image<'a>(segments: impl IntoIterator<Item = (u64, &'a [u8])>) -> Image {
    let mut image = Vec::new();
    for (offset, data) in segments {
        let Ok(start) = usize::try_from(offset) else { continue };
        let Some(end) = start.checked_add(data.len()) else { continue };
        if end > image.len() {
            image.resize(end, 0);
        }
        image[start..end].copy_from_slice(data);
    }
    Image::new(image)
}

/// What [`inspect`] finds, trusted or not.
#[derive(Clone, Debug)]
pub struct Inspection {
    /// The format version.
    pub version: u32,
    /// The header.
    pub header: Header,
    /// The file's length.
    pub size: usize,
    /// The signer's public key, hex.
    pub signer: String,
    /// The content hash, hex.
    pub hash: String,
    /// True when the content matches the hash.
    pub hash_ok: bool,
    /// True when the signature verifies against the signer's key.
    pub signature_ok: bool,
    /// Stored bytes of each memory's chunks (in the section itself for
    /// format 1, in the packs it names for format 2).
    pub memory_sizes: Vec<u64>,
}

struct Parts<'a> {
    version: u32,
    header: &'a [u8],
    body: &'a [u8],
    content: &'a [u8],
    signer: [u8; 32],
    hash: [u8; 32],
    signature: [u8; 64],
}

fn split(bytes: &[u8]) -> Result<Parts<'_>, SnapshotError> {
    let len = bytes.len();
    if len < 8 || &bytes[..8] != MAGIC {
        return Err(if len < 8 && MAGIC.starts_with(bytes) {
            SnapshotError::Truncated { len, what: "its magic" }
        } else {
            SnapshotError::NotASnapshot
        });
    }
    if len < 12 {
        return Err(SnapshotError::Truncated { len, what: "its format version" });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
    if version > FORMAT_VERSION {
        return Err(SnapshotError::FutureVersion { found: version });
    }
    if len < PREFIX {
        return Err(SnapshotError::Truncated { len, what: "its header length" });
    }
    if version == 0 {
        return Err(SnapshotError::Header("format version 0 does not exist".into()));
    }
    let header_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap_or_default()) as usize;
    if header_len > MAX_HEADER {
        return Err(SnapshotError::Header(format!(
            "header of {header_len} bytes is larger than the {MAX_HEADER} allowed"
        )));
    }
    if len < PREFIX + header_len + TRAILER {
        return Err(SnapshotError::Truncated { len, what: "its header and signature" });
    }
    let content_end = len - TRAILER;
    let header_start = content_end - header_len;
    let t = &bytes[content_end..];
    let mut signer = [0u8; 32];
    let mut hash = [0u8; 32];
    let mut signature = [0u8; 64];
    signer.copy_from_slice(&t[..32]);
    hash.copy_from_slice(&t[32..64]);
    signature.copy_from_slice(&t[64..]);
    Ok(Parts {
        version,
        header: &bytes[header_start..content_end],
        body: &bytes[PREFIX..header_start],
        content: &bytes[..content_end],
        signer,
        hash,
        signature,
    })
}

/// BLAKE3 of the content, on every core for large contents (snapshots,
/// memory packs, files).
pub(crate) fn content_hash(content: &[u8]) -> blake3::Hash {
    if content.len() < 4 << 20 {
        return blake3::hash(content);
    }
    let mut h = blake3::Hasher::new();
    h.update_rayon(content);
    h.finalize()
}

fn signature_ok(p: &Parts<'_>) -> bool {
    let Ok(key) = ed25519_dalek::VerifyingKey::from_bytes(&p.signer) else { return false };
    let sig = ed25519_dalek::Signature::from_bytes(&p.signature);
    let mut msg = SIGNATURE_CONTEXT.to_vec();
    msg.extend_from_slice(&p.hash);
    key.verify_strict(&msg, &sig).is_ok()
}

fn parse_header(p: &Parts<'_>) -> Result<(Header, Chain), SnapshotError> {
    let h: Header = serde_json::from_slice(p.header)
        .map_err(|e| SnapshotError::Header(format!("not valid: {e}")))?;
    for (i, m) in h.memories.iter().enumerate() {
        let end = m.offset.checked_add(m.len);
        if end.is_none_or(|e| e > p.body.len() as u64) {
            return Err(SnapshotError::Memory {
                index: i,
                message: format!(
                    "its section ({} bytes at {}) lies outside the body ({} bytes)",
                    m.len,
                    m.offset,
                    p.body.len()
                ),
            });
        }
    }
    if p.version < 2 {
        if !h.packs.is_empty() {
            return Err(SnapshotError::Header("a format 1 snapshot names no packs".into()));
        }
        return Ok((h, Chain::default()));
    }
    if h.packs.len() > MAX_PACKS {
        return Err(SnapshotError::Header(format!(
            "it names {} memory packs, more than the {MAX_PACKS} allowed",
            h.packs.len()
        )));
    }
    if let Some(bad) = h.packs.iter().find(|p| !is_hash(&p.blake3)) {
        return Err(SnapshotError::Header(format!(
            "memory pack {:?} is not named by a BLAKE3 hash",
            bad.blake3
        )));
    }
    let mut memories = Vec::with_capacity(h.memories.len());
    for (i, m) in h.memories.iter().enumerate() {
        let section = &p.body[m.offset as usize..(m.offset + m.len) as usize];
        let parsed = chain::parse(section, &m.base, &h.packs, p.version)
            .map_err(|message| SnapshotError::Memory { index: i, message })?;
        if parsed.bytes != m.bytes {
            return Err(SnapshotError::Memory {
                index: i,
                message: format!("its section says {} bytes, the header {}", parsed.bytes, m.bytes),
            });
        }
        memories.push(parsed);
    }
    let chain = Chain { packs: h.packs.clone(), memories: std::sync::Arc::new(memories) };
    Ok((h, chain))
}

/// The content hash a snapshot's trailer records (hex), read without any
/// check: a snapshot's identity, for telling snapshots apart. `None` when
/// `bytes` is too short to be a snapshot.
pub fn stored_hash(bytes: &[u8]) -> Option<String> {
    if bytes.len() < PREFIX + TRAILER || &bytes[..8] != MAGIC {
        return None;
    }
    let t = &bytes[bytes.len() - TRAILER..];
    Some(hex::encode(&t[32..64]))
}

/// Reads a snapshot's header and checks its hash and signature, without
/// trusting anyone (`andes snapshot inspect`).
pub fn inspect(bytes: &[u8]) -> Result<Inspection, SnapshotError> {
    let p = split(bytes)?;
    let hash_ok = content_hash(p.content).as_bytes() == &p.hash;
    let (header, memory_sizes) = match parse_header(&p) {
        Ok((header, _)) if p.version < 2 => {
            let sizes = header.memories.iter().map(|m| m.len).collect();
            (header, sizes)
        }
        Ok((header, chain)) => {
            let sizes = chain.memories.iter().map(chain::ChainMemory::stored).collect();
            (header, sizes)
        }
        // A damaged table of a file whose hash fails: what can be read of
        // it is shown, with the failed check.
        Err(SnapshotError::Memory { .. }) if !hash_ok => {
            let header: Header = serde_json::from_slice(p.header)
                .map_err(|e| SnapshotError::Header(format!("not valid: {e}")))?;
            let sizes = header.memories.iter().map(|m| m.len).collect();
            (header, sizes)
        }
        Err(e) => return Err(e),
    };
    Ok(Inspection {
        version: p.version,
        memory_sizes,
        header,
        size: bytes.len(),
        signer: hex::encode(p.signer),
        hash: hex::encode(p.hash),
        hash_ok,
        signature_ok: signature_ok(&p),
    })
}

/// A snapshot that passed every check of [`open`].
pub struct Opened<'a> {
    /// Its header.
    pub header: Header,
    /// The signer's public key.
    pub signer: [u8; 32],
    version: u32,
    body: &'a [u8],
    chain: Chain,
}

/// The bytes of one pack as its caller holds them: read into memory, or
/// mapped from its file by a caller that may ([`Opened::load_packs_with`]).
pub type PackBytes = Box<dyn AsRef<[u8]> + Send + Sync>;

/// The bytes of the packs a snapshot names, each checked against its hash
/// ([`Opened::load_packs`]).
#[derive(Default)]
pub struct Packs(Vec<PackBytes>);

impl std::fmt::Debug for Packs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|p| (**p).as_ref().len())).finish()
    }
}

/// Opens a snapshot of the module whose SHA-256 is `module_sha256`, signed by
/// a key `trusted` accepts. Checks everything before using any of it.
pub fn open<'a>(
    bytes: &'a [u8],
    trusted: &dyn Fn(&[u8; 32]) -> bool,
    module_sha256: &[u8; 32],
) -> Result<Opened<'a>, SnapshotError> {
    let p = split(bytes)?;
    if content_hash(p.content).as_bytes() != &p.hash {
        return Err(SnapshotError::HashMismatch);
    }
    if !trusted(&p.signer) {
        return Err(SnapshotError::Untrusted { signer: hex::encode(p.signer) });
    }
    if !signature_ok(&p) {
        return Err(SnapshotError::BadSignature { signer: hex::encode(p.signer) });
    }
    let (header, chain) = parse_header(&p)?;
    let expected = hex::encode(module_sha256);
    if !header.module_sha256.eq_ignore_ascii_case(&expected) {
        return Err(SnapshotError::WrongModule { found: header.module_sha256, expected });
    }
    Ok(Opened { header, signer: p.signer, version: p.version, body: p.body, chain })
}

impl Opened<'_> {
    /// What the job's next snapshot builds on ([`Builder::building_on`]):
    /// empty for a format 1 snapshot (the next one is whole).
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// Reads every pack the snapshot names from `store`, each checked
    /// against its size and BLAKE3; a missing or damaged pack is an error
    /// that names it.
    pub fn load_packs(&self, store: &BlobStore) -> Result<Packs, SnapshotError> {
        self.load_packs_with(|hash| {
            let bytes: PackBytes = Box::new(std::fs::read(store.path(hash))?);
            Ok(bytes)
        })
    }

    /// [`Opened::load_packs`] with each pack's bytes, named by its hash
    /// (well formed: checked first), got by `open`: a caller may map the
    /// file rather than read it. Each is checked against its size and
    /// BLAKE3 here.
    pub fn load_packs_with(
        &self,
        open: impl Fn(&str) -> std::io::Result<PackBytes>,
    ) -> Result<Packs, SnapshotError> {
        let mut out = Vec::with_capacity(self.header.packs.len());
        for p in &self.header.packs {
            let err = |message: String| SnapshotError::Pack { hash: p.blake3.clone(), message };
            if !is_hash(&p.blake3) {
                return Err(err("it is not named by a BLAKE3 content hash".into()));
            }
            let held = open(&p.blake3).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => err("it is missing".into()),
                _ => err(e.to_string()),
            })?;
            let bytes = (*held).as_ref();
            crate::blobs::check_content(&p.blake3, bytes).map_err(|e| err(e.to_string()))?;
            if bytes.len() as u64 != p.size {
                return Err(err(format!(
                    "it is {} bytes, the snapshot says {}",
                    bytes.len(),
                    p.size
                )));
            }
            out.push(held);
        }
        Ok(Packs(out))
    }

    /// Writes memory `index` into `dest`, which must be exactly its length.
    /// `base` is the module's initial image (as given when it was taken);
    /// `packs` are the snapshot's ([`Opened::load_packs`]). With `fresh`,
    /// `dest` already holds `base` followed by zeros (a new instance's
    /// memory) and unchanged chunks are left untouched.
    ///
    /// Returns what the restore learned of the chunks as they are stored
    /// (their pages' hashes): given to the chain the next snapshot builds on
    /// ([`Chain::learn`]), the first snapshot after a restore stores a chunk
    /// with a few pages changed as those pages, as any later one does.
    pub fn restore_memory(
        &self,
        index: usize,
        dest: &mut [u8],
        base: &Image,
        fresh: bool,
        packs: &Packs,
    ) -> Result<Anchors, SnapshotError> {
        let err = |message: String| SnapshotError::Memory { index, message };
        let m = self
            .header
            .memories
            .get(index)
            .ok_or_else(|| err("the snapshot has no such memory".into()))?;
        if dest.len() as u64 != m.bytes {
            return Err(err(format!(
                "it is {} bytes, the destination {} bytes",
                m.bytes,
                dest.len()
            )));
        }
        if base.hash() != m.base {
            return Err(err("it was taken against another initial image".into()));
        }
        if self.version < 2 {
            let section = &self.body[m.offset as usize..(m.offset + m.len) as usize];
            memory::decode(section, dest, base.bytes(), fresh).map_err(err)?;
            return Ok(Anchors { index, hashes: Vec::new() });
        }
        if packs.0.len() != self.header.packs.len() {
            return Err(err(format!(
                "{} packs were loaded, the snapshot names {}",
                packs.0.len(),
                self.header.packs.len()
            )));
        }
        let hashes =
            chain::decode(&self.chain.memories[index], &packs.0, dest, base.bytes(), fresh)
                .map_err(err)?;
        Ok(Anchors { index, hashes })
    }
}

#[cfg(test)]
mod tests;
