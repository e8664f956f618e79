//! Format 1 memory sections, read for snapshots taken before format 2:
//! chunks diffed against the initial image, zero chunks skipped, the rest
//! LZ4 or raw, stored in the section itself; decoded on every core by the
//! same code as format 2.

use crate::CHUNK;
use crate::chain::{LZ4, RAW, Stored, ZERO, decode_chunks};

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
    decode_chunks(dest, base, fresh, None, |c| {
        let e = &entries[c];
        Ok((e.kind != ZERO).then(|| Stored {
            kind: e.kind,
            bytes: &data[e.offset..e.offset + e.len],
            patch: None,
        }))
    })
}
