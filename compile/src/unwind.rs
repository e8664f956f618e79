//! andes's own unwind/rewind transform, in place of Binaryen's Asyncify.
//!
//! It keeps Asyncify's contract with the host (the five `asyncify_*`
//! exports, the data structure `[current, end]` in the stack memory, the
//! states), but not its code shape. Asyncify guards every stretch of code
//! between two call sites with a "not rewinding" test, so that a rewind can
//! skip to the call it left from; those tests run on the normal path too,
//! hundreds of them in an interpreter's dispatch function. Here the normal
//! path keeps its shape, and a rewind *branches* to where it left:
//!
//! - A **site** is a call, in a function that can reach a yield, to a
//!   function that can reach one (directly, or indirectly through a table
//!   entry of the called type), the yield import included. After a site, a
//!   test of the state: if an unwind has begun, the function records the
//!   site's number and branches to its epilogue, which stores every local
//!   (and the number) as one fixed-size frame in the stack memory and
//!   returns.
//! - A site's operands are kept in locals (the values under its arguments
//!   too, and the values under a structured block that contains a site), so
//!   that at every site the function's whole state is its locals.
//! - On entry while rewinding, a function pops its frame back into its
//!   locals (inside the body's own dispatch when the body level dispatches
//!   first, so that entry tests the state once, not twice); then at each
//!   level of nesting that contains sites, one test
//!   ("rewinding?") and a `br_table` on the site number branch forward to
//!   the block, loop, `if` or call that holds the site: the code before it
//!   in its level is wrapped in blocks that end just before each such
//!   child. An `if` that holds a site takes its branch from the site number
//!   while rewinding. The test of a level that begins with a block or loop
//!   holding a site moves into it, so the nested blocks of a `switch` cost
//!   one test, not one per case.
//!
//! - An outermost loop that holds at least [`Options::fast_copy_sites`]
//!   sites is emitted twice: a rewind copy as above, entered only while
//!   rewinding, whose back edges branch to a fast copy with no dispatch
//!   and no chain blocks (see `Emit::op`).
//!
//! Frames are popped last-in first-out (the outermost function, unwound
//! last, is rewound first), as Asyncify's are.

use std::collections::{HashMap, HashSet};

use wasm_encoder::reencode::{Error, Reencode, utils};
use wasm_encoder::{
    BlockType, CodeSection, ExportKind, ExportSection, FunctionSection, GlobalSection, GlobalType,
    Instruction, MemArg, MemorySection, MemoryType, Module, TypeSection, ValType,
};
use wasmparser::{FuncValidatorAllocations, Operator, Parser, ValidPayload};

use crate::{
    CompileError, GET_STATE, Options, STACK_MEMORY, START_REWIND, START_UNWIND, STATE_REWINDING,
    STOP_REWIND, STOP_UNWIND,
};

use crate::graph::{ModuleFacts, PType, can_yield, facts, yielding_types};

fn invalid(e: impl std::fmt::Display) -> CompileError {
    CompileError::Invalid(e.to_string())
}

fn unsupported(why: String) -> CompileError {
    CompileError::Unsupported {
        feature: "a block with parameters around a call that can checkpoint".into(),
        why,
    }
}

/// One site of a function.
#[derive(Clone, Debug)]
struct SitePlan {
    number: u32,
    args: Vec<PType>,
    extras: Vec<PType>,
    results: Vec<PType>,
    chain: bool,
    /// Where a rewind lands when the arguments are pushed by instructions
    /// that can run again with the same result (`local.get` and constants:
    /// the frame's locals are restored as they were at the call): before
    /// them, so that they need not be kept in locals. `None`: after the
    /// arguments, kept in locals.
    landing: Option<usize>,
}

/// A structured instruction that holds sites.
#[derive(Clone, Debug)]
struct StructPlan {
    extras: Vec<PType>,
    results: Vec<PType>,
    chain: bool,
    /// For an `if`: the sites of its `then` branch.
    then: (u32, u32),
    /// A poll check (`if` on the poll word) first in its level: a rewind
    /// finds the word raised and enters it, and the level's dispatch is
    /// inside it, so that the normal path tests nothing but the word.
    poll: bool,
}

#[derive(Clone, Debug)]
enum OpPlan {
    Site(SitePlan),
    Struct(StructPlan),
}

/// A child of a level: a site, or a structure holding sites.
#[derive(Clone, Debug)]
struct Child {
    lo: u32,
    hi: u32,
    chain: bool,
    /// A block or loop at the start of its level: the level's dispatch
    /// moves into it.
    defer: bool,
}

#[derive(Clone, Debug, Default)]
struct Level {
    lo: u32,
    children: Vec<Child>,
}

#[derive(Default)]
struct FuncPlan {
    ops: HashMap<usize, OpPlan>,
    /// By the index of the op that opens the level (`usize::MAX`: the body).
    levels: HashMap<usize, Level>,
    /// The landing ops of sites whose arguments run again: the site's op.
    landings: HashMap<usize, usize>,
}

const BODY: usize = usize::MAX;

fn block_sig(facts: &ModuleFacts, bt: wasmparser::BlockType) -> (Vec<PType>, Vec<PType>) {
    match bt {
        wasmparser::BlockType::Empty => (vec![], vec![]),
        wasmparser::BlockType::Type(t) => (vec![], vec![t]),
        wasmparser::BlockType::FuncType(i) => {
            facts.types.get(i as usize).cloned().unwrap_or_default()
        }
    }
}

/// A frame of the first pass.
struct PlanFrame {
    level: usize,
    live: bool,
    start: usize,
    lo: u32,
    level_lo: u32,
    children: Vec<Child>,
    /// Decided when the structure opened.
    extras: Vec<PType>,
    params: usize,
    results: Vec<PType>,
    chain: bool,
    defer: bool,
    is_if: bool,
    then: (u32, u32),
    poll: bool,
    /// Instructions so far in the current level.
    count: usize,
}

impl PlanFrame {
    fn new(level: usize, live: bool, start: usize, lo: u32) -> PlanFrame {
        PlanFrame {
            level,
            live,
            start,
            lo,
            level_lo: lo,
            children: vec![],
            extras: vec![],
            params: 0,
            results: vec![],
            chain: false,
            defer: false,
            is_if: false,
            then: (lo, lo),
            poll: false,
            count: 0,
        }
    }
}

fn operand_types(
    v: &wasmparser::FuncValidator<wasmparser::ValidatorResources>,
    from: usize,
    n: usize,
) -> Option<Vec<PType>> {
    // Depth 0 is the top; return bottom-to-top order of depths from..from+n.
    let mut out = Vec::with_capacity(n);
    for d in (from..from + n).rev() {
        out.push(v.get_operand_type(d)??);
    }
    Some(out)
}

/// The first pass over one function: its sites, levels and children.
fn plan(
    facts: &ModuleFacts,
    yielding: &HashSet<u32>,
    fv: &mut wasmparser::FuncValidator<wasmparser::ValidatorResources>,
    body: &wasmparser::FunctionBody<'_>,
    func: u32,
) -> Result<FuncPlan, CompileError> {
    let mut plan = FuncPlan::default();
    fv.read_locals(&mut body.get_binary_reader()).map_err(invalid)?;
    let mut reader = body.get_operators_reader().map_err(invalid)?;
    let yielding_types = yielding_types(facts, yielding);
    let mut frames = vec![PlanFrame::new(BODY, true, 0, 0)];
    let mut next_site = 0u32;
    let mut i = 0usize;
    // Whether the previous instruction loaded the poll word.
    let mut polls = false;
    // How many instructions before this one push a value that running them
    // again pushes again (in this level).
    let mut pure_run = 0usize;
    while !reader.eof() {
        let offset = reader.original_position();
        let op = reader.read().map_err(invalid)?;
        let top = frames.len() - 1;
        let reachable = !fv.get_control_frame(0).is_some_and(|f| f.unreachable);
        let live = frames[top].live && reachable;
        let height = fv.operand_stack_height() as usize;
        let base = fv.get_control_frame(0).map_or(0, |f| f.height);
        // A call that is a site: its callee's type.
        let site_type = match op {
            Operator::Call { function_index } if yielding.contains(&function_index) => {
                facts.func_type.get(function_index as usize).copied().map(|t| (t, false))
            }
            Operator::CallIndirect { type_index, .. }
                if facts
                    .types
                    .get(type_index as usize)
                    .is_some_and(|t| yielding_types.contains(t)) =>
            {
                Some((type_index, true))
            }
            Operator::ReturnCall { function_index } if yielding.contains(&function_index) => {
                return Err(CompileError::Unsupported {
                    feature: "tail calls (return_call)".into(),
                    why: format!("function {func} tail-calls a function that can checkpoint"),
                });
            }
            Operator::ReturnCallIndirect { .. } => {
                return Err(CompileError::Unsupported {
                    feature: "tail calls (return_call_indirect)".into(),
                    why: format!("in function {func}"),
                });
            }
            _ => None,
        };
        match &op {
            Operator::Block { blockty } | Operator::Loop { blockty } | Operator::If { blockty } => {
                let is_if = matches!(op, Operator::If { .. });
                let (params, results) = block_sig(facts, *blockty);
                let cond = usize::from(is_if);
                let mut f = PlanFrame::new(i, live, i, next_site);
                if live {
                    let n = height.saturating_sub(cond + params.len() + base);
                    f.extras = operand_types(fv, cond + params.len(), n).ok_or_else(|| {
                        invalid(format!("function {func}: unknown operand types at op {i}"))
                    })?;
                }
                let parent = &frames[top];
                f.params = params.len();
                f.results = results;
                f.is_if = is_if;
                f.poll = is_if && polls && f.extras.is_empty() && parent.children.is_empty();
                f.chain = !(f.poll || parent.count == 0 && f.extras.is_empty() && !is_if);
                f.defer = f.poll
                    || !f.chain && matches!(op, Operator::Block { .. } | Operator::Loop { .. });
                frames.push(f);
            }
            Operator::Else => {
                let f = &mut frames[top];
                let level = Level { lo: f.level_lo, children: std::mem::take(&mut f.children) };
                if !level.children.is_empty() {
                    plan.levels.insert(f.level, level);
                }
                f.then = (f.lo, next_site);
                f.level = i;
                f.level_lo = next_site;
            }
            Operator::End => {
                let f = frames.pop().expect("a frame per end");
                let level = Level { lo: f.level_lo, children: f.children };
                if !level.children.is_empty() {
                    plan.levels.insert(f.level, level);
                }
                if f.level != BODY && next_site > f.lo {
                    if f.params > 0 {
                        return Err(unsupported(format!(
                            "function {func}, the structure at instruction {}",
                            f.start
                        )));
                    }
                    let then =
                        if f.is_if && f.level == f.start { (f.lo, next_site) } else { f.then };
                    plan.ops.insert(
                        f.start,
                        OpPlan::Struct(StructPlan {
                            extras: f.extras,
                            results: f.results,
                            chain: f.chain,
                            then,
                            poll: f.poll,
                        }),
                    );
                    if let Some(parent) = frames.last_mut() {
                        parent.children.push(Child {
                            lo: f.lo,
                            hi: next_site,
                            chain: f.chain,
                            defer: f.defer,
                        });
                    }
                }
            }
            _ => {}
        }
        if let (Some((t, indirect)), true) = (site_type, live) {
            let (params, results) = facts.types.get(t as usize).cloned().unwrap_or_default();
            let nargs = params.len() + usize::from(indirect);
            let args = operand_types(fv, 0, nargs)
                .ok_or_else(|| invalid(format!("function {func}: unknown call operands")))?;
            let n = height.saturating_sub(nargs + base);
            let extras = operand_types(fv, nargs, n)
                .ok_or_else(|| invalid(format!("function {func}: unknown operand types")))?;
            let f = &mut frames[top];
            let (chain, landing) = if pure_run >= nargs && nargs > 0 {
                (!(f.count == nargs && extras.is_empty()), Some(i - nargs))
            } else {
                (!(f.count == 0 && args.is_empty() && extras.is_empty()), None)
            };
            let number = next_site;
            next_site += 1;
            f.children.push(Child { lo: number, hi: next_site, chain, defer: false });
            if let Some(at) = landing {
                plan.landings.insert(at, i);
            }
            plan.ops.insert(
                i,
                OpPlan::Site(SitePlan { number, args, extras, results, chain, landing }),
            );
        }
        pure_run = match op {
            Operator::LocalGet { .. }
            | Operator::I32Const { .. }
            | Operator::I64Const { .. }
            | Operator::F32Const { .. }
            | Operator::F64Const { .. }
            | Operator::V128Const { .. } => pure_run + 1,
            _ => 0,
        };
        match op {
            Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => {
                // The structure counts in its parent; its body starts anew.
                if let Some(parent) = frames.len().checked_sub(2).map(|p| &mut frames[p]) {
                    parent.count += 1;
                }
            }
            Operator::Else => frames[top].count = 0,
            Operator::End => {}
            _ => frames[top].count += 1,
        }
        polls = matches!(op, Operator::I32Load { memarg } if memarg.memory == crate::POLL_MEMORY);
        fv.op(offset, &op).map_err(invalid)?;
        i += 1;
    }
    Ok(plan)
}

fn vt(t: PType) -> ValType {
    match t {
        PType::I32 => ValType::I32,
        PType::I64 => ValType::I64,
        PType::F32 => ValType::F32,
        PType::F64 => ValType::F64,
        PType::V128 => ValType::V128,
        // Refused by the scan.
        PType::Ref(_) => ValType::I32,
    }
}

fn size_of(t: ValType) -> u64 {
    match t {
        ValType::I32 | ValType::F32 => 4,
        ValType::I64 | ValType::F64 => 8,
        _ => 16,
    }
}

fn stack_arg(offset: u64, t: ValType) -> MemArg {
    let align = match size_of(t) {
        4 => 2,
        8 => 3,
        _ => 4,
    };
    MemArg { offset, align, memory_index: STACK_MEMORY }
}

fn load(t: ValType, m: MemArg) -> Instruction<'static> {
    match t {
        ValType::I32 => Instruction::I32Load(m),
        ValType::I64 => Instruction::I64Load(m),
        ValType::F32 => Instruction::F32Load(m),
        ValType::F64 => Instruction::F64Load(m),
        _ => Instruction::V128Load(m),
    }
}

fn store(t: ValType, m: MemArg) -> Instruction<'static> {
    match t {
        ValType::I32 => Instruction::I32Store(m),
        ValType::I64 => Instruction::I64Store(m),
        ValType::F32 => Instruction::F32Store(m),
        ValType::F64 => Instruction::F64Store(m),
        _ => Instruction::V128Store(m),
    }
}

fn zero(t: ValType) -> Instruction<'static> {
    match t {
        ValType::I32 => Instruction::I32Const(0),
        ValType::I64 => Instruction::I64Const(0),
        ValType::F32 => Instruction::F32Const(0.0.into()),
        ValType::F64 => Instruction::F64Const(0.0.into()),
        _ => Instruction::V128Const(0),
    }
}

/// A label of the rewritten code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Label {
    /// An original structure (the body: the function's own label).
    Orig,
    /// A block that ends just before child `child` of level `level`.
    Chain { level: usize, child: usize },
    /// Anything else the rewrite adds.
    Other,
}

/// Where a rewind of a site goes from a dispatch.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// On: the site is ahead in the code that follows the dispatch.
    Through,
    /// To the end of a chain block.
    Chain { level: usize, child: usize },
}

/// An original structure, as the second pass sees it.
struct OrigFrame {
    /// Its label's index in [`Emit::ctl`].
    ctl: usize,
    /// The values spilled before it, to put back (under its results) at
    /// its end.
    spilled: Vec<(u32, ValType)>,
    results: Vec<ValType>,
    /// A loop.
    is_loop: bool,
    /// The rewind copy of a loop that has a fast copy: its back edges
    /// branch to this label of [`Emit::ctl`] (the fast copy's entry), and
    /// the copy began at this operator.
    copy_of: Option<(usize, usize)>,
}

impl OrigFrame {
    fn new(ctl: usize, spilled: Vec<(u32, ValType)>, results: Vec<ValType>, is_loop: bool) -> Self {
        OrigFrame { ctl, spilled, results, is_loop, copy_of: None }
    }
}

/// The most loops of one function that get a fast copy (each costs a pass
/// over the function's operators).
const FAST_COPIES: usize = 16;

/// How the temporaries of a loop's rewind copy are allocated, so that its
/// fast copy keeps each site's operands in the same locals (a frame saved
/// in one is restored in the other).
enum TempLog {
    Off,
    Record(Vec<u32>),
    Replay(std::collections::VecDeque<u32>),
}

/// The second pass's state for one function.
struct Emit<'a> {
    plan: &'a FuncPlan,
    out: Vec<u8>,
    ctl: Vec<Label>,
    /// Each original frame: its index in `ctl` and the spilled values to
    /// put back at its end (temps, in order).
    orig: Vec<OrigFrame>,
    /// Dispatch targets not yet emitted: `(lo, targets)`.
    pending: Option<(u32, Vec<Target>)>,
    /// Next child of each open level, by level id.
    next_child: HashMap<usize, usize>,
    /// Free temporaries by type, and every local's type.
    free: HashMap<ValType, Vec<u32>>,
    locals: Vec<ValType>,
    state: u32,
    /// The values spilled at the landing of the site whose arguments run
    /// again (they are put back after its call).
    landed: Option<Vec<(u32, ValType)>>,
    /// The function's copy of the state.
    st: u32,
    site: u32,
    cond: u32,
    /// While the body's level opens: its dispatch, if emitted there, is
    /// the first test of the state, and the rewind prologue goes into it.
    merge: bool,
    /// Where the prologue's frame restore goes, inside the body's dispatch.
    merged_at: Option<usize>,
    /// Emitting a fast copy: no dispatch, no chain blocks.
    fast: bool,
    temp_log: TempLog,
    /// A fast copy asked for a temporary its rewind copy did not.
    replay_miss: bool,
    /// Loops given a fast copy so far.
    copies: usize,
    /// [`Options::fast_copy_sites`].
    fast_copy_sites: u32,
}

impl Emit<'_> {
    fn i(&mut self, ins: Instruction<'_>) {
        use wasm_encoder::Encode;
        ins.encode(&mut self.out);
    }

    fn temp(&mut self, t: ValType) -> u32 {
        if let TempLog::Replay(log) = &mut self.temp_log {
            match log.pop_front() {
                Some(l) if self.locals[l as usize] == t => return l,
                _ => self.replay_miss = true,
            }
        }
        let l = match self.free.get_mut(&t).and_then(Vec::pop) {
            Some(l) => l,
            None => {
                self.locals.push(t);
                (self.locals.len() - 1) as u32
            }
        };
        if let TempLog::Record(log) = &mut self.temp_log {
            log.push(l);
        }
        l
    }

    fn release(&mut self, l: u32, t: ValType) {
        self.free.entry(t).or_default().push(l);
    }

    fn depth_of(&self, idx: usize) -> u32 {
        (self.ctl.len() - 1 - idx) as u32
    }

    /// The new relative depth of an original branch's `depth`.
    fn remap(&self, depth: u32) -> Result<u32, CompileError> {
        let n = self.orig.len();
        let frame = n
            .checked_sub(1 + depth as usize)
            .ok_or_else(|| invalid(format!("branch depth {depth} out of range")))?;
        let f = &self.orig[frame];
        Ok(self.depth_of(f.copy_of.map_or(f.ctl, |(to_fast, _)| to_fast)))
    }

    /// `state == REWINDING`, from the function's copy of the state: taken
    /// on entry and after every site (only a site can change the state).
    fn state_is_rewinding(&mut self) {
        self.i(Instruction::LocalGet(self.st));
        self.i(Instruction::I32Const(STATE_REWINDING));
        self.i(Instruction::I32Eq);
    }

    /// Opens a level: its chain blocks, and its dispatch (or defers it
    /// into its first child).
    fn open_level(&mut self, level_id: usize) {
        let Some(level) = self.plan.levels.get(&level_id) else {
            return;
        };
        self.next_child.insert(level_id, 0);
        let mut targets = Vec::new();
        for (c, child) in level.children.iter().enumerate() {
            let t = if child.chain {
                Target::Chain { level: level_id, child: c }
            } else {
                Target::Through
            };
            targets.extend(std::iter::repeat_n(t, (child.hi - child.lo) as usize));
        }
        for (c, child) in level.children.iter().enumerate().rev() {
            if child.chain {
                self.i(Instruction::Block(BlockType::Empty));
                self.ctl.push(Label::Chain { level: level_id, child: c });
            }
        }
        match &mut self.pending {
            Some((lo, all)) => {
                let at = (level.lo - *lo) as usize;
                all[at..at + targets.len()].copy_from_slice(&targets);
            }
            None => self.pending = Some((level.lo, targets)),
        }
        if level.children.first().is_some_and(|c| c.defer) {
            return;
        }
        self.dispatch();
    }

    /// Emits the pending dispatch: while rewinding, branch to the site's
    /// child.
    fn dispatch(&mut self) {
        let Some((lo, targets)) = self.pending.take() else {
            return;
        };
        if targets.iter().all(|t| matches!(t, Target::Through)) {
            return;
        }
        self.state_is_rewinding();
        self.i(Instruction::If(BlockType::Empty));
        if self.merge {
            self.merged_at = Some(self.out.len());
        }
        self.ctl.push(Label::Other);
        let through = self.ctl.len() - 1;
        self.i(Instruction::Block(BlockType::Empty));
        self.ctl.push(Label::Other);
        let bad = self.ctl.len() - 1;
        let table: Vec<u32> = targets
            .iter()
            .map(|t| match t {
                Target::Through => self.depth_of(through),
                Target::Chain { level, child } => {
                    let want = Label::Chain { level: *level, child: *child };
                    let idx = self.ctl.iter().rposition(|l| *l == want).expect("chain open");
                    self.depth_of(idx)
                }
            })
            .collect();
        self.i(Instruction::LocalGet(self.site));
        if lo != 0 {
            self.i(Instruction::I32Const(lo as i32));
            self.i(Instruction::I32Sub);
        }
        self.i(Instruction::BrTable(table.into(), self.depth_of(bad)));
        self.i(Instruction::End);
        self.ctl.pop();
        self.i(Instruction::Unreachable);
        self.i(Instruction::End);
        self.ctl.pop();
    }

    /// Emits original operator `i`, `op`. In a fast copy (`self.fast`) a
    /// structure opens no level (no chain blocks, no dispatch: nothing
    /// rewinds into it) but every site still leaves through the epilogue
    /// with its operands in the same locals as in the rewind copy.
    ///
    /// **Fast copies.** A rewind branches into the middle of code: the
    /// chain blocks it branches to are joins, and at every join inside a
    /// loop the register allocator must reconcile the values of the normal
    /// path with those of the rewind. In an interpreter's loop, with
    /// hundreds of sites, that cost more than the rest of the
    /// instrumentation together (SQLite's bytecode engine moved some fifty
    /// values between stack slots on each opcode). So an outermost loop
    /// that holds at least [`Options::fast_copy_sites`] sites is emitted twice: a
    /// *rewind copy*, entered only by a rewind (the state is tested once
    /// where the loop is entered), with today's dispatch, whose back edges
    /// go to a *fast copy* with none. A rewind thus finishes the iteration
    /// it resumes in the rewind copy, and the loop goes on in the fast one;
    /// an unwind from either saves the same frame.
    #[allow(clippy::too_many_lines)]
    fn op(
        &mut self,
        re: &mut Ident,
        body: &wasmparser::FunctionBody<'_>,
        i: usize,
        op: &Operator<'_>,
        levels: &mut Vec<usize>,
    ) -> Result<(), CompileError> {
        let plan = self.plan;
        let e = self;
        let fast = e.fast;
        let here = *levels.last().expect("a level");
        match (plan.ops.get(&i), op) {
            (
                Some(OpPlan::Struct(s)),
                Operator::Block { blockty } | Operator::Loop { blockty } | Operator::If { blockty },
            ) => {
                let is_if = matches!(op, Operator::If { .. }) && !s.poll;
                if is_if {
                    e.i(Instruction::LocalSet(e.cond));
                }
                let spilled = e.spill(&s.extras);
                if !fast {
                    e.land(here, s.chain);
                }
                if is_if && fast {
                    e.i(Instruction::LocalGet(e.cond));
                } else if is_if {
                    let (lo, hi) = s.then;
                    e.state_is_rewinding();
                    e.i(Instruction::If(BlockType::Result(ValType::I32)));
                    if hi > lo {
                        e.i(Instruction::LocalGet(e.site));
                        e.i(Instruction::I32Const(lo as i32));
                        e.i(Instruction::I32Sub);
                        e.i(Instruction::I32Const((hi - lo) as i32));
                        e.i(Instruction::I32LtU);
                    } else {
                        e.i(Instruction::I32Const(0));
                    }
                    e.i(Instruction::Else);
                    e.i(Instruction::LocalGet(e.cond));
                    e.i(Instruction::End);
                }
                let is_loop = matches!(op, Operator::Loop { .. });
                let sites = plan
                    .levels
                    .get(&i)
                    .and_then(|l| Some(l.children.last()?.hi - l.lo))
                    .unwrap_or(0);
                let copy = !fast
                    && is_loop
                    && sites >= e.fast_copy_sites
                    && e.copies < FAST_COPIES
                    && matches!(blockty, wasmparser::BlockType::Empty)
                    && spilled.is_empty()
                    && !e.orig.iter().any(|f| f.is_loop)
                    && matches!(e.temp_log, TempLog::Off);
                let mut copy_of = None;
                if copy {
                    // block $after; block $fast; if rewinding; loop (the
                    // rewind copy) ... end; br $after; end; end; loop (the
                    // fast copy) ... end; end.
                    e.copies += 1;
                    e.i(Instruction::Block(BlockType::Empty));
                    e.ctl.push(Label::Other);
                    e.i(Instruction::Block(BlockType::Empty));
                    e.ctl.push(Label::Other);
                    copy_of = Some((e.ctl.len() - 1, i));
                    e.state_is_rewinding();
                    e.i(Instruction::If(BlockType::Empty));
                    e.ctl.push(Label::Other);
                    e.temp_log = TempLog::Record(Vec::new());
                }
                let bt = re.block_type(*blockty).map_err(|e| invalid(e.to_string()))?;
                e.i(match op {
                    Operator::Block { .. } => Instruction::Block(bt),
                    Operator::Loop { .. } => Instruction::Loop(bt),
                    _ => Instruction::If(bt),
                });
                e.ctl.push(Label::Orig);
                let results: Vec<ValType> = s.results.iter().map(|t| vt(*t)).collect();
                let mut frame = OrigFrame::new(e.ctl.len() - 1, spilled, results, is_loop);
                frame.copy_of = copy_of;
                e.orig.push(frame);
                levels.push(i);
                if !fast {
                    e.open_level(i);
                }
            }
            (Some(OpPlan::Site(s)), _) => {
                let extras = if s.landing.is_some() {
                    e.landed.take().unwrap_or_default()
                } else {
                    let args = e.spill(&s.args);
                    let extras = e.spill(&s.extras);
                    if !fast {
                        e.land(here, s.chain);
                    }
                    for (l, t) in &args {
                        e.i(Instruction::LocalGet(*l));
                        e.release(*l, *t);
                    }
                    extras
                };
                e.i(re.instruction(op.clone()).map_err(|e| invalid(e.to_string()))?);
                // After the call: unwinding?
                e.i(Instruction::GlobalGet(e.state));
                e.i(Instruction::LocalTee(e.st));
                e.i(Instruction::If(BlockType::Empty));
                e.ctl.push(Label::Other);
                e.i(Instruction::I32Const(s.number as i32));
                e.i(Instruction::LocalSet(e.site));
                e.i(Instruction::Br(e.depth_of(0)));
                e.i(Instruction::End);
                e.ctl.pop();
                let results: Vec<ValType> = s.results.iter().map(|t| vt(*t)).collect();
                e.unspill(extras, &results);
            }
            (_, Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. }) => {
                e.i(re.instruction(op.clone()).map_err(|e| invalid(e.to_string()))?);
                e.ctl.push(Label::Orig);
                let is_loop = matches!(op, Operator::Loop { .. });
                e.orig.push(OrigFrame::new(e.ctl.len() - 1, vec![], vec![], is_loop));
                levels.push(i);
            }
            (_, Operator::Else) => {
                e.i(Instruction::Else);
                *levels.last_mut().expect("a level") = i;
                if !fast {
                    e.open_level(i);
                }
            }
            (_, Operator::End) => {
                e.i(Instruction::End);
                e.ctl.pop();
                let frame = e.orig.pop().expect("a frame per end");
                levels.pop();
                e.unspill(frame.spilled, &frame.results);
                if let Some((_, start)) = frame.copy_of {
                    e.fast_copy(re, body, start, i, levels)?;
                }
            }
            (_, Operator::Br { relative_depth }) => {
                let d = e.remap(*relative_depth)?;
                e.i(Instruction::Br(d));
            }
            (_, Operator::BrIf { relative_depth }) => {
                let d = e.remap(*relative_depth)?;
                e.i(Instruction::BrIf(d));
            }
            (_, Operator::BrTable { targets }) => {
                let mut t = Vec::with_capacity(targets.len() as usize);
                for d in targets.targets() {
                    t.push(e.remap(d.map_err(invalid)?)?);
                }
                let d = e.remap(targets.default())?;
                e.i(Instruction::BrTable(t.into(), d));
            }
            (_, op) => {
                if let Some(OpPlan::Site(s)) = plan.landings.get(&i).and_then(|c| plan.ops.get(c)) {
                    e.landed = Some(e.spill(&s.extras));
                    if !fast {
                        e.land(here, s.chain);
                    }
                }
                e.i(re.instruction(op.clone()).map_err(|e| invalid(e.to_string()))?);
            }
        }
        Ok(())
    }

    /// Closes a loop's rewind copy (operators `start..=end`, just emitted)
    /// and emits its fast copy.
    fn fast_copy(
        &mut self,
        re: &mut Ident,
        body: &wasmparser::FunctionBody<'_>,
        start: usize,
        end: usize,
        levels: &mut Vec<usize>,
    ) -> Result<(), CompileError> {
        // The rewind copy ran to its end: on after the fast copy.
        self.i(Instruction::Br(2));
        self.i(Instruction::End);
        self.ctl.pop();
        self.i(Instruction::End);
        self.ctl.pop();
        let TempLog::Record(log) = std::mem::replace(&mut self.temp_log, TempLog::Off) else {
            return Err(invalid("a fast copy outside a rewind copy"));
        };
        let free = self.free.clone();
        self.temp_log = TempLog::Replay(log.into());
        self.fast = true;
        let mut reader = body.get_operators_reader().map_err(invalid)?;
        for _ in 0..start {
            reader.read().map_err(invalid)?;
        }
        for i in start..=end {
            let op = reader.read().map_err(invalid)?;
            self.op(re, body, i, &op, levels)?;
        }
        self.fast = false;
        let TempLog::Replay(left) = std::mem::replace(&mut self.temp_log, TempLog::Off) else {
            unreachable!("set above");
        };
        if self.replay_miss || !left.is_empty() {
            return Err(unsupported(
                "a loop's fast copy keeps its operands apart from its rewind copy".into(),
            ));
        }
        self.free = free;
        self.i(Instruction::End);
        self.ctl.pop();
        Ok(())
    }

    /// Closes the chain block that ends before the current level's next child.
    fn land(&mut self, level: usize, chain: bool) {
        let c = self.next_child.get(&level).copied().unwrap_or(0);
        self.next_child.insert(level, c + 1);
        if chain {
            debug_assert_eq!(self.ctl.last(), Some(&Label::Chain { level, child: c }));
            self.i(Instruction::End);
            self.ctl.pop();
        }
    }

    fn spill(&mut self, types: &[PType]) -> Vec<(u32, ValType)> {
        let temps: Vec<(u32, ValType)> = types
            .iter()
            .map(|t| {
                let t = vt(*t);
                (self.temp(t), t)
            })
            .collect();
        for (l, _) in temps.iter().rev() {
            self.i(Instruction::LocalSet(*l));
        }
        temps
    }

    /// Puts spilled values back under `results` (which are on the stack).
    fn unspill(&mut self, spilled: Vec<(u32, ValType)>, results: &[ValType]) {
        if spilled.is_empty() {
            return;
        }
        let rs: Vec<(u32, ValType)> = results.iter().map(|t| (self.temp(*t), *t)).collect();
        for (l, _) in rs.iter().rev() {
            self.i(Instruction::LocalSet(*l));
        }
        for (l, t) in &spilled {
            self.i(Instruction::LocalGet(*l));
            self.release(*l, *t);
        }
        for (l, t) in rs {
            self.i(Instruction::LocalGet(l));
            self.release(l, t);
        }
    }
}

/// Rewrites one function.
#[allow(clippy::too_many_arguments)]
fn rewrite_function(
    re: &mut Ident,
    shapes: &mut Shapes,
    plan: &FuncPlan,
    body: &wasmparser::FunctionBody<'_>,
    params: &[ValType],
    results: &[ValType],
    // For a function of several results: the type `[] -> results` of its
    // body's block.
    body_type: Option<u32>,
    state: u32,
    data: u32,
    fast_copy_sites: u32,
) -> Result<wasm_encoder::Function, CompileError> {
    let mut locals: Vec<ValType> = params.to_vec();
    let mut declared = Vec::new();
    for l in body.get_locals_reader().map_err(invalid)? {
        let (n, t) = l.map_err(invalid)?;
        let t = re.val_type(t).map_err(|e| invalid(e.to_string()))?;
        declared.push((n, t));
        if n > 50_000 {
            return Err(invalid("a function declares more than 50000 locals"));
        }
        locals.extend(std::iter::repeat_n(t, n as usize));
    }
    // The original locals live where some rewind resumes: after a site's
    // call, or before its arguments when they are pushed again.
    let resumes: Vec<usize> = plan
        .ops
        .iter()
        .filter_map(|(at, op)| match op {
            OpPlan::Site(s) => Some(s.landing.unwrap_or(*at)),
            OpPlan::Struct(_) => None,
        })
        .collect();
    let live = crate::liveness::live_at(body, locals.len(), &resumes);
    let original = locals.len() as u32;
    let site = locals.len() as u32;
    locals.push(ValType::I32);
    let p = locals.len() as u32;
    locals.push(ValType::I32);
    let cond = locals.len() as u32;
    locals.push(ValType::I32);
    let st = locals.len() as u32;
    locals.push(ValType::I32);
    let mut e = Emit {
        plan,
        out: Vec::new(),
        ctl: Vec::new(),
        orig: Vec::new(),
        pending: None,
        next_child: HashMap::new(),
        free: HashMap::new(),
        locals,
        state,
        landed: None,
        st,
        site,
        cond,
        merge: true,
        merged_at: None,
        fast: false,
        temp_log: TempLog::Off,
        replay_miss: false,
        copies: 0,
        fast_copy_sites,
    };
    let func_bt = match results {
        [] => BlockType::Empty,
        [t] => BlockType::Result(*t),
        _ => BlockType::FunctionType(body_type.ok_or_else(|| invalid("no body type"))?),
    };
    e.i(Instruction::Block(BlockType::Empty));
    e.ctl.push(Label::Other);
    e.i(Instruction::Block(func_bt));
    e.ctl.push(Label::Orig);
    e.orig.push(OrigFrame::new(1, vec![], vec![], false));
    // The rewind prologue is emitted once the frame size is known: a
    // placeholder marks where it goes.
    let prologue_at = e.out.len();
    // Levels: the current level of each original frame.
    let mut levels: Vec<usize> = vec![BODY];
    e.open_level(BODY);
    e.merge = false;

    let mut reader = body.get_operators_reader().map_err(invalid)?;
    let mut i = 0usize;
    while !reader.eof() {
        let op = reader.read().map_err(invalid)?;
        e.op(re, body, i, &op, &mut levels)?;
        i += 1;
    }
    // The body's `end` closed the function's block; then the normal return.
    e.i(Instruction::Return);
    e.i(Instruction::End);
    e.ctl.pop();

    // The frame: the original locals live where a rewind resumes (every one
    // if the function was not analysed), and the site number and the
    // temporaries that keep operands, grouped by type, saved and restored
    // by helpers shared by every function of the same shape (a call with
    // the locals as arguments, or as results), or inline for a function of
    // very many locals. `p`, `st` and `cond` are never read on a rewind
    // before they are written.
    let saved_local = |l: u32| match (&live, l < original) {
        (Some(bits), true) => crate::liveness::has(bits, l),
        (None, true) => true,
        (_, false) => l != p && l != st && l != cond,
    };
    let mut saved: Vec<u32> = (0..e.locals.len() as u32).filter(|l| saved_local(*l)).collect();
    saved.sort_by_key(|l| type_rank(e.locals[*l as usize]));
    let mut shape = [0u32; 5];
    for l in &saved {
        shape[type_rank(e.locals[*l as usize])] += 1;
    }
    let mut epi = Vec::new();
    let mut head = Vec::new();
    let mut pro = Vec::new();
    {
        use wasm_encoder::Encode;
        let put = |ins: Instruction<'_>, to: &mut Vec<u8>| ins.encode(to);
        // The state's copy on entry; then, unless the body's dispatch
        // tests it (and restores the frame first), a test of its own.
        put(Instruction::GlobalGet(state), &mut head);
        if e.merged_at.is_some() {
            put(Instruction::LocalSet(st), &mut head);
        } else {
            put(Instruction::LocalTee(st), &mut head);
            put(Instruction::I32Const(STATE_REWINDING), &mut head);
            put(Instruction::I32Eq, &mut head);
            put(Instruction::If(BlockType::Empty), &mut head);
        }
        if saved.len() <= MAX_HELPER_VALUES {
            let (save, restore) = shapes.helpers(shape);
            for l in &saved {
                put(Instruction::LocalGet(*l), &mut epi);
            }
            put(Instruction::Call(save), &mut epi);
            put(Instruction::Call(restore), &mut pro);
            for l in saved.iter().rev() {
                put(Instruction::LocalSet(*l), &mut pro);
            }
        } else {
            let current = MemArg { offset: 0, align: 2, memory_index: STACK_MEMORY };
            let mut offsets = Vec::with_capacity(saved.len());
            let mut size = 0u64;
            for l in &saved {
                offsets.push(size);
                size += size_of(e.locals[*l as usize]);
            }
            put(Instruction::GlobalGet(data), &mut epi);
            put(Instruction::I32Load(current), &mut epi);
            put(Instruction::LocalSet(p), &mut epi);
            put(Instruction::GlobalGet(data), &mut pro);
            put(Instruction::GlobalGet(data), &mut pro);
            put(Instruction::I32Load(current), &mut pro);
            put(Instruction::I32Const(size as i32), &mut pro);
            put(Instruction::I32Sub, &mut pro);
            put(Instruction::LocalTee(p), &mut pro);
            put(Instruction::I32Store(current), &mut pro);
            for (l, off) in saved.iter().zip(&offsets) {
                let t = e.locals[*l as usize];
                put(Instruction::LocalGet(p), &mut epi);
                put(Instruction::LocalGet(*l), &mut epi);
                put(store(t, stack_arg(*off, t)), &mut epi);
                put(Instruction::LocalGet(p), &mut pro);
                put(load(t, stack_arg(*off, t)), &mut pro);
                put(Instruction::LocalSet(*l), &mut pro);
            }
            put(Instruction::GlobalGet(data), &mut epi);
            put(Instruction::LocalGet(p), &mut epi);
            put(Instruction::I32Const(size as i32), &mut epi);
            put(Instruction::I32Add, &mut epi);
            put(Instruction::I32Store(current), &mut epi);
        }
        if e.merged_at.is_none() {
            put(Instruction::End, &mut pro);
        }
        for t in results {
            put(zero(*t), &mut epi);
        }
        put(Instruction::End, &mut epi);
    }
    let mut code = Vec::with_capacity(e.out.len() + head.len() + pro.len() + epi.len());
    code.extend_from_slice(&e.out[..prologue_at]);
    code.extend_from_slice(&head);
    match e.merged_at {
        Some(at) => {
            code.extend_from_slice(&e.out[prologue_at..at]);
            code.extend_from_slice(&pro);
            code.extend_from_slice(&e.out[at..]);
        }
        None => {
            code.extend_from_slice(&pro);
            code.extend_from_slice(&e.out[prologue_at..]);
        }
    }
    code.extend_from_slice(&epi);
    let mut groups: Vec<(u32, ValType)> = declared;
    for t in &e.locals[params.len() + groups.iter().map(|g| g.0 as usize).sum::<usize>()..] {
        match groups.last_mut() {
            Some((n, last)) if last == t => *n += 1,
            _ => groups.push((1, *t)),
        }
    }
    let mut f = wasm_encoder::Function::new(groups);
    f.raw(code);
    Ok(f)
}

/// The most values a frame helper takes or returns (wasmparser's limit on
/// a function's parameters and results); a function with more locals saves
/// and restores them inline.
const MAX_HELPER_VALUES: usize = 1000;

/// A frame's order of types: i32, i64, f32, f64, v128.
fn type_rank(t: ValType) -> usize {
    match t {
        ValType::I32 => 0,
        ValType::I64 => 1,
        ValType::F32 => 2,
        ValType::F64 => 3,
        _ => 4,
    }
}

const RANKED: [ValType; 5] =
    [ValType::I32, ValType::I64, ValType::F32, ValType::F64, ValType::V128];

/// The frame shapes (how many locals of each type) that have a save and a
/// restore helper, in the order their helpers are added.
struct Shapes {
    list: Vec<[u32; 5]>,
    index: HashMap<[u32; 5], u32>,
    /// The first helper's function index (save; its restore follows).
    first_func: u32,
}

impl Shapes {
    /// The save and restore helpers of `shape`.
    fn helpers(&mut self, shape: [u32; 5]) -> (u32, u32) {
        let k = *self.index.entry(shape).or_insert_with(|| {
            self.list.push(shape);
            (self.list.len() - 1) as u32
        });
        (self.first_func + 2 * k, self.first_func + 2 * k + 1)
    }

    fn types(shape: &[u32; 5]) -> Vec<ValType> {
        RANKED.iter().zip(shape).flat_map(|(t, n)| std::iter::repeat_n(*t, *n as usize)).collect()
    }

    /// The helpers' bodies: `save(values...)` pushes a frame, `restore()`
    /// pops one and returns its values.
    fn bodies(&self, data: u32, code: &mut CodeSection) {
        let current = MemArg { offset: 0, align: 2, memory_index: STACK_MEMORY };
        for shape in &self.list {
            let types = Shapes::types(shape);
            let p = types.len() as u32;
            let mut offsets = Vec::with_capacity(types.len());
            let mut size = 0u64;
            for t in &types {
                offsets.push(size);
                size += size_of(*t);
            }
            let mut save = wasm_encoder::Function::new([(1, ValType::I32)]);
            save.instruction(&Instruction::GlobalGet(data));
            save.instruction(&Instruction::I32Load(current));
            save.instruction(&Instruction::LocalSet(p));
            for (i, (t, off)) in types.iter().zip(&offsets).enumerate() {
                save.instruction(&Instruction::LocalGet(p));
                save.instruction(&Instruction::LocalGet(i as u32));
                save.instruction(&store(*t, stack_arg(*off, *t)));
            }
            save.instruction(&Instruction::GlobalGet(data));
            save.instruction(&Instruction::LocalGet(p));
            save.instruction(&Instruction::I32Const(size as i32));
            save.instruction(&Instruction::I32Add);
            save.instruction(&Instruction::I32Store(current));
            save.instruction(&Instruction::End);
            code.function(&save);
            let mut restore = wasm_encoder::Function::new([(1, ValType::I32)]);
            restore.instruction(&Instruction::GlobalGet(data));
            restore.instruction(&Instruction::GlobalGet(data));
            restore.instruction(&Instruction::I32Load(current));
            restore.instruction(&Instruction::I32Const(size as i32));
            restore.instruction(&Instruction::I32Sub);
            restore.instruction(&Instruction::LocalTee(0));
            restore.instruction(&Instruction::I32Store(current));
            for (t, off) in types.iter().zip(&offsets) {
                restore.instruction(&Instruction::LocalGet(0));
                restore.instruction(&load(*t, stack_arg(*off, *t)));
            }
            restore.instruction(&Instruction::End);
            code.function(&restore);
        }
    }
}

/// Converts operators and types as they are (no index moves: everything
/// the transform adds comes after what the module has).
struct Ident;

impl Reencode for Ident {
    type Error = std::convert::Infallible;
}

struct Unw<'a> {
    facts: &'a ModuleFacts,
    /// The rewritten functions, by index.
    bodies: HashMap<u32, wasm_encoder::Function>,
    shapes: Shapes,
    opts: &'a Options,
    next_body: u32,
    state: u32,
    data: u32,
    /// The first of the three types added: `() -> ()`, `(i32) -> ()`, `() -> i32`.
    first_type: u32,
    /// The first of the five functions added.
    first_func: u32,
    /// The result types of several values of rewritten functions: each gets
    /// a type `[] -> results` after the three added, for its body's block.
    result_types: Vec<Vec<PType>>,
    globals_done: bool,
}

impl Unw<'_> {
    fn add_globals(&self, globals: &mut GlobalSection) {
        for _ in 0..2 {
            globals.global(
                GlobalType { val_type: ValType::I32, mutable: true, shared: false },
                &wasm_encoder::ConstExpr::i32_const(0),
            );
        }
    }
}

impl Reencode for Unw<'_> {
    type Error = CompileError;

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_type_section(self, types, section)?;
        types.ty().function([], []);
        types.ty().function([ValType::I32], []);
        types.ty().function([], [ValType::I32]);
        for results in &self.result_types {
            types.ty().function([], results.iter().map(|t| vt(*t)));
        }
        for shape in &self.shapes.list {
            let values = Shapes::types(shape);
            types.ty().function(values.clone(), []);
            types.ty().function([], values);
        }
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_function_section(self, functions, section)?;
        let t = self.first_type;
        for ty in [t + 1, t, t + 1, t, t + 2] {
            functions.function(ty);
        }
        let helper_types = t + 3 + self.result_types.len() as u32;
        for k in 0..self.shapes.list.len() as u32 {
            functions.function(helper_types + 2 * k);
            functions.function(helper_types + 2 * k + 1);
        }
        Ok(())
    }

    fn parse_memory_section(
        &mut self,
        memories: &mut MemorySection,
        section: wasmparser::MemorySectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_memory_section(self, memories, section)?;
        let pages = u64::from(self.opts.stack_pages);
        memories.memory(MemoryType {
            minimum: pages,
            maximum: Some(pages),
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_global_section(self, globals, section)?;
        self.add_globals(globals);
        self.globals_done = true;
        Ok(())
    }

    fn intersperse_section_hook(
        &mut self,
        module: &mut Module,
        _after: Option<wasm_encoder::SectionId>,
        before: Option<wasm_encoder::SectionId>,
    ) -> Result<(), Error<Self::Error>> {
        use wasm_encoder::SectionId as S;
        let past_globals = matches!(
            before,
            Some(S::Export | S::Start | S::Element | S::DataCount | S::Code | S::Data) | None
        );
        if !self.globals_done && past_globals {
            let mut g = GlobalSection::new();
            self.add_globals(&mut g);
            module.section(&g);
            self.globals_done = true;
        }
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        let f = self.first_func;
        for (k, name) in
            [START_UNWIND, STOP_UNWIND, START_REWIND, STOP_REWIND, GET_STATE].iter().enumerate()
        {
            exports.export(name, ExportKind::Func, f + k as u32);
        }
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_code_section(self, code, section)?;
        let (state, data) = (self.state, self.data);
        let set = |to: i32, arg: bool| {
            let mut f = wasm_encoder::Function::new([]);
            f.instruction(&Instruction::I32Const(to));
            f.instruction(&Instruction::GlobalSet(state));
            if arg {
                f.instruction(&Instruction::LocalGet(0));
                f.instruction(&Instruction::GlobalSet(data));
            }
            f.instruction(&Instruction::End);
            f
        };
        code.function(&set(crate::STATE_UNWINDING, true));
        code.function(&set(crate::STATE_NORMAL, false));
        code.function(&set(STATE_REWINDING, true));
        code.function(&set(crate::STATE_NORMAL, false));
        let mut get = wasm_encoder::Function::new([]);
        get.instruction(&Instruction::GlobalGet(state));
        get.instruction(&Instruction::End);
        code.function(&get);
        self.shapes.bodies(data, code);
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut CodeSection,
        func: wasmparser::FunctionBody<'_>,
    ) -> Result<(), Error<Self::Error>> {
        let index = self.facts.imported_funcs + self.next_body;
        self.next_body += 1;
        let Some(f) = self.bodies.remove(&index) else {
            return utils::parse_function_body(self, code, func);
        };
        code.function(&f);
        Ok(())
    }
}

/// Makes every function that can reach the yield import unwindable and
/// rewindable (see the module documentation), adds the stack memory, the
/// state and data globals and the five `asyncify_*` functions, exported.
pub(crate) fn transform(module: &[u8], opts: &Options) -> Result<Vec<u8>, CompileError> {
    let (facts, calls) = facts(module)?;
    let yield_func = facts.yield_func.ok_or_else(|| invalid("no yield import"))?;
    let yielding = can_yield(&facts, &calls, yield_func);

    // The rewritten functions' result types of several values, each the type
    // of a body block.
    let mut result_types: Vec<Vec<PType>> = Vec::new();
    for f in yielding.iter().filter(|f| **f >= facts.imported_funcs) {
        let results = &facts.types[facts.func_type[*f as usize] as usize].1;
        if results.len() > 1 && !result_types.contains(results) {
            result_types.push(results.clone());
        }
    }
    result_types.sort_by_key(|r| format!("{r:?}"));
    let first_type = facts.types.len() as u32;
    let first_func = facts.func_type.len() as u32;
    let (state, data) = (facts.globals, facts.globals + 1);
    let mut shapes = Shapes { list: vec![], index: HashMap::new(), first_func: first_func + 5 };

    // Each function that can yield is planned (as it is validated, which
    // gives the operand types) and rewritten; the others are validated.
    let mut bodies = HashMap::new();
    let mut validator = wasmparser::Validator::new_with_features(crate::wasmtime_features());
    let mut allocs = FuncValidatorAllocations::default();
    let mut body_index = 0u32;
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(invalid)?;
        let ValidPayload::Func(to_validate, body) = validator.payload(&payload).map_err(invalid)?
        else {
            continue;
        };
        let index = facts.imported_funcs + body_index;
        body_index += 1;
        let mut fv = to_validate.into_validator(std::mem::take(&mut allocs));
        if !yielding.contains(&index) {
            fv.validate(&body).map_err(invalid)?;
            allocs = fv.into_allocations();
            continue;
        }
        let plan = plan(&facts, &yielding, &mut fv, &body, index)?;
        allocs = fv.into_allocations();
        let ty = facts.func_type[index as usize];
        let (params, results) = &facts.types[ty as usize];
        let params: Vec<ValType> = params.iter().map(|t| vt(*t)).collect();
        let results_v: Vec<ValType> = results.iter().map(|t| vt(*t)).collect();
        let body_type =
            result_types.iter().position(|r| r == results).map(|k| first_type + 3 + k as u32);
        let f = rewrite_function(
            &mut Ident,
            &mut shapes,
            &plan,
            &body,
            &params,
            &results_v,
            body_type,
            state,
            data,
            opts.fast_copy_sites,
        )?;
        bodies.insert(index, f);
    }
    let mut unw = Unw {
        facts: &facts,
        bodies,
        shapes,
        opts,
        next_body: 0,
        state,
        data,
        first_type,
        first_func,
        result_types,
        globals_done: false,
    };
    let mut out = Module::new();
    unw.parse_core_module(&mut out, Parser::new(0), module).map_err(|e| match e {
        Error::UserError(e) => e,
        e => invalid(e.to_string()),
    })?;
    Ok(out.finish())
}
