//! `andes vacate`: vacate this host's slots (condor_vacate).

use std::process::ExitCode;

use andes_host::daemon::api::VacateRequest;
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
