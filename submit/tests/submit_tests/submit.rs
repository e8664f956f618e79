//! Commands, queue forms, macros and errors, one class at a time.

use andes_submit::{Context, ErrorKind, MemFs, Submission, SubmitError, expand, parse};
use classad::{ClassAd, Value};

const MODULE: &[u8] = b"\0asm\x01\0\0\0";

fn fs() -> MemFs {
    let mut fs = MemFs::new();
    fs.add("/home/u/job.wasm", MODULE.to_vec());
    fs.add("/home/u/other.wasm", [MODULE, &[0u8; 1100][..]].concat());
    fs.add("/home/u/script.sh", b"#!/bin/sh\necho hi\n".to_vec());
    fs.add("/home/u/a.txt", vec![b'a'; 300]);
    fs.add("/home/u/in.txt", vec![b'i'; 2048]);
    fs.add("/home/u/data/x.dat", vec![1; 10]);
    fs.add("/home/u/data/y.dat", vec![1; 10]);
    fs.add("/home/u/data/z.txt", vec![1; 10]);
    fs.add("/home/u/data/sub/w.dat", vec![1; 10]);
    fs.add("/home/u/rows.txt", b"# comment\nalpha 1\n\nbeta 2\n".to_vec());
    fs.add("/home/u/run1/job.wasm", MODULE.to_vec());
    fs.add("/home/u/compiled.wasm", compiled());
    fs
}

/// A module as `andes compile` marks it: its version in a custom section.
fn compiled() -> Vec<u8> {
    let name = b"andes.instrumentation";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(&1u32.to_le_bytes());
    let mut m = MODULE.to_vec();
    m.push(0);
    m.push(section.len() as u8);
    m.extend_from_slice(&section);
    m
}

#[test]
fn a_module_built_by_andes_compile_checkpoints_transparently() {
    let job = one("executable = compiled.wasm\nqueue\n");
    assert_eq!(s(&job, "WasmCheckpoint"), "transparent");
    let plain = one("executable = job.wasm\nqueue\n");
    assert!(plain.get("WasmCheckpoint").is_none());
    // The submit file has the last word.
    let own = one("executable = compiled.wasm\n+WasmCheckpoint = \"cooperative\"\nqueue\n");
    assert_eq!(s(&own, "WasmCheckpoint"), "cooperative");
}

fn run_with(text: &str, tweak: impl FnOnce(&mut Context)) -> Result<Submission, SubmitError> {
    let fs = fs();
    let mut ctx = Context::new(42, 1_700_000_000, "/home/u").with_fs(&fs);
    ctx.env = vec![("HOME".into(), "/home/u".into())];
    tweak(&mut ctx);
    let desc = parse(text, "job.sub")?;
    expand(&desc, &ctx)
}

fn run(text: &str) -> Vec<ClassAd> {
    match run_with(text, |_| {}) {
        Ok(s) => s.jobs,
        Err(e) => panic!("{e}"),
    }
}

fn one(text: &str) -> ClassAd {
    let mut jobs = run(text);
    assert_eq!(jobs.len(), 1);
    jobs.remove(0)
}

fn err(text: &str) -> SubmitError {
    match run_with(text, |_| {}) {
        Ok(s) => panic!("accepted, {} jobs", s.jobs.len()),
        Err(e) => e,
    }
}

fn s(ad: &ClassAd, name: &str) -> String {
    match ad.get(name).and_then(|e| e.as_literal()) {
        Some(Value::Str(s)) => s.to_string(),
        other => panic!("{name} is not a string literal: {other:?}"),
    }
}

fn i(ad: &ClassAd, name: &str) -> i64 {
    match ad.get(name).and_then(|e| e.as_literal()) {
        Some(Value::Int(n)) => *n,
        other => panic!("{name} is not an int literal: {other:?}"),
    }
}

fn ex(ad: &ClassAd, name: &str) -> String {
    ad.get(name).map(|e| e.to_string()).unwrap_or_else(|| "<absent>".into())
}

const EXE: &str = "executable = job.wasm\n";

#[test]
fn minimal_job_ad() {
    let ad = one("executable = job.wasm\nqueue\n");
    assert_eq!(i(&ad, "ClusterId"), 42);
    assert_eq!(i(&ad, "ProcId"), 0);
    assert_eq!(i(&ad, "JobStatus"), 1);
    assert_eq!(i(&ad, "JobUniverse"), 5);
    assert_eq!(s(&ad, "Cmd"), "/home/u/job.wasm");
    assert!(s(&ad, "CmdDigest").starts_with("sha256:") && s(&ad, "CmdDigest").len() == 71);
    assert_eq!(s(&ad, "Arguments"), "");
    assert_eq!(s(&ad, "Environment"), "");
    assert_eq!(s(&ad, "In"), "/dev/null");
    assert_eq!(ex(&ad, "TransferIn"), "false");
    assert_eq!(s(&ad, "ShouldTransferFiles"), "IF_NEEDED");
    assert_eq!(s(&ad, "WhenToTransferOutput"), "ON_EXIT");
    assert_eq!(i(&ad, "RequestCpus"), 1);
    assert_eq!(
        ex(&ad, "RequestMemory"),
        "ifthenelse(MemoryUsage isnt undefined,MemoryUsage,(ImageSize + 1023) / 1024)"
    );
    assert_eq!(ex(&ad, "RequestDisk"), "DiskUsage");
    assert_eq!(
        ex(&ad, "Requirements"),
        "(TARGET.HasWasm) && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory)"
    );
    assert_eq!(ex(&ad, "Rank"), "0.0");
    assert_eq!(i(&ad, "JobPrio"), 0);
    assert_eq!(s(&ad, "Iwd"), "/home/u");
    assert_eq!(i(&ad, "QDate"), 1_700_000_000);
    assert_eq!((i(&ad, "ExecutableSize"), i(&ad, "DiskUsage")), (1, 1));
    assert!(!ad.contains("OnExitRemove") && !ad.contains("Owner"));
}

#[test]
fn module_digest_and_list() {
    let sub =
        run_with("executable = $(exe)\nexe = job.wasm\nqueue\nexe = other.wasm\nqueue 2\n", |c| {
            c.owner = Some("alice".into())
        })
        .unwrap();
    assert_eq!(sub.jobs.len(), 3);
    assert_eq!(sub.modules.len(), 2);
    // sha256 of the 8-byte empty module.
    assert_eq!(
        sub.modules[0].digest,
        "sha256:93a44bbb96c751218e4c00d479e4c14358122a389acca16205b1e4d0dc5f9476"
    );
    assert_eq!(s(&sub.jobs[0], "CmdDigest"), sub.modules[0].digest);
    assert_eq!(s(&sub.jobs[2], "CmdDigest"), sub.modules[1].digest);
    assert_eq!(s(&sub.jobs[2], "Cmd"), "/home/u/other.wasm");
    assert_eq!(i(&sub.jobs[2], "ExecutableSize"), 2);
    assert_eq!(s(&sub.jobs[0], "Owner"), "alice");
    assert_eq!(sub.modules[1].bytes.len(), 1108);
}

#[test]
fn executable_must_be_wasm() {
    let e = err("universe = vanilla\nexecutable = script.sh\nqueue\n");
    assert_eq!(e.kind(), ErrorKind::NotWasm);
    assert_eq!(e.line(), Some(2));
    assert!(
        e.to_string().starts_with(
            "job.sub:2: the executable \"/home/u/script.sh\" is not a WebAssembly module"
        ),
        "{e}"
    );
    let e = err("executable = missing.wasm\nqueue\n");
    assert_eq!((e.kind(), e.line()), (ErrorKind::Io, Some(1)));
    let e = err("arguments = 1\nqueue\n");
    assert_eq!(e.kind(), ErrorKind::MissingExecutable);
    assert_eq!(e.to_string(), "job.sub:2: No 'executable' parameter was provided");
}

#[test]
fn commands_are_case_insensitive() {
    let ad = one("EXECUTABLE = job.wasm\nArguments = x\nRequest_Cpus = 3\nQueue\n");
    assert_eq!(s(&ad, "Args"), "x");
    assert_eq!(i(&ad, "RequestCpus"), 3);
}

#[test]
fn arguments_v1_and_v2() {
    let ad = one(&format!("{EXE}arguments = -a 1  -b two\nqueue\n"));
    assert_eq!(s(&ad, "Args"), "-a 1 -b two");
    assert!(!ad.contains("Arguments"));
    let ad = one(&format!("{EXE}arguments = one \\\"two\\\" three\nqueue\n"));
    assert_eq!(s(&ad, "Args"), "one \"two\" three");
    let ad = one(&format!("{EXE}arguments = \"-n 'hello world' \"\"quoted\"\" x\"\nqueue\n"));
    assert_eq!(s(&ad, "Arguments"), "-n hello' 'world \"quoted\" x");
    let ad = one(&format!("{EXE}arguments = \"it''s 'a b''c' end\"\nqueue\n"));
    assert_eq!(s(&ad, "Arguments"), "its a' 'b''''c end");
    let e = err(&format!("{EXE}arguments = \"a 'b c\"\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(2)));
    let e = err(&format!("{EXE}arguments = \"a b\nqueue\n"));
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
}

#[test]
fn environment_v1_and_v2() {
    let ad = one(&format!("{EXE}environment = A=1;B=two words;C=3\nqueue\n"));
    assert_eq!(s(&ad, "Environment"), "A=1 B=two' 'words C=3");
    let ad = one(&format!(
        "{EXE}request_cpus = 2\nenvironment = \"MODE=prod THREADS=$(request_cpus) Q='a b'\"\nqueue\n"
    ));
    assert_eq!(s(&ad, "Environment"), "MODE=prod THREADS=2 Q=a' 'b");
    let e = err(&format!("{EXE}environment = A=1;NOEQUALS\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(2)));
    assert!(
        err(&format!("{EXE}environment = \"A=1 B\"\nqueue\n")).message().contains("NAME=value")
    );
}

#[test]
fn files_and_transfer() {
    let ad = one(&format!(
        "{EXE}input = in.txt\noutput = out.$(Process)\nerror = err.txt\nlog = job.log\n\
         should_transfer_files = yes\nwhen_to_transfer_output = on_exit_or_evict\n\
         transfer_input_files = a.txt, data/ ,missing.txt\ntransfer_output_files = r1, r2\nqueue\n"
    ));
    assert_eq!(s(&ad, "In"), "in.txt");
    assert_eq!(s(&ad, "Out"), "out.0");
    assert_eq!(s(&ad, "Err"), "err.txt");
    assert_eq!(ex(&ad, "StreamIn"), "false");
    assert_eq!(ex(&ad, "StreamOut"), "false");
    assert!(!ad.contains("TransferIn") && !ad.contains("TransferOut"));
    assert_eq!(s(&ad, "UserLog"), "/home/u/job.log");
    assert_eq!(s(&ad, "ShouldTransferFiles"), "YES");
    assert_eq!(s(&ad, "WhenToTransferOutput"), "ON_EXIT_OR_EVICT");
    assert_eq!(s(&ad, "TransferInput"), "a.txt,data/,missing.txt");
    assert_eq!(s(&ad, "TransferOutput"), "r1,r2");
    // exe 1 KiB + in.txt 2 + a.txt 1 + data/ (4 files of 10 bytes) 4.
    assert_eq!(i(&ad, "DiskUsage"), 8);
    assert_eq!(i(&ad, "TransferInputSizeMB"), 0);
    let ad = one(&format!("{EXE}should_transfer_files = NO\nqueue\n"));
    assert!(!ad.contains("WhenToTransferOutput"));
    let e = err(&format!("{EXE}should_transfer_files = sometimes\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(2)));
    assert!(err(&format!("{EXE}when_to_transfer_output = never\nqueue\n")).line() == Some(2));
}

/// `transfer_output_remaps` and `preserve_relative_paths`, as ezdag writes
/// them into every submit file: read, written as HTCondor's attributes,
/// never left unused; bad ones refused at their line.
#[test]
fn output_remaps_and_preserved_relative_paths() {
    let text = format!(
        "{EXE}transfer_input_files = data/x.dat\ntransfer_output_files = out.txt, d/r.txt\n\
         transfer_output_remaps = \"out.txt = results/$(Process)/out.txt ; r\\=1.txt=/abs/r\\;1\"\n\
         preserve_relative_paths = True\nqueue\n"
    );
    let sub = run_with(&text, |_| {}).unwrap();
    assert!(sub.warnings.is_empty(), "{:?}", sub.warnings);
    let ad = &sub.jobs[0];
    assert_eq!(s(ad, "TransferOutputRemaps"), "out.txt = results/0/out.txt ; r\\=1.txt=/abs/r\\;1");
    assert_eq!(ex(ad, "PreserveRelativePaths"), "true");
    let plain = one(&format!("{EXE}preserve_relative_paths = false\nqueue\n"));
    assert_eq!(ex(&plain, "PreserveRelativePaths"), "false");
    assert!(!plain.contains("TransferOutputRemaps"));
    // Unquoted works too (HTCondor 24.5 and later).
    let ad = one(&format!("{EXE}transfer_output_remaps = a=b\nqueue\n"));
    assert_eq!(s(&ad, "TransferOutputRemaps"), "a=b");
    for (line, want) in [
        ("transfer_output_remaps = \"out.txt\"", "is not a remap"),
        ("transfer_output_remaps = \"a=b; =c\"", "must both be given"),
        ("transfer_output_remaps = \"a=\"", "must both be given"),
        ("transfer_output_remaps = \"a = s3://bucket/a\"", "URL"),
        ("preserve_relative_paths = sometimes", "must eval to a boolean"),
    ] {
        let e = err(&format!("{EXE}{line}\nqueue\n"));
        assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(2)), "{line}: {e}");
        assert!(e.to_string().starts_with("job.sub:2: "), "{e}");
        assert!(e.to_string().contains(want), "{line}: {e}");
    }
    // A preserved relative path may not climb out of the sandbox.
    for list in ["transfer_input_files = ../secret", "transfer_output_files = a/../../b"] {
        let e = err(&format!("{EXE}preserve_relative_paths = true\n{list}\nqueue\n"));
        assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(3)), "{list}: {e}");
        assert!(e.to_string().contains("'..'"), "{e}");
        // Without it, only the base name travels: HTCondor takes it.
        one(&format!("{EXE}{list}\nqueue\n"));
    }
}

/// `initialdir` moves the job's files and log, not its executable, which
/// HTCondor's manual reads relative to where condor_submit runs.
#[test]
fn initialdir_moves_file_access() {
    let ad = one("initialdir = run1\nexecutable = job.wasm\nlog = l\nqueue\n");
    assert_eq!(s(&ad, "Iwd"), "/home/u/run1");
    assert_eq!(s(&ad, "Cmd"), "/home/u/job.wasm");
    assert_eq!(s(&ad, "UserLog"), "/home/u/run1/l");
}

#[test]
fn requests_with_units() {
    let ad = one(&format!(
        "{EXE}request_cpus = 2\nrequest_memory = 2 GB\nrequest_disk = 1G\nrequest_gpus = 1\nqueue\n"
    ));
    assert_eq!((i(&ad, "RequestCpus"), i(&ad, "RequestMemory")), (2, 2048));
    assert_eq!((i(&ad, "RequestDisk"), i(&ad, "RequestGPUs")), (1_048_576, 1));
    assert_eq!(
        ex(&ad, "Requirements"),
        "(TARGET.HasWasm) && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && (TARGET.GPUs >= RequestGPUs)"
    );
    let ad = one(&format!("{EXE}request_memory = -5\nrequest_disk = 3 MB\nqueue\n"));
    assert_eq!((i(&ad, "RequestMemory"), i(&ad, "RequestDisk")), (-4, 3072));
    let ad = one(&format!(
        "{EXE}request_memory = 1024 * (NumJobStarts + 1)\nrequest_cpus = 1 + 1\nqueue\n"
    ));
    assert_eq!(ex(&ad, "RequestMemory"), "1024 * (NumJobStarts + 1)");
    assert_eq!(ex(&ad, "RequestCpus"), "1 + 1");
    let e = err(&format!("{EXE}request_memory = 1 +\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::Expression, Some(2)));
}

#[test]
fn requirements_rank_priority() {
    let ad = one(&format!(
        "{EXE}requirements = TARGET.Memory > 10 && HasWasm =?= true && MY.RequestDisk > 0\nrank = TARGET.Mips\npriority = -5\nqueue\n"
    ));
    assert_eq!(
        ex(&ad, "Requirements"),
        "(TARGET.Memory > 10 && HasWasm is true && MY.RequestDisk > 0) && (TARGET.Memory >= RequestMemory)"
    );
    assert_eq!(ex(&ad, "Rank"), "TARGET.Mips");
    assert_eq!(i(&ad, "JobPrio"), -5);
    let e = err(&format!("{EXE}requirements = (Memory > \nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::Expression, Some(2)));
    assert!(
        e.to_string()
            .starts_with("job.sub:2: requirements = (Memory >: not a valid ClassAd expression"),
        "{e}"
    );
    let e = err(&format!("{EXE}\npriority = high\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(3)));
}

#[test]
fn hold_and_policies() {
    let ad = one(&format!("{EXE}hold = true\nqueue\n"));
    assert_eq!(i(&ad, "JobStatus"), 5);
    assert_eq!(s(&ad, "HoldReason"), "submitted on hold at user's request");
    assert_eq!(i(&ad, "HoldReasonCode"), 15);
    let ad = one(&format!("{EXE}hold = false\nqueue\n"));
    assert_eq!(i(&ad, "JobStatus"), 1);
    let e = err(&format!("{EXE}hold = maybe\nqueue\n"));
    assert_eq!(e.to_string(), "job.sub:2: hold=maybe is invalid, must eval to a boolean.");
    let ad = one(&format!(
        "{EXE}on_exit_remove = (ExitBySignal == False) && (ExitCode == 0)\non_exit_hold = ExitCode =!= 0\n\
         on_exit_hold_reason = \"bad\"\non_exit_hold_subcode = 42\nperiodic_hold = JobStatus == 2\n\
         periodic_hold_reason = \"long\"\nperiodic_hold_subcode = 7\nperiodic_release = NumJobStarts < 3\n\
         periodic_remove = JobStatus == 5\nqueue\n"
    ));
    assert_eq!(ex(&ad, "OnExitRemove"), "(ExitBySignal == false) && (ExitCode == 0)");
    assert_eq!(ex(&ad, "OnExitHold"), "ExitCode isnt 0");
    assert_eq!(s(&ad, "OnExitHoldReason"), "bad");
    assert_eq!(i(&ad, "OnExitHoldSubCode"), 42);
    assert_eq!(ex(&ad, "PeriodicHold"), "JobStatus == 2");
    assert_eq!(s(&ad, "PeriodicHoldReason"), "long");
    assert_eq!(i(&ad, "PeriodicHoldSubCode"), 7);
    assert_eq!(ex(&ad, "PeriodicRelease"), "NumJobStarts < 3");
    assert_eq!(ex(&ad, "PeriodicRemove"), "JobStatus == 5");
}

#[test]
fn retries() {
    let ad = one(&format!("{EXE}max_retries = 3\nqueue\n"));
    assert_eq!(i(&ad, "JobMaxRetries"), 3);
    assert_eq!(ex(&ad, "OnExitHold"), "false");
    assert_eq!(ex(&ad, "OnExitRemove"), "NumJobCompletions > JobMaxRetries || ExitCode is 0");
    let ad = one(&format!(
        "{EXE}max_retries = 5\nsuccess_exit_code = 2\nretry_until = ExitCode == 3\nqueue\n"
    ));
    assert_eq!(i(&ad, "JobSuccessExitCode"), 2);
    assert_eq!(
        ex(&ad, "OnExitRemove"),
        "NumJobCompletions > JobMaxRetries || ExitCode is JobSuccessExitCode || ExitCode == 3"
    );
    let ad = one(&format!("{EXE}retry_until = 7\non_exit_remove = ExitBySignal\nqueue\n"));
    assert_eq!(i(&ad, "JobMaxRetries"), 2);
    assert_eq!(
        ex(&ad, "OnExitRemove"),
        "NumJobCompletions > JobMaxRetries || ExitCode is 0 || ExitBySignal || ExitCode == 7"
    );
    let e = err(&format!("{EXE}max_retries = many\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(2)));
}

#[test]
fn deferral_and_cron() {
    let clause = "TARGET.HasJobDeferral && (((time() + ScheddInterval) >= (DeferralTime - DeferralPrepTime)) && (time() < (DeferralTime + DeferralWindow)))";
    let ad = one(&format!(
        "{EXE}deferral_time = 1700003600\ndeferral_window = 300\ndeferral_prep_time = 60\nqueue\n"
    ));
    assert_eq!(i(&ad, "DeferralTime"), 1_700_003_600);
    assert_eq!((i(&ad, "DeferralWindow"), i(&ad, "DeferralPrepTime")), (300, 60));
    assert_eq!(i(&ad, "ScheddInterval"), 300);
    assert!(ex(&ad, "Requirements").ends_with(clause));
    let ad = one(&format!("{EXE}deferral_time = (QDate + 3600)\nqueue\n"));
    assert_eq!(ex(&ad, "DeferralTime"), "(QDate + 3600)");
    assert_eq!((i(&ad, "DeferralWindow"), i(&ad, "DeferralPrepTime")), (0, 300));
    let ad = one(&format!(
        "{EXE}cron_minute = 0,30\ncron_hour = 8-17\ncron_day_of_month = 1\ncron_month = 1,7\n\
         cron_day_of_week = 1-5\ncron_window = 120\ncron_prep_time = 60\nqueue\n"
    ));
    assert_eq!(s(&ad, "CronMinute"), "0,30");
    assert_eq!(s(&ad, "CronHour"), "8-17");
    assert_eq!(s(&ad, "CronDayOfMonth"), "1");
    assert_eq!(s(&ad, "CronMonth"), "1,7");
    assert_eq!(s(&ad, "CronDayOfWeek"), "1-5");
    assert_eq!((i(&ad, "DeferralWindow"), i(&ad, "DeferralPrepTime")), (120, 60));
    assert!(!ad.contains("DeferralTime") && !ad.contains("CronWindow"));
    assert!(ex(&ad, "Requirements").ends_with(clause));
    // Validated (HTCondor copies it unchecked; see CONFORMANCE.md).
    let e = err(&format!("{EXE}cron_hour = 3\ncron_minute = 60\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::InvalidValue, Some(3)));
    assert!(e.to_string().contains("cron_minute = 60: 60 is outside 0-59"), "{e}");
    let e = err(&format!("{EXE}cron_day_of_month = 30\ncron_month = 2\nqueue\n"));
    assert!(e.to_string().contains("never"), "{e}");
    let e = err(&format!("universe = scheduler\n{EXE}cron_minute = 5\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::DeferralInSchedulerUniverse, Some(3)));
    let e = err(&format!("universe = scheduler\n{EXE}deferral_time = 5\nqueue\n"));
    assert_eq!(e.kind(), ErrorKind::DeferralInSchedulerUniverse);
}

#[test]
fn universes() {
    let ad = one(&format!("universe = local\n{EXE}queue\n"));
    assert_eq!(i(&ad, "JobUniverse"), 12);
    assert_eq!(s(&ad, "KillSig"), "SIGTERM");
    assert_eq!(i(&one(&format!("universe = Scheduler\n{EXE}queue\n")), "JobUniverse"), 7);
    assert_eq!(i(&one(&format!("universe = VANILLA\n{EXE}queue\n")), "JobUniverse"), 5);
    let e = err(&format!("universe = bogus\n{EXE}queue\n"));
    assert_eq!(e.to_string(), "job.sub:1: I don't know about the 'bogus' universe.");
    assert_eq!(
        err(&format!("universe = docker\n{EXE}queue\n")).kind(),
        ErrorKind::UnsupportedUniverse
    );
}

#[test]
fn custom_attributes_batch_name_and_misc() {
    let jobs = run(&format!(
        "{EXE}+Project = \"physics\"\nMY.Weight = 5\n+Tag = \"run_$(Cluster)_$(Process)\"\n+Step2 = $(Process) * 2\n\
         batch_name = nightly\nallowed_execute_duration = 3600\nnotification = Error\nnotify_user = a@b\nqueue 2\n"
    ));
    assert_eq!(s(&jobs[1], "Project"), "physics");
    assert_eq!(i(&jobs[1], "Weight"), 5);
    assert_eq!(s(&jobs[1], "Tag"), "run_42_1");
    assert_eq!(ex(&jobs[1], "Step2"), "1 * 2");
    assert_eq!(s(&jobs[0], "JobBatchName"), "nightly");
    assert_eq!(i(&jobs[0], "AllowedExecuteDuration"), 3600);
    assert_eq!(i(&jobs[0], "JobNotification"), 3);
    assert_eq!(s(&jobs[0], "NotifyUser"), "a@b");
    let e = err(&format!("{EXE}+Bad = (1 +\nqueue\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::Expression, Some(2)));
}

#[test]
fn extra_lines_and_batch_override() {
    let sub = run_with(&format!("{EXE}arguments = a\nqueue\n"), |c| {
        c.extra_lines = vec!["arguments = b".into(), "+X = 1".into()];
        c.batch_name = Some("override".into());
    })
    .unwrap();
    assert_eq!(s(&sub.jobs[0], "Args"), "b");
    assert_eq!(i(&sub.jobs[0], "X"), 1);
    assert_eq!(s(&sub.jobs[0], "JobBatchName"), "override");
    let e = run_with(&format!("{EXE}queue\n"), |c| c.extra_lines = vec!["hold = maybe".into()])
        .unwrap_err();
    assert_eq!((e.source(), e.line()), ("<command line>", Some(1)));
    let e =
        run_with(&format!("{EXE}queue\n"), |c| c.extra_lines = vec!["queue 2".into()]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Syntax);
}

#[test]
fn queue_count_and_multiple_statements() {
    let jobs = run(&format!(
        "{EXE}arguments = $(Process) $(ProcId) $(Step) $(Cluster) $(ClusterId)\nqueue 3\narguments = second $(Process) $(Step)\nqueue 2\n"
    ));
    let args: Vec<String> = jobs.iter().map(|j| s(j, "Args")).collect();
    assert_eq!(args, ["0 0 0 42 42", "1 1 1 42 42", "2 2 2 42 42", "second 3 0", "second 4 1"]);
    assert!(run(&format!("{EXE}queue 0\n")).is_empty());
    let e = err(&format!("{EXE}queue -1\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::Queue, Some(2)));
    let e = err(&format!("{EXE}n = 3\n"));
    assert_eq!(e.kind(), ErrorKind::NoQueue);
    assert_eq!(run(&format!("{EXE}n = 2\nqueue $(n)\n")).len(), 2);
}

#[test]
fn queue_in() {
    let jobs = run(&format!(
        "{EXE}arguments = $(color) $(ItemIndex) $(Row) $(Step) $(Process)\nqueue 2 color in (red, green)\n"
    ));
    let args: Vec<String> = jobs.iter().map(|j| s(j, "Args")).collect();
    assert_eq!(args, ["red 0 0 0 0", "red 0 0 1 1", "green 1 1 0 2", "green 1 1 1 3"]);
    let jobs = run(&format!("{EXE}arguments = $(Item)\nqueue in (\n  a\n  b c\n)\n"));
    let args: Vec<String> = jobs.iter().map(|j| s(j, "Args")).collect();
    assert_eq!(args, ["a", "b", "c"]);
}

#[test]
fn queue_from_inline_and_file() {
    let jobs = run(&format!(
        "{EXE}arguments = \"$(a) '$(b)'\"\nqueue a,b from (\n  first, second value\n  third, fourth\n)\n"
    ));
    assert_eq!(s(&jobs[0], "Arguments"), "first second' 'value");
    assert_eq!(s(&jobs[1], "Arguments"), "third fourth");
    let jobs = run(&format!("{EXE}arguments = $(name) $(n) $(Row)\nqueue name n from rows.txt\n"));
    let args: Vec<String> = jobs.iter().map(|j| s(j, "Args")).collect();
    assert_eq!(args, ["alpha 1 0", "beta 2 1"]);
    let jobs = run(&format!("{EXE}arguments = $(Item)\nqueue from (x 1)\n"));
    assert_eq!(s(&jobs[0], "Args"), "x 1");
    let e = err(&format!("{EXE}queue a from nosuch.txt\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::Queue, Some(2)));
    assert!(e.message().contains("/home/u/nosuch.txt"), "{e}");
}

#[test]
fn queue_matching() {
    let jobs = run(&format!("{EXE}arguments = $(f)\nqueue f matching data/*.dat\n"));
    let args: Vec<String> = jobs.iter().map(|j| s(j, "Args")).collect();
    assert_eq!(args, ["data/x.dat", "data/y.dat"]);
    let jobs = run(&format!("{EXE}arguments = $(Item)\nqueue matching dirs (data/*)\n"));
    assert_eq!(s(&jobs[0], "Args"), "data/sub");
    let jobs = run(&format!("{EXE}arguments = $(Item)\nqueue matching files data/*\n"));
    assert_eq!(jobs.len(), 3);
    assert!(run(&format!("{EXE}queue matching nothing*.xyz\n")).is_empty());
    let e = err(&format!("{EXE}queue matching [\n"));
    assert_eq!(e.kind(), ErrorKind::Queue);
}

#[test]
fn macros_and_functions() {
    let ad = one(&format!(
        "{EXE}path = /data/set1/file.tar.gz\nbase = /b\nname = $(base)/x\nbase = /c\n\
         arguments = $Fn(path) $Fx(path) $Fp(path) $INT(Process,%03d) $(name) $(undef:dflt) $ENV(HOME) $(DOLLAR)x\n\
         +Pad = \"$INT(Process,%04d)\"\n+Job = \"$$([ClusterId])\"\n+R = $REAL(2.5,%.1f)\n+C = \"$CHOICE(1,a,b,c)\"\nqueue\n"
    ));
    assert_eq!(s(&ad, "Args"), "file.tar .gz /data/set1/ 000 /c/x dflt /home/u $x");
    assert_eq!(s(&ad, "Pad"), "0000");
    assert_eq!(s(&ad, "Job"), "$$([ClusterId])");
    assert_eq!(ex(&ad, "R"), "2.500000000000000E+00");
    assert_eq!(s(&ad, "C"), "b");
    let sub =
        run_with(&format!("{EXE}+N = $RANDOM_INTEGER(1, 3)\nqueue 20\n"), |c| c.seed = 9).unwrap();
    assert!(sub.jobs.iter().all(|j| (1..=3).contains(&i(j, "N"))));
}

/// `$EVAL()` and `$STRING()` in a submit description: per job, with the
/// job's own macros (`$(Process)`, queue items).
#[test]
fn eval_and_string_in_a_submit_description() {
    let sub = run_with(
        &format!(
            "{EXE}scale = 10\nwork = $(Process) * $(scale) + 1\nname = toUpper(\"$(item)\")\n\
             arguments = $EVAL(work) $STRING(name) $STRING(item,[%s])\nqueue item in (ab, cd)\n"
        ),
        |_| {},
    )
    .unwrap();
    let args: Vec<String> = sub.jobs.iter().map(|j| s(j, "Args")).collect();
    assert_eq!(args, ["1 AB [ab]", "11 CD [cd]"]);
    // The macros the functions read are used: no warning names them.
    assert!(sub.warnings.is_empty(), "{:?}", sub.warnings);
    let e = err(&format!("{EXE}arguments = $EVAL(1 +)\nqueue\n"));
    assert_eq!(e.kind(), ErrorKind::Macro, "{e}");
    assert_eq!(e.line(), Some(2), "{e}");
}

#[test]
fn bounded_expansion() {
    let e = err(&format!("{EXE}a = $(b)\nb = $(a)\narguments = $(a)\nqueue\n"));
    assert_eq!(e.kind(), ErrorKind::Macro);
    assert_eq!(e.line(), Some(4));
    // Doubling macros: 2^40 bytes if unbounded.
    let mut text = String::from(EXE);
    text.push_str("m0 = xxxxxxxxxxxxxxxx\n");
    for k in 1..40 {
        text.push_str(&format!("m{k} = $(m{})$(m{})\n", k - 1, k - 1));
    }
    text.push_str("arguments = $(m39)\nqueue\n");
    assert_eq!(err(&text).kind(), ErrorKind::Macro);
    // 16 KiB of arguments in each of 100 jobs, with a 1 MiB budget.
    let mut text = String::from(EXE);
    text.push_str("m0 = xxxxxxxxxxxxxxxx\n");
    for k in 1..11 {
        text.push_str(&format!("m{k} = $(m{})$(m{})\n", k - 1, k - 1));
    }
    text.push_str("arguments = $(m10)\nqueue 100\n");
    let e = run_with(&text, |c| c.max_ad_bytes = 1 << 20).unwrap_err();
    assert_eq!((e.kind(), e.line()), (ErrorKind::TooManyJobs, Some(14)));
    assert!(e.message().contains("1024 KiB"), "{e}");
    assert_eq!(run_with(&text, |_| {}).unwrap().jobs.len(), 100);
    let e = err(&format!("{EXE}queue 100000000\n"));
    assert_eq!((e.kind(), e.line()), (ErrorKind::TooManyJobs, Some(2)));
    let e = run_with(&format!("{EXE}queue 3 in (a b)\n"), |c| c.max_jobs = 5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooManyJobs);
}

#[test]
fn syntax_errors_name_file_and_line() {
    let e = err("executable = job.wasm\n\njust words\nqueue\n");
    assert_eq!(
        e.to_string(),
        "job.sub:3: expected `name = value` or `queue`, found \"just words\""
    );
    let e = err("executable = job.wasm\nqueue 3 in (a b\n");
    assert_eq!((e.kind(), e.line()), (ErrorKind::Queue, Some(2)));
    let e = err("+1bad = 3\nqueue\n");
    assert_eq!((e.kind(), e.line()), (ErrorKind::Syntax, Some(1)));
}

#[test]
fn bad_values_are_errors_with_their_line_and_a_misspelt_command_is_warned_of() {
    for (line, want) in [
        ("deferral_time = abc", "deferral_time = abc: must be an integer"),
        ("cron_minute = 99", "99 is outside 0-59"),
        ("request_memory = lots", "request_memory = lots: must be a number"),
        ("request_disk = plenty", "request_disk = plenty: must be a number"),
        ("request_cpus = \"two\"", "request_cpus = \"two\": must be a number"),
        // A string that names the machine is still a string.
        ("request_memory = \"TARGET.Memory\"", "must be a number"),
    ] {
        let e = run_with(&format!("executable = job.wasm\n{line}\nqueue\n"), |_| {}).unwrap_err();
        assert_eq!(e.line(), Some(2), "{line}: {e}");
        assert!(e.to_string().contains(want), "{line}: {e}");
    }
    // With a deferral time, its window must be a number too.
    let e = run_with(
        "executable = job.wasm\ndeferral_time = time() + 60\ndeferral_window = soon\nqueue\n",
        |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("deferral_window = soon: must be an integer"), "{e}");
    // What names the machine, or evaluates to a number, is taken.
    let ok = run_with(
        "executable = job.wasm\nrequest_memory = TARGET.Memory / 2\n\
         request_disk = ifthenelse(DiskUsage isnt undefined, DiskUsage, 2048)\n\
         deferral_time = time() + 3600\nqueue\n",
        |_| {},
    )
    .unwrap();
    assert!(ok.warnings.is_empty(), "{:?}", ok.warnings);
    // A misspelt command is a warning naming its line; a macro some value
    // uses is not.
    let s = run_with(
        "executable = job.wasm\nrequirments = True\nn = 7\narguments = $(n)\nqueue\n",
        |_| {},
    )
    .unwrap();
    assert_eq!(
        s.warnings,
        vec!["job.sub:2: the line 'requirments = True' was unused by andes submit. Is it a typo?"]
    );
}

#[test]
fn one_value_expands_as_for_the_first_job() {
    let fs = fs();
    let ctx = Context::new(42, 1_700_000_000, "/home/u").with_fs(&fs);
    let desc = parse(
        "executable = job.wasm\nfoo = bar_$(foo2)\nfoo2 = 7\nargs = $(Cluster).$(Process) $(x) $(y:dflt) $INT(n)\nn = 3*2\nqueue x from (\n1\n)\n",
        "job.sub",
    )
    .unwrap();
    let value = |name: &str| andes_submit::expand_value(&desc, &ctx, name).unwrap();
    assert_eq!(value("FOO").as_deref(), Some("bar_7"));
    assert_eq!(value("args").as_deref(), Some("42.0  dflt 6"));
    assert_eq!(value("Process").as_deref(), Some("0"));
    assert_eq!(value("nonesuch"), None);
}

#[test]
fn itemdata_reads_rows_files_and_globs_as_the_jobs_would() {
    let fs = fs();
    let ctx = Context::new(42, 1_700_000_000, "/home/u").with_fs(&fs);
    let items = |text: &str| {
        let desc = parse(&format!("executable = job.wasm\n{text}\n"), "job.sub").unwrap();
        andes_submit::itemdata(&desc, &ctx).unwrap()
    };
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(items("queue 3"), None);
    assert_eq!(items("queue in (a b)"), Some((v(&["Item"]), vec![v(&["a"]), v(&["b"])])));
    assert_eq!(
        items("queue x, y from (\n1, a b\n2 c\n)"),
        Some((v(&["x", "y"]), vec![v(&["1", "a b"]), v(&["2", "c"])]))
    );
    assert_eq!(
        items("queue name, n from rows.txt"),
        Some((v(&["name", "n"]), vec![v(&["alpha", "1"]), v(&["beta", "2"])]))
    );
    assert_eq!(
        items("queue f matching files data/*.dat"),
        Some((v(&["f"]), vec![v(&["data/x.dat"]), v(&["data/y.dat"])]))
    );
    let desc = parse("executable = job.wasm\nqueue f from missing.txt\n", "job.sub").unwrap();
    let err = andes_submit::itemdata(&desc, &ctx).unwrap_err();
    assert!(err.to_string().contains("missing.txt"), "{err}");
}
