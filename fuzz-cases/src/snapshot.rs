//! Decodes arbitrary bytes as a checkpoint snapshot the way an execute host
//! restores one. Nothing may panic or allocate without bound.
//!
//! Input: a flag byte, then the rest. Flag bit 0 clear: the rest is a whole
//! snapshot file, opened trusting every key (so the hash and signature checks
//! are what stop it). Bit 0 set: the rest is `u32 LE header length`, a JSON
//! header and a body, sealed here with a valid hash and signature, so the
//! header parser and the memory decoder see arbitrary signed content; each
//! memory it declares (up to 4 MiB) is then restored, fresh or not (bit 1).

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
        seal(&rest[4..4 + n], &rest[4 + n..])
    };
    let _ = andes_snapshot::inspect(&file);
    let Ok(snap) = open(&file, &|_| true, &MODULE) else { return };
    for (i, m) in snap.header.memories.iter().enumerate() {
        if m.bytes > 4 << 20 {
            continue;
        }
        let mut dest = vec![0u8; m.bytes as usize];
        let _ = snap.restore_memory(i, &mut dest, b"", flag & 2 != 0);
    }
}
