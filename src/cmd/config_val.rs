//! `andes config-val`: condor_config_val. What the configuration says of
//! knobs, as every command and daemon reads it.

use std::process::ExitCode;

use clap::Args;

use crate::settings::Settings;

/// Arguments of `andes config-val`.
#[derive(Args, Debug)]
pub struct ConfigValArgs {
    /// The knobs (any case).
    #[arg(required_unless_present = "dump")]
    names: Vec<String>,
    /// Also where each was defined (file and line) and its value as written.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Every knob defined, `NAME = value`, in name order.
    #[arg(long)]
    dump: bool,
}

/// Runs `andes config-val`: exit status 1 when a knob is not defined
/// (`Not defined: NAME` on standard error), as condor_config_val.
pub fn run(args: ConfigValArgs) -> anyhow::Result<ExitCode> {
    let settings = Settings::load()?;
    let config = settings.config();
    if args.dump {
        let mut names: Vec<&str> = config.names().collect();
        names.sort_unstable_by_key(|n| n.to_ascii_uppercase());
        for n in names {
            outln!("{n} = {}", config.raw(n).unwrap_or_default());
            if args.verbose
                && let Some(at) = config.location(n)
            {
                outln!(" # at: {at}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut code = ExitCode::SUCCESS;
    for name in &args.names {
        if !config.is_defined(name) {
            eprintln!("Not defined: {name}");
            code = ExitCode::from(1);
            continue;
        }
        let value = config.get(name)?.unwrap_or_default();
        if args.verbose {
            outln!("{name} = {value}");
            if let Some(at) = config.location(name) {
                outln!(" # at: {at}");
            }
            outln!(" # raw: {}", config.raw(name).unwrap_or_default());
        } else {
            outln!("{value}");
        }
    }
    Ok(code)
}
