//! The host's `andes:job` imports are exactly what `wit/job.wit` defines,
//! lowered by the canonical ABI: same modules, names and core signatures.

use std::collections::BTreeSet;
use std::path::Path;

use andes_starter::{Host, HostConfig};
use wit_parser::abi::{AbiVariant, WasmType};
use wit_parser::{Resolve, WorldItem};

fn core(t: &WasmType) -> String {
    match t {
        WasmType::I32 | WasmType::Pointer | WasmType::Length => "i32",
        WasmType::I64 | WasmType::PointerOrI64 => "i64",
        WasmType::F32 => "f32",
        WasmType::F64 => "f64",
    }
    .to_string()
}

type Signature = (String, String, Vec<String>, Vec<String>);

/// Every function of `wit/job.wit`'s world `job`: its core-module import
/// (module, name) and its core signature, as the canonical ABI lowers it.
fn wit_imports() -> BTreeSet<Signature> {
    let mut resolve = Resolve::new();
    let (pkg, _) = resolve
        .push_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit"))
        .expect("wit parses");
    let world = resolve.select_world(pkg, Some("job")).expect("world `job`");
    let mut expected = BTreeSet::new();
    for (key, item) in &resolve.worlds[world].imports {
        let WorldItem::Interface { id, .. } = item else { continue };
        let module = resolve.name_world_key(key);
        for (name, func) in &resolve.interfaces[*id].functions {
            let sig = resolve.wasm_signature(AbiVariant::GuestImport, func);
            expected.insert((
                module.clone(),
                name.clone(),
                sig.params.iter().map(core).collect::<Vec<_>>(),
                sig.results.iter().map(core).collect::<Vec<_>>(),
            ));
        }
    }
    assert_eq!(expected.len(), 8, "{expected:#?}");
    expected
}

#[test]
fn host_imports_match_the_wit_exactly() {
    let expected = wit_imports();
    let host = Host::new(HostConfig { max_instances: 1, ..Default::default() }).unwrap();
    let got: BTreeSet<_> =
        andes_starter::starter::andes_import_signatures(&host).into_iter().collect();
    assert_eq!(got, expected);
}

/// The C and Go guest SDKs keep the WIT's binary contract: every `andes:job`
/// import of their test programs (which call every function) and of the
/// samples built on them is one of the WIT's functions with its exact core
/// signature, and the test programs import all of them.
#[test]
fn the_c_and_go_sdks_import_the_wits_functions_with_its_signatures() {
    use wasmparser::{Parser, Payload, TypeRef, ValType};
    let expected = wit_imports();
    let val = |t: &ValType| match t {
        ValType::I32 => "i32",
        ValType::I64 => "i64",
        ValType::F32 => "f32",
        ValType::F64 => "f64",
        other => panic!("{other:?} is no core type of the canonical ABI"),
    };
    for (module, whole) in [
        ("test_andes", true),
        ("andes_go_test", true),
        ("coopsum", false),
        ("coopsum_cpp", false),
        ("coopgo", false),
    ] {
        let bytes = crate::common::sample(module);
        let mut types = Vec::new();
        let mut got = BTreeSet::new();
        for payload in Parser::new(0).parse_all(&bytes) {
            match payload.unwrap() {
                Payload::TypeSection(r) => {
                    for t in r.into_iter_err_on_gc_types() {
                        let f = t.unwrap();
                        let params = f.params().iter().map(|t| val(t).to_string()).collect();
                        let results = f.results().iter().map(|t| val(t).to_string()).collect();
                        types.push((params, results));
                    }
                }
                Payload::ImportSection(r) => {
                    for import in r {
                        let import = import.unwrap();
                        if !import.module.starts_with("andes:") {
                            continue;
                        }
                        let TypeRef::Func(ty) = import.ty else {
                            panic!("{module}: {}/{} is not a function", import.module, import.name)
                        };
                        let (params, results): &(Vec<String>, Vec<String>) = &types[ty as usize];
                        got.insert((
                            import.module.to_string(),
                            import.name.to_string(),
                            params.clone(),
                            results.clone(),
                        ));
                    }
                }
                _ => {}
            }
        }
        let foreign: Vec<_> = got.difference(&expected).collect();
        assert!(foreign.is_empty(), "{module} imports what the WIT does not define: {foreign:#?}");
        if whole {
            assert_eq!(got, expected, "{module} does not import every function of the WIT");
        } else {
            assert!(!got.is_empty(), "{module} imports nothing of andes:job");
        }
    }
}
