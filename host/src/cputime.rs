//! CPU time of the calling thread, portably.

/// Nanoseconds of CPU time the calling thread has used.
pub fn thread_cpu_ns() -> u64 {
    cpu_time::ThreadTime::try_now().map(|t| t.as_duration().as_nanos() as u64).unwrap_or(0)
}

/// Nanoseconds of CPU time the whole process has used.
pub fn process_cpu_ns() -> u64 {
    cpu_time::ProcessTime::try_now().map(|t| t.as_duration().as_nanos() as u64).unwrap_or(0)
}
