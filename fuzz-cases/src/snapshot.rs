//! Decodes arbitrary bytes as a checkpoint snapshot the way an execute host
//! restores one. Nothing may panic or allocate without bound.
//!
//! Input: a flag byte, then the rest. Flag bit 0 clear: the rest is a whole
//! snapshot file, opened trusting every key (so the hash and signature checks
//! are what stop it). Bit 0 set: the rest is `u32 LE header length`, a JSON
//! header and a body, sealed here with a valid hash and signature, so the
//! header parser and the memory decoder see arbitrary signed content; each
//! memory it declares (up to 4 MiB) is then restored, fresh or not (bit 1).
//! With bit 2 set too, every pack the header names is renamed to the body's
//! own bytes, which are put in a blob store: the chunk tables then point
//! into real, loadable packs.

use andes_snapshot::{FORMAT_VERSION, MAGIC, SIGNATURE_CONTEXT, open};
use ed25519_dalek::{Signer as _, SigningKey};

const MODULE: [u8; 32] = [7; 32];

fn seal(header: &[u8], body: &[u8]) -> Vec<u8> {
    let key = SigningKey::from_bytes(&[1; 32]);
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(header);
    let hash = blake3::hash(&out);
    out.extend_from_slice(&key.verifying_key().to_bytes());
    out.extend_from_slice(hash.as_bytes());
    let mut msg = SIGNATURE_CONTEXT.to_vec();
    msg.extend_from_slice(hash.as_bytes());
    out.extend_from_slice(&key.sign(&msg).to_bytes());
    out
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Some((&flag, rest)) = data.split_first() else { return };
    let file = if flag & 1 == 0 {
        rest.to_vec()
    } else {
        if rest.len() < 4 {
            return;
        }
        let n = (u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize).min(rest.len() - 4);
        let (header, body) = (&rest[4..4 + n], &rest[4 + n..]);
        match serde_json::from_slice::<serde_json::Value>(header) {
            Ok(mut h) if flag & 4 != 0 => {
                let name = blake3::hash(body).to_hex().to_string();
                if let Some(packs) = h.get_mut("packs").and_then(|p| p.as_array_mut()) {
                    for p in packs.iter_mut().filter_map(|p| p.as_object_mut()) {
                        p.insert("blake3".into(), name.clone().into());
                    }
                }
                seal(&serde_json::to_vec(&h).unwrap_or_default(), body)
            }
            _ => seal(header, body),
        }
    };
    let _ = andes_snapshot::inspect(&file);
    let Ok(snap) = open(&file, &|_| true, &MODULE) else { return };
    let dir = std::env::temp_dir().join(format!("andes-fuzz-snapshot-{}", std::process::id()));
    let Ok(store) = andes_snapshot::BlobStore::open(&dir, false) else { return };
    if flag & 4 != 0 && rest.len() >= 4 {
        let n = (u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize).min(rest.len() - 4);
        let _ = store.put(&rest[4 + n..]);
    }
    let packs = snap.load_packs(&store).unwrap_or_default();
    for (i, m) in snap.header.memories.iter().enumerate() {
        if m.bytes > 4 << 20 {
            continue;
        }
        let mut dest = vec![0u8; m.bytes as usize];
        let _ =
            snap.restore_memory(i, &mut dest, andes_snapshot::Image::none(), flag & 2 != 0, &packs);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
