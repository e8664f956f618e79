//! Key pairs: generation, the key files under the andes configuration directory, and
//! loading them back.
//!
//! A key pair named `NAME` lives in two files, like an ssh key:
//!
//! * `NAME`: the secret key, one line `ed25519-secret <base64 seed> NAME`, file mode
//!   0600 on Unix (created with that mode, so it is never readable by others, even
//!   briefly). A secret key file that group or others can read is refused on load.
//! * `NAME.pub`: the public key, one line `ed25519 <base64 public key> NAME`, the form
//!   the pool's trust file takes after its role and identity.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use rand_core::{OsRng, RngCore};

/// The key type word of public key lines (`ed25519 <base64> NAME`).
pub const KEY_TYPE: &str = "ed25519";
/// The key type word of secret key files.
pub const SECRET_KEY_TYPE: &str = "ed25519-secret";
/// The environment variable naming the andes configuration directory.
pub const CONFIG_DIR_ENV: &str = "ANDES_CONFIG_DIR";
/// Longest identity or key name accepted.
pub const MAX_NAME_LEN: usize = 128;
/// Largest key file read (a key file is one short line).
const MAX_KEY_FILE: u64 = 4096;

/// Why a public key's text or bytes are not an ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyParseError {
    /// Not valid base64.
    #[error("the key is not valid base64")]
    Base64,
    /// Decoded to the wrong number of bytes.
    #[error("the key is {0} bytes long; an ed25519 public key is 32")]
    Length(usize),
    /// 32 bytes that are not a point on the curve.
    #[error("the key is not a valid ed25519 public key")]
    NotAPoint,
}

/// An ed25519 public key: what the trust file lists and what `Andes-Key` carries.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub(crate) VerifyingKey);

/// How many keys [`PublicKey::from_bytes`] keeps, checked, for the next time
/// (a pool's daemons and users; anyone's keys past that start it again).
pub const KNOWN_KEYS: usize = 4096;

/// Keys already checked to be points, by their bytes.
static KNOWN: std::sync::LazyLock<
    std::sync::RwLock<std::collections::HashMap<[u8; 32], VerifyingKey>>,
> = std::sync::LazyLock::new(Default::default);

impl PublicKey {
    /// The key from its 32 bytes. Keys met before are taken from
    /// [`KNOWN_KEYS`]: a request's signer and destination are parsed from
    /// its headers at every request, and checking that 32 bytes are a point
    /// of the curve (decompressing it) is most of that parse.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyParseError> {
        let arr: [u8; 32] = bytes.try_into().map_err(|_| KeyParseError::Length(bytes.len()))?;
        let known = || KNOWN.read().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = known().get(&arr) {
            return Ok(PublicKey(*k));
        }
        let key = VerifyingKey::from_bytes(&arr).map_err(|_| KeyParseError::NotAPoint)?;
        let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
        // Bounded whoever sends keys: past the bound it starts again.
        if known.len() >= KNOWN_KEYS {
            known.clear();
        }
        known.insert(arr, key);
        Ok(PublicKey(key))
    }

    /// The key from its standard base64 text (44 characters).
    pub fn from_base64(text: &str) -> Result<Self, KeyParseError> {
        // 32 bytes are 44 base64 characters; refuse long input before decoding it.
        if text.len() > 64 {
            return Err(KeyParseError::Length(text.len() / 4 * 3));
        }
        let bytes = B64.decode(text).map_err(|_| KeyParseError::Base64)?;
        Self::from_bytes(&bytes)
    }

    /// The key's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    /// The key as standard base64.
    pub fn to_base64(&self) -> String {
        B64.encode(self.as_bytes())
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.to_base64())
    }
}

impl std::str::FromStr for PublicKey {
    type Err = KeyParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_base64(s)
    }
}

/// What went wrong making, saving or loading a key pair.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The key file exists and overwriting was not asked for.
    #[error("{path} already exists; refusing to overwrite it")]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// The secret key file is readable or writable by group or others.
    #[error(
        "permissions {mode:04o} for {path} are too open: a secret key must not be \
         accessible by group or others; run `chmod 600 {path}`",
        path = path.display()
    )]
    TooOpen {
        /// The secret key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The secret key file's access control list lets other accounts read
    /// it (Windows).
    #[error(
        "{path} is open to others: {who}; a secret key must be readable by its owner \
         alone: write it again with `andes keygen --force`, or remove the other accounts \
         from its security settings",
        path = path.display()
    )]
    OpenToOthers {
        /// The secret key file.
        path: PathBuf,
        /// Who else can read it.
        who: String,
    },
    /// The key file's content is not a key.
    #[error("{path}:{line}: {reason}", path = path.display())]
    Malformed {
        /// The key file.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The name is not a valid key or identity name.
    #[error("`{name}` is not a valid key name: {reason}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// No configuration directory could be found.
    #[error("cannot find a configuration directory: set {CONFIG_DIR_ENV}")]
    NoConfigDir,
}

impl KeyError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        KeyError::Io { path: path.to_path_buf(), source }
    }
}

/// Checks an identity or key name: 1 to 128 characters among `A-Z a-z 0-9 . _ @ -`,
/// not starting with `.` or `-` (so it is a safe file name and a single word in the
/// trust file).
pub fn validate_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("it is longer than 128 characters");
    }
    if name.starts_with('.') || name.starts_with('-') {
        return Err("it starts with `.` or `-`");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-')) {
        return Err("only letters, digits, `.`, `_`, `@` and `-` are allowed");
    }
    Ok(())
}

/// The andes configuration directory: `$ANDES_CONFIG_DIR`, else the platform's
/// configuration directory + `andes` (e.g. `~/.config/andes` on Linux).
pub fn config_dir() -> Result<PathBuf, KeyError> {
    match std::env::var_os(CONFIG_DIR_ENV) {
        Some(d) if !d.is_empty() => Ok(PathBuf::from(d)),
        _ => dirs::config_dir().map(|d| d.join("andes")).ok_or(KeyError::NoConfigDir),
    }
}

/// The directory key pairs are kept in: [`config_dir`]`/keys`.
pub fn keys_dir() -> Result<PathBuf, KeyError> {
    Ok(config_dir()?.join("keys"))
}

/// Where [`Keypair::save`] put a key pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedKey {
    /// The secret key file (mode 0600).
    pub secret: PathBuf,
    /// The public key file.
    pub public: PathBuf,
}

/// A named ed25519 key pair: a user's or a daemon's identity.
#[derive(Clone)]
pub struct Keypair {
    name: String,
    signing: SigningKey,
}

impl fmt::Debug for Keypair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keypair")
            .field("name", &self.name)
            .field("public", &self.public())
            .finish_non_exhaustive()
    }
}

impl Keypair {
    /// A new random key pair (from the operating system's generator).
    pub fn generate(name: &str) -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        Self::from_seed(name, seed)
    }

    /// The key pair of a 32-byte secret seed.
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<Self, KeyError> {
        validate_name(name)
            .map_err(|reason| KeyError::BadName { name: name.to_string(), reason })?;
        Ok(Keypair { name: name.to_string(), signing: SigningKey::from_bytes(&seed) })
    }

    /// The key pair's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.signing.verifying_key())
    }

    /// The public key line: `ed25519 <base64> NAME`.
    pub fn public_line(&self) -> String {
        format!("{KEY_TYPE} {} {}", self.public(), self.name)
    }

    /// The secret seed (for the TLS identity built from this key).
    pub(crate) fn seed(&self) -> [u8; 32] {
        self.signing.to_bytes()
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.signing.sign(message).to_bytes()
    }

    /// Writes `dir/NAME` (secret, mode 0600) and `dir/NAME.pub`, creating `dir`
    /// (mode 0700) if needed. Without `force`, refuses if either file exists; with it,
    /// replaces them atomically.
    pub fn save(&self, dir: &Path, force: bool) -> Result<SavedKey, KeyError> {
        create_private_dir(dir)?;
        let secret = dir.join(&self.name);
        let public = dir.join(format!("{}.pub", self.name));
        if !force {
            for p in [&secret, &public] {
                if fs::symlink_metadata(p).is_ok() {
                    return Err(KeyError::Exists { path: p.clone() });
                }
            }
        }
        write_file(&secret, self.to_secret_text().as_bytes(), 0o600, force)?;
        write_file(&public, format!("{}\n", self.public_line()).as_bytes(), 0o644, force)?;
        Ok(SavedKey { secret, public })
    }

    /// Loads a secret key file. A file others can read is refused: on Unix by
    /// its mode ([`KeyError::TooOpen`]), on Windows by its access control
    /// list ([`KeyError::OpenToOthers`]).
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        let file = File::open(path).map_err(|e| KeyError::io(path, e))?;
        check_private(&file, path)?;
        let mut text = String::new();
        file.take(MAX_KEY_FILE + 1).read_to_string(&mut text).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                malformed(path, "the file is not UTF-8 text")
            } else {
                KeyError::io(path, e)
            }
        })?;
        if text.len() as u64 > MAX_KEY_FILE {
            return Err(malformed(path, "the file is too large to be a key"));
        }
        Self::parse_secret(&text).map_err(|reason| malformed(path, reason))
    }

    /// The secret key file's content: `ed25519-secret <base64 seed> NAME` and a
    /// newline. Whoever reads it holds the key: write it only where
    /// [`Keypair::save`] would (mode 0600).
    pub fn to_secret_text(&self) -> String {
        format!("{SECRET_KEY_TYPE} {} {}\n", B64.encode(self.signing.to_bytes()), self.name)
    }

    /// The key pair in a secret key file's content ([`Keypair::to_secret_text`]);
    /// the error says what is wrong. [`Keypair::load`] reads a file with it.
    pub fn from_secret_text(text: &str) -> Result<Self, &'static str> {
        Self::parse_secret(text)
    }

    /// Loads the key pair `NAME` from the keys directory ([`keys_dir`]).
    pub fn load_named(name: &str) -> Result<Self, KeyError> {
        validate_name(name)
            .map_err(|reason| KeyError::BadName { name: name.to_string(), reason })?;
        Self::load(&keys_dir()?.join(name))
    }

    fn parse_secret(text: &str) -> Result<Self, &'static str> {
        let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some(SECRET_KEY_TYPE) => {}
            Some(KEY_TYPE) => return Err("this is a public key; give the secret key file"),
            _ => return Err("expected `ed25519-secret <base64 seed> NAME`"),
        }
        let seed = fields.next().ok_or("the secret key is missing")?;
        if seed.len() > 64 {
            return Err("the secret key is not 32 bytes of base64");
        }
        let seed: [u8; 32] = B64
            .decode(seed)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or("the secret key is not 32 bytes of base64")?;
        let name = fields.next().ok_or("the key name is missing")?;
        if fields.next().is_some() {
            return Err("unexpected text after the key name");
        }
        validate_name(name)?;
        Ok(Keypair { name: name.to_string(), signing: SigningKey::from_bytes(&seed) })
    }
}

fn malformed(path: &Path, reason: &str) -> KeyError {
    KeyError::Malformed { path: path.to_path_buf(), line: 1, reason: reason.to_string() }
}

fn create_private_dir(dir: &Path) -> Result<(), KeyError> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir).map_err(|e| KeyError::io(dir, e))?;
    // Windows: the directory's own access control list, which the files
    // written in it inherit.
    andes_beneath::private::restrict_to_owner(dir).map_err(|e| KeyError::io(dir, e))
}

fn open_new(path: &Path, mode: u32) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, mode);
    let file = o.open(path)?;
    if mode & 0o077 == 0 {
        andes_beneath::private::restrict_to_owner(path)?;
    }
    Ok(file)
}

/// Writes a file created with `mode`: directly (refusing an existing file) unless
/// `replace`, then through a temporary file renamed over the old one.
fn write_file(path: &Path, data: &[u8], mode: u32, replace: bool) -> Result<(), KeyError> {
    let write = |p: &Path| -> std::io::Result<()> {
        let mut f = open_new(p, mode)?;
        f.write_all(data)?;
        f.sync_all()
    };
    if !replace {
        return write(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                KeyError::Exists { path: path.to_path_buf() }
            } else {
                KeyError::io(path, e)
            }
        });
    }
    andes_beneath::replace_file(path, data, mode).map_err(|e| KeyError::io(path, e))
}

fn check_private(file: &File, path: &Path) -> Result<(), KeyError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode =
            file.metadata().map_err(|e| KeyError::io(path, e))?.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyError::TooOpen { path: path.to_path_buf(), mode });
        }
        Ok(())
    }
    #[cfg(not(unix))]
    match andes_beneath::private::open_to_others(file).map_err(|e| KeyError::io(path, e))? {
        Some(who) => Err(KeyError::OpenToOthers { path: path.to_path_buf(), who }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key parsed again is the same key (it verifies what it signed); bytes
    /// that are not a point are refused every time; and however many keys
    /// come, the ones kept stay within the bound.
    #[test]
    fn keys_met_before_are_the_same_keys_and_those_kept_are_bounded() {
        let kp = Keypair::generate("alice").unwrap();
        let bytes = *kp.public().as_bytes();
        let (a, b) =
            (PublicKey::from_bytes(&bytes).unwrap(), PublicKey::from_bytes(&bytes).unwrap());
        assert_eq!(a, b);
        let sig = ed25519_dalek::Signature::from_bytes(&kp.sign(b"x"));
        assert!(b.0.verify_strict(b"x", &sig).is_ok());
        let not_a_point = (0..=255u8)
            .map(|i| [i; 32])
            .find(|b| VerifyingKey::from_bytes(b).is_err())
            .expect("some repeated byte is not a point");
        for _ in 0..2 {
            assert!(matches!(PublicKey::from_bytes(&not_a_point), Err(KeyParseError::NotAPoint)));
        }
        let mut seen = 0;
        let mut n = 0u64;
        while seen <= KNOWN_KEYS {
            let mut b = [0u8; 32];
            b[..8].copy_from_slice(&n.to_le_bytes());
            n += 1;
            if PublicKey::from_bytes(&b).is_ok() {
                seen += 1;
            }
            assert!(KNOWN.read().unwrap().len() <= KNOWN_KEYS);
        }
        assert_eq!(PublicKey::from_bytes(&bytes).unwrap(), a, "parsed again after the bound");
    }

    #[test]
    fn save_then_load_gives_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let kp = Keypair::generate("alice").unwrap();
        let saved = kp.save(&keys, false).unwrap();
        assert_eq!(saved.secret, keys.join("alice"));
        assert_eq!(saved.public, keys.join("alice.pub"));
        let back = Keypair::load(&saved.secret).unwrap();
        assert_eq!(back.name(), "alice");
        assert_eq!(back.public(), kp.public());
        assert_eq!(back.sign(b"x"), kp.sign(b"x"));
        let pub_text = fs::read_to_string(&saved.public).unwrap();
        assert_eq!(pub_text, format!("ed25519 {} alice\n", kp.public()));
        assert_eq!(kp.public().to_base64().len(), 44);
    }

    #[test]
    fn refuses_to_overwrite_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let a = Keypair::generate("bob").unwrap();
        a.save(dir.path(), false).unwrap();
        let b = Keypair::generate("bob").unwrap();
        match b.save(dir.path(), false) {
            Err(KeyError::Exists { path }) => assert_eq!(path, dir.path().join("bob")),
            other => panic!("expected Exists, got {other:?}"),
        }
        assert_eq!(Keypair::load(&dir.path().join("bob")).unwrap().public(), a.public());
        b.save(dir.path(), true).unwrap();
        assert_eq!(Keypair::load(&dir.path().join("bob")).unwrap().public(), b.public());
        // No temporary files are left behind.
        let mut names: Vec<_> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["bob", "bob.pub"]);
    }

    #[cfg(unix)]
    #[test]
    fn secret_key_is_0600_and_open_keys_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("k");
        let saved = Keypair::generate("schedd").unwrap().save(&keys, false).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&saved.secret), 0o600);
        assert_eq!(mode(&keys), 0o700);
        // Overwriting with --force keeps the secret key private.
        let saved = Keypair::generate("schedd").unwrap().save(&keys, true).unwrap();
        assert_eq!(mode(&saved.secret), 0o600);
        for bad in [0o640, 0o604, 0o660, 0o644] {
            fs::set_permissions(&saved.secret, fs::Permissions::from_mode(bad)).unwrap();
            match Keypair::load(&saved.secret) {
                Err(e @ KeyError::TooOpen { .. }) => {
                    let msg = e.to_string();
                    assert!(msg.contains(&format!("{bad:04o}")), "{msg}");
                    assert!(msg.contains("chmod 600"), "{msg}");
                }
                other => panic!("mode {bad:o}: expected TooOpen, got {other:?}"),
            }
        }
        fs::set_permissions(&saved.secret, fs::Permissions::from_mode(0o400)).unwrap();
        Keypair::load(&saved.secret).unwrap();
    }

    #[test]
    fn malformed_key_files_say_what_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let cases: &[(&str, &str)] = &[
            ("", "expected `ed25519-secret"),
            ("ed25519 AAAA x\n", "this is a public key"),
            ("ed25519-secret\n", "secret key is missing"),
            ("ed25519-secret AAAA x\n", "not 32 bytes"),
            ("ed25519-secret !!!! x\n", "not 32 bytes"),
            (
                "ed25519-secret AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
                "key name is missing",
            ),
            ("ed25519-secret AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= a b\n", "unexpected"),
            ("ed25519-secret AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ../x\n", "starts with"),
        ];
        for (text, want) in cases {
            write_file(&p, text.as_bytes(), 0o600, true).unwrap();
            let e = Keypair::load(&p).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, KeyError::Malformed { line: 1, .. }), "{text:?}: {e:?}");
            assert!(msg.starts_with(&format!("{}:1: ", p.display())), "{msg}");
            assert!(msg.contains(want), "{text:?}: {msg}");
        }
        write_file(&p, &vec![b'a'; 5000], 0o600, true).unwrap();
        assert!(Keypair::load(&p).unwrap_err().to_string().contains("too large"));
        assert!(matches!(Keypair::load(&dir.path().join("missing")), Err(KeyError::Io { .. })));
    }

    #[test]
    fn secret_text_reads_back_the_same_key() {
        let kp = Keypair::from_seed("schedd@submit-1", [9; 32]).unwrap();
        let text = kp.to_secret_text();
        assert!(text.starts_with("ed25519-secret ") && text.ends_with(" schedd@submit-1\n"));
        let back = Keypair::from_secret_text(&text).unwrap();
        assert_eq!((back.name(), back.public()), (kp.name(), kp.public()));
        assert_eq!(back.sign(b"m"), kp.sign(b"m"));
        let e = Keypair::from_secret_text(&kp.public_line()).unwrap_err();
        assert_eq!(e, "this is a public key; give the secret key file");
        // What `save` writes is this text.
        let dir = tempfile::tempdir().unwrap();
        let saved = kp.save(dir.path(), false).unwrap();
        assert_eq!(fs::read_to_string(saved.secret).unwrap(), text);
    }

    #[test]
    fn names_are_checked() {
        for ok in ["alice", "schedd@pool.example", "host-1.a_b"] {
            assert_eq!(validate_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", ".hidden", "-x", "a/b", "a b", "a#b", "é", &"x".repeat(129)] {
            assert!(validate_name(bad).is_err(), "{bad}");
            assert!(matches!(Keypair::generate(bad), Err(KeyError::BadName { .. })));
        }
    }

    #[test]
    fn public_key_text() {
        let kp = Keypair::from_seed("a", [7; 32]).unwrap();
        let text = kp.public().to_base64();
        assert_eq!(PublicKey::from_base64(&text).unwrap(), kp.public());
        assert_eq!(PublicKey::from_base64("AAAA"), Err(KeyParseError::Length(3)));
        assert_eq!(PublicKey::from_base64("@@@@"), Err(KeyParseError::Base64));
        assert!(PublicKey::from_base64(&"A".repeat(10_000)).is_err());
    }
}
