//! `transfer_output_remaps`: `name = newname` pairs separated by `;`, read
//! as HTCondor reads them (and as `andes_job::files::parse_remaps` reads the
//! `TransferOutputRemaps` attribute when the output comes back; the two
//! crates may not depend on each other, so each has its reader, and both are
//! tested on the same cases).

/// The most pairs a remap list may hold (`andes_job::files::MAX_REMAPS`,
/// which the schedd holds a job to when its outputs come back).
pub const MAX_REMAPS: usize = 1_000;

/// The pairs of a remap list, in order: pairs separated by `;`, each split at
/// its first `=`, spaces around either side trimmed, tabs and line breaks
/// dropped, `\=` and `\;` standing for the character itself (a backslash
/// before anything else is kept); empty pairs are skipped. A pair without
/// `=`, or with nothing on one side, is an error saying which.
pub(crate) fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut side = [String::new(), String::new()];
    let mut at = 0;
    let mut chars = text.chars().peekable();
    let mut finish = |side: &mut [String; 2], at: usize| -> Result<(), String> {
        let (name, target) = (side[0].trim().to_string(), side[1].trim().to_string());
        side[0].clear();
        side[1].clear();
        if at == 0 {
            return if name.is_empty() {
                Ok(())
            } else {
                Err(format!("{name:?} is not a remap: write it as name = newname"))
            };
        }
        if name.is_empty() || target.is_empty() {
            return Err(format!(
                "\"{name} = {target}\" is not a remap: the name and the new name must both be given"
            ));
        }
        if out.len() == MAX_REMAPS {
            return Err(format!("more than {MAX_REMAPS} remaps"));
        }
        out.push((name, target));
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some('=' | ';')) => {
                side[at].push(chars.next().unwrap_or_default());
            }
            ';' => {
                finish(&mut side, at)?;
                at = 0;
            }
            '=' if at == 0 => at = 1,
            '\t' | '\n' | '\r' => {}
            c => side[at].push(c),
        }
    }
    finish(&mut side, at)?;
    Ok(out)
}

/// True when `target` is a URL (`scheme://...`), which HTCondor's file
/// transfer plugins upload to and andes does not.
pub(crate) fn is_url(target: &str) -> bool {
    target.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    /// A list is bounded: what the schedd does per output file stays small.
    #[test]
    fn more_than_the_most_remaps_are_refused() {
        let list = |n: usize| (0..n).map(|i| format!("f{i} = g{i}")).collect::<Vec<_>>().join(";");
        assert_eq!(parse(&list(MAX_REMAPS)).unwrap().len(), MAX_REMAPS);
        assert!(parse(&list(MAX_REMAPS + 1)).unwrap_err().contains("more than 1000 remaps"));
    }

    /// The same cases as `andes_job::files`'s reader.
    #[test]
    fn remaps_read_as_htcondor_reads_them() {
        let r = parse(" a.txt = results/a.txt ;b=c/d; ;x\\=1 = y\\;z ; w = u=v;").unwrap();
        assert_eq!(
            r,
            pairs(&[("a.txt", "results/a.txt"), ("b", "c/d"), ("x=1", "y;z"), ("w", "u=v")])
        );
        assert_eq!(parse("").unwrap(), []);
        assert_eq!(parse("a\\b=c").unwrap(), pairs(&[("a\\b", "c")]));
        assert_eq!(parse("a\t=\nb").unwrap(), pairs(&[("a", "b")]));
        for bad in ["a", "a=b;c", "=b", "a=", " = "] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(is_url("s3://bucket/key") && is_url("private+gdrive://x"));
        assert!(!is_url("results/out.txt") && !is_url("/a://b") && !is_url("://x"));
    }
}
