//! File operations confined beneath one directory, for everything a job
//! could have touched: its sandbox on the execute host, its spool on the
//! submit side.
//!
//! Whatever a job wrote is data, never a path to follow. A [`Beneath`] opens
//! its root once; every later operation resolves a relative name one
//! component at a time from that handle, and:
//!
//! - follows **no** symbolic link, in any component: a link is reported as
//!   [`Refused::Link`] (with the text it holds), never opened, so no content
//!   outside the directory can be read or written through one;
//! - opens only regular files: a FIFO, socket or device is
//!   [`Refused::Special`] (on Unix the open itself is non-blocking, so a FIFO
//!   cannot stall the caller, and the opened file is checked again by `fstat`,
//!   so a name swapped between the check and the open is caught too);
//! - bounds what input can grow: names ([`MAX_DEPTH`] components), walks
//!   (a caller-given entry limit), reads (a caller-given byte limit);
//! - removes trees without following links and without recursion or file
//!   descriptors proportional to their depth ([`Beneath::clear`]).
//!
//! Names are `/`-separated relative paths of UTF-8 components; `.`, `..`,
//! empty components, backslashes and NUL are refused.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, Metadata, OpenOptions};

/// Deepest name accepted, in components.
pub const MAX_DEPTH: usize = 64;

/// Longest name accepted, in bytes.
pub const MAX_NAME: usize = 4096;

/// What a directory entry is, as seen without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Link,
    /// A FIFO, socket or device (never opened).
    Special,
}

/// One entry found by [`Beneath::walk`] or [`Beneath::entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name, relative to the root, `/`-separated.
    pub path: String,
    /// What it is.
    pub kind: Kind,
    /// Its length in bytes (a file's size; 0 for the rest).
    pub len: u64,
    /// When it was last modified, where the platform says.
    pub modified: Option<SystemTime>,
}

/// Why an operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The name is not a plain relative name.
    #[error("{path:?} is not a relative name inside the directory")]
    BadName {
        /// The name as given.
        path: String,
    },
    /// A component is a symbolic link.
    #[error("{path} is a symbolic link{}; links are not followed", target.as_ref().map(|t| format!(" (to {t})")).unwrap_or_default())]
    Link {
        /// The link's name.
        path: String,
        /// What it points to, if readable.
        target: Option<String>,
    },
    /// Not a regular file or directory.
    #[error("{path} is not a regular file (a FIFO, socket or device); it is not opened")]
    Special {
        /// Its name.
        path: String,
    },
    /// A directory where a file was expected, or a file where a directory was.
    #[error("{path} is {}", if *dir { "a directory, not a file" } else { "not a directory" })]
    WrongKind {
        /// Its name.
        path: String,
        /// True when it is a directory.
        dir: bool,
    },
    /// Nothing by that name.
    #[error("{path} does not exist")]
    Missing {
        /// The name.
        path: String,
    },
    /// A file larger than the caller allows.
    #[error("{path} holds {len} bytes, more than the {limit} allowed")]
    TooLarge {
        /// Its name.
        path: String,
        /// Its size.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// A walk found more entries than the caller allows.
    #[error("more than {limit} files and directories under {path}")]
    TooMany {
        /// Where the walk started.
        path: String,
        /// The limit.
        limit: usize,
    },
    /// Nested deeper than [`MAX_DEPTH`], or a name longer than [`MAX_NAME`].
    #[error("{path} is nested deeper than {MAX_DEPTH} directories or longer than {MAX_NAME} bytes")]
    TooDeep {
        /// The name (shortened).
        path: String,
    },
    /// A name that is not UTF-8.
    #[error("a name under {path} is not UTF-8: {name}")]
    NotUtf8 {
        /// Its directory.
        path: String,
        /// The name, lossily.
        name: String,
    },
    /// The system refused.
    #[error("{path}: {source}")]
    Io {
        /// The name.
        path: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl Refused {
    fn io(path: &str, source: io::Error) -> Refused {
        if source.kind() == io::ErrorKind::NotFound {
            Refused::Missing { path: path.to_string() }
        } else {
            Refused::Io { path: path.to_string(), source }
        }
    }
}

/// A directory whose contents are handled without following links.
#[derive(Debug)]
pub struct Beneath {
    dir: Dir,
    root: PathBuf,
}

/// The components of a relative name, checked.
pub fn components(path: &str) -> Result<Vec<&str>, Refused> {
    let bad = || Refused::BadName { path: path.to_string() };
    if path.is_empty() || path.len() > MAX_NAME {
        return Err(if path.is_empty() { bad() } else { too_deep(path) });
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > MAX_DEPTH {
        return Err(too_deep(path));
    }
    for c in &parts {
        if c.is_empty() || *c == "." || *c == ".." || c.contains(['\\', '\0']) {
            return Err(bad());
        }
        #[cfg(windows)]
        if c.contains(':') {
            return Err(bad());
        }
    }
    Ok(parts)
}

fn too_deep(path: &str) -> Refused {
    let mut shown: String = path.chars().take(120).collect();
    if shown.len() < path.len() {
        shown.push('…');
    }
    Refused::TooDeep { path: shown }
}

fn kind_of(m: &Metadata) -> Kind {
    let t = m.file_type();
    if t.is_symlink() {
        Kind::Link
    } else if t.is_dir() {
        Kind::Dir
    } else if t.is_file() {
        Kind::File
    } else {
        Kind::Special
    }
}

/// Reads `f`, the regular file `path` of `len` bytes as opened, at most
/// `limit` bytes (a file that grew past `limit` since is refused too).
pub fn read_opened(path: &str, f: File, len: u64, limit: u64) -> Result<Vec<u8>, Refused> {
    if len > limit {
        return Err(Refused::TooLarge { path: path.to_string(), len, limit });
    }
    let mut data = Vec::with_capacity(len as usize);
    f.take(limit.saturating_add(1)).read_to_end(&mut data).map_err(|e| Refused::io(path, e))?;
    if data.len() as u64 > limit {
        return Err(Refused::TooLarge { path: path.to_string(), len: data.len() as u64, limit });
    }
    Ok(data)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") }
}

/// Options for opening a regular file without following a link in its last
/// component; non-blocking on Unix so that a FIFO cannot stall the open.
fn nofollow(read: bool, write: bool, create: bool) -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(read).write(write).create(create).truncate(write);
    o.follow(FollowSymlinks::No);
    #[cfg(unix)]
    {
        use cap_std::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    o
}

/// Entries renamed to the top level by [`Beneath::clear`] while flattening a
/// deep tree start with this.
const CLEAR_PREFIX: &str = ".andes-clear-";

/// Depth past which [`Beneath::clear`] moves a directory up instead of
/// descending further.
const CLEAR_DEPTH: usize = 16;

impl Beneath {
    /// Opens `root` (a path the caller trusts: it is resolved normally).
    pub fn open(root: &Path) -> io::Result<Beneath> {
        let dir = Dir::open_ambient_dir(root, cap_std::ambient_authority())?;
        Ok(Beneath { dir, root: root.to_path_buf() })
    }

    /// Creates `root` and its parents if missing, then opens it.
    pub fn create(root: &Path) -> io::Result<Beneath> {
        std::fs::create_dir_all(root)?;
        Beneath::open(root)
    }

    /// The root's path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root's handle.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A refusal for `path`'s component `c` (at index `i`) that could not be
    /// opened as a directory.
    fn classify(&self, dir: &Dir, parts: &[&str], i: usize, e: io::Error) -> Refused {
        let shown = parts[..=i].join("/");
        match dir.symlink_metadata(parts[i]) {
            Ok(m) => match kind_of(&m) {
                Kind::Link => Refused::Link {
                    target: dir
                        .read_link_contents(parts[i])
                        .ok()
                        .map(|t| t.to_string_lossy().into_owned()),
                    path: shown,
                },
                Kind::Special => Refused::Special { path: shown },
                Kind::File => Refused::WrongKind { path: shown, dir: false },
                Kind::Dir => Refused::io(&shown, e),
            },
            Err(_) => Refused::io(&shown, e),
        }
    }

    /// Opens the directory holding the last component of `parts` (creating
    /// missing directories when `create`), following no link.
    fn parent(&self, parts: &[&str], create: bool) -> Result<Option<Dir>, Refused> {
        let mut cur: Option<Dir> = None;
        for i in 0..parts.len() - 1 {
            let here = cur.as_ref().unwrap_or(&self.dir);
            let next = match here.open_dir_nofollow(parts[i]) {
                Ok(d) => d,
                Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                    here.create_dir(parts[i])
                        .or_else(|e| {
                            if e.kind() == io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) }
                        })
                        .map_err(|e| Refused::io(&parts[..=i].join("/"), e))?;
                    here.open_dir_nofollow(parts[i])
                        .map_err(|e| self.classify(here, parts, i, e))?
                }
                Err(e) => return Err(self.classify(here, parts, i, e)),
            };
            cur = Some(next);
        }
        Ok(cur)
    }

    /// What `path` is, without following a link.
    pub fn entry(&self, path: &str) -> Result<Entry, Refused> {
        let parts = components(path)?;
        let parent = self.parent(&parts, false)?;
        let dir = parent.as_ref().unwrap_or(&self.dir);
        let last = parts[parts.len() - 1];
        let m = dir.symlink_metadata(last).map_err(|e| Refused::io(path, e))?;
        let kind = kind_of(&m);
        Ok(Entry {
            path: path.to_string(),
            kind,
            len: if kind == Kind::File { m.len() } else { 0 },
            modified: m.modified().ok().map(|t| t.into_std()),
        })
    }

    /// Opens the regular file `path` for reading; returns it with its length.
    pub fn open_file(&self, path: &str) -> Result<(File, u64), Refused> {
        self.open_for_reading(path, true)
    }

    /// Opens for reading the regular file `path` that a listing or a look
    /// ([`Beneath::list`], [`Beneath::walk`], [`Beneath::entry`]) has just
    /// found: without [`Beneath::open_file`]'s look first. The open follows no
    /// link and cannot block on a FIFO, and what it opened is checked: a link
    /// or special file put in the file's place since is refused all the
    /// same. Returns the file with its length.
    pub fn open_found(&self, path: &str) -> Result<(File, u64), Refused> {
        self.open_for_reading(path, false)
    }

    /// [`Beneath::open_file`] (`look`: a look first, so that a device or
    /// FIFO is never opened at all) or [`Beneath::open_found`].
    fn open_for_reading(&self, path: &str, look: bool) -> Result<(File, u64), Refused> {
        let parts = components(path)?;
        let parent = self.parent(&parts, false)?;
        let dir = parent.as_ref().unwrap_or(&self.dir);
        let last = parts.len() - 1;
        if look {
            let m = dir.symlink_metadata(parts[last]).map_err(|e| Refused::io(path, e))?;
            match kind_of(&m) {
                Kind::File => {}
                Kind::Dir => return Err(Refused::WrongKind { path: path.to_string(), dir: true }),
                _ => return Err(self.classify(dir, &parts, last, io::ErrorKind::Other.into())),
            }
        }
        // The opened file is checked whether or not it was looked at first.
        let f = dir
            .open_with(parts[last], &nofollow(true, false, false))
            .map_err(|e| self.classify(dir, &parts, last, e))?;
        let m = f.metadata().map_err(|e| Refused::io(path, e))?;
        match kind_of(&m) {
            Kind::File => Ok((f, m.len())),
            Kind::Dir => Err(Refused::WrongKind { path: path.to_string(), dir: true }),
            Kind::Link | Kind::Special => Err(Refused::Special { path: path.to_string() }),
        }
    }

    /// Reads the regular file `path`, at most `limit` bytes.
    pub fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>, Refused> {
        let (f, len) = self.open_file(path)?;
        read_opened(path, f, len, limit)
    }

    /// Creates or replaces the regular file `path` with `data`, creating the
    /// directories on its way. An existing link or special file in its place
    /// (or on its way) is refused and left as it is.
    pub fn write(&self, path: &str, data: &[u8]) -> Result<(), Refused> {
        let mut f = self.create_file(path)?;
        f.write_all(data).map_err(|e| Refused::io(path, e))?;
        f.flush().map_err(|e| Refused::io(path, e))
    }

    /// Replaces `path` with a regular file holding `data` atomically: written
    /// beside it under a temporary name, then renamed over it (a link in its
    /// place is replaced, never followed). With `durable`, the file and its
    /// directory are synced first.
    pub fn write_atomic(&self, path: &str, data: &[u8], durable: bool) -> Result<(), Refused> {
        let parts = components(path)?;
        let parent = self.parent(&parts, true)?;
        let dir = parent.as_ref().unwrap_or(&self.dir);
        let last = parts[parts.len() - 1];
        if let Ok(m) = dir.symlink_metadata(last)
            && kind_of(&m) == Kind::Dir
        {
            return Err(Refused::WrongKind { path: path.to_string(), dir: true });
        }
        let tmp =
            format!(".{}.tmp{}", last.chars().take(64).collect::<String>(), std::process::id());
        let _ = dir.remove_file_or_symlink(&tmp);
        let mut o = nofollow(false, true, true);
        o.create_new(true);
        let mut f = dir.open_with(&tmp, &o).map_err(|e| Refused::io(path, e))?;
        let written = f.write_all(data).and_then(|_| if durable { f.sync_all() } else { Ok(()) });
        drop(f);
        if let Err(e) = written.and_then(|_| dir.rename(&tmp, dir, last)) {
            let _ = dir.remove_file(&tmp);
            return Err(Refused::io(path, e));
        }
        if durable {
            // Syncing a directory opened for reading is what makes the
            // rename durable on Unix; elsewhere it is best effort.
            if let Ok(d) = dir.open(".") {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// Creates (or truncates) the regular file `path` for writing, creating
    /// the directories on its way; links and special files are refused.
    pub fn create_file(&self, path: &str) -> Result<File, Refused> {
        let parts = components(path)?;
        let parent = self.parent(&parts, true)?;
        let dir = parent.as_ref().unwrap_or(&self.dir);
        let last = parts.len() - 1;
        // Look first: opening a FIFO for writing would fail (no reader) or
        // succeed (a reader), neither of which should truncate or write it.
        if let Ok(m) = dir.symlink_metadata(parts[last]) {
            match kind_of(&m) {
                Kind::File => {}
                Kind::Dir => return Err(Refused::WrongKind { path: path.to_string(), dir: true }),
                _ => return Err(self.classify(dir, &parts, last, io::ErrorKind::Other.into())),
            }
        }
        let f = dir
            .open_with(parts[last], &nofollow(false, true, true))
            .map_err(|e| self.classify(dir, &parts, last, e))?;
        let m = f.metadata().map_err(|e| Refused::io(path, e))?;
        if kind_of(&m) != Kind::File {
            return Err(Refused::Special { path: path.to_string() });
        }
        Ok(f)
    }

    /// Creates the directory `path` and those on its way (no link followed).
    pub fn create_dirs(&self, path: &str) -> Result<(), Refused> {
        let mut parts = components(path)?;
        parts.push("x");
        self.parent(&parts, true).map(|_| ())
    }

    /// Removes the file, link or special file `path` (never what a link
    /// points to). Missing is not an error.
    pub fn remove_file(&self, path: &str) -> Result<(), Refused> {
        let parts = components(path)?;
        let parent = match self.parent(&parts, false) {
            Ok(p) => p,
            Err(Refused::Missing { .. }) => return Ok(()),
            Err(e) => return Err(e),
        };
        let dir = parent.as_ref().unwrap_or(&self.dir);
        match dir.remove_file_or_symlink(parts[parts.len() - 1]) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Refused::io(path, e)),
            _ => Ok(()),
        }
    }

    /// Opens the directory `path` (the root for `""`), following no link.
    fn open_dir(&self, path: &str) -> Result<Dir, Refused> {
        if path.is_empty() {
            return self.dir.try_clone().map_err(|e| Refused::io(".", e));
        }
        let mut parts = components(path)?;
        parts.push("x");
        match self.parent(&parts, false)? {
            Some(d) => Ok(d),
            None => self.dir.try_clone().map_err(|e| Refused::io(".", e)),
        }
    }

    /// The entries directly in the directory `path` (`""`: the root), sorted
    /// by name, at most `limit`.
    pub fn list(&self, path: &str, limit: usize) -> Result<Vec<Entry>, Refused> {
        let dir = self.open_dir(path)?;
        let mut out = Vec::new();
        let shown = if path.is_empty() { ".".to_string() } else { path.to_string() };
        for e in dir.entries().map_err(|e| Refused::io(&shown, e))? {
            let e = e.map_err(|e| Refused::io(&shown, e))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                return Err(Refused::NotUtf8 {
                    path: shown,
                    name: name.to_string_lossy().into_owned(),
                });
            };
            if out.len() >= limit {
                return Err(Refused::TooMany { path: shown, limit });
            }
            let full = join(path, name);
            let m = dir.symlink_metadata(name).map_err(|e| Refused::io(&full, e))?;
            let kind = kind_of(&m);
            out.push(Entry {
                path: full,
                kind,
                len: if kind == Kind::File { m.len() } else { 0 },
                modified: m.modified().ok().map(|t| t.into_std()),
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Every entry under the directory `path` (`""`: the root), depth first,
    /// each directory's entries sorted by name; directories are listed and
    /// entered, links and special files listed and never followed. At most
    /// `limit` entries and [`MAX_DEPTH`] levels.
    pub fn walk(&self, path: &str, limit: usize) -> Result<Vec<Entry>, Refused> {
        let mut out: Vec<Entry> = Vec::new();
        let mut stack = vec![path.to_string()];
        while let Some(dir) = stack.pop() {
            let left = limit.saturating_sub(out.len());
            let entries = self.list(&dir, left).map_err(|e| match e {
                Refused::TooMany { .. } => Refused::TooMany {
                    path: if path.is_empty() { ".".into() } else { path.to_string() },
                    limit,
                },
                e => e,
            })?;
            let subdirs: Vec<String> =
                entries.iter().filter(|e| e.kind == Kind::Dir).map(|e| e.path.clone()).collect();
            for d in subdirs.iter().rev() {
                if d.split('/').count() >= MAX_DEPTH {
                    return Err(too_deep(d));
                }
                stack.push(d.clone());
            }
            out.extend(entries);
        }
        Ok(out)
    }

    /// Removes everything under the root (the root stays), following no link.
    /// Works at any depth with a bounded number of open directories: a
    /// directory deeper than a few levels is first moved up to the root.
    ///
    /// Each directory is listed once, and what its listing says is not a
    /// directory is unlinked without a look first: emptying a sandbox of a
    /// few files costs a listing and an unlink each (a job's end on an
    /// execute host does this for every job).
    pub fn clear(&self) -> io::Result<()> {
        let mut moved = 0u64;
        loop {
            let before = moved;
            self.empty(&self.dir, 0, &mut moved)?;
            // Directories moved up to the root during the pass were not in
            // its listing: another pass takes them.
            if moved == before {
                return Ok(());
            }
        }
    }

    /// Removes what `dir` (at `depth` below the root) holds.
    fn empty(&self, dir: &Dir, depth: usize, moved: &mut u64) -> io::Result<()> {
        // Listed whole before anything goes: removing while reading the
        // directory could skip entries.
        let found: Vec<(std::ffi::OsString, bool)> = dir
            .entries()?
            .filter_map(|e| e.ok())
            .map(|e| {
                // The listing's own type where the file system gives one
                // (no look at the entry); a look where it does not.
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                (e.file_name(), is_dir)
            })
            .collect();
        for (name, is_dir) in found {
            self.remove_entry(dir, &name, is_dir, depth, moved)?;
        }
        Ok(())
    }

    /// Removes `name` from `dir`, a tree if it is a directory (`is_dir`: what
    /// the listing said; what it is now decides when the two differ).
    fn remove_entry(
        &self,
        dir: &Dir,
        name: &std::ffi::OsStr,
        is_dir: bool,
        depth: usize,
        moved: &mut u64,
    ) -> io::Result<()> {
        let gone = |r: io::Result<()>| match r {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        if !is_dir {
            match dir.remove_file_or_symlink(name) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    // A directory after all (EISDIR, or EPERM on some
                    // systems), or a real failure: a look decides which.
                    match dir.symlink_metadata(name) {
                        Ok(m) if m.file_type().is_dir() => {}
                        Ok(_) => return Err(e),
                        Err(e) => return gone(Err(e)),
                    }
                }
                _ => return Ok(()),
            }
        }
        if depth >= CLEAR_DEPTH {
            // Too deep to descend with one handle per level: move it to the
            // root, whose next pass removes it.
            *moved += 1;
            let to = format!("{CLEAR_PREFIX}{}-{moved}", std::process::id());
            return gone(dir.rename(name, &self.dir, to));
        }
        let sub = match dir.open_dir_nofollow(name) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            // Not a directory now (a link or file in its place): removed as
            // that, never followed.
            Err(_) => return gone(dir.remove_file_or_symlink(name)),
        };
        self.empty(&sub, depth + 1, moved)?;
        drop(sub);
        gone(dir.remove_dir(name))
    }

    /// Bytes held by the regular files under the root (links not followed),
    /// counting at most `limit` entries.
    pub fn usage(&self, limit: usize) -> Result<u64, Refused> {
        Ok(self.walk("", limit)?.iter().map(|e| e.len).sum())
    }
}

#[cfg(test)]
mod tests;

pub mod mapped;
pub mod private;

/// Replaces the file at `path` (a path the caller trusts) with `bytes` so
/// that a reader, or a crash, sees the old content or the new, never part of
/// either: a temporary file in the same directory, given exactly `mode` on
/// Unix (whatever the process's umask: a daemon's is 077, see
/// [`private::owner_only_by_default`], so a file meant for others says so
/// here), written and synced, renamed over `path` (`tempfile`'s persist), and
/// the directory synced. The one way andes writes whole files in place.
pub fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut b = tempfile::Builder::new();
    b.prefix(".andes-").suffix(".tmp");
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(mode));
    #[cfg(not(unix))]
    let _ = mode;
    let mut tmp = b.tempfile_in(dir)?;
    #[cfg(unix)]
    tmp.as_file().set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    // Windows: a file for its owner alone gets its own access control list
    // before a byte is written (its mode means nothing there).
    if mode & 0o077 == 0 {
        private::restrict_to_owner(tmp.path())?;
    }
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Syncs a directory's entries (a rename into it) to disk; nothing to do
/// where directories cannot be opened as files (Windows).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}
