//! The cron schedules' tests, in one binary: HTCondor's own answers
//! (`oracle`) and schedules across time-zone transitions.

mod oracle;
mod schedules;
