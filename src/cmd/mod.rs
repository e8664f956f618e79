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

/// What completes when the process is asked to stop: Ctrl-C (SIGINT) or,
/// on Unix, SIGTERM (what service managers and `kill` send). Daemons stop
/// gracefully on either. The signals are taken over when this is called,
/// not when the future is first polled: a daemon calls it before it says it
/// is ready (its address file, `pool ready`), so a stop sent once it is
/// ready is always a graceful stop, never the signal's default (death).
/// Call it within a Tokio runtime.
pub fn stop_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            match (term, int) {
                (Some(mut t), Some(mut i)) => {
                    tokio::select! {
                        _ = t.recv() => {}
                        _ = i.recv() => {}
                    }
                }
                (Some(mut t), None) => {
                    t.recv().await;
                }
                (None, Some(mut i)) => {
                    i.recv().await;
                }
                (None, None) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
