use andes_protocol::pool::FileData;
use classad::ClassAd;

use super::claim::*;
use super::files::*;

use super::routes::*;
/// The sandbox names of the job's streams: one contract, in `andes-protocol`.
pub use andes_protocol::pool::{STDERR_NAME, STDOUT_NAME};

#[test]
fn claim_ids_name_their_slot_and_differ() {
    let a = new_claim_id(3);
    let b = new_claim_id(3);
    assert_ne!(a, b);
    assert_eq!(claim_slot(&a), Some(3));
    assert_eq!(a.len(), 2 + 32);
    assert_eq!(claim_slot("junk"), None);
}

#[test]
fn digests_parse() {
    let d = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(parse_digest(&d), Some([0xab; 32]));
    assert_eq!(parse_digest("sha256:xyz"), None);
    assert_eq!(parse_digest(&"ab".repeat(32)), None);
}

/// condor_tail reads the job's stream beneath its sandbox: the last
/// bytes, or from an offset; nothing yet is empty; a stream the job
/// replaced with a link to a host file is refused, never followed.
#[cfg(unix)]
#[test]
fn tail_reads_the_stream_beneath_the_sandbox_and_never_follows_a_link() {
    use andes_protocol::pool::TailRequest;
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().join("sandbox");
    std::fs::create_dir(&sandbox).unwrap();
    let req = |offset, max, stderr| TailRequest { claim_id: String::new(), stderr, offset, max };
    let r = read_tail(&sandbox, &req(None, 4, false)).unwrap();
    assert_eq!((r.offset, r.data.len(), r.size), (0, 0, 0));
    std::fs::write(sandbox.join(STDOUT_NAME), b"line one\nline two\n").unwrap();
    let r = read_tail(&sandbox, &req(None, 9, false)).unwrap();
    assert_eq!((r.offset, r.data.as_slice(), r.size), (9, &b"line two\n"[..], 18));
    let r = read_tail(&sandbox, &req(Some(5), 3, false)).unwrap();
    assert_eq!((r.offset, r.data.as_slice()), (5, &b"one"[..]));
    let r = read_tail(&sandbox, &req(Some(99), 3, false)).unwrap();
    assert_eq!((r.offset, r.data.len()), (18, 0));
    std::fs::write(dir.path().join("secret"), b"host key").unwrap();
    std::os::unix::fs::symlink("../secret", sandbox.join(STDERR_NAME)).unwrap();
    let e = read_tail(&sandbox, &req(None, 100, true)).unwrap_err();
    assert!(e.contains(STDERR_NAME), "{e}");
}

#[test]
fn big_outputs_and_those_past_the_budget_are_named_for_streaming() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    for n in ["a", "b", "c"] {
        std::fs::write(p.join(n), vec![1u8; 600 << 10]).unwrap();
    }
    std::fs::write(p.join("big"), vec![2u8; (2 << 20) + 1]).unwrap();
    let Outputs { files, streamed, error, .. } =
        collect_outputs(p, &ClassAd::new(), &[], 1 << 30, 1 << 20);
    assert!(error.is_none(), "{error:?}");
    let how: Vec<(&str, bool, u64)> =
        files.iter().map(|f| (f.name.as_str(), f.streamed.is_some(), f.len())).collect();
    assert_eq!(
        how,
        [
            ("a", false, 600 << 10),
            ("b", true, 600 << 10),
            ("big", true, (2 << 20) + 1),
            ("c", true, 600 << 10)
        ]
    );
    assert!(files.iter().all(|f| f.streamed.is_none() || f.data.is_empty()));
    let mut kept: Vec<_> = streamed.keys().map(String::as_str).collect();
    kept.sort();
    assert_eq!(kept, ["b", "big", "c"]);
    // The job's RequestDisk bounds streamed files too.
    let Outputs { error, .. } = collect_outputs(p, &ClassAd::new(), &[], 3 << 20, 1 << 20);
    assert!(error.unwrap().contains("exceed"));
}

#[test]
fn outputs_are_new_files_and_streams_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("input.txt"), b"in").unwrap();
    std::fs::write(p.join("result.txt"), b"42").unwrap();
    std::fs::write(p.join(STDOUT_NAME), b"hello").unwrap();
    std::fs::create_dir(p.join("sub")).unwrap();
    let job = ClassAd::new();
    let Outputs { files: out, error: err, .. } =
        collect_outputs(p, &job, &[("input.txt".into(), 2)], 1 << 20, u64::MAX);
    let names: Vec<_> = out.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["_andes_stdout", "result.txt"]);
    assert!(err.is_none());
    let Outputs { error: err, .. } = collect_outputs(p, &job, &[], 3, u64::MAX);
    assert!(err.unwrap().contains("exceed"));
    let mut listed = ClassAd::new();
    listed.insert_value("TransferOutput", "result.txt, missing.txt");
    let Outputs { files: out, error: err, .. } =
        collect_outputs(p, &listed, &[], 1 << 20, u64::MAX);
    assert_eq!(out.len(), 2);
    assert!(err.unwrap().contains("missing.txt"));
}

#[cfg(unix)]
#[test]
fn outputs_never_follow_links_nor_open_special_files() {
    // The sandbox sits under EXECUTE beside the host's keys, as on a host.
    let top = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(top.path().join("keys")).unwrap();
    std::fs::write(top.path().join("keys/host"), b"SECRET KEY").unwrap();
    let p = top.path().join("execute/dir_1_1");
    std::fs::create_dir_all(&p).unwrap();
    let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, p.join(name)).unwrap();
    // Named streams replaced by links: refused, never read.
    link("../../keys/host", STDOUT_NAME);
    link("/etc/passwd", STDERR_NAME);
    let Outputs { files: out, error: err, .. } =
        collect_outputs(&p, &ClassAd::new(), &[], 1 << 20, u64::MAX);
    assert!(out.iter().all(|f| !f.data.windows(6).any(|w| w == b"SECRET")), "{out:?}");
    let err = err.unwrap();
    assert!(err.contains("symbolic link"), "{err}");
    std::fs::remove_file(p.join(STDOUT_NAME)).unwrap();
    std::fs::remove_file(p.join(STDERR_NAME)).unwrap();
    // Unnamed outputs: links and special files are left behind.
    link("../../keys/host", "r2");
    let made = std::process::Command::new("mkfifo").arg(p.join("pipe")).status().unwrap();
    assert!(made.success(), "mkfifo: {made}");
    std::fs::write(p.join("real.txt"), b"mine").unwrap();
    let Outputs { files: out, error: err, .. } =
        collect_outputs(&p, &ClassAd::new(), &[], 1 << 20, u64::MAX);
    let names: Vec<_> = out.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["real.txt"]);
    assert!(err.is_none(), "{err:?}");
    // Named outputs: a link, a special file, a link on the way, a link in
    // a named directory: each refused with the reason.
    std::fs::create_dir(p.join("d")).unwrap();
    std::fs::write(p.join("d/ok"), b"fine").unwrap();
    std::os::unix::fs::symlink("../../../keys", p.join("d/keys")).unwrap();
    link("../../keys", "kdir");
    for (listed, want) in [
        ("r2", "symbolic link"),
        ("pipe", "not a regular file"),
        ("kdir/host", "symbolic link"),
        ("d", "not a regular file"),
    ] {
        let mut job = ClassAd::new();
        job.insert_value("TransferOutput", listed);
        let Outputs { files: out, error: err, .. } =
            collect_outputs(&p, &job, &[], 1 << 20, u64::MAX);
        let err = err.unwrap_or_else(|| panic!("{listed}: no refusal"));
        assert!(err.contains(want), "{listed}: {err}");
        assert!(out.iter().all(|f| !f.data.starts_with(b"SECRET")), "{listed}");
    }
    // A named directory comes back with its regular files, under its name
    // (or its contents alone with a trailing slash), as HTCondor does.
    std::fs::remove_file(p.join("d/keys")).unwrap();
    let mut job = ClassAd::new();
    job.insert_value("TransferOutput", "d, d/");
    let Outputs { files: out, error: err, .. } = collect_outputs(&p, &job, &[], 1 << 20, u64::MAX);
    assert!(err.is_none(), "{err:?}");
    let names: Vec<_> = out.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["d/ok", "ok"]);
    assert_eq!(std::fs::read(top.path().join("keys/host")).unwrap(), b"SECRET KEY");
}

#[cfg(unix)]
#[test]
fn inputs_are_written_without_following_links() {
    let top = tempfile::tempdir().unwrap();
    let p = top.path().join("sandbox");
    std::fs::create_dir(&p).unwrap();
    std::os::unix::fs::symlink("..", p.join("up")).unwrap();
    let files = vec![FileData::inline("up/planted", b"x".to_vec())];
    assert!(write_inputs(&p, &files, &p).is_err());
    assert!(!top.path().join("planted").exists());
}

#[test]
fn inputs_are_checked() {
    let mut job = ClassAd::new();
    job.insert_value("RequestDisk", 1i64);
    let ok = vec![FileData::inline("a", vec![0; 1024])];
    assert!(check_inputs(&job, &ok).is_ok());
    let big = vec![FileData::inline("a", vec![0; 1025])];
    assert!(matches!(check_inputs(&job, &big), Err(PoolError::BadInput(_))));
    let bad = vec![FileData::inline("../x", vec![])];
    assert!(matches!(check_inputs(&job, &bad), Err(PoolError::BadInput(_))));
}

#[test]
fn preserved_outputs_come_back_under_their_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::create_dir_all(p.join("d1/d2")).unwrap();
    std::fs::write(p.join("d1/o3"), b"3").unwrap();
    std::fs::write(p.join("d1/d2/o4"), b"4").unwrap();
    let names = |job: &ClassAd| {
        let Outputs { files, error, .. } = collect_outputs(p, job, &[], 1 << 20, u64::MAX);
        assert!(error.is_none(), "{error:?}");
        files.into_iter().map(|f| f.name).collect::<Vec<_>>()
    };
    let mut job = ClassAd::new();
    job.insert_value("TransferOutput", "d1/o3, d1/d2/");
    assert_eq!(names(&job), ["o3", "o4"]);
    // Preserved, a trailing slash is ignored, as HTCondor's manual says.
    job.insert_value("PreserveRelativePaths", true);
    assert_eq!(names(&job), ["d1/d2/o4", "d1/o3"]);
    job.insert_value("TransferOutput", "./d1/o3, d1/d2");
    assert_eq!(names(&job), ["d1/d2/o4", "d1/o3"]);
    // Still nothing above the sandbox.
    job.insert_value("TransferOutput", "../x");
    let Outputs { error, .. } = collect_outputs(p, &job, &[], 1 << 20, u64::MAX);
    assert!(error.unwrap().contains("refused"));
}
