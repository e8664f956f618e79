//! The `andes` subcommands.

pub mod act;
pub mod central;
pub mod classad;
pub use andes_client::session as client;
pub mod compile;
pub mod config_val;
pub mod cron;
pub mod dagman;
pub mod dashboard;
pub mod format;
pub mod host;
pub mod keygen;
pub mod pool;
pub mod q;
pub mod router;
pub mod run;
pub mod schedd;
pub mod snapshot;
pub mod status;
pub mod submit;
pub mod submit_dag;
pub mod tail;
pub mod transfer;
pub mod vacate;
pub mod wait;
pub mod watch;

/// Completes when the process is asked to stop: Ctrl-C (SIGINT) or, on Unix,
/// SIGTERM (what service managers and `kill` send). Daemons stop gracefully
/// on either.
pub async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
