//! Growing large buffers cheaply: a snapshot of a big memory is written into
//! a buffer of the same size.

/// Grows `v` to `len` bytes, zeros past its current length. A buffer that
/// must be reallocated is made anew from zeroed memory the system hands
/// over (`calloc`), so its pages are neither copied nor cleared twice: they
/// are faulted in by whoever writes them first, on every core at once.
/// (Transparent huge pages were measured and left out: with the usual
/// `defrag = madvise` setting the kernel compacts memory on every fault,
/// which made a 1 GiB buffer four times slower to fill.)
pub(crate) fn grow_zeroed(v: &mut Vec<u8>, len: usize) {
    if len <= v.len() {
        return;
    }
    if len > v.capacity() {
        let mut fresh = vec![0u8; len];
        fresh[..v.len()].copy_from_slice(v);
        *v = fresh;
    } else {
        v.resize(len, 0);
    }
}
