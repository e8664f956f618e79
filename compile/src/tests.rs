use super::*;
use wasmparser::{ExternalKind, Parser, Payload, TypeRef};

fn sample(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../samples/target/wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    std::fs::read(&p).unwrap_or_else(|e| {
        panic!("{}: {e}; build the samples first (`cargo xtask samples`)", p.display())
    })
}

fn wat(text: &str) -> Vec<u8> {
    wat::parse_str(text).expect("wat")
}

/// The exports (name, kind, index), the imports (module, field) and the
/// memories' limits of a module.
struct Shape {
    exports: Vec<(String, ExternalKind, u32)>,
    imports: Vec<(String, String)>,
    memories: Vec<(u64, Option<u64>)>,
    mutable_globals: Vec<u32>,
}

fn shape(module: &[u8]) -> Shape {
    let mut s =
        Shape { exports: vec![], imports: vec![], memories: vec![], mutable_globals: vec![] };
    let mut globals = 0;
    for p in Parser::new(0).parse_all(module) {
        match p.unwrap() {
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e.unwrap();
                    s.exports.push((e.name.to_string(), e.kind, e.index));
                }
            }
            Payload::ImportSection(r) => {
                for i in r {
                    let i = i.unwrap();
                    s.imports.push((i.module.to_string(), i.name.to_string()));
                    if let TypeRef::Global(g) = i.ty {
                        if g.mutable {
                            s.mutable_globals.push(globals);
                        }
                        globals += 1;
                    }
                }
            }
            Payload::MemorySection(r) => {
                for m in r {
                    let m = m.unwrap();
                    s.memories.push((m.initial, m.maximum));
                }
            }
            Payload::GlobalSection(r) => {
                for g in r {
                    if g.unwrap().ty.mutable {
                        s.mutable_globals.push(globals);
                    }
                    globals += 1;
                }
            }
            _ => {}
        }
    }
    s
}

impl Shape {
    fn export(&self, name: &str) -> Option<(ExternalKind, u32)> {
        self.exports.iter().find(|e| e.0 == name).map(|e| (e.1, e.2))
    }
}

const LOOP: &str = r#"(module
    (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
    (memory (export "memory") 1)
    (global $sp (mut i32) (i32.const 1024))
    (func $count (param $n i32) (result i32)
        (local $i i32)
        (loop $l
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $l (i32.lt_u (local.get $i) (local.get $n))))
        (local.get $i))
    (func (export "_start")
        (drop (call $count (i32.const 10)))
        (call $exit (i32.const 0))))"#;

#[test]
fn instrumented_primes_validates_and_has_the_contract() {
    let original = sample("primes");
    let out = instrument(&original, &Options::default()).expect("instrument primes");
    wasmparser::Validator::new_with_features(wasmtime_features()).validate_all(&out).unwrap();
    let s = shape(&out);
    assert!(s.imports.contains(&(YIELD_MODULE.to_string(), YIELD_FIELD.to_string())));
    assert_eq!(s.export(MEMORY_EXPORT), Some((ExternalKind::Memory, 0)));
    assert_eq!(s.export(POLL_MEMORY_EXPORT), Some((ExternalKind::Memory, POLL_MEMORY)));
    assert_eq!(s.memories[POLL_MEMORY as usize], (1, Some(1)));
    assert_eq!(s.export(STACK_MEMORY_EXPORT), Some((ExternalKind::Memory, STACK_MEMORY)));
    let pages = u64::from(DEFAULT_STACK_PAGES);
    assert_eq!(s.memories[STACK_MEMORY as usize], (pages, Some(pages)));
    for f in [START_UNWIND, STOP_UNWIND, START_REWIND, STOP_REWIND, GET_STATE, "_start"] {
        assert_eq!(s.export(f).map(|e| e.0), Some(ExternalKind::Func), "{f}");
    }
    // Every mutable global under its andes.global.N name, and nothing else.
    let mut named: Vec<u32> = s
        .exports
        .iter()
        .filter_map(|e| global_export_index(&e.0).map(|n| (n, e.2)))
        .map(|(n, idx)| {
            assert_eq!(n, idx);
            n
        })
        .collect();
    named.sort();
    assert_eq!(named, s.mutable_globals);
    // __stack_pointer, Asyncify's state and data pointer at least.
    assert!(named.len() >= 3, "{named:?}");
    assert_eq!(instrumentation_version(&out), Some(INSTRUMENTATION_VERSION));
}

#[test]
fn instrumenting_twice_is_refused() {
    let once = instrument(&wat(LOOP), &Options::default()).unwrap();
    let err = instrument(&once, &Options::default()).unwrap_err();
    assert!(matches!(err, CompileError::AlreadyInstrumented(INSTRUMENTATION_VERSION)), "{err}");
    assert!(err.to_string().contains("already instrumented"), "{err}");
}

#[test]
fn asyncify_output_of_another_tool_is_refused() {
    let m = wat(r#"(module (memory (export "memory") 1)
        (func (export "_start")) (func (export "asyncify_get_state") (result i32) i32.const 0))"#);
    let err = instrument(&m, &Options::default()).unwrap_err();
    assert!(matches!(&err, CompileError::Conflict(s) if s.contains("asyncify_get_state")), "{err}");
}

#[test]
fn garbage_is_refused() {
    for bytes in [&b""[..], b"\0asm", b"not wasm at all", b"\0asm\x01\0\0\0\x01\xff"] {
        let err = instrument(bytes, &Options::default()).unwrap_err();
        assert!(matches!(err, CompileError::Invalid(_)), "{bytes:?}: {err}");
        assert!(err.to_string().starts_with("not a valid WebAssembly module: "), "{err}");
    }
    assert_eq!(instrumentation_version(b"garbage"), None);
}

#[test]
fn the_custom_section_reads_back() {
    let original = wat(LOOP);
    assert_eq!(instrumentation_version(&original), None);
    let out = instrument(&original, &Options::default()).unwrap();
    assert_eq!(instrumentation_version(&out), Some(INSTRUMENTATION_VERSION));
    // The section is where the version says, and nothing else reads as one.
    let mut sections = 0;
    for p in Parser::new(0).parse_all(&out) {
        if let Payload::CustomSection(c) = p.unwrap()
            && c.name() == CUSTOM_SECTION
        {
            sections += 1;
            assert_eq!(c.data(), &INSTRUMENTATION_VERSION.to_le_bytes());
        }
    }
    assert_eq!(sections, 1);
}

fn calls_to_yield(module: &[u8]) -> usize {
    let s = shape(module);
    let yield_index =
        s.imports.iter().position(|i| i.0 == YIELD_MODULE && i.1 == YIELD_FIELD).unwrap() as u32;
    let mut calls = 0;
    for p in Parser::new(0).parse_all(module) {
        if let Payload::CodeSectionEntry(body) = p.unwrap() {
            let mut ops = body.get_operators_reader().unwrap();
            while !ops.eof() {
                if let wasmparser::Operator::Call { function_index } = ops.read().unwrap()
                    && function_index == yield_index
                {
                    calls += 1;
                }
            }
        }
    }
    calls
}

#[test]
fn loop_headers_get_a_flag_check() {
    let opts = Options { checks: LoopChecks::Every, ..Options::default() };
    assert_eq!(calls_to_yield(&instrument(&wat(LOOP), &opts).unwrap()), 1);
    // The loop is in a leaf: the default policy leaves it alone.
    let opts = Options { ..Options::default() };
    assert_eq!(calls_to_yield(&instrument(&wat(LOOP), &opts).unwrap()), 0);
}

/// A leaf with a loop; a caller with an outer loop holding an inner loop
/// that calls nothing, an inner loop that calls, and a loop in a block.
const NESTED: &str = r#"(module
    (memory (export "memory") 1)
    (func $leaf (param $n i32)
        (loop $l (br_if $l (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))
    (func (export "_start") (local $i i32) (local $j i32)
        (loop $outer
            (local.set $j (i32.const 0))
            (loop $inner_pure
                (local.set $j (i32.add (local.get $j) (i32.const 1)))
                (br_if $inner_pure (i32.lt_u (local.get $j) (i32.const 10))))
            (loop $inner_calls
                (call $leaf (i32.const 3))
                (local.set $j (i32.sub (local.get $j) (i32.const 1)))
                (br_if $inner_calls (local.get $j)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $outer (i32.lt_u (local.get $i) (i32.const 10))))
        (block $b (loop $after (br_if $after (i32.const 0))))))"#;

#[test]
fn loop_check_policies_place_the_checks_they_say() {
    let count = |checks| {
        let opts = Options { checks, ..Options::default() };
        calls_to_yield(&instrument(&wat(NESTED), &opts).unwrap())
    };
    // leaf loop, outer, inner_pure, inner_calls, after.
    assert_eq!(count(LoopChecks::Every), 5);
    assert_eq!(count(LoopChecks::NotInLeaves), 4);
    // outer and after (outermost), inner_calls (calls).
    assert_eq!(count(LoopChecks::Outer), 3);
}

#[test]
fn a_module_without_export_or_global_sections_gets_them() {
    // No export section, memory not exported: both are added.
    let m = wat(r#"(module (memory 1) (func $s (loop $l (br $l))) (export "_start" (func $s)))"#);
    let out = instrument(&m, &Options::default()).unwrap();
    let s = shape(&out);
    assert_eq!(s.export(MEMORY_EXPORT), Some((ExternalKind::Memory, 0)));
    assert!(s.export(POLL_MEMORY_EXPORT).is_some());
}

fn refused(text: &str) -> CompileError {
    instrument(&wat(text), &Options::default()).expect_err("should be refused")
}

#[test]
fn modules_it_cannot_instrument_are_refused_with_the_reason() {
    let e = refused(r#"(module (memory 1) (func (export "main")))"#);
    assert!(matches!(e, CompileError::NoStart), "{e}");
    let e = refused(r#"(module (memory 1) (func (export "_start") (param i32)))"#);
    assert!(matches!(e, CompileError::NoStart), "{e}");
    let e = refused(r#"(module (func (export "_start")))"#);
    assert!(matches!(e, CompileError::NoMemory), "{e}");

    let unsupported = |text: &str, what: &str| {
        let e = refused(text);
        match &e {
            CompileError::Unsupported { feature, .. } => {
                assert!(feature.contains(what), "{e}")
            }
            _ => panic!("expected unsupported {what}, got {e}"),
        }
    };
    unsupported(r#"(module (memory 1 1 shared) (func (export "_start")))"#, "threads");
    unsupported(r#"(module (memory 1) (tag $t) (func (export "_start") (throw $t)))"#, "exception");
    unsupported(
        r#"(module (memory 1) (func $f) (func (export "_start") (return_call $f)))"#,
        "tail calls",
    );
    unsupported(r#"(module (memory 1) (memory 1) (func (export "_start")))"#, "multi-memory");
    for (op, body) in [
        ("table.set", "(table.set (i32.const 0) (ref.null func))"),
        ("table.grow", "(drop (table.grow (ref.null func) (i32.const 1)))"),
        ("table.fill", "(table.fill (i32.const 0) (ref.null func) (i32.const 1))"),
        ("table.copy", "(table.copy (i32.const 0) (i32.const 0) (i32.const 0))"),
        ("table.init", "(table.init $e (i32.const 0) (i32.const 0) (i32.const 0))"),
    ] {
        unsupported(
            &format!(
                r#"(module (memory 1) (table 1 funcref) (elem $e func $s)
                    (func $s (export "_start") {body}))"#
            ),
            op,
        );
    }
    unsupported(
        r#"(module (memory 1) (func (export "_start") (local externref)))"#,
        "reference values",
    );
    let e = instrument(&[], &Options { stack_pages: 0, ..Options::default() }).unwrap_err();
    assert!(matches!(e, CompileError::Options(_)), "{e}");
}

#[test]
fn global_export_names_round_trip() {
    for n in [0, 1, 9, 10, 4_000_000_000] {
        assert_eq!(global_export_index(&global_export_name(n)), Some(n));
    }
    for bad in ["andes.global.", "andes.global.01", "andes.global.x", "andes.global.-1", "memory"] {
        assert_eq!(global_export_index(bad), None, "{bad}");
    }
}

#[test]
fn stack_layout_and_overflow() {
    let l = StackLayout::new(16 * PAGE_SIZE);
    assert_eq!((l.data, l.start, l.end), (0, 8, 16 * 65536));
    assert_eq!(l.capacity(), 16 * 65536 - 8);
    let d = l.initial_data();
    assert_eq!(l.used(d), Some(0));
    let mut after = d;
    after[..4].copy_from_slice(&108u32.to_le_bytes());
    assert_eq!(l.used(after), Some(100));
    after[..4].copy_from_slice(&(l.end + 4).to_le_bytes());
    assert_eq!(l.used(after), None);
    assert!(is_stack_overflow(true, STATE_UNWINDING));
    assert!(!is_stack_overflow(true, STATE_NORMAL));
    assert!(!is_stack_overflow(false, STATE_UNWINDING));
    let msg = StackOverflow { capacity: l.capacity(), pages: 16 }.to_string();
    assert!(msg.contains("--stack-pages"), "{msg}");
}

/// A guest whose memory is imported (no memory section of its own) gets the
/// poll memory as a section of its own, still at index [`POLL_MEMORY`].
#[test]
fn an_imported_memory_keeps_the_poll_memory_at_its_index() {
    let m = wat(r#"(module (import "env" "memory" (memory 1))
        (func $f)
        (func $s (loop $l (call $f) (br $l))) (export "_start" (func $s)))"#);
    let out = instrument(&m, &Options { ..Options::default() }).unwrap();
    let s = shape(&out);
    assert_eq!(s.export(POLL_MEMORY_EXPORT), Some((ExternalKind::Memory, POLL_MEMORY)));
    assert_eq!(s.export(STACK_MEMORY_EXPORT), Some((ExternalKind::Memory, STACK_MEMORY)));
    assert_eq!(calls_to_yield(&out), 1);
}

/// The unwinding's state global in an instrumented module: the global that
/// `asyncify_get_state` returns.
fn state_global(module: &[u8]) -> u32 {
    let s = shape(module);
    let (_, _, func) = s.exports.iter().find(|e| e.0 == GET_STATE).unwrap().clone();
    let imported = s.imports.len() as u32;
    let mut index = imported;
    for p in Parser::new(0).parse_all(module) {
        if let Payload::CodeSectionEntry(body) = p.unwrap() {
            if index == func {
                let mut ops = body.get_operators_reader().unwrap();
                match ops.read().unwrap() {
                    wasmparser::Operator::GlobalGet { global_index } => return global_index,
                    op => panic!("asyncify_get_state begins with {op:?}"),
                }
            }
            index += 1;
        }
    }
    panic!("no body for asyncify_get_state")
}

#[test]
fn the_state_is_read_from_the_global_only_on_entry_and_after_calls() {
    let out = instrument(&sample("primes"), &Options::default()).unwrap();
    let state = state_global(&out);
    let (mut refreshes, mut other_reads, mut functions) = (0, 0, 0);
    for p in Parser::new(0).parse_all(&out) {
        let Payload::CodeSectionEntry(body) = p.unwrap() else { continue };
        let mut ops = Vec::new();
        let mut reader = body.get_operators_reader().unwrap();
        while !reader.eof() {
            ops.push(reader.read().unwrap());
        }
        let writes = ops.iter().any(|op| {
            matches!(op, wasmparser::Operator::GlobalSet { global_index } if *global_index == state)
        });
        if writes || ops.len() == 2 {
            continue; // asyncify_start_unwind and the like, asyncify_get_state
        }
        let mut reads = 0;
        for (i, op) in ops.iter().enumerate() {
            let wasmparser::Operator::GlobalGet { global_index } = op else { continue };
            if *global_index != state {
                continue;
            }
            reads += 1;
            let on_entry =
                ops[..i].iter().all(|op| matches!(op, wasmparser::Operator::Block { .. }));
            let after_call = on_entry
                || matches!(
                    ops[i - 1],
                    wasmparser::Operator::Call { .. } | wasmparser::Operator::CallIndirect { .. }
                );
            let into_local = matches!(
                ops.get(i + 1),
                Some(wasmparser::Operator::LocalTee { .. } | wasmparser::Operator::LocalSet { .. })
            );
            if after_call && into_local {
                refreshes += 1;
            } else {
                other_reads += 1;
            }
        }
        if reads > 0 {
            functions += 1;
        }
    }
    assert!(functions > 0 && refreshes > 0, "no instrumented function read the state");
    assert_eq!(other_reads, 0, "state reads that are not a refresh of the local copy");
}

/// A block that takes parameters around a call that can checkpoint cannot
/// be rewound into (the rewind would have to make up its parameters): it is
/// refused with where it is, not miscompiled.
#[test]
fn a_block_with_parameters_around_a_yielding_call_is_refused() {
    let m = wat(r#"(module (memory 1)
        (func $w (loop $l (call $f) (br $l)))
        (func $f)
        (func (export "_start")
            (i32.const 1)
            (block (param i32) (result i32) (call $w))
            (drop)))"#);
    let err = instrument(&m, &Options::default()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("block with parameters") && msg.contains("function"), "{msg}");
    // Parameters of a block that holds no such call are fine.
    let ok = wat(r#"(module (memory 1)
        (func $w (loop $l (call $f) (br $l)))
        (func $f)
        (func (export "_start")
            (i32.const 1)
            (block (param i32) (result i32) (i32.const 2) (i32.add))
            (drop)
            (call $w)))"#);
    instrument(&ok, &Options::default()).unwrap();
}

/// A `switch` in a loop: the loop's check goes in after the blocks that open
/// at its header, so that the rewind dispatch of every level down to the
/// `br_table` sits inside it, and an iteration tests the poll word and no
/// state at all on its way to the `br_table`.
/// A switch in a loop, each case calling a function that can yield; `$s`
/// is the third function defined.
const SWITCH_IN_A_LOOP: &str = r#"(module (memory 1)
    (func $w (param i32) (loop $l (br_if $l (call $f (local.get 0)))))
    (func $f (param i32) (result i32) (i32.sub (local.get 0) (i32.const 1)))
    (func $s (local $k i32)
        (local.set $k (i32.const 5))
        (loop $top
            (block $c2 (block $c1 (block $c0
                (br_table $c0 $c1 $c2 (local.get $k)))
                (call $w (i32.const 1)) (br $c2))
                (call $w (i32.const 2)))
            (br_if $top (local.tee $k (i32.sub (local.get $k) (i32.const 1))))))
    (export "_start" (func $s)))"#;

#[test]
fn a_switch_in_a_loop_tests_only_the_poll_word_on_its_way_in() {
    let m = wat(SWITCH_IN_A_LOOP);
    let out = instrument(&m, &Options::default()).unwrap();
    let bodies = bodies(&out);
    use wasmparser::Operator as O;
    let s = &bodies[2];
    let top = s.iter().position(|op| matches!(op, O::Loop { .. })).expect("the loop");
    let table = s.iter().rposition(|op| matches!(op, O::BrTable { .. })).expect("the switch");
    let way_in = &s[top..table];
    let poll_loads = way_in
        .iter()
        .filter(|op| matches!(op, O::I32Load { memarg } if memarg.memory == POLL_MEMORY))
        .count();
    let state_tests =
        way_in.windows(2).filter(|w| matches!(w, [O::I32Const { value: 2 }, O::I32Eq])).count();
    assert_eq!(poll_loads, 1, "{way_in:?}");
    // The one state test there is inside the check, on the rewind path.
    assert_eq!(state_tests, 1, "{way_in:?}");
    let check = way_in
        .iter()
        .position(|op| matches!(op, O::I32Load { memarg } if memarg.memory == POLL_MEMORY))
        .unwrap();
    let test = way_in.windows(2).position(|w| matches!(w, [O::I32Const { value: 2 }, O::I32Eq]));
    assert!(test.unwrap() > check, "the state is tested before the poll word: {way_in:?}");
}

/// Every operator of every function body of `module`, in order.
fn bodies(module: &[u8]) -> Vec<Vec<wasmparser::Operator<'_>>> {
    let mut bodies = Vec::new();
    for p in Parser::new(0).parse_all(module) {
        if let Payload::CodeSectionEntry(body) = p.unwrap() {
            let mut ops = Vec::new();
            let mut reader = body.get_operators_reader().unwrap();
            while !reader.eof() {
                ops.push(reader.read().unwrap());
            }
            bodies.push(ops);
        }
    }
    bodies
}

#[test]
fn a_small_bulk_copy_is_the_instruction_and_only_a_large_one_calls_the_helper() {
    let m = wat(r#"(module (memory 1)
        (func $c (param i32 i32 i32)
            (memory.copy (local.get 0) (local.get 1) (local.get 2))
            (memory.fill (local.get 0) (i32.const 7) (local.get 2)))
        (func $s (call $c (i32.const 0) (i32.const 100) (i32.const 10)))
        (export "_start" (func $s)))"#);
    let out = instrument(&m, &Options::default()).unwrap();
    let bodies = bodies(&out);
    use wasmparser::Operator as O;
    let c = &bodies[0];
    // Each instruction stays, behind `len > BULK_PIECE`, whose `then` calls
    // the helper (the two functions after the module's own and the frame
    // helpers: calls to functions other than the yield import).
    for (i, bulk) in c
        .iter()
        .enumerate()
        .filter(|(_, op)| matches!(op, O::MemoryCopy { .. } | O::MemoryFill { .. }))
    {
        let before = &c[..i];
        let test = before
            .windows(2)
            .rposition(|w| {
                matches!(w, [O::I32Const { value }, O::I32GtU] if *value == crate::rewrite::BULK_PIECE)
            })
            .unwrap_or_else(|| panic!("{bulk:?} without a length test: {c:?}"));
        assert!(
            before[test..].iter().any(|op| matches!(op, O::Call { .. })),
            "no helper call for a large {bulk:?}: {c:?}"
        );
    }
    assert_eq!(
        c.iter().filter(|op| matches!(op, O::MemoryCopy { .. } | O::MemoryFill { .. })).count(),
        2,
        "{c:?}"
    );
}

#[test]
fn a_loop_with_many_sites_gets_a_fast_copy_without_rewind_branches() {
    let m = wat(SWITCH_IN_A_LOOP);
    use wasmparser::Operator as O;
    let loops = |opts: &Options| {
        let out = instrument(&m, opts).unwrap();
        let s = bodies(&out).swap_remove(2);
        // Each loop of $s: how many `br_table`s it holds (its switch's, and
        // the rewind's).
        let mut found = Vec::new();
        for (i, op) in s.iter().enumerate() {
            if !matches!(op, O::Loop { .. }) {
                continue;
            }
            let mut depth = 0;
            let mut tables = 0;
            for op in &s[i..] {
                match op {
                    O::Block { .. } | O::Loop { .. } | O::If { .. } => depth += 1,
                    O::End => depth -= 1,
                    O::BrTable { .. } => tables += 1,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
            found.push(tables);
        }
        found
    };
    // By default (3 sites: the check's and two calls) the loop is emitted
    // once, with the rewind's branches in it.
    let once = loops(&Options::default());
    assert_eq!(once.len(), 1, "{once:?}");
    assert!(once[0] > 1, "{once:?}");
    // Copied: the rewind copy keeps them, the fast copy has the switch's
    // table alone.
    let twice = loops(&Options { fast_copy_sites: 3, ..Options::default() });
    assert_eq!(twice.len(), 2, "{twice:?}");
    assert!(twice[0] > 1, "{twice:?}");
    assert_eq!(twice[1], 1, "{twice:?}");
    let never = loops(&Options { fast_copy_sites: 4, ..Options::default() });
    assert_eq!(never, once);
}
