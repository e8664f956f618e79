//! `andes keygen`: make the ed25519 key pair a user or a daemon signs its requests
//! with, kept like an ssh key under the andes configuration directory.

use std::path::PathBuf;
use std::process::ExitCode;

use andes_protocol::key::{self, KeyError, Keypair};
use anyhow::{Context, Result, anyhow};
use clap::Args;

/// Arguments of `andes keygen`.
#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// The key's name: a user's or a daemon's (default: your user name).
    name: Option<String>,
    /// Where to write the key files (default: KEYS_DIR, which is `keys/` in the
    /// andes configuration directory, `$ANDES_CONFIG_DIR` or e.g. `~/.config/andes`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Replace an existing key pair of that name.
    #[arg(long)]
    force: bool,
}

/// Runs `andes keygen`.
pub fn run(args: KeygenArgs) -> Result<ExitCode> {
    let name = match args.name {
        Some(n) => n,
        None => crate::settings::user_name()
            .ok_or_else(|| anyhow!("cannot tell your user name: give NAME"))?,
    };
    let dir = match args.dir {
        Some(d) => d,
        None => match crate::settings::Settings::load()
            .ok()
            .and_then(|s| s.get("KEYS_DIR").ok().flatten())
        {
            Some(d) => PathBuf::from(d),
            None => key::keys_dir()?,
        },
    };
    let keypair = Keypair::generate(&name)?;
    let saved = keypair.save(&dir, args.force).map_err(|e| match e {
        KeyError::Exists { path } => anyhow!(
            "{} already exists; use --force to replace the key pair `{name}` (the pool's \
             trust file must then list the new public key)",
            path.display()
        ),
        e => anyhow::Error::new(e),
    });
    let saved = saved.context("cannot save the key pair")?;
    // Read back as the daemons and commands will read it: a key the
    // filesystem leaves open to others (a directory whose access control
    // list overrides ours, say) is reported now, not at its first use.
    Keypair::load(&saved.secret).with_context(|| {
        format!("the key pair was written to {}, but cannot be used", saved.secret.display())
    })?;
    let line = keypair.public_line();
    outln!("{line}");
    outln!("secret key: {}", saved.secret.display());
    outln!("public key: {}", saved.public.display());
    outln!("list it in the pool's trust file after a role and identity, e.g.:");
    outln!("  user {name} {line}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_prefers_user() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let name = crate::settings::user_name_from;
        assert_eq!(name(env(&[("USER", "alice"), ("LOGNAME", "bob")])), Some("alice".into()));
        assert_eq!(name(env(&[("USER", ""), ("USERNAME", "carol")])), Some("carol".into()));
        // With none set, the account's name, as every command finds it.
        assert_eq!(name(env(&[])), whoami::fallible::username().ok());
    }

    #[test]
    fn writes_refuses_then_forces() {
        let dir = tempfile::tempdir().unwrap();
        let args = |force| KeygenArgs {
            name: Some("schedd".into()),
            dir: Some(dir.path().to_path_buf()),
            force,
        };
        run(args(false)).unwrap();
        let first = Keypair::load(&dir.path().join("schedd")).unwrap();
        let pub_line = std::fs::read_to_string(dir.path().join("schedd.pub")).unwrap();
        assert_eq!(pub_line, format!("{}\n", first.public_line()));
        let e = format!("{:#}", run(args(false)).unwrap_err());
        assert!(e.contains("already exists; use --force"), "{e}");
        assert_eq!(Keypair::load(&dir.path().join("schedd")).unwrap().public(), first.public());
        run(args(true)).unwrap();
        assert_ne!(Keypair::load(&dir.path().join("schedd")).unwrap().public(), first.public());
        let e = run(KeygenArgs { name: Some("../x".into()), ..args(false) }).unwrap_err();
        assert!(format!("{e:#}").contains("not a valid key name"), "{e:#}");
    }
}
