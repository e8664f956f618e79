//! Big input and output files on a pool of real processes: they move between
//! the schedd and the host as streams of their own, disk to disk, never whole
//! in a message (whose bodies the daemons bound at 16 MiB and 64 MiB).

use crate::common;

use std::time::Duration;

use common::Lcg;
use common::pool::{Pool, int, wait_or};

/// The most memory a process has held (VmHWM), bytes; `None` off Linux.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// 40 MiB of random bytes in `jobs/big.in`.
fn big_input(p: &Pool) -> Vec<u8> {
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    let mut rng = Lcg(20261125);
    let input: Vec<u8> = (0..40 << 20).map(|_| rng.next(256) as u8).collect();
    std::fs::write(jobs.join("big.in"), &input).unwrap();
    input
}

const BIG_JOB: &str = "executable = copyfile.wasm\narguments = big.in big.out 3\n\
     transfer_input_files = big.in\nrequest_disk = 400MB\n\
     output = big.stdout\nerror = big.stderr\nlog = big.log\nqueue\n";

/// The job's output is its 40 MiB input three times over, and its stdout says so.
fn output_is_input_thrice(p: &Pool, input: &[u8]) {
    let jobs = p.path().join("jobs");
    assert_eq!(std::fs::read_to_string(jobs.join("big.stdout")).unwrap().trim(), "125829120");
    let out = std::fs::read(jobs.join("big.out")).unwrap();
    assert_eq!(out.len(), 3 * input.len());
    for part in out.chunks(input.len()) {
        assert!(part == input, "the output is not the input three times");
    }
}

#[test]
fn input_and_output_files_far_larger_than_any_message_move_whole() {
    let p = Pool::new("NUM_CPUS = 1", 1);
    // 40 MiB in (more than the host takes in a request body), 120 MiB out
    // (more than the schedd reads in an answer, even before base64).
    let input = big_input(&p);
    p.submit("alice", "big", BIG_JOB);
    wait_or("the job to finish", Duration::from_secs(180), || p.history().len() == 1, || p.logs());
    let h = &p.history()[0];
    assert_eq!(int(h, "JobStatus"), 4, "{h}");
    assert_eq!(int(h, "ExitCode"), 0, "{h}");
    output_is_input_thrice(&p, &input);
    // Streams, not bodies: neither daemon ever held the output whole (each
    // peaks near 40-50 MiB here; a message carrying it would need 160 MiB).
    let pid = |proc: &Option<common::pool::Proc>| proc.as_ref().map_or(0, |x| x.child.id());
    for (who, pid) in [("schedd", pid(&p.schedd)), ("host", pid(&p.hosts[0]))] {
        let peak = peak_rss(pid).expect("/proc/PID/status has VmHWM");
        eprintln!("{who}: peak RSS {} MiB", peak >> 20);
        assert!(peak < 100 << 20, "the {who} peaked at {} MiB", peak >> 20);
    }
}

/// The same through the spool: `andes submit --spool` uploads the input as a
/// stream, the schedd keeps it as a file and streams it to the host, keeps the
/// output in the spool, and `andes transfer-data` fetches it as a stream.
#[test]
fn a_spooled_job_s_big_files_go_through_the_spool_as_streams() {
    let p = Pool::new("NUM_CPUS = 1", 1);
    let input = big_input(&p);
    let jobs = p.path().join("jobs");
    std::fs::write(jobs.join("big.sub"), BIG_JOB).unwrap();
    p.submit("alice", "hello", "executable = hello.wasm\nqueue\n");
    p.ok("alice", &["submit", "--spool", jobs.join("big.sub").to_str().unwrap()]);
    wait_or(
        "the spooled job to complete",
        Duration::from_secs(180),
        || p.queue().iter().any(|a| int(a, "ClusterId") == 2 && int(a, "JobStatus") == 4),
        || p.logs(),
    );
    // Nothing in the submitter's directory until it is fetched.
    assert!(!jobs.join("big.out").exists());
    let stored: Vec<_> = std::fs::read_dir(p.path().join("spool/uploads"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .collect();
    assert!(stored.contains(&(input.len() as u64)), "uploads: {stored:?}");
    p.ok("alice", &["transfer-data", "2"]);
    output_is_input_thrice(&p, &input);
    wait_or("the job to leave", Duration::from_secs(30), || p.history().len() == 2, || p.logs());
}

/// Submits `jobs` (name, submit text) as alice and waits until all have
/// left the queue.
fn run_jobs(p: &Pool, jobs: &[(&str, &str)]) {
    for (name, text) in jobs {
        p.submit("alice", name, text);
    }
    wait_or(
        "the jobs to finish",
        Duration::from_secs(120),
        || p.history().len() == jobs.len(),
        || format!("{:#?}\n{}", p.queue(), p.logs()),
    );
}

/// `data/in.txt` and an empty `results/` beside the submit files, as the
/// reproductions of the two commands have them.
pub(crate) fn remap_workspace(p: &Pool) -> std::path::PathBuf {
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(jobs.join("data")).unwrap();
    std::fs::create_dir_all(jobs.join("results")).unwrap();
    std::fs::write(jobs.join("data/in.txt"), "the input\n").unwrap();
    jobs
}

/// `transfer_output_remaps` and `preserve_relative_paths`, which ezdag writes
/// into every submit file, land files where HTCondor puts them.
#[test]
fn remapped_and_preserved_files_land_where_htcondor_puts_them() {
    let p = Pool::new("NUM_CPUS = 2", 1);
    let jobs = remap_workspace(&p);
    run_jobs(
        &p,
        &[
            // The file comes back as out.txt and is written at results/out.txt.
            (
                "remap",
                "executable = copyfile.wasm\narguments = in.txt out.txt\n\
                 transfer_input_files = data/in.txt\ntransfer_output_files = out.txt\n\
                 transfer_output_remaps = \"out.txt=results/out.txt\"\n\
                 output = remap.stdout\nlog = remap.log\nqueue\n",
            ),
            // The input arrives at data/in.txt, not flattened to in.txt.
            (
                "keep",
                "executable = copyfile.wasm\narguments = data/in.txt kept.txt\n\
                 transfer_input_files = data/in.txt\npreserve_relative_paths = True\n\
                 log = keep.log\nqueue\n",
            ),
            // Preserved both ways: out to data/copy.txt, back to data/copy.txt;
            // a remap of a directory moves what comes back under it, into
            // directories made for it; spaces and chains as HTCondor reads them.
            (
                "both",
                "executable = copyfile.wasm\narguments = data/in.txt data/copy.txt\n\
                 transfer_input_files = data/in.txt\npreserve_relative_paths = True\n\
                 transfer_output_files = data/copy.txt, data/in.txt\n\
                 transfer_output_remaps = \" data/in.txt = again ; again = new/$(Cluster)/in.txt \"\n\
                 output = both.stdout\nlog = both.log\nqueue\n",
            ),
        ],
    );
    for h in p.history() {
        assert_eq!((int(&h, "JobStatus"), int(&h, "ExitCode")), (4, 0), "{h}");
    }
    let read =
        |f: &str| std::fs::read_to_string(jobs.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert_eq!(read("results/out.txt"), "the input\n");
    assert!(!jobs.join("out.txt").exists(), "out.txt was not remapped");
    // The stream goes where `output` says.
    assert_eq!(read("remap.stdout").trim(), "10");
    assert_eq!(read("kept.txt"), "the input\n");
    assert_eq!(read("data/copy.txt"), "the input\n");
    assert!(!jobs.join("copy.txt").exists());
    assert_eq!(read("new/3/in.txt"), "the input\n");
    assert_eq!(read("both.stdout").trim(), "10");
    // Spooled: the preserved input travels through the schedd's store under
    // its relative path, and the remaps apply when its owner fetches the output.
    std::fs::write(
        jobs.join("spooled.sub"),
        "executable = copyfile.wasm\narguments = data/in.txt data/spooled.txt\n\
         transfer_input_files = data/in.txt\npreserve_relative_paths = True\n\
         transfer_output_files = data/spooled.txt\n\
         transfer_output_remaps = \"data = results/spooled\"\nqueue\n",
    )
    .unwrap();
    p.ok("alice", &["submit", "--spool", jobs.join("spooled.sub").to_str().unwrap()]);
    wait_or(
        "the spooled job to complete",
        Duration::from_secs(60),
        || p.queue().iter().any(|a| int(a, "ClusterId") == 4 && int(a, "JobStatus") == 4),
        || p.logs(),
    );
    p.ok("alice", &["transfer-data", "4"]);
    assert_eq!(read("results/spooled/spooled.txt"), "the input\n");
    assert!(!jobs.join("data/spooled.txt").exists());
}

/// `andes submit` and the schedd hold a job's remaps to one figure (the two
/// crates read the list each, as they may not depend on each other).
#[test]
fn submit_and_schedd_bound_remaps_alike() {
    assert_eq!(andes_submit::MAX_REMAPS, andes_job::files::MAX_REMAPS);
}

/// A job's input files count toward its disk from its first write: of two
/// jobs that each copy a 1 MiB input, with 2.5 MiB of disk, the one writing
/// 1 MiB ends well and the one writing 2 MiB is stopped (the input and its
/// copies would hold 3 MiB). The host knows an empty sandbox without
/// walking it; one it wrote inputs into is measured.
#[test]
fn input_files_count_toward_the_jobs_disk() {
    let p = Pool::new("NUM_CPUS = 1", 1);
    let jobs = p.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::write(jobs.join("small.in"), vec![7u8; 1 << 20]).unwrap();
    p.submit(
        "alice",
        "disk",
        "executable = copyfile.wasm\ntransfer_input_files = small.in\nrequest_disk = 2560\n\
         arguments = small.in small.out $(N)\nqueue N in (1, 2)\n",
    );
    let ended = |proc: i64| {
        p.history().iter().any(|a| int(a, "ProcId") == proc)
            || p.queue().iter().any(|a| int(a, "ProcId") == proc && int(a, "JobStatus") == 5)
    };
    wait_or("both jobs to end", Duration::from_secs(120), || ended(0) && ended(1), || p.logs());
    let h = p.history();
    let one = h.iter().find(|a| int(a, "ProcId") == 0).expect("the 1 MiB copy completed");
    assert_eq!((int(one, "JobStatus"), int(one, "ExitCode")), (4, 0), "{one}");
    let two = h.iter().find(|a| int(a, "ProcId") == 1);
    assert!(
        two.is_none_or(|a| int(a, "ExitCode") != 0),
        "the 2 MiB copy fit in 2.5 MiB beside its 1 MiB input: {two:?}"
    );
}
