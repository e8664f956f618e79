//! Parses arbitrary text as a submit description and expands it. Nothing may
//! panic, hang or allocate without bound.
//!
//! Input layout: the submit text, optionally followed by a 0 byte and one
//! extra command line (as `andes submit -a` passes). Files come from an
//! in-memory file system holding a Wasm module `job.wasm`, a non-Wasm
//! `job.sh`, item files and a small directory, under the initial directory
//! `/iwd`; nothing on the real disk is read. At most 200 jobs are made.

use andes_submit::{Context, MemFs, expand, parse};

fn fs() -> MemFs {
    let mut fs = MemFs::new();
    fs.add("/iwd/job.wasm", b"\0asm\x01\0\0\0".to_vec());
    fs.add("/iwd/other.wasm", b"\0asm\x01\0\0\0\0\x03\x02hi".to_vec());
    fs.add("/iwd/job.sh", b"#!/bin/sh\n".to_vec());
    fs.add("/iwd/items.txt", b"a 1\nb 2\n# c\n\nc, 3 4\n".to_vec());
    fs.add("/iwd/a.txt", vec![b'a'; 300]);
    fs.add("/iwd/data1.dat", vec![1; 50]);
    fs.add("/iwd/data2.dat", vec![1; 50]);
    fs.add("/iwd/dir/c.txt", vec![1; 10]);
    fs
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let (text, extra) = match input.split_once('\0') {
        Some((t, e)) => (t, Some(e)),
        None => (input, None),
    };
    let Ok(desc) = parse(text, "fuzz.sub") else {
        return;
    };
    let fs = fs();
    let mut ctx = Context::new(42, 1_700_000_000, "/iwd").with_fs(&fs);
    ctx.max_jobs = 200;
    ctx.env = vec![("HOME".into(), "/home/u".into())];
    if let Some(e) = extra {
        ctx.extra_lines = vec![e.to_string()];
    }
    if let Ok(sub) = expand(&desc, &ctx) {
        assert!(sub.jobs.len() <= 200);
        for ad in &sub.jobs {
            // Every ad prints and its attributes evaluate.
            let _ = ad.to_string();
            for (name, _) in ad.iter() {
                let _ = ad.eval_attr(name.as_str());
            }
            let digest = ad.eval_attr("CmdDigest");
            assert!(
                sub.modules.iter().any(|m| Some(m.digest.as_str()) == digest.as_str()),
                "CmdDigest {digest:?} not among the modules"
            );
        }
    }
}
