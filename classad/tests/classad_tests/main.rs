//! The ClassAd language's tests from outside the crate, in one binary: the
//! language as HTCondor's manual and library define it, HTCondor's own
//! answers (`oracle`), the evaluation budget of every built-in, unparsing
//! round trips and the slot scan. (`interner_full`, which fills the
//! process's interner, runs alone in its own binary.)

mod budget;
mod language;
mod oracle;
mod roundtrip;
mod scan;
