//! Which locals of a function are live (may be read before they are next
//! written) at given instructions: a backward dataflow over the structured
//! code, iterated over loops' back edges to a fixed point.
//!
//! The unwinding transform saves in a frame only the locals live where a
//! rewind resumes: a local that is dead there is never read again before it
//! is written, so its value need not survive, and the epilogue that reads
//! every saved local no longer keeps dead values alive across every call
//! that can yield (which cost registers and spills on the normal path).
//!
//! The analysis is exact for the structured control flow of core wasm
//! (blocks, loops, `if`, `br`, `br_if`, `br_table`, `return`,
//! `unreachable`) and answers nothing (the caller then saves every local)
//! for anything else, and for functions whose analysis would need more
//! memory or passes than [`MAX_WORDS`] and [`MAX_PASSES`] allow.

use std::collections::HashMap;

use wasmparser::{FunctionBody, Operator};

/// The most 64-bit words of live sets kept for one function.
const MAX_WORDS: usize = 1 << 22;
/// The most backward passes over one function (a loop nesting this deep
/// is not analysed).
const MAX_PASSES: usize = 64;

/// A function's operators, reduced to what liveness needs.
enum Op {
    Get(u32),
    Set(u32),
    Block,
    Loop,
    If,
    Else,
    End,
    Br(u32),
    BrIf(u32),
    BrTable(Vec<u32>),
    /// `return`, `unreachable` and tail calls: nothing flows on.
    Exit,
    Other,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Block,
    Loop,
    If,
    Body,
}

/// A structure seen from inside, walking backwards.
struct Frame {
    kind: Kind,
    start: usize,
    end: usize,
}

/// The union of the live sets, over every instruction of `at`, of the
/// function's locals (`locals` of them, parameters first): `Some(bits)`,
/// one bit per local, or `None` when the function is not analysed.
/// `at` holds operator indices (the count of operators before it).
pub(crate) fn live_at(body: &FunctionBody<'_>, locals: usize, at: &[usize]) -> Option<Vec<u64>> {
    let ops = reduce(body)?;
    let n = ops.len();
    let words = locals.div_ceil(64).max(1);
    // Each structure's matching `end`, and each `if`'s `else`.
    let mut end_of = vec![usize::MAX; n];
    let mut else_of: HashMap<usize, usize> = HashMap::new();
    let mut open = Vec::new();
    let mut structures = 0usize;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Block | Op::Loop | Op::If => {
                open.push(i);
                structures += 1;
            }
            Op::Else => {
                else_of.insert(*open.last()?, i);
            }
            Op::End => {
                if let Some(s) = open.pop() {
                    end_of[s] = i;
                    end_of[i] = s;
                }
            }
            _ => {}
        }
    }
    if !open.is_empty() || (structures + at.len() + 2).saturating_mul(words) > MAX_WORDS {
        return None;
    }
    let wanted: std::collections::HashSet<usize> = at.iter().copied().collect();
    // Live on entry to each loop (its back edges' target), grown pass by
    // pass; live at each `end` and after each `else` in the current pass.
    let mut loop_in: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut end_in: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut after_else: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut answer = vec![0u64; words];
    for _ in 0..MAX_PASSES {
        let mut changed = false;
        answer.iter_mut().for_each(|w| *w = 0);
        let mut cur = vec![0u64; words];
        let mut stack: Vec<Frame> = Vec::new();
        for i in (0..n).rev() {
            let target = |stack: &[Frame], depth: u32| -> Option<Option<&Vec<u64>>> {
                let f = stack.get(stack.len().checked_sub(1 + depth as usize)?)?;
                Some(match f.kind {
                    Kind::Loop => loop_in.get(&f.start),
                    Kind::Block | Kind::If => end_in.get(&f.end),
                    Kind::Body => None,
                })
            };
            match &ops[i] {
                Op::Get(l) => set(&mut cur, *l)?,
                Op::Set(l) => clear(&mut cur, *l)?,
                Op::End => {
                    let start = end_of[i];
                    if start == usize::MAX {
                        // The body's end: nothing is live after a return.
                        cur.iter_mut().for_each(|w| *w = 0);
                        stack.push(Frame { kind: Kind::Body, start: 0, end: i });
                    } else {
                        let kind = match ops[start] {
                            Op::Loop => Kind::Loop,
                            Op::If => Kind::If,
                            _ => Kind::Block,
                        };
                        end_in.insert(i, cur.clone());
                        stack.push(Frame { kind, start, end: i });
                    }
                }
                Op::Else => {
                    after_else.insert(i, cur.clone());
                    let f = stack.last()?;
                    cur.clone_from(end_in.get(&f.end)?);
                }
                Op::If => {
                    let f = stack.pop()?;
                    let other = match else_of.get(&i) {
                        Some(e) => after_else.get(e)?,
                        None => end_in.get(&f.end)?,
                    };
                    union(&mut cur, other);
                }
                Op::Loop => {
                    let f = stack.pop()?;
                    let old = loop_in.entry(f.start).or_insert_with(|| vec![0; words]);
                    if *old != cur {
                        changed = true;
                        old.clone_from(&cur);
                    }
                }
                Op::Block => {
                    stack.pop()?;
                }
                Op::Br(d) => {
                    let t = target(&stack, *d)?;
                    replace(&mut cur, t);
                }
                Op::BrIf(d) => {
                    if let Some(t) = target(&stack, *d)? {
                        union(&mut cur, t);
                    }
                }
                Op::BrTable(ds) => {
                    cur.iter_mut().for_each(|w| *w = 0);
                    for d in ds {
                        if let Some(t) = target(&stack, *d)? {
                            union(&mut cur, t);
                        }
                    }
                }
                Op::Exit => cur.iter_mut().for_each(|w| *w = 0),
                Op::Other => {}
            }
            if wanted.contains(&i) {
                union(&mut answer, &cur);
            }
        }
        if !changed {
            return Some(answer);
        }
    }
    None
}

fn set(bits: &mut [u64], l: u32) -> Option<()> {
    *bits.get_mut(l as usize / 64)? |= 1 << (l % 64);
    Some(())
}

fn clear(bits: &mut [u64], l: u32) -> Option<()> {
    *bits.get_mut(l as usize / 64)? &= !(1 << (l % 64));
    Some(())
}

fn union(to: &mut [u64], from: &[u64]) {
    to.iter_mut().zip(from).for_each(|(a, b)| *a |= b);
}

fn replace(to: &mut [u64], from: Option<&Vec<u64>>) {
    match from {
        Some(f) => to.copy_from_slice(f),
        None => to.iter_mut().for_each(|w| *w = 0),
    }
}

/// Whether local `l` is set in `bits`.
pub(crate) fn has(bits: &[u64], l: u32) -> bool {
    bits.get(l as usize / 64).is_some_and(|w| w & (1 << (l % 64)) != 0)
}

fn reduce(body: &FunctionBody<'_>) -> Option<Vec<Op>> {
    let mut reader = body.get_operators_reader().ok()?;
    let mut ops = Vec::new();
    while !reader.eof() {
        ops.push(match reader.read().ok()? {
            Operator::LocalGet { local_index } => Op::Get(local_index),
            Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                Op::Set(local_index)
            }
            Operator::Block { .. } => Op::Block,
            Operator::Loop { .. } => Op::Loop,
            Operator::If { .. } => Op::If,
            Operator::Else => Op::Else,
            Operator::End => Op::End,
            Operator::Br { relative_depth } => Op::Br(relative_depth),
            Operator::BrIf { relative_depth } => Op::BrIf(relative_depth),
            Operator::BrTable { targets } => {
                let mut ds = targets.targets().collect::<Result<Vec<u32>, _>>().ok()?;
                ds.push(targets.default());
                Op::BrTable(ds)
            }
            Operator::Return
            | Operator::Unreachable
            | Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. } => Op::Exit,
            // Control flow this analysis does not follow (exceptions,
            // branches on references): not analysed.
            Operator::Try { .. }
            | Operator::TryTable { .. }
            | Operator::Catch { .. }
            | Operator::CatchAll
            | Operator::Delegate { .. }
            | Operator::Throw { .. }
            | Operator::ThrowRef
            | Operator::Rethrow { .. }
            | Operator::BrOnNull { .. }
            | Operator::BrOnNonNull { .. }
            | Operator::BrOnCast { .. }
            | Operator::BrOnCastFail { .. } => return None,
            _ => Op::Other,
        });
    }
    Some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmparser::{Parser, Payload};

    /// Locals that reach a later read only by a loop's back edge, a
    /// `br_table` case or a `br_if` out of a block; one written after the
    /// call before any read; one read only before it.
    const FLOWS: &str = r#"(module
        (import "env" "work" (func $work (param i32) (result i32)))
        (func $flows (param $n i32) (result i32)
            (local $k i32) (local $a i32) (local $b i32) (local $c i32) (local $r i32)
            (local $dead i64)
            (block $done
                (loop $l
                    (local.set $r (i32.add (local.get $r) (local.get $a)))
                    (local.set $dead (i64.const 77))
                    (local.set $a (i32.add (local.get $k) (i32.trunc_f32_s
                        (f32.convert_i64_s (local.get $dead)))))
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
            (local.get $r)))"#;

    fn function(text: &str) -> (Vec<u8>, std::ops::Range<usize>) {
        let module = wat::parse_str(text).unwrap();
        for p in Parser::new(0).parse_all(&module) {
            if let Payload::CodeSectionEntry(body) = p.unwrap() {
                return (module.clone(), body.range());
            }
        }
        panic!("no function");
    }

    fn live(text: &str, at: impl Fn(&[Operator<'_>]) -> usize) -> Vec<u32> {
        let (module, range) = function(text);
        let body = FunctionBody::new(wasmparser::BinaryReader::new(&module[range], 0));
        let mut ops = Vec::new();
        let mut reader = body.get_operators_reader().unwrap();
        while !reader.eof() {
            ops.push(reader.read().unwrap());
        }
        let bits = live_at(&body, 7, &[at(&ops)]).expect("analysed");
        (0..7).filter(|l| has(&bits, *l)).collect()
    }

    fn call(ops: &[Operator<'_>]) -> usize {
        ops.iter().position(|op| matches!(op, Operator::Call { .. })).unwrap()
    }

    #[test]
    fn live_across_a_call_by_back_edges_tables_and_branches_out() {
        // n, k, a (back edge), b (a table's case), c (the other case); not
        // r (read before the call, written after) nor dead.
        assert_eq!(live(FLOWS, call), vec![0, 1, 2, 3, 4]);
        // At the loop's head: a is read there, b and c are written before
        // any read, r is read.
        let head = |ops: &[Operator<'_>]| {
            ops.iter().position(|op| matches!(op, Operator::Loop { .. })).unwrap()
        };
        assert_eq!(live(FLOWS, head), vec![0, 1, 2, 5]);
    }

    #[test]
    fn a_function_too_large_to_analyse_is_not_analysed() {
        let text = r#"(module (func (param i32) (local i64)
            (block (br_table 0 0 0 (local.get 0)))
            (block (result i32) (i32.const 1) (br 0))
            drop))"#;
        let (module, range) = function(text);
        let body = FunctionBody::new(wasmparser::BinaryReader::new(&module[range], 0));
        assert!(live_at(&body, 2, &[0]).is_some());
        // Far more structures than words allow.
        let deep =
            format!("(module (func (param i32) {} {}))", "(block ".repeat(1000), ")".repeat(1000));
        let (module, range) = function(&deep);
        let body = FunctionBody::new(wasmparser::BinaryReader::new(&module[range], 0));
        assert!(live_at(&body, 1 << 20, &[0]).is_none());
    }
}
