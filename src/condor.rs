//! HTCondor's habits on the command line: the `andes` binary answers to
//! HTCondor's command names (`condor_q` runs `andes q`), and every command
//! takes HTCondor's single-dash long options (`-nobatch`, `-af`,
//! `-constraint`) as well as the double-dash ones.

use std::ffi::OsString;

use clap::CommandFactory;

/// HTCondor's command names and the `andes` command each one runs.
pub const NAMES: &[(&str, &[&str])] = &[
    ("condor_submit", &["submit"]),
    ("condor_q", &["q"]),
    ("condor_status", &["status"]),
    ("condor_history", &["history"]),
    ("condor_rm", &["rm"]),
    ("condor_hold", &["hold"]),
    ("condor_release", &["release"]),
    ("condor_qedit", &["qedit"]),
    ("condor_vacate", &["vacate"]),
    ("condor_vacate_job", &["vacate-job"]),
    ("condor_checkpoint", &["checkpoint"]),
    ("condor_drain", &["drain"]),
    ("condor_userprio", &["userprio"]),
    ("condor_transfer_data", &["transfer-data"]),
    ("condor_router_q", &["router", "q"]),
    ("condor_router_history", &["router", "history"]),
    ("condor_compile", &["compile"]),
    ("condor_wait", &["wait"]),
    ("condor_watch_q", &["watch"]),
    ("condor_tail", &["tail"]),
    ("condor_config_val", &["config-val"]),
    ("condor_reconfig", &["reconfig"]),
    ("condor_dagman", &["dagman"]),
    ("condor_submit_dag", &["submit-dag"]),
];

/// The subcommands whose words are not all options: `run` passes the words
/// after the module to the guest untouched.
const VERBATIM: &[&str] = &["run"];

/// The command name the binary was invoked under (`condor_q` from
/// `/usr/local/bin/condor_q` or `condor_q.exe`).
fn invoked_as(argv0: &OsString) -> String {
    let p = std::path::Path::new(argv0);
    p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Options rewritten from HTCondor's single-dash form: (as typed, as read).
pub type Rewritten = Vec<(String, String)>;

/// The arguments as `andes` parses them, and each single-dash option
/// rewritten on the way (as typed, as rewritten), so that an error can name
/// what the user typed. Invoked as one of [`NAMES`], the command's words go
/// first; invoked as another `condor_*` name, an error says andes has no such
/// command.
pub fn args(args: Vec<OsString>, cli: clap::Command) -> Result<(Vec<OsString>, Rewritten), String> {
    let mut args = args;
    let name = args.first().map(invoked_as).unwrap_or_default();
    if let Some((_, words)) = NAMES.iter().find(|(n, _)| *n == name) {
        // Usage lines then show the andes command it runs.
        args[0] = "andes".into();
        args.splice(1..1, words.iter().map(OsString::from));
    } else if name.starts_with("condor_") {
        let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "{name} is not one of the HTCondor commands andes answers to: {}",
            known.join(", ")
        ));
    }
    // The subcommand (and a nested one: `router q`) whose options apply.
    let mut cmd = cli;
    cmd.build();
    let mut at = 1;
    while let Some(word) = args.get(at).and_then(|a| a.to_str()) {
        match cmd.find_subcommand(word) {
            Some(sub) => {
                let mut sub = sub.clone();
                sub.build();
                cmd = sub;
                at += 1;
            }
            None => break,
        }
    }
    if at == 1 || VERBATIM.contains(&cmd.get_name()) {
        return Ok((args, Vec::new()));
    }
    let longs: Vec<String> = cmd
        .get_arguments()
        .flat_map(|a| {
            a.get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .map(String::from)
        })
        .collect();
    let mut rewritten = Vec::new();
    let mut out: Vec<OsString> = args[..at].to_vec();
    let mut rest = args[at..].iter();
    for a in rest.by_ref() {
        let Some(s) = a.to_str() else {
            out.push(a.clone());
            continue;
        };
        if s == "--" {
            out.push(a.clone());
            break;
        }
        // `-af:OPTS` (and `-autoformat:OPTS`): the letters go to their own option.
        if let Some(opts) = ["-af:", "--af:", "-autoformat:", "--autoformat:"]
            .iter()
            .find_map(|p| s.strip_prefix(p))
            .filter(|_| longs.iter().any(|l| l == "af-options"))
        {
            out.push(format!("--af-options={opts}").into());
            out.push("--af".into());
            continue;
        }
        // `-word` or `-word=value` where `--word` is one of this command's.
        let name = s
            .strip_prefix('-')
            .filter(|w| !w.starts_with('-'))
            .map(|w| w.split_once('=').map_or(w, |(n, _)| n));
        match name {
            Some(n) if n.len() > 1 && longs.iter().any(|l| l == n) => {
                rewritten.push((format!("-{n}"), format!("--{n}")));
                out.push(format!("-{s}").into());
            }
            _ => out.push(a.clone()),
        }
    }
    out.extend(rest.cloned());
    Ok((out, rewritten))
}

/// A command-line error as the user should read it: the options named as
/// they were typed (`-constraint`, not the `--constraint` it was read as),
/// and an unknown `-word` named whole rather than by its first letter.
pub fn error_text(e: &clap::Error, typed: &[OsString], rewritten: &Rewritten) -> String {
    let mut text = e.render().to_string();
    for (orig, new) in rewritten {
        text = text.replace(&format!("'{new}'"), &format!("'{orig}'"));
        text = text.replace(&format!("'{new} "), &format!("'{orig} "));
        text = text.replace(&format!("'{new}="), &format!("'{orig}="));
    }
    if e.kind() == clap::error::ErrorKind::UnknownArgument
        && let Some(clap::error::ContextValue::String(bad)) =
            e.get(clap::error::ContextKind::InvalidArg)
        && bad.len() == 2
        && bad.starts_with('-')
        && let Some(word) = typed
            .iter()
            .filter_map(|a| a.to_str())
            .find(|w| w.starts_with(bad.as_str()) && w.len() > 2 && !w.starts_with("--"))
    {
        text = text
            .replace(&format!("'{bad}'"), &format!("'{word}'"))
            .replace(&format!("'-- {bad}'"), &format!("'-- {word}'"));
    }
    text
}

/// `andes install-names DIR`: links each of HTCondor's command names in
/// `dir` to this binary (a symbolic link; on Windows a hard link, `.exe`),
/// replacing links of those names already there but no other file.
pub fn install_names(dir: &std::path::Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    let exe = std::env::current_exe().context("finding this program")?;
    let exe = exe.canonicalize().with_context(|| format!("{}", exe.display()))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut made = Vec::new();
    for (name, _) in NAMES {
        let link = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        if let Ok(m) = std::fs::symlink_metadata(&link) {
            let ours = m.file_type().is_symlink()
                || (cfg!(windows) && same_file(&link, &exe).unwrap_or(false));
            if !ours {
                anyhow::bail!(
                    "{} exists and is not a link to andes: move it away first",
                    link.display()
                );
            }
            std::fs::remove_file(&link).with_context(|| format!("replacing {}", link.display()))?;
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(&exe, &link)
            .with_context(|| format!("linking {} to {}", link.display(), exe.display()))?;
        #[cfg(not(unix))]
        std::fs::hard_link(&exe, &link)
            .with_context(|| format!("linking {} to {}", link.display(), exe.display()))?;
        made.push(link);
    }
    Ok(made)
}

/// Whether two paths hold the same bytes (Windows: a hard link cannot be
/// told from a copy without its file id, so content decides).
#[cfg(windows)]
fn same_file(a: &std::path::Path, b: &std::path::Path) -> std::io::Result<bool> {
    let (ma, mb) = (std::fs::metadata(a)?, std::fs::metadata(b)?);
    Ok(ma.len() == mb.len() && std::fs::read(a)? == std::fs::read(b)?)
}

#[cfg(not(windows))]
fn same_file(_: &std::path::Path, _: &std::path::Path) -> std::io::Result<bool> {
    Ok(false)
}

/// The CLI definition, for [`args`].
pub fn cli() -> clap::Command {
    crate::Cli::command()
}

/// `andes completions SHELL`: the shell's completion script, generated from
/// the command definitions, on standard output.
pub fn completions(shell: clap_complete::Shell) -> std::io::Result<()> {
    use std::io::Write;
    let mut cmd = cli();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "andes", &mut script);
    std::io::stdout().write_all(&script)
}

/// `andes man DIR`: a man page for `andes` and one for each of its commands
/// (`andes-q.1`, `andes-router-q.1`), generated from their definitions.
pub fn man_pages(dir: &std::path::Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut made = Vec::new();
    let mut cmd = cli();
    cmd.build();
    fn write(
        cmd: &clap::Command,
        name: String,
        dir: &std::path::Path,
        made: &mut Vec<std::path::PathBuf>,
    ) -> anyhow::Result<()> {
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone().display_name(name.clone()))
            .render(&mut page)
            .with_context(|| format!("rendering {name}"))?;
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
        made.push(path);
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            write(sub, format!("{name}-{}", sub.get_name()), dir, made)?;
        }
        Ok(())
    }
    write(&cmd, "andes".into(), dir, &mut made)?;
    Ok(made)
}
