//! Format 1 memory sections, read for snapshots taken before format 2:
//! chunks diffed against the initial image, zero chunks skipped, the rest
//! LZ4 or raw, stored in the section itself; decoded on every core.

use crate::CHUNK;
use crate::chain::{LZ4, RAW, ZERO, base_part, threads};

const ENTRY: usize = 5;

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
