//! Making one job ad from the macro table, as HTCondor's `SubmitHash` does.

use classad::argenv;
use classad::{ClassAd, Expr, Value};
use sha2::{Digest, Sha256};

use crate::ErrorKind;
use crate::SubmitError;
use crate::macros::Origin;
use crate::run::{Module, Run, resolve};

/// Largest executable read, in bytes.
/// The largest module a job may name, bytes (the pool's `MAX_MODULE` too).
pub const MAX_MODULE_LEN: u64 = 512 << 20;
/// How deep and how many entries an input directory is walked for its size.
const MAX_DIR_DEPTH: usize = 16;
const MAX_DIR_ENTRIES: usize = 100_000;

/// `JobStatus` values.
const IDLE: i64 = 1;
const HELD: i64 = 5;
/// `HoldReasonCode` for `hold = true`.
const HOLD_CODE_SUBMITTED_ON_HOLD: i64 = 15;

/// The Wasm magic number.
const WASM_MAGIC: &[u8; 4] = b"\0asm";

/// `(TARGET.HasJobDeferral)` and the window check HTCondor adds for deferral
/// and cron jobs.
const DEFERRAL_CLAUSE: &str = "TARGET.HasJobDeferral && (((time() + ScheddInterval) >= (DeferralTime - DeferralPrepTime)) && (time() < (DeferralTime + DeferralWindow)))";

pub(crate) struct JobBuilder<'r, 'c, 'f> {
    run: &'r mut Run<'c, 'f>,
    queue: &'r Origin,
    proc: i64,
    iwd: String,
    ad: ClassAd,
    /// Commands whose value must evaluate to a number once the ad is whole.
    numeric: Vec<NumericCheck>,
}

/// A command whose expression must evaluate, in the finished job ad, to a
/// number (an integer when `integer`), unless it depends on the machine.
struct NumericCheck {
    command: &'static str,
    value: String,
    origin: Origin,
    attr: &'static str,
    integer: bool,
}

fn lit(v: impl Into<Value>) -> Expr {
    Expr::Lit(v.into())
}

/// The value as a plain string: `"text"` loses its quotes.
fn unquote(s: &str) -> &str {
    let t = s.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') { &t[1..t.len() - 1] } else { t }
}

impl<'r, 'c, 'f> JobBuilder<'r, 'c, 'f> {
    pub fn new(run: &'r mut Run<'c, 'f>, queue: &'r Origin, proc: i64) -> Self {
        // About as many attributes as the job before it: no growing copies.
        let ad = ClassAd::with_capacity(run.jobs.last().map_or(0, ClassAd::len));
        JobBuilder { run, queue, proc, iwd: String::new(), ad, numeric: Vec::new() }
    }

    /// The expanded, trimmed value of the first of `names` that is defined
    /// and not empty, with where it was defined.
    fn cmd(&mut self, names: &[&str]) -> Result<Option<(String, Origin)>, SubmitError> {
        for n in names {
            if !self.run.macros.is_defined(n) {
                continue;
            }
            let v = self.run.macros.get(n, &self.iwd, &self.run.source)?.unwrap_or_default();
            let v = v.trim();
            if !v.is_empty() {
                let mut o = self.run.macros.origin(n, &self.run.source);
                if o.line.is_none() {
                    o = self.queue.clone();
                }
                return Ok(Some((v.to_string(), o)));
            }
        }
        Ok(None)
    }

    fn expr(&self, name: &str, value: &str, o: &Origin) -> Result<Expr, SubmitError> {
        classad::parse_expr(value).map_err(|e| {
            o.error(
                ErrorKind::Expression,
                format!("{name} = {value}: not a valid ClassAd expression: {e}"),
            )
        })
    }

    fn set(&mut self, attr: &str, e: Expr) {
        self.ad.insert(attr, e);
    }

    /// Checks, once the ad is whole, that `attr` (from `command = value`)
    /// evaluates to a number.
    fn must_be_numeric(
        &mut self,
        command: &'static str,
        value: &str,
        origin: &Origin,
        attr: &'static str,
        integer: bool,
    ) {
        let origin = origin.clone();
        self.numeric.push(NumericCheck { command, value: value.into(), origin, attr, integer });
    }

    /// Fails on the first command of [`Self::must_be_numeric`] whose value
    /// is not a number in the finished ad (an expression that names the
    /// machine, `TARGET.…`, is judged at match time instead).
    fn check_numeric(&self) -> Result<(), SubmitError> {
        for c in &self.numeric {
            let Some(e) = self.ad.get(c.attr) else { continue };
            if references_target(e) {
                continue;
            }
            let mut ev = classad::Evaluator::with_options(classad::EvalOptions {
                strict: false,
                now: Some(self.run.ctx.qdate),
                seed: Some(0),
                ..Default::default()
            });
            // An expression of attributes the job gets later (NumJobStarts,
            // MemoryUsage) is undefined now and judged when it runs; a lone
            // name the ad lacks is a typo or a word, never a number.
            let bare = matches!(e, Expr::Attr { .. });
            let value = ev.eval(e, Some(&self.ad), None);
            let ok = match value {
                Value::Int(_) => true,
                Value::Real(_) => !c.integer,
                Value::Undefined => !bare,
                _ => false,
            };
            if !ok {
                let what = if c.integer {
                    "an integer (for a time: Unix seconds, such as `time() + 3600`)"
                } else {
                    "a number, with an optional unit such as `2GB`"
                };
                return Err(c.origin.error(
                    ErrorKind::InvalidValue,
                    format!("{} = {}: must be {what}; it evaluates to {value}", c.command, c.value),
                ));
            }
        }
        Ok(())
    }

    /// `name` given as an expression, copied into `attr`.
    fn expr_cmd(&mut self, names: &[&str], attr: &str) -> Result<bool, SubmitError> {
        if let Some((v, o)) = self.cmd(names)? {
            let e = self.expr(names[0], &v, &o)?;
            self.set(attr, e);
            return Ok(true);
        }
        Ok(false)
    }

    fn bool_cmd(&mut self, names: &[&str]) -> Result<Option<bool>, SubmitError> {
        let Some((v, o)) = self.cmd(names)? else { return Ok(None) };
        match parse_bool(&v) {
            Some(b) => Ok(Some(b)),
            None => Err(o.error(
                ErrorKind::InvalidValue,
                format!("{}={v} is invalid, must eval to a boolean.", names[0]),
            )),
        }
    }

    fn int_cmd(&mut self, names: &[&str]) -> Result<Option<(i64, Origin)>, SubmitError> {
        let Some((v, o)) = self.cmd(names)? else { return Ok(None) };
        match eval_int(&v) {
            Some(n) => Ok(Some((n, o))),
            None => Err(o.error(
                ErrorKind::InvalidValue,
                format!("{}={v} is invalid, must be an integer.", names[0]),
            )),
        }
    }

    pub fn build(mut self) -> Result<ClassAd, SubmitError> {
        self.iwd = self.run.job_iwd(self.queue)?;
        let ctx = self.run.ctx;

        // Universe first: it changes several defaults.
        let universe = match self.cmd(&["universe"])? {
            None => 5,
            Some((u, o)) => match u.to_ascii_lowercase().as_str() {
                "vanilla" => 5,
                "scheduler" => 7,
                "local" => 12,
                "standard" | "pipe" | "linda" | "pvm" | "mpi" | "globus" | "grid" | "java"
                | "parallel" | "vm" | "docker" | "container" => {
                    return Err(o.error(
                            ErrorKind::UnsupportedUniverse,
                            format!("the '{u}' universe cannot run WebAssembly jobs; use vanilla (the default), local or scheduler"),
                        ));
                }
                _ => {
                    return Err(o.error(
                        ErrorKind::UnknownUniverse,
                        format!("I don't know about the '{u}' universe."),
                    ));
                }
            },
        };

        self.set("ClusterId", lit(ctx.cluster_id));
        self.set("ProcId", lit(self.proc));
        if let Some(owner) = &ctx.owner {
            self.set("Owner", lit(Value::string(owner.as_str())));
        }
        self.set("JobStatus", lit(IDLE));
        self.set("JobUniverse", lit(universe as i64));

        // Executable: must be a Wasm module.
        let Some((exe, eo)) = self.cmd(&["executable"])? else {
            return Err(self
                .queue
                .error(ErrorKind::MissingExecutable, "No 'executable' parameter was provided"));
        };
        // Relative to where condor_submit runs, not to initialdir (which
        // places the job's files), as HTCondor's manual says of `executable`.
        let cmd_path = resolve(&ctx.iwd, &exe);
        let (digest, exe_len, instrumented) = self.module(&cmd_path, &eo)?;
        self.set("Cmd", lit(Value::string(cmd_path.as_str())));
        self.set("CmdDigest", lit(Value::string(digest.as_str())));
        if instrumented {
            // Built by `andes compile` (condor_compile's counterpart): the
            // host checkpoints it by snapshot, as the standard universe did.
            // `+WasmCheckpoint` below may still say otherwise.
            self.set("WasmCheckpoint", lit(Value::string("transparent")));
        }

        self.arguments()?;
        self.environment()?;

        // Standard streams.
        let mut inputs: Vec<String> = Vec::new();
        for (names, attr, stream_cmd, stream_attr, transfer_attr) in [
            (&["input", "stdin"][..], "In", "stream_input", "StreamIn", "TransferIn"),
            (&["output", "stdout"][..], "Out", "stream_output", "StreamOut", "TransferOut"),
            (&["error", "stderr"][..], "Err", "stream_error", "StreamErr", "TransferErr"),
        ] {
            match self.cmd(names)? {
                Some((f, _)) if f != "/dev/null" => {
                    if attr == "In" {
                        inputs.push(f.clone());
                    }
                    self.set(attr, lit(Value::string(f.as_str())));
                    let stream = self.bool_cmd(&[stream_cmd])?.unwrap_or(false);
                    self.set(stream_attr, lit(stream));
                }
                _ => {
                    self.set(attr, lit(Value::string("/dev/null")));
                    self.set(transfer_attr, lit(false));
                }
            }
        }
        if let Some((log, _)) = self.cmd(&["log", "UserLog"])? {
            let p = resolve(&self.iwd, &log);
            self.set("UserLog", lit(Value::string(p.as_str())));
        }

        // File transfer.
        let preserve = self.bool_cmd(&["preserve_relative_paths", "PreserveRelativePaths"])?;
        if let Some(b) = preserve {
            self.set("PreserveRelativePaths", lit(b));
        }
        let preserve = preserve.unwrap_or(false);
        if let Some((v, o)) = self.cmd(&["transfer_input_files", "TransferInput"])? {
            let list = file_list(&v);
            if preserve {
                leaves_no_sandbox("transfer_input_files", &list, &o)?;
            }
            inputs.extend(list.iter().cloned());
            self.set("TransferInput", lit(Value::string(list.join(","))));
        }
        if let Some((v, o)) = self.cmd(&["transfer_output_files", "TransferOutput"])? {
            let list = file_list(&v);
            if preserve {
                leaves_no_sandbox("transfer_output_files", &list, &o)?;
            }
            self.set("TransferOutput", lit(Value::string(list.join(","))));
        }
        if let Some((v, o)) = self.cmd(&["transfer_output_remaps", "TransferOutputRemaps"])? {
            let text = unquote(&v);
            let bad = |why: String| {
                o.error(ErrorKind::InvalidValue, format!("transfer_output_remaps = {v}: {why}"))
            };
            for (name, to) in crate::remaps::parse(text).map_err(bad)? {
                if crate::remaps::is_url(&to) {
                    return Err(bad(format!(
                        "{name} goes to the URL {to}, which needs HTCondor's file transfer \
                         plugins; andes writes output files to paths only"
                    )));
                }
            }
            self.set("TransferOutputRemaps", lit(Value::string(text)));
        }
        let stf = match self.cmd(&["should_transfer_files", "ShouldTransferFiles"])? {
            None => "IF_NEEDED".to_string(),
            Some((v, o)) => {
                let u = unquote(&v).to_ascii_uppercase();
                match u.as_str() {
                    "YES" | "NO" | "IF_NEEDED" => u,
                    "TRUE" => "YES".into(),
                    "FALSE" => "NO".into(),
                    _ => {
                        return Err(o.error(
                            ErrorKind::InvalidValue,
                            format!("should_transfer_files = {v} is invalid, must be YES, NO or IF_NEEDED"),
                        ));
                    }
                }
            }
        };
        self.set("ShouldTransferFiles", lit(Value::string(stf.as_str())));
        let wto = match self.cmd(&["when_to_transfer_output", "WhenToTransferOutput"])? {
            None => "ON_EXIT".to_string(),
            Some((v, o)) => {
                let u = unquote(&v).to_ascii_uppercase();
                match u.as_str() {
                    "ON_EXIT" | "ON_EXIT_OR_EVICT" | "ON_SUCCESS" => u,
                    _ => {
                        return Err(o.error(
                            ErrorKind::InvalidValue,
                            format!("when_to_transfer_output = {v} is invalid, must be ON_EXIT, ON_EXIT_OR_EVICT or ON_SUCCESS"),
                        ));
                    }
                }
            }
        };
        if stf != "NO" {
            self.set("WhenToTransferOutput", lit(Value::string(wto.as_str())));
        }

        // Resources.
        let cpus_given = match self.cmd(&["request_cpus", "RequestCpus"])? {
            Some((v, o)) => {
                let e = match parse_int(&v) {
                    Some(n) => lit(n),
                    None => self.expr("request_cpus", &v, &o)?,
                };
                self.set("RequestCpus", e);
                self.must_be_numeric("request_cpus", &v, &o, "RequestCpus", false);
                true
            }
            None => {
                self.set("RequestCpus", lit(1i64));
                false
            }
        };
        let mem_default =
            "ifthenelse(MemoryUsage isnt undefined,MemoryUsage,(ImageSize + 1023) / 1024)";
        match self.cmd(&["request_memory", "RequestMemory"])? {
            Some((v, o)) => {
                let e = match parse_bytes(&v, 1 << 20) {
                    Some(n) => lit(n),
                    None => self.expr("request_memory", &v, &o)?,
                };
                self.set("RequestMemory", e);
                self.must_be_numeric("request_memory", &v, &o, "RequestMemory", false);
            }
            None => {
                self.set("RequestMemory", classad::parse_expr(mem_default).unwrap_or(lit(128i64)))
            }
        }
        match self.cmd(&["request_disk", "RequestDisk"])? {
            Some((v, o)) => {
                let e = match parse_bytes(&v, 1 << 10) {
                    Some(n) => lit(n),
                    None => self.expr("request_disk", &v, &o)?,
                };
                self.set("RequestDisk", e);
                self.must_be_numeric("request_disk", &v, &o, "RequestDisk", false);
            }
            None => self.set("RequestDisk", Expr::attr("DiskUsage")),
        }
        let gpus_given = match self.cmd(&["request_gpus", "RequestGPUs"])? {
            Some((v, o)) => {
                let e = match parse_int(&v) {
                    Some(n) => lit(n),
                    None => self.expr("request_gpus", &v, &o)?,
                };
                self.set("RequestGPUs", e);
                true
            }
            None => false,
        };

        // Deferral and cron (before Requirements, which depends on them).
        let mut deferral = false;
        let mut deferral_line: Option<Origin> = None;
        if let Some((v, o)) = self.cmd(&["deferral_time", "DeferralTime"])? {
            let e = self.expr("deferral_time", &v, &o)?;
            self.set("DeferralTime", e);
            self.must_be_numeric("deferral_time", &v, &o, "DeferralTime", true);
            deferral = true;
            deferral_line = Some(o);
        }
        let mut cron = Vec::new();
        for (cmd, attr) in [
            ("cron_minute", "CronMinute"),
            ("cron_hour", "CronHour"),
            ("cron_day_of_month", "CronDayOfMonth"),
            ("cron_month", "CronMonth"),
            ("cron_day_of_week", "CronDayOfWeek"),
        ] {
            if let Some((v, o)) = self.cmd(&[cmd, attr])? {
                cron.push((attr, unquote(&v).to_string(), o.clone()));
                deferral = true;
                deferral_line.get_or_insert(o);
            }
        }
        if !cron.is_empty() {
            // HTCondor copies cron_* unchecked and its schedd later turns a bad
            // field into "every minute"; here a bad or impossible schedule is
            // the submit error the manual implies.
            let mut fields: [Option<&str>; 5] = [None; 5];
            for (attr, v, _) in &cron {
                if let Some(f) = andes_cron::Field::from_name(attr) {
                    fields[f as usize] = Some(v.as_str());
                }
            }
            if let Err(e) = andes_cron::Schedule::parse(fields) {
                // The line of the field at fault; for an impossible date, the first.
                let at = match &e {
                    andes_cron::CronError::Invalid { field, .. } => {
                        cron.iter().find(|c| c.0 == field.attribute()).map(|c| c.2.clone())
                    }
                    andes_cron::CronError::Never { .. } => None,
                };
                let o = at.or_else(|| deferral_line.clone()).unwrap_or_else(|| self.queue.clone());
                return Err(o.error(ErrorKind::InvalidValue, e.for_submit()));
            }
        }
        if deferral && universe == 7 {
            let o = deferral_line.unwrap_or_else(|| self.queue.clone());
            return Err(o.error(
                ErrorKind::DeferralInSchedulerUniverse,
                "job deferral (deferral_time or cron_*) is not available for scheduler universe jobs",
            ));
        }
        let window = self.cmd(&["deferral_window", "cron_window", "DeferralWindow"])?;
        let prep = self.cmd(&["deferral_prep_time", "cron_prep_time", "DeferralPrepTime"])?;

        // Requirements.
        let user_req = match self.cmd(&["requirements", "Requirements"])? {
            Some((v, o)) => Some(self.expr("requirements", &v, &o)?),
            None => None,
        };
        let mentioned = user_req.as_ref().map(referenced).unwrap_or_default();
        let mentions = |n: &str| mentioned.contains(&n.to_ascii_lowercase());
        let mut clauses: Vec<String> = Vec::new();
        if let Some(u) = &user_req {
            clauses.push(format!("({u})"));
        }
        if !mentions("HasWasm") {
            clauses.push("(TARGET.HasWasm)".into());
        }
        if !mentions("RequestDisk") {
            clauses.push("(TARGET.Disk >= RequestDisk)".into());
        }
        if !mentions("RequestMemory") {
            clauses.push("(TARGET.Memory >= RequestMemory)".into());
        }
        if cpus_given && !mentions("RequestCpus") {
            clauses.push("(TARGET.Cpus >= RequestCpus)".into());
        }
        if gpus_given && !mentions("RequestGPUs") {
            clauses.push("(TARGET.GPUs >= RequestGPUs)".into());
        }
        if deferral {
            clauses.push(DEFERRAL_CLAUSE.into());
        }
        let req = clauses.join(" && ");
        let req_e = classad::parse_expr(&req)
            .map_err(|e| self.queue.error(ErrorKind::Expression, format!("Requirements: {e}")))?;
        self.set("Requirements", req_e);

        if !self.expr_cmd(&["rank", "Rank"], "Rank")? {
            self.set("Rank", lit(0.0f64));
        }
        let prio = match self.cmd(&["priority", "prio", "JobPrio"])? {
            None => 0,
            Some((v, o)) => eval_int(&v).ok_or_else(|| {
                o.error(
                    ErrorKind::InvalidValue,
                    format!("priority = {v} is invalid, must be an integer."),
                )
            })?,
        };
        self.set("JobPrio", lit(prio));

        // Hold at submit.
        if self.bool_cmd(&["hold"])? == Some(true) {
            self.set("JobStatus", lit(HELD));
            self.set("HoldReason", lit(Value::string("submitted on hold at user's request")));
            self.set("HoldReasonCode", lit(HOLD_CODE_SUBMITTED_ON_HOLD));
        }

        // Exit and periodic policies, retries.
        self.policies()?;

        // Deferral attributes.
        for (attr, v, _) in &cron {
            self.set(attr, lit(Value::string(v.as_str())));
        }
        if deferral {
            for (given, command, attr, default) in [
                (window, "deferral_window", "DeferralWindow", 0i64),
                (prep, "deferral_prep_time", "DeferralPrepTime", 300),
            ] {
                let e = match given {
                    Some((v, o)) => {
                        self.must_be_numeric(command, &v, &o, attr, true);
                        self.expr(attr, &v, &o)?
                    }
                    None => lit(default),
                };
                self.set(attr, e);
            }
            self.set("ScheddInterval", lit(300i64));
        }

        // Notification.
        let notification = match self.cmd(&["notification", "JobNotification"])? {
            None => 0,
            Some((v, o)) => match unquote(&v).to_ascii_lowercase().as_str() {
                "never" | "0" => 0,
                "always" | "1" => 1,
                "complete" | "2" => 2,
                "error" | "3" => 3,
                _ => {
                    return Err(o.error(
                        ErrorKind::InvalidValue,
                        format!("notification = {v} is invalid, must be Never, Always, Complete or Error"),
                    ));
                }
            },
        };
        self.set("JobNotification", lit(notification));
        if let Some((v, _)) = self.cmd(&["notify_user", "NotifyUser"])? {
            self.set("NotifyUser", lit(Value::string(unquote(&v))));
        }

        self.set("Iwd", lit(Value::string(self.iwd.as_str())));
        self.set("QDate", lit(ctx.qdate));

        // Sizes: executable and input files, in KiB.
        let exe_kb = kib(exe_len);
        let mut input_kb = 0u64;
        for f in &inputs {
            input_kb = input_kb.saturating_add(self.input_kb(f));
        }
        self.set("DiskUsage", lit(exe_kb.saturating_add(input_kb) as i64));
        self.set("ImageSize", lit(exe_kb as i64));
        self.set("ExecutableSize", lit(exe_kb as i64));
        self.set("TransferInputSizeMB", lit((input_kb / 1024) as i64));

        if universe == 12 || universe == 7 {
            self.set("KillSig", lit(Value::string("SIGTERM")));
        }
        if let Some(b) = &ctx.batch_name {
            self.set("JobBatchName", lit(Value::string(b.as_str())));
        } else if let Some((v, _)) = self.cmd(&["batch_name", "JobBatchName"])? {
            self.set("JobBatchName", lit(Value::string(unquote(&v))));
        }
        if let Some((v, o)) = self.cmd(&["allowed_execute_duration", "AllowedExecuteDuration"])? {
            let e = match parse_int(&v) {
                Some(n) => lit(n),
                None => self.expr("allowed_execute_duration", &v, &o)?,
            };
            self.set("AllowedExecuteDuration", e);
        }
        if let Some((v, _)) = self.cmd(&["kill_sig", "KillSig"])? {
            self.set("KillSig", lit(Value::string(unquote(&v))));
        }

        // `+Attr` and `MY.Attr`.
        let attrs = self.run.attrs.clone();
        for (name, raw, o) in attrs {
            let v = self.run.macros.expand(&raw, &self.iwd, &o)?;
            let e = self.expr(&format!("+{name}"), v.trim(), &o)?;
            self.set(&name, e);
        }
        self.check_numeric()?;
        Ok(self.ad)
    }

    fn module(&mut self, path: &str, o: &Origin) -> Result<(String, u64, bool), SubmitError> {
        if let Some(hit) = self.run.modules.by_path.get(path) {
            return Ok(hit.clone());
        }
        let bytes = self.run.ctx.fs.read(path, MAX_MODULE_LEN).map_err(|e| {
            o.error(ErrorKind::Io, format!("cannot read the executable {path:?}: {e}"))
        })?;
        if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
            return Err(o.error(
                ErrorKind::NotWasm,
                format!("the executable {path:?} is not a WebAssembly module (it does not start with \\0asm); compile the program for wasm32-wasip1"),
            ));
        }
        let hex = hex::encode(Sha256::digest(&bytes));
        let digest = format!("sha256:{hex}");
        let len = bytes.len() as u64;
        let instrumented = andes_compile::instrumentation_version(&bytes).is_some();
        self.run.modules.by_path.insert(path.to_string(), (digest.clone(), len, instrumented));
        if !self.run.modules.modules.iter().any(|m| m.digest == digest && m.path == path) {
            self.run.modules.modules.push(Module {
                path: path.to_string(),
                digest: digest.clone(),
                bytes,
            });
        }
        Ok((digest, len, instrumented))
    }

    fn input_kb(&mut self, f: &str) -> u64 {
        let path = resolve(&self.iwd, f.trim_end_matches('/'));
        if let Some(k) = self.run.sizes.get(&path) {
            return *k;
        }
        let fs = self.run.ctx.fs;
        let mut total = 0u64;
        let mut entries = 0usize;
        let mut stack = vec![(path.clone(), 0usize)];
        while let Some((p, depth)) = stack.pop() {
            if let Some(size) = fs.file_size(&p) {
                total = total.saturating_add(kib(size));
            } else if depth < MAX_DIR_DEPTH {
                for (name, _) in fs.read_dir(&p).unwrap_or_default() {
                    entries += 1;
                    if entries > MAX_DIR_ENTRIES {
                        break;
                    }
                    stack.push((format!("{p}/{name}"), depth + 1));
                }
            }
        }
        self.run.sizes.insert(path, total);
        total
    }

    fn arguments(&mut self) -> Result<(), SubmitError> {
        let Some((v, o)) = self.cmd(&["arguments", "args"])? else {
            self.set("Arguments", lit(Value::string("")));
            return Ok(());
        };
        if let Some(inner) = v.strip_prefix('"') {
            let Some(inner) = inner.strip_suffix('"') else {
                return Err(o.error(
                    ErrorKind::InvalidValue,
                    format!("arguments = {v}: a V2 argument string must end with a double quote"),
                ));
            };
            let inner = v2_unescape(inner)
                .map_err(|m| o.error(ErrorKind::InvalidValue, format!("arguments = {v}: {m}")))?;
            let words = argenv::split_v2(&inner)
                .map_err(|e| o.error(ErrorKind::InvalidValue, format!("arguments = {v}: {e}")))?;
            self.set("Arguments", lit(Value::string(argenv::join_v2(&words))));
        } else {
            let words: Vec<String> =
                argenv::split_v1_args(&v).into_iter().map(|w| w.replace("\\\"", "\"")).collect();
            self.set("Args", lit(Value::string(words.join(" "))));
        }
        Ok(())
    }

    fn environment(&mut self) -> Result<(), SubmitError> {
        let Some((v, o)) = self.cmd(&["environment", "env"])? else {
            self.set("Environment", lit(Value::string("")));
            return Ok(());
        };
        let pairs = if let Some(inner) = v.strip_prefix('"') {
            let Some(inner) = inner.strip_suffix('"') else {
                return Err(o.error(
                    ErrorKind::InvalidValue,
                    format!(
                        "environment = {v}: a V2 environment string must end with a double quote"
                    ),
                ));
            };
            let inner = v2_unescape(inner)
                .map_err(|m| o.error(ErrorKind::InvalidValue, format!("environment = {v}: {m}")))?;
            argenv::parse_env_v2(&inner)
        } else {
            argenv::parse_env_v1(&v)
        }
        .map_err(|e| o.error(ErrorKind::InvalidValue, format!("environment = {v}: {e}")))?;
        let words: Vec<String> = pairs.iter().map(|(k, val)| format!("{k}={val}")).collect();
        self.set("Environment", lit(Value::string(argenv::join_v2(&words))));
        Ok(())
    }

    fn policies(&mut self) -> Result<(), SubmitError> {
        let erc = self.cmd(&["on_exit_remove", "OnExitRemove"])?;
        let ehc = self.cmd(&["on_exit_hold", "OnExitHold"])?;
        for (names, attr) in [
            (&["on_exit_hold_reason", "OnExitHoldReason"][..], "OnExitHoldReason"),
            (&["on_exit_hold_subcode", "OnExitHoldSubCode"][..], "OnExitHoldSubCode"),
            (&["periodic_hold", "PeriodicHold"][..], "PeriodicHold"),
            (&["periodic_hold_reason", "PeriodicHoldReason"][..], "PeriodicHoldReason"),
            (&["periodic_hold_subcode", "PeriodicHoldSubCode"][..], "PeriodicHoldSubCode"),
            (&["periodic_release", "PeriodicRelease"][..], "PeriodicRelease"),
            (&["periodic_remove", "PeriodicRemove"][..], "PeriodicRemove"),
        ] {
            self.expr_cmd(names, attr)?;
        }
        // The exit code with which a job says "I saved my state, run me again".
        if let Some((n, _)) = self.int_cmd(&["checkpoint_exit_code", "CheckpointExitCode"])? {
            self.set("CheckpointExitCode", lit(n));
        }
        let max_retries = self.int_cmd(&["max_retries", "JobMaxRetries"])?;
        let success = self.int_cmd(&["success_exit_code", "JobSuccessExitCode"])?;
        let until = self.cmd(&["retry_until"])?;
        if max_retries.is_none() && success.is_none() && until.is_none() {
            if let Some((v, o)) = erc {
                let e = self.expr("on_exit_remove", &v, &o)?;
                self.set("OnExitRemove", e);
            }
            if let Some((v, o)) = ehc {
                let e = self.expr("on_exit_hold", &v, &o)?;
                self.set("OnExitHold", e);
            }
            return Ok(());
        }
        // Retries: HTCondor's SetJobRetries.
        let mut extra = match &erc {
            Some((v, o)) => {
                self.expr("on_exit_remove", v, o)?;
                v.clone()
            }
            None => String::new(),
        };
        if let Some((v, o)) = &until {
            let e = self.expr("retry_until", v, o).map_err(|_| {
                o.error(
                    ErrorKind::InvalidValue,
                    format!(
                        "retry_until={v} is invalid, it must be an integer or boolean expression."
                    ),
                )
            })?;
            let clause = match e.as_literal() {
                Some(Value::Int(n)) => format!("ExitCode == {n}"),
                _ => v.clone(),
            };
            if !extra.is_empty() {
                extra.push_str(" || ");
            }
            extra.push_str(&clause);
        }
        let n = max_retries.map(|(n, _)| n).unwrap_or(2);
        self.set("JobMaxRetries", lit(n));
        let code = match success {
            Some((c, _)) => {
                self.set("JobSuccessExitCode", lit(c));
                "JobSuccessExitCode".to_string()
            }
            None => "0".to_string(),
        };
        match ehc {
            Some((v, o)) => {
                let e = self.expr("on_exit_hold", &v, &o)?;
                self.set("OnExitHold", e);
            }
            None => self.set("OnExitHold", lit(false)),
        }
        let mut rm = format!("NumJobCompletions > JobMaxRetries || ExitCode =?= {code}");
        if !extra.is_empty() {
            rm.push_str(" || ");
            rm.push_str(&extra);
        }
        let e = classad::parse_expr(&rm)
            .map_err(|e| self.queue.error(ErrorKind::Expression, format!("OnExitRemove: {e}")))?;
        self.set("OnExitRemove", e);
        Ok(())
    }
}

/// `""` inside a double-quoted V2 string is one `"`; a lone `"` is an error.
fn v2_unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '"' {
            if it.peek() == Some(&'"') {
                it.next();
            } else {
                return Err("a double quote inside the string must be doubled (\"\")".into());
            }
        }
        out.push(c);
    }
    Ok(out)
}

fn kib(bytes: u64) -> u64 {
    bytes.div_ceil(1024)
}

/// A comma-separated file list, each entry trimmed, empty ones dropped.
/// With `preserve_relative_paths`, a relative entry of a transfer list keeps
/// its path in the sandbox: one that climbs out (`..`) is refused here, as
/// the schedd and the execute host refuse it again.
fn leaves_no_sandbox(command: &str, list: &[String], o: &Origin) -> Result<(), SubmitError> {
    for item in list {
        if !item.starts_with('/') && item.split('/').any(|c| c == "..") {
            return Err(o.error(
                ErrorKind::InvalidValue,
                format!(
                    "{command} names {item}: with preserve_relative_paths a relative path keeps \
                     its place in the job's sandbox, so it may not climb out of it with '..'"
                ),
            ));
        }
    }
    Ok(())
}

fn file_list(v: &str) -> Vec<String> {
    unquote(v).split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// Evaluates a constant expression with a fixed clock and seed, so that the
/// result never depends on when it runs.
fn eval_const(e: &Expr) -> Value {
    classad::Evaluator::with_options(classad::EvalOptions {
        strict: false,
        now: Some(0),
        seed: Some(0),
        ..Default::default()
    })
    .eval(e, None, None)
}

/// HTCondor's boolean spellings, then an expression that evaluates to a
/// boolean or a number.
pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "yes" | "y" | "1" => return Some(true),
        "false" | "f" | "no" | "n" | "0" => return Some(false),
        _ => {}
    }
    let e = classad::parse_expr(v).ok()?;
    match eval_const(&e) {
        Value::Bool(b) => Some(b),
        Value::Int(n) => Some(n != 0),
        Value::Real(r) => Some(r != 0.0),
        _ => None,
    }
}

/// An integer literal, possibly signed.
pub(crate) fn parse_int(v: &str) -> Option<i64> {
    let t = v.trim();
    let t = t.strip_prefix('+').unwrap_or(t);
    t.parse::<i64>().ok()
}

/// An integer literal, or a constant expression with an integer (or real,
/// truncated) value, as HTCondor's integer-valued commands take.
pub(crate) fn eval_int(v: &str) -> Option<i64> {
    if let Some(n) = parse_int(v) {
        return Some(n);
    }
    let e = classad::parse_expr(v).ok()?;
    match eval_const(&e) {
        Value::Int(n) => Some(n),
        Value::Real(r) if r.is_finite() && r.abs() < 9.2e18 => Some(r as i64),
        _ => None,
    }
}

/// HTCondor's `parse_int64_bytes`: a number with an optional unit suffix
/// (`K`, `M`, `G`, `T`, `P`, optionally followed by `B`, any case) turned
/// into units of `base` bytes, rounding up; without a suffix the number is
/// already in units of `base`. `None` when the text is not of that form.
pub(crate) fn parse_bytes(v: &str, base: u64) -> Option<i64> {
    let t = v.trim();
    let num_end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0)))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(num_end);
    if !num.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: f64 = num.parse().ok()?;
    let unit = unit.trim().to_ascii_uppercase();
    let unit = unit.strip_suffix('B').filter(|u| !u.is_empty()).unwrap_or(&unit);
    let mult: f64 = match unit {
        "" => base as f64,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "T" => 1024f64.powi(4),
        "P" => 1024f64.powi(5),
        _ => return None,
    };
    let r = (value * mult + base as f64 - 1.0) / base as f64;
    if !r.is_finite() || r.abs() >= 9.2e18 {
        return None;
    }
    Some(r as i64)
}

/// Every attribute name an expression refers to (lower case), including
/// the `x` of `TARGET.x` and `MY.x`.
/// Whether `e` reads an attribute of the machine (`TARGET.…`), which only
/// matchmaking can evaluate (a string that merely contains the word does not).
fn references_target(e: &Expr) -> bool {
    referenced(e).iter().any(|n| n == "target")
}

fn referenced(e: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Lit(_) => {}
            Expr::Attr { name, .. } => out.push(name.as_str().to_ascii_lowercase()),
            Expr::Select(b, n) => {
                out.push(n.as_str().to_ascii_lowercase());
                stack.push(b);
            }
            Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Elvis(a, b) => {
                stack.push(a);
                stack.push(b);
            }
            Expr::Unary(_, a) | Expr::Paren(a) => stack.push(a),
            Expr::Cond(a, b, c) => {
                stack.push(a);
                stack.push(b);
                stack.push(c);
            }
            Expr::Call(c) => stack.extend(c.args.iter()),
            Expr::List(v) => stack.extend(v.iter()),
            Expr::Record(ad) => stack.extend(ad.iter().map(|(_, e)| e)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_units_like_htcondor() {
        let mib = 1 << 20;
        let kib = 1 << 10;
        assert_eq!(parse_bytes("512", mib), Some(512));
        assert_eq!(parse_bytes("1536M", mib), Some(1536));
        assert_eq!(parse_bytes("2 GB", mib), Some(2048));
        assert_eq!(parse_bytes("4G", mib), Some(4096));
        assert_eq!(parse_bytes("-5", mib), Some(-4));
        assert_eq!(parse_bytes("1G", kib), Some(1_048_576));
        assert_eq!(parse_bytes("3 MB", kib), Some(3072));
        assert_eq!(parse_bytes("1.5g", mib), Some(1536));
        assert_eq!(parse_bytes("100k", mib), Some(1));
        assert_eq!(parse_bytes("lots", mib), None);
        assert_eq!(parse_bytes("1 + 1", mib), None);
        assert_eq!(parse_bytes("1e400", mib), None);
        assert_eq!(parse_bytes("12Q", mib), None);
    }

    #[test]
    fn booleans() {
        for t in ["true", "TRUE", "yes", "T", "1", "2 > 1"] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["false", "No", "0", "f"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("maybe"), None);
        assert_eq!(parse_bool("\"x\""), None);
        assert_eq!(eval_int(" -5 "), Some(-5));
        assert_eq!(eval_int("2 * 3"), Some(6));
        assert_eq!(eval_int("high"), None);
        assert_eq!(eval_int("\"7\""), None);
    }

    #[test]
    fn references() {
        let e = classad::parse_expr("TARGET.Arch == \"x\" && MY.RequestDisk > f(Memory)").unwrap();
        let r = referenced(&e);
        for n in ["arch", "requestdisk", "memory", "target", "my"] {
            assert!(r.contains(&n.to_string()), "{n} in {r:?}");
        }
    }
}
