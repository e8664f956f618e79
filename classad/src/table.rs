//! The attribute table behind a [`ClassAd`](crate::ClassAd), and the
//! interner that lets every ad share one copy of each attribute name.
//!
//! Matchmaking looks up a handful of attributes in each of thousands of
//! ads, so a lookup must touch as little memory as possible: a small ad
//! (up to [`LINEAR_MAX`] attributes) is scanned by hash; a larger one has an
//! open-addressing index of 8-byte slots (hash tag and position), so a hit
//! reads one index line and one entry. Names are interned, so the entry's
//! name usually equals the looked-up name by pointer.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, RwLock};

use crate::ast::{AttrName, Expr, PassThrough};

/// Ads with at most this many attributes are scanned rather than indexed.
pub const LINEAR_MAX: usize = 8;

/// Ordered attributes with a hash index.
#[derive(Clone, Debug, Default)]
pub(crate) struct Table {
    entries: Vec<(AttrName, Expr)>,
    /// Slot: high 32 bits the name hash's high half, low 32 bits the
    /// position + 1; 0 is empty. Empty when the ad is small.
    index: Vec<u64>,
}

impl Table {
    /// An empty table (usable in constants).
    pub(crate) const EMPTY: Table = Table { entries: Vec::new(), index: Vec::new() };

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    pub(crate) fn position(&self, name: &AttrName) -> Option<usize> {
        let h = name.hash_value();
        if self.index.is_empty() {
            return self.entries.iter().position(|(k, _)| k.hash_value() == h && k == name);
        }
        let mask = self.index.len() - 1;
        let tag = h >> 32;
        let mut pos = h as usize & mask;
        loop {
            let slot = self.index[pos];
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag {
                let i = (slot as u32 - 1) as usize;
                if self.entries[i].0 == *name {
                    return Some(i);
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /// The expression bound to `name`: [`Table::position`] without the
    /// second bounds check, for the matchmaking hot path.
    #[inline]
    pub(crate) fn get(&self, name: &AttrName) -> Option<&Expr> {
        let h = name.hash_value();
        if self.index.is_empty() {
            return self.entries.iter().find(|(k, _)| k == name).map(|(_, e)| e);
        }
        let mask = self.index.len() - 1;
        let tag = h >> 32;
        let mut pos = h as usize & mask;
        loop {
            let slot = *self.index.get(pos)?;
            if slot == 0 {
                return None;
            }
            if slot >> 32 == tag {
                let (k, e) = self.entries.get((slot as u32 - 1) as usize)?;
                if k == name {
                    return Some(e);
                }
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Hints the CPU to fetch the index slot `name` would start probing at
    /// (or, for a small table, its entries).
    #[inline]
    pub(crate) fn prefetch_slot(&self, name: &AttrName) {
        if self.index.is_empty() {
            prefetch(self.entries.as_ptr());
        } else {
            let pos = name.hash_value() as usize & (self.index.len() - 1);
            prefetch(self.index.as_ptr().wrapping_add(pos));
        }
    }

    /// Hints the CPU to fetch the entry `name`'s first probed slot points
    /// at (best once that slot is in cache).
    #[inline]
    pub(crate) fn prefetch_entry(&self, name: &AttrName) {
        if let Some(&slot) =
            self.index.get(name.hash_value() as usize & self.index.len().wrapping_sub(1))
            && slot != 0
        {
            prefetch(self.entries.as_ptr().wrapping_add((slot as u32 - 1) as usize));
        }
    }

    pub(crate) fn get_index(&self, i: usize) -> Option<(&AttrName, &Expr)> {
        self.entries.get(i).map(|(k, v)| (k, v))
    }

    pub(crate) fn get_mut(&mut self, name: &AttrName) -> Option<&mut Expr> {
        let i = self.position(name)?;
        Some(&mut self.entries[i].1)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&AttrName, &Expr)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Appends a name known not to be present.
    pub(crate) fn push(&mut self, name: AttrName, expr: Expr) {
        self.entries.push((name, expr));
        let n = self.entries.len();
        if n > LINEAR_MAX {
            if self.index.len() < 2 * n {
                self.rebuild();
            } else {
                self.index_insert(n - 1);
            }
        }
    }

    pub(crate) fn remove(&mut self, name: &AttrName) -> Option<Expr> {
        let i = self.position(name)?;
        let (_, e) = self.entries.remove(i);
        self.rebuild();
        Some(e)
    }

    pub(crate) fn take_exprs(&mut self) -> impl Iterator<Item = Expr> {
        self.index = Vec::new();
        std::mem::take(&mut self.entries).into_iter().map(|(_, e)| e)
    }

    fn index_insert(&mut self, i: usize) {
        let mask = self.index.len() - 1;
        let h = self.entries[i].0.hash_value();
        let mut pos = h as usize & mask;
        while self.index[pos] != 0 {
            pos = (pos + 1) & mask;
        }
        self.index[pos] = (h >> 32) << 32 | (i as u64 + 1);
    }

    fn rebuild(&mut self) {
        let n = self.entries.len();
        if n <= LINEAR_MAX {
            self.index = Vec::new();
            return;
        }
        self.index = vec![0u64; (4 * n).next_power_of_two()];
        for i in 0..n {
            self.index_insert(i);
        }
    }
}

/// How many distinct strings the interner keeps; past this, strings are
/// simply allocated (correct, only less shared).
const INTERN_MAX: usize = 1 << 16;
/// Only short string values are interned; names of any length are.
pub(crate) const INTERN_VALUE_MAX_LEN: usize = 32;

type Interned = HashMap<u64, Vec<Arc<str>>, BuildHasherDefault<PassThrough>>;

static INTERNER: RwLock<Option<(Interned, usize)>> = RwLock::new(None);

/// One shared copy of `s` (exact spelling), keyed by the caller's hash of it.
pub(crate) fn intern(s: &str, hash: u64) -> Arc<str> {
    if let Ok(guard) = INTERNER.read()
        && let Some((map, _)) = guard.as_ref()
        && let Some(found) = map.get(&hash).and_then(|v| v.iter().find(|x| &***x == s))
    {
        return found.clone();
    }
    let Ok(mut guard) = INTERNER.write() else { return s.into() };
    let (map, count) = guard.get_or_insert_with(Default::default);
    let bucket = map.entry(hash).or_default();
    if let Some(found) = bucket.iter().find(|x| &***x == s) {
        return found.clone();
    }
    let a: Arc<str> = s.into();
    if *count < INTERN_MAX {
        bucket.push(a.clone());
        *count += 1;
    }
    a
}

/// A string value: short ones are shared through the interner, so that
/// values repeated across many ads (`"X86_64"`, `"LINUX"`) are one copy.
pub(crate) fn intern_value(s: &str) -> Arc<str> {
    if s.len() <= INTERN_VALUE_MAX_LEN { intern(s, crate::ast::name_hash(s)) } else { s.into() }
}

/// A prefetch hint; it never faults and has no effect on the program's meaning.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint to the cache; it reads nothing the
    // program can observe and cannot fault, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p.cast::<i8>(), core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
