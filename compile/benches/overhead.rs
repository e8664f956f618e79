//! What `andes compile` costs a job that is never checkpointed: primes, the
//! original against instrumented variants, each instantiated and run to its
//! end in the execute host's engine configuration (async, fuel with async
//! yields, epoch interruption, the pooling allocator). Prints each variant's
//! size before the timings.
//!
//! `cargo bench -p andes-compile --bench overhead` (build the samples first).
//! `ANDES_BENCH_N` sets primes' argument (default 2000000);
//! `ANDES_BENCH_VARIANTS=a,b` measures only those variants;
//! `ANDES_BENCH_ROUNDS=R` replaces criterion by R rounds that run each
//! variant once in turn, so that a machine whose load drifts slows every
//! variant alike, and prints each one's median and minimum and their ratios
//! to the original's; `ANDES_BENCH_DUMP=DIR` writes each variant there.
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

#[path = "../tests/common/mod.rs"]
mod common;

use andes_compile::{LoopChecks, Options, instrument};
use common::{Mode, Rig, sample};
use std::path::Path;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};

fn code_size(module: &[u8]) -> usize {
    wasmparser::Parser::new(0)
        .parse_all(module)
        .filter_map(|p| match p {
            Ok(wasmparser::Payload::CodeSectionStart { size, .. }) => Some(size as usize),
            _ => None,
        })
        .sum()
}

/// The variants measured, by name.
fn variants() -> Vec<(&'static str, Options)> {
    let o = |checks| Options { checks, ..Options::default() };
    vec![
        ("every-loop", o(LoopChecks::Every)),
        ("not-in-leaves", o(LoopChecks::NotInLeaves)),
        ("outer", o(LoopChecks::Outer)),
    ]
}

fn overhead(c: &mut Criterion) {
    let n = std::env::var("ANDES_BENCH_N").unwrap_or_else(|_| "2000000".into());
    let only = std::env::var("ANDES_BENCH_VARIANTS").ok();
    let rig = Rig::new();
    let original = sample("primes");
    let mut modules = vec![("original".to_string(), original.clone())];
    for (name, opts) in variants() {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|v| v == name)) {
            continue;
        }
        modules.push((name.to_string(), instrument(&original, &opts).expect(name)));
    }
    let expected = rig.run_through(&original, &[&n], &[], Mode::Resume).stdout;
    for (name, bytes) in &modules {
        eprintln!(
            "{name:>22}: module {:>7} bytes ({:.2}x), code {:>7} bytes ({:.2}x)",
            bytes.len(),
            bytes.len() as f64 / original.len() as f64,
            code_size(bytes),
            code_size(bytes) as f64 / code_size(&original) as f64
        );
    }
    if let Ok(dir) = std::env::var("ANDES_BENCH_DUMP") {
        for (name, bytes) in &modules {
            std::fs::write(Path::new(&dir).join(format!("primes.{name}.wasm")), bytes).unwrap();
        }
    }
    let compiled: Vec<_> = modules.iter().map(|(name, bytes)| (name, rig.compile(bytes))).collect();
    for (name, module) in &compiled {
        let out = rig.run_compiled(module, &[&n], &[], Mode::Resume);
        assert_eq!(out.stdout, expected, "{name}");
    }
    if let Some(rounds) = std::env::var("ANDES_BENCH_ROUNDS").ok().and_then(|r| r.parse().ok()) {
        interleaved(&rig, &compiled, &n, rounds);
        return;
    }
    let mut g = c.benchmark_group(format!("primes-{n}"));
    g.sample_size(20);
    for (name, module) in &compiled {
        g.bench_function(name.as_str(), |b| {
            b.iter(|| rig.run_compiled(module, &[&n], &[], Mode::Resume))
        });
    }
    g.finish();
}

/// Each variant once per round, in turn; medians and minima.
fn interleaved(rig: &Rig, compiled: &[(&String, wasmtime::Module)], n: &str, rounds: usize) {
    let mut times = vec![Vec::with_capacity(rounds); compiled.len()];
    for _ in 0..rounds {
        for (i, (_, module)) in compiled.iter().enumerate() {
            let t = Instant::now();
            rig.run_compiled(module, &[n], &[], Mode::Resume);
            times[i].push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let stats: Vec<(f64, f64)> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            (t[t.len() / 2], t[0])
        })
        .collect();
    println!("primes {n}, {rounds} interleaved rounds");
    for ((name, _), (median, min)) in compiled.iter().zip(&stats) {
        println!(
            "{name:>24}: median {median:7.2} ms ({:.3}x), min {min:7.2} ms ({:.3}x)",
            median / stats[0].0,
            min / stats[0].1
        );
    }
}

criterion_group!(benches, overhead);
criterion_main!(benches);
