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

use andes_compile::{LoopChecks, Options, STATE_UNWINDING, instrument};
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
    interrupted_module(&primes_instrumented(checks), &[N], mode, k, &format!("{checks:?}"));
}

/// Runs `module` whole, then again with `k` checkpoints at random points,
/// continued as `mode` says: the same output and exit, one slice per
/// checkpoint (each request honoured before the next comes), and frames
/// unwound each time.
fn interrupted_module(module: &[u8], args: &[&str], mode: Mode, k: usize, what: &str) {
    let seed = seed();
    let _report = ReportSeed(seed);
    let rig = Rig::new();
    let whole = rig.run_through(module, args, &[], mode);
    assert_eq!(whole.slices, 1);
    let points = random_points(seed, k, whole.polls);
    let cut = rig.run_through(module, args, &points, mode);
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
        "{what} {mode:?} seed {seed}: {} slices, unwound stacks of {:?} bytes, {} polls \
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

/// A rewind enters a loop's rewind copy, finishes the iteration there and
/// goes on in its fast copy; an unwind from either saves the same frame.
#[test]
fn loops_emitted_twice_resume_and_rewind_alike() {
    let opts = Options { fast_copy_sites: 1, ..Options::default() };
    let module = instrument(&sample("primes"), &opts).expect("instrument primes");
    assert_ne!(module, primes_instrumented(LoopChecks::Outer), "no loop was copied");
    for mode in [Mode::Resume, Mode::Rewind] {
        interrupted_module(&module, &[N], mode, 12, "fast copies");
    }
}

/// A recursion with no loop anywhere: `g(n) = n < 2 ? n : g(n - 1) - h(n - 2) / 2 + 3`,
/// with `h` (which calls `g`) reached through the table. No loop header
/// polls, so only the polls that break cycles of calls let it checkpoint
/// before it ends. Exits with `g(25) & 255`.
const RECURSIVE: &str = r#"(module
    (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
    (memory (export "memory") 1)
    (type $t (func (param i32) (result i64)))
    (table 1 funcref)
    (elem (i32.const 0) $h)
    (func $g (param $n i32) (result i64)
        (if (result i64) (i32.lt_u (local.get $n) (i32.const 2))
            (then (i64.extend_i32_u (local.get $n)))
            (else (i64.add
                (i64.sub
                    (call $g (i32.sub (local.get $n) (i32.const 1)))
                    (i64.div_s
                        (call_indirect (type $t) (i32.sub (local.get $n) (i32.const 2)) (i32.const 0))
                        (i64.const 2)))
                (i64.const 3)))))
    (func $h (param $n i32) (result i64) (call $g (local.get $n)))
    (func (export "_start")
        (call $exit (i32.wrap_i64 (i64.and (call $g (i32.const 25)) (i64.const 255))))))"#;

#[test]
fn a_recursion_without_loops_checkpoints_while_it_recurses() {
    let rig = Rig::new();
    let module = wat::parse_str(RECURSIVE).unwrap();
    let plain = rig.run_through(&module, &[], &[], Mode::Resume);
    let out = instrument(&module, &Options::default()).unwrap();
    let whole = rig.run_through(&out, &[], &[], Mode::Resume);
    assert_eq!(whole.exit, plain.exit);
    interrupted_module(&out, &[], Mode::Resume, 12, "recursion");
    interrupted_module(&out, &[], Mode::Rewind, 12, "recursion");
}

/// A deep recursion whose frames keep eight i64 locals live across the call;
/// the innermost frame loops a million times, so a checkpoint asked for
/// after the descent (which takes a few of the rig's fuel slices) is taken
/// there, 1,000 frames deep.
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
                    (br_if $l (i32.lt_u (local.get $i) (i32.const 1000000))))
                (i64.extend_i32_u (local.get $i)))
            (else
                (i64.add
                    (call $rec (i32.sub (local.get $n) (i32.const 1)))
                    (i64.add (i64.add (i64.add (local.get $a) (local.get $b))
                                      (i64.add (local.get $c) (local.get $d)))
                             (i64.add (i64.add (local.get $e) (local.get $f))
                                      (i64.add (local.get $g) (local.get $h))))))))
    (func (export "_start")
        ;; 1,000,000 + the sum over n = 1..1000 of 8n + 28: 5,032,000, which is 64 mod 256.
        (call $exit (i32.wrap_i64 (i64.and (call $rec (i32.const 1000)) (i64.const 255))))))"#;

#[test]
fn a_deep_stack_resumes_and_an_overflow_is_recognised() {
    let rig = Rig::new();
    let module = wat::parse_str(DEEP).unwrap();
    let plain = rig.run_through(&module, &[], &[], Mode::Resume);
    assert_eq!(plain.exit, 64);

    // With the default stack, a checkpoint in the innermost loop unwinds all
    // 1,000 frames and the resumed run ends the same.
    let big = instrument(&module, &Options::default()).unwrap();
    let cut = rig.try_run_at(&big, &[100]).expect("unwinds with a 1 MiB stack");
    assert_eq!(cut.exit, 64);
    assert_eq!(cut.slices, 2);
    assert!(cut.stack_bytes[0] > 65536, "{:?}", cut.stack_bytes);

    // With one page, the unwind overflows: a trap out of bounds while
    // unwinding, which the host recognises.
    let small = instrument(&module, &Options { stack_pages: 1, ..Options::default() }).unwrap();
    let err = rig.try_run_at(&small, &[100]).expect_err("overflows a 64 KiB stack");
    assert!(err.overflow, "{}", err.message);
    assert_eq!(err.state, STATE_UNWINDING);
}

/// Bulk memory instructions on overlapping megabytes, checked against the
/// same moves done a byte at a time in another region: exits 0 when both
/// regions agree.
const BULK: &str = r#"(module
    (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
    (memory (export "memory") 128)
    (func $init (param $base i32) (local $i i32)
        (loop $l
            (i32.store (i32.add (local.get $base) (i32.shl (local.get $i) (i32.const 2)))
                       (i32.mul (local.get $i) (i32.const -1640531535)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $l (i32.lt_u (local.get $i) (i32.const 786432)))))
    (func $move (param $d i32) (param $s i32) (param $n i32) (local $i i32)
        (if (i32.le_u (local.get $d) (local.get $s))
            (then (block $done (loop $f
                (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
                (i32.store8 (i32.add (local.get $d) (local.get $i))
                            (i32.load8_u (i32.add (local.get $s) (local.get $i))))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br $f))))
            (else (local.set $i (local.get $n)) (block $done (loop $b
                (br_if $done (i32.eqz (local.get $i)))
                (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                (i32.store8 (i32.add (local.get $d) (local.get $i))
                            (i32.load8_u (i32.add (local.get $s) (local.get $i))))
                (br $b))))))
    (func $fill (param $d i32) (param $v i32) (param $n i32) (local $i i32)
        (block $done (loop $f
            (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
            (i32.store8 (i32.add (local.get $d) (local.get $i)) (local.get $v))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $f))))
    ;; 1 if the two regions differ: a leaf, so it has no flag check.
    (func $differ (result i32) (local $i i32)
        (loop $c
            (if (i32.ne (i32.load (local.get $i))
                        (i32.load (i32.add (local.get $i) (i32.const 4194304))))
                (then (return (i32.const 1))))
            (local.set $i (i32.add (local.get $i) (i32.const 4)))
            (br_if $c (i32.lt_u (local.get $i) (i32.const 4194304))))
        (i32.const 0))
    (func (export "_start")
        (call $init (i32.const 0))
        (call $init (i32.const 4194304))
        ;; Destination above the source, then below it, then a fill.
        (memory.copy (i32.const 1048588) (i32.const 0) (i32.const 2621440))
        (memory.copy (i32.const 4) (i32.const 1048576) (i32.const 2097152))
        (memory.fill (i32.const 100) (i32.const 0x5a) (i32.const 1500000))
        (call $move (i32.const 5242892) (i32.const 4194304) (i32.const 2621440))
        (call $move (i32.const 4194308) (i32.const 5242880) (i32.const 2097152))
        (call $fill (i32.const 4194404) (i32.const 0x5a) (i32.const 1500000))
        (call $exit (call $differ))))"#;

/// With `split_bulk`, copies and fills of megabytes are split into pieces
/// with a flag check between them (a checkpoint need not wait for the whole instruction), and
/// still move every byte as the instruction does, overlaps included,
/// whether the job is interrupted inside them or not.
#[test]
fn large_bulk_copies_and_fills_yield_between_pieces_and_move_the_same_bytes() {
    let rig = Rig::new();
    let module = wat::parse_str(BULK).unwrap();
    assert_eq!(rig.run_through(&module, &[], &[], Mode::Resume).exit, 0);
    let opts = Options { split_bulk: true, ..Options::default() };
    let out = instrument(&module, &opts).unwrap();
    assert_eq!(rig.run_through(&out, &[], &[], Mode::Resume).exit, 0);
    // The flag set before the start is seen inside the first copy (every
    // loop of the module is in a leaf, so the pieces' are the only
    // checks): it unwinds from between two pieces, and the resumed run
    // moves the rest.
    let cut = rig.run_flagged_from_start(&out).expect("unwinds inside the copy");
    assert_eq!((cut.exit, cut.slices), (0, 2));
    for mode in [Mode::Resume, Mode::Rewind] {
        let cut = rig.run_through(&out, &[], &[3, 40, 90], mode);
        assert_eq!(cut.exit, 0, "{mode:?}");
    }
}

/// A copy or fill that would run out of bounds traps, before moving any
/// byte, in the instrumented module as in the original.
#[test]
fn an_out_of_bounds_bulk_copy_still_traps() {
    let rig = Rig::new();
    for op in [
        "(memory.copy (i32.const 65000) (i32.const 0) (i32.const 2000000))",
        "(memory.copy (i32.const 0) (i32.const 65000) (i32.const 2000000))",
        "(memory.fill (i32.const 65000) (i32.const 1) (i32.const 2000000))",
        "(memory.copy (i32.const -1) (i32.const 0) (i32.const -1))",
    ] {
        let text = format!(
            r#"(module (memory (export "memory") 16)
                (func (export "_start") {op}))"#
        );
        let module = wat::parse_str(&text).unwrap();
        let out = instrument(&module, &Options { split_bulk: true, ..Options::default() }).unwrap();
        let errs = [
            rig.try_run(&module).expect_err(op),
            rig.try_run(&out).expect_err(op),
            rig.run_flagged_from_start(&out).expect_err(op),
        ];
        for err in errs {
            assert!(err.message.contains("out of bounds"), "{op}: {}", err.message);
        }
    }
}

/// The shapes of code the unwinding must rewind into: values under a call's
/// arguments and under a block holding a call, an `if` with calls in both
/// branches under a value, a `switch` (nested blocks and a `br_table`) in a
/// loop with calls in its cases and branches out of them, an indirect call
/// through the table, a call with no arguments first in its block, results
/// of several values, locals of every number type (and `v128`) live
/// across calls, and locals live across a call only by a loop's back edge or
/// a branch out. It prints a checksum of everything it computed.
const SHAPES: &str = r#"(module
    (import "wasi_snapshot_preview1" "fd_write"
        (func $fd_write (param i32 i32 i32 i32) (result i32)))
    (type $t_work (func (param i32) (result i32)))
    (memory (export "memory") 1)
    (table 2 funcref)
    (elem (i32.const 0) $work $leaf)
    (func $leaf (type $t_work) (param i32) (result i32)
        (i32.add (i32.mul (local.get 0) (i32.const 31)) (i32.const 7)))
    ;; A loop that calls: it has a check, so it and its callers can yield.
    (func $work (type $t_work) (param $n i32) (result i32) (local $i i32) (local $s i32)
        (loop $l
            (local.set $s (i32.add (local.get $s) (call $leaf (local.get $i))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
        (local.get $s))
    (func $noarg (result i32) (call $work (i32.const 9)))
    (func $multi (param $x i32) (result i32 i64)
        (call $work (local.get $x))
        (i64.extend_i32_u (call $work (i32.add (local.get $x) (i32.const 1)))))
    (func $switch (param $k i32) (result i32) (local $r i32) (local $j i32)
        (block $out
            (loop $top
                (block $c3
                    (block $c2
                        (block $c1
                            (block $c0
                                (br_table $c0 $c1 $c2 $c3 $out
                                    (i32.rem_u (i32.add (local.get $k) (local.get $j))
                                               (i32.const 5))))
                            (call $noarg)
                            (local.set $r (i32.add (local.get $r)
                                (i32.xor (i32.const 5) (call $work (i32.const 3)))))
                            (local.set $r (i32.add (local.get $r)))
                            (br $c3))
                        (local.set $r (i32.add (local.get $r)
                            (if (result i32) (i32.and (local.get $j) (i32.const 1))
                                (then (call $work (i32.const 2)))
                                (else (i32.add (i32.const 100) (call $work (i32.const 4)))))))
                        (br $c3))
                    (local.set $r (i32.add (local.get $r)
                        (call_indirect (type $t_work) (i32.const 5)
                            (i32.and (local.get $j) (i32.const 1)))))
                    (local.set $r (i32.add (local.get $r)
                        (i32.mul (i32.const 3)
                            (block (result i32)
                                (br_if $out (i32.gt_u (local.get $j) (i32.const 40)))
                                (call $work (i32.const 6)))))))
                (local.set $j (i32.add (local.get $j) (i32.const 1)))
                (br_if $top (i32.lt_u (local.get $j) (i32.const 50)))))
        (local.get $r))
    (func $mix (param $n i32) (result i64)
        (local $a i64) (local $f f32) (local $d f64) (local $v v128)
        (local.set $a (i64.const 0x123456789))
        (local.set $f (f32.const 1.5))
        (local.set $d (f64.const 2.25))
        (local.set $v (v128.const i32x4 1 2 3 4))
        (local.set $a (i64.add (local.get $a) (i64.extend_i32_u (call $work (local.get $n)))))
        (local.set $f (f32.add (local.get $f) (f32.convert_i32_u (call $work (i32.const 2)))))
        (local.set $d (f64.add (local.get $d) (f64.convert_i32_u (call $work (i32.const 3)))))
        (local.set $v (i32x4.add (local.get $v) (i32x4.splat (call $work (i32.const 4)))))
        (i64.add
            (i64.add (local.get $a) (i64.trunc_f32_u (local.get $f)))
            (i64.add (i64.trunc_f64_u (local.get $d))
                     (i64.extend_i32_u (i32x4.extract_lane 3 (local.get $v))))))
    ;; Locals live across a call only by a loop's back edge (a), a
    ;; br_table's case (b, c) or a br_if out (k, n): the frame keeps them.
    (func $flows (param $n i32) (result i32)
        (local $k i32) (local $a i32) (local $b i32) (local $c i32) (local $r i32)
        (block $done
            (loop $l
                (local.set $r (i32.add (local.get $r) (local.get $a)))
                (local.set $a (i32.add (local.get $k) (i32.const 11)))
                (local.set $b (i32.mul (local.get $k) (i32.const 7)))
                (local.set $c (i32.xor (local.get $k) (i32.const 5)))
                (local.set $r (i32.add (local.get $r) (call $work (i32.const 2))))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (block $cc
                    (block $bb
                        (br_table $bb $cc $l (i32.rem_u (local.get $k) (i32.const 3))))
                    (local.set $r (i32.add (local.get $r) (local.get $b)))
                    (br_if $done (i32.ge_u (local.get $k) (local.get $n)))
                    (br $l))
                (local.set $r (i32.add (local.get $r) (local.get $c)))
                (br_if $l (i32.lt_u (local.get $k) (local.get $n)))))
        (local.get $r))
    (func $print_hex (param $x i64) (local $i i32)
        (loop $l
            (i32.store8 (i32.add (i32.const 100) (local.get $i))
                (i32.load8_u offset=200
                    (i32.wrap_i64 (i64.and (i64.shr_u (local.get $x)
                        (i64.extend_i32_u (i32.sub (i32.const 60)
                            (i32.mul (local.get $i) (i32.const 4)))))
                        (i64.const 15)))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $l (i32.lt_u (local.get $i) (i32.const 16))))
        (i32.store8 (i32.const 116) (i32.const 10))
        (i32.store (i32.const 0) (i32.const 100))
        (i32.store (i32.const 4) (i32.const 17))
        (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
    (data (i32.const 200) "0123456789abcdef")
    (func (export "_start") (local $i i32) (local $acc i64) (local $t i64)
        (loop $main
            (local.set $acc (i64.add (local.get $acc) (call $mix (local.get $i))))
            (local.set $acc (i64.xor (i64.rotl (local.get $acc) (i64.const 7))
                (i64.extend_i32_u (call $switch (local.get $i)))))
            (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u
                (call $flows (i32.add (i32.and (local.get $i) (i32.const 7)) (i32.const 3))))))
            (call $multi (i32.and (local.get $i) (i32.const 15)))
            (local.set $t)
            (i64.extend_i32_u)
            (local.get $t)
            (i64.add)
            (local.get $acc)
            (i64.add)
            (local.set $acc)
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $main (i32.lt_u (local.get $i) (i32.const 300))))
        (call $print_hex (local.get $acc))))"#;

#[test]
fn every_shape_of_code_resumes_where_it_left() {
    let seed = seed();
    let _report = ReportSeed(seed);
    let rig = Rig::new();
    let original = wat::parse_str(SHAPES).unwrap();
    let plain = rig.run_through(&original, &[], &[], Mode::Resume);
    assert_eq!(plain.exit, 0);
    assert_eq!(plain.stdout.len(), 17, "{:?}", String::from_utf8_lossy(&plain.stdout));
    // Every outermost loop with a site emitted twice (a rewind copy and a
    // fast copy) as well as the default (none in so small a module).
    for (checks, fast_copy_sites) in
        [(LoopChecks::Outer, 1), (LoopChecks::Every, 1), (LoopChecks::Outer, u32::MAX)]
    {
        let opts = Options { checks, fast_copy_sites, ..Options::default() };
        let module = instrument(&original, &opts).unwrap();
        let checks = format!("{checks:?} fast_copy_sites {fast_copy_sites}");
        let whole = rig.run_through(&module, &[], &[], Mode::Resume);
        assert_eq!(whole.stdout, plain.stdout, "{checks}");
        assert!(whole.polls > 20, "{checks}: too short to interrupt: {} polls", whole.polls);
        for mode in [Mode::Resume, Mode::Rewind] {
            let points = random_points(seed, 20, whole.polls);
            let cut = rig.run_through(&module, &[], &points, mode);
            assert_eq!(cut.slices, 21, "{checks} {mode:?} seed {seed}: at {points:?}");
            assert_eq!(
                String::from_utf8_lossy(&cut.stdout),
                String::from_utf8_lossy(&plain.stdout),
                "{checks} {mode:?} seed {seed}: at {points:?}"
            );
        }
    }
}
