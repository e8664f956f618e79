//! What the whole-process benchmarks share: a personal pool (`andes pool up`,
//! a real process) and a signed client of its schedd and collector.
#![allow(dead_code)] // each benchmark uses its own part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use andes_protocol::{Client, Keypair, Transport, TrustFile};
use http::Method;

/// A sample job built for wasm32-wasip1.
pub fn sample(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    assert!(p.exists(), "{}: build the samples first (`cargo xtask bench` does)", p.display());
    p
}

/// A running personal pool; stopped when dropped.
pub struct PersonalPool {
    /// `andes pool up`.
    pub child: Child,
    /// Its directory.
    pub dir: tempfile::TempDir,
    /// The schedd, as the user `bench`.
    pub client: Client,
    /// The collector.
    pub collector: Client,
    /// A runtime for the clients.
    pub rt: tokio::runtime::Runtime,
}

impl Drop for PersonalPool {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the pool runs plain HTTP (`ANDES_BENCH_PLAINTEXT=1`) rather than TLS.
pub fn plaintext() -> bool {
    std::env::var_os("ANDES_BENCH_PLAINTEXT").is_some_and(|v| v == "1")
}

/// How the benchmark's clients reach a pool whose trust file is `dir/trust`.
pub fn transport(dir: &Path) -> Transport {
    if plaintext() {
        Transport::Plain
    } else {
        Transport::Tls(Arc::new(TrustFile::load(&dir.join("trust")).unwrap()))
    }
}

/// Starts `andes pool up --slots N` (with `--plaintext` under
/// `ANDES_BENCH_PLAINTEXT=1`) and waits until it is ready.
pub fn pool_up(slots: usize) -> PersonalPool {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_andes"))
        .args(["pool", "up", "--slots", &slots.to_string()])
        .args(plaintext().then_some("--plaintext"))
        .arg("--dir")
        .arg(dir.path())
        .env("USER", "bench")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("pool ready") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "the pool did not start"
        );
    }
    let addr = std::fs::read_to_string(dir.path().join("spool/.schedd_address")).unwrap();
    let kp = Arc::new(Keypair::load(&dir.path().join("keys/bench")).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cm = std::fs::read_to_string(dir.path().join(".collector_address")).unwrap();
    let t = transport(dir.path());
    let (client, collector) = (
        Client::with_transport(addr.trim(), kp.clone(), &t)
            .unwrap()
            .with_timeout(Duration::from_secs(600)),
        Client::with_transport(cm.trim(), kp, &t).unwrap(),
    );
    PersonalPool { child, dir, client, collector, rt }
}

impl PersonalPool {
    /// Stores a sample's module in the schedd unless it has it (as `andes submit`
    /// does); its digest.
    pub fn put_module(&self, name: &str) -> String {
        let module = std::fs::read(sample(name)).unwrap();
        let digest = andes_schedd::queue::module_digest(&module);
        // As `andes submit` does: asked first, sent only when missing.
        let have = self.rt.block_on(self.client.get(&format!("/v1/modules/{digest}"))).unwrap();
        if have.status.is_success() {
            return digest;
        }
        self.rt
            .block_on(self.client.request(
                Method::PUT,
                &format!("/v1/modules/{digest}"),
                module.into(),
            ))
            .unwrap();
        digest
    }

    /// Jobs in the queue.
    pub fn jobs_left(&self) -> u64 {
        let r: andes_schedd::api::SummaryReply = self
            .rt
            .block_on(self.client.call(Method::POST, "/v1/summary", Some(&serde_json::json!({}))))
            .unwrap();
        r.totals.jobs
    }
}
