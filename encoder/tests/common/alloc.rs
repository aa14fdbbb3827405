//! A global allocator that counts allocations (and reallocations), both for
//! the current thread — tests run in parallel, so most count only what
//! their own thread does — and for the whole process, for tests whose code
//! under test runs on other threads (a server); and the bytes the process
//! has allocated and not freed. Included by the test files that count, the
//! root package's too (`#[path]`), so that there is one.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

thread_local! {
    static THREAD: Cell<usize> = const { Cell::new(0) };
}

static PROCESS: AtomicUsize = AtomicUsize::new(0);

/// Bytes allocated and not yet freed, process-wide.
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn count() {
    PROCESS.fetch_add(1, Ordering::Relaxed);
    // `try_with`: a thread being torn down may still allocate.
    let _ = THREAD.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees are this allocator's; counting
// touches only an atomic and a const-initialised thread-local `Cell`,
// neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with `layout` (every
        // allocation goes through this allocator to `System`).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for `dealloc`; the caller upholds `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations the current thread made while running `f`.
#[allow(dead_code)]
pub fn allocations_during(f: impl FnOnce()) -> usize {
    let before = THREAD.with(Cell::get);
    f();
    THREAD.with(Cell::get) - before
}

/// Allocations the whole process has made so far.
#[allow(dead_code)]
pub fn process_allocations() -> usize {
    PROCESS.load(Ordering::SeqCst)
}

/// Bytes the whole process has allocated and not freed.
#[allow(dead_code)]
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// The counter counts: a test that sees 0 allocations sees a real 0.
#[test]
fn the_counter_counts_allocations_and_reallocations() {
    let before = process_allocations();
    let n = allocations_during(|| {
        let mut v = std::hint::black_box(Vec::<u8>::with_capacity(1));
        v.extend_from_slice(&[0; 100]);
        drop(std::hint::black_box(v));
    });
    assert_eq!(n, 2, "one allocation and one reallocation");
    assert!(process_allocations() >= before + 2);
}
