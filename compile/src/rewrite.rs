//! The two rewrites around the unwinding transform: before it, the poll
//! memory, the yield import and the checks at loop headers; after it, the
//! exports of mutable globals and of the stack memory, and the version
//! section.

use wasm_encoder::reencode::{Error, Reencode, utils};
use wasm_encoder::{
    BlockType, CodeSection, CustomSection, EntityType, ExportKind, ExportSection, FunctionSection,
    ImportSection, Instruction, MemArg, MemorySection, MemoryType, Module, SectionId, TypeSection,
    ValType,
};
use wasmparser::{Parser, Payload, TypeRef};

use crate::scan::{Info, Loop};
use crate::{
    CUSTOM_SECTION, CompileError, GET_STATE, INSTRUMENTATION_VERSION, LoopChecks, MEMORY_EXPORT,
    Options, POLL_MEMORY, POLL_MEMORY_EXPORT, POLL_WORD, STACK_MEMORY, STACK_MEMORY_EXPORT,
    START_REWIND, START_UNWIND, STOP_REWIND, STOP_UNWIND, YIELD_FIELD, YIELD_MODULE,
    global_export_name,
};

/// Where a section goes in a module, in the binary format's order.
fn rank(id: Option<SectionId>) -> u8 {
    match id {
        Some(SectionId::Type) => 1,
        Some(SectionId::Import) => 2,
        Some(SectionId::Function) => 3,
        Some(SectionId::Table) => 4,
        Some(SectionId::Memory) => 5,
        Some(SectionId::Tag) => 6,
        Some(SectionId::Global) => 7,
        Some(SectionId::Export) => 8,
        Some(SectionId::Start) => 9,
        Some(SectionId::Element) => 10,
        Some(SectionId::DataCount) => 11,
        Some(SectionId::Code) => 12,
        Some(SectionId::Data) => 13,
        Some(SectionId::Custom) => 0,
        None => u8::MAX,
        #[allow(unreachable_patterns)]
        Some(_) => 0,
    }
}

fn reencode_error(e: Error<std::convert::Infallible>) -> CompileError {
    CompileError::Invalid(e.to_string())
}

struct Pre<'a> {
    info: &'a Info,
    opts: &'a Options,
    /// The yield import's function index.
    yield_func: u32,
    /// Its type index.
    yield_type: u32,
    /// The next defined function's position in the code section.
    next_body: usize,
    types_done: bool,
    imports_done: bool,
    functions_done: bool,
    memories_done: bool,
    exports_done: bool,
    code_done: bool,
}

/// The most bytes one `memory.copy` or `memory.fill` of the guest moves
/// between two flag checks: larger ones are split into pieces of this size
/// (a piece takes about a millisecond at worst, page faults included).
pub(crate) const BULK_PIECE: i32 = 1 << 20;

impl Pre<'_> {
    fn add_type(&self, types: &mut TypeSection) {
        types.ty().function([], []);
        if self.splits_bulk() {
            types.ty().function([ValType::I32; 3], []);
        }
    }
    /// Whether the guest's `memory.copy` and `memory.fill` go through the
    /// helpers that split them (asked for, a 32-bit memory, and some
    /// function uses them).
    fn splits_bulk(&self) -> bool {
        self.opts.split_bulk && self.info.bulk_memory && !self.info.memory64
    }
    /// The copy helper's function index (the fill helper's is the next).
    fn copy_func(&self) -> u32 {
        self.info.imported_funcs + 1 + self.info.functions.len() as u32
    }
    fn add_functions(&self, functions: &mut FunctionSection) {
        if self.splits_bulk() {
            functions.function(self.yield_type + 1);
            functions.function(self.yield_type + 1);
        }
    }
    /// `memory.copy` or `memory.fill` (`(dst, src or value, len)` on the
    /// stack), through locals `at..at + 3`: the instruction itself when
    /// `len` is at most [`BULK_PIECE`], else a call to its helper.
    fn bulk(f: &mut wasm_encoder::Function, at: u32, call: Instruction<'_>, op: Instruction<'_>) {
        for l in (at..at + 3).rev() {
            f.instruction(&Instruction::LocalSet(l));
        }
        f.instruction(&Instruction::LocalGet(at + 2));
        f.instruction(&Instruction::I32Const(BULK_PIECE));
        f.instruction(&Instruction::I32GtU);
        f.instruction(&Instruction::If(BlockType::Empty));
        for l in at..at + 3 {
            f.instruction(&Instruction::LocalGet(l));
        }
        f.instruction(&call);
        f.instruction(&Instruction::Else);
        for l in at..at + 3 {
            f.instruction(&Instruction::LocalGet(l));
        }
        f.instruction(&op);
        f.instruction(&Instruction::End);
    }

    /// `if (poll word) call yield`.
    fn check(&self, f: &mut wasm_encoder::Function) {
        let word = MemArg { offset: u64::from(POLL_WORD), align: 2, memory_index: POLL_MEMORY };
        f.instruction(&Instruction::I32Const(0));
        f.instruction(&Instruction::I32Load(word));
        f.instruction(&Instruction::If(BlockType::Empty));
        f.instruction(&Instruction::Call(self.yield_func));
        f.instruction(&Instruction::End);
    }
    /// The bodies of the copy and fill helpers: `(dst, src or value, len)`,
    /// as the instructions take them. Small ones, and any that would trap,
    /// are the instruction itself (so a trap is the same trap, before any
    /// byte moves); larger ones move [`BULK_PIECE`] bytes at a time with a
    /// flag check before each piece, copying backwards when the destination
    /// is above the source, as memmove does, so overlaps come out right.
    fn add_bodies(&self, code: &mut CodeSection) {
        use Instruction as I;
        if !self.splits_bulk() {
            return;
        }
        let (d, s, n, c) = (0, 1, 2, 3);
        let mem = 0;
        let bulk = |copy: bool| match copy {
            true => I::MemoryCopy { src_mem: mem, dst_mem: mem },
            false => I::MemoryFill(mem),
        };
        // if n <= PIECE || d + n > size || (copy: s + n > size) { the instruction; return }
        let prologue = |f: &mut wasm_encoder::Function, copy: bool| {
            let size = |f: &mut wasm_encoder::Function| {
                f.instruction(&I::MemorySize(mem));
                f.instruction(&I::I64ExtendI32U);
                f.instruction(&I::I64Const(16));
                f.instruction(&I::I64Shl);
            };
            let end = |f: &mut wasm_encoder::Function, at: u32| {
                f.instruction(&I::LocalGet(at));
                f.instruction(&I::I64ExtendI32U);
                f.instruction(&I::LocalGet(n));
                f.instruction(&I::I64ExtendI32U);
                f.instruction(&I::I64Add);
            };
            f.instruction(&I::LocalGet(n));
            f.instruction(&I::I32Const(BULK_PIECE));
            f.instruction(&I::I32LeU);
            end(f, d);
            size(f);
            f.instruction(&I::I64GtU);
            f.instruction(&I::I32Or);
            if copy {
                end(f, s);
                size(f);
                f.instruction(&I::I64GtU);
                f.instruction(&I::I32Or);
            }
            f.instruction(&I::If(BlockType::Empty));
            f.instruction(&I::LocalGet(d));
            f.instruction(&I::LocalGet(s));
            f.instruction(&I::LocalGet(n));
            f.instruction(&bulk(copy));
            f.instruction(&I::Return);
            f.instruction(&I::End);
        };
        // c = min(n, PIECE)
        let piece = |f: &mut wasm_encoder::Function| {
            f.instruction(&I::I32Const(BULK_PIECE));
            f.instruction(&I::LocalGet(n));
            f.instruction(&I::LocalGet(n));
            f.instruction(&I::I32Const(BULK_PIECE));
            f.instruction(&I::I32GtU);
            f.instruction(&I::Select);
            f.instruction(&I::LocalSet(c));
        };
        let add = |f: &mut wasm_encoder::Function, to: u32, sign: bool| {
            f.instruction(&I::LocalGet(to));
            f.instruction(&I::LocalGet(c));
            f.instruction(&if sign { I::I32Add } else { I::I32Sub });
            f.instruction(&I::LocalSet(to));
        };
        // Forwards, the piece at the start first: the copy's loop when the
        // destination is not above the source, and the fill's.
        let forwards = |f: &mut wasm_encoder::Function, copy: bool| {
            f.instruction(&I::Loop(BlockType::Empty));
            self.check(f);
            piece(f);
            f.instruction(&I::LocalGet(d));
            f.instruction(&I::LocalGet(s));
            f.instruction(&I::LocalGet(c));
            f.instruction(&bulk(copy));
            add(f, d, true);
            if copy {
                add(f, s, true);
            }
            add(f, n, false);
            f.instruction(&I::LocalGet(n));
            f.instruction(&I::BrIf(0));
            f.instruction(&I::End);
        };
        // Copy.
        let mut f = wasm_encoder::Function::new([(1, ValType::I32)]);
        prologue(&mut f, true);
        f.instruction(&I::LocalGet(d));
        f.instruction(&I::LocalGet(s));
        f.instruction(&I::I32LeU);
        f.instruction(&I::If(BlockType::Empty));
        forwards(&mut f, true);
        f.instruction(&I::Else);
        {
            // Backwards: the piece at the end first.
            f.instruction(&I::Loop(BlockType::Empty));
            self.check(&mut f);
            piece(&mut f);
            add(&mut f, n, false);
            for at in [d, s] {
                f.instruction(&I::LocalGet(at));
                f.instruction(&I::LocalGet(n));
                f.instruction(&I::I32Add);
            }
            f.instruction(&I::LocalGet(c));
            f.instruction(&I::MemoryCopy { src_mem: mem, dst_mem: mem });
            f.instruction(&I::LocalGet(n));
            f.instruction(&I::BrIf(0));
            f.instruction(&I::End);
        }
        f.instruction(&I::End);
        f.instruction(&I::End);
        code.function(&f);
        // Fill.
        let mut f = wasm_encoder::Function::new([(1, ValType::I32)]);
        prologue(&mut f, false);
        forwards(&mut f, false);
        f.instruction(&I::End);
        code.function(&f);
    }
    fn add_import(&self, imports: &mut ImportSection) {
        imports.import(YIELD_MODULE, YIELD_FIELD, EntityType::Function(self.yield_type));
    }
    fn add_memory(&self, memories: &mut MemorySection) {
        memories.memory(MemoryType {
            minimum: 1,
            maximum: Some(1),
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
    }
    fn add_exports(&self, exports: &mut ExportSection) {
        exports.export(POLL_MEMORY_EXPORT, ExportKind::Memory, POLL_MEMORY);
        if !self.info.memory_exported {
            exports.export(MEMORY_EXPORT, ExportKind::Memory, 0);
        }
    }
}

impl Reencode for Pre<'_> {
    type Error = std::convert::Infallible;

    fn function_index(&mut self, func: u32) -> Result<u32, Error<Self::Error>> {
        Ok(if func >= self.yield_func { func + 1 } else { func })
    }

    fn start_section(&mut self, start: u32) -> Result<u32, Error<Self::Error>> {
        self.function_index(start)
    }

    fn parse_type_section(
        &mut self,
        types: &mut TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_type_section(self, types, section)?;
        self.add_type(types);
        self.types_done = true;
        Ok(())
    }

    fn parse_import_section(
        &mut self,
        imports: &mut ImportSection,
        section: wasmparser::ImportSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_import_section(self, imports, section)?;
        self.add_import(imports);
        self.imports_done = true;
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_function_section(self, functions, section)?;
        self.add_functions(functions);
        self.functions_done = true;
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_code_section(self, code, section)?;
        self.add_bodies(code);
        self.code_done = true;
        Ok(())
    }

    fn parse_memory_section(
        &mut self,
        memories: &mut MemorySection,
        section: wasmparser::MemorySectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_memory_section(self, memories, section)?;
        self.add_memory(memories);
        self.memories_done = true;
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        self.add_exports(exports);
        self.exports_done = true;
        Ok(())
    }

    fn intersperse_section_hook(
        &mut self,
        module: &mut Module,
        _after: Option<SectionId>,
        before: Option<SectionId>,
    ) -> Result<(), Error<Self::Error>> {
        // Sections the input lacks are added where they belong.
        let next = rank(before);
        if next == 0 {
            return Ok(());
        }
        if !self.types_done && next > rank(Some(SectionId::Type)) {
            let mut s = TypeSection::new();
            self.add_type(&mut s);
            module.section(&s);
            self.types_done = true;
        }
        if !self.imports_done && next > rank(Some(SectionId::Import)) {
            let mut s = ImportSection::new();
            self.add_import(&mut s);
            module.section(&s);
            self.imports_done = true;
        }
        if !self.functions_done && next > rank(Some(SectionId::Function)) {
            let mut s = FunctionSection::new();
            self.add_functions(&mut s);
            module.section(&s);
            self.functions_done = true;
        }
        if !self.memories_done && next > rank(Some(SectionId::Memory)) {
            let mut s = MemorySection::new();
            self.add_memory(&mut s);
            module.section(&s);
            self.memories_done = true;
        }
        if !self.exports_done && next > rank(Some(SectionId::Export)) {
            let mut s = ExportSection::new();
            self.add_exports(&mut s);
            module.section(&s);
            self.exports_done = true;
        }
        if !self.code_done && next > rank(Some(SectionId::Code)) {
            let mut s = CodeSection::new();
            self.add_bodies(&mut s);
            module.section(&s);
            self.code_done = true;
        }
        Ok(())
    }

    fn parse_custom_section(
        &mut self,
        module: &mut Module,
        section: wasmparser::CustomSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        // DWARF describes the code as it was; after the rewrite it would lie.
        if section.name().starts_with(".debug_") {
            return Ok(());
        }
        utils::parse_custom_section(self, module, section)
    }

    fn parse_custom_name_subsection(
        &mut self,
        names: &mut wasm_encoder::NameSection,
        section: wasmparser::Name<'_>,
    ) -> Result<(), Error<Self::Error>> {
        // Label names describe the code as it was.
        if let wasmparser::Name::Label(_) = section {
            return Ok(());
        }
        utils::parse_custom_name_subsection(self, names, section)
    }

    fn parse_function_body(
        &mut self,
        code: &mut CodeSection,
        func: wasmparser::FunctionBody<'_>,
    ) -> Result<(), Error<Self::Error>> {
        let facts = self.info.functions.get(self.next_body);
        self.next_body += 1;
        let mut loops = facts.map(|f| f.loops.iter()).into_iter().flatten();
        let leaf = facts.is_some_and(|f| !f.calls);
        // A bulk instruction of at most BULK_PIECE bytes (nearly all: a
        // Go or C program's every small memmove) stays the instruction
        // behind a test of its length, in three locals added for its
        // operands; only a larger one calls the helper.
        let bulk = match facts {
            Some(f) if f.bulk && self.splits_bulk() => Some(f.locals),
            _ => None,
        };
        let mut f = match bulk {
            None => self.new_function_with_parsed_locals(&func)?,
            Some(_) => {
                let mut locals = Vec::new();
                for l in func.get_locals_reader()? {
                    let (n, t) = l?;
                    locals.push((n, self.val_type(t)?));
                }
                locals.push((3, ValType::I32));
                wasm_encoder::Function::new(locals)
            }
        };
        // A check due (on entry, or at a loop header) goes in after the
        // blocks that open there: it runs just as often, and a `switch` in a
        // loop, nested blocks first, then gets one test per iteration, the
        // poll word's, its rewind dispatch inside the check (see the
        // unwinding) rather than in a test of its own.
        let mut due = facts.is_some_and(|f| f.entry_poll);
        let mut reader = func.get_operators_reader()?;
        while !reader.eof() {
            let op = reader.read()?;
            let is_loop = matches!(op, wasmparser::Operator::Loop { .. });
            if due && !matches!(op, wasmparser::Operator::Block { .. }) {
                self.check(&mut f);
                due = false;
            }
            match op {
                wasmparser::Operator::MemoryCopy { dst_mem: 0, src_mem: 0 }
                    if let Some(at) = bulk =>
                {
                    let copy = Instruction::MemoryCopy { src_mem: 0, dst_mem: 0 };
                    Self::bulk(&mut f, at, Instruction::Call(self.copy_func()), copy);
                }
                wasmparser::Operator::MemoryFill { mem: 0 } if let Some(at) = bulk => {
                    let fill = Instruction::MemoryFill(0);
                    Self::bulk(&mut f, at, Instruction::Call(self.copy_func() + 1), fill);
                }
                op => {
                    f.instruction(&self.instruction(op)?);
                }
            }
            if !is_loop {
                continue;
            }
            let l = loops.next().copied().unwrap_or(Loop { outermost: true, calls: true });
            due = match self.opts.checks {
                LoopChecks::Every => true,
                LoopChecks::NotInLeaves => !leaf,
                LoopChecks::Outer => !leaf && (l.outermost || l.calls),
            };
        }
        code.function(&f);
        Ok(())
    }
}

/// The poll memory, the yield import, the loop-header checks and the poll
/// memory's and guest memory's exports.
pub(crate) fn pre(module: &[u8], info: &Info, opts: &Options) -> Result<Vec<u8>, CompileError> {
    let mut pre = Pre {
        info,
        opts,
        yield_func: info.imported_funcs,
        yield_type: info.types,
        next_body: 0,
        types_done: false,
        imports_done: false,
        functions_done: false,
        memories_done: false,
        exports_done: false,
        code_done: false,
    };
    let mut out = Module::new();
    pre.parse_core_module(&mut out, Parser::new(0), module).map_err(reencode_error)?;
    Ok(out.finish())
}

/// What the post rewrite learns from the unwinding transform's output.
#[derive(Default)]
struct Facts {
    mutable_globals: Vec<u32>,
    memories: u32,
    exports: Vec<String>,
}

struct Post {
    facts: Facts,
}

impl Reencode for Post {
    type Error = std::convert::Infallible;

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), Error<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        for g in &self.facts.mutable_globals {
            exports.export(&global_export_name(*g), ExportKind::Global, *g);
        }
        exports.export(STACK_MEMORY_EXPORT, ExportKind::Memory, STACK_MEMORY);
        Ok(())
    }

    fn intersperse_section_hook(
        &mut self,
        module: &mut Module,
        _after: Option<SectionId>,
        before: Option<SectionId>,
    ) -> Result<(), Error<Self::Error>> {
        if before.is_none() {
            module.section(&CustomSection {
                name: CUSTOM_SECTION.into(),
                data: INSTRUMENTATION_VERSION.to_le_bytes().to_vec().into(),
            });
        }
        Ok(())
    }
}

/// The exports of every mutable global and of the stack memory, and the
/// version section, added to the unwinding transform's output.
pub(crate) fn post(module: &[u8], opts: &Options) -> Result<Vec<u8>, CompileError> {
    let bad = |e: wasmparser::BinaryReaderError| CompileError::Output(e.to_string());
    let mut facts = Facts::default();
    let mut globals = 0u32;
    let mut stack_pages = None;
    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(bad)? {
            Payload::ImportSection(s) => {
                for i in s {
                    match i.map_err(bad)?.ty {
                        TypeRef::Global(g) => {
                            if g.mutable {
                                facts.mutable_globals.push(globals);
                            }
                            globals += 1;
                        }
                        TypeRef::Memory(_) => facts.memories += 1,
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(s) => {
                for m in s {
                    let m = m.map_err(bad)?;
                    if facts.memories == STACK_MEMORY {
                        stack_pages = Some((m.initial, m.maximum));
                    }
                    facts.memories += 1;
                }
            }
            Payload::GlobalSection(s) => {
                for g in s {
                    if g.map_err(bad)?.ty.mutable {
                        facts.mutable_globals.push(globals);
                    }
                    globals += 1;
                }
            }
            Payload::ExportSection(s) => {
                for e in s {
                    facts.exports.push(e.map_err(bad)?.name.to_string());
                }
            }
            _ => {}
        }
    }
    let pages = u64::from(opts.stack_pages);
    if facts.memories != STACK_MEMORY + 1 || stack_pages != Some((pages, Some(pages))) {
        return Err(CompileError::Output(format!(
            "expected the guest memory, the poll memory and a {pages}-page stack memory, \
             found {} memories",
            facts.memories
        )));
    }
    for name in
        [START_UNWIND, STOP_UNWIND, START_REWIND, STOP_REWIND, GET_STATE, POLL_MEMORY_EXPORT]
    {
        if !facts.exports.iter().any(|e| e == name) {
            return Err(CompileError::Output(format!("the output lacks the export `{name}`")));
        }
    }
    let mut post = Post { facts };
    let mut out = Module::new();
    post.parse_core_module(&mut out, Parser::new(0), module)
        .map_err(|e| CompileError::Output(e.to_string()))?;
    Ok(out.finish())
}
