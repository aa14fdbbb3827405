//! After warm-up, keep-alive requests to /end-string/1024 in the direct
//! strategy allocate nothing: counted by a global allocator over the whole
//! process (server threads included), with a client that allocates nothing
//! per request.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{connect, read_response, start};
use unflat_server::Strategy;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const REQUEST: &[u8] = b"GET /end-string/1024 HTTP/1.1\r\nHost: bench\r\n\r\n";

#[test]
fn keep_alive_requests_allocate_nothing_after_warm_up() {
    let server = start(Strategy::Direct);
    let mut s = connect(&server);
    // Warm-up: caches filled, buffers grown. Learn the response's length,
    // which stays the same (the Date line has a fixed width).
    let mut buf = Vec::new();
    s.write_all(REQUEST).unwrap();
    let first = read_response(&mut s, &mut buf, false).unwrap();
    let len = first.head.len() + first.body.len();
    assert_eq!(first.body.len(), 1024);
    let mut response = vec![0u8; len];
    for _ in 0..1000 {
        s.write_all(REQUEST).unwrap();
        s.read_exact(&mut response).unwrap();
    }

    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..10_000 {
        s.write_all(REQUEST).unwrap();
        s.read_exact(&mut response).unwrap();
    }
    let allocated = ALLOCATIONS.load(Ordering::SeqCst) - before;

    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(response.ends_with(&[b'a'; 1024]));
    assert_eq!(
        allocated, 0,
        "heap allocations during 10 000 keep-alive requests"
    );
}
