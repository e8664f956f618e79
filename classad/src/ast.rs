//! Expression trees and ClassAds.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

use crate::builtins::Builtin;
use crate::value::Value;

/// An attribute name: keeps its original spelling, compares and hashes
/// case-insensitively (ASCII, as HTCondor's `strcasecmp`). The hash is
/// computed once, when the name is made, so lookups never hash text.
///
/// A name also carries the interner's identity of its case-folded text
/// (see [`crate::table`]): two names with non-zero identities are equal
/// exactly when the identities are, so an attribute table compares names
/// without reading their text. The identity and the [`Special`] kind share
/// one word, which keeps a name at 24 bytes.
#[derive(Clone, Debug)]
pub struct AttrName {
    text: crate::text::NameText,
    /// The low 32 bits of the case-insensitive hash.
    hash: u32,
    /// Bits 0-23: the name's identity (0: none); bits 24-30: its [`Special`];
    /// bit 31 ([`QUOTED`]): the name needs quotes to be read back.
    meta: u32,
}

// A name stays three words: it is in every attribute table and expression.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<AttrName>() == 24);

/// Names that the scope rules treat specially.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Special {
    /// An ordinary name.
    None,
    /// `self`: the current ad.
    SelfAd,
    /// `my`: the current ad (in strict semantics, only inside a match).
    My,
    /// `target`: the other ad in a match (resolved through the match context).
    Target,
    /// `other`: alias of `target` in a match context.
    Other,
    /// `ad`: alias of `my` in a match context.
    Ad,
    /// `parent`: the lexically enclosing ad.
    Parent,
    /// `toplevel`, `root`: the outermost ad.
    Root,
    /// `CurrentTime`: old ClassAds' alias of `time()`.
    CurrentTime,
}

impl Special {
    pub(crate) fn bit(self) -> u16 {
        match self {
            Special::None => 0,
            Special::SelfAd => 128,
            Special::My => 1,
            Special::Target => 2,
            Special::Other => 4,
            Special::Ad => 8,
            Special::Parent => 16,
            Special::Root => 32,
            Special::CurrentTime => 64,
        }
    }
}

/// The bits of [`AttrName`]'s identity.
pub(crate) const ID_MASK: u32 = (1 << 24) - 1;

/// A name's case-insensitive hash in this process: SipHash-1-3 under a key
/// drawn once per process ([`name_hash_key`]). Names come from anyone's ads
/// (quoted names may hold any text), and every table of names (the
/// interner, each ad's index, the threads' caches) places them by this
/// hash: under a hash anyone could compute, a sender could choose thousands
/// of names that share one place and make every look-up of them walk all
/// the others, in every daemon that reads its ads.
pub(crate) fn name_hash(s: &str) -> u64 {
    name_hash_keyed(name_hash_key(), s)
}

/// The key of [`name_hash`], drawn once per process from the operating
/// system's randomness (std's `RandomState` holds 128 random bits; two of
/// its hashes are the key).
#[inline]
fn name_hash_key() -> (u64, u64) {
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    *KEY.get_or_init(|| {
        let random = std::hash::RandomState::new();
        (random.hash_one(0u64), random.hash_one(1u64))
    })
}

/// [`name_hash`] under `key`. The text goes in eight bytes at a time,
/// ASCII-lowercased together, after its length: the last word is the
/// text's last eight bytes (overlapping the one before), and a text
/// shorter than eight goes in as two overlapping halves, or three of its
/// bytes, which with the length determine it.
pub(crate) fn name_hash_keyed(key: (u64, u64), s: &str) -> u64 {
    let b = s.as_bytes();
    let n = b.len();
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let half = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default()) as u64;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(key.0, key.1);
    h.write_u64(n as u64);
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            h.write_u64(ascii_lower8(word(i)));
            i += 8;
        }
        h.write_u64(ascii_lower8(word(n - 8)));
    } else if n >= 4 {
        h.write_u64(ascii_lower8(half(0) | half(n - 4) << 32));
    } else if n > 0 {
        h.write_u64(ascii_lower8(b[0] as u64 | (b[n / 2] as u64) << 8 | (b[n - 1] as u64) << 16));
    }
    h.finish()
}

/// The eight bytes of `w` with `A`-`Z` made `a`-`z` (every other byte,
/// including those of multi-byte characters, as it was): what
/// `to_ascii_lowercase` does to each, done to all eight at once.
#[inline]
pub(crate) fn ascii_lower8(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Each byte's low seven bits plus an offset carry into its high bit
    // exactly when they are at least `A` (0x41), or past `Z` (0x5a); a byte
    // whose own high bit is set is no ASCII letter.
    let low = w & !HIGH;
    let from_a = low + (0x80 - 0x41) * ONES;
    let past_z = low + (0x80 - 0x5b) * ONES;
    let upper = from_a & !past_z & !w & HIGH;
    w | (upper >> 2)
}

impl AttrName {
    /// Makes a name from its text.
    pub fn new(text: &str) -> AttrName {
        let hash = name_hash(text);
        // `meta` carries the identity, the QUOTED bit the interner found
        // with the name and its `Special`, all found once per spelling.
        let (text, meta) =
            crate::table::intern(text, hash, || (Self::special_of(text) as u32) << 24);
        debug_assert!(meta & ID_MASK == meta & !QUOTED & !(SPECIAL_MASK << 24));
        AttrName { text, hash: hash as u32, meta }
    }

    /// The scope rules' kind of the name `text`.
    fn special_of(text: &str) -> Special {
        const NAMES: [(&str, Special); 9] = [
            ("my", Special::My),
            ("self", Special::SelfAd),
            ("target", Special::Target),
            ("other", Special::Other),
            ("ad", Special::Ad),
            ("parent", Special::Parent),
            ("toplevel", Special::Root),
            ("root", Special::Root),
            ("currenttime", Special::CurrentTime),
        ];
        if text.len() > 11 {
            return Special::None;
        }
        NAMES
            .iter()
            .find(|(n, _)| n.len() == text.len() && n.eq_ignore_ascii_case(text))
            .map_or(Special::None, |(_, s)| *s)
    }

    /// The name's case-insensitive hash (its low 32 bits).
    #[inline]
    pub(crate) fn hash_value(&self) -> u32 {
        self.hash
    }

    /// The interner's identity of the case-folded name; 0 when the name was
    /// made after the interner filled up and no equal name was interned.
    #[inline]
    pub(crate) fn id(&self) -> u32 {
        self.meta & ID_MASK
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        self.text.as_str()
    }

    /// Whether the scope rules treat this name specially (`MY`, `TARGET`,
    /// `parent`, `CurrentTime`, ...), found once when the name was made.
    #[inline]
    pub fn special(&self) -> Special {
        match (self.meta >> 24) & SPECIAL_MASK {
            0 => Special::None,
            1 => Special::SelfAd,
            2 => Special::My,
            3 => Special::Target,
            4 => Special::Other,
            5 => Special::Ad,
            6 => Special::Parent,
            7 => Special::Root,
            _ => Special::CurrentTime,
        }
    }

    /// True for an ordinary name (not `MY`, `TARGET`, `parent`, ...).
    #[inline]
    pub(crate) fn is_plain(&self) -> bool {
        (self.meta >> 24) & SPECIAL_MASK == 0
    }

    /// True when the name needs quoting (`'odd name'`) to be read back
    /// (found once, when the name was first interned).
    #[inline]
    pub fn needs_quotes(&self) -> bool {
        self.meta & QUOTED != 0
    }
}

/// [`AttrName`]'s `meta` bit telling that the name needs quotes.
pub(crate) const QUOTED: u32 = 1 << 31;

/// The bits of `meta` above the identity that hold the [`Special`].
const SPECIAL_MASK: u32 = 0x7f;

/// True when `text` as a name needs quoting (`'odd name'`) to be read back:
/// not an identifier, or a reserved word.
pub(crate) fn quoting_needed(text: &str) -> bool {
    let mut chars = text.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return true,
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return true;
    }
    crate::lexer::is_reserved_word(text)
}

impl PartialEq for AttrName {
    #[inline]
    fn eq(&self, other: &AttrName) -> bool {
        let (a, b) = (self.id(), other.id());
        if a != 0 || b != 0 {
            // Interned names are equal exactly when their identities are;
            // a name without one equals no interned name.
            return a == b;
        }
        self.hash == other.hash
            && (self.text.same(&other.text)
                || self.text.as_str().eq_ignore_ascii_case(other.text.as_str()))
    }
}
impl Eq for AttrName {}

impl Hash for AttrName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash as u64);
    }
}

impl From<&str> for AttrName {
    fn from(s: &str) -> AttrName {
        AttrName::new(s)
    }
}

impl From<&AttrName> for AttrName {
    fn from(n: &AttrName) -> AttrName {
        n.clone()
    }
}

/// What names an attribute in [`ClassAd::get`], [`ClassAd::contains`],
/// [`ClassAd::remove`], [`ClassAd::eval_attr`] and their kin: its text
/// (`ad.get("JobStatus")`, made into an [`AttrName`] at each call: hashed and
/// looked up in the interner), or an [`AttrName`] made once
/// (`ad.get(classad::name!("JobStatus"))`: nothing to do but the lookup),
/// which is what a daemon's hot paths use.
pub trait NameRef {
    /// The name, borrowed when it is one already.
    fn attr_name(&self) -> std::borrow::Cow<'_, AttrName>;
}

impl NameRef for str {
    #[inline]
    fn attr_name(&self) -> std::borrow::Cow<'_, AttrName> {
        std::borrow::Cow::Owned(AttrName::new(self))
    }
}

impl NameRef for String {
    #[inline]
    fn attr_name(&self) -> std::borrow::Cow<'_, AttrName> {
        std::borrow::Cow::Owned(AttrName::new(self))
    }
}

impl NameRef for std::sync::Arc<str> {
    #[inline]
    fn attr_name(&self) -> std::borrow::Cow<'_, AttrName> {
        std::borrow::Cow::Owned(AttrName::new(self))
    }
}

impl NameRef for AttrName {
    #[inline]
    fn attr_name(&self) -> std::borrow::Cow<'_, AttrName> {
        std::borrow::Cow::Borrowed(self)
    }
}

impl<N: NameRef + ?Sized> NameRef for &N {
    #[inline]
    fn attr_name(&self) -> std::borrow::Cow<'_, AttrName> {
        (**self).attr_name()
    }
}

/// A fixed list of attribute names, made into [`AttrName`]s once, the
/// first time they are asked for, and kept for the life of the process: a
/// daemon's tables of names (the attributes a slot copies from its job, those
/// an event log reads) in a `static`, looked up without hashing any text.
///
/// ```
/// static WATCHED: classad::Names<2> = classad::Names::new(["JobStatus", "HoldReason"]);
/// let ad = classad::parse_ad("[ JobStatus = 5 ]").unwrap();
/// assert_eq!(WATCHED.get().iter().filter(|n| ad.contains(*n)).count(), 1);
/// ```
pub struct Names<const N: usize> {
    texts: [&'static str; N],
    made: std::sync::OnceLock<[AttrName; N]>,
}

impl<const N: usize> Names<N> {
    /// The list, its names not made yet.
    pub const fn new(texts: [&'static str; N]) -> Names<N> {
        Names { texts, made: std::sync::OnceLock::new() }
    }

    /// The names, made on the first call.
    #[inline]
    pub fn get(&self) -> &[AttrName; N] {
        self.made.get_or_init(|| self.texts.map(AttrName::new))
    }

    /// The names as written.
    pub fn texts(&self) -> &[&'static str; N] {
        &self.texts
    }
}

/// An [`AttrName`] made once, the first time this line runs, and kept for the
/// life of the process: `ad.get(classad::name!("JobStatus"))` looks the
/// attribute up without hashing its text or asking the interner again.
///
/// ```
/// let ad = classad::parse_ad("[ JobStatus = 2 ]").unwrap();
/// assert_eq!(ad.eval_attr(classad::name!("jobstatus")), classad::Value::Int(2));
/// ```
#[macro_export]
macro_rules! name {
    ($text:expr) => {{
        static NAME: ::std::sync::OnceLock<$crate::AttrName> = ::std::sync::OnceLock::new();
        NAME.get_or_init(|| $crate::AttrName::new($text))
    }};
}

impl std::fmt::Display for AttrName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text.as_str())
    }
}

/// A hasher that passes a precomputed `u64` through.
#[derive(Default)]
pub(crate) struct PassThrough(u64);
impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys that are not `AttrName`; fold them in.
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A ClassAd: an ordered set of attributes, each bound to an expression.
/// Names are case-insensitive; the first spelling seen is kept.
#[derive(Clone, Debug, Default)]
pub struct ClassAd {
    attrs: crate::table::Table,
    /// Bits of [`Special`] names defined here, so that scope resolution of
    /// `MY`, `TARGET` and friends skips a probe when the ad has none.
    specials: u16,
}

impl ClassAd {
    /// An empty ad, as a constant.
    pub const EMPTY: ClassAd = ClassAd { attrs: crate::table::Table::EMPTY, specials: 0 };

    /// An empty ad.
    pub fn new() -> ClassAd {
        ClassAd::default()
    }

    /// An empty ad with room for `n` attributes (when many ads of about the
    /// same size are made in a row, as `andes submit` makes a cluster's).
    pub fn with_capacity(n: usize) -> ClassAd {
        ClassAd { attrs: crate::table::Table::with_capacity(n), specials: 0 }
    }

    /// Binds `name` to `expr`, replacing any earlier binding of the same
    /// name (case-insensitively) but keeping the first spelling and position.
    pub fn insert(&mut self, name: impl Into<AttrName>, expr: Expr) {
        let name = name.into();
        self.specials |= name.special().bit();
        self.attrs.insert(name, expr);
    }

    /// Binds `name` to a literal value.
    pub fn insert_value(&mut self, name: impl Into<AttrName>, value: impl Into<Value>) {
        self.insert(name, Expr::Lit(value.into()));
    }

    /// Parses `expr` as a ClassAd expression and binds `name` to it.
    pub fn insert_expr(&mut self, name: &str, expr: &str) -> Result<(), crate::ParseError> {
        let e = crate::parse_expr(expr)?;
        self.insert(name, e);
        Ok(())
    }

    /// The expression bound to `name`, if any.
    pub fn get<N: NameRef + ?Sized>(&self, name: &N) -> Option<&Expr> {
        self.lookup(&name.attr_name())
    }

    /// The expression bound to `name`, if any, with a prepared name.
    #[inline]
    pub fn lookup(&self, name: &AttrName) -> Option<&Expr> {
        self.attrs.get(name)
    }

    /// The index slot binding `name`: its position and, for a literal, its
    /// value inline (see [`crate::table::Slot`]).
    #[inline]
    pub(crate) fn probe(&self, name: &AttrName) -> Option<crate::table::Slot> {
        self.attrs.probe(name)
    }

    /// The expression at position `i`.
    #[inline]
    pub(crate) fn expr_at(&self, i: usize) -> Option<&Expr> {
        self.attrs.expr_at(i)
    }

    /// Hints the CPU to start fetching what looking up `name` will read.
    #[inline]
    pub(crate) fn prefetch_slot(&self, name: &AttrName) {
        self.attrs.prefetch_slot(name)
    }

    /// [`ClassAd::prefetch_slot`] for each of `names`.
    #[inline]
    pub(crate) fn prefetch_slots(&self, names: &[&AttrName]) {
        self.attrs.prefetch_slots(names)
    }

    /// Hints the CPU to fetch the entry that looking up `name` reads (best
    /// once its index slot is in cache).
    #[inline]
    pub(crate) fn prefetch_entry(&self, name: &AttrName) {
        self.attrs.prefetch_entry(name)
    }

    /// The position of `name` in this ad.
    #[inline]
    pub(crate) fn index_of(&self, name: &AttrName) -> Option<usize> {
        self.attrs.position(name)
    }

    /// The attribute at position `i`.
    #[inline]
    pub(crate) fn get_index(&self, i: usize) -> Option<(&AttrName, &Expr)> {
        self.attrs.get_index(i)
    }

    /// The name as spelled in this ad and its expression.
    pub fn get_entry<N: NameRef + ?Sized>(&self, name: &N) -> Option<(&AttrName, &Expr)> {
        let i = self.attrs.position(&name.attr_name())?;
        self.attrs.get_index(i)
    }

    /// Removes `name`, returning its expression. Keeps the others' order.
    pub fn remove<N: NameRef + ?Sized>(&mut self, name: &N) -> Option<Expr> {
        self.attrs.remove(&name.attr_name())
    }

    /// Removes every attribute named in `names` (case-insensitively), at the
    /// cost of one removal; how many were bound.
    pub fn remove_all<N: NameRef>(&mut self, names: &[N]) -> usize {
        let names: Vec<std::borrow::Cow<'_, AttrName>> =
            names.iter().map(|n| n.attr_name()).collect();
        match names.len() {
            0 => 0,
            // Few names (a slot's job attributes): compared in place.
            1..=16 => self.attrs.remove_where(|k| names.iter().any(|n| **n == *k)),
            // Many (a batch's `unset`): one probe of a set each.
            _ => {
                let names: std::collections::HashSet<AttrName> =
                    names.into_iter().map(std::borrow::Cow::into_owned).collect();
                self.attrs.remove_where(|k| names.contains(k))
            }
        }
    }

    /// True when `name` is bound.
    pub fn contains<N: NameRef + ?Sized>(&self, name: &N) -> bool {
        self.get(name).is_some()
    }

    /// The number of attributes.
    pub fn len(&self) -> usize {
        self.attrs.len()
    }

    /// True when there are no attributes.
    pub fn is_empty(&self) -> bool {
        self.attrs.len() == 0
    }

    /// The attributes in order.
    pub fn iter(&self) -> impl Iterator<Item = (&AttrName, &Expr)> {
        self.attrs.iter()
    }

    /// Copies every attribute of `other` into this ad (later wins).
    pub fn update(&mut self, other: &ClassAd) {
        for (k, v) in other.iter() {
            self.insert(k.clone(), v.clone());
        }
    }

    /// What this ad holds beyond `base`: its attributes that `base` lacks or
    /// binds to a different expression, and the names of `base`'s that this
    /// ad lacks. [`ClassAd::with_delta`] of `base` with them gives an ad equal
    /// to this one (expressions compared structurally: parentheses, which
    /// are syntax only, may come from `base`). A batch of jobs of one
    /// cluster travels as its first ad and one such delta per job.
    pub fn delta_from(&self, base: &ClassAd) -> (ClassAd, Vec<String>) {
        let mut changed = ClassAd::new();
        for (name, expr) in self.iter() {
            if base.lookup(name) != Some(expr) {
                changed.insert(name.clone(), expr.clone());
            }
        }
        let unset = base
            .iter()
            .filter(|(name, _)| self.lookup(name).is_none())
            .map(|(name, _)| name.as_str().to_string())
            .collect();
        (changed, unset)
    }

    /// This ad with `delta`'s attributes bound over it and those named in
    /// `unset` removed: the ad [`ClassAd::delta_from`] took them from.
    pub fn with_delta(&self, delta: &ClassAd, unset: &[String]) -> ClassAd {
        let mut ad = self.clone();
        ad.update(delta);
        ad.remove_all(unset);
        ad
    }

    #[inline]
    pub(crate) fn has_special(&self, s: Special) -> bool {
        self.specials & s.bit() != 0
    }

    /// Evaluates attribute `name` with this ad as the only scope.
    pub fn eval_attr<N: NameRef + ?Sized>(&self, name: &N) -> Value {
        crate::eval::Evaluator::new().eval_attr(self, None, name)
    }

    /// Evaluates `expr` with this ad as MY and no TARGET.
    pub fn eval(&self, expr: &Expr) -> Value {
        crate::eval::Evaluator::new().eval(expr, Some(self), None)
    }
}

impl PartialEq for ClassAd {
    /// Same attribute names (case-insensitively) bound to equal expressions,
    /// in any order.
    fn eq(&self, other: &ClassAd) -> bool {
        self.len() == other.len()
            && self.iter().all(|(k, v)| other.lookup(k).is_some_and(|o| o == v))
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-x`
    Neg,
    /// `+x`
    Plus,
    /// `!x`
    Not,
    /// `~x`
    BitNot,
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `||`
    Or,
    /// `&&`
    And,
    /// `|`
    BitOr,
    /// `^`
    BitXor,
    /// `&`
    BitAnd,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `=?=` or `is`
    Is,
    /// `=!=` or `isnt`
    Isnt,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<<`
    Shl,
    /// `>>` (arithmetic)
    Shr,
    /// `>>>` (logical)
    UShr,
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Mod,
}

impl BinOp {
    /// The operator as HTCondor's unparser prints it.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::BitAnd => "&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Is => "is",
            BinOp::Isnt => "isnt",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::UShr => ">>>",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
        }
    }

    /// Binding strength: higher binds tighter.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::BitOr => 3,
            BinOp::BitXor => 4,
            BinOp::BitAnd => 5,
            BinOp::Eq | BinOp::Ne | BinOp::Is | BinOp::Isnt => 6,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 7,
            BinOp::Shl | BinOp::Shr | BinOp::UShr => 8,
            BinOp::Add | BinOp::Sub => 9,
            BinOp::Mul | BinOp::Div | BinOp::Mod => 10,
        }
    }
}

/// A function call: its name as written and the built-in it resolves to
/// (resolved once, at parse time; `None` for an unknown name, which
/// evaluates to error as in HTCondor).
#[derive(Clone, Debug)]
pub struct Call {
    /// The name as written.
    pub name: Box<str>,
    /// The resolved built-in.
    pub func: Option<Builtin>,
    /// The arguments, unevaluated.
    pub args: Vec<Expr>,
}

/// A ClassAd expression.
///
/// Operands are shared (`Arc`), never copied: cloning an expression, and so
/// an ad, costs a reference count per attribute rather than a copy of each
/// tree. Daemons copy job and slot ads far more often than they change an
/// expression in one.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A literal scalar: undefined, error, boolean, integer, real or string.
    Lit(Value),
    /// An attribute reference `name`, or `.name` when `absolute`.
    Attr {
        /// The attribute.
        name: AttrName,
        /// `.name`: look up from the outermost scope.
        absolute: bool,
    },
    /// `base.name`.
    Select(Arc<Expr>, AttrName),
    /// `base[index]`.
    Index(Arc<Expr>, Arc<Expr>),
    /// A unary operation.
    Unary(UnOp, Arc<Expr>),
    /// A binary operation.
    Binary(BinOp, Arc<Expr>, Arc<Expr>),
    /// `c ? a : b`.
    Cond(Arc<Expr>, Arc<Expr>, Arc<Expr>),
    /// `a ?: b`: `b` when `a` is undefined.
    Elvis(Arc<Expr>, Arc<Expr>),
    /// `( e )`, kept so that unparse prints what was written.
    Paren(Arc<Expr>),
    /// `name(args...)`.
    Call(Arc<Call>),
    /// `{ a, b, ... }`.
    List(Vec<Expr>),
    /// `[ a = 1; ... ]`.
    Record(Arc<ClassAd>),
}

impl Expr {
    /// A reference to attribute `name`.
    pub fn attr(name: &str) -> Expr {
        Expr::Attr { name: AttrName::new(name), absolute: false }
    }

    /// Pushes the expression's direct operands onto `out`: the base of a
    /// select, both sides of an index or binary operation, the operand of a
    /// unary one or of parentheses, the three parts of `?:`, a call's
    /// arguments, a list's items. Literals, attribute references and
    /// records (whose expressions live in their own ad) have none. Walkers
    /// use it with their own stack, so deep expressions never recurse.
    pub fn push_operands<'a>(&'a self, out: &mut Vec<&'a Expr>) {
        match self {
            Expr::Lit(_) | Expr::Attr { .. } | Expr::Record(_) => {}
            Expr::Select(base, _) | Expr::Unary(_, base) | Expr::Paren(base) => out.push(base),
            Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Elvis(a, b) => {
                out.push(a);
                out.push(b);
            }
            Expr::Cond(a, b, c) => {
                out.push(a);
                out.push(b);
                out.push(c);
            }
            Expr::Call(c) => out.extend(c.args.iter()),
            Expr::List(items) => out.extend(items.iter()),
        }
    }

    /// The expression without its outer parentheses.
    pub fn unparen(&self) -> &Expr {
        let mut e = self;
        while let Expr::Paren(inner) = e {
            e = inner;
        }
        e
    }

    /// The literal value, if this is a literal.
    pub fn as_literal(&self) -> Option<&Value> {
        match self {
            Expr::Lit(v) => Some(v),
            _ => None,
        }
    }
}

impl PartialEq for Expr {
    /// Structural equality; parentheses are syntax only and are ignored.
    fn eq(&self, other: &Expr) -> bool {
        use Expr::*;
        match (self.unparen(), other.unparen()) {
            (Lit(a), Lit(b)) => a == b,
            (Attr { name: a, absolute: x }, Attr { name: b, absolute: y }) => {
                x == y && a.as_str() == b.as_str()
            }
            (Select(a, n), Select(b, m)) => n.as_str() == m.as_str() && a == b,
            (Index(a, i), Index(b, j)) => a == b && i == j,
            (Unary(o, a), Unary(p, b)) => o == p && a == b,
            (Binary(o, a, c), Binary(p, b, d)) => o == p && a == b && c == d,
            (Cond(a, b, c), Cond(d, e, f)) => a == d && b == e && c == f,
            (Elvis(a, b), Elvis(c, d)) => a == c && b == d,
            (Call(a), Call(b)) => a.name.eq_ignore_ascii_case(&b.name) && a.args == b.args,
            (List(a), List(b)) => a == b,
            (Record(a), Record(b)) => a == b,
            _ => false,
        }
    }
}

impl From<Value> for Expr {
    fn from(v: Value) -> Expr {
        match v {
            Value::List(items) => Expr::List(items.iter().cloned().map(Expr::from).collect()),
            Value::Ad(ad) => Expr::Record(ad),
            v => Expr::Lit(v),
        }
    }
}

impl Drop for Expr {
    fn drop(&mut self) {
        // Deep trees are bounded by the parser, but trees can be built by
        // hand too: take children out iteratively so drop never recurses deeply.
        // An operand another expression still shares is left to its last
        // owner's drop.
        fn take(operand: &mut Arc<Expr>, out: &mut Vec<Expr>) {
            if let Some(e) = Arc::get_mut(operand) {
                out.push(std::mem::replace(e, Expr::Lit(Value::Undefined)));
            }
        }
        fn take_children(e: &mut Expr, out: &mut Vec<Expr>) {
            match e {
                Expr::Select(b, _) | Expr::Unary(_, b) | Expr::Paren(b) => take(b, out),
                Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Elvis(a, b) => {
                    take(a, out);
                    take(b, out);
                }
                Expr::Cond(a, b, c) => {
                    take(a, out);
                    take(b, out);
                    take(c, out);
                }
                Expr::Call(c) => {
                    if let Some(c) = Arc::get_mut(c) {
                        out.append(&mut c.args);
                    }
                }
                Expr::List(items) => out.append(items),
                Expr::Record(ad) => {
                    if let Some(ad) = Arc::get_mut(ad) {
                        out.extend(ad.attrs.take_exprs());
                    }
                }
                _ => {}
            }
        }
        match self {
            Expr::Lit(_) | Expr::Attr { .. } => {}
            _ => {
                let mut stack = Vec::new();
                take_children(self, &mut stack);
                while let Some(mut e) = stack.pop() {
                    take_children(&mut e, &mut stack);
                }
            }
        }
    }
}
