//! The host side of `wit/job.wit`: the `andes:job` interfaces as core-module
//! imports for wasip1 guests, lowered with the component model's canonical
//! ABI (module = interface name, field = function name). A test checks these
//! names and signatures against the WIT itself.

use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow, bail};
use classad::{ClassAd, Expr};
use wasmtime::{Caller, Linker, Memory};

use crate::control::{Clock, Control};

/// The interfaces' core module names.
pub const CONTROL: &str = "andes:job/control@0.1.0";
/// See [`CONTROL`].
pub const ATTRIBUTES: &str = "andes:job/attributes@0.1.0";
/// See [`CONTROL`].
pub const LOG: &str = "andes:job/log@0.1.0";
/// See [`CONTROL`].
pub const CHECKPOINT: &str = "andes:job/checkpoint@0.1.0";

/// The largest state a cooperative job may `save`.
pub const MAX_SAVED_STATE: usize = 64 << 20;

/// Longest attribute name or value text a guest may pass.
pub const MAX_ATTR_TEXT: usize = 64 * 1024;
/// Longest log line kept; longer lines are cut.
pub const MAX_LOG_LINE: usize = 4096;
/// Most log lines kept per job; later lines are counted, not kept.
pub const MAX_LOG_LINES: usize = 10_000;

/// Most distinct attributes a guest may set in one run.
pub const MAX_SET_ATTRS: usize = 256;
/// Most bytes (names and value texts) of the attributes a guest has set.
pub const MAX_SET_BYTES: usize = 1 << 20;
/// Most bytes (names and value texts) of the attributes set that go with
/// each update while the job runs ([`JobIo::pending_updates`]); the rest
/// wait for its end. What a running job sets is written into the queue's
/// copy of its ad at each update (the whole ad, at every report when its
/// periodic policy reads its usage): a job's ad is a few KiB, and this
/// keeps what a guest adds to every such write about as small.
pub const MAX_LIVE_BYTES: usize = 16 * 1024;

/// Attributes a guest may set (besides names beginning with `Chirp`).
pub const SETTABLE: &[&str] = &["Progress"];

/// True when a guest may set attribute `name`.
pub fn may_set(name: &str) -> bool {
    SETTABLE.iter().any(|s| s.eq_ignore_ascii_case(name))
        || (name.len() > 5 && name[..5].eq_ignore_ascii_case("chirp"))
}

/// A log line's level, as in the WIT's `level` enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `warn`
    Warn,
    /// `error`
    Error,
}

/// The job's ad as the guest sees and changes it, with the log it writes.
#[derive(Debug, Default)]
pub struct JobIo {
    /// The job ad, with the guest's updates applied.
    pub ad: Mutex<ClassAd>,
    /// Attributes the guest set, in order, not yet taken.
    pub updates: Mutex<Vec<(String, Expr)>>,
    /// Log lines written.
    pub log: Mutex<Vec<(Level, String)>>,
    /// Log lines dropped past [`MAX_LOG_LINES`].
    pub log_dropped: std::sync::atomic::AtomicU64,
    /// The state the job saved in an earlier run, for `load`.
    pub loaded: Option<Arc<[u8]>>,
    /// Bytes of each attribute the guest set (lower-cased name), bounded by
    /// [`MAX_SET_ATTRS`] and [`MAX_SET_BYTES`].
    pub(crate) set: Mutex<std::collections::HashMap<String, usize>>,
}

impl JobIo {
    /// Takes the updates made since the last call.
    pub fn take_updates(&self) -> Vec<(String, Expr)> {
        std::mem::take(&mut *self.updates.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The updates not yet taken (the latest value of each name), left in
    /// place: those that fit in [`MAX_LIVE_BYTES`] together, in the order
    /// first set, passing over one that would not fit (it goes with the
    /// job's end, as every update does).
    pub fn pending_updates(&self) -> Vec<(String, Expr)> {
        let updates = self.updates.lock().unwrap_or_else(|e| e.into_inner());
        let mut left = MAX_LIVE_BYTES;
        let mut live = Vec::new();
        for (name, value) in updates.iter() {
            let bytes = name.len() + value.to_string().len();
            if bytes <= left {
                left -= bytes;
                live.push((name.clone(), value.clone()));
            }
        }
        live
    }
}

/// What the imports need from the store's data.
pub trait ImportState: Send + 'static {
    /// The job's control block.
    fn control(&self) -> &Control;
    /// The clock.
    fn clock(&self) -> &dyn Clock;
    /// The job's ad and log.
    fn io(&self) -> &Arc<JobIo>;
}

fn memory<T>(caller: &mut Caller<'_, T>) -> Result<Memory> {
    caller
        .get_export("memory")
        .and_then(|e| e.into_memory())
        .ok_or_else(|| anyhow!("the module exports no memory"))
}

/// Copies `len` bytes (at most `max`) out of guest memory.
fn read_bytes<T>(caller: &mut Caller<'_, T>, ptr: i32, len: i32, max: usize) -> Result<Vec<u8>> {
    let len = len as u32 as usize;
    if len > max {
        bail!("string of {len} bytes is longer than the {max} allowed");
    }
    let mem = memory(caller)?;
    let mut buf = vec![0u8; len];
    mem.read(&*caller, ptr as u32 as usize, &mut buf)
        .map_err(|_| anyhow!("string at {ptr:#x}+{len} is outside the guest's memory"))?;
    Ok(buf)
}

fn read_string<T>(caller: &mut Caller<'_, T>, ptr: i32, len: i32) -> Result<String> {
    String::from_utf8(read_bytes(caller, ptr, len, MAX_ATTR_TEXT)?)
        .map_err(|_| anyhow!("string at {ptr:#x} is not UTF-8"))
}

/// Writes an `option<string>` / `result<_, string>` return area: `None` is
/// the zero discriminant; `Some(s)` is copied into guest memory.
async fn write_opt_string<T: Send>(
    caller: &mut Caller<'_, T>,
    ret: i32,
    s: Option<&str>,
) -> Result<()> {
    let mut area = [0u8; 12];
    if let Some(s) = s {
        let (p, l) = alloc_string(caller, s).await?;
        area[0] = 1;
        area[4..8].copy_from_slice(&p.to_le_bytes());
        area[8..12].copy_from_slice(&l.to_le_bytes());
    }
    write_bytes(caller, ret, &area)
}

fn write_bytes<T>(caller: &mut Caller<'_, T>, at: i32, bytes: &[u8]) -> Result<()> {
    let mem = memory(caller)?;
    mem.write(&mut *caller, at as u32 as usize, bytes)
        .map_err(|_| anyhow!("return area at {at:#x} is outside the guest's memory"))
}

/// Copies `s` into guest memory with the guest's `cabi_realloc`; returns (ptr, len).
async fn alloc_string<T: Send>(caller: &mut Caller<'_, T>, s: &str) -> Result<(i32, i32)> {
    alloc_bytes(caller, s.as_bytes()).await
}

/// Copies `b` into guest memory with the guest's `cabi_realloc`; returns (ptr, len).
async fn alloc_bytes<T: Send>(caller: &mut Caller<'_, T>, b: &[u8]) -> Result<(i32, i32)> {
    let realloc = caller
        .get_export("cabi_realloc")
        .and_then(|e| e.into_func())
        .ok_or_else(|| anyhow!("the module does not export `cabi_realloc`"))?
        .typed::<(i32, i32, i32, i32), i32>(&*caller)?;
    let len = i32::try_from(b.len()).map_err(|_| anyhow!("{} bytes is too long", b.len()))?;
    let ptr = realloc.call_async(&mut *caller, (0, 0, 1, len)).await?;
    write_bytes(caller, ptr, b)?;
    Ok((ptr, len))
}

/// Registers the `andes:job` imports.
pub fn add_to_linker<T: ImportState>(linker: &mut Linker<T>) -> Result<()> {
    linker.func_wrap(CONTROL, "vacate-requested", |caller: Caller<'_, T>| -> i32 {
        caller.data().control().vacate_requested() as i32
    })?;
    linker.func_wrap(CONTROL, "deadline", |mut caller: Caller<'_, T>, ret: i32| -> Result<()> {
        let mut area = [0u8; 16];
        if let Some((_, unix)) = caller.data().control().vacate_deadline() {
            area[0] = 1;
            area[8..16].copy_from_slice(&unix.to_le_bytes());
        }
        write_bytes(&mut caller, ret, &area)
    })?;
    linker.func_wrap_async(
        ATTRIBUTES,
        "get",
        |mut caller: Caller<'_, T>, (ptr, len, ret): (i32, i32, i32)| {
            Box::new(async move {
                let name = read_string(&mut caller, ptr, len)?;
                let text = {
                    let io = caller.data().io().clone();
                    let ad = io.ad.lock().unwrap_or_else(|e| e.into_inner());
                    ad.get(&name).map(|e| e.to_string())
                };
                write_opt_string(&mut caller, ret, text.as_deref()).await
            })
        },
    )?;
    linker.func_wrap_async(
        ATTRIBUTES,
        "set",
        |mut caller: Caller<'_, T>, (np, nl, vp, vl, ret): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let name = read_string(&mut caller, np, nl)?;
                let value = read_string(&mut caller, vp, vl)?;
                let outcome = set_attr(caller.data().io(), &name, &value);
                write_opt_string(&mut caller, ret, outcome.err().as_deref()).await
            })
        },
    )?;
    linker.func_wrap(
        LOG,
        "write",
        |mut caller: Caller<'_, T>, level: i32, ptr: i32, len: i32| -> Result<()> {
            let level = match level {
                0 => Level::Debug,
                1 => Level::Info,
                2 => Level::Warn,
                3 => Level::Error,
                n => bail!("log level {n} is not one of the WIT's levels"),
            };
            // Longer lines are cut, and invalid UTF-8 replaced; the cut falls
            // on a character boundary, since replacement can grow the text.
            let len = len.clamp(0, MAX_LOG_LINE as i32);
            let bytes = read_bytes(&mut caller, ptr, len, MAX_LOG_LINE)?;
            let mut msg = String::from_utf8_lossy(&bytes).into_owned();
            let mut cut = msg.len().min(MAX_LOG_LINE);
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
            let io = caller.data().io().clone();
            let mut log = io.log.lock().unwrap_or_else(|e| e.into_inner());
            if log.len() < MAX_LOG_LINES {
                log.push((level, msg));
            } else {
                io.log_dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(())
        },
    )?;
    linker.func_wrap(CHECKPOINT, "checkpoint-requested", |caller: Caller<'_, T>| -> i32 {
        caller.data().control().checkpoint_requested() as i32
    })?;
    linker.func_wrap_async(
        CHECKPOINT,
        "save",
        |mut caller: Caller<'_, T>, (ptr, len, ret): (i32, i32, i32)| {
            Box::new(async move {
                let n = len as u32 as usize;
                let outcome = if n > MAX_SAVED_STATE {
                    Err(format!(
                        "a saved state of {n} bytes is larger than the {MAX_SAVED_STATE} allowed"
                    ))
                } else {
                    let state = read_bytes(&mut caller, ptr, len, MAX_SAVED_STATE)?;
                    caller.data().control().record_save(state.into());
                    Ok(())
                };
                write_opt_string(&mut caller, ret, outcome.err().as_deref()).await
            })
        },
    )?;
    linker.func_wrap_async(CHECKPOINT, "load", |mut caller: Caller<'_, T>, (ret,): (i32,)| {
        Box::new(async move {
            let state = match caller.data().control().saved() {
                (_, Some(s)) => Some(s),
                _ => caller.data().io().loaded.clone(),
            };
            let mut area = [0u8; 12];
            if let Some(s) = state {
                let (p, l) = alloc_bytes(&mut caller, &s).await?;
                area[0] = 1;
                area[4..8].copy_from_slice(&p.to_le_bytes());
                area[8..12].copy_from_slice(&l.to_le_bytes());
            }
            write_bytes(&mut caller, ret, &area)
        })
    })?;
    Ok(())
}

/// Applies a guest's `set`: only whitelisted names, only valid expressions.
pub fn set_attr(io: &JobIo, name: &str, value: &str) -> Result<(), String> {
    if !may_set(name) {
        return Err(format!(
            "attribute {name} may not be set by the job (allowed: Progress and names beginning \
             with Chirp)"
        ));
    }
    let e = classad::parse_expr(value)
        .map_err(|e| format!("value of {name} is not a ClassAd expression: {e}"))?;
    let mut set = io.set.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = name.len() + value.len();
    let before = set.get(&name.to_ascii_lowercase()).copied();
    if before.is_none() && set.len() >= MAX_SET_ATTRS {
        return Err(format!(
            "the job has set {MAX_SET_ATTRS} attributes already, the most allowed; {name} is not set"
        ));
    }
    let total = set.values().sum::<usize>() - before.unwrap_or(0) + bytes;
    if total > MAX_SET_BYTES {
        return Err(format!(
            "the attributes the job set would hold {total} bytes, more than the {MAX_SET_BYTES} \
             allowed; {name} is not set"
        ));
    }
    set.insert(name.to_ascii_lowercase(), bytes);
    drop(set);
    io.ad.lock().unwrap_or_else(|e| e.into_inner()).insert(name, e.clone());
    let mut updates = io.updates.lock().unwrap_or_else(|e| e.into_inner());
    // Only the latest value of each name is waiting to be sent.
    updates.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    updates.push((name.to_string(), e));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_while_running_are_bounded_and_a_large_one_waits_for_the_end() {
        let io = JobIo::default();
        let big = "x".repeat(MAX_LIVE_BYTES);
        let set = |name: &str, text: &str| {
            io.updates
                .lock()
                .unwrap()
                .push((name.to_string(), Expr::Lit(classad::Value::string(text))));
        };
        set("Progress", "10%");
        set("ChirpBig", &big);
        set("ChirpSmall", "ok");
        let live: Vec<String> = io.pending_updates().into_iter().map(|(n, _)| n).collect();
        assert_eq!(live, ["Progress", "ChirpSmall"]);
        // All of them go with the end.
        assert_eq!(io.take_updates().len(), 3);
    }
}
