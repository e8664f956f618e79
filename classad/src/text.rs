//! The text of an attribute name: interned text, which the interner keeps
//! for the life of the process, is shared as a plain pointer, so copying
//! or dropping a name touches no reference count (a count shared by every
//! thread that uses the name, whose cache line the CPUs passed back and
//! forth at each copy); any other text is an `Arc<str>`'s.
//!
//! This is the crate's one representation trick with `unsafe`: a pointer
//! and a length whose top bit says which of the two the text is. A string's
//! length never has its top bit set (no allocation exceeds `isize::MAX`
//! bytes), so the bit is free.

use std::ptr::NonNull;
use std::sync::Arc;

/// The top bit of [`NameText::len`]: the text is an `Arc<str>`'s, whose
/// count this value holds one of.
const SHARED: usize = 1 << (usize::BITS - 1);

/// An attribute name's text: `&'static str` (interned) or `Arc<str>`.
pub(crate) struct NameText {
    ptr: NonNull<u8>,
    /// The text's length in bytes, with [`SHARED`] set for an `Arc<str>`.
    len: usize,
}

// SAFETY: a `NameText` is either a `&'static str` or an `Arc<str>`, both of
// which are `Send` and `Sync`; it gives out only shared access to the text.
unsafe impl Send for NameText {}
// SAFETY: as above.
unsafe impl Sync for NameText {}

impl NameText {
    /// Text that lives as long as the process (the interner's).
    #[inline]
    pub(crate) fn from_static(s: &'static str) -> NameText {
        debug_assert!(s.len() & SHARED == 0);
        NameText { ptr: NonNull::from(s.as_bytes()).cast(), len: s.len() }
    }

    /// Text kept alive by its `Arc` (which this value now holds).
    pub(crate) fn from_arc(s: Arc<str>) -> NameText {
        let len = s.len();
        debug_assert!(len & SHARED == 0);
        let raw = Arc::into_raw(s);
        // SAFETY: `Arc::into_raw` never gives a null pointer.
        let ptr = unsafe { NonNull::new_unchecked(raw as *const u8 as *mut u8) };
        NameText { ptr, len: len | SHARED }
    }

    #[inline]
    fn text_len(&self) -> usize {
        self.len & !SHARED
    }

    /// The `Arc<str>`'s pointer, when the text is one's.
    #[inline]
    fn arc_ptr(&self) -> Option<*const str> {
        (self.len & SHARED != 0).then(|| {
            std::ptr::slice_from_raw_parts(self.ptr.as_ptr().cast_const(), self.text_len())
                as *const str
        })
    }

    /// The text.
    #[inline]
    pub(crate) fn as_str(&self) -> &str {
        // SAFETY: `ptr` and the length are those of a `str` that lives at
        // least as long as `self`: a `&'static str`, or an `Arc<str>` one
        // of whose counts `self` holds until it is dropped.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                self.ptr.as_ptr(),
                self.text_len(),
            ))
        }
    }

    /// Whether two texts are the same text (the same bytes in memory).
    #[inline]
    pub(crate) fn same(&self, other: &NameText) -> bool {
        self.ptr == other.ptr && self.len == other.len
    }
}

impl Clone for NameText {
    #[inline]
    fn clone(&self) -> NameText {
        if let Some(p) = self.arc_ptr() {
            // SAFETY: `p` came from `Arc::into_raw` and `self` holds one of
            // its counts, so the `Arc` is alive; the clone holds a new one.
            unsafe { Arc::increment_strong_count(p) };
        }
        NameText { ptr: self.ptr, len: self.len }
    }
}

impl Drop for NameText {
    #[inline]
    fn drop(&mut self) {
        if let Some(p) = self.arc_ptr() {
            // SAFETY: `p` came from `Arc::into_raw`, and this value's count
            // is given back exactly once, here.
            unsafe { Arc::decrement_strong_count(p) };
        }
    }
}

impl std::fmt::Debug for NameText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared text is kept alive by its copies and freed with the last;
    /// a static one is copied as it is.
    #[test]
    fn shared_text_counts_its_copies() {
        let arc: Arc<str> = Arc::from("SomeLongerName");
        let weak = Arc::downgrade(&arc);
        let a = NameText::from_arc(arc);
        assert_eq!(weak.strong_count(), 1);
        let b = a.clone();
        assert_eq!(weak.strong_count(), 2);
        assert_eq!(b.as_str(), "SomeLongerName");
        assert!(a.same(&b));
        drop(a);
        assert_eq!(weak.strong_count(), 1);
        assert_eq!(b.as_str(), "SomeLongerName");
        drop(b);
        assert_eq!(weak.strong_count(), 0);

        let s = NameText::from_static("Requirements");
        let t = s.clone();
        assert!(s.same(&t));
        assert_eq!(t.as_str(), "Requirements");
        assert!(!s.same(&NameText::from_static("requirements")));
        let e = NameText::from_arc(Arc::from(""));
        assert_eq!(e.clone().as_str(), "");
    }

    /// Copies move between threads and are dropped there.
    #[test]
    fn texts_cross_threads() {
        let a = NameText::from_arc(Arc::from("Owner"));
        let copies: Vec<NameText> = (0..8).map(|_| a.clone()).collect();
        let got: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> =
                copies.into_iter().map(|c| s.spawn(move || c.as_str().to_string())).collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|g| g == "Owner"));
        assert_eq!(a.as_str(), "Owner");
    }
}
