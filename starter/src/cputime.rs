//! CPU time of the calling thread, portably.

/// Nanoseconds of CPU time the calling thread has used.
pub fn thread_cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map(|t| t.as_duration().as_nanos() as u64).unwrap_or(0)
}

/// Nanoseconds of system (kernel) CPU time the calling thread has used
/// (Linux: `getrusage(RUSAGE_THREAD)`, microsecond grain); 0 where a thread's
/// share cannot be told, so all its time counts as user time.
pub fn thread_sys_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero rusage is valid; getrusage fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is ours and RUSAGE_THREAD names the calling thread.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } == 0 {
            #[allow(clippy::useless_conversion)] // time_t and suseconds_t vary by target
            return timespec_ns(ru.ru_stime.tv_sec.into(), i64::from(ru.ru_stime.tv_usec) * 1000)
                .unwrap_or(0);
        }
        0
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Nanoseconds of CPU time the whole process has used.
pub fn process_cpu_ns() -> u64 {
    cpu_time::ProcessTime::try_now().map(|t| t.as_duration().as_nanos() as u64).unwrap_or(0)
}

/// The CPU clock of one thread, readable from any thread of the process while
/// that thread lives (Linux: `pthread_getcpuclockid`).
#[cfg(target_os = "linux")]
#[derive(Clone, Copy, Debug)]
pub struct ThreadClock(libc::clockid_t);

#[cfg(target_os = "linux")]
impl ThreadClock {
    /// The calling thread's clock.
    pub fn current() -> Option<ThreadClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: `pthread_self` is the calling thread, alive; `id` is ours.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(ThreadClock(id))
    }

    /// Nanoseconds of CPU time the thread has used. Call it only while the
    /// thread lives: a dead thread's clock id may name another.
    pub fn ns(&self) -> Option<u64> {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is ours; an invalid clock id is an error, not UB.
        let rc = unsafe { libc::clock_gettime(self.0, &mut ts) };
        if rc != 0 {
            return None;
        }
        #[allow(clippy::useless_conversion)] // time_t and c_long are i32 on 32-bit Linux
        timespec_ns(ts.tv_sec.into(), ts.tv_nsec.into())
    }
}

/// A clock reading in nanoseconds. One that reads negative or past u64
/// nanoseconds (a broken or interposed `clock_gettime`, as libfaketime's with
/// a negative offset) is unknown, never a wrapped value or a panic.
#[cfg(target_os = "linux")]
fn timespec_ns(secs: i64, nanos: i64) -> Option<u64> {
    u64::try_from(secs).ok()?.checked_mul(1_000_000_000)?.checked_add(u64::try_from(nanos).ok()?)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{ThreadClock, timespec_ns};

    #[test]
    fn a_clock_reading_negative_or_huge_is_unknown_not_a_panic() {
        assert_eq!(timespec_ns(-100, 5), None);
        assert_eq!(timespec_ns(1, -1), None);
        assert_eq!(timespec_ns(i64::MAX, 0), None);
        assert_eq!(timespec_ns(2, 7), Some(2_000_000_007));
        let c = ThreadClock::current().unwrap();
        assert!(c.ns().is_some());
    }
}
