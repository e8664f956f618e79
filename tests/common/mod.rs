//! What the whole-process tests share: the `andes` command, and a configuration
//! directory with keys and a trust file.

use std::path::Path;
use std::process::Command;

/// The `andes` binary under test.
pub fn andes() -> Command {
    Command::new(env!("CARGO_BIN_EXE_andes"))
}

/// Makes a key pair for each `(name, role)` in `dir` with `andes keygen`, and a
/// trust file listing those with a role (an empty role leaves the key unknown to
/// the pool).
pub fn keys_and_trust(dir: &Path, who: &[(&str, &str)]) {
    let mut trust = String::new();
    for (name, role) in who {
        let out = andes().args(["keygen", name]).env("ANDES_CONFIG_DIR", dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        if !role.is_empty() {
            let pubkey =
                std::fs::read_to_string(dir.join("keys").join(format!("{name}.pub"))).unwrap();
            trust.push_str(&format!("{role} {name} {}\n", pubkey.trim()));
        }
    }
    std::fs::write(dir.join("trust"), trust).unwrap();
}
