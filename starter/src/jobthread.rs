//! Job threads: an unmetered job runs its guest on an OS thread of its own,
//! so that a suspension can block that thread (in a signal handler or the
//! store's call hook) without stalling anything else. A tokio worker thread
//! must never block that way: every task queued on it, and the timer and I/O
//! drivers it may be running, would stop with it.
//!
//! Threads are reused: a finished job's thread waits for the next one, up to
//! [`KEEP_IDLE`] of them; more are started when more jobs run at once, and
//! the extra ones end when their job does.
//!
//! The thread runs the job's future with a small executor ([`drive`]) that
//! parks while the future waits, within the caller's tokio runtime context
//! (entered, not run: timers and I/O the guest waits on are driven by the
//! caller's runtime, and wasi-common's `block_in_place` runs its closure in
//! place, as it does off a runtime).

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

use crate::control::Stopped;
use crate::preempt::{self, KILL, OnThisThread, PARKED, Remote, SUSPEND};

/// Idle job threads kept for later jobs.
pub(crate) const KEEP_IDLE: usize = 16;

/// Runs a job's future on the calling thread under `remote`'s requests:
/// signals reach this thread while it runs; the future is not polled while
/// suspended and is dropped (cancelling a host call it waits in) when killed.
pub(crate) fn drive<F: Future>(remote: &Arc<Remote>, fut: F) -> Result<F::Output, Stopped> {
    let _on = OnThisThread::enter(remote);
    let waker = Waker::from(remote.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        // BUSY before reading the request: a request made after this read
        // sees BUSY and signals, so none is missed.
        remote.set_state(preempt::BUSY);
        match remote.request() {
            KILL => return Err(Stopped::Killed),
            SUSPEND => {
                remote.set_state(PARKED);
                // Re-read after publishing PARKED: a resume in between has
                // already unparked, so the park below returns at once.
                if remote.request() == SUSPEND {
                    let _masked = preempt::SignalMasked::new();
                    remote.parker.park();
                }
                continue;
            }
            _ => {}
        }
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Ok(v);
        }
        remote.set_state(PARKED);
        // A signal sent just before the thread parked waits until it wakes.
        let _masked = preempt::SignalMasked::new();
        remote.parker.park();
    }
}

/// Work for a job thread.
pub(crate) type Work = Box<dyn FnOnce() + Send>;

/// The threads that run unmetered jobs.
pub(crate) struct JobThreads {
    idle: Mutex<Vec<Arc<Slot>>>,
}

/// An idle thread's mailbox.
#[derive(Default)]
struct Slot {
    work: Mutex<Option<Work>>,
    cv: Condvar,
}

impl JobThreads {
    /// No threads yet.
    pub(crate) fn new() -> Arc<JobThreads> {
        Arc::new(JobThreads { idle: Mutex::new(Vec::new()) })
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Slot>>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` on an idle thread, or on a new one. An error means no
    /// thread could be started; `work` was dropped.
    pub(crate) fn run(self: &Arc<Self>, work: Work) -> std::io::Result<()> {
        let slot = self.idle().pop();
        if let Some(slot) = slot {
            *slot.work.lock().unwrap_or_else(|e| e.into_inner()) = Some(work);
            slot.cv.notify_one();
            return Ok(());
        }
        let pool = self.clone();
        std::thread::Builder::new().name("andes-job".into()).spawn(move || pool.serve(work))?;
        Ok(())
    }

    /// A job thread: runs its first work, then waits for more while there
    /// are few enough idle threads.
    fn serve(self: Arc<Self>, first: Work) {
        let slot = Arc::new(Slot::default());
        let mut work = first;
        loop {
            // A panic is the job's end (its result channel closes), not the
            // thread's.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            {
                let mut idle = self.idle();
                if idle.len() >= KEEP_IDLE {
                    return;
                }
                idle.push(slot.clone());
            }
            let mut w = slot.work.lock().unwrap_or_else(|e| e.into_inner());
            work = loop {
                if let Some(next) = w.take() {
                    break next;
                }
                w = slot.cv.wait(w).unwrap_or_else(|e| e.into_inner());
            };
        }
    }
}
