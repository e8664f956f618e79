//! What the hostile jobs share: WASI calls the standard library does not
//! offer on stable Rust.

#[link(wasm_import_module = "wasi_snapshot_preview1")]
unsafe extern "C" {
    #[link_name = "path_symlink"]
    fn wasi_path_symlink(
        old_path: *const u8,
        old_len: usize,
        fd: u32,
        new_path: *const u8,
        new_len: usize,
    ) -> u16;
}

/// Makes a symbolic link `name` holding `target`, in the sandbox (the first
/// preopened directory, descriptor 3). Errors are WASI errnos.
pub fn symlink(target: &str, name: &str) -> Result<(), u16> {
    // SAFETY: both strings outlive the call, which only reads them.
    let errno =
        unsafe { wasi_path_symlink(target.as_ptr(), target.len(), 3, name.as_ptr(), name.len()) };
    if errno == 0 { Ok(()) } else { Err(errno) }
}
