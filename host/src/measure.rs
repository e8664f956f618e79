//! What the daemon measures (load, memory, disk, idle times, the platform its
//! snapshots run on) and the time the startd machine runs on.

use std::path::Path;

use andes_startd::MachineInfo;

use crate::config::*;
use andes_starter::control::Clock;

pub(crate) fn unix_now(clock: &dyn Clock) -> i64 {
    i64::try_from(clock.unix_now()).unwrap_or(i64::MAX)
}

/// A step of the wall clock larger than this (milliseconds, against the
/// monotonic clock's advance since the last reading) is a step, not drift.
pub(crate) const STEP_TOLERANCE_MS: i64 = 2_000;

/// The time the startd machine runs on: the wall clock, except that a step of
/// it (NTP, an operator, a virtual machine resumed) moves none of the machine's
/// timers. The machine's time goes on with the monotonic clock across the step,
/// then converges on the wall clock by at most a tenth of the time that passes
/// (as `adjtime` slews), and never goes back. So a clock set back 90 s does
/// not stop the machine's updates and timeouts for 90 s, and one set forward
/// does not fire them all at once.
#[derive(Debug)]
pub struct MachineClock {
    last_mono: std::time::Instant,
    last_ms: i64,
    /// Machine time minus wall time, milliseconds.
    offset_ms: i64,
}

impl MachineClock {
    /// A machine clock at wall time `wall_ms` and monotonic instant `mono`.
    pub fn new(wall_ms: i64, mono: std::time::Instant) -> MachineClock {
        MachineClock { last_mono: mono, last_ms: wall_ms, offset_ms: 0 }
    }

    /// The machine's time (Unix milliseconds) when the wall clock reads
    /// `wall_ms` at monotonic instant `mono`.
    pub fn now_ms(&mut self, wall_ms: i64, mono: std::time::Instant) -> i64 {
        let elapsed = i64::try_from(mono.saturating_duration_since(self.last_mono).as_millis())
            .unwrap_or(i64::MAX);
        let expected = self.last_ms.saturating_add(elapsed);
        let mut offset = self.offset_ms;
        if (wall_ms.saturating_add(offset) - expected).abs() > STEP_TOLERANCE_MS {
            // The wall clock was stepped: the machine's time goes on as if not.
            offset = expected.saturating_sub(wall_ms);
        }
        // Slew toward the wall clock: at most a tenth of the time that passed.
        let slew = (elapsed / 10).min(offset.abs());
        offset -= offset.signum() * slew;
        let now = wall_ms.saturating_add(offset).max(self.last_ms);
        self.offset_ms = now - wall_ms;
        self.last_ms = now;
        self.last_mono = mono;
        now
    }
}

/// The real machine's measurements ([`andes_startd::measure::measure`]),
/// with, when asked, the free space of `execute`'s file system and the free
/// swap for the slots' live `Disk` and `VirtualMemory`
/// ([`andes_startd::measure::measure_with_disk`]).
pub fn real_measurer(execute: &Path) -> Measurer {
    let execute = execute.to_path_buf();
    Box::new(move |loads, resources| {
        if resources {
            andes_startd::measure::measure_with_disk(&execute, loads)
        } else {
            andes_startd::measure::measure(loads)
        }
    })
}

/// The real machine's facts, with EXECUTE's free space as `Disk`.
pub fn machine_info(execute: &Path) -> MachineInfo {
    let features: Vec<String> = WASM_FEATURES.iter().map(|s| s.to_string()).collect();
    let mut info = andes_startd::measure::machine_info(execute, WASMTIME_VERSION, &features);
    info.checkpoint_platform = checkpoint_platform();
    info
}

/// The `CheckpointPlatform` this host restores: the snapshot format and the
/// instrumentation version of `andes compile`, nothing of the OS or CPU.
pub fn checkpoint_platform() -> String {
    andes_snapshot::platform(Some(andes_compile::INSTRUMENTATION_VERSION))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_startd_default_checkpoint_platform_is_the_hosts() {
        assert_eq!(checkpoint_platform(), andes_startd::DEFAULT_CHECKPOINT_PLATFORM);
    }

    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_stepped_wall_clock_moves_no_machine_timer() {
        let t0 = Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let wall0 = 1_800_000_000_000i64;
        let mut c = MachineClock::new(wall0, t0);
        assert_eq!(c.now_ms(wall0 + 1_000, at(1.0)), wall0 + 1_000);
        // Set back 93 s: the machine's time goes on with the monotonic clock
        // (slewing toward the wall clock by a tenth: 900 ms for the second).
        let back = wall0 + 2_000 - 93_000;
        let m = c.now_ms(back, at(2.0));
        assert_eq!(m, wall0 + 1_900);
        // A second later it is a second on (less a tenth of it, slewed).
        let m2 = c.now_ms(back + 1_000, at(3.0));
        assert!((900..=1_000).contains(&(m2 - m)), "{}", m2 - m);
        // It converges on the wall clock, never going back, within ~16 minutes.
        let mut last = m2;
        for i in 1..=1_000 {
            let t = 3.0 + f64::from(i);
            let now = c.now_ms(back + (t as i64 - 2) * 1_000, at(t));
            assert!(now >= last);
            last = now;
        }
        assert_eq!(last, back + 1_001_000, "converged on the wall clock");
        // Set forward a minute: no jump.
        let t = 1_004.0;
        let wall = back + 1_002_000 + 60_000;
        let m = c.now_ms(wall, at(t));
        assert_eq!(m, last + 1_100);
        // Small drift is followed as it is.
        let mut c = MachineClock::new(wall0, t0);
        assert_eq!(c.now_ms(wall0 + 1_500, at(1.0)), wall0 + 1_500);
        assert_eq!(c.now_ms(wall0 + 1_600, at(2.0)), wall0 + 1_600);
    }
}
