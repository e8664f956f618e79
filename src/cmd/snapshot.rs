//! `andes snapshot inspect`: what a checkpoint snapshot holds, and whether
//! its hash and signature check out.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::{Args, Subcommand};

/// `andes snapshot`'s subcommands.
#[derive(Subcommand, Debug)]
pub enum SnapshotCmd {
    /// Print a snapshot's header: module hash, platform, sizes, signer, and
    /// the checks of its content hash and signature.
    Inspect(InspectArgs),
}

/// Arguments of `andes snapshot inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The snapshot file.
    file: PathBuf,
    /// A trust file (as the execute hosts use): also say whether the signer
    /// is trusted, and by what name.
    #[arg(long, value_name = "FILE")]
    trust: Option<PathBuf>,
    /// Print one JSON document instead of the text: the whole header and
    /// every check (content hash, signature, trust, packs missing).
    #[arg(long)]
    json: bool,
}

/// Runs `andes snapshot`.
pub fn run(cmd: SnapshotCmd) -> Result<ExitCode> {
    match cmd {
        SnapshotCmd::Inspect(a) => inspect(a),
    }
}

/// A byte count in B, KiB or MiB.
pub(crate) fn size(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

fn inspect(a: InspectArgs) -> Result<ExitCode> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let i = andes_snapshot::inspect(&bytes).map_err(|e| anyhow!("{}: {e}", a.file.display()))?;
    let trusted = match &a.trust {
        Some(t) => {
            let tf = andes_protocol::TrustFile::load(t).map_err(|e| anyhow!("{e}"))?;
            let key = andes_protocol::stream::parse_hex(&i.signer)
                .and_then(|b| andes_protocol::PublicKey::from_bytes(&b).ok());
            Some(key.and_then(|k| tf.lookup(&k).map(|id| format!("{} ({:?})", id.name, id.role))))
        }
        None => None,
    };
    let h = &i.header;
    // A checkpoint directory keeps the contents beside its snapshots.
    let blobs = a.file.parent().map(|d| d.join("blobs")).filter(|d| d.is_dir());
    let missing: Vec<&str> = match &blobs {
        Some(dir) => h
            .contents()
            .filter(|c| std::fs::metadata(dir.join(c.blake3)).ok().map(|m| m.len()) != Some(c.size))
            .map(|c| c.blake3)
            .collect(),
        None => Vec::new(),
    };
    let good = i.hash_ok && i.signature_ok && !matches!(trusted, Some(None)) && missing.is_empty();
    let status = if good { ExitCode::SUCCESS } else { ExitCode::from(1) };
    if a.json {
        // One document, for a program to read: the header and every check.
        let doc = serde_json::json!({
            "file": a.file.display().to_string(),
            "version": i.version,
            "size": i.size,
            "header": h,
            "memory_stored": i.memory_sizes,
            "content_hash": { "blake3": i.hash, "ok": i.hash_ok },
            "signer": { "ed25519": i.signer, "signature_ok": i.signature_ok },
            "trusted": match &trusted {
                Some(Some(name)) => serde_json::json!(name),
                Some(None) => serde_json::json!(false),
                None => serde_json::Value::Null,
            },
            "blobs": blobs.as_ref().map(|d| d.display().to_string()),
            "missing": missing,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(status);
    }
    let ok = |b: bool| if b { "ok" } else { "FAILED" };
    outln!("snapshot      {}", a.file.display());
    outln!("format        version {}", i.version);
    outln!("platform      {}", h.platform);
    outln!("module        sha256:{}", h.module_sha256);
    outln!("job           {}", if h.job.is_empty() { "-" } else { &h.job });
    outln!("taken         {}", h.created_ms);
    if let Some(u) = &h.unwound {
        outln!(
            "call stack    unwound (instrumentation {}), data at {:#x}",
            u.instrumentation,
            u.data
        );
    } else {
        outln!("call stack    none (cooperative or at a clean start)");
    }
    outln!("size          {}", size(i.size as u64));
    for (n, (m, stored)) in h.memories.iter().zip(&i.memory_sizes).enumerate() {
        outln!("memory {n}      {} ({} stored)", size(m.bytes), size(*stored));
    }
    outln!("globals       {}", h.globals.len());
    outln!("descriptors   {}", h.wasi.descriptors.len());
    outln!("files         {} ({})", h.files.len(), size(h.files.iter().map(|f| f.size).sum()));
    outln!(
        "memory packs  {} ({}){}",
        h.packs.len(),
        size(h.packs.iter().map(|p| p.size).sum()),
        match &blobs {
            Some(d) if missing.is_empty() => format!(", every content present in {}", d.display()),
            Some(d) => format!(", MISSING from {}: {}", d.display(), missing.join(", ")),
            None => String::new(),
        }
    );
    outln!("stdout        {} bytes written", h.wasi.stdout_offset);
    outln!("content hash  blake3:{} {}", i.hash, ok(i.hash_ok));
    outln!("signer        ed25519:{}", i.signer);
    outln!("signature     {}", ok(i.signature_ok));
    match &trusted {
        Some(Some(name)) => outln!("trusted       yes, as {name}"),
        Some(None) => outln!("trusted       NO: the trust file does not list this key"),
        None => {}
    }
    Ok(status)
}
