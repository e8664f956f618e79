//! `escape`: tries to reach files outside its sandbox directory.
//!
//! Attacks: the filesystem sandbox. It tries, in order:
//! 1. opening `../../etc/passwd` (climbing out with `..`);
//! 2. opening `/etc/passwd` (an absolute path);
//! 3. opening `outside_link`, if the test put a symlink of that name in the
//!    sandbox pointing outside it;
//! 4. creating `../andes_escape_probe` (writing outside with `..`).
//!
//! For each it prints `PATH: ok` or `PATH: error KIND (errno N)`, where N is
//! the WASI errno (76 is ENOTCAPABLE, 44 ENOENT, 63 EPERM, 2 EACCES). It exits
//! with code 0 if every attempt failed and 1 if any succeeded.
//! The host must: make every attempt fail (cap-std style capability checks: no
//! `..` above the sandbox, no absolute paths, no symlinks leading out).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::process::ExitCode;

fn report(path: &str, result: io::Result<File>) -> bool {
    match result {
        Ok(_) => {
            println!("{path}: ok (escaped the sandbox!)");
            true
        }
        Err(e) => {
            let errno = e.raw_os_error().map_or("none".to_owned(), |n| n.to_string());
            println!("{path}: error {:?} (errno {errno})", e.kind());
            false
        }
    }
}

fn main() -> ExitCode {
    let mut escaped = false;
    for path in ["../../etc/passwd", "/etc/passwd"] {
        escaped |= report(path, File::open(path));
    }
    // Only if the test planted it: a symlink in the sandbox pointing outside.
    if fs::symlink_metadata("outside_link").is_ok() {
        escaped |= report("outside_link", File::open("outside_link"));
    } else {
        println!("outside_link: absent, not tried");
    }
    let probe = "../andes_escape_probe";
    escaped |=
        report(probe, OpenOptions::new().write(true).create(true).truncate(true).open(probe));
    if escaped { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
