//! Parking a thread until it is woken, and running a future to its end on
//! the calling thread with that: what the job threads and the preemption
//! probe share, with nothing of either.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Wakes a thread that waits in [`Parker::park`]; a wake before the wait is
/// not lost.
#[derive(Default)]
pub(crate) struct Parker {
    notified: Mutex<bool>,
    cv: Condvar,
}

impl Parker {
    /// A parker nobody has woken yet.
    pub(crate) fn new() -> Arc<Parker> {
        Arc::new(Parker::default())
    }

    /// Waits until woken since the last wait.
    pub(crate) fn park(&self) {
        let mut n = self.notified.lock().unwrap_or_else(|e| e.into_inner());
        while !*n {
            n = self.cv.wait(n).unwrap_or_else(|e| e.into_inner());
        }
        *n = false;
    }

    /// Wakes the waiter, or the next wait.
    pub(crate) fn unpark(&self) {
        *self.notified.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_one();
    }
}

impl Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.unpark();
    }
}

/// Runs a future to its end on the calling thread.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let parker = Parker::new();
    let waker = Waker::from(parker.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        parker.park();
    }
}
