//! `exit_code`: exits with the code given as its first argument.
//!
//! Usage: `exit_code CODE`, for example `exit_code 3`. With no argument or one
//! that is not a number it prints the usage to standard error and exits with 2.
//! The host must: report the code exactly as the job's ExitCode (codes above
//! 255 are passed to WASI's proc_exit as they are; what the host makes of them
//! is its own policy).

fn main() {
    let code = std::env::args().nth(1).and_then(|arg| arg.parse::<i32>().ok());
    match code {
        Some(code) => std::process::exit(code),
        None => {
            eprintln!("usage: exit_code CODE");
            std::process::exit(2);
        }
    }
}
