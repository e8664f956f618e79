//! `andes vacate` (condor_vacate) and `andes checkpoint` (condor_checkpoint):
//! a host's slots vacated, or their jobs checkpointed.

use std::process::ExitCode;

use andes_host::api::VacateRequest;
use anyhow::{Result, anyhow};
use clap::Args;

/// Arguments of `andes vacate`.
#[derive(Args, Debug)]
pub struct VacateArgs {
    /// Hard-kill the jobs now instead of letting them retire and vacate.
    #[arg(long)]
    fast: bool,
    /// The slot (`slot1@host`, `slot1` or `1`); none: every slot.
    slot: Option<String>,
}

/// The slot number a name gives: `slot1@host`, `slot1` or `1`.
pub fn slot_number(name: &str) -> Result<u32> {
    let head = name.split('@').next().unwrap_or(name);
    let digits = head.strip_prefix("slot").unwrap_or(head);
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| anyhow!("`{name}` is not a slot (expected slotN@host, slotN or N)"))
}

/// Arguments of `andes checkpoint`.
#[derive(Args, Debug)]
pub struct CheckpointArgs {
    /// The slot (`slot1@host`, `slot1` or `1`); none: every slot.
    slot: Option<String>,
}

/// Runs `andes checkpoint` (condor_checkpoint): the host's jobs that can
/// checkpoint (compiled by `andes compile`, or cooperative) save now and
/// run on; the checkpoint goes to the schedd as a periodic one does.
pub fn checkpoint(args: CheckpointArgs) -> Result<ExitCode> {
    let slot = args.slot.as_deref().map(slot_number).transpose()?;
    super::host::command(
        "/v1/checkpoint",
        serde_json::to_value(andes_host::api::CheckpointRequest { slot })?,
    )
}

/// Arguments of `andes drain`.
#[derive(Args, Debug)]
pub struct DrainArgs {
    /// The host: its machine name as the collector knows it, or HOST:PORT;
    /// none: this machine's host daemon.
    host: Option<String>,
    /// Vacate the jobs at once (they checkpoint if they can) instead of
    /// letting them retire.
    #[arg(long)]
    fast: bool,
    /// Take claims again.
    #[arg(long)]
    cancel: bool,
}

/// Runs `andes drain` (condor_drain): the host takes no new claims; its
/// running jobs finish within their retirement time (or leave at once,
/// checkpointing, with `-fast`) and each slot, once empty, is Drained.
pub fn drain(args: DrainArgs) -> Result<ExitCode> {
    let addr = match args.host.as_deref() {
        None => None,
        Some(h) if h.contains(':') => Some(h.to_string()),
        Some(h) => Some(host_address(h)?),
    };
    super::host::command_at(
        addr.as_deref(),
        "/v1/drain",
        serde_json::to_value(andes_host::api::DrainRequest {
            fast: args.fast,
            cancel: args.cancel,
        })?,
    )
}

/// The address of the host whose slots the collector lists as on `machine`.
fn host_address(machine: &str) -> Result<String> {
    let ads = super::status::machine_ads()?;
    let found = ads.iter().find_map(|ad| {
        let on = |n: &str| matches!(ad.eval_attr(n), classad::Value::Str(s) if s.eq_ignore_ascii_case(machine));
        let named = on("Machine")
            || matches!(ad.eval_attr("Name"), classad::Value::Str(s) if s.rsplit('@').next().is_some_and(|m| m.eq_ignore_ascii_case(machine)));
        match (named, ad.eval_attr("MyAddress")) {
            (true, classad::Value::Str(a)) => Some(a.to_string()),
            _ => None,
        }
    });
    found.ok_or_else(|| anyhow!("the collector knows no host {machine} (andes status lists them)"))
}

/// Runs `andes vacate`.
pub fn run(args: VacateArgs) -> Result<ExitCode> {
    let slot = args.slot.as_deref().map(slot_number).transpose()?;
    super::host::command(
        "/v1/vacate",
        serde_json::to_value(VacateRequest { slot, fast: args.fast })?,
    )
}

#[cfg(test)]
mod tests {
    use super::slot_number;

    #[test]
    fn slot_names() {
        assert_eq!(slot_number("slot2@host.example.org").unwrap(), 2);
        assert_eq!(slot_number("slot10").unwrap(), 10);
        assert_eq!(slot_number("3").unwrap(), 3);
        assert!(slot_number("slot0").is_err());
        assert!(slot_number("host").is_err());
        assert!(slot_number("").is_err());
    }
}

/// Arguments of `andes reconfig`.
#[derive(Args, Debug)]
pub struct ReconfigArgs {
    /// Only this daemon: `schedd`, `startd` (the host) or `negotiator` (the
    /// central manager); none: each of them this configuration names.
    #[arg(long, value_name = "DAEMON")]
    daemon: Option<String>,
}

/// `andes reconfig` (condor_reconfig): the daemons this configuration names
/// read their configuration files again. The host's startd takes the new
/// policy at once while its slots keep their state, claims and jobs (the
/// slot layout waits for a restart); the negotiator takes its knobs from
/// the next cycle, which starts at once; the schedd computes its cron jobs'
/// next runs again.
pub fn reconfig(args: ReconfigArgs) -> Result<ExitCode> {
    let want = args.daemon.as_deref().map(str::to_ascii_lowercase);
    let (schedd, startd, negotiator) = match want.as_deref() {
        None => (true, true, true),
        Some("schedd") => (true, false, false),
        Some("startd" | "host") => (false, true, false),
        Some("negotiator" | "collector" | "central-manager") => (false, false, true),
        Some(d) => anyhow::bail!(
            "no daemon `{d}` to reconfigure: andes reconfigures `schedd`, `startd` or `negotiator`"
        ),
    };
    let settings = crate::settings::Settings::load()?;
    let named = |knob: &str| -> Result<bool> { Ok(settings.get(knob)?.is_some()) };
    let has_host = named("HOST_ADDRESS")?
        || settings.get("HOST_ADDRESS_FILE")?.is_some_and(|f| std::path::Path::new(&f).exists());
    let has_schedd = named("SCHEDD_ADDRESS")? || named("SCHEDD_ADDRESS_FILE")?;
    let has_central = named("COLLECTOR_HOST")?;
    let explicit = want.is_some();
    let post = |session: &super::client::Session, path: &str| -> Result<String> {
        session.command(path, &serde_json::json!({}))
    };
    let mut sent = 0;
    if negotiator && (has_central || explicit) {
        let session = super::client::Session::collector()?;
        outln!("negotiator: {}", post(&session, "/v1/negotiator/reconfig")?);
        sent += 1;
    }
    if schedd && (has_schedd || explicit) {
        let session = super::client::Session::open()?;
        outln!("schedd: {}", post(&session, "/v1/reconfig")?);
        sent += 1;
    }
    if startd && (has_host || explicit) {
        out!("startd: ");
        super::host::command(
            "/v1/reconfig",
            serde_json::to_value(andes_host::api::ReconfigRequest {})?,
        )?;
        sent += 1;
    }
    if sent == 0 {
        anyhow::bail!("this configuration names no daemon to reconfigure");
    }
    Ok(ExitCode::SUCCESS)
}
