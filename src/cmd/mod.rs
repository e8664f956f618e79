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

/// Runs a daemon's future to its end on a new multi-threaded runtime, as a
/// task of that runtime rather than on the calling thread: the daemon's
/// loop then runs on the worker threads, where the tasks that wake it run
/// (request handlers, jobs ending), and a wake from one of them is a hand-off
/// on the same thread, not a system call to wake the process's main thread
/// parked in `block_on` (which a host running short jobs paid several times
/// a job). The main thread only waits for the end.
pub fn run_daemon<F>(daemon: impl FnOnce() -> F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let rt = tokio::runtime::Runtime::new()?;
    // Built inside the runtime: a daemon takes its signals over as it is made.
    let task = {
        let _in = rt.enter();
        tokio::spawn(daemon())
    };
    match rt.block_on(task) {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(anyhow::anyhow!("the daemon's task was cancelled: {e}")),
    }
}

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

#[cfg(test)]
mod tests {
    use super::run_daemon;

    /// A daemon runs as a task on the runtime's workers, not on the thread
    /// that waits for it (where every wake from a worker would be a system
    /// call), and its result, error or panic comes back to that thread.
    #[test]
    fn a_daemon_runs_on_the_workers_and_its_end_comes_back() {
        let caller = std::thread::current().id();
        let ran_on = std::sync::Arc::new(std::sync::Mutex::new(None));
        let seen = ran_on.clone();
        run_daemon(|| async move {
            *seen.lock().unwrap() = Some(std::thread::current().id());
            Ok(())
        })
        .unwrap();
        let ran_on = ran_on.lock().unwrap().expect("the daemon ran");
        assert_ne!(ran_on, caller, "the daemon's loop ran on the waiting thread");

        let e = run_daemon(|| async { Err(anyhow::anyhow!("cannot listen")) }).unwrap_err();
        assert_eq!(e.to_string(), "cannot listen");

        let panicked = std::panic::catch_unwind(|| {
            run_daemon(|| async {
                panic!("daemon bug");
            })
        })
        .unwrap_err();
        assert_eq!(panicked.downcast_ref::<&str>(), Some(&"daemon bug"));
    }
}
