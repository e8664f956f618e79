//! The system's tests, in one binary: the `andes` command and its daemons as
//! real processes, pools of them killed and restarted, the attack suite, the
//! guests in C and Go, the other platforms under wine and qemu. Each module is
//! one subject; `cargo test --test system -- MODULE::` runs one (`cargo xtask`
//! runs `as_root`, `attacks`, `fault_harness` and `portability` so).

mod common;

mod as_root;
mod attacks;
mod authz;
mod c_sdk;
mod classad_cli;
mod containment;
mod cron_cli;
mod dagman;
mod dashboard;
mod fault_harness;
mod faults;
mod fidelity;
mod guests;
mod host_cli;
mod personal_pool;
mod pool;
mod portability;
mod router;
mod run_cli;
mod schedd_cli;
mod schedd_crash;
mod snapshot_cli;
mod transfer;
