//! The startd's tests, in one binary: its machine ad, policies, state
//! transitions and reconfiguration on a virtual clock, properties, and the
//! watcher of job evaluations.

mod common;

mod machine_ad;
mod policies;
mod props;
mod reconfig;
mod transitions;
mod watch;
