//! The epoch ticker's switch: wasmtime's epoch advances only while a metered
//! job runs, so that an idle execute host wakes for nothing.

use std::sync::{Arc, Mutex};

/// The epoch ticker's switch: it ticks only while some metered job holds a
/// [`Ticks`], so that an idle host (or one running only unmetered jobs, which
/// no epoch stops) wakes for nothing. Epochs that do not advance while no
/// metered job runs change nothing: a job's deadline is counted in ticks
/// from when it is set.
#[derive(Default)]
pub(crate) struct Ticking {
    /// Metered jobs running, and whether the host is going away.
    state: Mutex<(usize, bool)>,
    wake: std::sync::Condvar,
    /// How many times a hold found the ticker at rest and woke it.
    starts: std::sync::atomic::AtomicU64,
}

/// A metered job's hold on the epoch ticker (see [`Ticking`]).
pub(crate) struct Ticks(Arc<Ticking>);

/// A metered job's hold on the epoch ticker, taken only once the job has
/// yielded (run through a fuel interval, or waited): a job that ends within
/// its first poll, as most short jobs do, never wakes the ticker, which then
/// slept a tick and woke again for each of them (a host running a few short
/// jobs a second paid three or four context switches a job for nothing).
/// Until the hold is taken the job's epoch deadline does not come (unless
/// another job's hold advances the epoch); its kill, suspension and
/// checkpoint are taken at its next yield, as they are with the hold.
pub(crate) struct LazyTicks {
    from: Option<Arc<Ticking>>,
    held: Option<Ticks>,
}

impl Ticking {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ticker runs while the returned hold lives.
    pub(crate) fn hold(self: &Arc<Self>) -> Ticks {
        let first = {
            let mut st = self.lock();
            st.0 += 1;
            st.0 == 1
        };
        // The ticker waits only while no job holds it: a hold beside
        // others has nobody to wake (a wake is a system call).
        if first {
            self.starts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.wake.notify_all();
        }
        Ticks(self.clone())
    }

    /// A hold taken at the job's first yield ([`LazyTicks::arm`]).
    pub(crate) fn hold_lazily(self: &Arc<Self>) -> LazyTicks {
        LazyTicks { from: Some(self.clone()), held: None }
    }

    /// How many times the ticker was woken from rest.
    pub(crate) fn starts(&self) -> u64 {
        self.starts.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn stop(&self) {
        self.lock().1 = true;
        self.wake.notify_all();
    }

    /// Waits until a metered job runs: true, or the host goes away: false.
    pub(crate) fn wait_for_work(&self) -> bool {
        let mut st = self.lock();
        while st.0 == 0 && !st.1 {
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        !st.1
    }

    /// How many holds there are (for tests).
    #[cfg(test)]
    pub(crate) fn holds(&self) -> usize {
        self.lock().0
    }
}

impl LazyTicks {
    /// The job yielded: it holds the ticker from now on, until dropped.
    pub(crate) fn arm(&mut self) {
        if let Some(t) = self.from.take() {
            self.held = Some(t.hold());
        }
    }

    /// Whether the hold was taken (for tests).
    #[cfg(test)]
    pub(crate) fn is_held(&self) -> bool {
        self.held.is_some()
    }
}

impl Drop for Ticks {
    fn drop(&mut self) {
        self.0.lock().0 -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ticker waits while no metered job holds it, runs while one
    /// does, and ends when the host goes away.
    #[test]
    fn the_ticker_runs_only_while_a_metered_job_holds_it() {
        let t = Arc::new(Ticking::default());
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.wait_for_work())
        };
        let a = t.hold();
        assert!(waiter.join().unwrap(), "a hold wakes the ticker");
        let b = t.hold();
        drop(a);
        assert_eq!(t.holds(), 1);
        assert!(t.wait_for_work(), "still held");
        drop(b);
        assert_eq!(t.holds(), 0);
        // Once nothing holds it, the next hold is a first one again.
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.wait_for_work())
        };
        let c = t.hold();
        assert!(waiter.join().unwrap(), "a hold after none wakes the ticker again");
        drop(c);
        assert_eq!(t.starts(), 2, "woken from rest twice");
        // A lazy hold wakes nothing until armed, and is released when dropped.
        let mut lazy = t.hold_lazily();
        assert_eq!((t.holds(), lazy.is_held()), (0, false));
        lazy.arm();
        lazy.arm();
        assert_eq!((t.holds(), t.starts()), (1, 3));
        drop(lazy);
        assert_eq!(t.holds(), 0);
        let waiter = {
            let t = t.clone();
            std::thread::spawn(move || t.wait_for_work())
        };
        t.stop();
        assert!(!waiter.join().unwrap(), "the host going away ends it");
    }
}
