//! `attrflood`: sets job attributes through the andes:job interface without
//! end: distinct `Chirp` names with large values, then the same name again
//! and again.
//!
//! Attacks: the host's memory, through the updates it keeps and sends.
//! The host must: bound the number and size of attributes a job sets and
//! refuse the rest with an error the job sees. The job prints `set N
//! attributes, then: ERROR`, then `repeated M times` for one name, and exits 0.

fn main() {
    let value = format!("\"{}\"", "x".repeat(8 * 1024));
    let mut n = 0;
    let err = loop {
        match andes_guest::attr::set(&format!("ChirpFlood{n}"), &value) {
            Ok(()) => n += 1,
            Err(e) => break format!("{e:?}"),
        }
        if n >= 5_000 {
            break "nothing stopped it".into();
        }
    };
    println!("set {n} attributes, then: {err}");
    let mut m = 0;
    for i in 0..20_000 {
        if andes_guest::attr::set("ChirpFlood0", &i.to_string()).is_ok() {
            m += 1;
        }
    }
    println!("repeated {m} times");
}
