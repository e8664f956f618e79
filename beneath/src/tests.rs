use super::*;

fn setup() -> (tempfile::TempDir, PathBuf, Beneath) {
    let t = tempfile::tempdir().unwrap();
    let outside = t.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"the host's key").unwrap();
    let root = t.path().join("sandbox");
    std::fs::create_dir(&root).unwrap();
    let b = Beneath::open(&root).unwrap();
    (t, root, b)
}

#[test]
fn names_must_be_plain_relative_paths() {
    for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "a\\b", "a\0b"] {
        assert!(matches!(components(bad), Err(Refused::BadName { .. })), "{bad:?}");
    }
    let deep = vec!["d"; MAX_DEPTH + 1].join("/");
    assert!(matches!(components(&deep), Err(Refused::TooDeep { .. })));
    assert_eq!(components("a/b.txt").unwrap(), vec!["a", "b.txt"]);
}

#[cfg(unix)]
#[test]
fn a_link_is_never_followed_for_reading() {
    let (_t, root, b) = setup();
    std::os::unix::fs::symlink("../outside/secret", root.join("out")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("d")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("abs")).unwrap();
    std::fs::create_dir(root.join("real")).unwrap();
    std::fs::write(root.join("real/f"), b"inside").unwrap();
    std::os::unix::fs::symlink("f", root.join("real/g")).unwrap();
    for name in ["out", "d/secret", "abs", "real/g"] {
        match b.read(name, 1 << 20) {
            Err(Refused::Link { path, target }) => {
                assert!(name.starts_with(&path), "{name}: {path}");
                assert!(target.is_some());
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    assert_eq!(b.read("real/f", 100).unwrap(), b"inside");
    let msg = b.read("out", 10).unwrap_err().to_string();
    assert!(msg.contains("out is a symbolic link (to ../outside/secret)"), "{msg}");
}

#[cfg(unix)]
#[test]
fn a_link_is_never_followed_for_writing() {
    let (t, root, b) = setup();
    std::os::unix::fs::symlink("../outside/secret", root.join("out")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("d")).unwrap();
    assert!(matches!(b.write("out", b"x"), Err(Refused::Link { .. })));
    assert!(matches!(b.write("d/new", b"x"), Err(Refused::Link { .. })));
    assert!(matches!(b.create_dirs("d/sub"), Err(Refused::Link { .. })));
    assert_eq!(std::fs::read(t.path().join("outside/secret")).unwrap(), b"the host's key");
    assert!(!t.path().join("outside/new").exists());
    assert!(!t.path().join("outside/sub").exists());
    b.write("a/b/c.txt", b"made").unwrap();
    assert_eq!(std::fs::read(root.join("a/b/c.txt")).unwrap(), b"made");
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_without_blocking() {
    let (_t, root, b) = setup();
    let fifo = root.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Neither blocks (no writer, no reader) nor reads or writes the FIFO.
    assert!(matches!(b.read("fifo", 10), Err(Refused::Special { .. })));
    assert!(matches!(b.write("fifo", b"x"), Err(Refused::Special { .. })));
    assert_eq!(b.entry("fifo").unwrap().kind, Kind::Special);
    std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
    assert!(matches!(b.read("zero", 10), Err(Refused::Link { .. })));
    // Opened without a look first (a name a listing found a file, replaced
    // since): refused all the same, without blocking or following.
    assert!(matches!(b.open_found("fifo"), Err(Refused::Special { .. })));
    assert!(matches!(b.open_found("zero"), Err(Refused::Link { .. })));
    std::fs::write(root.join("file"), b"four").unwrap();
    let (f, len) = b.open_found("file").unwrap();
    assert_eq!(read_opened("file", f, len, 10).unwrap(), b"four");
    let (f, len) = b.open_found("file").unwrap();
    assert!(matches!(read_opened("file", f, len, 3), Err(Refused::TooLarge { .. })));
}

#[test]
fn reads_are_bounded() {
    let (_t, root, b) = setup();
    std::fs::write(root.join("big"), vec![7u8; 1000]).unwrap();
    assert!(matches!(b.read("big", 999), Err(Refused::TooLarge { len: 1000, .. })));
    assert_eq!(b.read("big", 1000).unwrap().len(), 1000);
    assert!(matches!(b.read("nothing", 10), Err(Refused::Missing { .. })));
    std::fs::create_dir(root.join("dir")).unwrap();
    assert!(matches!(b.read("dir", 10), Err(Refused::WrongKind { dir: true, .. })));
    assert!(matches!(b.read("big/x", 10), Err(Refused::WrongKind { dir: false, .. })));
}

#[cfg(unix)]
#[test]
fn walks_list_links_without_entering_them_and_are_bounded() {
    let (_t, root, b) = setup();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/b/f"), b"123").unwrap();
    std::fs::write(root.join("top"), b"1").unwrap();
    std::os::unix::fs::symlink("../outside", root.join("a/link")).unwrap();
    let all = b.walk("", 100).unwrap();
    let shown: Vec<(&str, Kind)> = all.iter().map(|e| (e.path.as_str(), e.kind)).collect();
    assert_eq!(
        shown,
        vec![
            ("a", Kind::Dir),
            ("top", Kind::File),
            ("a/b", Kind::Dir),
            ("a/link", Kind::Link),
            ("a/b/f", Kind::File),
        ]
    );
    assert_eq!(b.usage(100).unwrap(), 4);
    assert!(matches!(b.walk("", 3), Err(Refused::TooMany { limit: 3, .. })));
    assert!(matches!(b.walk("a/link", 10), Err(Refused::Link { .. })));
    assert_eq!(b.walk("a", 10).unwrap().len(), 3);
}

#[cfg(unix)]
#[test]
fn clear_removes_links_not_their_targets() {
    let (t, root, b) = setup();
    std::os::unix::fs::symlink("../outside", root.join("d")).unwrap();
    std::os::unix::fs::symlink("../outside/secret", root.join("f")).unwrap();
    std::fs::create_dir_all(root.join("x/y")).unwrap();
    std::os::unix::fs::symlink("../../../outside", root.join("x/y/z")).unwrap();
    std::fs::write(root.join("x/y/data"), b"1").unwrap();
    b.clear().unwrap();
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
    assert_eq!(std::fs::read(t.path().join("outside/secret")).unwrap(), b"the host's key");
}

#[test]
fn clear_handles_any_depth_with_few_handles() {
    let (_t, root, b) = setup();
    // Deeper than PATH_MAX allows naming from the root: built one level at a
    // time through handles, as a guest can.
    let mut d = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
    let name = "n".repeat(200);
    for _ in 0..300 {
        d.create_dir(&name).unwrap();
        d.write("f", b"x").unwrap();
        d = d.open_dir(&name).unwrap();
    }
    drop(d);
    b.clear().unwrap();
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
}

#[test]
fn walks_refuse_trees_deeper_than_the_limit() {
    let (_t, root, b) = setup();
    let deep = vec!["d"; MAX_DEPTH + 2].join("/");
    std::fs::create_dir_all(root.join(&deep)).unwrap();
    assert!(matches!(b.walk("", 10_000), Err(Refused::TooDeep { .. })));
}

/// A file written for its owner alone reads back as open to no one else; one
/// whose mode lets others in is named as such (Windows: by its access control
/// list, which `tests/system/portability.rs` checks under wine).
#[cfg(unix)]
#[test]
fn a_file_for_its_owner_alone_is_told_from_one_open_to_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("secret");
    crate::replace_file(&p, b"x", 0o600).unwrap();
    crate::private::restrict_to_owner(&p).unwrap();
    let f = std::fs::File::open(&p).unwrap();
    assert_eq!(crate::private::open_to_others(&f).unwrap(), None);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    let who = crate::private::open_to_others(&f).unwrap().expect("open to its group");
    assert!(who.contains("640"), "{who}");
}

/// Whatever a listing says an entry is, clearing removes it as what it is:
/// FIFOs and sockets unopened, names that are not UTF-8, directories among
/// files at every level, and nothing outside.
#[cfg(unix)]
#[test]
fn clear_removes_special_files_and_names_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let (t, root, b) = setup();
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9");
    std::fs::write(root.join(odd), b"x").unwrap();
    std::fs::create_dir_all(root.join("d").join(odd)).unwrap();
    std::fs::write(root.join("d").join(odd).join("f"), b"y").unwrap();
    let fifo = std::ffi::CString::new(root.join("d/fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the named FIFO.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let _sock = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    std::os::unix::fs::symlink("../outside", root.join("d/link")).unwrap();
    b.clear().unwrap();
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
    assert_eq!(std::fs::read(t.path().join("outside/secret")).unwrap(), b"the host's key");
}
