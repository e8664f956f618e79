//! The pool's trust file: which public keys belong to which identities, in which role.
//!
//! It plays the part of HTCondor's map file and its `ALLOW_*` lists at once. One entry
//! a line:
//!
//! ```text
//! # ROLE    IDENTITY          ed25519 PUBLIC-KEY                                    [NAME]
//! user      alice             ed25519 3q2+7w0m3q2+7w0m3q2+7w0m3q2+7w0m3q2+7w0m3q0= alice
//! schedd    schedd@submit-1   ed25519 ...
//! host      exec-17           ed25519 ...
//! admin     root              ed25519 ...
//! ```
//!
//! `ROLE` is `user`, `schedd`, `host` or `admin` (any case). For `user` the identity is
//! the HTCondor `Owner` name the key acts as. The last field is optional and ignored, so
//! a line is the role and identity followed by the content of a `.pub` file. `#` starts
//! a comment; blank lines are ignored. A key appears on one line only; an identity may
//! have several keys.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use crate::key::{KEY_TYPE, KeyParseError, PublicKey, validate_name};

/// Largest trust file read.
pub const MAX_TRUST_FILE: u64 = 64 << 20;

/// What an identity may do in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A person submitting and managing their own jobs (identity = `Owner`).
    User,
    /// A schedd: claims slots, runs shadows, advertises its queue.
    Schedd,
    /// An execute host: its startd and starters.
    Host,
    /// A pool administrator: passes every check a `user` passes, on anyone's jobs.
    Admin,
    /// The central manager (collector and negotiator): hands out matches.
    Negotiator,
}

impl Role {
    /// Every role, in trust-file spelling order.
    pub const ALL: [Role; 5] =
        [Role::User, Role::Schedd, Role::Host, Role::Admin, Role::Negotiator];

    /// The trust file's word for the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Schedd => "schedd",
            Role::Host => "host",
            Role::Admin => "admin",
            Role::Negotiator => "negotiator",
        }
    }

    /// Whether a caller of this role passes a check allowing `allowed`: it is listed,
    /// or it is `admin` and `user` is listed.
    pub fn is_allowed(self, allowed: &[Role]) -> bool {
        allowed.contains(&self) || (self == Role::Admin && allowed.contains(&Role::User))
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Role::ALL.into_iter().find(|r| r.as_str().eq_ignore_ascii_case(s)).ok_or(())
    }
}

/// Who a key belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The identity's name (for `user`, the `Owner`).
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// What is wrong with one trust-file line, or with reading the file.
#[derive(Debug, thiserror::Error)]
pub enum TrustErrorKind {
    /// The file could not be read.
    #[error("{0}")]
    Io(std::io::Error),
    /// The file is larger than [`MAX_TRUST_FILE`].
    #[error("the trust file is larger than {MAX_TRUST_FILE} bytes")]
    TooLarge,
    /// The file is not UTF-8 text.
    #[error("the trust file is not UTF-8 text")]
    NotText,
    /// The first word is not a role.
    #[error("unknown role `{0}` (expected user, schedd, host, admin or negotiator)")]
    UnknownRole(String),
    /// A field is missing.
    #[error("missing the {0}; expected `ROLE IDENTITY ed25519 PUBLIC-KEY`")]
    MissingField(&'static str),
    /// More fields than the format has.
    #[error("unexpected `{0}` after the key")]
    ExtraField(String),
    /// The identity is not a valid name.
    #[error("bad identity `{name}`: {reason}")]
    BadIdentity {
        /// The identity given.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The key type is not `ed25519`.
    #[error("unsupported key type `{0}` (expected ed25519)")]
    KeyType(String),
    /// The key is not an ed25519 public key.
    #[error("{0}")]
    BadKey(KeyParseError),
    /// The key is already listed.
    #[error("this key is already listed on line {first_line}")]
    DuplicateKey {
        /// Where the key first appears.
        first_line: usize,
    },
}

/// A trust-file error with its place: `origin:line: what`, or `origin: what`
/// for the whole file. Its message says it all (it has no separate source, so
/// an error chain does not say it twice).
#[derive(Debug)]
pub struct TrustError {
    /// The file (or the name given to [`TrustFile::parse`]).
    pub origin: String,
    /// The 1-based line; 0 for errors about the whole file.
    pub line: usize,
    /// What is wrong.
    pub kind: TrustErrorKind,
}

impl std::fmt::Display for TrustError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.origin, self.kind),
            n => write!(f, "{}:{n}: {}", self.origin, self.kind),
        }
    }
}

impl std::error::Error for TrustError {}

#[derive(Debug, Clone)]
struct Entry {
    identity: Identity,
    line: usize,
}

/// The parsed trust file: lookup of identities by public key.
#[derive(Debug, Clone, Default)]
pub struct TrustFile {
    by_key: HashMap<PublicKey, Entry>,
}

/// Two trust files are equal when they trust the same keys as the same
/// identities (wherever the keys were listed).
impl PartialEq for TrustFile {
    fn eq(&self, other: &Self) -> bool {
        self.by_key.len() == other.by_key.len()
            && self.iter().all(|(k, id)| other.lookup(k) == Some(id))
    }
}

impl Eq for TrustFile {}

impl TrustFile {
    /// An empty trust file (trusts nobody).
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads and parses a trust file.
    pub fn load(path: &Path) -> Result<Self, TrustError> {
        let origin = path.display().to_string();
        let err = |kind| TrustError { origin: origin.clone(), line: 0, kind };
        let file = std::fs::File::open(path).map_err(|e| err(TrustErrorKind::Io(e)))?;
        let mut bytes = Vec::new();
        file.take(MAX_TRUST_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| err(TrustErrorKind::Io(e)))?;
        if bytes.len() as u64 > MAX_TRUST_FILE {
            return Err(err(TrustErrorKind::TooLarge));
        }
        let text = String::from_utf8(bytes).map_err(|_| err(TrustErrorKind::NotText))?;
        Self::parse(&text, &origin)
    }

    /// Parses trust-file text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, TrustError> {
        let mut t = TrustFile::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |kind| TrustError { origin: origin.to_string(), line, kind };
            let content = raw.split('#').next().unwrap_or("");
            let mut fields = content.split_whitespace();
            let Some(role) = fields.next() else { continue };
            let role: Role =
                role.parse().map_err(|()| err(TrustErrorKind::UnknownRole(role.to_string())))?;
            let name =
                fields.next().ok_or_else(|| err(TrustErrorKind::MissingField("identity")))?;
            validate_name(name).map_err(|reason| {
                err(TrustErrorKind::BadIdentity { name: name.to_string(), reason })
            })?;
            let ty = fields.next().ok_or_else(|| err(TrustErrorKind::MissingField("key type")))?;
            if ty != KEY_TYPE {
                return Err(err(TrustErrorKind::KeyType(ty.to_string())));
            }
            let key =
                fields.next().ok_or_else(|| err(TrustErrorKind::MissingField("public key")))?;
            let key = PublicKey::from_base64(key).map_err(|e| err(TrustErrorKind::BadKey(e)))?;
            let _comment = fields.next();
            if let Some(extra) = fields.next() {
                return Err(err(TrustErrorKind::ExtraField(extra.to_string())));
            }
            t.insert_at(key, Identity { name: name.to_string(), role }, line).map_err(err)?;
        }
        Ok(t)
    }

    /// Adds a key (as a trust-file line would, for programs that build the table).
    pub fn insert(&mut self, key: PublicKey, identity: Identity) -> Result<(), TrustErrorKind> {
        validate_name(&identity.name).map_err(|reason| TrustErrorKind::BadIdentity {
            name: identity.name.clone(),
            reason,
        })?;
        self.insert_at(key, identity, 0)
    }

    fn insert_at(
        &mut self,
        key: PublicKey,
        identity: Identity,
        line: usize,
    ) -> Result<(), TrustErrorKind> {
        if let Some(first) = self.by_key.get(&key) {
            return Err(TrustErrorKind::DuplicateKey { first_line: first.line });
        }
        self.by_key.insert(key, Entry { identity, line });
        Ok(())
    }

    /// Who owns `key`, if it is trusted.
    pub fn lookup(&self, key: &PublicKey) -> Option<&Identity> {
        self.by_key.get(key).map(|e| &e.identity)
    }

    /// The number of keys listed.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no key is listed.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Every key and its identity, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&PublicKey, &Identity)> {
        self.by_key.iter().map(|(k, e)| (k, &e.identity))
    }

    /// The trust file's text: a line `ROLE IDENTITY ed25519 PUBLIC-KEY` for each
    /// key, in the order of the lines they were read from (keys added by
    /// [`TrustFile::insert`] last, ordered by key). [`TrustFile::parse`] reads it
    /// back to an equal trust file.
    pub fn to_text(&self) -> String {
        let mut entries: Vec<_> = self.by_key.iter().collect();
        entries.sort_by_key(|(k, e)| (e.line == 0, e.line, *k.as_bytes()));
        let mut out = String::new();
        for (key, e) in entries {
            let id = &e.identity;
            out.push_str(&format!("{} {} {KEY_TYPE} {key}\n", id.role, id.name));
        }
        out
    }

    /// The raw public keys listed with `role` (for example the pool's hosts,
    /// whose signed snapshots may be restored).
    pub fn keys_with_role(&self, role: Role) -> std::collections::HashSet<[u8; 32]> {
        self.iter().filter(|(_, id)| id.role == role).map(|(k, _)| *k.as_bytes()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Keypair;

    fn key(n: u8) -> PublicKey {
        Keypair::from_seed("k", [n; 32]).unwrap().public()
    }

    #[test]
    fn parses_roles_identities_and_comments() {
        let text = format!(
            "# the pool\n\
             user alice ed25519 {} alice   # her laptop\n\
             \n   USER   alice ed25519 {}\n\
             schedd schedd@submit-1 ed25519 {}\n\
             host exec-17 ed25519 {}\n\
             admin root ed25519 {}\n",
            key(1),
            key(2),
            key(3),
            key(4),
            key(5)
        );
        let t = TrustFile::parse(&text, "trust").unwrap();
        assert_eq!(t.len(), 5);
        let id = |n, role: Role| Identity { name: String::from(n), role };
        assert_eq!(t.lookup(&key(1)), Some(&id("alice", Role::User)));
        assert_eq!(t.lookup(&key(2)), Some(&id("alice", Role::User)));
        assert_eq!(t.lookup(&key(3)), Some(&id("schedd@submit-1", Role::Schedd)));
        assert_eq!(t.lookup(&key(4)), Some(&id("exec-17", Role::Host)));
        assert_eq!(t.lookup(&key(5)), Some(&id("root", Role::Admin)));
        assert_eq!(t.lookup(&key(6)), None);
        assert!(TrustFile::parse("# nothing\n\n", "t").unwrap().is_empty());
    }

    #[test]
    fn errors_give_file_and_line() {
        let k = key(1);
        let cases: Vec<(String, usize, &str)> = vec![
            (format!("\n\nroot alice ed25519 {k}"), 3, "unknown role `root`"),
            ("user".into(), 1, "missing the identity"),
            ("user alice".into(), 1, "missing the key type"),
            ("user alice ed25519".into(), 1, "missing the public key"),
            (format!("user alice rsa {k}"), 1, "unsupported key type `rsa`"),
            ("user alice ed25519 AAAA".into(), 1, "3 bytes long"),
            ("user alice ed25519 ****".into(), 1, "not valid base64"),
            (format!("user alice ed25519 {k} alice extra"), 1, "unexpected `extra`"),
            (format!("user a/b ed25519 {k}"), 1, "bad identity `a/b`"),
            (
                format!("user alice ed25519 {k}\n# x\nadmin bob ed25519 {k}"),
                3,
                "already listed on line 1",
            ),
        ];
        for (text, line, want) in cases {
            let e = TrustFile::parse(&text, "/etc/andes/trust").unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("/etc/andes/trust:{line}: ")), "{msg}");
            assert!(msg.contains(want), "{text}: {msg}");
        }
    }

    #[test]
    fn load_reads_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trust");
        std::fs::write(&p, format!("host h ed25519 {}\nbogus\n", key(9))).unwrap();
        let e = TrustFile::load(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}:2: unknown role `bogus` (expected user, schedd, host, admin or negotiator)",
                p.display()
            )
        );
        let e = TrustFile::load(&dir.path().join("none")).unwrap_err();
        assert!(matches!(e.kind, TrustErrorKind::Io(_)));
        // Said once (no source for a chain to repeat), with no line for the
        // whole file.
        assert!(std::error::Error::source(&e).is_none());
        let text = e.to_string();
        assert!(text.starts_with(&format!("{}: ", dir.path().join("none").display())), "{text}");
        std::fs::write(&p, b"\xff\xfe").unwrap();
        assert!(matches!(TrustFile::load(&p).unwrap_err().kind, TrustErrorKind::NotText));
    }

    #[test]
    fn the_text_reads_back_equal() {
        let text = format!(
            "# pool\nUSER alice ed25519 {} laptop\n\n  host exec-1\ted25519 {}  # x\n\
             admin root ed25519 {}\n",
            key(3),
            key(1),
            key(2)
        );
        let t = TrustFile::parse(&text, "t").unwrap();
        let again = t.to_text();
        assert_eq!(
            again,
            format!(
                "user alice ed25519 {}\nhost exec-1 ed25519 {}\nadmin root ed25519 {}\n",
                key(3),
                key(1),
                key(2)
            )
        );
        assert_eq!(TrustFile::parse(&again, "t").unwrap(), t);
        let mut other = TrustFile::new();
        other.insert(key(2), Identity { name: "root".into(), role: Role::Admin }).unwrap();
        assert_ne!(other, t);
        other.insert(key(1), Identity { name: "exec-1".into(), role: Role::Host }).unwrap();
        other.insert(key(3), Identity { name: "alice".into(), role: Role::Schedd }).unwrap();
        assert_ne!(other, t);
        assert_eq!(TrustFile::new().to_text(), "");
    }

    #[test]
    fn admin_passes_user_checks_only() {
        assert!(Role::Admin.is_allowed(&[Role::User]));
        assert!(Role::Admin.is_allowed(&[Role::Admin]));
        assert!(!Role::Admin.is_allowed(&[Role::Schedd]));
        assert!(!Role::Admin.is_allowed(&[Role::Host]));
        assert!(Role::User.is_allowed(&[Role::User, Role::Schedd]));
        assert!(!Role::User.is_allowed(&[Role::Admin]));
        assert!(!Role::Schedd.is_allowed(&[Role::User]));
        assert!(!Role::Host.is_allowed(&[]));
    }
}
