//! The compiled-module cache holds native code the host runs: a directory others can
//! write is refused, and a cache file not written by this host (or altered since) is
//! never loaded.

use andes_starter::engine::{Host, HostConfig, module_digest};

fn module() -> Vec<u8> {
    wat::parse_str(r#"(module (func (export "_start")))"#).unwrap()
}

fn config(dir: &std::path::Path) -> HostConfig {
    HostConfig { max_instances: 2, cache_dir: Some(dir.to_path_buf()), ..Default::default() }
}

/// The cache's compiled-code files.
fn cwasm_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
#[test]
fn a_cache_directory_others_can_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("cache");
    // Made by the host: mode 0700.
    drop(Host::new(config(&dir)).unwrap());
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let key = std::fs::metadata(dir.join(".key")).unwrap().permissions().mode() & 0o777;
    assert_eq!(key, 0o600);
    for bad in [0o777, 0o770, 0o702] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(bad)).unwrap();
        let e = Host::new(config(&dir)).err().expect("refused");
        let text = format!("{e:#}");
        assert!(text.contains("the module cache directory"), "{text}");
        assert!(text.contains("is open to others"), "{text}");
        assert!(text.contains(&dir.display().to_string()), "{text}");
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    Host::new(config(&dir)).unwrap();
    // A key others can read is refused too.
    std::fs::set_permissions(dir.join(".key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Host::new(config(&dir)).err().expect("refused");
    assert!(format!("{e:#}").contains("the module cache's key"), "{e:#}");
}

#[test]
fn a_tampered_cache_file_is_not_loaded() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("cache");
    let bytes = module();
    let host = Host::new(config(&dir)).unwrap();
    host.module(&bytes).unwrap();
    assert_eq!(host.compilations(), 1);
    let files = cwasm_files(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let file = &files[0];
    let good = std::fs::read(file).unwrap();

    // Untouched, a restarted host loads it without compiling.
    let h = Host::new(config(&dir)).unwrap();
    h.module(&bytes).unwrap();
    assert_eq!(h.compilations(), 0);

    // One byte of the code changed (its MAC kept): not loaded, removed, compiled again.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    std::fs::write(file, &bad).unwrap();
    let h = Host::new(config(&dir)).unwrap();
    h.module(&bytes).unwrap();
    assert_eq!(h.compilations(), 1, "a tampered file was loaded");
    assert_eq!(std::fs::read(file).unwrap(), good, "the file is written anew");

    // Code wasmtime itself would accept, planted without the cache's key: refused.
    let planted = host.engine().precompile_module(&bytes).unwrap();
    std::fs::write(file, &planted).unwrap();
    let h = Host::new(config(&dir)).unwrap();
    h.module(&bytes).unwrap();
    assert_eq!(h.compilations(), 1, "an unauthenticated file was loaded");

    // Sealed with another cache's key: refused.
    let other = top.path().join("other");
    let o = Host::new(config(&other)).unwrap();
    o.module(&bytes).unwrap();
    std::fs::copy(&cwasm_files(&other)[0], file).unwrap();
    let h = Host::new(config(&dir)).unwrap();
    h.module(&bytes).unwrap();
    assert_eq!(h.compilations(), 1, "another cache's file was loaded");
    assert!(h.is_cached_in_memory(&module_digest(&bytes)));
}
