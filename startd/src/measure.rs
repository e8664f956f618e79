//! Real measurements of the host, portably: what [`crate::MachineInfo`] and
//! [`crate::Measurements`] need. Keyboard and console idle times are best
//! effort per OS; a host without a console reports
//! [`crate::NO_CONSOLE_IDLE`].

use std::path::Path;

use sysinfo::System;

use crate::machine::{DEFAULT_CHECKPOINT_PLATFORM, MachineInfo, Measurements, NO_CONSOLE_IDLE};

/// `Arch` in HTCondor's spelling for a Rust `target_arch`.
pub fn htcondor_arch(arch: &str) -> String {
    match arch {
        "x86_64" => "X86_64".into(),
        "x86" => "INTEL".into(),
        "aarch64" => "aarch64".into(),
        "powerpc64" => "ppc64le".into(),
        "arm" => "armv7l".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// `OpSys` in HTCondor's spelling for a Rust `target_os`.
pub fn htcondor_opsys(os: &str) -> String {
    match os {
        "linux" => "LINUX".into(),
        "windows" => "WINDOWS".into(),
        "macos" => "OSX".into(),
        "freebsd" => "FREEBSD".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// Measures the static facts of this host. `execute` is the directory jobs
/// run in (its file system's free space is `Disk`).
pub fn machine_info(
    execute: &Path,
    wasmtime_version: &str,
    wasm_features: &[String],
) -> MachineInfo {
    let mut sys = System::new();
    sys.refresh_memory();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    MachineInfo {
        hostname: System::host_name().unwrap_or_else(|| "localhost".into()),
        arch: htcondor_arch(std::env::consts::ARCH),
        opsys: htcondor_opsys(std::env::consts::OS),
        cpus,
        memory_mb: sys.total_memory() / (1024 * 1024),
        disk_kb: free_disk_kb(execute),
        virtual_memory_kb: sys.free_swap() / 1024,
        wasmtime_version: wasmtime_version.to_string(),
        wasm_features: wasm_features.to_vec(),
        checkpoint_platform: DEFAULT_CHECKPOINT_PLATFORM.into(),
    }
}

/// Free space, in KB, of the file system holding `path` (0 when unknown).
pub fn free_disk_kb(path: &Path) -> u64 {
    disk_free(path).unwrap_or(0)
}

/// Free space, in KB, of the file system holding `path`, if known: the space
/// available to this account (`GetDiskFreeSpaceExW`, which takes any directory,
/// where the mount-point search below fails on `\\?\` paths and mapped drives).
#[cfg(windows)]
pub fn disk_free(path: &Path) -> Option<u64> {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Storage::FileSystem::GetDiskFreeSpaceExW;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(std::iter::once(0)).collect();
    let mut available: u64 = 0;
    // SAFETY: `wide` is NUL-terminated and outlives the call; `available` is
    // ours; the two totals it may leave out are null, as the API allows.
    let ok = unsafe {
        GetDiskFreeSpaceExW(
            wide.as_ptr(),
            &mut available,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    (ok != 0).then_some(available / 1024)
}

/// Free space, in KB, of the file system holding `path`, if known.
#[cfg(not(windows))]
pub fn disk_free(path: &Path) -> Option<u64> {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let disks = sysinfo::Disks::new_with_refreshed_list();
    disks
        .list()
        .iter()
        .filter(|d| path.starts_with(d.mount_point()))
        .max_by_key(|d| d.mount_point().as_os_str().len())
        .map(|d| d.available_space() / 1024)
}

/// One round of measurements: load average, idle times, the local time's
/// offset from UTC. `condor_load` is each slot's own job load, which the
/// daemon knows from its starters.
pub fn measure(condor_load: Vec<f64>) -> Measurements {
    let load = System::load_average().one;
    let (keyboard_idle, console_idle) = idle_times();
    Measurements {
        load_avg: if load.is_finite() { load.max(0.0) } else { 0.0 },
        keyboard_idle,
        console_idle,
        condor_load,
        utc_offset: utc_offset(),
        disk_free_kb: None,
        swap_free_kb: None,
    }
}

/// [`measure`], with the free disk of the file system holding `execute`
/// and the free swap, for the slots' live `Disk` and `VirtualMemory`.
pub fn measure_with_disk(execute: &Path, condor_load: Vec<f64>) -> Measurements {
    let mut sys = System::new();
    sys.refresh_memory();
    Measurements {
        disk_free_kb: disk_free(execute),
        swap_free_kb: Some(sys.free_swap() / 1024),
        ..measure(condor_load)
    }
}

/// Seconds east of UTC of the system's local time zone now.
pub fn utc_offset() -> i32 {
    let tz = jiff::tz::TimeZone::system();
    tz.to_offset(jiff::Timestamp::now()).seconds()
}

/// (KeyboardIdle, ConsoleIdle) in seconds.
#[cfg(target_os = "linux")]
pub fn idle_times() -> (i64, i64) {
    use std::time::SystemTime;
    // HTCondor's way: the newest access time of the terminal devices.
    // Pseudo-terminals count for KeyboardIdle only.
    type Filter = fn(&str) -> bool;
    fn newest(dirs: &[(&str, Filter)]) -> Option<SystemTime> {
        let mut best: Option<SystemTime> = None;
        for (dir, keep) in dirs {
            let Ok(rd) = std::fs::read_dir(dir) else { continue };
            for e in rd.flatten().take(4096) {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                if !keep(name) {
                    continue;
                }
                if let Ok(t) = e.metadata().and_then(|m| m.accessed()) {
                    best = Some(best.map_or(t, |b| b.max(t)));
                }
            }
        }
        best
    }
    let console_dev: fn(&str) -> bool = |n| {
        n == "console"
            || (n.starts_with("tty") && n[3..].chars().all(|c| c.is_ascii_digit()) && n.len() > 3)
    };
    let input_dev: fn(&str) -> bool =
        |n| n.starts_with("event") || n.starts_with("mouse") || n == "mice";
    let pts_dev: fn(&str) -> bool = |n| n.chars().all(|c| c.is_ascii_digit());
    let now = SystemTime::now();
    let idle = |t: Option<SystemTime>| {
        t.and_then(|t| now.duration_since(t).ok())
            .map_or(NO_CONSOLE_IDLE, |d| (d.as_secs() as i64).min(NO_CONSOLE_IDLE))
    };
    let console = newest(&[("/dev", console_dev), ("/dev/input", input_dev)]);
    let keyboard =
        newest(&[("/dev", console_dev), ("/dev/input", input_dev), ("/dev/pts", pts_dev)]);
    let k = idle(keyboard);
    (k, idle(console).max(k))
}

/// (KeyboardIdle, ConsoleIdle) in seconds: the time since the last input
/// event of this session (`GetLastInputInfo`). A service in session 0 sees
/// no input and reports a long idle time.
#[cfg(windows)]
pub fn idle_times() -> (i64, i64) {
    use windows_sys::Win32::System::SystemInformation::GetTickCount;
    use windows_sys::Win32::UI::Input::KeyboardAndMouse::{GetLastInputInfo, LASTINPUTINFO};
    let mut info = LASTINPUTINFO { cbSize: std::mem::size_of::<LASTINPUTINFO>() as u32, dwTime: 0 };
    // SAFETY: `info` is a valid LASTINPUTINFO with cbSize set, as the call requires.
    if unsafe { GetLastInputInfo(&mut info) } == 0 {
        return (NO_CONSOLE_IDLE, NO_CONSOLE_IDLE);
    }
    // SAFETY: GetTickCount takes no arguments and cannot fail.
    let now = unsafe { GetTickCount() };
    let idle = (now.wrapping_sub(info.dwTime) / 1000) as i64;
    (idle, idle)
}

/// (KeyboardIdle, ConsoleIdle) in seconds: not measured on this OS yet, so
/// the host counts as having no console.
#[cfg(not(any(target_os = "linux", windows)))]
pub fn idle_times() -> (i64, i64) {
    (NO_CONSOLE_IDLE, NO_CONSOLE_IDLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_are_htcondors() {
        assert_eq!(htcondor_arch("x86_64"), "X86_64");
        assert_eq!(htcondor_arch("aarch64"), "aarch64");
        assert_eq!(htcondor_opsys("linux"), "LINUX");
        assert_eq!(htcondor_opsys("windows"), "WINDOWS");
        assert_eq!(htcondor_opsys("macos"), "OSX");
    }

    #[test]
    fn this_host_measures() {
        let info = machine_info(Path::new("."), "36.0.20", &["simd".into()]);
        assert!(info.cpus >= 1);
        assert!(info.memory_mb > 0);
        assert!(info.disk_kb > 0, "the free disk of the execute directory is measured");
        let m = measure(vec![]);
        assert!(m.load_avg >= 0.0);
        assert!((0..=NO_CONSOLE_IDLE).contains(&m.keyboard_idle));
        assert!(m.console_idle >= m.keyboard_idle);
        assert!(m.utc_offset.abs() <= 18 * 3600);
    }
}
