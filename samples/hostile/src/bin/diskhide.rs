//! `diskhide`: hides bytes from the disk quota. Mode `unlink` writes a 64 KiB
//! file, keeps it open and unlinks it; mode `rename` writes a 64 KiB file,
//! keeps it open and renames a fresh empty file over it. Each round leaves
//! 64 KiB on the disk that no name shows; it goes round until a write fails.
//!
//! Attacks: the sandbox's disk quota (RequestDisk).
//! The host must: count a file's bytes until its last handle closes, so the
//! write that would pass RequestDisk fails and the job is held for its disk.
//! The job prints `hid N KiB, then: ERROR` when a write fails.

use std::fs::{self, File, OpenOptions};
use std::io::Write;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "unlink".into());
    let chunk = vec![0x5a_u8; 64 * 1024];
    let mut held: Vec<File> = Vec::new();
    for i in 0.. {
        let name = format!("hide{i}");
        let mut f = match OpenOptions::new().create(true).write(true).truncate(true).open(&name) {
            Ok(f) => f,
            Err(e) => {
                println!("hid {} KiB, then: {e}", i * 64);
                return;
            }
        };
        if let Err(e) = f.write_all(&chunk).and_then(|_| f.flush()) {
            println!("hid {} KiB, then: {e}", i * 64);
            return;
        }
        let gone = if mode == "rename" {
            fs::write("empty", b"").and_then(|_| fs::rename("empty", &name))
        } else {
            fs::remove_file(&name)
        };
        if let Err(e) = gone {
            println!("hid {} KiB, then: {e}", i * 64);
            return;
        }
        held.push(f);
        if held.len() >= 200 {
            // Fewer handles than the open-file limit: it is the disk that must stop it.
            println!("hid {} KiB and nothing stopped it", (i + 1) * 64);
            return;
        }
    }
}
