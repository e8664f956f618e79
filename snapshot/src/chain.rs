//! Format 2 memory: each 64 KiB chunk, XORed with the module's initial
//! image, is stored in a *pack* (a content-addressed blob of the job's
//! [`BlobStore`](crate::BlobStore)), and a memory's section is only its
//! chunk table: for each chunk, where its bytes lie. A snapshot's first pack
//! holds every chunk that is not zero; each later snapshot of the same job
//! writes a new pack with only the chunks that changed and names the older
//! packs for the rest. So a snapshot costs what changed, and is restorable
//! on its own from its packs: every snapshot names each pack it needs.
//!
//! Within a chunk, change is tracked by the 4 KiB page. A chunk written since
//! the last snapshot whose pages mostly equal those of its *anchor* (the
//! chunk as last stored whole) is stored as a patch: only the pages that
//! differ from the anchor, beside a reference to it (format 3). A patch is
//! always over an anchor, never over another patch, so a chunk is restored
//! from at most two stored pieces however long the chain. Which pages differ
//! is told by hashes of the anchor's pages ([`PageHashes`]), kept by the
//! builder in memory only (256 bytes a chunk: 0.4 % of the memory, on the
//! host), seeded per process (a job cannot aim a collision at them, which
//! could only ever hide a change of its own memory from its own restore): a
//! chain read from a file knows none but its zero chunks', and each chunk
//! written after such a restore is stored whole once.
//!
//! Packs are never modified, only left behind. Garbage is bounded: a pack
//! whose chunks still in use hold less than half its bytes, or one beyond
//! [`MAX_PACKS`], has its chunks written again into the next snapshot's new
//! pack, after which no snapshot from then on names it.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::{CHUNK, Image};

/// A chunk equal to the initial image (zeros past it): nothing stored.
pub(crate) const ZERO: u8 = 0;
/// Stored as is.
pub(crate) const RAW: u8 = 1;
/// Stored as an LZ4 block.
pub(crate) const LZ4: u8 = 2;
/// Bytes of a table entry: kind, pack (u32), offset (u64), stored (u32).
pub(crate) const ENTRY: usize = 17;
/// Bytes of a page, the unit a patch is made of.
pub(crate) const PAGE: usize = 4096;
/// Pages in a chunk (one bit each in a patch's `pages`).
pub(crate) const PAGES: usize = CHUNK / PAGE;
/// A written chunk is patched when at most this many of its pages differ
/// from its anchor; beyond, it is stored whole again (and becomes the anchor).
const MAX_PATCH_PAGES: u32 = PAGES as u32 / 2;
/// Bytes of a patch table entry: chunk (u32), kind, pack (u32), offset
/// (u64), stored (u32), pages (u16).
pub(crate) const PATCH_ENTRY: usize = 23;
/// The most packs one snapshot names.
pub const MAX_PACKS: usize = 64;
/// Bytes of a chunk tried first, to tell incompressible chunks cheaply.
const PROBE: usize = 4096;
/// Chunks per thread below which one thread does it all.
const PER_THREAD: usize = 64;
/// The pack index of chunks written into the snapshot being built, until
/// [`Tables::seal`] knows the new pack's place in the header.
const NEW: u32 = u32::MAX;

/// A pack of memory chunks a snapshot needs, by content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackEntry {
    /// BLAKE3 of its bytes, hex: its name in the [`BlobStore`](crate::BlobStore).
    pub blake3: String,
    /// Its length.
    pub size: u64,
}

/// Where one chunk's bytes lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkRef {
    pub(crate) kind: u8,
    pub(crate) pack: u32,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

const ZERO_REF: ChunkRef = ChunkRef { kind: ZERO, pack: 0, offset: 0, len: 0 };

/// The pages of a chunk that differ from its anchor, stored (RAW or LZ4) in
/// page order: one bit per page in `pages`, page 0 the lowest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PatchRef {
    pub(crate) kind: u8,
    pub(crate) pack: u32,
    pub(crate) offset: u64,
    pub(crate) len: u32,
    pub(crate) pages: u16,
}

/// Hashes of a chunk's pages (XORed with the initial image), seeded per
/// process: they never leave it. All zero: not known.
pub(crate) type PageHashes = [u128; PAGES];

const UNKNOWN: PageHashes = [0; PAGES];

fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0x616e_6465_735f_7067u64)
    })
}

/// The hashes of a whole chunk's pages.
fn page_hashes(chunk: &[u8]) -> PageHashes {
    let mut h = UNKNOWN;
    for (h, page) in h.iter_mut().zip(chunk.chunks_exact(PAGE)) {
        *h = xxhash_rust::xxh3::xxh3_128_with_seed(page, seed());
    }
    h
}

/// The hashes of a chunk equal to the initial image (zero once XORed).
fn zero_hashes() -> PageHashes {
    static ZERO_HASHES: OnceLock<PageHashes> = OnceLock::new();
    *ZERO_HASHES.get_or_init(|| page_hashes(&[0u8; CHUNK]))
}

/// One memory of a [`Chain`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChainMemory {
    pub(crate) bytes: u64,
    /// BLAKE3 (hex) of the initial image its chunks are XORed with.
    pub(crate) base: String,
    /// Each chunk's entry: for a patched chunk, its anchor.
    pub(crate) chunks: Vec<ChunkRef>,
    /// Each chunk's patch over its anchor, if it has one; empty when no
    /// chunk has.
    pub(crate) patches: Vec<Option<PatchRef>>,
    /// The hashes of each chunk's anchor's pages ([`UNKNOWN`] where not known).
    pub(crate) hashes: Vec<PageHashes>,
}

impl ChainMemory {
    fn patch(&self, c: usize) -> Option<&PatchRef> {
        self.patches.get(c).and_then(Option::as_ref)
    }

    /// Bytes its chunks and patches take in their packs.
    pub(crate) fn stored(&self) -> u64 {
        let patches = self.patches.iter().flatten().map(|p| u64::from(p.len));
        self.chunks.iter().map(|c| u64::from(c.len)).chain(patches).sum()
    }
}

/// What a snapshot's memories are made of: the packs it names and where
/// each chunk lies. The next snapshot of the same job is built on it
/// ([`crate::Builder::building_on`]) and stores only what changed since.
///
/// Cloning one is cheap: its memories' tables are shared.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    pub(crate) packs: Vec<PackEntry>,
    pub(crate) memories: Arc<Vec<ChainMemory>>,
}

/// What restoring one memory learned of its chunks as they are stored
/// ([`crate::Opened::restore_memory`]), for [`Chain::learn`].
#[derive(Debug)]
pub struct Anchors {
    pub(crate) index: usize,
    pub(crate) hashes: Vec<PageHashes>,
}

impl Chain {
    /// Takes in what a restore learned of a memory's stored chunks, so that
    /// the next snapshot built on this chain stores a restored chunk with
    /// few pages changed as those pages, not whole. What does not fit (a
    /// memory the chain lacks, or another count of chunks) is ignored: the
    /// next snapshot then stores written chunks whole, as without it.
    pub fn learn(&mut self, anchors: Anchors) {
        let fits = |m: &ChainMemory| m.chunks.len() == anchors.hashes.len();
        if self.memories.get(anchors.index).is_some_and(fits) {
            std::sync::Arc::make_mut(&mut self.memories)[anchors.index].hashes = anchors.hashes;
        }
    }

    /// The packs the snapshot names.
    pub fn packs(&self) -> &[PackEntry] {
        &self.packs
    }

    /// Bytes of its packs still used by its chunks, per pack.
    pub(crate) fn live(&self) -> Vec<u64> {
        let mut live = vec![0u64; self.packs.len()];
        for m in self.memories.iter() {
            let chunks = m.chunks.iter().filter(|c| c.kind != ZERO).map(|c| (c.pack, c.len));
            for (pack, len) in chunks.chain(m.patches.iter().flatten().map(|p| (p.pack, p.len))) {
                if let Some(l) = live.get_mut(pack as usize) {
                    *l += u64::from(len);
                }
            }
        }
        live
    }

    /// Which of its packs the next snapshot stops naming (their chunks still
    /// in use are written again): those less than half used, then the least
    /// used beyond `MAX_PACKS - 1` (room for the next snapshot's own).
    pub(crate) fn retired(&self) -> Vec<bool> {
        let live = self.live();
        let mut retired: Vec<bool> =
            self.packs.iter().zip(&live).map(|(p, &l)| l.saturating_mul(2) < p.size).collect();
        let mut kept: Vec<usize> = (0..self.packs.len()).filter(|&i| !retired[i]).collect();
        if kept.len() > MAX_PACKS - 1 {
            kept.sort_by_key(|&i| std::cmp::Reverse(live[i]));
            for &i in &kept[MAX_PACKS - 1..] {
                retired[i] = true;
            }
        }
        retired
    }
}

pub(crate) fn threads(chunks: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(chunks / PER_THREAD).max(1)
}

fn is_zero(b: &[u8]) -> bool {
    // Blocks that fold without branches vectorise; the early exit is per block.
    b.chunks(256).all(|blk| blk.iter().fold(0u8, |a, x| a | x) == 0)
}

pub(crate) fn base_part(base: &[u8], start: usize, len: usize) -> &[u8] {
    if start >= base.len() { &[] } else { &base[start..(start + len).min(base.len())] }
}

/// A linear memory as the encoder reads it, a chunk at a time: a plain
/// slice, or a memory still in use whose chunks are read under some
/// protocol with its writer (the starter's snapshot taken off the job's
/// thread). Every chunk is read at most once per memory added.
pub trait ChunkSource: Sync {
    /// The memory's length in bytes.
    fn len(&self) -> usize;

    /// True when the memory has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Chunk `c` (of [`CHUNK`] bytes, fewer at the end): borrowed from the
    /// source, or copied into `copy` (of `CHUNK` bytes) and borrowed from it.
    fn chunk<'a>(&'a self, c: usize, copy: &'a mut [u8]) -> &'a [u8];
}

impl ChunkSource for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn chunk<'a>(&'a self, c: usize, _copy: &'a mut [u8]) -> &'a [u8] {
        let start = c * CHUNK;
        &self[start..(start + CHUNK).min(<[u8]>::len(self))]
    }
}

/// What became of a chunk read for a snapshot.
#[derive(Clone, Copy, Debug)]
enum Encoded {
    /// Equal to the initial image.
    Zero,
    /// Equal to its anchor: the anchor alone is its entry again.
    Same,
    /// Stored whole: its kind, its stored length (its pages' hashes are
    /// beside it).
    Whole(u8, u32),
    /// The pages (bits) that differ from its anchor, stored: kind, length.
    Patch(u8, u32, u16),
}

/// Stores `bytes` into `out` as an LZ4 block, or raw where LZ4 does not pay
/// (random-looking data is told by a probe of its first 4 KiB, at a
/// sixteenth of the cost); returns the kind and the length stored.
fn store(bytes: &[u8], out: &mut [u8], packed: &mut [u8]) -> (u8, usize) {
    let probe = &bytes[..bytes.len().min(PROBE)];
    let worth = bytes.len() <= PROBE
        || matches!(lz4_flex::block::compress_into(probe, packed),
            Ok(n) if n < probe.len() - probe.len() / 16);
    let packed_len = if worth { lz4_flex::block::compress_into(bytes, packed).ok() } else { None };
    match packed_len {
        Some(n) if n < bytes.len() - bytes.len() / 16 => {
            out[..n].copy_from_slice(&packed[..n]);
            (LZ4, n)
        }
        _ => {
            out[..bytes.len()].copy_from_slice(bytes);
            (RAW, bytes.len())
        }
    }
}

/// Encodes the chunks `todo` of `bytes` (XORed with `base`) into `data`,
/// which has room for every one of them raw: a chunk with an anchor
/// (`anchors`, its pages' hashes, beside `todo`) as a patch over it where
/// few of its pages differ. Returns what became of each, and how many bytes
/// of `data` they took; a chunk stored whole has its pages' hashes written
/// in `hashes` (beside `todo`).
fn encode_some(
    bytes: &dyn ChunkSource,
    base: &[u8],
    todo: &[usize],
    anchors: &[Option<&PageHashes>],
    hashes_out: &mut [PageHashes],
    data: &mut [u8],
) -> (Vec<Encoded>, usize) {
    let mut copy = vec![0u8; CHUNK];
    let mut scratch = vec![0u8; CHUNK];
    let mut gathered = vec![0u8; MAX_PATCH_PAGES as usize * PAGE];
    let mut packed = vec![0u8; lz4_flex::block::get_maximum_output_size(CHUNK)];
    let mut used = 0usize;
    let mut out = Vec::with_capacity(todo.len());
    for ((&c, anchor), hashes_out) in todo.iter().zip(anchors).zip(hashes_out) {
        let start = c * CHUNK;
        let src = bytes.chunk(c, &mut copy);
        let b = base_part(base, start, src.len());
        let chunk: &[u8] = if b.is_empty() {
            src
        } else {
            scratch[..src.len()].copy_from_slice(src);
            for (d, x) in scratch[..b.len()].iter_mut().zip(b) {
                *d ^= x;
            }
            &scratch[..src.len()]
        };
        if is_zero(chunk) {
            out.push(Encoded::Zero);
            continue;
        }
        let hashes = if chunk.len() == CHUNK { page_hashes(chunk) } else { UNKNOWN };
        if let Some(anchor) = anchor.filter(|_| chunk.len() == CHUNK) {
            let pages = (0..PAGES)
                .filter(|&p| hashes[p] != anchor[p])
                .fold(0u16, |bits, p| bits | (1 << p));
            if pages == 0 {
                out.push(Encoded::Same);
                continue;
            }
            if pages.count_ones() <= MAX_PATCH_PAGES {
                let mut n = 0;
                for p in (0..PAGES).filter(|p| pages >> p & 1 == 1) {
                    gathered[n..n + PAGE].copy_from_slice(&chunk[p * PAGE..(p + 1) * PAGE]);
                    n += PAGE;
                }
                let (kind, stored) = store(&gathered[..n], &mut data[used..], &mut packed);
                out.push(Encoded::Patch(kind, stored as u32, pages));
                used += stored;
                continue;
            }
        }
        let (kind, stored) = store(chunk, &mut data[used..], &mut packed);
        out.push(Encoded::Whole(kind, stored as u32));
        *hashes_out = hashes;
        used += stored;
    }
    (out, used)
}

/// True when a chunk stored as `kind` in pack `pack` may still be named:
/// zero (stored nowhere), or in a pack the next snapshot keeps naming.
fn usable(retired: &[bool], kind: u8, pack: u32) -> bool {
    kind == ZERO || retired.get(pack as usize) == Some(&false)
}

/// How a chunk of the next memory is had.
enum Plan<'a> {
    /// As the previous snapshot has it (unchanged, whole, its packs named).
    Kept,
    /// Read and encoded again: over its anchor, whose pages' hashes are
    /// given, where that is usable.
    Read(Option<&'a PageHashes>),
}

/// Each chunk of a memory of `len` bytes, given to `each` with its plan:
/// kept when `changed` does not name it and the previous snapshot's memory
/// `prev` holds it whole, in packs still named (or zero); else read again.
fn classify<'a>(
    prev: Option<&'a ChainMemory>,
    retired: &[bool],
    len: usize,
    changed: &dyn Fn(usize) -> bool,
    mut each: impl FnMut(usize, Plan<'a>),
) {
    let previous_bytes = prev.map_or(0, |m| m.bytes);
    let whole = |c: usize| (c as u64 + 1) * CHUNK as u64 <= previous_bytes.min(len as u64);
    for c in 0..len.div_ceil(CHUNK) {
        let anchor = prev
            .filter(|_| whole(c))
            .and_then(|m| Some((m, m.chunks.get(c)?)))
            .filter(|(_, a)| usable(retired, a.kind, a.pack));
        let Some((m, _)) = anchor else {
            each(c, Plan::Read(None));
            continue;
        };
        let patch_usable = m.patch(c).is_none_or(|p| usable(retired, RAW, p.pack));
        if !changed(c) && patch_usable {
            each(c, Plan::Kept);
        } else {
            each(c, Plan::Read(m.hashes.get(c).filter(|h| **h != UNKNOWN)));
        }
    }
}

/// The tables of the snapshot being built, and its new pack.
#[derive(Default)]
pub(crate) struct Tables {
    previous: Option<Chain>,
    retired: Vec<bool>,
    /// Packs named so far: the previous snapshot's still in use.
    packs: Vec<PackEntry>,
    /// A previous pack's index among `packs`.
    remap: HashMap<u32, u32>,
    memories: Vec<ChainMemory>,
    /// The new pack.
    pub(crate) pack: Vec<u8>,
}

impl Tables {
    pub(crate) fn building_on(chain: &Chain) -> Tables {
        Tables { retired: chain.retired(), previous: Some(chain.clone()), ..Tables::default() }
    }

    /// The previous snapshot's memory `index`, if it had that memory with
    /// the same base.
    fn previous_of<'a>(
        previous: Option<&'a Chain>,
        index: usize,
        base_hash: &str,
    ) -> Option<&'a ChainMemory> {
        previous.and_then(|p| p.memories.get(index)).filter(|m| m.base == base_hash)
    }

    /// The chunks of the next memory, of `len` bytes diffed against `base`,
    /// that [`Tables::memory`] will read (encode again), in order.
    pub(crate) fn to_read(
        &self,
        len: usize,
        base: &Image,
        changed: &dyn Fn(usize) -> bool,
    ) -> Vec<usize> {
        let prev = Self::previous_of(self.previous.as_ref(), self.memories.len(), base.hash());
        let mut todo = Vec::new();
        classify(prev, &self.retired, len, changed, |c, plan| {
            if let Plan::Read(_) = plan {
                todo.push(c);
            }
        });
        todo
    }

    /// Adds the next memory: a chunk `changed` does not name, of the same
    /// memory (same base) in the previous snapshot, in packs still named,
    /// is taken from there; every other is encoded into the new pack, as
    /// a patch over its anchor where few of its pages differ from it.
    pub(crate) fn memory(
        &mut self,
        bytes: &dyn ChunkSource,
        base: &Image,
        changed: &dyn Fn(usize) -> bool,
    ) {
        let chunks = bytes.len().div_ceil(CHUNK);
        let mut refs = vec![ZERO_REF; chunks];
        let mut patches: Vec<Option<PatchRef>> = Vec::new();
        let mut hashes = vec![UNKNOWN; chunks];
        // Taken out while `reuse` names its packs, put back after.
        let last = self.previous.take();
        let prev = Self::previous_of(last.as_ref(), self.memories.len(), base.hash());
        let (mut todo, mut anchors, mut kept) = (Vec::new(), Vec::new(), Vec::new());
        classify(prev, &self.retired, bytes.len(), changed, |c, plan| match plan {
            Plan::Read(anchor) => {
                todo.push(c);
                anchors.push(anchor);
            }
            Plan::Kept => kept.push(c),
        });
        let patch = |patches: &mut Vec<Option<PatchRef>>, c: usize, p: PatchRef| {
            patches.resize(chunks, None);
            patches[c] = Some(p);
        };
        // Chunk `c`'s anchor in the previous snapshot, named in this one
        // (a chunk kept, or read with an anchor, had `prev`), and its hashes.
        let anchor = |t: &mut Tables, c: usize| match prev.map_or(ZERO_REF, |m| m.chunks[c]) {
            a if a.kind == ZERO => a,
            a => ChunkRef { pack: t.reuse(a.pack, last.as_ref()), ..a },
        };
        let anchor_hashes =
            |c: usize| prev.and_then(|m| m.hashes.get(c).copied()).unwrap_or(UNKNOWN);
        for &c in &kept {
            refs[c] = anchor(self, c);
            hashes[c] = anchor_hashes(c);
            if let Some(&q) = prev.and_then(|m| m.patch(c)) {
                let pack = self.reuse(q.pack, last.as_ref());
                patch(&mut patches, c, PatchRef { pack, ..q });
            }
        }
        let mut whole_hashes = vec![UNKNOWN; todo.len()];
        let encoded =
            encode(&mut self.pack, bytes, base.bytes(), &todo, &anchors, &mut whole_hashes);
        for ((&c, (what, at)), h) in todo.iter().zip(encoded).zip(whole_hashes) {
            match what {
                Encoded::Zero => hashes[c] = zero_hashes(),
                Encoded::Same => {
                    refs[c] = anchor(self, c);
                    hashes[c] = anchor_hashes(c);
                }
                Encoded::Whole(kind, len) => {
                    refs[c] = ChunkRef { kind, pack: NEW, offset: at, len };
                    hashes[c] = h;
                }
                Encoded::Patch(kind, len, pages) => {
                    refs[c] = anchor(self, c);
                    hashes[c] = anchor_hashes(c);
                    patch(&mut patches, c, PatchRef { kind, pack: NEW, offset: at, len, pages });
                }
            }
        }
        self.previous = last;
        self.memories.push(ChainMemory {
            bytes: bytes.len() as u64,
            base: base.hash().to_string(),
            chunks: refs,
            patches,
            hashes,
        });
    }

    /// `old`'s index among the packs named so far, naming it if it is not
    /// yet (`previous` is the chain built on).
    fn reuse(&mut self, old: u32, previous: Option<&Chain>) -> u32 {
        if let Some(&i) = self.remap.get(&old) {
            return i;
        }
        let i = self.packs.len() as u32;
        let entry = previous.and_then(|p| p.packs.get(old as usize)).cloned();
        self.packs.extend(entry);
        self.remap.insert(old, i);
        i
    }

    /// The packs named (the new one last, if any), the memories' sections
    /// as written in the body, and the chain the next snapshot builds on.
    pub(crate) fn seal(mut self) -> (Vec<PackEntry>, Vec<Vec<u8>>, Chain, Vec<u8>) {
        let pack = std::mem::take(&mut self.pack);
        if !pack.is_empty() {
            let new = self.packs.len() as u32;
            self.packs.push(PackEntry { blake3: crate::blob_hash(&pack), size: pack.len() as u64 });
            for m in &mut self.memories {
                for c in m.chunks.iter_mut().filter(|c| c.pack == NEW) {
                    c.pack = new;
                }
                for p in m.patches.iter_mut().flatten().filter(|p| p.pack == NEW) {
                    p.pack = new;
                }
            }
        }
        let sections = self.memories.iter().map(section).collect();
        let chain = Chain { packs: self.packs.clone(), memories: Arc::new(self.memories) };
        (self.packs, sections, chain, pack)
    }
}

/// Encodes chunks `todo` (with their `anchors`) at the end of `pack`, on
/// every core: each thread writes where its chunks would lie were they all
/// raw, then the parts close up. Returns what became of each chunk, and
/// where in `pack` its stored bytes lie; `hashes` (beside `todo`) gets the
/// pages' hashes of each chunk stored whole.
fn encode(
    pack: &mut Vec<u8>,
    bytes: &dyn ChunkSource,
    base: &[u8],
    todo: &[usize],
    anchors: &[Option<&PageHashes>],
    hashes: &mut [PageHashes],
) -> Vec<(Encoded, u64)> {
    if todo.is_empty() {
        return Vec::new();
    }
    let start = pack.len();
    crate::pages::grow_zeroed(pack, start + todo.len() * CHUNK);
    let n = threads(todo.len());
    let per = todo.len().div_ceil(n).max(1);
    let data = &mut pack[start..];
    let parts: Vec<(Vec<Encoded>, usize)> = if n == 1 {
        vec![encode_some(bytes, base, todo, anchors, hashes, data)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = todo
                .chunks(per)
                .zip(anchors.chunks(per))
                .zip(hashes.chunks_mut(per))
                .zip(data.chunks_mut(per * CHUNK))
                .map(|(((todo, anchors), hashes), data)| {
                    s.spawn(move || encode_some(bytes, base, todo, anchors, hashes, data))
                })
                .collect();
            // A part that panicked would leave its chunks unwritten:
            // the snapshot fails rather than be sealed wrong.
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut out = Vec::with_capacity(todo.len());
    let mut end = start;
    for (t, (whats, used)) in parts.iter().enumerate() {
        let from = start + t * per * CHUNK;
        if from != end {
            pack.copy_within(from..from + used, end);
        }
        let mut at = end;
        for &what in whats {
            out.push((what, at as u64));
            if let Encoded::Whole(_, len) | Encoded::Patch(_, len, _) = what {
                at += len as usize;
            }
        }
        end += used;
    }
    pack.truncate(end);
    out
}

/// A memory's section: `u64 length`, `u32 chunks`, the table, then `u32
/// patches` and the patch table, in chunk order.
fn section(m: &ChainMemory) -> Vec<u8> {
    let patched: Vec<(usize, &PatchRef)> =
        m.patches.iter().enumerate().filter_map(|(c, p)| Some((c, p.as_ref()?))).collect();
    let mut out = Vec::with_capacity(16 + m.chunks.len() * ENTRY + patched.len() * PATCH_ENTRY);
    out.extend_from_slice(&m.bytes.to_le_bytes());
    out.extend_from_slice(&(m.chunks.len() as u32).to_le_bytes());
    for c in &m.chunks {
        out.push(c.kind);
        out.extend_from_slice(&c.pack.to_le_bytes());
        out.extend_from_slice(&c.offset.to_le_bytes());
        out.extend_from_slice(&c.len.to_le_bytes());
    }
    out.extend_from_slice(&(patched.len() as u32).to_le_bytes());
    for (c, p) in patched {
        out.extend_from_slice(&(c as u32).to_le_bytes());
        out.push(p.kind);
        out.extend_from_slice(&p.pack.to_le_bytes());
        out.extend_from_slice(&p.offset.to_le_bytes());
        out.extend_from_slice(&p.len.to_le_bytes());
        out.extend_from_slice(&p.pages.to_le_bytes());
    }
    out
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap_or_default())
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or_default())
}

/// Reads a section's tables (format `version`: patches from 3 on), checking
/// every entry against the packs the header names: a kind that exists, a
/// stored length that fits the kind, bytes inside the named pack, and each
/// patch of a whole chunk, once, in chunk order.
pub(crate) fn parse(
    section: &[u8],
    base: &str,
    packs: &[PackEntry],
    version: u32,
) -> Result<ChainMemory, String> {
    if section.len() < 12 {
        return Err(format!("section of {} bytes is too short", section.len()));
    }
    let bytes = le_u64(&section[..8]);
    let chunks = le_u32(&section[8..12]) as usize;
    if usize::try_from(bytes).map(|b| b.div_ceil(CHUNK)) != Ok(chunks) {
        return Err(format!("{chunks} chunks cannot hold {bytes} bytes"));
    }
    let table_end = chunks.checked_mul(ENTRY).and_then(|t| t.checked_add(12));
    let fits = match table_end {
        Some(end) if version < 3 => end == section.len(),
        Some(end) => end.checked_add(4).is_some_and(|e| e <= section.len()),
        None => false,
    };
    let table_end = match table_end {
        Some(end) if fits => end,
        _ => {
            return Err(format!(
                "its table of {chunks} chunks does not fill its {} bytes",
                section.len()
            ));
        }
    };
    let inside = |c: usize, pack: u32, offset: u64, len: u64| -> Result<(), String> {
        let p = packs.get(pack as usize).ok_or_else(|| {
            format!("chunk {c}: pack {pack} of the {} the snapshot names", packs.len())
        })?;
        if offset.checked_add(len).is_none_or(|end| end > p.size) {
            return Err(format!(
                "chunk {c}: {len} bytes at {offset} lie outside pack {} ({} bytes)",
                p.blake3, p.size
            ));
        }
        Ok(())
    };
    let mut out = Vec::with_capacity(chunks);
    let mut hashes = Vec::with_capacity(chunks);
    for (c, e) in section[12..table_end].chunks_exact(ENTRY).enumerate() {
        let r = ChunkRef {
            kind: e[0],
            pack: le_u32(&e[1..5]),
            offset: le_u64(&e[5..13]),
            len: le_u32(&e[13..17]),
        };
        let raw = CHUNK.min(bytes as usize - c * CHUNK) as u64;
        let len = u64::from(r.len);
        let ok = match r.kind {
            ZERO => r == ZERO_REF,
            RAW => len == raw,
            LZ4 => len > 0 && len < raw,
            _ => false,
        };
        if !ok {
            return Err(format!("chunk {c}: kind {} with {len} bytes stored is invalid", r.kind));
        }
        if r.kind != ZERO {
            inside(c, r.pack, r.offset, len)?;
        }
        out.push(r);
        hashes.push(if r.kind == ZERO { zero_hashes() } else { UNKNOWN });
    }
    let mut patches = Vec::new();
    if version >= 3 {
        let count = le_u32(&section[table_end..table_end + 4]) as usize;
        let rest = &section[table_end + 4..];
        if count > chunks || count.checked_mul(PATCH_ENTRY) != Some(rest.len()) {
            return Err(format!(
                "its table of {count} patches does not fill its last {} bytes",
                rest.len()
            ));
        }
        if count > 0 {
            patches = vec![None; chunks];
        }
        let mut last = None;
        for e in rest.chunks_exact(PATCH_ENTRY) {
            let c = le_u32(&e[..4]) as usize;
            let p = PatchRef {
                kind: e[4],
                pack: le_u32(&e[5..9]),
                offset: le_u64(&e[9..17]),
                len: le_u32(&e[17..21]),
                pages: u16::from_le_bytes([e[21], e[22]]),
            };
            if c >= chunks || last.is_some_and(|l| c <= l) {
                return Err(format!("a patch of chunk {c}, out of order or past the last chunk"));
            }
            last = Some(c);
            if (c + 1) * CHUNK > bytes as usize {
                return Err(format!("chunk {c}: a patch of a chunk that is not whole"));
            }
            let raw = u64::from(p.pages.count_ones()) * PAGE as u64;
            let len = u64::from(p.len);
            let ok = p.pages != 0
                && match p.kind {
                    RAW => len == raw,
                    LZ4 => len > 0 && len < raw,
                    _ => false,
                };
            if !ok {
                return Err(format!(
                    "chunk {c}: a patch of kind {} with {len} bytes stored for pages {:#06x} is invalid",
                    p.kind, p.pages
                ));
            }
            inside(c, p.pack, p.offset, len)?;
            patches[c] = Some(p);
        }
    }
    Ok(ChainMemory { bytes, base: base.to_string(), chunks: out, patches, hashes })
}

/// What a chunk's bytes are: its kind (ZERO, RAW or LZ4) and stored bytes,
/// and the patch over it, if any (kind, stored bytes, pages).
pub(crate) struct Stored<'a> {
    pub(crate) kind: u8,
    pub(crate) bytes: &'a [u8],
    pub(crate) patch: Option<(u8, &'a [u8], u16)>,
}

/// Writes a memory from its table and the packs' bytes (`packs[i]` is the
/// header's pack `i`, its size and hash already checked) into `dest`;
/// returns the pages' hashes of each chunk's anchor as stored (as [`ChainMemory::hashes`]: the next
/// snapshot of a restored job can patch its chunks at once, not store each
/// written one whole first).
pub(crate) fn decode(
    m: &ChainMemory,
    packs: &[crate::PackBytes],
    dest: &mut [u8],
    base: &[u8],
    fresh: bool,
) -> Result<Vec<PageHashes>, String> {
    if m.bytes != dest.len() as u64 {
        return Err(format!("it is {} bytes, the destination {} bytes", m.bytes, dest.len()));
    }
    let bytes_of = |c: usize, pack: u32, offset: u64, len: u32| -> Result<&[u8], String> {
        let pack: &[u8] =
            (**packs.get(pack as usize).ok_or_else(|| format!("chunk {c}: no pack"))?).as_ref();
        usize::try_from(offset)
            .ok()
            .and_then(|o| pack.get(o..o.checked_add(len as usize)?))
            .ok_or_else(|| format!("chunk {c}: outside its pack"))
    };
    let mut hashes = m.hashes.clone();
    hashes.resize(m.chunks.len(), UNKNOWN);
    decode_chunks(dest, base, fresh, Some(&mut hashes), |c| {
        let e = m.chunks.get(c).ok_or_else(|| format!("chunk {c}: not in the table"))?;
        let patch = match m.patch(c) {
            Some(p) => Some((p.kind, bytes_of(c, p.pack, p.offset, p.len)?, p.pages)),
            None => None,
        };
        if e.kind == ZERO && patch.is_none() {
            return Ok(None);
        }
        let bytes = if e.kind == ZERO { &[][..] } else { bytes_of(c, e.pack, e.offset, e.len)? };
        Ok(Some(Stored { kind: e.kind, bytes, patch }))
    })?;
    Ok(hashes)
}

/// Writes each chunk of `dest` from what `stored` says of it (`None`: equal
/// to the initial image; else how it is stored), XORed back with `base`, on
/// every core. Both formats decode through it. With `fresh`, `dest` already
/// holds `base` then zeros and `None` chunks are left untouched. With
/// `hashes` (one a chunk), each whole chunk stored not as zero gets its
/// pages' hashes as stored (its anchor's, before any patch), while it is in
/// the cache anyway.
pub(crate) fn decode_chunks<'a>(
    dest: &mut [u8],
    base: &[u8],
    fresh: bool,
    hashes: Option<&mut [PageHashes]>,
    stored: impl Fn(usize) -> Result<Option<Stored<'a>>, String> + Sync,
) -> Result<(), String> {
    let chunks = dest.len().div_ceil(CHUNK);
    let n = threads(chunks);
    let per = chunks.div_ceil(n.max(1)).max(1);
    if hashes.as_ref().is_some_and(|h| h.len() != chunks) {
        return Err(format!(
            "{} chunks' hashes for {chunks} chunks",
            hashes.map_or(0, |h| h.len())
        ));
    }
    let work = |first: usize, dest: &mut [u8], mut hashes: Option<&mut [PageHashes]>| {
        let mut scratch = Vec::new();
        for (i, out) in dest.chunks_mut(CHUNK).enumerate() {
            let c = first + i;
            let b = base_part(base, c * CHUNK, out.len());
            let Some(st) = stored(c)? else {
                if !fresh {
                    out[..b.len()].copy_from_slice(b);
                    out[b.len()..].fill(0);
                }
                continue;
            };
            unpack(c, st.kind, st.bytes, out)?;
            if let Some(h) = hashes.as_deref_mut().and_then(|h| h.get_mut(i))
                && st.kind != ZERO
                && out.len() == CHUNK
            {
                *h = page_hashes(out);
            }
            if let Some((kind, bytes, pages)) = st.patch {
                let n = pages.count_ones() as usize * PAGE;
                if out.len() != CHUNK {
                    return Err(format!("chunk {c}: a patch of a chunk that is not whole"));
                }
                scratch.resize(n, 0);
                unpack(c, kind, bytes, &mut scratch)?;
                let at = (0..PAGES).filter(|p| pages >> p & 1 == 1);
                for (p, page) in at.zip(scratch.chunks_exact(PAGE)) {
                    out[p * PAGE..(p + 1) * PAGE].copy_from_slice(page);
                }
            }
            for (o, x) in out.iter_mut().zip(b) {
                *o ^= x;
            }
        }
        Ok::<(), String>(())
    };
    if n == 1 {
        return work(0, dest, hashes);
    }
    let mut hashes = hashes.map(|h| h.chunks_mut(per));
    std::thread::scope(|s| {
        let handles: Vec<_> = dest
            .chunks_mut(per * CHUNK)
            .enumerate()
            .map(|(t, part)| {
                let work = &work;
                let hashes = hashes.as_mut().and_then(|h| h.next());
                s.spawn(move || work(t * per, part, hashes))
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or(Err("decoder thread".into())))
    })
}

/// Writes `bytes`, stored as `kind` (ZERO: nothing), into `out`, which they
/// must fill exactly.
fn unpack(c: usize, kind: u8, bytes: &[u8], out: &mut [u8]) -> Result<(), String> {
    match kind {
        ZERO => out.fill(0),
        RAW if bytes.len() == out.len() => out.copy_from_slice(bytes),
        RAW => return Err(format!("chunk {c}: {} bytes stored for {}", bytes.len(), out.len())),
        _ => {
            let got = lz4_flex::block::decompress_into(bytes, out)
                .map_err(|err| format!("chunk {c}: {err}"))?;
            if got != out.len() {
                return Err(format!("chunk {c}: {got} bytes, expected {}", out.len()));
            }
        }
    }
    Ok(())
}
