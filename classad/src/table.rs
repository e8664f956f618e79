//! The attribute table behind a [`ClassAd`](crate::ClassAd), and the
//! interner that lets every ad share one copy of each attribute name.
//!
//! Matchmaking looks up a handful of attributes in each of thousands of
//! ads, so a lookup must touch as little memory as possible. A small ad (up
//! to [`LINEAR_MAX`] attributes) is scanned. A larger one has an index of
//! cache-line [`Bucket`]s of four slots, at most half full, so that nearly
//! every name is found in its home bucket: one cache line. A slot holds the
//! name's identity (from the interner), the entry's position, and, when the
//! attribute is a literal, its value or, for a string, the string's address
//! and a tag of its text. So a lookup compares identities, never names, and
//! a lookup of a literal reads that one line and nothing else.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, PoisonError, RwLock};

use crate::ast::{AttrName, Expr, ID_MASK, PassThrough};
use crate::text::NameText;
use crate::value::Value;

/// Ads with at most this many attributes are scanned rather than indexed.
pub const LINEAR_MAX: usize = 8;

/// Ordered attributes with an index.
#[derive(Clone, Debug, Default)]
pub(crate) struct Table {
    entries: Vec<(AttrName, Expr)>,
    /// Open addressing over buckets (a name's home bucket is its hash
    /// modulo the power-of-two length; a full bucket overflows into the
    /// next), with at most half the slots used. Empty when the ad is small.
    index: Vec<Bucket>,
}

/// Four slots in one cache line: their keys, positions and values apart,
/// so that the keys are one 16-byte group.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Bucket {
    keys: [u32; 4],
    pos: [u32; 4],
    vals: [u64; 4],
}

/// What a slot says about the attribute's expression (0: the slot is empty).
pub(crate) mod kind {
    /// Not a literal scalar: read the entry.
    pub const EXPR: u32 = 1;
    /// `undefined`.
    pub const UNDEF: u32 = 2;
    /// `error`.
    pub const ERROR: u32 = 3;
    /// A boolean; `val` is 0 or 1.
    pub const BOOL: u32 = 4;
    /// An integer; `val` is its bits.
    pub const INT: u32 = 5;
    /// A real; `val` is its bits.
    pub const REAL: u32 = 6;
    /// A string; `val` is the address of its text, the key's tag
    /// [`super::str_tag`] of it. The text itself is in the entry.
    pub const STR: u32 = 7;
}

/// One index slot, as read from its bucket: `key` is the name's identity
/// (bits 0-19), the expression's [`kind`] (bits 20-23) and, for a string,
/// its [`str_tag`] (bits 24-31); 0 is an empty slot.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Slot {
    key: u32,
    pos: u32,
    val: u64,
}

/// The identity bits of a slot key (identities are at most [`INTERN_MAX`]).
const SLOT_ID_MASK: u32 = (1 << 20) - 1;
const _: () = assert!(INTERN_MAX < SLOT_ID_MASK as usize && SLOT_ID_MASK <= ID_MASK);

impl Slot {
    /// The slot for entry `pos`, binding `name` to `expr`.
    fn of(name: &AttrName, expr: &Expr, pos: usize) -> Slot {
        let (kind, tag, val) = match expr {
            Expr::Lit(v) => match v {
                Value::Undefined => (kind::UNDEF, 0, 0),
                Value::Error => (kind::ERROR, 0, 0),
                Value::Bool(b) => (kind::BOOL, 0, *b as u64),
                Value::Int(i) => (kind::INT, 0, *i as u64),
                Value::Real(r) => (kind::REAL, 0, r.to_bits()),
                Value::Str(s) => (kind::STR, str_tag(s), str_addr(s)),
                Value::List(_) | Value::Ad(_) => (kind::EXPR, 0, 0),
            },
            _ => (kind::EXPR, 0, 0),
        };
        Slot { key: name.id() | kind << 20 | (tag as u32) << 24, pos: pos as u32, val }
    }

    /// The [`kind`] of the attribute's expression.
    #[inline]
    pub(crate) fn kind(self) -> u32 {
        self.key >> 20 & 15
    }

    /// The inline payload (see [`kind`]).
    #[inline]
    pub(crate) fn val(self) -> u64 {
        self.val
    }

    /// A string's [`str_tag`].
    #[inline]
    pub(crate) fn tag(self) -> u8 {
        (self.key >> 24) as u8
    }

    /// The entry's position in the table.
    #[inline]
    pub(crate) fn pos(self) -> usize {
        self.pos as usize
    }
}

/// The address of a string's text, to compare strings by identity: two
/// live strings at the same address are the same string.
#[inline]
pub(crate) fn str_addr(s: &Arc<str>) -> u64 {
    Arc::as_ptr(s).cast::<u8>() as usize as u64
}

/// A one-byte summary of a string's text, the same for strings equal
/// ignoring ASCII case: strings with different tags differ.
#[inline]
pub(crate) fn str_tag(s: &str) -> u8 {
    let b = s.as_bytes();
    let Some(&last) = b.last() else { return 0 };
    let x = (b.len() as u32)
        ^ (b[0].to_ascii_lowercase() as u32) << 8
        ^ (b[b.len() / 2].to_ascii_lowercase() as u32) << 16
        ^ (last.to_ascii_lowercase() as u32) << 24;
    (x.wrapping_mul(0x9E37_79B1) >> 24) as u8
}

impl Table {
    /// An empty table (usable in constants).
    pub(crate) const EMPTY: Table = Table { entries: Vec::new(), index: Vec::new() };

    /// An empty table with room for `n` bindings.
    pub(crate) fn with_capacity(n: usize) -> Table {
        Table { entries: Vec::with_capacity(n), index: Vec::new() }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The slot binding `name`, if any (for a small table, made on the spot).
    #[inline]
    pub(crate) fn probe(&self, name: &AttrName) -> Option<Slot> {
        if self.index.is_empty() {
            return self.probe_small(name);
        }
        let (b, k) = self.find(name)?;
        let bucket = &self.index[b];
        Some(Slot { key: bucket.keys[k], pos: bucket.pos[k], val: bucket.vals[k] })
    }

    #[inline(never)]
    fn probe_small(&self, name: &AttrName) -> Option<Slot> {
        let i = self.entries.iter().position(|(k, _)| k == name)?;
        Some(Slot::of(name, &self.entries[i].1, i))
    }

    /// Where in the (non-empty) index `name`'s slot is: bucket and slot.
    #[inline]
    fn find(&self, name: &AttrName) -> Option<(usize, usize)> {
        let id = name.id();
        if id == 0 {
            return self.find_unidentified(name);
        }
        let mask = self.index.len() - 1;
        let mut b = name.hash_value() as usize & mask;
        loop {
            let keys = self.index[b].keys;
            // Bit k: slot k holds `id`; an empty slot (key 0) never does.
            let hit = (keys[0] & SLOT_ID_MASK == id) as u32
                | ((keys[1] & SLOT_ID_MASK == id) as u32) << 1
                | ((keys[2] & SLOT_ID_MASK == id) as u32) << 2
                | ((keys[3] & SLOT_ID_MASK == id) as u32) << 3;
            if hit != 0 {
                return Some((b, hit.trailing_zeros() as usize));
            }
            // Slots fill in order and are never emptied (removal rebuilds),
            // so a bucket with room ends the search.
            if keys[3] == 0 {
                return None;
            }
            b = (b + 1) & mask;
        }
    }

    /// [`Table::find`] for a name without an identity, which only a name
    /// without one can equal: compared by text.
    #[cold]
    #[inline(never)]
    fn find_unidentified(&self, name: &AttrName) -> Option<(usize, usize)> {
        let mask = self.index.len() - 1;
        let mut b = name.hash_value() as usize & mask;
        loop {
            let bucket = &self.index[b];
            for k in 0..4 {
                let key = bucket.keys[k];
                if key == 0 {
                    return None;
                }
                if key & SLOT_ID_MASK == 0 && self.entry_is(bucket.pos[k] as usize, name) {
                    return Some((b, k));
                }
            }
            b = (b + 1) & mask;
        }
    }

    /// [`Table::find`], or else the first empty slot on `name`'s probe
    /// path (where it would go).
    #[inline]
    fn find_or_room(&self, name: &AttrName) -> Result<(usize, usize), (usize, usize)> {
        let id = name.id();
        let mask = self.index.len() - 1;
        let mut b = name.hash_value() as usize & mask;
        loop {
            let bucket = &self.index[b];
            for k in 0..4 {
                let key = bucket.keys[k];
                if key == 0 {
                    return Err((b, k));
                }
                if key & SLOT_ID_MASK == id
                    && (id != 0 || self.entry_is(bucket.pos[k] as usize, name))
                {
                    return Ok((b, k));
                }
            }
            b = (b + 1) & mask;
        }
    }

    #[cold]
    fn entry_is(&self, i: usize, name: &AttrName) -> bool {
        self.entries.get(i).is_some_and(|(k, _)| k == name)
    }

    #[inline]
    pub(crate) fn position(&self, name: &AttrName) -> Option<usize> {
        self.probe(name).map(Slot::pos)
    }

    /// The expression bound to `name`.
    #[inline]
    pub(crate) fn get(&self, name: &AttrName) -> Option<&Expr> {
        if self.index.is_empty() {
            return self.entries.iter().find(|(k, _)| k == name).map(|(_, e)| e);
        }
        self.expr_at(self.probe(name)?.pos())
    }

    /// The expression of entry `i`.
    #[inline]
    pub(crate) fn expr_at(&self, i: usize) -> Option<&Expr> {
        self.entries.get(i).map(|(_, e)| e)
    }

    /// Hints the CPU to fetch `name`'s home bucket (or, for a small table,
    /// its entries).
    #[inline]
    pub(crate) fn prefetch_slot(&self, name: &AttrName) {
        self.prefetch_slots(&[name])
    }

    /// [`Table::prefetch_slot`] for each of `names`.
    #[inline]
    pub(crate) fn prefetch_slots(&self, names: &[&AttrName]) {
        if self.index.is_empty() {
            prefetch(self.entries.as_ptr());
            return;
        }
        let base = self.index.as_ptr();
        let mask = self.index.len() - 1;
        for n in names {
            prefetch(base.wrapping_add(n.hash_value() as usize & mask));
        }
    }

    /// Hints the CPU to fetch the entry of `name`, if its home bucket (best
    /// in cache by now) binds it to an expression rather than a literal.
    #[inline]
    pub(crate) fn prefetch_entry(&self, name: &AttrName) {
        if self.index.is_empty() {
            return;
        }
        let bucket = &self.index[name.hash_value() as usize & (self.index.len() - 1)];
        for k in 0..4 {
            let key = bucket.keys[k];
            if key & SLOT_ID_MASK == name.id() && key >> 20 & 15 == kind::EXPR {
                prefetch(self.entries.as_ptr().wrapping_add(bucket.pos[k] as usize));
            }
        }
    }

    pub(crate) fn get_index(&self, i: usize) -> Option<(&AttrName, &Expr)> {
        self.entries.get(i).map(|(k, v)| (k, v))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&AttrName, &Expr)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Binds `name` to `expr`: an existing binding (found case-insensitively)
    /// keeps its spelling and position; a new one goes last. One probe finds
    /// either the name or where it goes.
    pub(crate) fn insert(&mut self, name: AttrName, expr: Expr) {
        if self.index.is_empty() {
            if let Some(i) = self.entries.iter().position(|(k, _)| *k == name) {
                self.entries[i].1 = expr;
                return;
            }
            self.entries.push((name, expr));
            if self.entries.len() > LINEAR_MAX {
                self.rebuild();
            }
            return;
        }
        match self.find_or_room(&name) {
            Ok((b, k)) => {
                let i = self.index[b].pos[k] as usize;
                self.entries[i].1 = expr;
                let slot = Slot::of(&self.entries[i].0, &self.entries[i].1, i);
                self.index[b].set(k, slot);
            }
            // Rebuilt when more than half the slots would be used.
            Err(_) if 2 * self.index.len() <= self.entries.len() => {
                self.entries.push((name, expr));
                self.rebuild();
            }
            Err((b, k)) => {
                let i = self.entries.len();
                self.index[b].set(k, Slot::of(&name, &expr, i));
                self.entries.push((name, expr));
            }
        }
    }

    pub(crate) fn remove(&mut self, name: &AttrName) -> Option<Expr> {
        let i = self.position(name)?;
        let (_, e) = self.entries.remove(i);
        self.rebuild();
        Some(e)
    }

    /// Removes every entry whose name `gone` says, in one pass and one
    /// rebuild of the index (removing them one by one rebuilds it each time).
    pub(crate) fn remove_where(&mut self, mut gone: impl FnMut(&AttrName) -> bool) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| !gone(k));
        let removed = before - self.entries.len();
        if removed > 0 {
            self.rebuild();
        }
        removed
    }

    pub(crate) fn take_exprs(&mut self) -> impl Iterator<Item = Expr> {
        self.index = Vec::new();
        std::mem::take(&mut self.entries).into_iter().map(|(_, e)| e)
    }

    fn index_insert(&mut self, i: usize) {
        let mask = self.index.len() - 1;
        let (name, expr) = &self.entries[i];
        let slot = Slot::of(name, expr, i);
        let mut b = name.hash_value() as usize & mask;
        loop {
            if let Some(k) = self.index[b].keys.iter().position(|&key| key == 0) {
                self.index[b].set(k, slot);
                return;
            }
            b = (b + 1) & mask;
        }
    }

    fn rebuild(&mut self) {
        let n = self.entries.len();
        if n <= LINEAR_MAX {
            self.index = Vec::new();
            return;
        }
        // Four slots per entry (so half full, at most, until the next
        // rebuild at twice as many entries), four slots per bucket. An index
        // of the right size already (a removal) is cleared, not reallocated.
        let size = n.next_power_of_two();
        if self.index.len() == size {
            self.index.fill(Bucket::default());
        } else {
            self.index = vec![Bucket::default(); size];
        }
        for i in 0..n {
            self.index_insert(i);
        }
    }
}

impl Bucket {
    fn set(&mut self, k: usize, slot: Slot) {
        self.keys[k] = slot.key;
        self.pos[k] = slot.pos;
        self.vals[k] = slot.val;
    }
}

/// How many distinct names the interner keeps (and how many distinct
/// values the value interner keeps); past this, texts are simply allocated
/// (correct, only less shared).
const INTERN_MAX: usize = 1 << 16;
/// Only names this long or shorter are interned: a longer one (which no
/// daemon's own ads have) is allocated and compared by its text.
pub(crate) const INTERN_NAME_MAX_LEN: usize = 256;
/// The bytes of names' text the interner keeps, in all, for the life of the
/// process: names come from anyone's ads, and what is interned is never
/// given back, so this (with [`INTERN_MAX`]) is all any sender can make a
/// daemon keep through names, however many ads it sends.
pub(crate) const INTERN_NAME_BYTES: usize = 4 << 20;
/// Only short string values are interned.
pub(crate) const INTERN_VALUE_MAX_LEN: usize = 32;

/// Texts by case-insensitive hash.
type Map<E> = HashMap<u64, Vec<E>, BuildHasherDefault<PassThrough>>;

/// The names interned: each spelling with the identity of its case-folded
/// text; how many; their bytes; the last identity given.
#[derive(Default)]
struct Names {
    map: Map<(&'static str, u32)>,
    count: usize,
    bytes: usize,
    last: u32,
}

/// The values interned, and how many.
type Values = (Map<Arc<str>>, usize);

static NAMES: RwLock<Option<Names>> = RwLock::new(None);
static VALUES: RwLock<Option<Values>> = RwLock::new(None);

/// How many texts a thread keeps at hand (of each kind): a direct-mapped
/// cache, one text a slot, the slot picked by the text's hash.
const RECENT_SLOTS: usize = 1024;

/// A thread's cache of texts it got from an interner, one a slot, each
/// with its hash. Direct-mapped: a text whose slot another took is looked up
/// in the interner again (and takes the slot back), so a lookup reads one
/// slot and never allocates.
struct Recent<E>(Vec<Option<(u64, E)>>);

impl<E: Clone> Recent<E> {
    const fn new() -> Self {
        Recent(Vec::new())
    }

    /// What the slot of `hash` holds, when `is` accepts it.
    #[inline]
    fn find(&self, hash: u64, is: impl Fn(&E) -> bool) -> Option<E> {
        match self.0.get(hash as usize % RECENT_SLOTS)? {
            Some((h, e)) if *h == hash && is(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// Puts `e` in the slot of `hash` (made on the thread's first use).
    fn keep(&mut self, hash: u64, e: E) {
        if self.0.is_empty() {
            self.0.resize_with(RECENT_SLOTS, || None);
        }
        self.0[hash as usize % RECENT_SLOTS] = Some((hash, e));
    }
}

thread_local! {
    /// The spellings this thread got from the name interner, with the
    /// whole `meta` word of their names (identity, quoting, [`Special`]): a
    /// daemon's threads make the same few hundred names all the time, and
    /// the shared map's lock, which every thread takes, costs more than the
    /// lookup. What a thread holds here the interner holds too (identities
    /// never change), so a copy is never stale.
    ///
    /// [`Special`]: crate::ast::Special
    static RECENT_NAMES: std::cell::RefCell<Recent<(&'static str, u32)>> =
        const { std::cell::RefCell::new(Recent::new()) };
    /// The same for the string values this thread interned.
    static RECENT_VALUES: std::cell::RefCell<Recent<Arc<str>>> =
        const { std::cell::RefCell::new(Recent::new()) };
}

/// What this thread holds in `recent` for `hash` that `is` accepts.
#[inline]
fn recent_find<E: Clone>(
    recent: &'static std::thread::LocalKey<std::cell::RefCell<Recent<E>>>,
    hash: u64,
    is: impl Fn(&E) -> bool,
) -> Option<E> {
    recent.try_with(|r| r.try_borrow().ok()?.find(hash, is)).ok()?
}

/// Keeps `e` in this thread's `recent`.
fn recent_keep<E: Clone>(
    recent: &'static std::thread::LocalKey<std::cell::RefCell<Recent<E>>>,
    hash: u64,
    e: E,
) {
    let _ = recent.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            r.keep(hash, e)
        }
    });
}

/// A name's text, keyed by the caller's case-insensitive hash of it, and
/// the identity of its case-folded text: from this thread's copies when it
/// has one, else from the interner. An interned text is kept for the life
/// of the process and shared as a plain pointer; any other is allocated.
///
/// Identities are given to texts only while the interner has room (in
/// count and in bytes, and for names of at most [`INTERN_NAME_MAX_LEN`]
/// bytes), and one is never given to a text whose case-folded form already
/// has one. So two non-zero identities are equal exactly when the texts are
/// equal ignoring ASCII case, and a text that gets 0 equals no text with an
/// identity: no equal text was in the interner when it was made, nor can be
/// added later (what did not fit then never fits: the interner only grows,
/// and equal texts have equal lengths). The identity's [`crate::ast::QUOTED`]
/// bit tells whether the text, as a name, needs quotes.
///
/// What it gives is the name's whole `meta` word: the identity with
/// `special` (the name's [`crate::ast::Special`] bits, asked for only when
/// the thread has not seen the spelling) or'd in.
#[inline]
pub(crate) fn intern(s: &str, hash: u64, special: impl FnOnce() -> u32) -> (NameText, u32) {
    match recent_find(&RECENT_NAMES, hash, |(x, _)| *x == s) {
        Some((t, meta)) => (NameText::from_static(t), meta),
        None => intern_new(s, hash, special()),
    }
}

/// [`intern`] of a spelling this thread does not have at hand.
#[cold]
#[inline(never)]
fn intern_new(s: &str, hash: u64, special: u32) -> (NameText, u32) {
    match intern_shared(s, hash) {
        Ok((t, id)) => {
            let meta = id | special;
            if id & crate::ast::ID_MASK != 0 {
                recent_keep(&RECENT_NAMES, hash, (t, meta));
            }
            (NameText::from_static(t), meta)
        }
        Err((t, id)) => (t, id | special),
    }
}

/// [`intern`] through the interner shared by every thread: the kept text,
/// or (`Err`) a text of its own when the name is not kept.
fn intern_shared(s: &str, hash: u64) -> Result<(&'static str, u32), (NameText, u32)> {
    if s.len() > INTERN_NAME_MAX_LEN {
        // Never interned, nor any text equal to it: no lock to take.
        return Err((NameText::from_arc(s.into()), quoted_bit(s)));
    }
    let found = |n: &Names| n.map.get(&hash).and_then(|v| v.iter().find(|(x, _)| *x == s).copied());
    // Without the write lock while the text is there or cannot be added.
    let seen = match NAMES.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
        Some(names) => match found(names) {
            Some(hit) => Ok(hit),
            None => Err(refused(names, s, hash)),
        },
        None => Err(None),
    };
    match seen {
        Ok(hit) => Ok(hit),
        Err(Some(id)) => Err((NameText::from_arc(s.into()), id)),
        Err(None) => {
            let mut guard = NAMES.write().unwrap_or_else(PoisonError::into_inner);
            let names = guard.get_or_insert_with(Names::default);
            match found(names) {
                Some(hit) => Ok(hit),
                None => match refused(names, s, hash) {
                    Some(id) => Err((NameText::from_arc(s.into()), id)),
                    None => Ok(add_name(names, s, hash)),
                },
            }
        }
    }
}

/// The identity `s` (not interned in this spelling) has without being kept,
/// when the interner has no room for it: its case-folded form's, else none.
fn refused(names: &Names, s: &str, hash: u64) -> Option<u32> {
    if names.count < INTERN_MAX
        && s.len() <= INTERN_NAME_MAX_LEN
        && names.bytes + s.len() <= INTERN_NAME_BYTES
    {
        return None;
    }
    Some(folded_id(names, s, hash).unwrap_or_else(|| quoted_bit(s)))
}

/// The identity of a spelling of `s` that differs only in case, if any.
fn folded_id(names: &Names, s: &str, hash: u64) -> Option<u32> {
    names.map.get(&hash)?.iter().find(|(x, _)| x.eq_ignore_ascii_case(s)).map(|(_, id)| *id)
}

/// Interns `s` (not interned in this spelling; [`refused`] found room):
/// its kept text and identity, its case-folded form's when it has one.
fn add_name(names: &mut Names, s: &str, hash: u64) -> (&'static str, u32) {
    let id = folded_id(names, s, hash).unwrap_or_else(|| {
        // Whether a name needs quotes does not depend on its case: found once.
        names.last += 1;
        names.last | quoted_bit(s)
    });
    // Kept for the life of the process: bounded by `refused`.
    let kept: &'static str = Box::leak(Box::<str>::from(s));
    names.map.entry(hash).or_default().push((kept, id));
    names.count += 1;
    names.bytes += s.len();
    (kept, id)
}

/// [`crate::ast::QUOTED`] when `s` as a name needs quotes, else 0.
fn quoted_bit(s: &str) -> u32 {
    if crate::ast::quoting_needed(s) { crate::ast::QUOTED } else { 0 }
}

/// A string value: short ones are shared through the value interner, so
/// that values repeated across many ads (`"X86_64"`, `"LINUX"`) are one copy.
pub(crate) fn intern_value(s: &str) -> Arc<str> {
    if s.len() > INTERN_VALUE_MAX_LEN {
        return s.into();
    }
    let hash = crate::ast::name_hash(s);
    if let Some(a) = recent_find(&RECENT_VALUES, hash, |x| &**x == s) {
        return a;
    }
    let found =
        |m: &Map<Arc<str>>| m.get(&hash).and_then(|v| v.iter().find(|x| &***x == s).cloned());
    let hit =
        VALUES.read().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(|v| found(&v.0));
    let a = match hit {
        Some(a) => a,
        None => {
            let mut guard = VALUES.write().unwrap_or_else(PoisonError::into_inner);
            let (map, count) = guard.get_or_insert_with(Default::default);
            match found(map) {
                Some(a) => a,
                None if *count >= INTERN_MAX => return s.into(),
                None => {
                    let a: Arc<str> = s.into();
                    map.entry(hash).or_default().push(a.clone());
                    *count += 1;
                    a
                }
            }
        }
    };
    recent_keep(&RECENT_VALUES, hash, a.clone());
    a
}

/// What the process's name interner keeps, for good: see [`interned`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interned {
    /// Distinct spellings kept (at most 65,536).
    pub names: usize,
    /// Their text's bytes (at most 4 MiB).
    pub bytes: usize,
}

/// What the process's name interner keeps for the life of the process:
/// every attribute name of at most 256 bytes is kept once, while there is
/// room (65,536 spellings, 4 MiB of text), so that names compare by a
/// number and copy as a pointer. Past that, or for a longer name, a name
/// is allocated like any string and freed with its last copy.
pub fn interned() -> Interned {
    NAMES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or_else(Interned::default, |n| Interned { names: n.count, bytes: n.bytes })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Table {
        /// Every entry is found through the index, in a slot that says
        /// what the entry holds; every used slot is an entry's.
        fn check(&self) {
            for (i, (name, expr)) in self.entries.iter().enumerate() {
                let slot = self.probe(name).expect("every entry is indexed");
                assert_eq!(slot.pos(), i, "{name}");
                let fresh = Slot::of(name, expr, i);
                assert_eq!((slot.key, slot.val), (fresh.key, fresh.val), "{name}");
            }
            if !self.index.is_empty() {
                let used = self.index.iter().flat_map(|b| b.keys).filter(|&k| k != 0).count();
                assert_eq!(used, self.entries.len());
                assert!(2 * used <= 4 * self.index.len(), "at most half full");
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(usize, i64, bool),
        Remove(usize),
        /// Every name whose number is a multiple of the given one, at once.
        RemoveWhere(usize),
    }

    /// Names with case variants, and more of them than a small table holds.
    fn names() -> Vec<String> {
        let mut v: Vec<String> = (0..40).map(|i| format!("Attr{i}")).collect();
        v.extend((0..10).map(|i| format!("ATTR{i}")));
        v
    }

    proptest! {
        #[test]
        fn the_index_agrees_with_the_entries(
            ops in prop::collection::vec(
                prop_oneof![
                    4 => (0usize..50, -3i64..3, any::<bool>()).prop_map(|(n, v, s)| Op::Insert(n, v, s)),
                    1 => (0usize..50).prop_map(Op::Remove),
                    1 => (2usize..12).prop_map(Op::RemoveWhere),
                ],
                0..120,
            )
        ) {
            let names = names();
            let mut ad = Table::default();
            let mut model: Vec<(String, Value)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(n, v, as_str) => {
                        let value = if as_str { Value::string(format!("s{v}")) } else { Value::Int(v) };
                        ad.insert(AttrName::new(&names[n]), Expr::Lit(value.clone()));
                        match model.iter_mut().find(|(k, _)| k.eq_ignore_ascii_case(&names[n])) {
                            Some(slot) => slot.1 = value,
                            None => model.push((names[n].clone(), value)),
                        }
                    }
                    Op::Remove(n) => {
                        let had = model.iter().position(|(k, _)| k.eq_ignore_ascii_case(&names[n]));
                        let removed = ad.remove(&AttrName::new(&names[n]));
                        prop_assert_eq!(removed.is_some(), had.is_some());
                        if let Some(i) = had {
                            model.remove(i);
                        }
                    }
                    Op::RemoveWhere(m) => {
                        let gone: Vec<String> =
                            names.iter().enumerate().filter(|(i, _)| i % m == 0).map(|(_, n)| n.clone()).collect();
                        let is_gone = |k: &str| gone.iter().any(|g| g.eq_ignore_ascii_case(k));
                        let before = model.len();
                        model.retain(|(k, _)| !is_gone(k));
                        let removed = ad.remove_where(|k| is_gone(k.as_str()));
                        prop_assert_eq!(removed, before - model.len());
                    }
                }
                ad.check();
                prop_assert_eq!(ad.len(), model.len());
                for n in &names {
                    let want = model.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v);
                    let got = ad.get(&AttrName::new(n)).and_then(Expr::as_literal);
                    prop_assert_eq!(got, want, "{}", n);
                }
                for (i, (k, v)) in ad.iter().enumerate() {
                    prop_assert_eq!(k.as_str(), model[i].0.as_str());
                    prop_assert_eq!(v.as_literal(), Some(&model[i].1));
                }
            }
        }
    }

    /// Each thread keeps its own copies of what it interned: a name made on
    /// one thread, in any case, has the identity the same name has on
    /// another, and a thread whose copies filled up and started afresh still
    /// agrees with the rest.
    #[test]
    fn threads_agree_on_every_identity() {
        let name = |t: usize, i: usize| {
            let text = format!("ThreadsAgree{i}");
            if (t + i).is_multiple_of(2) { text } else { text.to_ascii_uppercase() }
        };
        let ids = |t: usize| -> Vec<u32> {
            // More names than a thread's cache has slots: each slot taken
            // over and over, then the first names again.
            (0..RECENT_SLOTS * 4 + 100)
                .chain(0..50)
                .map(|i| AttrName::new(&name(t, i)).id())
                .collect()
        };
        let here = ids(0);
        assert!(here.iter().all(|&id| id != 0));
        let there: Vec<Vec<u32>> = std::thread::scope(|s| {
            let h: Vec<_> = (1..4).map(|t| s.spawn(move || ids(t))).collect();
            h.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for other in there {
            assert_eq!(other, here);
        }
    }

    /// The name hash lowercases eight bytes at once: for every byte at
    /// every position, exactly as `to_ascii_lowercase` does, so names that
    /// differ in ASCII case alone hash alike and no others are folded.
    #[test]
    fn names_hash_alike_exactly_when_they_differ_in_ascii_case_alone() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut word = *b"zZ_09aA~";
                word[at] = b;
                let want = u64::from_le_bytes(word.map(|c| c.to_ascii_lowercase()));
                assert_eq!(
                    crate::ast::ascii_lower8(u64::from_le_bytes(word)),
                    want,
                    "byte {b:#x} at {at}"
                );
            }
        }
        let h = crate::ast::name_hash;
        assert_eq!(h("RequestMemory"), h("requestmemory"));
        assert_eq!(h("TransferOutputRemaps"), h("TRANSFEROUTPUTREMAPS"));
        assert_eq!(h("É_x"), h("É_X"));
        assert_ne!(h("é_x"), h("É_x"));
        assert_ne!(h("ab"), h("ab\0"));
        assert_ne!(h("RequestMemory"), h("RequestMemorx"));
        assert_ne!(h(""), h("\0"));
    }

    /// Names a sender chose to share one place in every table, as it could
    /// under a hash it can compute (here, under a key it knows), are spread
    /// over this process's tables as any names are: its key is its own.
    #[test]
    fn names_chosen_to_collide_under_a_known_key_are_spread_here() {
        use crate::ast::{name_hash, name_hash_keyed};
        let known = (0, 0);
        // A table of 4,096 places, as an ad's index or the interner's map.
        let place = |h: u64| h & 0xfff;
        let target = place(name_hash_keyed(known, "x0"));
        let chosen: Vec<String> = (0u64..)
            .map(|i| format!("x{i}"))
            .filter(|s| place(name_hash_keyed(known, s)) == target)
            .take(64)
            .collect();
        assert!(chosen.iter().all(|s| place(name_hash_keyed(known, s)) == target));
        let here: std::collections::HashSet<u64> =
            chosen.iter().map(|s| place(name_hash(s))).collect();
        assert!(here.len() > 48, "64 chosen names in {} places of 4,096", here.len());
        // Every table of the crate places names by `name_hash`: an ad's
        // index by the hash an `AttrName` carries, the interner by its own.
        let name = AttrName::new(&chosen[1]);
        assert_eq!(name.hash_value(), name_hash(&chosen[1]) as u32);
    }

    /// Every way of naming an attribute (text, owned text, a name made
    /// once by `name!`, a `Names` table) finds and removes what the others
    /// do, in any case.
    #[test]
    fn a_name_made_once_finds_what_its_text_finds() {
        static TABLE: crate::Names<2> = crate::Names::new(["JOBSTATUS", "Missing"]);
        let mut ad = crate::parse_ad("[ JobStatus = 2; Owner = \"u\" ]").unwrap();
        let text = String::from("jobstatus");
        let made = AttrName::new("JobStatus");
        let want = ad.get("JobStatus").cloned();
        assert!(want.is_some());
        assert_eq!(ad.get(&text).cloned(), want);
        assert_eq!(ad.get(&made).cloned(), want);
        assert_eq!(ad.get(crate::name!("jobSTATUS")).cloned(), want);
        assert_eq!(ad.get(&TABLE.get()[0]).cloned(), want);
        assert!(!ad.contains(&TABLE.get()[1]));
        assert_eq!(ad.eval_attr(crate::name!("Owner")), Value::Str("u".into()));
        assert_eq!(ad.remove_all(TABLE.get()), 1);
        assert!(ad.get("JobStatus").is_none() && ad.contains(crate::name!("owner")));
        assert_eq!(TABLE.texts(), &["JOBSTATUS", "Missing"]);
    }

    #[test]
    fn string_tags_ignore_case() {
        for (a, b) in [("X86_64", "x86_64"), ("LINUX", "linux"), ("", ""), ("a", "A")] {
            assert_eq!(str_tag(a), str_tag(b));
        }
        assert_ne!(str_tag("X86_64"), str_tag("aarch64"));
    }
}
