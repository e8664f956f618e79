//! Parses arbitrary text as the pool's trust file and as a secret key file,
//! and as the public keys and names those files hold. Nothing may panic; an
//! error says where (`origin:line:` for the trust file, a line number within
//! the text). What loads is written back (`TrustFile::to_text`,
//! `Keypair::to_secret_text`, `PublicKey::to_base64`) and loads again equal.
//!
//! Input: UTF-8 text, read whole as each kind of file; each of its lines is
//! also read as a public key (base64, and its decoded bytes when it decodes)
//! and as an identity name.

use andes_protocol::key::validate_name;
use andes_protocol::{Keypair, PublicKey, Role, TrustFile};

const ORIGIN: &str = "/etc/andes/trust";

fn trust(text: &str) {
    match TrustFile::parse(text, ORIGIN) {
        Ok(t) => {
            let again = t.to_text();
            let back = TrustFile::parse(&again, "again").unwrap_or_else(|e| {
                panic!("a trust file's text does not read back: {again:?}: {e}")
            });
            assert_eq!(back, t, "trust file round trip through {again:?}");
            assert_eq!(back.to_text(), again);
            assert_eq!(again.lines().count(), t.len());
            for (key, id) in t.iter() {
                assert!(validate_name(&id.name).is_ok(), "identity {:?}", id.name);
                assert_eq!(t.lookup(key), Some(id));
                assert!(t.keys_with_role(id.role).contains(key.as_bytes()));
            }
            let by_role: usize = Role::ALL.iter().map(|&r| t.keys_with_role(r).len()).sum();
            assert_eq!(by_role, t.len());
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("{ORIGIN}:{}: ", e.line)), "{msg}");
            assert!(e.line >= 1 && e.line <= text.lines().count(), "line {} of {msg}", e.line);
        }
    }
}

fn secret(text: &str) {
    match Keypair::from_secret_text(text) {
        Ok(k) => {
            let again = k.to_secret_text();
            let back = Keypair::from_secret_text(&again)
                .unwrap_or_else(|e| panic!("a secret key's text does not read back: {e}"));
            assert_eq!(back.name(), k.name());
            assert_eq!(back.public(), k.public());
            assert_eq!(back.sign(b"andes"), k.sign(b"andes"));
            assert!(validate_name(k.name()).is_ok());
            // Its public line is what a trust file line ends with.
            let line = format!("host {} {}", k.name(), k.public_line());
            let t = TrustFile::parse(&line, "t").expect("a key's own public line is trusted");
            assert_eq!(t.lookup(&k.public()).map(|id| id.name.as_str()), Some(k.name()));
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
}

fn public(line: &str) {
    if let Ok(k) = PublicKey::from_base64(line) {
        let text = k.to_base64();
        assert_eq!(PublicKey::from_base64(&text), Ok(k));
        assert_eq!(text.parse::<PublicKey>(), Ok(k));
        assert_eq!(PublicKey::from_bytes(k.as_bytes()), Ok(k));
    }
    if let Ok(k) = PublicKey::from_bytes(line.as_bytes()) {
        assert_eq!(PublicKey::from_base64(&k.to_base64()), Ok(k));
    }
    if validate_name(line).is_ok() {
        assert!(!line.is_empty() && !line.contains(char::is_whitespace) && !line.contains('#'));
    }
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    trust(text);
    secret(text);
    for line in text.lines().take(64) {
        public(line);
        public(line.trim());
    }
}
