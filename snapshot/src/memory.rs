//! One linear memory's section: chunks diffed against the initial image,
//! zero chunks skipped, the rest LZ4 or raw; encoded and decoded on every
//! core.

use crate::CHUNK;

const ZERO: u8 = 0;
const RAW: u8 = 1;
const LZ4: u8 = 2;
const ENTRY: usize = 5;
/// Bytes of a chunk tried first, to tell incompressible chunks cheaply.
const PROBE: usize = 4096;

/// Chunks per thread below which one thread does it all.
const PER_THREAD: usize = 64;

fn threads(chunks: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(chunks / PER_THREAD).max(1)
}

fn is_zero(b: &[u8]) -> bool {
    // Blocks that fold without branches vectorise; the early exit is per block.
    b.chunks(256).all(|blk| blk.iter().fold(0u8, |a, x| a | x) == 0)
}

fn xor_into(dst: &mut [u8], a: &[u8], b: &[u8]) {
    for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
        *d = x ^ y;
    }
}

fn base_part(base: &[u8], start: usize, len: usize) -> &[u8] {
    if start >= base.len() { &[] } else { &base[start..(start + len).min(base.len())] }
}

/// Encodes chunks `first..first+count` of `bytes` into `table` (their
/// entries) and `data` (room for every one of them raw); returns how many
/// bytes of `data` they took.
fn encode_range(
    bytes: &[u8],
    base: &[u8],
    first: usize,
    count: usize,
    table: &mut [u8],
    data: &mut [u8],
) -> usize {
    let mut scratch = vec![0u8; CHUNK];
    let mut packed = vec![0u8; lz4_flex::block::get_maximum_output_size(CHUNK)];
    let mut used = 0usize;
    for (i, entry) in table.chunks_exact_mut(ENTRY).enumerate().take(count) {
        let start = (first + i) * CHUNK;
        let src = &bytes[start..(start + CHUNK).min(bytes.len())];
        let b = base_part(base, start, src.len());
        let chunk: &[u8] = if b.is_empty() {
            src
        } else {
            scratch[..src.len()].copy_from_slice(src);
            xor_into(&mut scratch[..b.len()], &src[..b.len()], b);
            &scratch[..src.len()]
        };
        let (kind, stored) = if is_zero(chunk) {
            (ZERO, 0)
        } else {
            // Random-looking data does not pay for a compression attempt: a
            // probe of its first 4 KiB says so at a sixteenth of the cost.
            let probe = &chunk[..chunk.len().min(PROBE)];
            let worth = chunk.len() <= PROBE
                || matches!(lz4_flex::block::compress_into(probe, &mut packed),
                    Ok(n) if n < probe.len() - probe.len() / 16);
            let packed_len =
                if worth { lz4_flex::block::compress_into(chunk, &mut packed).ok() } else { None };
            match packed_len {
                Some(n) if n < chunk.len() - chunk.len() / 16 => {
                    data[used..used + n].copy_from_slice(&packed[..n]);
                    (LZ4, n)
                }
                _ => {
                    data[used..used + chunk.len()].copy_from_slice(chunk);
                    (RAW, chunk.len())
                }
            }
        };
        entry[0] = kind;
        entry[1..].copy_from_slice(&(stored as u32).to_le_bytes());
        used += stored;
    }
    used
}

/// Appends the section for `bytes`, diffed against `base`, to `out`.
///
/// Each thread writes its chunks' entries and data straight into `out` (its
/// data where they would lie were every chunk raw); then the parts close
/// up. So every byte is written once, and `out` grows once.
pub(crate) fn encode(bytes: &[u8], base: &[u8], out: &mut Vec<u8>) {
    let chunks = bytes.len().div_ceil(CHUNK);
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&(chunks as u32).to_le_bytes());
    let table_at = out.len();
    let data_at = table_at + chunks * ENTRY;
    crate::pages::grow_zeroed(out, data_at + bytes.len());
    let n = threads(chunks);
    let per = chunks.div_ceil(n.max(1)).max(1);
    let (table, data) = out[table_at..].split_at_mut(chunks * ENTRY);
    let used: Vec<usize> = if n == 1 {
        vec![encode_range(bytes, base, 0, chunks, table, data)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = table
                .chunks_mut(per * ENTRY)
                .zip(data.chunks_mut(per * CHUNK))
                .enumerate()
                .map(|(t, (table, data))| {
                    let count = per.min(chunks - t * per);
                    s.spawn(move || encode_range(bytes, base, t * per, count, table, data))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or_default()).collect()
        })
    };
    // Close the gaps that compressed and zero chunks left.
    let mut end = data_at;
    for (t, u) in used.iter().enumerate() {
        let from = data_at + t * per * CHUNK;
        if from != end {
            out.copy_within(from..from + u, end);
        }
        end += u;
    }
    out.truncate(end);
}

struct Entry {
    kind: u8,
    offset: usize,
    len: usize,
}

/// Decodes a section into `dest` (exactly the memory's length).
pub(crate) fn decode(
    section: &[u8],
    dest: &mut [u8],
    base: &[u8],
    fresh: bool,
) -> Result<(), String> {
    if section.len() < 12 {
        return Err(format!("section of {} bytes is too short", section.len()));
    }
    let len = u64::from_le_bytes(section[..8].try_into().unwrap_or_default());
    let chunks = u32::from_le_bytes(section[8..12].try_into().unwrap_or_default()) as usize;
    if len != dest.len() as u64 {
        return Err(format!("section says {len} bytes, the memory is {} bytes", dest.len()));
    }
    if chunks != dest.len().div_ceil(CHUNK) {
        return Err(format!("{chunks} chunks cannot hold {len} bytes"));
    }
    let table_end = chunks
        .checked_mul(ENTRY)
        .and_then(|t| t.checked_add(12))
        .filter(|&e| e <= section.len())
        .ok_or_else(|| format!("its chunk table ({chunks} chunks) is cut short"))?;
    let data = &section[table_end..];
    let mut entries = Vec::with_capacity(chunks);
    let mut offset = 0usize;
    for (c, e) in section[12..table_end].chunks_exact(ENTRY).enumerate() {
        let kind = e[0];
        let stored = u32::from_le_bytes(e[1..5].try_into().unwrap_or_default()) as usize;
        let raw = CHUNK.min(dest.len() - c * CHUNK);
        let ok = match kind {
            ZERO => stored == 0,
            RAW => stored == raw,
            LZ4 => stored > 0 && stored < raw,
            _ => false,
        };
        if !ok {
            return Err(format!("chunk {c}: kind {kind} with {stored} bytes stored is invalid"));
        }
        entries.push(Entry { kind, offset, len: stored });
        offset = offset.checked_add(stored).ok_or("chunk sizes overflow")?;
    }
    if offset != data.len() {
        return Err(format!(
            "its chunks hold {offset} bytes, the section {} bytes after its table",
            data.len()
        ));
    }
    let n = threads(chunks);
    let per = chunks.div_ceil(n.max(1)).max(1);
    let work = |first: usize, dest: &mut [u8]| -> Result<(), String> {
        for (i, out) in dest.chunks_mut(CHUNK).enumerate() {
            let c = first + i;
            let e = &entries[c];
            let b = base_part(base, c * CHUNK, out.len());
            match e.kind {
                ZERO => {
                    if !fresh {
                        out[..b.len()].copy_from_slice(b);
                        out[b.len()..].fill(0);
                    }
                    continue;
                }
                RAW => out.copy_from_slice(&data[e.offset..e.offset + e.len]),
                _ => {
                    let got =
                        lz4_flex::block::decompress_into(&data[e.offset..e.offset + e.len], out)
                            .map_err(|err| format!("chunk {c}: {err}"))?;
                    if got != out.len() {
                        return Err(format!("chunk {c}: {got} bytes, expected {}", out.len()));
                    }
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
