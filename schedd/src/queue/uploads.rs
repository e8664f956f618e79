//! Uploads (modules and spooled inputs): who uploaded what, quotas, and
//! freeing them when the last job that names them leaves.

use super::actor::*;
use super::ads::*;
use super::error::*;
use super::ops::*;
use super::txn::*;

use classad::{ClassAd, Expr, Value};
use rusqlite::params;

pub use andes_job::api::{Change, ChangeReport, Submit, SummaryRow, Targets, factor};
pub use andes_job::files::{SPOOLED_INPUT, module_digest, spooled_inputs};

impl Txn<'_, '_> {
    /// Records an upload of `size` bytes under `digest`, counted against
    /// `actor`'s quota: its bytes in the row (`data`), or none when they are in
    /// its file under the uploads directory. One already stored is left as it is.
    ///
    /// Each owner keeps their own reference to what they uploaded, counted
    /// against their own quota, even when another owner stored the same
    /// bytes: the bytes are kept once, but one user's upload never lets
    /// another name it, and the answer is the same whether or not anyone
    /// else had stored it.
    pub(crate) fn store_upload(
        &mut self,
        actor: &Actor,
        digest: &str,
        data: &[u8],
        size: u64,
    ) -> Result<Reply, QueueError> {
        let mine: bool = self
            .tx
            .prepare_cached("SELECT 1 FROM upload_refs WHERE owner = ?1 AND digest = ?2")?
            .exists([actor.name.as_str(), digest])?;
        if mine {
            // Put again: waiting for its submit, no longer released.
            self.tx
                .prepare_cached(
                    "UPDATE upload_refs SET stored = ?3, released = NULL
                     WHERE owner = ?1 AND digest = ?2",
                )?
                .execute(params![actor.name, digest, self.now])?;
            return Ok(Reply::Done);
        }
        self.check_upload_quota(actor, size)?;
        self.tx
            .prepare_cached(
                "INSERT INTO upload_refs (owner, digest, size, stored) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![actor.name, digest, size as i64, self.now])?;
        self.tx
            .prepare_cached(
                "INSERT OR IGNORE INTO modules (digest, data, uploader, size, stored)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![digest, data, actor.name, size as i64, self.now])?;
        Ok(Reply::Done)
    }

    /// Refuses a submitted ad that names an upload its submitter did not
    /// make ([`Queue::uploaded_by`]); an admin may name any stored upload.
    pub(crate) fn check_uploads(&mut self, actor: &Actor, ad: &ClassAd) -> Result<(), QueueError> {
        // A spooled input or module must be named as a literal string: that
        // is what is checked here and what the shadow reads.
        static NAMED: classad::Names<2> = classad::Names::new(["CmdDigest", SPOOLED_INPUT]);
        for a in NAMED.get() {
            if let Some(e) = ad.get(a)
                && !matches!(e, Expr::Lit(Value::Str(_)))
            {
                return Err(QueueError::Invalid(format!("{a} = {e}: expected a string")));
            }
        }
        for digest in job_uploads(ad) {
            let known = if actor.admin {
                self.tx
                    .prepare_cached("SELECT 1 FROM modules WHERE digest = ?1")?
                    .exists([&digest])?
            } else {
                self.tx
                    .prepare_cached("SELECT 1 FROM upload_refs WHERE digest = ?1 AND owner = ?2")?
                    .exists([digest.as_str(), actor.name.as_str()])?
            };
            if !known {
                let path = if ad
                    .get(classad::name!("CmdDigest"))
                    .and_then(Expr::as_literal)
                    .and_then(Value::as_str)
                    == Some(digest.as_str())
                {
                    "modules"
                } else {
                    "uploads"
                };
                return Err(QueueError::NotUploaded(format!(
                    "{digest} is not among {}'s uploads; PUT it to /v1/{path}/{digest} first",
                    actor.name
                )));
            }
        }
        Ok(())
    }

    /// Refuses an upload of `size` bytes that would take `actor` past the quota.
    pub(crate) fn check_upload_quota(
        &mut self,
        actor: &Actor,
        size: u64,
    ) -> Result<(), QueueError> {
        let (max_bytes, max_count) =
            (self.config.upload_quota_bytes, self.config.upload_quota_count);
        let held = |t: &mut Self| -> Result<(u64, u64), QueueError> {
            let (uploaded, count): (i64, i64) = t.tx.query_row(
                "SELECT COALESCE(SUM(size), 0), COUNT(*) FROM upload_refs WHERE owner = ?1",
                [actor.name.as_str()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let state = &*t.state;
            let kept = t.ledger.usage(&actor.name, || state.jobs_of(&actor.name));
            Ok((uploaded.max(0) as u64 + kept, count.max(0) as u64))
        };
        let (mut bytes_held, mut count) = held(self)?;
        if bytes_held + size > max_bytes || count >= max_count {
            // Released uploads are kept for a next submit only while the
            // room is not wanted: they go first, oldest first.
            let over = (bytes_held + size).saturating_sub(max_bytes);
            let extra = (count + 1).saturating_sub(max_count);
            if self.reclaim_uploads(&actor.name, over, extra)? {
                (bytes_held, count) = held(self)?;
            }
        }
        if bytes_held + size > max_bytes || count >= max_count {
            return Err(QueueError::Forbidden(format!(
                "{} keeps {count} uploads and {bytes_held} bytes in all in the spool (uploads, \
                 spooled outputs, checkpoints); {size} bytes more would pass the quota of \
                 {max_count} uploads or {max_bytes} bytes (SPOOL_QUOTA_PER_OWNER; uploads no \
                 queued job uses are removed after {} s, a job's outputs when it leaves)",
                actor.name, self.config.upload_grace
            )));
        }
        Ok(())
    }

    /// Removes `owner`'s released uploads that no queued job names, oldest
    /// first, until at least `bytes` bytes and `count` uploads are freed (or
    /// none is left); a removed upload's bytes go when nobody else keeps
    /// them. True when any went.
    pub(crate) fn reclaim_uploads(
        &mut self,
        owner: &str,
        bytes: u64,
        count: u64,
    ) -> Result<bool, QueueError> {
        let released: Vec<(String, i64)> = self
            .tx
            .prepare_cached(
                "SELECT digest, size FROM upload_refs WHERE owner = ?1 AND released IS NOT NULL
                 ORDER BY released, digest",
            )?
            .query_map([owner], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let (mut freed, mut gone) = (0u64, 0u64);
        for (digest, size) in released {
            if freed >= bytes && gone >= count {
                break;
            }
            if self.state.names_upload(owner, &digest) {
                continue;
            }
            self.tx
                .prepare_cached("DELETE FROM upload_refs WHERE owner = ?1 AND digest = ?2")?
                .execute([owner, digest.as_str()])?;
            self.forget_module_if_unkept(&digest)?;
            freed += size.max(0) as u64;
            gone += 1;
        }
        Ok(gone > 0)
    }

    /// Drops the stored bytes of `digest` when no owner keeps an upload of
    /// it and no queued job names it; its file goes after the commit.
    fn forget_module_if_unkept(&mut self, digest: &str) -> Result<(), QueueError> {
        let kept: bool = self
            .tx
            .prepare_cached("SELECT 1 FROM upload_refs WHERE digest = ?1")?
            .exists([digest])?;
        let named = self.state.upload_uses.keys().any(|(_, d)| d == digest);
        if !kept
            && !named
            && self.tx.execute("DELETE FROM modules WHERE digest = ?1", [digest])? > 0
        {
            self.batch.gone_uploads.push(digest.to_string());
        }
        Ok(())
    }

    /// A job that named `digests` left: those no other job of `uploader`
    /// names are released. A released upload stays the owner's for the
    /// upload grace, so that the same module submitted again is not sent
    /// again, but it holds no room: it goes as soon as the owner's quota
    /// needs the room ([`Txn::reclaim_uploads`]).
    pub(crate) fn release_uploads(
        &mut self,
        uploader: &str,
        digests: Vec<String>,
    ) -> Result<(), QueueError> {
        if digests.is_empty() {
            return Ok(());
        }
        let mut unused = Vec::new();
        for d in digests {
            let key = (uploader.to_string(), d);
            if let Some(n) = self.state.upload_uses.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.state.upload_uses.remove(&key);
                    unused.push(key.1);
                }
            }
        }
        for d in unused {
            // The grace runs from the release.
            self.tx
                .prepare_cached(
                    "UPDATE upload_refs SET released = ?3, stored = ?3
                     WHERE owner = ?1 AND digest = ?2",
                )?
                .execute(params![uploader, d, self.now])?;
        }
        Ok(())
    }
}
