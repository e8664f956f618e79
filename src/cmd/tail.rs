//! `andes tail`: condor_tail. A running job's output (or error) as it is
//! written on its execute host, fetched through the schedd.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use andes_protocol::pool::TailReply;
use andes_schedd::api::TailJobRequest;
use andes_schedd::job::JobSelector;
use anyhow::{Result, bail};
use clap::Args;

use crate::cmd::client::Session;

/// How often `-f` asks again.
const POLL: Duration = Duration::from_secs(1);

/// Arguments of `andes tail`.
#[derive(Args, Debug)]
pub struct TailArgs {
    /// The job (`C.P`).
    job: String,
    /// Its standard error instead of its output.
    #[arg(long)]
    stderr: bool,
    /// Follow: print what it writes until it stops running.
    #[arg(short = 'f', long = "follow")]
    follow: bool,
    /// How much of the end to show first, bytes.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    maxbytes: u64,
}

/// Runs `andes tail`.
pub fn run(args: TailArgs) -> Result<ExitCode> {
    let job = match args.job.parse::<JobSelector>().map_err(anyhow::Error::msg)? {
        JobSelector::Job(j) => j,
        JobSelector::Cluster(c) => bail!("name one job, `{c}.PROC`, not a cluster"),
    };
    let session = Session::open()?;
    let ask = |offset: Option<u64>, max: u64| -> Result<TailReply> {
        let req = TailJobRequest { job, stderr: args.stderr, offset, max };
        Ok(session.block_on(session.client.call(http::Method::POST, "/v1/tail", Some(&req)))?)
    };
    let first = ask(None, args.maxbytes.min(andes_protocol::pool::MAX_TAIL))?;
    let mut out = std::io::stdout().lock();
    out.write_all(&first.data)?;
    out.flush()?;
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    let mut at = first.offset + first.data.len() as u64;
    loop {
        std::thread::sleep(POLL);
        match ask(Some(at), andes_protocol::pool::MAX_TAIL) {
            Ok(r) => {
                out.write_all(&r.data)?;
                out.flush()?;
                at = r.offset + r.data.len() as u64;
            }
            // It stopped running (ended, held, vacated): so does the tail.
            Err(e) if is_not_running(&e) => return Ok(ExitCode::SUCCESS),
            Err(e) => return Err(e),
        }
    }
}

fn is_not_running(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<andes_protocol::ClientError>().map(|c| &c.kind),
        Some(andes_protocol::ClientErrorKind::Status { status, .. })
            if *status == http::StatusCode::CONFLICT || *status == http::StatusCode::NOT_FOUND
    )
}
