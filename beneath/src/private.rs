//! Files only their owner may read: secret keys and their directories, the
//! module cache and its key.
//!
//! On Unix that is the mode a file is created with (0600, a directory 0700),
//! and a file is open to others when its group or other bits are set. On
//! Windows a file's mode says nothing: access is its access control list
//! (DACL), and a new file inherits its directory's, which may let other
//! users read it. [`restrict_to_owner`] gives a file or directory a DACL of
//! its own (inheriting nothing) that grants the current user everything and
//! no one else anything, the files a directory will hold included; and
//! [`open_to_others`] reads a file's DACL back and names anyone else it lets
//! read, besides the system itself and the machine's administrators (who
//! can read every file anyway).
//!
//! The list is set with `SetFileSecurityW` and a protected descriptor:
//! wine's `SetNamedSecurityInfoW` and `SetSecurityInfo` ignore
//! `PROTECTED_DACL_SECURITY_INFORMATION` and add the parent directory's
//! inheritable entries (Everyone's read among them). Wine keeps no list of
//! its own for a file but maps it to the Unix mode (an entry for the
//! current user gives the owner's and the group's bits, 0770), which is how
//! `tests/system/portability.rs` sees it from outside.

use std::fs::File;
use std::io;
use std::path::Path;

/// Makes every file and directory this process creates from now on its
/// owner's alone, unless created with a mode given explicitly
/// ([`crate::replace_file`]): on Unix the umask 077. The daemons call it
/// first thing, so that the queue database and its journal, spooled
/// outputs, sandboxes, checkpoints and logs are the daemon's account's
/// alone, by construction rather than file by file. (Windows: a new file
/// inherits its directory's access control list; the daemons' directories
/// are the administrator's to set.)
pub fn owner_only_by_default() {
    #[cfg(unix)]
    // SAFETY: umask only sets the process's file mode creation mask and
    // returns the old one; it cannot fail or touch memory.
    unsafe {
        libc::umask(0o077);
    }
}

/// Creates `path` and any of its missing parents as directories others may
/// enter and list (0755 on Unix, whatever the umask), leaving those that
/// exist as they are: a daemon's base directories (SPOOL, LOCAL_DIR, LOG,
/// EXECUTE), which hold address files everyone reads beside the daemon's
/// private files and directories.
pub fn create_dirs_reachable(path: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut p = path;
    while !p.as_os_str().is_empty() && !p.exists() {
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(parent) => p = parent,
            None => break,
        }
    }
    for dir in missing.iter().rev() {
        match std::fs::create_dir(dir) {
            Ok(()) => {
                #[cfg(unix)]
                std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Makes `path`, a file or a directory, readable and writable by the current
/// user only (see the module documentation). Nothing to do on Unix, where
/// the mode a file is created with does it.
pub fn restrict_to_owner(path: &Path) -> io::Result<()> {
    #[cfg(windows)]
    return windows::restrict_to_owner(path);
    #[cfg(not(windows))]
    {
        let _ = path;
        Ok(())
    }
}

/// Whether anyone but the owner may read `file`: `None` if no one, else who
/// (Unix: its group or others, by its mode; Windows: each other account its
/// access control list lets read, or that it has none).
pub fn open_to_others(file: &File) -> io::Result<Option<String>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata()?.permissions().mode() & 0o7777;
        Ok((mode & 0o077 != 0).then(|| format!("its mode is {mode:o}, which lets others in")))
    }
    #[cfg(windows)]
    return windows::open_to_others(file);
    #[cfg(not(any(unix, windows)))]
    {
        let _ = file;
        Ok(None)
    }
}

#[cfg(windows)]
mod windows {
    use std::ffi::c_void;
    use std::fs::File;
    use std::io;
    use std::os::windows::ffi::OsStrExt;
    use std::os::windows::io::AsRawHandle;
    use std::path::Path;
    use std::ptr::null_mut;

    use windows_sys::Win32::Foundation::{
        CloseHandle, ERROR_SUCCESS, GENERIC_ALL, GENERIC_READ, HANDLE, LocalFree,
    };
    use windows_sys::Win32::Security::Authorization::{
        ConvertSidToStringSidW, GetSecurityInfo, SE_FILE_OBJECT,
    };
    use windows_sys::Win32::Security::{
        ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, ACL_REVISION, AddAccessAllowedAceEx,
        CONTAINER_INHERIT_ACE, DACL_SECURITY_INFORMATION, EqualSid, GetAce, GetLengthSid,
        GetTokenInformation, InitializeAcl, InitializeSecurityDescriptor, IsWellKnownSid,
        OBJECT_INHERIT_ACE, OWNER_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION,
        PSECURITY_DESCRIPTOR, PSID, SE_DACL_PROTECTED, SECURITY_DESCRIPTOR, SetFileSecurityW,
        SetSecurityDescriptorControl, SetSecurityDescriptorDacl, TOKEN_QUERY, TOKEN_USER,
        TokenUser, WinBuiltinAdministratorsSid, WinLocalSystemSid,
    };
    use windows_sys::Win32::Storage::FileSystem::{FILE_ALL_ACCESS, FILE_READ_DATA};
    use windows_sys::Win32::System::SystemServices::{
        ACCESS_ALLOWED_ACE_TYPE, SECURITY_DESCRIPTOR_REVISION,
    };
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

    /// The current user's SID, in a buffer that holds a `TOKEN_USER`.
    struct UserSid(Vec<u64>);

    impl UserSid {
        fn current() -> io::Result<UserSid> {
            let mut token: HANDLE = null_mut();
            // SAFETY: the pseudo-handle of this process, and a place for
            // the token's handle.
            if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut token) } == 0 {
                return Err(io::Error::last_os_error());
            }
            let mut len = 0u32;
            // SAFETY: asks only for the size the information needs.
            unsafe { GetTokenInformation(token, TokenUser, null_mut(), 0, &mut len) };
            // Aligned for TOKEN_USER, whose SID follows it in the buffer.
            let mut buf = vec![0u64; (len as usize).div_ceil(8).max(1)];
            // SAFETY: `buf` holds `len` bytes at least.
            let ok = unsafe {
                GetTokenInformation(token, TokenUser, buf.as_mut_ptr().cast(), len, &mut len)
            };
            let err = io::Error::last_os_error();
            // SAFETY: the handle OpenProcessToken gave.
            unsafe { CloseHandle(token) };
            if ok == 0 {
                return Err(err);
            }
            Ok(UserSid(buf))
        }

        fn sid(&self) -> PSID {
            // SAFETY: GetTokenInformation filled the buffer with a TOKEN_USER
            // whose SID points into the same buffer, which lives as long as
            // `self`.
            unsafe { (*(self.0.as_ptr() as *const TOKEN_USER)).User.Sid }
        }
    }

    pub(super) fn restrict_to_owner(path: &Path) -> io::Result<()> {
        let user = UserSid::current()?;
        let sid = user.sid();
        // SAFETY: a valid SID from the token.
        let sid_len = unsafe { GetLengthSid(sid) } as usize;
        let size = std::mem::size_of::<ACL>() + std::mem::size_of::<ACCESS_ALLOWED_ACE>()
            - std::mem::size_of::<u32>()
            + sid_len;
        let mut acl = vec![0u64; size.div_ceil(8)];
        let acl_ptr: *mut ACL = acl.as_mut_ptr().cast();
        // SAFETY: `acl` is `size` bytes, aligned; the ACE fits by the size
        // computed for it above.
        unsafe {
            if InitializeAcl(acl_ptr, size as u32, ACL_REVISION) == 0
                || AddAccessAllowedAceEx(
                    acl_ptr,
                    ACL_REVISION,
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                    FILE_ALL_ACCESS,
                    sid,
                ) == 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        // SetFileSecurityW with a protected descriptor, not
        // SetNamedSecurityInfoW or SetSecurityInfo: wine's ignore
        // PROTECTED_DACL_SECURITY_INFORMATION and add the parent
        // directory's inheritable entries (Everyone's read among them) to
        // the list they are given.
        let mut sd = SECURITY_DESCRIPTOR::default();
        let psd: PSECURITY_DESCRIPTOR = (&mut sd as *mut SECURITY_DESCRIPTOR).cast();
        let name = wide(path);
        // SAFETY: `sd` lives to the end of the function, as does `acl`,
        // which it points to; `name` is NUL-terminated.
        let ok = unsafe {
            InitializeSecurityDescriptor(psd, SECURITY_DESCRIPTOR_REVISION) != 0
                && SetSecurityDescriptorDacl(psd, 1, acl_ptr, 0) != 0
                && SetSecurityDescriptorControl(psd, SE_DACL_PROTECTED, SE_DACL_PROTECTED) != 0
                && SetFileSecurityW(
                    name.as_ptr(),
                    DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION,
                    psd,
                ) != 0
        };
        if !ok {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn wide(path: &Path) -> Vec<u16> {
        path.as_os_str().encode_wide().chain(Some(0)).collect()
    }

    /// The SID's string form (`S-1-5-...`).
    fn sid_string(sid: PSID) -> String {
        let mut s: *mut u16 = null_mut();
        // SAFETY: a valid SID; the string is freed below.
        if unsafe { ConvertSidToStringSidW(sid, &mut s) } == 0 || s.is_null() {
            return "an account".into();
        }
        let mut n = 0;
        // SAFETY: a NUL-terminated string from the call above.
        while unsafe { *s.add(n) } != 0 {
            n += 1;
        }
        // SAFETY: `n` characters before the NUL.
        let text = String::from_utf16_lossy(unsafe { std::slice::from_raw_parts(s, n) });
        // SAFETY: allocated by ConvertSidToStringSidW with LocalAlloc.
        unsafe { LocalFree(s as *mut c_void) };
        text
    }

    pub(super) fn open_to_others(file: &File) -> io::Result<Option<String>> {
        let user = UserSid::current()?;
        let mut owner: PSID = null_mut();
        let mut dacl: *mut ACL = null_mut();
        let mut sd: PSECURITY_DESCRIPTOR = null_mut();
        // SAFETY: an open file's handle; the descriptor is freed below and
        // `owner` and `dacl` point into it.
        let err = unsafe {
            GetSecurityInfo(
                file.as_raw_handle() as HANDLE,
                SE_FILE_OBJECT,
                DACL_SECURITY_INFORMATION | OWNER_SECURITY_INFORMATION,
                &mut owner,
                null_mut(),
                &mut dacl,
                null_mut(),
                &mut sd,
            )
        };
        if err != ERROR_SUCCESS {
            return Err(io::Error::from_raw_os_error(err as i32));
        }
        let mut others = Vec::new();
        if dacl.is_null() {
            others.push("everyone (it has no access control list)".to_string());
        } else {
            // SAFETY: a valid ACL inside the descriptor.
            let count = unsafe { (*dacl).AceCount };
            for i in 0..u32::from(count) {
                let mut ace: *mut c_void = null_mut();
                // SAFETY: an index below the ACL's count.
                if unsafe { GetAce(dacl, i, &mut ace) } == 0 || ace.is_null() {
                    continue;
                }
                // SAFETY: every ACE starts with its header.
                let header = unsafe { *(ace as *const ACE_HEADER) };
                if u32::from(header.AceType) != ACCESS_ALLOWED_ACE_TYPE {
                    continue;
                }
                let allowed = ace as *const ACCESS_ALLOWED_ACE;
                // SAFETY: an access-allowed ACE, whose SID starts at SidStart.
                let (mask, sid) =
                    unsafe { ((*allowed).Mask, std::ptr::addr_of!((*allowed).SidStart) as PSID) };
                if mask & (FILE_READ_DATA | GENERIC_READ | GENERIC_ALL) == 0 {
                    continue;
                }
                // SAFETY: valid SIDs.
                let trusted = unsafe {
                    (!owner.is_null() && EqualSid(sid, owner) != 0)
                        || EqualSid(sid, user.sid()) != 0
                        || IsWellKnownSid(sid, WinLocalSystemSid) != 0
                        || IsWellKnownSid(sid, WinBuiltinAdministratorsSid) != 0
                };
                if !trusted {
                    others.push(sid_string(sid));
                }
            }
        }
        // SAFETY: allocated by GetSecurityInfo.
        unsafe { LocalFree(sd) };
        Ok((!others.is_empty())
            .then(|| format!("its access control list lets {} read it", others.join(", "))))
    }
}
