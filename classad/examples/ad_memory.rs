//! Heap bytes per parsed ad: parses a file of ads (old or new syntax, as
//! `parse_ads` reads them) and reports what the parsed ads hold on the heap,
//! counted by a global allocator.
//!
//! ```sh
//! ANDES_BENCH_DUMP=/tmp/andes-bench-data cargo bench -p classad --bench classad -- --test
//! cargo run --release -p classad --example ad_memory -- /tmp/andes-bench-data/machines.ads
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter has no effect on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is `System.dealloc`'s.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    let path = std::env::args().nth(1).expect("usage: ad_memory <file of ads>");
    let text = std::fs::read_to_string(&path).expect("read the ads");
    let (before, rss_before) = (LIVE.load(Ordering::Relaxed), resident());
    let ads = classad::parse_ads(&text).expect("the ads parse");
    let (after, rss_after) = (LIVE.load(Ordering::Relaxed), resident());
    let n = ads.len().max(1);
    let attrs: usize = ads.iter().map(classad::ClassAd::len).sum();
    println!(
        "{} ads, {:.1} attributes each: {} heap bytes per ad ({} in all, {:.1} per attribute), \
         plus {} bytes of ClassAd struct each",
        ads.len(),
        attrs as f64 / n as f64,
        (after - before) / n,
        after - before,
        (after - before) as f64 / attrs.max(1) as f64,
        std::mem::size_of::<classad::ClassAd>(),
    );
    if let (Some(a), Some(b)) = (rss_before, rss_after) {
        println!("resident set grew by {} bytes per ad (allocator overhead included)", (b - a) / n);
    }
}

/// The resident set size in bytes, where `/proc` tells it.
fn resident() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}
