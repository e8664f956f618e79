//! Format 2 memory: each 64 KiB chunk, XORed with the module's initial
//! image, is stored in a *pack* (a content-addressed blob of the job's
//! [`BlobStore`](crate::BlobStore)), and a memory's section is only its
//! chunk table: for each chunk, where its bytes lie. A snapshot's first pack
//! holds every chunk that is not zero; each later snapshot of the same job
//! writes a new pack with only the chunks that changed and names the older
//! packs for the rest. So a snapshot costs what changed, and is restorable
//! on its own from its packs: every snapshot names each pack it needs.
//!
//! Packs are never modified, only left behind. Garbage is bounded: a pack
//! whose chunks still in use hold less than half its bytes, or one beyond
//! [`MAX_PACKS`], has its chunks written again into the next snapshot's new
//! pack, after which no snapshot from then on names it.

use std::collections::HashMap;

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

/// One memory of a [`Chain`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChainMemory {
    pub(crate) bytes: u64,
    /// BLAKE3 (hex) of the initial image its chunks are XORed with.
    pub(crate) base: String,
    pub(crate) chunks: Vec<ChunkRef>,
}

/// What a snapshot's memories are made of: the packs it names and where
/// each chunk lies. The next snapshot of the same job is built on it
/// ([`crate::Builder::building_on`]) and stores only what changed since.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    pub(crate) packs: Vec<PackEntry>,
    pub(crate) memories: Vec<ChainMemory>,
}

impl Chain {
    /// The packs the snapshot names.
    pub fn packs(&self) -> &[PackEntry] {
        &self.packs
    }

    /// Bytes of its packs still used by its chunks, per pack.
    pub(crate) fn live(&self) -> Vec<u64> {
        let mut live = vec![0u64; self.packs.len()];
        for m in &self.memories {
            for c in m.chunks.iter().filter(|c| c.kind != ZERO) {
                if let Some(l) = live.get_mut(c.pack as usize) {
                    *l += u64::from(c.len);
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

/// Encodes the chunks `todo` of `bytes` (XORed with `base`) into `data`,
/// which has room for every one of them raw; returns each one's kind and
/// stored length, and how many bytes of `data` they took.
fn encode_some(
    bytes: &dyn ChunkSource,
    base: &[u8],
    todo: &[usize],
    data: &mut [u8],
) -> (Vec<(u8, u32)>, usize) {
    let mut copy = vec![0u8; CHUNK];
    let mut scratch = vec![0u8; CHUNK];
    let mut packed = vec![0u8; lz4_flex::block::get_maximum_output_size(CHUNK)];
    let mut used = 0usize;
    let mut out = Vec::with_capacity(todo.len());
    for &c in todo {
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
            out.push((ZERO, 0));
            continue;
        }
        // Random-looking data does not pay for a compression attempt: a
        // probe of its first 4 KiB says so at a sixteenth of the cost.
        let probe = &chunk[..chunk.len().min(PROBE)];
        let worth = chunk.len() <= PROBE
            || matches!(lz4_flex::block::compress_into(probe, &mut packed),
                Ok(n) if n < probe.len() - probe.len() / 16);
        let packed_len =
            if worth { lz4_flex::block::compress_into(chunk, &mut packed).ok() } else { None };
        let (kind, stored) = match packed_len {
            Some(n) if n < chunk.len() - chunk.len() / 16 => {
                data[used..used + n].copy_from_slice(&packed[..n]);
                (LZ4, n)
            }
            _ => {
                data[used..used + chunk.len()].copy_from_slice(chunk);
                (RAW, chunk.len())
            }
        };
        out.push((kind, stored as u32));
        used += stored;
    }
    (out, used)
}

/// Each chunk of a memory of `len` bytes, given to `each` with the previous
/// snapshot's entry when it is kept (a zero chunk, or named in a pack still
/// in use: unchanged, and whole in both), or `None` when it is encoded again.
fn classify(
    previous: &[ChunkRef],
    previous_bytes: u64,
    retired: &[bool],
    len: usize,
    changed: &dyn Fn(usize) -> bool,
    mut each: impl FnMut(usize, Option<&ChunkRef>),
) {
    let whole = |c: usize| (c as u64 + 1) * CHUNK as u64 <= previous_bytes.min(len as u64);
    for c in 0..len.div_ceil(CHUNK) {
        let kept = previous.get(c).filter(|p| {
            !changed(c)
                && whole(c)
                && (p.kind == ZERO || retired.get(p.pack as usize) == Some(&false))
        });
        each(c, kept);
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

    /// The previous snapshot's entries for memory `index` and its length,
    /// if it had that memory with the same base.
    fn previous_of(&self, index: usize, base_hash: &str) -> (&[ChunkRef], u64) {
        self.previous
            .as_ref()
            .and_then(|p| p.memories.get(index))
            .filter(|m| m.base == base_hash)
            .map_or((&[][..], 0), |m| (&m.chunks[..], m.bytes))
    }

    /// The chunks of the next memory, of `len` bytes diffed against `base`,
    /// that [`Tables::memory`] will read (encode again), in order.
    pub(crate) fn to_read(
        &self,
        len: usize,
        base: &Image,
        changed: &dyn Fn(usize) -> bool,
    ) -> Vec<usize> {
        let (previous, previous_bytes) = self.previous_of(self.memories.len(), base.hash());
        let mut todo = Vec::new();
        classify(previous, previous_bytes, &self.retired, len, changed, |c, kept| {
            if kept.is_none() {
                todo.push(c);
            }
        });
        todo
    }

    /// Adds the next memory: a chunk `changed` does not name, of the same
    /// memory (same base) in the previous snapshot, in a pack still named,
    /// is taken from there; every other is encoded into the new pack.
    pub(crate) fn memory(
        &mut self,
        bytes: &dyn ChunkSource,
        base: &Image,
        changed: &dyn Fn(usize) -> bool,
    ) {
        let index = self.memories.len();
        let chunks = bytes.len().div_ceil(CHUNK);
        let mut refs = vec![ZERO_REF; chunks];
        let (previous, previous_bytes) = self.previous_of(index, base.hash());
        let mut todo = Vec::new();
        let mut kept = Vec::new();
        classify(previous, previous_bytes, &self.retired, bytes.len(), changed, |c, k| match k {
            None => todo.push(c),
            Some(p) if p.kind == ZERO => {}
            Some(p) => kept.push((c, *p)),
        });
        // Taken out while `reuse` names its packs, put back after.
        let last = self.previous.take();
        for (c, p) in kept {
            let pack = self.reuse(p.pack, last.as_ref());
            refs[c] = ChunkRef { pack, ..p };
        }
        self.previous = last;
        self.encode(bytes, base.bytes(), &todo, &mut refs);
        self.memories.push(ChainMemory {
            bytes: bytes.len() as u64,
            base: base.hash().to_string(),
            chunks: refs,
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

    /// Encodes chunks `todo` into the new pack, on every core: each thread
    /// writes where its chunks would lie were they all raw, then the parts
    /// close up.
    fn encode(
        &mut self,
        bytes: &dyn ChunkSource,
        base: &[u8],
        todo: &[usize],
        refs: &mut [ChunkRef],
    ) {
        if todo.is_empty() {
            return;
        }
        let start = self.pack.len();
        crate::pages::grow_zeroed(&mut self.pack, start + todo.len() * CHUNK);
        let n = threads(todo.len());
        let per = todo.len().div_ceil(n).max(1);
        let data = &mut self.pack[start..];
        let parts: Vec<(Vec<(u8, u32)>, usize)> = if n == 1 {
            vec![encode_some(bytes, base, todo, data)]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = todo
                    .chunks(per)
                    .zip(data.chunks_mut(per * CHUNK))
                    .map(|(todo, data)| s.spawn(move || encode_some(bytes, base, todo, data)))
                    .collect();
                // A part that panicked would leave its chunks unwritten:
                // the snapshot fails rather than be sealed wrong.
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            })
        };
        let mut end = start;
        for (t, (kinds, used)) in parts.iter().enumerate() {
            let from = start + t * per * CHUNK;
            if from != end {
                self.pack.copy_within(from..from + used, end);
            }
            let mut at = end;
            for (&c, &(kind, len)) in todo[t * per..].iter().zip(kinds) {
                refs[c] = if kind == ZERO {
                    ZERO_REF
                } else {
                    ChunkRef { kind, pack: NEW, offset: at as u64, len }
                };
                at += len as usize;
            }
            end += used;
        }
        self.pack.truncate(end);
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
            }
        }
        let sections = self.memories.iter().map(section).collect();
        let chain = Chain { packs: self.packs.clone(), memories: self.memories };
        (self.packs, sections, chain, pack)
    }
}

/// A memory's section: `u64 length`, `u32 chunks`, then the table.
fn section(m: &ChainMemory) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + m.chunks.len() * ENTRY);
    out.extend_from_slice(&m.bytes.to_le_bytes());
    out.extend_from_slice(&(m.chunks.len() as u32).to_le_bytes());
    for c in &m.chunks {
        out.push(c.kind);
        out.extend_from_slice(&c.pack.to_le_bytes());
        out.extend_from_slice(&c.offset.to_le_bytes());
        out.extend_from_slice(&c.len.to_le_bytes());
    }
    out
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap_or_default())
}

fn le_u64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap_or_default())
}

/// Reads a section's table, checking every entry against the packs the
/// header names: a kind that exists, a stored length that fits the kind,
/// and bytes inside the named pack.
pub(crate) fn parse(
    section: &[u8],
    base: &str,
    packs: &[PackEntry],
) -> Result<ChainMemory, String> {
    if section.len() < 12 {
        return Err(format!("section of {} bytes is too short", section.len()));
    }
    let bytes = le_u64(&section[..8]);
    let chunks = le_u32(&section[8..12]) as usize;
    if usize::try_from(bytes).map(|b| b.div_ceil(CHUNK)) != Ok(chunks) {
        return Err(format!("{chunks} chunks cannot hold {bytes} bytes"));
    }
    if chunks.checked_mul(ENTRY).and_then(|t| t.checked_add(12)) != Some(section.len()) {
        return Err(format!(
            "its table of {chunks} chunks does not fill its {} bytes",
            section.len()
        ));
    }
    let mut out = Vec::with_capacity(chunks);
    for (c, e) in section[12..].chunks_exact(ENTRY).enumerate() {
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
            let pack = packs.get(r.pack as usize).ok_or_else(|| {
                format!("chunk {c}: pack {} of the {} the snapshot names", r.pack, packs.len())
            })?;
            if r.offset.checked_add(len).is_none_or(|end| end > pack.size) {
                return Err(format!(
                    "chunk {c}: {len} bytes at {} lie outside pack {} ({} bytes)",
                    r.offset, pack.blake3, pack.size
                ));
            }
        }
        out.push(r);
    }
    Ok(ChainMemory { bytes, base: base.to_string(), chunks: out })
}

/// Writes a memory from its table and the packs' bytes (`packs[i]` is the
/// header's pack `i`, its size and hash already checked) into `dest`.
pub(crate) fn decode(
    m: &ChainMemory,
    packs: &[crate::PackBytes],
    dest: &mut [u8],
    base: &[u8],
    fresh: bool,
) -> Result<(), String> {
    if m.bytes != dest.len() as u64 {
        return Err(format!("it is {} bytes, the destination {} bytes", m.bytes, dest.len()));
    }
    decode_chunks(dest, base, fresh, |c| {
        let e = m.chunks.get(c).ok_or_else(|| format!("chunk {c}: not in the table"))?;
        if e.kind == ZERO {
            return Ok(None);
        }
        let pack: &[u8] =
            (**packs.get(e.pack as usize).ok_or_else(|| format!("chunk {c}: no pack"))?).as_ref();
        let stored = usize::try_from(e.offset)
            .ok()
            .and_then(|o| pack.get(o..o + e.len as usize))
            .ok_or_else(|| format!("chunk {c}: outside its pack"))?;
        Ok(Some((e.kind, stored)))
    })
}

/// Writes each chunk of `dest` from what `stored` says of it (`None`: equal
/// to the initial image; else its kind, RAW or LZ4, and its stored bytes),
/// XORed back with `base`, on every core. Both formats decode through it.
/// With `fresh`, `dest` already holds `base` then zeros and `None` chunks
/// are left untouched.
pub(crate) fn decode_chunks<'a>(
    dest: &mut [u8],
    base: &[u8],
    fresh: bool,
    stored: impl Fn(usize) -> Result<Option<(u8, &'a [u8])>, String> + Sync,
) -> Result<(), String> {
    let chunks = dest.len().div_ceil(CHUNK);
    let n = threads(chunks);
    let per = chunks.div_ceil(n.max(1)).max(1);
    let work = |first: usize, dest: &mut [u8]| -> Result<(), String> {
        for (i, out) in dest.chunks_mut(CHUNK).enumerate() {
            let c = first + i;
            let b = base_part(base, c * CHUNK, out.len());
            let Some((kind, bytes)) = stored(c)? else {
                if !fresh {
                    out[..b.len()].copy_from_slice(b);
                    out[b.len()..].fill(0);
                }
                continue;
            };
            if kind == RAW {
                out.copy_from_slice(bytes);
            } else {
                let got = lz4_flex::block::decompress_into(bytes, out)
                    .map_err(|err| format!("chunk {c}: {err}"))?;
                if got != out.len() {
                    return Err(format!("chunk {c}: {got} bytes, expected {}", out.len()));
                }
            }
            for (o, x) in out.iter_mut().zip(b) {
                *o ^= x;
            }
        }
        Ok(())
    };
    if n == 1 {
        return work(0, dest);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = dest
            .chunks_mut(per * CHUNK)
            .enumerate()
            .map(|(t, part)| {
                let work = &work;
                s.spawn(move || work(t * per, part))
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or(Err("decoder thread".into())))
    })
}
