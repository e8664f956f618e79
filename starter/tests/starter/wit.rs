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

#[test]
fn host_imports_match_the_wit_exactly() {
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
    let host = Host::new(HostConfig { max_instances: 1, ..Default::default() }).unwrap();
    let got: BTreeSet<_> =
        andes_starter::starter::andes_import_signatures(&host).into_iter().collect();
    assert_eq!(got, expected);
}
