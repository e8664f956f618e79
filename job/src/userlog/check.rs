//! What HTCondor's reader could not read back: [`InvalidEvent`] and
//! [`JobEvent::check`], which the writer runs on every event.

use std::fmt;

use jiff::tz::TimeZone;

use super::old_syntax::old_value;
use super::{EventKind, Evicted, JobEvent, SYNC_LINE, Terminated, one_line};

/// Why an event cannot be written so that HTCondor's reader reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidEvent {
    /// The event's number.
    pub number: u16,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for InvalidEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event {:03}: {}", self.number, self.msg)
    }
}

impl std::error::Error for InvalidEvent {}

impl JobEvent {
    /// Checks that HTCondor's reader can read this event back: the fields
    /// its reader requires are present and free text cannot be mistaken for
    /// structure. [`UserLog::append`](super::UserLog::append) refuses events that fail this check.
    pub fn check(&self) -> Result<(), InvalidEvent> {
        let number = self.kind.number();
        let bad = |msg: &str| Err(InvalidEvent { number, msg: msg.to_string() });
        let word = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
        let year = self.time.to_zoned(TimeZone::UTC).year();
        if !(1900..=9998).contains(&year) {
            return bad(&format!("time {} is outside the years 1900 to 9998", self.time));
        }
        match &self.kind {
            EventKind::Generic(info) if one_line(info) == SYNC_LINE => {
                bad("a generic event's text cannot be `...`")
            }
            EventKind::Disconnected(d)
                if d.reason.trim().is_empty()
                    || d.startd_name.is_empty()
                    || d.startd_addr.is_empty() =>
            {
                bad("a disconnect event needs a reason, a startd name and a startd address")
            }
            EventKind::Disconnected(d) if d.startd_name.contains(' ') => {
                bad("the startd name of a disconnect event cannot contain a space")
            }
            EventKind::Reconnected(r)
                if r.startd_name.is_empty()
                    || r.startd_addr.is_empty()
                    || r.starter_addr.is_empty() =>
            {
                bad("a reconnect event needs a startd name, a startd address and a starter address")
            }
            EventKind::ReconnectFailed(r)
                if r.reason.trim().is_empty()
                    || r.startd_name.is_empty()
                    || r.startd_name.contains(',') =>
            {
                bad("a reconnect-failed event needs a reason and a startd name without `,`")
            }
            EventKind::JobAdInformation(ad)
                if !ad.iter().any(|(n, e)| !n.needs_quotes() && old_value(e).is_some()) =>
            {
                bad("a job ad information event needs at least one literal attribute")
            }
            EventKind::AttributeUpdate(u)
                if !word(&u.name)
                    || !word(&u.value)
                    || u.old_value.as_deref().is_some_and(|o| !word(o)) =>
            {
                bad(
                    "an attribute update's name and values must be single words (HTCondor's reader reads one word each)",
                )
            }
            EventKind::Evicted(Evicted { resources, .. })
            | EventKind::Terminated(Terminated { resources, .. }) => {
                let mut seen = std::collections::HashSet::new();
                for r in resources {
                    if classad::AttrName::new(&r.name).needs_quotes() {
                        return bad(&format!("resource name `{}` is not an identifier", r.name));
                    }
                    if !seen.insert(r.name.to_ascii_lowercase()) {
                        return bad(&format!("resource `{}` appears twice", r.name));
                    }
                    if [r.usage, r.request, r.allocated].iter().flatten().any(|v| !v.is_finite()) {
                        return bad(&format!(
                            "resource `{}` has a value that is not finite",
                            r.name
                        ));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}
