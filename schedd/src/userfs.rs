//! File I/O the schedd does on a user's behalf (input files, output files,
//! event logs), done with that user's rights and never with the schedd's own.
//!
//! HTCondor's schedd runs as root and switches to the job owner's account
//! for every file it touches for the job. andes does the same:
//!
//! - **The owner's account is the schedd's own** (a personal pool, where the
//!   schedd and its user are one account): plain I/O, as always.
//! - **The schedd runs as root** (Linux): the owner is mapped to a local
//!   account (by default the account of the same name; `USER_ACCOUNT_MAP`
//!   maps identities otherwise), and the I/O runs on a thread of its own
//!   whose file-system identity (fsuid, fsgid and supplementary groups, all
//!   per-thread on Linux) is that account's. The kernel then checks every
//!   open as it would for the user: root's capabilities to override file
//!   permissions are gone from that thread while its fsuid is not 0.
//! - **Otherwise** the schedd cannot act as the owner, and must not act for
//!   them with its own rights: only spooled jobs are accepted (`andes submit
//!   --spool` uploads the inputs, `andes transfer-data` fetches the outputs,
//!   as condor_submit -spool and condor_transfer_data do).
//!
//! An owner mapped to root, or to no account, gets spooled transfer only.

use std::fmt;

/// A local account the schedd acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Its name.
    pub name: String,
    /// Its user id.
    pub uid: u32,
    /// Its primary group id.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
}

/// How the schedd may touch an owner's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The owner's account is the schedd's own: plain I/O.
    Own,
    /// The schedd runs as root: I/O as this account.
    As(Account),
    /// The schedd cannot act as the owner: spooled transfer only (why).
    SpoolOnly(String),
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Access::Own => f.write_str("the schedd's own account"),
            Access::As(a) => write!(f, "account {} (uid {})", a.name, a.uid),
            Access::SpoolOnly(why) => f.write_str(why),
        }
    }
}

/// Who the schedd is, and how job owners map to local accounts.
#[derive(Clone, Debug)]
pub struct Accounts {
    /// The schedd's own account name, if known.
    own: Option<String>,
    /// The schedd runs as root (and may switch to another account).
    root: bool,
    /// `identity = account` pairs; `*` matches every identity.
    map: Vec<(String, String)>,
    /// Looks an account up by name (the system's password database; tests
    /// give their own).
    lookup: fn(&str) -> Option<Account>,
}

impl Accounts {
    /// The running process's accounts, with no identity map: each owner is
    /// the account of the same name.
    pub fn current() -> Accounts {
        let (own, root) = current();
        Accounts { own, root, map: Vec::new(), lookup: system_lookup }
    }

    /// The running process's accounts: its own account and whether it is
    /// root, with the identity map `map` (`USER_ACCOUNT_MAP`: `identity =
    /// account` pairs separated by commas; `* = account` maps everyone).
    pub fn detect(map: &str) -> Result<Accounts, String> {
        let (own, root) = current();
        Ok(Accounts { own, root, map: parse_map(map)?, lookup: system_lookup })
    }

    /// Accounts for tests: the schedd's own account name, whether it is root,
    /// the identity map and the account database.
    pub fn fixed(
        own: &str,
        root: bool,
        map: &str,
        lookup: fn(&str) -> Option<Account>,
    ) -> Result<Accounts, String> {
        Ok(Accounts { own: Some(own.to_string()), root, map: parse_map(map)?, lookup })
    }

    /// The local account an owner's identity maps to.
    pub fn account_for<'a>(&'a self, owner: &'a str) -> &'a str {
        self.map
            .iter()
            .find(|(id, _)| id == owner)
            .or_else(|| self.map.iter().find(|(id, _)| id == "*"))
            .map_or(owner, |(_, acct)| acct.as_str())
    }

    /// How the schedd may touch `owner`'s files.
    pub fn access(&self, owner: &str) -> Access {
        let acct = self.account_for(owner);
        if self.own.as_deref() == Some(acct) {
            return Access::Own;
        }
        let own = self.own.as_deref().unwrap_or("an unknown account");
        if !self.root || !cfg!(target_os = "linux") {
            return Access::SpoolOnly(format!(
                "this schedd runs as {own}, not as root, so it cannot read or write the files \
                 of {owner} (account {acct}) with their rights; submit with --spool and fetch \
                 the output with `andes transfer-data`"
            ));
        }
        match (self.lookup)(acct) {
            Some(a) if a.uid != 0 => Access::As(a),
            Some(_) => Access::SpoolOnly(format!(
                "{owner} maps to the root account, which the schedd never acts as for a job; \
                 submit with --spool"
            )),
            None => Access::SpoolOnly(format!(
                "{owner} has no local account ({acct}) on the submit machine; submit with --spool"
            )),
        }
    }

    /// Runs `f` with `access`'s rights: at once for [`Access::Own`], on a
    /// thread with the account's file-system identity for [`Access::As`];
    /// refused for [`Access::SpoolOnly`]. Blocking.
    pub fn run<T: Send>(access: &Access, f: impl FnOnce() -> T + Send) -> Result<T, String> {
        match access {
            Access::Own => Ok(f()),
            Access::SpoolOnly(why) => Err(why.clone()),
            Access::As(a) => as_account(a, f),
        }
    }
}

fn parse_map(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((id, acct)) = item.split_once('=') else {
            return Err(format!("USER_ACCOUNT_MAP: `{item}` is not `identity = account`"));
        };
        let (id, acct) = (id.trim(), acct.trim());
        if id.is_empty() || acct.is_empty() {
            return Err(format!("USER_ACCOUNT_MAP: `{item}` is not `identity = account`"));
        }
        out.push((id.to_string(), acct.to_string()));
    }
    Ok(out)
}

#[cfg(unix)]
fn current() -> (Option<String>, bool) {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    (name_of_uid(uid), uid == 0)
}

#[cfg(not(unix))]
fn current() -> (Option<String>, bool) {
    (whoami::fallible::username().ok(), false)
}

#[cfg(unix)]
fn name_of_uid(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: a zeroed passwd is a valid out-parameter; buf outlives the call.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local; buf's length is passed with it.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r filled pw_name with a NUL-terminated string in buf.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    name.to_str().ok().map(str::to_string)
}

/// The account `name` from the system's password and group databases.
#[cfg(unix)]
pub fn system_lookup(name: &str) -> Option<Account> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in name_of_uid.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live local; buf's length is passed with it.
    let rc = unsafe {
        libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut result)
    };
    if rc != 0 || result.is_null() {
        return None;
    }
    let (uid, gid) = (pw.pw_uid, pw.pw_gid);
    let groups = group_list(&cname, gid);
    Some(Account { name: name.to_string(), uid, gid, groups })
}

/// The groups of user `name` whose primary group is `gid`.
#[cfg(all(unix, not(target_vendor = "apple")))]
fn group_list(name: &std::ffi::CStr, gid: libc::gid_t) -> Vec<libc::gid_t> {
    let mut groups = vec![0 as libc::gid_t; 256];
    let mut n = groups.len() as libc::c_int;
    // SAFETY: groups has room for n entries; getgrouplist writes at most n.
    let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
    groups.truncate(if rc < 0 { 0 } else { n.max(0) as usize });
    groups
}

/// The groups of user `name` whose primary group is `gid` (Apple's
/// getgrouplist takes them as `int`).
#[cfg(target_vendor = "apple")]
fn group_list(name: &std::ffi::CStr, gid: libc::gid_t) -> Vec<libc::gid_t> {
    let mut groups = vec![0 as libc::c_int; 256];
    let mut n = groups.len() as libc::c_int;
    // SAFETY: groups has room for n entries; getgrouplist writes at most n.
    let rc = unsafe {
        libc::getgrouplist(name.as_ptr(), gid as libc::c_int, groups.as_mut_ptr(), &mut n)
    };
    groups.truncate(if rc < 0 { 0 } else { n.max(0) as usize });
    groups.into_iter().map(|g| g as libc::gid_t).collect()
}

/// The account `name` (never found where accounts cannot be switched).
#[cfg(not(unix))]
pub fn system_lookup(_name: &str) -> Option<Account> {
    None
}

#[cfg(target_os = "linux")]
fn as_account<T: Send>(a: &Account, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // Per-thread credentials: the raw setgroups system call (glibc's
            // wrapper would change every thread of the process), then fsgid,
            // then fsuid, each checked. The thread ends with the work, so its
            // credentials never serve anything else.
            let groups: Vec<libc::gid_t> = a.groups.clone();
            // SAFETY: the pointer and length describe `groups`.
            let rc = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
            if rc != 0 {
                return Err(format!(
                    "cannot take the groups of {}: {}",
                    a.name,
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: setfsgid/setfsuid change only this thread's identity;
            // calling them again with the same id reads it back.
            unsafe {
                libc::setfsgid(a.gid);
                libc::setfsuid(a.uid);
                if libc::setfsgid(a.gid) as u32 != a.gid || libc::setfsuid(a.uid) as u32 != a.uid {
                    return Err(format!("cannot act as account {} (uid {})", a.name, a.uid));
                }
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(format!("the file work done as {} failed", a.name)))
    })
}

#[cfg(not(target_os = "linux"))]
fn as_account<T: Send>(a: &Account, _f: impl FnOnce() -> T + Send) -> Result<T, String> {
    Err(format!("acting as account {} is supported on Linux only; submit with --spool", a.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(name: &str) -> Option<Account> {
        match name {
            "alice" => Some(Account { name: "alice".into(), uid: 1001, gid: 1001, groups: vec![] }),
            "root" => Some(Account { name: "root".into(), uid: 0, gid: 0, groups: vec![] }),
            _ => None,
        }
    }

    #[test]
    fn a_personal_pool_is_its_own_account() {
        let a = Accounts::fixed("alice", false, "", db).unwrap();
        assert_eq!(a.access("alice"), Access::Own);
        // Another user of a schedd that is not root: spooled transfer only.
        assert!(matches!(a.access("bob"), Access::SpoolOnly(w) if w.contains("not as root")));
    }

    #[test]
    fn a_root_schedd_acts_as_each_owner_and_never_as_root() {
        let a = Accounts::fixed("root", true, "", db).unwrap();
        if cfg!(target_os = "linux") {
            assert!(matches!(a.access("alice"), Access::As(acct) if acct.uid == 1001));
        }
        assert!(
            matches!(a.access("mallory"), Access::SpoolOnly(w) if w.contains("no local account"))
        );
        // The identity `root` is the schedd's own account here (the pool's
        // administrator), named as such.
        assert_eq!(a.access("root"), Access::Own);
        // An identity mapped to root, though, is not let through.
        let m = Accounts::fixed("andes", true, "eve = root", db).unwrap();
        if cfg!(target_os = "linux") {
            assert!(matches!(m.access("eve"), Access::SpoolOnly(w) if w.contains("root account")));
        }
    }

    #[test]
    fn the_map_names_accounts_and_a_star_maps_everyone() {
        let a = Accounts::fixed("andes", false, "alice = andes, * = nobody", db).unwrap();
        assert_eq!(a.account_for("alice"), "andes");
        assert_eq!(a.account_for("bob"), "nobody");
        assert_eq!(a.access("alice"), Access::Own);
        let all = Accounts::fixed("andes", false, "* = andes", db).unwrap();
        assert_eq!(all.access("anyone"), Access::Own);
        assert!(Accounts::fixed("andes", false, "alice", db).is_err());
        assert!(Accounts::fixed("andes", false, "= x", db).is_err());
    }

    #[test]
    fn spool_only_refuses_to_run() {
        let why = Access::SpoolOnly("no".into());
        assert_eq!(Accounts::run(&why, || 1), Err("no".into()));
        assert_eq!(Accounts::run(&Access::Own, || 1), Ok(1));
    }
}
