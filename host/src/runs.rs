//! A job's run on a slot: its sandbox, its starter task, a compiled job's
//! snapshots, and what the daemon does when it ends (the report for the
//! shadow, the history, the slot's next job).

use std::path::PathBuf;
use std::sync::Arc;

use andes_startd::{Event, SlotId};
use classad::{ClassAd, Value};

use crate::benchmark;
use crate::daemon::*;
use crate::owed::OwedEnd;
use crate::pool::claim::{BlobDir, HostSnapshot, KeptOutputs};
use crate::pool::files::{ACTIVATION_INLINE_BUDGET, Outputs, collect_outputs, write_inputs};
use andes_protocol::stream::parse_digest;
use andes_starter::control::Control;
use andes_starter::starter::{Ending, JobResult, JobSpec, Limits};

impl Daemon {
    /// Waits for the next starter to end, feeds the machine what it means
    /// and reports it. Never returns while no starter runs.
    pub async fn next_exit(&mut self) -> ExitReport {
        loop {
            // The daemon holds a sender, so the channel never closes.
            let Some(exit) = self.exits_rx.recv().await else {
                std::future::pending::<()>().await;
                continue;
            };
            if let Some(r) = self.on_exit(exit) {
                return r;
            }
        }
    }

    pub(crate) fn on_exit(&mut self, exit: Exit) -> Option<ExitReport> {
        let slot = exit.slot;
        if self.runs.get(&slot).is_none_or(|r| r.generation != exit.generation) {
            // An abandoned starter that ended after all.
            return None;
        }
        if let Finished::Saved = exit.finished {
            // The job saved its state: the shadow hears of it at once.
            let saved = self.runs.get(&slot).map(|r| r.ctl.saved());
            if let (Some(c), Some((n, Some(d)))) = (self.claim_of_slot(slot), saved) {
                c.publish(|r| r.saved = Some((n, d)));
            }
            return None;
        }
        if let Finished::Snapshot(taken) = exit.finished {
            self.on_snapshot(slot, *taken);
            return None;
        }
        let run = self.runs.remove(&slot)?;
        if self.deferred.remove(&slot) {
            self.feed(deferred_attr(slot, None));
        }
        let mut emptied = false;
        if run.kind == RunKind::Job
            && let Finished::Starter(result) = &exit.finished
        {
            emptied = self.report_exit(slot, &run, result);
        }
        if emptied || run.sandbox.exists() {
            // Not kept for streamed outputs (renamed away): used again.
            self.recycle_sandbox(slot, run.sandbox.clone(), emptied);
        }
        let ending = match exit.finished {
            Finished::Benchmark { mips, kflops } => {
                self.feed(Event::BenchmarkFinished { slot, mips, kflops });
                None
            }
            Finished::Saved | Finished::Snapshot(_) => return None,
            Finished::Starter(result) => {
                self.log(format!("slot {slot}: {:?} ended: {:?}", run.kind, result.ending));
                self.endings.insert(slot, result.ending.clone());
                let outcome = outcome(&result.ending);
                match run.kind {
                    RunKind::Backfill => {
                        self.feed(Event::BackfillExited { slot });
                    }
                    // The claim's next queued job starts in the same step.
                    _ => match self.next_queued(slot) {
                        Some((claim_id, next)) => {
                            self.exit_and_continue(slot, outcome, claim_id, next)
                        }
                        None => {
                            self.feed(Event::StarterExited { slot, outcome });
                        }
                    },
                }
                Some(result.ending)
            }
        };
        Some(ExitReport { slot, kind: run.kind, ending })
    }

    /// A transparent checkpoint of the slot's job: the shadow hears of it at
    /// once (its report carries the snapshot and the file contents it names).
    pub(crate) fn on_snapshot(
        &mut self,
        slot: SlotId,
        taken: Result<andes_starter::transparent::Checkpoint, String>,
    ) {
        let c = match taken {
            Ok(c) => c,
            Err(e) => {
                self.log(format!("slot {slot}: checkpoint failed: {e}"));
                return;
            }
        };
        let Some(blobs) = self.runs.get(&slot).and_then(|r| r.blobs.clone()) else { return };
        let Some(hash) = andes_snapshot::stored_hash(&c.bytes) else { return };
        let files: Arc<std::collections::HashSet<String>> =
            Arc::new(c.header.contents().map(|f| f.blake3.to_string()).collect());
        self.log(format!(
            "slot {slot}: checkpoint taken ({} bytes, {} contents{})",
            c.bytes.len(),
            files.len(),
            if c.stopping { ", the job stops" } else { "" }
        ));
        let snap = Arc::new(HostSnapshot {
            hash: hash.clone(),
            bytes: Arc::new(c.bytes),
            files: files.clone(),
            blobs,
            stopping: c.stopping,
        });
        if let Some(claim) = self.claim_of_slot(slot) {
            claim.publish(|r| {
                Arc::make_mut(&mut r.known).insert(hash, files);
                r.snapshot = Some(snap);
            });
        }
    }

    /// Appends the startd's copy of a finished job's ad to STARTD_HISTORY, in
    /// HTCondor's history-file form (the ad, then a `***` banner). A failure
    /// is logged and otherwise dropped, as HTCondor's startd does.
    /// (The job's ad is printed with its ending bound over it, not copied.)
    pub(crate) fn write_history(
        history: &mut Option<std::fs::File>,
        now: i64,
        job: &ClassAd,
        ending: &ClassAd,
    ) {
        use std::io::Write as _;
        let Some(f) = history else { return };
        let mut completion = ClassAd::new();
        completion.insert_value(classad::name!("CompletionDate"), now);
        let layers = [job, ending, &completion];
        let value = |n: &classad::AttrName| {
            layers.iter().rev().find(|a| a.contains(n)).map(|a| a.eval_attr(n))
        };
        let int = |n: &classad::AttrName| match value(n) {
            Some(Value::Int(v)) => v,
            _ => -1,
        };
        let owner = match value(classad::name!("Owner")) {
            Some(Value::Str(s)) => s.to_string(),
            _ => String::new(),
        };
        let mut text = String::with_capacity(48 * (job.len() + ending.len()) + 96);
        classad::unparse::old_overlaid_to(&mut text, &layers);
        text.truncate(text.trim_end().len());
        text.push_str(&format!(
            "\n*** ClusterId = {} ProcId = {} Owner = \"{owner}\" CompletionDate = {now}\n",
            int(classad::name!("ClusterId")),
            int(classad::name!("ProcId"))
        ));
        if let Err(e) = f.write_all(text.as_bytes()) {
            tracing::warn!("cannot write STARTD_HISTORY: {e}");
        }
    }

    /// Tells the shadow how the slot's job ended, with its output files;
    /// true when collecting them found the sandbox empty (it needs no
    /// emptying for the slot's next job).
    pub(crate) fn report_exit(&mut self, slot: SlotId, run: &Run, result: &JobResult) -> bool {
        let now = self.now();
        // The job's ad is read where the machine keeps it (borrowed, not
        // copied: only other fields of the daemon change below).
        let Some((claim_id, job)) = self
            .startd
            .slots()
            .iter()
            .find(|s| s.id() == slot)
            .and_then(|s| Some((s.claim_id()?.to_string(), s.job()?)))
        else {
            return false;
        };
        let mut ending = result.to_ad();
        for (name, expr) in &result.updates {
            ending.insert(name.as_str(), expr.clone());
        }
        Self::write_history(&mut self.history, now, job, &ending);
        let evicted = matches!(result.ending, Ending::Evicted { .. });
        let limit = match job.eval_attr(classad::name!("RequestDisk")) {
            Value::Int(kib) if kib > 0 => (kib as u64).saturating_mul(1024),
            _ => u64::MAX,
        };
        let Outputs { files: outputs, streamed, error, errno, sandbox_empty } = if evicted {
            Outputs::default()
        } else {
            let sizes = self.input_sizes.remove(&slot).unwrap_or_default();
            // What this activation's earlier ends carry already counts.
            let carried: u64 = self.claims.get(&claim_id).map_or(0, |c| {
                c.report
                    .borrow()
                    .ended
                    .iter()
                    .flat_map(|e| &e.outputs)
                    .map(|f| f.data.len() as u64)
                    .sum()
            });
            let budget = ACTIVATION_INLINE_BUDGET.saturating_sub(carried);
            collect_outputs(&run.sandbox, job, &sizes, limit, budget)
        };
        // Output files too big for the report stay in the sandbox, renamed
        // out of the slot's way, until the shadow has fetched them.
        let kept = if streamed.is_empty() {
            None
        } else {
            let name = run.sandbox.file_name().map(|n| n.to_string_lossy().into_owned());
            let dir = self
                .execute
                .join(format!("out_{}", name.as_deref().unwrap_or("x").trim_start_matches("dir_")));
            match std::fs::rename(&run.sandbox, &dir) {
                Ok(()) => Some(Arc::new(KeptOutputs { dir, files: streamed })),
                Err(e) => {
                    ending.insert_value(classad::name!("HoldReasonCode"), 12i64);
                    ending.insert_value(
                        classad::name!("HoldReasonSubCode"),
                        e.raw_os_error().unwrap_or(0) as i64,
                    );
                    ending.insert_value(
                        "HoldReason",
                        format!("cannot keep the output files for transfer: {e}").as_str(),
                    );
                    None
                }
            }
        };
        if let Some(e) = error
            && !ending.contains(classad::name!("HoldReasonCode"))
        {
            // HTCondor's "Transfer output files failure" hold; its subcode
            // is the errno (2: a file named that the job did not create).
            ending.insert_value(classad::name!("HoldReasonCode"), 12i64);
            ending.insert_value(classad::name!("HoldReasonSubCode"), errno as i64);
            ending.insert_value(classad::name!("HoldReason"), e.as_str());
        }
        let saved = run.ctl.saved();
        // What the job wrote to its log goes to its user log, as HTCondor's
        // `chirp ulog` does.
        // Only the lines that can be reported are formatted; the rest are
        // counted.
        let shown = result.log.len().min(andes_protocol::pool::MAX_REPORTED_LOG_LINES);
        let lines: Vec<String> = result.log[..shown]
            .iter()
            .map(|(level, text)| format!("job log [{level:?}]: {text}"))
            .collect();
        let more = result.log_dropped.saturating_add((result.log.len() - shown) as u64);
        let log = andes_protocol::pool::bounded_log(&lines, more);
        let gid = match job.eval_attr(classad::name!("GlobalJobId")) {
            Value::Str(s) => s.to_string(),
            _ => String::new(),
        };
        if let Some(c) = self.claims.get(&claim_id) {
            let owed = &mut self.owed;
            let owes = c.owes_end();
            c.publish(|r| {
                if let (n, Some(d)) = saved {
                    r.saved = Some((n, d));
                }
                r.state = andes_protocol::pool::RunState::Exited;
                r.ctl = None;
                static USAGE: classad::Names<6> = classad::Names::new([
                    "RemoteUserCpu",
                    "RemoteSysCpu",
                    "ImageSize",
                    "ResidentSetSize",
                    "MemoryUsage",
                    "DiskUsage",
                ]);
                let mut update = ClassAd::new();
                for n in USAGE.get() {
                    if let Some(e) = ending.get(n) {
                        update.insert(n, e.clone());
                    }
                }
                let end_job = gid.clone();
                let end = andes_protocol::pool::JobEnd {
                    job: gid,
                    version: r.version + 1,
                    update: update.to_string(),
                    ending: ending.to_string(),
                    outputs: outputs.clone(),
                    evicted,
                    log: log.clone(),
                    run_us: Some(own_time_us(&result.usage)),
                };
                // On disk before any shadow can hear of it (crate::owed),
                // unless the claim's holder released it (owed to nobody).
                if owes {
                    owed.record(&OwedEnd {
                        claim: claim_id.clone(),
                        slot,
                        claimant: c.claimant.clone(),
                        incarnation: c.incarnation.clone(),
                        lease_secs: c.job_lease.map_or(0, |l| l.as_secs()),
                        end: end.clone(),
                        kept: kept.as_ref().and_then(|k| {
                            let name = k.dir.file_name()?.to_string_lossy().into_owned();
                            Some((name, k.files.clone()))
                        }),
                    });
                }
                Arc::make_mut(&mut r.ended).push(end);
                if let Some(k) = kept {
                    Arc::make_mut(&mut r.kept).insert(end_job, k);
                }
                r.ending = Some(ending);
                r.outputs = Arc::new(outputs);
                r.evicted = evicted;
            });
        }
        sandbox_empty
    }

    /// A sandbox for the slot's next run: its generation, its directory,
    /// and whether it is known to be empty (made here, or emptied when the
    /// slot's last job ended), so that nobody walks it to find nothing.
    pub(crate) fn fresh_sandbox(
        &mut self,
        slot: SlotId,
    ) -> Result<(u64, PathBuf, bool), std::io::Error> {
        self.generation += 1;
        let g = self.generation;
        // The slot's last sandbox, emptied when its job ended: making and
        // removing a directory per job costs more than the job itself when
        // jobs are short.
        if let Some(dir) = self.spare.remove(&slot) {
            return Ok((g, dir, true));
        }
        let dir = self.execute.join(format!("dir_{slot}_{g}"));
        // A leftover that could not be removed whole is not known empty.
        let left = dir.exists();
        if left {
            remove_sandbox(&dir);
        }
        std::fs::create_dir_all(&dir)?;
        Ok((g, dir, !left))
    }

    pub(crate) fn start(
        &mut self,
        slot: SlotId,
        kind: RunKind,
        ad: ClassAd,
        module: Arc<[u8]>,
    ) -> Result<(), String> {
        if let Some(old) = self.runs.remove(&slot) {
            // The machine starts a job only on a slot with none; a leftover
            // starter is stopped rather than leaked.
            old.ctl.hard_kill();
            old.task.abort();
            remove_sandbox(&old.sandbox);
        }
        let (generation, sandbox, mut sandbox_empty) =
            self.fresh_sandbox(slot).map_err(|e| format!("creating a sandbox: {e}"))?;
        if let Some(inputs) = self.inputs.get(&slot).filter(|i| !i.is_empty()) {
            write_inputs(&sandbox, inputs, &self.uploaded_dir(slot))
                .map_err(|e| format!("writing the input files: {e}"))?;
            sandbox_empty = false;
        }
        let digest = match ad.eval_attr(classad::name!("CmdDigest")) {
            Value::Str(d) => parse_digest(&d),
            _ => None,
        };
        // Every job, from a schedd or backfill, is held to its slot's size.
        let limits = {
            let slot_ad = self.ads.get(&slot);
            let int = |n: &classad::AttrName| match slot_ad.map(|a| a.eval_attr(n)) {
                Some(Value::Int(v)) => Some(v),
                _ => None,
            };
            Limits::in_slot(&ad, int(classad::name!("Memory")), int(classad::name!("Disk")))
        };
        let saved_state = match kind {
            RunKind::Job => self.saved_in.get(&slot).cloned(),
            _ => None,
        };
        let checkpoints = kind == RunKind::Job
            && self.snapshot_keys.is_some()
            && self.instrumented(&module, digest);
        let (transparent, blobs, restored) = match (checkpoints, &self.snapshot_keys) {
            (true, Some(keys)) => {
                let snap = self.snapshot_in.remove(&slot);
                let (t, blobs, restored) = self
                    .transparent(slot, generation, &ad, keys.clone(), snap)
                    .map_err(|e| format!("preparing its checkpoints: {e}"))?;
                (Some(t), Some(blobs), restored)
            }
            _ => (None, None, None),
        };
        let spec = JobSpec {
            module,
            limits,
            ad,
            sandbox: sandbox.clone(),
            inherit_stdio: false,
            digest,
            saved_state,
            transparent,
            metered: kind == RunKind::Job && self.short.contains(&slot),
            sandbox_empty,
        };
        let ctl = Control::new();
        let saver = (kind == RunKind::Job).then(|| {
            let (ctl, tx) = (ctl.clone(), self.exits_tx.clone());
            tokio::spawn(async move {
                let mut seen = 0;
                loop {
                    ctl.saved_beyond(seen).await;
                    seen = ctl.saved().0;
                    if tx.send(Exit { slot, generation, finished: Finished::Saved }).is_err() {
                        return;
                    }
                }
            })
        });
        let task = {
            let (host, ctl, clock, tx) =
                (self.host.clone(), ctl.clone(), self.clock.clone(), self.exits_tx.clone());
            // The job runs in place on this task's thread: the daemon stops
            // it through its control, never by aborting the task alone.
            tokio::spawn(async move {
                let result = host.run_in_place(spec, ctl, clock).await;
                let _ = tx.send(Exit { slot, generation, finished: Finished::Starter(result) });
            })
        };
        self.runs.insert(
            slot,
            Run {
                kind,
                generation,
                ctl,
                sandbox,
                task,
                last_cpu: 0.0,
                last_at: self.clock.now(),
                load: 0.0,
                saver,
                blobs,
                restored,
            },
        );
        Ok(())
    }

    /// Where a job compiled by `andes compile` keeps its snapshots' file
    /// contents, and how its snapshots are signed and reported; with the
    /// snapshot an activation brought, the job resumes from it.
    #[allow(clippy::type_complexity)]
    pub(crate) fn transparent(
        &self,
        slot: SlotId,
        generation: u64,
        ad: &ClassAd,
        keys: SnapshotKeys,
        snap: Option<andes_protocol::pool::SnapshotData>,
    ) -> Result<
        (
            Arc<andes_starter::Transparent>,
            Arc<BlobDir>,
            Option<(String, Arc<std::collections::HashSet<String>>)>,
        ),
        std::io::Error,
    > {
        let blobs =
            Arc::new(BlobDir::create(self.execute.join(format!("ckpt_{slot}_{generation}")))?);
        let mut restored = None;
        let mut restore = None;
        if let Some(snap) = snap {
            let mut names = std::collections::HashSet::new();
            let uploaded = self.uploaded_dir(slot);
            for b in &snap.blobs {
                match &b.streamed {
                    None => names.insert(blobs.store.put(&b.data)?),
                    Some(s) => {
                        // Streamed to the claim's uploads: stored, and checked
                        // against its name as it is.
                        let sha = s.sha256.as_deref().unwrap_or_default();
                        let (hash, _) = blobs.store.put_file(&uploaded.join(sha))?;
                        if hash != b.name {
                            return Err(std::io::Error::other(format!(
                                "the checkpoint's file content {} is {hash}",
                                b.name
                            )));
                        }
                        names.insert(hash)
                    }
                };
            }
            let bytes = match &snap.streamed {
                None => snap.bytes,
                Some(s) => std::fs::read(uploaded.join(s.sha256.as_deref().unwrap_or_default()))?,
            };
            restored = Some((snap.hash, Arc::new(names)));
            restore = Some(Arc::from(bytes));
        }
        let job = match ad.eval_attr(classad::name!("GlobalJobId")) {
            Value::Str(s) => s.to_string(),
            _ => format!("slot{slot}"),
        };
        let tx = self.exits_tx.clone();
        let sink =
            Arc::new(move |taken: Result<andes_starter::transparent::Checkpoint, String>| {
                let finished = Finished::Snapshot(Box::new(taken));
                let _ = tx.send(Exit { slot, generation, finished });
            });
        let t = andes_starter::Transparent {
            job,
            public: keys.public,
            sign: keys.sign,
            blobs: blobs.store.clone(),
            sink,
            restore,
            trusted: keys.trusted,
        };
        Ok((Arc::new(t), blobs, restored))
    }

    pub(crate) fn start_benchmark(&mut self, slot: SlotId) -> Result<(), String> {
        let (generation, sandbox, _) =
            self.fresh_sandbox(slot).map_err(|e| format!("creating a sandbox: {e}"))?;
        let ctl = Control::new();
        let task = {
            let (host, clock, tx, dir) =
                (self.host.clone(), self.clock.clone(), self.exits_tx.clone(), sandbox.clone());
            tokio::spawn(async move {
                let (mips, kflops) = match benchmark::run(&host, &dir, clock).await {
                    Ok(r) => (r.mips, r.kflops),
                    Err(e) => {
                        tracing::error!("slot {slot}: benchmark failed: {e}");
                        (0, 0)
                    }
                };
                let _ = tx.send(Exit {
                    slot,
                    generation,
                    finished: Finished::Benchmark { mips, kflops },
                });
            })
        };
        let last_at = self.clock.now();
        self.runs.insert(
            slot,
            Run {
                kind: RunKind::Benchmark,
                generation,
                ctl,
                sandbox,
                task,
                last_cpu: 0.0,
                last_at,
                load: 0.0,
                saver: None,
                blobs: None,
                restored: None,
            },
        );
        Ok(())
    }

    /// Whether `module` (whose digest the job ad names, if it does) was
    /// compiled by `andes compile`, remembered per digest.
    pub(crate) fn instrumented(&mut self, module: &[u8], digest: Option<[u8; 32]>) -> bool {
        let Some(d) = digest else {
            return andes_compile::instrumentation_version(module).is_some();
        };
        *self
            .instrumented
            .entry(d)
            .or_insert_with(|| andes_compile::instrumentation_version(module).is_some())
    }

    /// Empties the sandbox of a job that ended (unless it was just found
    /// `empty`) and keeps it for the slot's next job; one that cannot be
    /// emptied is removed.
    pub(crate) fn recycle_sandbox(&mut self, slot: SlotId, dir: PathBuf, empty: bool) {
        match if empty { Ok(()) } else { empty_dir(&dir) } {
            Ok(()) => {
                if let Some(old) = self.spare.insert(slot, dir) {
                    remove_sandbox(&old);
                }
            }
            Err(e) => {
                tracing::debug!("{}: not emptied ({e}); removed", dir.display());
                remove_sandbox(&dir);
            }
        }
    }
}

/// How long a job took on its own account, in microseconds: its wall time
/// less what it waited for a CPU the host's other jobs held. What the schedd
/// judges a job short or long by: a trivial job among 64 on two cores took
/// 150 ms by the wall clock, and its claim's batches fell to one job each.
fn own_time_us(u: &andes_starter::Usage) -> u64 {
    ((u.remote_wall_clock_time - u.cpu_wait).max(0.0) * 1e6) as u64
}

#[cfg(test)]
mod tests {
    use super::own_time_us;
    use andes_starter::Usage;

    /// What tells a short job from a long one is its own time: its wall time
    /// less what it waited for a CPU; never below nothing.
    #[test]
    fn a_jobs_own_time_leaves_out_its_wait_for_a_cpu() {
        let u =
            |wall, wait| Usage { remote_wall_clock_time: wall, cpu_wait: wait, ..Usage::default() };
        assert_eq!(own_time_us(&u(0.25, 0.125)), 125_000);
        assert_eq!(own_time_us(&u(0.5, 0.0)), 500_000);
        assert_eq!(own_time_us(&u(0.25, 0.5)), 0);
    }
}
