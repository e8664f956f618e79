//! Drives the guest ABI of the `andes:job` imports (`andes_starter::imports`)
//! with a fuzzed sequence of calls, arbitrary pointers, lengths and values,
//! against a guest memory of fuzzed content. The calls come from a small Wasm
//! module (built from text at start-up) that exports one function per import
//! and a `cabi_realloc` whose answer the input chooses (an arbitrary pointer,
//! a trap, or a re-entrant import call). It runs on the host's own engine
//! (`andes_starter::Host`: fuel, epochs, the pooling allocator, async imports),
//! linked with `imports::add_to_linker`.
//!
//! Nothing may panic the host. A call that succeeds touched only guest memory
//! that exists (every bad pointer or length is a trap or an error code), and
//! did what it says: `get` copies the attribute's text, `set` changes the ad
//! only for a settable name and a valid expression, `save` keeps the bytes,
//! `load` returns the last save or the loaded state, `deadline` and the flags
//! tell the control block's state. What the guest can grow stays within the
//! limits `imports` declares (log lines, their length, attributes set).
//!
//! Input: a flag byte (bit 0: the job has a loaded state, the image's first
//! 200 bytes; bit 1: the looping ops may make 11,000 calls in all rather
//! than 200, enough to pass the cap on log lines), an op count, that many
//! 21-byte ops (an op byte, then five `i32 LE` arguments), then the initial
//! content of the guest's first page.
//! Op byte: the low 4 bits choose the op (see `run_op`); bit 4 passes the
//! arguments raw, otherwise each pointer or length is folded into
//! `0..memory size + 64`, so that most are valid and some are just past the
//! end. Seeds: `python3 fuzz/seed_corpus.py`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use andes_starter::imports::{
    self, ImportState, JobIo, MAX_ATTR_TEXT, MAX_LOG_LINE, MAX_LOG_LINES, MAX_SAVED_STATE,
    MAX_SET_ATTRS,
};
use andes_starter::{Clock, Control, Host, HostConfig, VirtualClock};
use classad::ClassAd;
use wasmtime::{Instance, InstancePre, Linker, Memory, Store};

const WAT: &str = r#"
(module
  (import "andes:job/control@0.1.0" "vacate-requested" (func $vacate (result i32)))
  (import "andes:job/control@0.1.0" "deadline" (func $deadline (param i32)))
  (import "andes:job/attributes@0.1.0" "get" (func $get (param i32 i32 i32)))
  (import "andes:job/attributes@0.1.0" "set" (func $set (param i32 i32 i32 i32 i32)))
  (import "andes:job/log@0.1.0" "write" (func $write (param i32 i32 i32)))
  (import "andes:job/checkpoint@0.1.0" "checkpoint-requested" (func $ckpt (result i32)))
  (import "andes:job/checkpoint@0.1.0" "save" (func $save (param i32 i32 i32)))
  (import "andes:job/checkpoint@0.1.0" "load" (func $load (param i32)))
  (memory (export "memory") 1 16)
  ;; What cabi_realloc answers (-1: it traps), how often it was called, and
  ;; what it does first: 0 nothing, 1 log.write(1, rp, rl), 2 get(rp, rl, rr)
  ;; (recursively, `depth` times), 3 save(rp, rl, rr).
  (global $next (export "next") (mut i32) (i32.const 0))
  (global $reallocs (export "reallocs") (mut i32) (i32.const 0))
  (global $reenter (export "reenter") (mut i32) (i32.const 0))
  (global $depth (export "depth") (mut i32) (i32.const 0))
  (global $rp (export "rp") (mut i32) (i32.const 0))
  (global $rl (export "rl") (mut i32) (i32.const 0))
  (global $rr (export "rr") (mut i32) (i32.const 0))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (global.set $reallocs (i32.add (global.get $reallocs) (i32.const 1)))
    (if (i32.eq (global.get $reenter) (i32.const 1))
      (then (call $write (i32.const 1) (global.get $rp) (global.get $rl))))
    (if (i32.and (i32.eq (global.get $reenter) (i32.const 2))
                 (i32.gt_s (global.get $depth) (i32.const 0)))
      (then
        (global.set $depth (i32.sub (global.get $depth) (i32.const 1)))
        (call $get (global.get $rp) (global.get $rl) (global.get $rr))))
    (if (i32.eq (global.get $reenter) (i32.const 3))
      (then (call $save (global.get $rp) (global.get $rl) (global.get $rr))))
    (if (i32.eq (global.get $next) (i32.const -1)) (then unreachable))
    (global.get $next))
  (func (export "vacate_requested") (result i32) (call $vacate))
  (func (export "deadline") (param i32) (call $deadline (local.get 0)))
  (func (export "get") (param i32 i32 i32)
    (call $get (local.get 0) (local.get 1) (local.get 2)))
  (func (export "set") (param i32 i32 i32 i32 i32)
    (call $set (local.get 0) (local.get 1) (local.get 2) (local.get 3) (local.get 4)))
  (func (export "write") (param i32 i32 i32)
    (call $write (local.get 0) (local.get 1) (local.get 2)))
  (func (export "checkpoint_requested") (result i32) (call $ckpt))
  (func (export "save") (param i32 i32 i32)
    (call $save (local.get 0) (local.get 1) (local.get 2)))
  (func (export "load") (param i32) (call $load (local.get 0)))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
  ;; `n` log lines.
  (func (export "write_many") (param $lvl i32) (param $p i32) (param $l i32) (param $n i32)
    (block $done (loop $again
      (br_if $done (i32.le_s (local.get $n) (i32.const 0)))
      (call $write (local.get $lvl) (local.get $p) (local.get $l))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $again))))
  ;; `n` sets, each under another name: the name's last two bytes become
  ;; two letters counting the calls.
  (func (export "set_many") (param $np i32) (param $nl i32) (param $vp i32) (param $vl i32)
        (param $ret i32) (param $n i32)
    (local $i i32)
    (block $done (loop $again
      (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
      (if (i32.ge_s (local.get $nl) (i32.const 2))
        (then
          (i32.store8 (i32.sub (i32.add (local.get $np) (local.get $nl)) (i32.const 2))
            (i32.add (i32.const 65) (i32.rem_u (local.get $i) (i32.const 26))))
          (i32.store8 (i32.sub (i32.add (local.get $np) (local.get $nl)) (i32.const 1))
            (i32.add (i32.const 65) (i32.rem_u (i32.div_u (local.get $i) (i32.const 26))
                                               (i32.const 26))))))
      (call $set (local.get $np) (local.get $nl) (local.get $vp) (local.get $vl) (local.get $ret))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $again))))
)
"#;

const AD: &str = r#"[ Owner = "alice"; ClusterId = 7; ProcId = 0; Progress = 0.5;
    ChirpNote = "a \"quoted\" note"; Requirements = TARGET.Memory > 10 && Arch == "x86_64";
    Big = { 1, 2, [ a = 1 ] } ]"#;

struct State {
    ctl: Arc<Control>,
    clock: Arc<VirtualClock>,
    io: Arc<JobIo>,
}

impl ImportState for State {
    fn control(&self) -> &Control {
        &self.ctl
    }
    fn clock(&self) -> &dyn Clock {
        &self.clock
    }
    fn io(&self) -> &Arc<JobIo> {
        &self.io
    }
}

struct Fixture {
    rt: tokio::runtime::Runtime,
    host: Host,
    pre: InstancePre<State>,
    ad: ClassAd,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let host = Host::new(HostConfig {
            max_instances: 4,
            max_memory_bytes: 16 << 16,
            ..HostConfig::default()
        })
        .expect("the host's engine");
        let module = wasmtime::Module::new(host.engine(), wat::parse_str(WAT).expect("the WAT"))
            .expect("the module compiles");
        let mut linker: Linker<State> = Linker::new(host.engine());
        imports::add_to_linker(&mut linker).expect("the imports link");
        let pre = linker.instantiate_pre(&module).expect("the module links");
        Fixture { rt, host, pre, ad: classad::parse_ad(AD).unwrap() }
    })
}

/// An op's size: its byte and five `i32` arguments.
const OP: usize = 21;

/// One instance and what the checks need.
struct Run<'a> {
    f: &'a Fixture,
    store: Store<State>,
    inst: Instance,
    mem: Memory,
    /// Calls the looping ops may still make in this input.
    loops: u32,
}

/// A guest call's outcome: `Ok` or the trap.
type Outcome = Result<(), wasmtime::Error>;

impl Run<'_> {
    fn size(&self) -> u64 {
        self.mem.data_size(&self.store) as u64
    }

    /// Whether `[ptr, ptr + len)` lies in the guest's memory.
    fn inside(&self, ptr: i32, len: u64) -> bool {
        u64::from(ptr as u32) + len <= self.size()
    }

    fn bytes(&self, ptr: i32, len: u64) -> Vec<u8> {
        let p = ptr as u32 as usize;
        self.mem.data(&self.store)[p..p + len as usize].to_vec()
    }

    fn global(&mut self, name: &str) -> i32 {
        self.inst.get_global(&mut self.store, name).unwrap().get(&mut self.store).unwrap_i32()
    }

    fn set_global(&mut self, name: &str, v: i32) {
        let g = self.inst.get_global(&mut self.store, name).unwrap();
        g.set(&mut self.store, wasmtime::Val::I32(v)).unwrap();
    }

    fn call<P, R>(&mut self, name: &str, args: P) -> Result<R, wasmtime::Error>
    where
        P: wasmtime::WasmParams + Send + Sync,
        R: wasmtime::WasmResults + Send + Sync,
    {
        let func = self.inst.get_typed_func::<P, R>(&mut self.store, name).unwrap();
        self.f.rt.block_on(func.call_async(&mut self.store, args))
    }

    /// A 12-byte `option<string>` / `result<_, string>` / `option<list<u8>>`
    /// return area after a call that returned: (discriminant, ptr, len).
    fn area(&self, ret: i32) -> (u8, i32, i32) {
        let a = self.bytes(ret, 12);
        (
            a[0],
            i32::from_le_bytes(a[4..8].try_into().unwrap()),
            i32::from_le_bytes(a[8..12].try_into().unwrap()),
        )
    }

    /// After a successful call that wrote a string or list with
    /// `cabi_realloc`: it went where `cabi_realloc` said and fits.
    fn check_allocated(&self, ret: i32, next: i32, plain: bool) -> Option<(i32, i32)> {
        let (tag, p, l) = self.area(ret);
        assert!(tag <= 1, "discriminant {tag}");
        if tag == 0 {
            return None;
        }
        assert!(self.inside(p, l as u32 as u64), "allocated {p:#x}+{l} outside the memory");
        if plain {
            assert_eq!(p, next, "the string is not where cabi_realloc put it");
        }
        Some((p, l))
    }

    fn invariants(&self) {
        let io = &self.store.data().io;
        let log = io.log.lock().unwrap();
        assert!(log.len() <= MAX_LOG_LINES, "{} log lines kept", log.len());
        assert!(log.iter().all(|(_, l)| l.len() <= MAX_LOG_LINE));
        assert!(io.updates.lock().unwrap().len() <= MAX_SET_ATTRS);
        let ad = io.ad.lock().unwrap();
        assert!(ad.len() <= self.f.ad.len() + MAX_SET_ATTRS, "{} attributes", ad.len());
        if let (_, Some(s)) = self.store.data().ctl.saved() {
            assert!(s.len() <= MAX_SAVED_STATE);
        }
    }
}

/// A pointer or length argument: raw, or folded into `0..size + 64`.
fn arg(raw: bool, v: i32, size: u64) -> i32 {
    if raw { v } else { (u64::from(v as u32) % (size + 64)) as i32 }
}

fn run_op(r: &mut Run<'_>, op: u8, a: [i32; 5]) {
    let raw = op & 0x10 != 0;
    let size = r.size();
    let [p0, p1, p2, p3, p4] = a.map(|v| arg(raw, v, size));
    // Whether `cabi_realloc` runs plainly (no trap, no re-entry), so the
    // string or list it places is checked against what it says.
    let plain = r.global("reenter") == 0;
    let next = r.global("next");
    // The memory before the call, for the ops that read it.
    let before = if matches!(op & 0x0f, 2 | 3 | 6) { r.bytes(0, size) } else { Vec::new() };
    match op & 0x0f {
        0 => {
            let v: i32 = r.call("vacate_requested", ()).expect("vacate-requested cannot fail");
            assert_eq!(v, i32::from(r.store.data().ctl.vacate_requested()));
        }
        1 => {
            let out: Outcome = r.call("deadline", (p0,));
            assert_eq!(out.is_ok(), r.inside(p0, 16), "deadline({p0:#x}): {out:?}");
            if out.is_ok() {
                let area = r.bytes(p0, 16);
                match r.store.data().ctl.vacate_deadline() {
                    None => assert_eq!(area, [0; 16]),
                    Some((_, unix)) => {
                        assert_eq!(area[0], 1);
                        assert_eq!(area[8..], unix.to_le_bytes());
                    }
                }
            }
        }
        2 => {
            let reallocs = r.global("reallocs");
            let out: Outcome = r.call("get", (p0, p1, p2));
            let Ok(()) = out else { return };
            let len = p1 as u32 as usize;
            assert!(len <= MAX_ATTR_TEXT && r.inside(p0, len as u64), "get read {p0:#x}+{p1}");
            assert!(r.inside(p2, 12), "get wrote its answer at {p2:#x}");
            let name = String::from_utf8(before[p0 as u32 as usize..][..len].to_vec())
                .expect("get accepted a name that is not UTF-8");
            let found = r.check_allocated(p2, next, plain);
            if plain {
                let want = r.store.data().io.ad.lock().unwrap().get(&name).map(|e| e.to_string());
                assert_eq!(found.is_some(), want.is_some(), "get({name:?})");
                if let (Some((p, l)), Some(want)) = (found, want) {
                    assert_eq!(l as usize, want.len());
                    let overlaps =
                        (p2 as i64) < (p as i64) + l as i64 && (p as i64) < p2 as i64 + 12;
                    if !overlaps {
                        assert_eq!(r.bytes(p, l as u64), want.as_bytes(), "get({name:?})");
                    }
                }
                assert_eq!(r.global("reallocs") - reallocs, found.is_some() as i32);
            }
        }
        3 => {
            let had = r.store.data().io.ad.lock().unwrap().clone();
            let out: Outcome = r.call("set", (p0, p1, p2, p3, p4));
            let Ok(()) = out else { return };
            let (nl, vl) = (p1 as u32 as usize, p3 as u32 as usize);
            assert!(nl <= MAX_ATTR_TEXT && r.inside(p0, nl as u64), "set read {p0:#x}+{p1}");
            assert!(vl <= MAX_ATTR_TEXT && r.inside(p2, vl as u64), "set read {p2:#x}+{p3}");
            assert!(r.inside(p4, 12), "set wrote its answer at {p4:#x}");
            let text = |p: i32, l: usize| {
                String::from_utf8(before[p as u32 as usize..][..l].to_vec())
                    .expect("set accepted text that is not UTF-8")
            };
            let (name, value) = (text(p0, nl), text(p2, vl));
            let refused = r.check_allocated(p4, next, plain).is_some();
            if plain {
                let ad = r.store.data().io.ad.lock().unwrap().clone();
                if refused {
                    assert_eq!(ad, had, "a refused set({name:?}, {value:?}) changed the ad");
                } else {
                    assert!(imports::may_set(&name), "set({name:?}) of a protected name");
                    let e = classad::parse_expr(&value).expect("set accepted a bad expression");
                    assert_eq!(ad.get(&name), Some(&e), "set({name:?}, {value:?})");
                }
            }
        }
        4 => {
            let level = if raw { p0 } else { a[0].rem_euclid(5) };
            let lines = r.store.data().io.log.lock().unwrap().len();
            let out: Outcome = r.call("write", (level, p1, p2));
            let len = p2.clamp(0, MAX_LOG_LINE as i32) as u64;
            let good = (0..4).contains(&level) && r.inside(p1, len);
            if plain {
                assert_eq!(out.is_ok(), good, "log.write({level}, {p1:#x}, {p2}): {out:?}");
            } else {
                assert!(out.is_err() || good, "log.write({level}, {p1:#x}, {p2}) succeeded");
            }
            let now = r.store.data().io.log.lock().unwrap().len();
            assert!(now <= lines + 1 || !plain);
        }
        5 => {
            let v: i32 = r.call("checkpoint_requested", ()).expect("cannot fail");
            assert_eq!(v, i32::from(r.store.data().ctl.checkpoint_requested()));
        }
        6 => {
            let saves = r.store.data().ctl.saved().0;
            let out: Outcome = r.call("save", (p0, p1, p2));
            let Ok(()) = out else { return };
            let n = p1 as u32 as usize;
            assert!(r.inside(p2, 12), "save wrote its answer at {p2:#x}");
            let refused = r.check_allocated(p2, next, plain).is_some();
            assert_eq!(refused, n > MAX_SAVED_STATE, "save of {n} bytes");
            if !refused {
                assert!(r.inside(p0, n as u64), "save read {p0:#x}+{n}");
                if plain {
                    let (count, state) = r.store.data().ctl.saved();
                    assert_eq!(count, saves + 1);
                    assert_eq!(&*state.unwrap(), &before[p0 as u32 as usize..][..n]);
                }
            }
        }
        7 => {
            let want = match r.store.data().ctl.saved() {
                (_, Some(s)) => Some(s),
                _ => r.store.data().io.loaded.clone(),
            };
            let out: Outcome = r.call("load", (p0,));
            let Ok(()) = out else { return };
            assert!(r.inside(p0, 12), "load wrote its answer at {p0:#x}");
            let got = r.check_allocated(p0, next, plain);
            if plain {
                assert_eq!(got.is_some(), want.is_some());
                if let (Some((p, l)), Some(want)) = (got, want) {
                    assert_eq!(l as usize, want.len());
                    let overlaps =
                        (p0 as i64) < (p as i64) + l as i64 && (p as i64) < p0 as i64 + 12;
                    if !overlaps {
                        assert_eq!(r.bytes(p, l as u64), &*want);
                    }
                }
            }
        }
        8 => {
            // cabi_realloc's answer and behaviour.
            r.set_global("next", if a[1] & 0x100 != 0 { -1 } else { p0 });
            r.set_global("reenter", a[1] & 3);
            r.set_global("depth", if raw { a[1] >> 2 } else { (a[1] >> 2) & 0x7ff });
            r.set_global("rp", p2);
            r.set_global("rl", p3);
            r.set_global("rr", p4);
        }
        9 => {
            let _: Result<i32, _> = r.call("grow", (a[0] & 3,));
        }
        10 => {
            let grace = Duration::from_secs(u64::from(a[0] as u32 % 7200));
            let (ctl, clock) = (r.store.data().ctl.clone(), r.store.data().clock.clone());
            ctl.soft_kill(&clock, grace);
        }
        11 => r.store.data().ctl.request_checkpoint(),
        12 => {
            // Enough to pass the cap on kept lines, once per input.
            let n = (a[3] as u32 % (MAX_LOG_LINES as u32 + 100)).min(r.loops);
            r.loops -= n;
            let n = n as i32;
            let level = if raw { p0 } else { a[0].rem_euclid(5) };
            let _: Outcome = r.call("write_many", (level, p1, p2, n));
        }
        13 => {
            let n = (a[4] as u32 % 700).min(r.loops);
            r.loops -= n;
            let n = n as i32;
            let _: Outcome = r.call("set_many", (p0, p1, p2, p3, p1.wrapping_add(p0) & !3, n));
        }
        14 => {
            // Plant 16 bytes (the last four arguments) at the first.
            let mut b = [0u8; 16];
            for (i, v) in a[1..].iter().enumerate() {
                b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
            let mem = r.mem;
            let _ = mem.write(&mut r.store, p0 as u32 as usize, &b);
        }
        _ => r.store.data().clock.advance(Duration::from_secs(u64::from(a[0] as u32 % 100_000))),
    }
}

/// Runs one input through the target's checks; panics on a failure.
pub fn run(data: &[u8]) {
    let [flags, nops, rest @ ..] = data else { return };
    let nops = usize::from(*nops).min(rest.len() / OP).min(64);
    let (ops, image) = rest.split_at(nops * OP);
    let f = fixture();

    let mut io = JobIo::default();
    *io.ad.get_mut().unwrap() = f.ad.clone();
    io.loaded = (flags & 1 != 0).then(|| Arc::from(&image[..image.len().min(200)]));
    let state = State { ctl: Control::new(), clock: VirtualClock::new(), io: Arc::new(io) };
    let mut store = Store::new(f.host.engine(), state);
    store.set_fuel(1 << 27).unwrap();
    store.set_epoch_deadline(1 << 40);
    let inst = f.rt.block_on(f.pre.instantiate_async(&mut store)).expect("instantiates");
    let mem = inst.get_memory(&mut store, "memory").unwrap();
    mem.write(&mut store, 0, &image[..image.len().min(1 << 16)]).unwrap();
    // Passing the cap on log lines takes 10,001 calls: only inputs that ask.
    let loops = if flags & 2 != 0 { MAX_LOG_LINES as u32 + 1000 } else { 200 };
    let mut run = Run { f, store, inst, mem, loops };

    for op in ops.chunks_exact(OP) {
        let a = std::array::from_fn(|i| {
            i32::from_le_bytes(op[1 + 4 * i..5 + 4 * i].try_into().unwrap())
        });
        run_op(&mut run, op[0], a);
        run.invariants();
    }
}
