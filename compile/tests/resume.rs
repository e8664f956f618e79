//! An instrumented module unwound to the host, captured (memories and
//! globals), and resumed in a fresh Store and Instance, or rewound in place,
//! ends exactly as a run that was never interrupted: same stdout, byte for
//! byte, and same exit code. Under wasmtime and wasi-common 36, with the
//! execute host's engine settings (async, fuel with async yields, epoch
//! interruption, the pooling allocator).
//!
//! Interruptions come at seeded random points (`ANDES_SEED=N` replays one;
//! the seed is printed on failure). The host asks for a yield as it would:
//! the epoch callback sets the flag (the poll memory's word).

mod common;

use andes_compile::{LoopChecks, Optimize, Options, STATE_UNWINDING, instrument};
use common::*;

const N: &str = "2000000";

fn primes_instrumented(checks: LoopChecks) -> Vec<u8> {
    instrument(&sample("primes"), &Options { checks, ..Options::default() })
        .expect("instrument primes")
}

#[test]
fn the_instrumented_module_runs_as_the_original() {
    let rig = Rig::new();
    let original = rig.run_through(&sample("primes"), &[N], &[], Mode::Resume);
    let instrumented =
        rig.run_through(&primes_instrumented(LoopChecks::Outer), &[N], &[], Mode::Resume);
    assert_eq!(original.exit, 0);
    assert_eq!(String::from_utf8_lossy(&original.stdout), "primes below 2000000: 148933\n");
    assert_eq!(instrumented.stdout, original.stdout);
    assert_eq!(instrumented.exit, original.exit);
    assert_eq!(instrumented.slices, 1);
}

fn interrupted(mode: Mode, k: usize, checks: LoopChecks) {
    let seed = seed();
    let _report = ReportSeed(seed);
    let rig = Rig::new();
    let module = primes_instrumented(checks);
    let whole = rig.run_through(&module, &[N], &[], mode);
    assert_eq!(whole.slices, 1);
    let points = random_points(seed, k, whole.polls);
    let cut = rig.run_through(&module, &[N], &points, mode);
    assert_eq!(cut.slices, k + 1, "seed {seed}: one slice per interruption, at polls {points:?}");
    assert_eq!(
        String::from_utf8_lossy(&cut.stdout),
        String::from_utf8_lossy(&whole.stdout),
        "seed {seed}"
    );
    assert_eq!(cut.stdout, whole.stdout, "seed {seed}");
    assert_eq!(cut.exit, whole.exit, "seed {seed}");
    // Something real was unwound each time: frames in the stack memory.
    assert!(cut.stack_bytes.iter().all(|b| *b > 0), "seed {seed}: {:?}", cut.stack_bytes);
    eprintln!(
        "{checks:?} {mode:?} seed {seed}: {} slices, unwound stacks of {:?} bytes, {} polls \
         uninterrupted",
        cut.slices, cut.stack_bytes, whole.polls
    );
}

#[test]
fn resumed_in_fresh_instances_at_random_points_it_ends_the_same() {
    interrupted(Mode::Resume, 12, LoopChecks::Outer);
}

#[test]
fn with_checks_in_every_loop_too() {
    interrupted(Mode::Resume, 12, LoopChecks::Every);
}

#[test]
fn periodic_checkpoints_rewind_in_the_same_instance() {
    interrupted(Mode::Rewind, 12, LoopChecks::Outer);
}

#[test]
fn every_optimisation_level_resumes() {
    let seed = seed();
    let _report = ReportSeed(seed);
    let rig = Rig::new();
    let original = rig.run_through(&sample("primes"), &["300000"], &[], Mode::Resume);
    for optimize in [Optimize::None, Optimize::Asyncify, Optimize::O1, Optimize::O3] {
        let opts = Options { optimize, ..Options::default() };
        let module = instrument(&sample("primes"), &opts).unwrap();
        let whole = rig.run_through(&module, &["300000"], &[], Mode::Resume);
        let points = random_points(seed, 3, whole.polls);
        let cut = rig.run_through(&module, &["300000"], &points, Mode::Resume);
        assert_eq!(cut.slices, 4, "{optimize:?} seed {seed}");
        assert_eq!(cut.stdout, original.stdout, "{optimize:?} seed {seed}");
        assert_eq!(cut.exit, original.exit, "{optimize:?} seed {seed}");
    }
}

/// A deep recursion whose frames keep eight i64 locals live across the call;
/// the innermost frame loops, so the flag is seen there.
const DEEP: &str = r#"(module
    (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
    (memory (export "memory") 1)
    (func $rec (param $n i32) (result i64)
        (local $a i64) (local $b i64) (local $c i64) (local $d i64)
        (local $e i64) (local $f i64) (local $g i64) (local $h i64) (local $i i32)
        (local.set $a (i64.extend_i32_u (local.get $n)))
        (local.set $b (i64.add (local.get $a) (i64.const 1)))
        (local.set $c (i64.add (local.get $b) (i64.const 1)))
        (local.set $d (i64.add (local.get $c) (i64.const 1)))
        (local.set $e (i64.add (local.get $d) (i64.const 1)))
        (local.set $f (i64.add (local.get $e) (i64.const 1)))
        (local.set $g (i64.add (local.get $f) (i64.const 1)))
        (local.set $h (i64.add (local.get $g) (i64.const 1)))
        (if (result i64) (i32.eqz (local.get $n))
            (then
                (loop $l
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $l (i32.lt_u (local.get $i) (i32.const 1000))))
                (i64.extend_i32_u (local.get $i)))
            (else
                (i64.add
                    (call $rec (i32.sub (local.get $n) (i32.const 1)))
                    (i64.add (i64.add (i64.add (local.get $a) (local.get $b))
                                      (i64.add (local.get $c) (local.get $d)))
                             (i64.add (i64.add (local.get $e) (local.get $f))
                                      (i64.add (local.get $g) (local.get $h))))))))
    (func (export "_start")
        ;; 1000 + the sum over n = 1..1000 of 8n + 28: 4,033,000, which is 232 mod 256.
        (call $exit (i32.wrap_i64 (i64.and (call $rec (i32.const 1000)) (i64.const 255))))))"#;

#[test]
fn a_deep_stack_resumes_and_an_overflow_is_recognised() {
    let rig = Rig::new();
    let module = wat::parse_str(DEEP).unwrap();
    let plain = rig.run_through(&module, &[], &[], Mode::Resume);
    assert_eq!(plain.exit, 232);

    // With the default stack, the flag set before the start unwinds all
    // 1,000 frames and the resumed run ends the same.
    let big =
        instrument(&module, &Options { optimize: Optimize::None, ..Options::default() }).unwrap();
    let cut = rig.run_flagged_from_start(&big).expect("unwinds with a 1 MiB stack");
    assert_eq!(cut.exit, 232);
    assert_eq!(cut.slices, 2);
    assert!(cut.stack_bytes[0] > 65536, "{:?}", cut.stack_bytes);

    // With one page, the unwind overflows: a trap out of bounds while
    // unwinding, which the host recognises.
    let small = instrument(
        &module,
        &Options { optimize: Optimize::None, stack_pages: 1, ..Options::default() },
    )
    .unwrap();
    let err = rig.run_flagged_from_start(&small).expect_err("overflows a 64 KiB stack");
    assert!(err.overflow, "{}", err.message);
    assert_eq!(err.state, STATE_UNWINDING);
}
