//! What the commands print on standard output. A reader that stopped early
//! (`andes q | head -1`) ends the command quietly, with a shell's status for
//! death by SIGPIPE, as it ends `condor_q`; it is never a panic (Rust's
//! `println!` panics on a closed pipe) nor an error message. Every command
//! prints through [`out!`] and [`outln!`]; `cargo xtask tidy` refuses
//! `println!` and `print!` anywhere else in the binary's sources.

use std::io::Write;

/// The exit status of a command whose reader went away: 128 + SIGPIPE, as
/// a shell reports a process that SIGPIPE ended.
pub const READER_GONE: u8 = 141;

/// Writes `args` to standard output; a closed pipe ends the process
/// ([`READER_GONE`]), any other failure says so and ends it with status 1.
pub fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        failed(&e);
    }
}

/// Ends the process for a failed write to standard output.
pub fn failed(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(READER_GONE));
    }
    eprintln!("andes: cannot write to standard output: {e}");
    std::process::exit(1)
}

/// True when `e` (a command's error) is a write to a reader that went away.
pub fn reader_gone(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `print!` for the commands: see the [module](self).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// `println!` for the commands: see the [module](self).
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
