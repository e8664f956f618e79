//! What the machine is ([`MachineInfo`]) and what the driver measures of it
//! at each poll ([`Measurements`]).

/// What the machine is, as the caller (or [`crate::measure`]) found it.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineInfo {
    /// The fully qualified host name (`Machine`).
    pub hostname: String,
    /// `Arch` in HTCondor's spelling (`X86_64`, `aarch64`, ...).
    pub arch: String,
    /// `OpSys` in HTCondor's spelling (`LINUX`, `WINDOWS`, `OSX`).
    pub opsys: String,
    /// Detected CPUs (`NUM_CPUS` overrides).
    pub cpus: u32,
    /// Detected memory in MB (`MEMORY` overrides).
    pub memory_mb: u64,
    /// Disk available to jobs, in KB.
    pub disk_kb: u64,
    /// Virtual memory (swap), in KB.
    pub virtual_memory_kb: u64,
    /// `WasmtimeVersion`.
    pub wasmtime_version: String,
    /// `WasmFeatures`.
    pub wasm_features: Vec<String>,
    /// `CheckpointPlatform`: the snapshot format and instrumentation version.
    pub checkpoint_platform: String,
}

impl Default for MachineInfo {
    fn default() -> Self {
        MachineInfo {
            hostname: "localhost".into(),
            arch: "X86_64".into(),
            opsys: "LINUX".into(),
            cpus: 1,
            memory_mb: 1024,
            disk_kb: 1 << 20,
            virtual_memory_kb: 1 << 20,
            wasmtime_version: String::new(),
            wasm_features: Vec::new(),
            checkpoint_platform: DEFAULT_CHECKPOINT_PLATFORM.into(),
        }
    }
}

/// The `CheckpointPlatform` of this andes: snapshot format 2, instrumentation
/// 3 (`andes compile`'s own unwinding). Independent of OS and CPU. The execute
/// host states its own (the same, which its tests check).
pub const DEFAULT_CHECKPOINT_PLATFORM: &str = "andes-snapshot-3/instrumentation-3";

/// Idle time reported when there is no keyboard or console (a headless
/// server): large, as HTCondor reports it.
pub const NO_CONSOLE_IDLE: i64 = i32::MAX as i64;

/// One round of measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurements {
    /// The machine's load average (`LoadAvg`, before division among slots).
    pub load_avg: f64,
    /// Seconds since any keyboard or mouse, pseudo-terminals included.
    pub keyboard_idle: i64,
    /// Seconds since the console keyboard or mouse.
    pub console_idle: i64,
    /// Load from each slot's own job (`CondorLoadAvg`), slot 1 first;
    /// missing entries are 0.
    pub condor_load: Vec<f64>,
    /// Seconds east of UTC of local time, for `ClockMin` and `ClockDay`.
    pub utc_offset: i32,
    /// Free space, in KB, on the file system of EXECUTE now (`None`: not
    /// measured; the slots keep the figure they had).
    pub disk_free_kb: Option<u64>,
    /// Free swap, in KB, now (`None`: not measured).
    pub swap_free_kb: Option<u64>,
}

impl Default for Measurements {
    fn default() -> Self {
        Measurements {
            load_avg: 0.0,
            keyboard_idle: NO_CONSOLE_IDLE,
            console_idle: NO_CONSOLE_IDLE,
            condor_load: Vec::new(),
            utc_offset: 0,
            disk_free_kb: None,
            swap_free_kb: None,
        }
    }
}
