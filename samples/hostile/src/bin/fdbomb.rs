//! `fdbomb`: opens the same sandbox file again and again, keeping every handle,
//! until opening fails.
//!
//! Attacks: file descriptors, the job's and the host's.
//! The host must: bound the number of descriptors a job may hold and fail the
//! open (EMFILE/ENFILE or similar) without harm to itself or other jobs. The
//! job then prints `opened N handles, then: ERROR` and exits with code 0.

use std::fs::File;

fn main() {
    if let Err(e) = std::fs::write("fd.txt", "fdbomb\n") {
        eprintln!("fdbomb: cannot create fd.txt: {e}");
        std::process::exit(1);
    }
    let mut handles = Vec::new();
    let error = loop {
        match File::open("fd.txt") {
            Ok(f) => handles.push(f),
            Err(e) => break e,
        }
    };
    println!("opened {} handles, then: {error} (errno {:?})", handles.len(), error.raw_os_error());
}
