//! `flood`: writes to standard output as fast as it can, forever.
//!
//! Attacks: disk and bandwidth, through the job's output file.
//! The host must: bound what it keeps of a job's output (stop writing, or fail
//! the writes, or kill the job and say why) and still be able to kill it. Write
//! errors are ignored, as a hostile job would: the job never ends on its own.

use std::io::Write;

fn main() {
    // 64 KiB of lines per write, each line numbered so a reader can see gaps.
    let mut block = Vec::with_capacity(64 * 1024 + 80);
    let mut line: u64 = 0;
    let mut out = std::io::stdout().lock();
    loop {
        block.clear();
        while block.len() < 64 * 1024 {
            let _ = writeln!(block, "flood line {line} ..................................");
            line += 1;
        }
        let _ = out.write_all(&block);
    }
}
