//! `dirfdbomb`: opens the sandbox directory (and a subdirectory) again and
//! again, keeping every handle, until opening fails.
//!
//! Attacks: file descriptors, through directory handles.
//! The host must: count directory handles toward the open-file limit. The job
//! prints `opened N directory handles, then: ERROR`.

use std::fs::{self, File};

fn main() {
    let _ = fs::create_dir("sub");
    let mut handles = Vec::new();
    let error = loop {
        let name = if handles.len() % 2 == 0 { "." } else { "sub" };
        match File::open(name) {
            Ok(f) => handles.push(f),
            Err(e) => break e,
        }
        if handles.len() >= 100_000 {
            println!("opened 100000 directory handles and nothing stopped it");
            return;
        }
    };
    println!("opened {} directory handles, then: {error}", handles.len());
}
