//! The SQLite store: its schema and migrations, opening and loading it,
//! and the uploads directory beside it.

use super::ads::*;
use super::config::*;
use super::error::*;
use super::ops::*;
use super::state::*;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use classad::ClassAd;
use rusqlite::{Connection, OptionalExtension, params};

use crate::job::{JobId, JobStatus};
pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

/// Where a queue at `db` keeps its uploads (modules, spooled inputs), one file
/// per SHA-256: the directory `uploads` beside the database.
pub fn uploads_dir(db: &Path) -> PathBuf {
    db.parent().unwrap_or(Path::new(".")).join("uploads")
}

/// The file name of an upload with digest `sha256:<hex>`, if it is one.
pub(crate) fn upload_name(digest: &str) -> Option<&str> {
    digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS clusters (
    id INTEGER PRIMARY KEY, ad TEXT NOT NULL,
    submitted INTEGER NOT NULL, completed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    cluster INTEGER NOT NULL, proc INTEGER NOT NULL,
    status INTEGER NOT NULL, entered INTEGER NOT NULL, ad TEXT NOT NULL,
    PRIMARY KEY (cluster, proc)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster INTEGER NOT NULL, proc INTEGER NOT NULL,
    owner TEXT NOT NULL, left_queue INTEGER NOT NULL, ad TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS modules (digest TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pending_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, cluster INTEGER NOT NULL, proc INTEGER NOT NULL,
    time INTEGER NOT NULL, kind TEXT NOT NULL, ad TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submits (
    cluster INTEGER PRIMARY KEY, owner TEXT NOT NULL, token TEXT NOT NULL, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS upload_refs (
    owner TEXT NOT NULL, digest TEXT NOT NULL, size INTEGER NOT NULL, stored INTEGER NOT NULL,
    released INTEGER,
    PRIMARY KEY (owner, digest)) WITHOUT ROWID;
";

/// Makes `path` (with each of `suffixes`) the daemon's alone, where it
/// exists: a queue made before the daemons' umask was 077 had its database,
/// journal and uploads open to every local user.
pub(crate) fn owner_only(path: &Path, suffixes: &[&str]) {
    #[cfg(unix)]
    for suffix in suffixes {
        use std::os::unix::fs::PermissionsExt;
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if let Ok(m) = std::fs::metadata(&p) {
            let mode = if m.is_dir() { 0o700 } else { 0o600 };
            if m.permissions().mode() & 0o077 != 0 {
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, suffixes);
}

pub(crate) fn open(path: &Path) -> Result<Connection, QueueError> {
    let conn = Connection::open(path)
        .map_err(|e| QueueError::Storage(format!("{}: {e}", path.display())))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(conn)
}

/// Events committed but perhaps not yet in their event logs when the schedd
/// stopped (a crash between a commit and the log's write): written now, then
/// forgotten. A log may get an event twice this way, never lose one.
pub(crate) fn replay_pending_events(
    conn: &Connection,
    config: &QueueConfig,
) -> Result<(), QueueError> {
    let Some(sink) = &config.sink else { return Ok(()) };
    let mut events = Vec::new();
    let mut last = 0i64;
    {
        let mut stmt = conn.prepare(
            "SELECT seq, cluster, proc, time, kind, ad FROM pending_events ORDER BY seq",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            last = r.get(0)?;
            let (cluster, proc): (i64, i64) = (r.get(1)?, r.get(2)?);
            let kind: String = r.get(4)?;
            let ad: String = r.get(5)?;
            let Ok(kind) = serde_json::from_str::<EventKind>(&kind) else { continue };
            let Ok(ad) = classad::parse_ad(&ad) else { continue };
            events.push(QueueEvent {
                id: JobId::new(cluster as u32, proc as u32),
                time: r.get(3)?,
                kind,
                ad: Arc::new(super::ops::EventAd::made(ad)),
            });
        }
    }
    if !events.is_empty() {
        tracing::info!("writing {} job events the event logs may not have", events.len());
        sink(&events);
        conn.execute("DELETE FROM pending_events WHERE seq <= ?1", [last])?;
    }
    Ok(())
}

/// Queues made before uploads were accounted: each stored module gets its
/// size, no uploader and the time of the upgrade.
pub(crate) fn migrate_modules(conn: &Connection) -> Result<(), QueueError> {
    let has: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('modules') WHERE name = 'uploader'")?
        .exists([])?;
    if !has {
        conn.execute_batch(
            "ALTER TABLE modules ADD COLUMN uploader TEXT NOT NULL DEFAULT '';
             ALTER TABLE modules ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
             ALTER TABLE modules ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;
             UPDATE modules SET size = length(data), stored = CAST(strftime('%s','now') AS INTEGER);",
        )?;
    }
    conn.execute_batch("CREATE INDEX IF NOT EXISTS modules_uploader ON modules (uploader)")?;
    // Queues made before an upload outlived its last job: none is released.
    let released: bool = conn
        .prepare("SELECT 1 FROM pragma_table_info('upload_refs') WHERE name = 'released'")?
        .exists([])?;
    if !released {
        conn.execute_batch("ALTER TABLE upload_refs ADD COLUMN released INTEGER")?;
    }
    Ok(())
}

/// Queues made before uploads had owners: each upload becomes its uploader's,
/// and one from before uploads were accounted (no uploader) becomes the
/// owner's of every queued job that names it. Once.
pub(crate) fn migrate_upload_refs(conn: &Connection, st: &QueueState) -> Result<(), QueueError> {
    let done: bool = conn.prepare("SELECT 1 FROM meta WHERE key = 'upload_refs'")?.exists([])?;
    if done {
        return Ok(());
    }
    conn.execute(
        "INSERT OR IGNORE INTO upload_refs (owner, digest, size, stored)
         SELECT uploader, digest, size, stored FROM modules WHERE uploader != ''",
        [],
    )?;
    let mut legacy = conn.prepare(
        "INSERT OR IGNORE INTO upload_refs (owner, digest, size, stored)
         SELECT ?1, digest, size, stored FROM modules WHERE digest = ?2 AND uploader = ''",
    )?;
    for (owner, digest) in st.referenced_uploads() {
        legacy.execute(params![owner, digest])?;
    }
    conn.execute("INSERT INTO meta (key, value) VALUES ('upload_refs', 1)", [])?;
    Ok(())
}

/// Removes from the uploads directory what no stored upload names: files left
/// by a crash between an upload's file and its commit, and partial uploads.
pub(crate) fn sweep_uploads(conn: &Connection, dir: &Path) -> Result<(), QueueError> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Ok(()) };
    let mut known = conn.prepare("SELECT 1 FROM modules WHERE digest = ?1")?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !known.exists([format!("sha256:{name}")])? {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(())
}

pub(crate) fn parse_stored(text: &str, what: &str) -> Result<ClassAd, QueueError> {
    classad::parse_ad(text).map_err(|e| QueueError::Storage(format!("stored {what}: {e}")))
}

pub(crate) fn load(conn: &Connection, schedd_name: &str) -> Result<QueueState, QueueError> {
    let mut st = QueueState {
        clusters: BTreeMap::new(),
        jobs: BTreeMap::new(),
        next_cluster: 1,
        reserved: BTreeMap::new(),
        cluster_mark: 1,
        schedd_name: schedd_name.into(),
        owner_jobs: HashMap::new(),
        upload_uses: HashMap::new(),
    };
    let meta = |key: &str| -> Result<Option<i64>, QueueError> {
        Ok(conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    };
    // Past every id ever handed out, reserved or submitted.
    let next = meta("next_cluster")?.unwrap_or(1).max(meta("cluster_mark")?.unwrap_or(1));
    st.next_cluster = next.clamp(1, i64::from(u32::MAX)) as u32;
    st.cluster_mark = st.next_cluster;
    let mut stmt = conn.prepare("SELECT id, ad, submitted, completed FROM clusters")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let text: String = r.get(1)?;
        let ad = parse_stored(&text, &format!("cluster {id}"))?;
        let (owner, batch) = owner_and_batch(&ad);
        st.clusters.insert(
            id as u32,
            Cluster {
                ad: Arc::new(ad),
                owner,
                batch,
                submitted: r.get::<_, i64>(2)? as u32,
                completed: r.get::<_, i64>(3)? as u32,
            },
        );
    }
    let mut stmt = conn.prepare("SELECT cluster, proc, status, entered, ad FROM jobs")?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let id = JobId::new(r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u32);
        let status = JobStatus::from_code(r.get(2)?)
            .ok_or_else(|| QueueError::Storage(format!("job {id}: bad status")))?;
        let text: String = r.get(4)?;
        let ad = if text == "[]" { ClassAd::new() } else { parse_stored(&text, &id.to_string())? };
        if let Some(c) = st.clusters.get(&id.cluster) {
            *st.owner_jobs.entry(c.owner.clone()).or_insert(0) += 1;
            let by = uploader_of(&c.ad);
            for d in proc_uploads(&c.ad, &ad) {
                *st.upload_uses.entry((by.clone(), d)).or_insert(0) += 1;
            }
        }
        st.jobs.insert(id, Proc { status, entered: r.get(3)?, ad });
    }
    Ok(st)
}
