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

/// Nanoseconds the calling thread has spent ready to run but waiting for a
/// CPU (Linux: `run_delay`, the second field of `/proc/thread-self/schedstat`,
/// read through a descriptor each thread keeps open); 0 where it cannot be
/// told. A job's wall time less this is the time it took on its own account
/// (running, or blocked on its own I/O and sleeps), whatever else the host
/// ran beside it.
pub fn thread_run_delay_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::FileExt;
        std::thread_local! {
            static SCHEDSTAT: Option<std::fs::File> =
                std::fs::File::open("/proc/thread-self/schedstat").ok();
        }
        let mut buf = [0u8; 96];
        let n = SCHEDSTAT
            .try_with(|f| f.as_ref().and_then(|f| f.read_at(&mut buf, 0).ok()))
            .ok()
            .flatten()
            .unwrap_or(0);
        parse_run_delay(&buf[..n]).unwrap_or(0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The `run_delay` field of a schedstat line: `<on cpu ns> <run delay ns> <slices>`.
#[cfg(target_os = "linux")]
fn parse_run_delay(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.split_ascii_whitespace().nth(1)?.parse().ok()
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
    use super::{ThreadClock, parse_run_delay, timespec_ns};

    /// A schedstat line gives its second field; anything else, nothing.
    #[test]
    fn run_delay_is_schedstats_second_field() {
        assert_eq!(parse_run_delay(b"1400874726 660031674 190\n"), Some(660_031_674));
        assert_eq!(parse_run_delay(b"1400874726\n"), None);
        assert_eq!(parse_run_delay(b""), None);
        assert_eq!(parse_run_delay(b"1 -5 2"), None);
        // This thread's own reading parses (the kernel keeps it).
        let line = std::fs::read("/proc/thread-self/schedstat").unwrap();
        assert!(parse_run_delay(&line).is_some(), "{line:?}");
    }

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
