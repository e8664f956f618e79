//! `linkout`: replaces its outputs with symbolic links out of its sandbox, as
//! a job that wants the host's files back as its output would: its standard
//! output becomes `../../keys/host` (where the host's secret key lives beside
//! the sandboxes), and the files its submit file names as outputs become links
//! to the pool's configuration and to /etc/passwd; `linkdir` becomes a link to
//! the host's key directory. Each argument `NAME=TARGET` makes one more link.
//!
//! Attacks: output transfer on the execute host.
//! The host must: never read through a link: the job is held (output transfer
//! refused, naming the link) and no byte of the targets reaches the submitter.

use std::fs;
use std::io::Write;

fn main() {
    println!("linkout: replacing my outputs with links");
    let _ = std::io::stdout().flush();
    let mut links: Vec<(String, String)> = vec![
        ("_andes_stdout".into(), "../../keys/host".into()),
        ("r2".into(), "../../andes.config".into()),
        ("r5".into(), "../../../../../etc/passwd".into()),
        ("linkdir".into(), "../../keys".into()),
    ];
    for a in std::env::args().skip(1) {
        if let Some((n, t)) = a.split_once('=') {
            links.push((n.into(), t.into()));
        }
    }
    for (name, target) in links {
        let _ = fs::remove_file(&name);
        if let Err(e) = hostile::symlink(&target, &name) {
            eprintln!("linkout: {name} -> {target}: errno {e}");
        }
    }
}
