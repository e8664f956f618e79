//! What the rewrite needs to know about the input, and the refusals.

use wasmparser::{
    Encoding, ExternalKind, Operator, Parser, Payload, TypeRef, ValType, Validator, WasmFeatures,
};

use crate::{CUSTOM_SECTION, CompileError, wasmtime_features};

/// The facts about an input module the rewrite uses.
#[derive(Debug, Default)]
pub(crate) struct Info {
    /// Imported functions (the yield import goes after them).
    pub imported_funcs: u32,
    /// Types in the type section (the yield type goes after them).
    pub types: u32,
    /// Whether memory 0 is exported already.
    pub memory_exported: bool,
    /// Whether memory 0 is a 64-bit memory.
    pub memory64: bool,
    /// Whether some function uses `memory.copy` or `memory.fill`.
    pub bulk_memory: bool,
    /// For each defined function, its loops in the order they appear.
    pub functions: Vec<Function>,
}

/// What the loop-check policies need to know about one function.
#[derive(Debug, Default)]
pub(crate) struct Function {
    /// Whether it calls anything (directly or indirectly).
    pub calls: bool,
    /// Its loops, in the order of their `loop` instructions.
    pub loops: Vec<Loop>,
    /// Every entry reaches its first loop before any call or branch, so a
    /// check at that loop's header (which a function that calls always
    /// gets) is a check on entry.
    pub entry_loop: bool,
    /// It polls on entry: it is where a cycle of calls is broken
    /// ([`crate::graph::recursion_polls`]).
    pub entry_poll: bool,
    /// It has a `memory.copy` or `memory.fill` of memory 0.
    pub bulk: bool,
    /// Its parameters and declared locals.
    pub locals: u32,
}

/// One loop of a function.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Loop {
    /// Not nested in another loop of the same function.
    pub outermost: bool,
    /// Its body calls something, outside the loops nested in it.
    pub calls: bool,
}

/// Proposals that validate only with features wasmtime 36 leaves off, with
/// what to tell the user.
const UNSUPPORTED: &[(&str, &str, WasmFeatures)] = &[
    (
        "threads (shared memory, atomics)",
        "a job is one thread, and a snapshot of shared memory could not be consistent",
        WasmFeatures::THREADS.union(WasmFeatures::SHARED_EVERYTHING_THREADS),
    ),
    (
        "exception handling",
        "a checkpoint cannot unwind through exception handlers (and wasmtime 36 does not \
         enable them); build without exceptions (e.g. -fno-exceptions, panic=abort)",
        WasmFeatures::EXCEPTIONS.union(WasmFeatures::LEGACY_EXCEPTIONS),
    ),
    (
        "garbage-collected or typed references (the GC proposal)",
        "a checkpoint cannot save references, and wasmtime 36 (as andes builds it) does not \
         enable GC",
        WasmFeatures::GC.union(WasmFeatures::GC_TYPES).union(WasmFeatures::FUNCTION_REFERENCES),
    ),
    (
        "stack switching",
        "wasmtime 36 does not enable it",
        WasmFeatures::STACK_SWITCHING
            .union(WasmFeatures::FUNCTION_REFERENCES)
            .union(WasmFeatures::EXCEPTIONS)
            .union(WasmFeatures::GC_TYPES),
    ),
    ("wide arithmetic", "wasmtime 36 does not enable it", WasmFeatures::WIDE_ARITHMETIC),
    ("custom page sizes", "wasmtime 36 does not enable it", WasmFeatures::CUSTOM_PAGE_SIZES),
];

fn unsupported(feature: &str, why: impl Into<String>) -> CompileError {
    CompileError::Unsupported { feature: feature.to_string(), why: why.into() }
}

/// Validates `module`, refuses what cannot be instrumented, and gathers [`Info`].
pub(crate) fn scan(module: &[u8]) -> Result<Info, CompileError> {
    if !module.starts_with(b"\0asm") {
        return Err(CompileError::Invalid(
            "it does not start with the WebAssembly magic bytes `\\0asm` (is it a .wasm file?)"
                .into(),
        ));
    }
    if let Some(Ok(Payload::Version { encoding: Encoding::Component, .. })) =
        Parser::new(0).parse_all(module).next()
    {
        return Err(CompileError::Invalid(
            "it is a WebAssembly component; andes compile takes wasip1 core modules".into(),
        ));
    }
    Validator::new_with_features(WasmFeatures::all())
        .validate_all(module)
        .map_err(|e| CompileError::Invalid(e.to_string()))?;

    // Instrumented already? Checked before the feature checks, which the
    // output of an older andes might fail.
    for payload in Parser::new(0).parse_all(module) {
        if let Payload::CustomSection(c) =
            payload.map_err(|e| CompileError::Invalid(e.to_string()))?
            && c.name() == CUSTOM_SECTION
        {
            let v = <[u8; 4]>::try_from(c.data()).map(u32::from_le_bytes).unwrap_or(0);
            return Err(CompileError::AlreadyInstrumented(v));
        }
    }
    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(|e| CompileError::Invalid(e.to_string()))? {
            Payload::ImportSection(s) => {
                for i in s {
                    let i = i.map_err(|e| CompileError::Invalid(e.to_string()))?;
                    if i.module == crate::YIELD_MODULE || i.module == "asyncify" {
                        return Err(CompileError::Conflict(format!(
                            "an import from `{}` (`{}`)",
                            i.module, i.name
                        )));
                    }
                }
            }
            Payload::ExportSection(s) => {
                for e in s {
                    let e = e.map_err(|e| CompileError::Invalid(e.to_string()))?;
                    if e.name.starts_with("asyncify_")
                        || e.name.starts_with("andes.")
                        || e.name.starts_with("__asyncify")
                    {
                        return Err(CompileError::Conflict(format!("an export `{}`", e.name)));
                    }
                }
            }
            _ => {}
        }
    }

    if let Err(e) = Validator::new_with_features(wasmtime_features()).validate_all(module) {
        for (feature, why, extra) in UNSUPPORTED {
            if Validator::new_with_features(wasmtime_features() | *extra)
                .validate_all(module)
                .is_ok()
            {
                return Err(unsupported(feature, *why));
            }
        }
        return Err(unsupported(
            "a WebAssembly feature wasmtime 36 does not enable",
            e.to_string(),
        ));
    }

    let mut info = Info::default();
    // Type index -> (params, results) of function types.
    let mut func_types: Vec<Option<(Vec<ValType>, Vec<ValType>)>> = Vec::new();
    // Type of each function, imported then defined.
    let mut func_type_of: Vec<u32> = Vec::new();
    let mut memories = 0u32;
    let mut start: Option<u32> = None;
    let mut memory_name_taken = false;
    let mut code_index = 0usize;
    let err = |e: wasmparser::BinaryReaderError| CompileError::Invalid(e.to_string());

    for payload in Parser::new(0).parse_all(module) {
        match payload.map_err(err)? {
            Payload::TypeSection(s) => {
                for group in s {
                    for sub in group.map_err(err)?.into_types() {
                        func_types.push(match &sub.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f) => {
                                Some((f.params().to_vec(), f.results().to_vec()))
                            }
                            _ => None,
                        });
                    }
                }
                info.types = func_types.len() as u32;
            }
            Payload::ImportSection(s) => {
                for i in s {
                    match i.map_err(err)?.ty {
                        TypeRef::Func(t) => {
                            info.imported_funcs += 1;
                            func_type_of.push(t);
                        }
                        TypeRef::Memory(m) => {
                            if memories == 0 {
                                info.memory64 = m.memory64;
                            }
                            memories += 1
                        }
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(s) => {
                for t in s {
                    func_type_of.push(t.map_err(err)?);
                }
            }
            Payload::MemorySection(s) => {
                if memories == 0
                    && let Some(m) = s.clone().into_iter().next()
                {
                    info.memory64 = m.map_err(err)?.memory64;
                }
                memories += s.count()
            }
            Payload::ExportSection(s) => {
                for e in s {
                    let e = e.map_err(err)?;
                    match e.kind {
                        ExternalKind::Memory if e.index == 0 => info.memory_exported = true,
                        _ if e.name == crate::MEMORY_EXPORT => memory_name_taken = true,
                        ExternalKind::Func if e.name == "_start" => start = Some(e.index),
                        _ => {}
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let func = info.imported_funcs as usize + code_index;
                code_index += 1;
                let name = || format!("function {func}");
                let mut f = Function::default();
                let params = func_type_of
                    .get(func)
                    .and_then(|t| func_types.get(*t as usize))
                    .and_then(|t| t.as_ref())
                    .map_or(0, |(p, _)| p.len() as u32);
                f.locals = params;
                for l in body.get_locals_reader().map_err(err)? {
                    let (n, ty) = l.map_err(err)?;
                    if matches!(ty, ValType::Ref(_)) {
                        return Err(reference_values(name()));
                    }
                    f.locals = f.locals.checked_add(n).ok_or_else(|| {
                        CompileError::Invalid(format!("{}: too many locals", name()))
                    })?;
                }
                // The open blocks: for a loop, its index in `f.loops`.
                let mut frames: Vec<Option<usize>> = Vec::new();
                let mut table_op = None;
                let mut refs = false;
                let mut ops = body.get_operators_reader().map_err(err)?;
                // Nothing yet has branched or called.
                let mut prefix = true;
                while !ops.eof() {
                    let op = ops.read().map_err(err)?;
                    if prefix {
                        match op {
                            Operator::Loop { .. } => {
                                f.entry_loop = true;
                                prefix = false;
                            }
                            Operator::Block { .. }
                            | Operator::End
                            | Operator::Nop
                            | Operator::Drop
                            | Operator::Select
                            | Operator::LocalGet { .. }
                            | Operator::LocalSet { .. }
                            | Operator::LocalTee { .. }
                            | Operator::GlobalGet { .. }
                            | Operator::GlobalSet { .. }
                            | Operator::I32Const { .. }
                            | Operator::I64Const { .. }
                            | Operator::I32Add
                            | Operator::I32Sub
                            | Operator::I32Load { .. }
                            | Operator::I64Load { .. }
                            | Operator::I32Store { .. }
                            | Operator::I64Store { .. } => {}
                            _ => prefix = false,
                        }
                    }
                    match op {
                        Operator::Loop { .. } => {
                            let outermost = frames.iter().all(Option::is_none);
                            frames.push(Some(f.loops.len()));
                            f.loops.push(Loop { outermost, calls: false });
                        }
                        Operator::Block { .. }
                        | Operator::If { .. }
                        | Operator::Try { .. }
                        | Operator::TryTable { .. } => frames.push(None),
                        Operator::End | Operator::Delegate { .. } => {
                            frames.pop();
                        }
                        Operator::Call { .. }
                        | Operator::CallIndirect { .. }
                        | Operator::CallRef { .. } => {
                            f.calls = true;
                            if let Some(l) = frames.iter().rev().find_map(|x| *x) {
                                f.loops[l].calls = true;
                            }
                        }
                        Operator::MemoryCopy { .. } | Operator::MemoryFill { .. } => {
                            info.bulk_memory = true;
                            f.bulk = true;
                        }
                        Operator::ReturnCall { .. }
                        | Operator::ReturnCallIndirect { .. }
                        | Operator::ReturnCallRef { .. } => {
                            return Err(unsupported(
                                "tail calls (return_call)",
                                format!(
                                    "a checkpoint cannot unwind through them (in {}); \
                                     build without the tail-call target feature",
                                    name()
                                ),
                            ));
                        }
                        Operator::TableSet { .. } => table_op = table_op.or(Some("table.set")),
                        Operator::TableGrow { .. } => table_op = table_op.or(Some("table.grow")),
                        Operator::TableFill { .. } => table_op = table_op.or(Some("table.fill")),
                        Operator::TableCopy { .. } => table_op = table_op.or(Some("table.copy")),
                        Operator::TableInit { .. } => table_op = table_op.or(Some("table.init")),
                        Operator::RefNull { .. }
                        | Operator::RefFunc { .. }
                        | Operator::RefIsNull
                        | Operator::TableGet { .. }
                        | Operator::TypedSelect { .. } => refs = true,
                        _ => {}
                    }
                }
                if let Some(what) = table_op {
                    return Err(unsupported(
                        &format!("table mutation ({what})"),
                        format!(
                            "a snapshot cannot capture a table of function references, so \
                             tables must keep their initial contents (in {})",
                            name()
                        ),
                    ));
                }
                if refs {
                    return Err(reference_values(name()));
                }
                info.functions.push(f);
            }
            _ => {}
        }
    }

    // Values of reference type would have to be saved in the frames of an
    // unwind, which cannot hold them; they can only come from a function's parameters, results or
    // locals (checked above) and the operators refused above.
    for (i, t) in func_type_of.iter().enumerate() {
        if let Some(Some((params, results))) = func_types.get(*t as usize)
            && params.iter().chain(results).any(|v| matches!(v, ValType::Ref(_)))
        {
            return Err(reference_values(format!("the type of function {i}")));
        }
    }
    if memories == 0 {
        return Err(CompileError::NoMemory);
    }
    if memories > 1 {
        return Err(unsupported(
            "several linear memories (multi-memory)",
            format!("it has {memories}; andes compile supports modules with one"),
        ));
    }
    if memory_name_taken && !info.memory_exported {
        return Err(CompileError::Conflict(format!(
            "an export `{}` that is not its memory, and its memory is not exported",
            crate::MEMORY_EXPORT
        )));
    }
    let Some(start) = start else {
        return Err(CompileError::NoStart);
    };
    match func_type_of.get(start as usize).and_then(|t| func_types.get(*t as usize)) {
        Some(Some((p, r))) if p.is_empty() && r.is_empty() => {}
        _ => return Err(CompileError::NoStart),
    }
    Ok(info)
}

fn reference_values(place: String) -> CompileError {
    unsupported(
        "reference values (funcref/externref in locals, parameters or on the stack)",
        format!("a checkpoint cannot save them in its frames (in {place})"),
    )
}
