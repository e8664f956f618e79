//! C-locale `strftime` with glibc's flags, widths and modifiers, within
//! HTCondor's 1024-byte buffer: what `formatTime` prints.

use super::time::Tm;

/// HTCondor formats into a 1024-byte buffer; longer results fail.
const STRFTIME_MAX: usize = 1023;

const WEEKDAYS: [&str; 7] =
    ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// glibc's ISO 8601 week helper: days since the start of the ISO year.
fn iso_week_days(yday: i64, wday: i64) -> i64 {
    const BIG_ENOUGH_MULTIPLE_OF_7: i64 = (366 / 7 + 2) * 7;
    yday - (yday - wday + 4 + BIG_ENOUGH_MULTIPLE_OF_7) % 7 + 4 - 1
}

/// The ISO 8601 week-based year and week number.
fn iso_week(tm: &Tm) -> (i64, i64) {
    let is_leap = |y: i64| y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let mut year = tm.year;
    let mut days = iso_week_days(tm.yday, tm.wday);
    if days < 0 {
        year -= 1;
        days = iso_week_days(tm.yday + 365 + is_leap(year) as i64, tm.wday);
    } else {
        let d = iso_week_days(tm.yday - (365 + is_leap(year) as i64), tm.wday);
        if d >= 0 {
            year += 1;
            days = d;
        }
    }
    (year, days / 7 + 1)
}

/// C-locale `strftime` with glibc's flags (`_ - 0 ^ #`), widths and the
/// `E`/`O` modifiers. Returns false when the result would not fit
/// HTCondor's buffer.
pub(super) fn strftime(fmt: &[u8], tm: &Tm, epoch: i64, zone: &str, out: &mut Vec<u8>) -> bool {
    let name = |table: &[&str], i: i64, abbrev: bool| -> String {
        match usize::try_from(i).ok().and_then(|i| table.get(i)) {
            Some(n) if abbrev => n[..3].to_string(),
            Some(n) => n.to_string(),
            None => "?".to_string(),
        }
    };
    let hour12 = if tm.hour % 12 == 0 { 12 } else { tm.hour % 12 };
    let mut i = 0;
    while i < fmt.len() {
        if out.len() > STRFTIME_MAX {
            return false;
        }
        let c = fmt[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let spec_start = i;
        i += 1;
        let mut pad: Option<u8> = None;
        let mut upcase = false;
        let mut swapcase = false;
        while let Some(&f) = fmt.get(i) {
            match f {
                b'_' | b'-' | b'0' => pad = Some(f),
                b'^' => upcase = true,
                b'#' => swapcase = true,
                _ => break,
            }
            i += 1;
        }
        let mut width: Option<usize> = None;
        while let Some(d) = fmt.get(i).filter(|d| d.is_ascii_digit()) {
            width = Some(width.unwrap_or(0).saturating_mul(10).saturating_add((d - b'0') as usize));
            i += 1;
        }
        if width.is_some_and(|w| w > STRFTIME_MAX) {
            return false;
        }
        if matches!(fmt.get(i), Some(b'E' | b'O')) {
            i += 1;
        }
        let conv = fmt.get(i).copied().unwrap_or(0);
        if conv != 0 {
            i += 1;
        }
        enum Piece {
            Num(i64, usize, u8),
            Text(String, bool),
            Sub(&'static str),
        }
        let piece = match conv {
            b'a' => Piece::Text(name(&WEEKDAYS, tm.wday, true), true),
            b'A' => Piece::Text(name(&WEEKDAYS, tm.wday, false), true),
            b'b' | b'h' => Piece::Text(name(&MONTHS, tm.mon, true), true),
            b'B' => Piece::Text(name(&MONTHS, tm.mon, false), true),
            b'c' => Piece::Sub("%a %b %e %H:%M:%S %Y"),
            b'C' => Piece::Num(tm.year.div_euclid(100), 2, b'0'),
            b'd' => Piece::Num(tm.mday, 2, b'0'),
            b'D' | b'x' => Piece::Sub("%m/%d/%y"),
            b'e' => Piece::Num(tm.mday, 2, b' '),
            b'F' => Piece::Sub("%Y-%m-%d"),
            b'g' => Piece::Num(iso_week(tm).0.rem_euclid(100), 2, b'0'),
            b'G' => Piece::Num(iso_week(tm).0, 1, b'0'),
            b'H' => Piece::Num(tm.hour, 2, b'0'),
            b'I' => Piece::Num(hour12, 2, b'0'),
            b'j' => Piece::Num(tm.yday + 1, 3, b'0'),
            b'k' => Piece::Num(tm.hour, 2, b' '),
            b'l' => Piece::Num(hour12, 2, b' '),
            b'm' => Piece::Num(tm.mon + 1, 2, b'0'),
            b'M' => Piece::Num(tm.min, 2, b'0'),
            b'n' => Piece::Text("\n".to_string(), false),
            b'p' => Piece::Text(if tm.hour > 11 { "PM" } else { "AM" }.to_string(), false),
            b'P' => Piece::Text(if tm.hour > 11 { "pm" } else { "am" }.to_string(), false),
            b'r' => Piece::Sub("%I:%M:%S %p"),
            b'R' => Piece::Sub("%H:%M"),
            b's' => Piece::Num(epoch, 1, b'0'),
            b'S' => Piece::Num(tm.sec, 2, b'0'),
            b't' => Piece::Text("\t".to_string(), false),
            b'T' | b'X' => Piece::Sub("%H:%M:%S"),
            b'u' => Piece::Num((tm.wday - 1).rem_euclid(7) + 1, 1, b'0'),
            b'U' => Piece::Num((tm.yday - tm.wday + 7) / 7, 2, b'0'),
            b'V' => Piece::Num(iso_week(tm).1, 2, b'0'),
            b'w' => Piece::Num(tm.wday, 1, b'0'),
            b'W' => Piece::Num((tm.yday - (tm.wday - 1 + 7) % 7 + 7) / 7, 2, b'0'),
            b'y' => Piece::Num(tm.year.rem_euclid(100), 2, b'0'),
            b'Y' => Piece::Num(tm.year, 1, b'0'),
            // HTCondor's struct tm has a zero UTC offset and no zone name.
            b'z' => Piece::Text("+0000".to_string(), false),
            b'Z' => Piece::Text(zone.to_string(), false),
            b'%' => Piece::Text("%".to_string(), false),
            _ => {
                out.extend_from_slice(&fmt[spec_start..i]);
                continue;
            }
        };
        let mut text: Vec<u8> = match piece {
            Piece::Num(v, default_width, default_pad) => {
                let digits = v.unsigned_abs().to_string();
                let sign = if v < 0 { "-" } else { "" };
                let w = width.unwrap_or(default_width);
                let fill = w.saturating_sub(digits.len() + sign.len());
                match pad.unwrap_or(default_pad) {
                    b'-' => format!("{sign}{digits}"),
                    b'0' => format!("{sign}{}{digits}", "0".repeat(fill)),
                    _ => format!("{}{sign}{digits}", " ".repeat(fill)),
                }
                .into_bytes()
            }
            Piece::Text(s, is_name) => {
                let s = if swapcase && is_name {
                    s.to_ascii_uppercase()
                } else if swapcase {
                    s.to_ascii_lowercase()
                } else {
                    s
                };
                pad_text(s.into_bytes(), width, pad)
            }
            Piece::Sub(sub) => {
                let mut inner = Vec::new();
                if !strftime(sub.as_bytes(), tm, epoch, zone, &mut inner) {
                    return false;
                }
                pad_text(inner, width, pad)
            }
        };
        if upcase {
            text.make_ascii_uppercase();
        }
        out.extend_from_slice(&text);
    }
    out.len() <= STRFTIME_MAX
}

/// Left-pads a text conversion to `width` (spaces, or zeros with `0`).
fn pad_text(s: Vec<u8>, width: Option<usize>, pad: Option<u8>) -> Vec<u8> {
    let w = width.unwrap_or(0);
    if w <= s.len() || pad == Some(b'-') {
        return s;
    }
    let fill = if pad == Some(b'0') { b'0' } else { b' ' };
    let mut v = vec![fill; w - s.len()];
    v.extend_from_slice(&s);
    v
}
