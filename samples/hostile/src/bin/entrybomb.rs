//! `entrybomb`: fills the sandbox with entries that hold no bytes. Mode
//! `files` makes empty files, `dirs` directories, `links` symbolic links,
//! `deep` a chain of nested directories; it goes on until one fails.
//!
//! Attacks: the sandbox's inodes (a quota of bytes alone does not bound them).
//! The host must: bound the files, directories and links a sandbox holds, fail
//! the next one and hold the job; and clear what was made, however deep.
//! The job prints `made N, then: ERROR`.

use std::fs;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "files".into());
    let mut path = String::from(".");
    for i in 0..1_000_000u32 {
        let r = match mode.as_str() {
            "dirs" => fs::create_dir(format!("d{i}")),
            "links" => hostile::symlink("target", &format!("l{i}"))
                .map_err(|e| std::io::Error::other(format!("errno {e}"))),
            "deep" => {
                path.push_str("/d");
                fs::create_dir(&path)
            }
            _ => fs::write(format!("f{i}"), b""),
        };
        if let Err(e) = r {
            println!("made {i}, then: {e}");
            return;
        }
    }
    println!("made 1000000 and nothing stopped it");
}
