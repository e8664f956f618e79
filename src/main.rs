//! `andes`: the command users run. Each subcommand lives in `cmd/`.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[macro_use]
mod out;
mod cmd;
mod condor;
mod logs;
use andes_client::settings;

#[cfg(all(unix, feature = "jemalloc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// andes: high-throughput computing for WebAssembly jobs.
#[derive(Parser)]
#[command(name = "andes", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate ClassAd expressions and analyse matches.
    #[command(subcommand)]
    Classad(cmd::classad::ClassadCmd),
    /// Run a Wasm module locally in the execute host's sandbox and say how it
    /// ended, in HTCondor's terms (try a job before submitting it).
    Run(cmd::run::RunArgs),
    /// Make the key pair a user or daemon signs its requests with.
    Keygen(cmd::keygen::KeygenArgs),
    /// Run the schedd: the durable job queue and its signed HTTP API.
    Schedd(cmd::schedd::ScheddArgs),
    /// Submit jobs from a submit description file (condor_submit).
    Submit(cmd::submit::SubmitArgs),
    /// Fetch the output of jobs submitted with --spool (condor_transfer_data).
    TransferData(cmd::transfer::TransferArgs),
    /// Show the job queue (condor_q).
    Q(cmd::q::QArgs),
    /// Show jobs that left the queue (condor_history).
    History(cmd::q::HistoryArgs),
    /// Put jobs on hold (condor_hold).
    Hold(cmd::act::ActArgs),
    /// Release held jobs (condor_release).
    Release(cmd::act::ActArgs),
    /// Remove jobs (condor_rm).
    Rm(cmd::act::ActArgs),
    /// Vacate running jobs: each leaves its slot, checkpointing if it can,
    /// and goes back to idle to run again (condor_vacate_job).
    VacateJob(cmd::act::ActArgs),
    /// Change an attribute of queued jobs (condor_qedit).
    Qedit(cmd::act::QeditArgs),
    /// Run the execute host daemon (condor_startd), or talk to it: `status`,
    /// `off`, `set-attr`.
    Host(cmd::host::HostArgs),
    /// Vacate this host's slots (condor_vacate).
    Vacate(cmd::vacate::VacateArgs),
    /// Drain a host: no new jobs; running ones finish (or checkpoint and
    /// leave) and its slots are Drained (condor_drain); `-cancel` undoes it.
    Drain(cmd::vacate::DrainArgs),
    /// Have this host's running jobs checkpoint now and run on
    /// (condor_checkpoint).
    Checkpoint(cmd::vacate::CheckpointArgs),
    /// Have the schedd and this host read their configuration again
    /// (condor_reconfig): a new startd policy applies at once while slots
    /// keep their jobs.
    Reconfig(cmd::vacate::ReconfigArgs),
    /// Run the central manager: the collector and the negotiator.
    CentralManager(cmd::central::CentralArgs),
    /// Serve a live web page of the pool, as you (your key, your jobs), on
    /// 127.0.0.1 behind a login token: it prints the URL to open.
    Dashboard(cmd::dashboard::DashboardArgs),
    /// Show user priorities (condor_userprio).
    Userprio(cmd::central::UserprioArgs),
    /// Run a whole personal pool in one process (`up`), or stop it (`down`).
    Pool(cmd::pool::PoolArgs),
    /// Show the pool's machines, schedds, submitters or negotiators from the
    /// collector (condor_status).
    Status(cmd::status::StatusArgs),
    /// The job router: `q` shows routed jobs, `history` what they did.
    #[command(subcommand)]
    Router(cmd::router::RouterCmd),
    /// Check CronTab schedules: `next` prints when one runs.
    #[command(subcommand)]
    Cron(cmd::cron::CronCmd),
    /// Run a DAG workflow against the pool in this process (condor_dagman):
    /// node jobs with their VARS, PRE and POST scripts, retries, rescue DAGs.
    Dagman(cmd::dagman::DagmanArgs),
    /// Queue a DAG workflow's DAGMan as a job of the schedd, which runs it as
    /// you on the submit machine (condor_submit_dag).
    SubmitDag(cmd::submit_dag::SubmitDagArgs),
    /// Checkpoint snapshots: `inspect` prints one's header and checks it.
    #[command(subcommand)]
    Snapshot(cmd::snapshot::SnapshotCmd),
    /// Instrument a wasip1 module so the host can checkpoint it transparently
    /// (condor_compile).
    Compile(cmd::compile::CompileArgs),
    /// A running job's output as it is written (condor_tail); `-f` follows.
    Tail(cmd::tail::TailArgs),
    /// Track jobs through their event logs: a live table per cluster with
    /// progress bars (condor_watch_q).
    Watch(cmd::watch::WatchArgs),
    /// What the configuration says of knobs, and where (condor_config_val).
    ConfigVal(cmd::config_val::ConfigValArgs),
    /// Wait until the jobs of a job event log have completed or been
    /// aborted (condor_wait).
    Wait(cmd::wait::WaitArgs),
    /// Print a shell's completion script for andes (bash, zsh, fish,
    /// elvish, powershell): `andes completions bash > /etc/bash_completion.d/andes`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write man pages for andes and each of its commands into DIR.
    Man {
        /// Where (a man1 directory, say).
        dir: std::path::PathBuf,
    },
    /// Make HTCondor's command names (condor_q, condor_submit, ...) in DIR,
    /// each a link to this program, which answers to them as HTCondor's do.
    InstallNames {
        /// Where to put them (a directory on PATH).
        dir: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let typed: Vec<OsString> = std::env::args_os().collect();
    let (args, rewritten) = match condor::args(typed.clone(), condor::cli()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("andes: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        // Help and version, on standard output (see `out`).
        Err(e) if !e.use_stderr() => {
            if let Err(io) = e.print() {
                out::failed(&io);
            }
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
        Err(e) => {
            eprint!("{}", condor::error_text(&e, &typed, &rewritten));
            return ExitCode::from(2);
        }
    };
    if matches!(
        cli.command,
        Command::Schedd(_) | Command::Host(_) | Command::CentralManager(_) | Command::Pool(_)
    ) {
        // Errors are part of the daemons' normal work (every job's proc_exit
        // is one, inside wasmtime): with RUST_BACKTRACE set, each would
        // capture a backtrace. Panics keep theirs.
        if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
            // SAFETY: at the start of main, before any thread exists.
            unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
        }
        // What a daemon creates holds job data: its account's alone, unless
        // written for others on purpose (address files, public keys).
        andes_beneath::private::owner_only_by_default();
        // A daemon logs to its file too once its configuration is read
        // (`logs::init`); the host's other commands to standard error only.
        if matches!(&cli.command, Command::Host(a) if !a.is_daemon()) {
            logs::init_stderr();
        }
    }
    let result = match cli.command {
        Command::Classad(c) => cmd::classad::run(c),
        Command::Run(a) => cmd::run::run(a),
        Command::Keygen(a) => cmd::keygen::run(a),
        Command::Schedd(a) => cmd::schedd::run(a),
        Command::Submit(a) => cmd::submit::run(a),
        Command::TransferData(a) => cmd::transfer::run(a),
        Command::Q(a) => cmd::q::run(a),
        Command::History(a) => cmd::q::history(a),
        Command::Hold(a) => cmd::act::run(cmd::act::Verb::Hold, a),
        Command::Release(a) => cmd::act::run(cmd::act::Verb::Release, a),
        Command::Rm(a) => cmd::act::run(cmd::act::Verb::Remove, a),
        Command::VacateJob(a) => cmd::act::run(cmd::act::Verb::Vacate, a),
        Command::Qedit(a) => cmd::act::qedit(a),
        Command::Host(a) => cmd::host::run(a),
        Command::Vacate(a) => cmd::vacate::run(a),
        Command::Checkpoint(a) => cmd::vacate::checkpoint(a),
        Command::Drain(a) => cmd::vacate::drain(a),
        Command::Reconfig(a) => cmd::vacate::reconfig(a),
        Command::CentralManager(a) => cmd::central::run(a),
        Command::Userprio(a) => cmd::central::userprio(a),
        Command::Dashboard(a) => cmd::dashboard::run(a),
        Command::Pool(a) => cmd::pool::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Cron(c) => cmd::cron::run(c),
        Command::Dagman(a) => cmd::dagman::run(a),
        Command::SubmitDag(a) => cmd::submit_dag::run(a),
        Command::Router(c) => cmd::router::run(c),
        Command::Snapshot(c) => cmd::snapshot::run(c),
        Command::Compile(a) => cmd::compile::run(a),
        Command::Wait(a) => cmd::wait::run(a),
        Command::Watch(a) => cmd::watch::run(a),
        Command::Tail(a) => cmd::tail::run(a),
        Command::ConfigVal(a) => cmd::config_val::run(a),
        Command::Completions { shell } => {
            condor::completions(shell).map(|()| ExitCode::SUCCESS).map_err(anyhow::Error::from)
        }
        Command::Man { dir } => condor::man_pages(&dir).map(|made| {
            outln!("{} man pages in {}", made.len(), dir.display());
            ExitCode::SUCCESS
        }),
        Command::InstallNames { dir } => condor::install_names(&dir).map(|made| {
            for m in &made {
                outln!("{}", m.display());
            }
            ExitCode::SUCCESS
        }),
    };
    match result {
        Ok(code) => code,
        // A reader that stopped early: nothing to say (see `out`).
        Err(e) if out::reader_gone(&e) => ExitCode::from(out::READER_GONE),
        Err(e) => {
            // A daemon's refusal says what is wrong; how it was reached does not.
            match e.downcast_ref::<andes_protocol::ClientError>().map(|c| &c.kind) {
                Some(k @ andes_protocol::ClientErrorKind::Status { .. }) => {
                    eprintln!("andes: {k}")
                }
                _ => eprintln!("andes: {e:#}"),
            }
            ExitCode::from(2)
        }
    }
}
