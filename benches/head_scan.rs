//! The request head's scanner (`h1::scan`, one walk) against httparse's
//! `Request::parse_with_uninit_headers`, which it stands in for and answers
//! alike (server/tests/suite/head_scan.rs, the `request_head` fuzz target): the time to
//! parse each of the heads `benches/instructions.py` sends — a plain one,
//! TechEmpower's, one with a query — with room for 64 fields.
//!
//! Beside it, the query's byte search (`h1::find_byte`) against
//! `memchr` on queries of a route's length.
//!
//!     cargo bench --bench head_scan
//!     cargo bench --bench head_scan -- --test    # each case once, checked
//!
//! Writes criterion's reports under target/criterion/head_scan.

use std::hint::black_box;
use std::mem::MaybeUninit;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use unflat_server::h1::scan;

const HEADS: [(&str, &[u8]); 3] = [
    ("plain", b"GET /end-string/4 HTTP/1.1\r\nHost: localhost\r\n\r\n"),
    (
        "techempower",
        b"GET /end-string/4 HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n\r\n",
    ),
    (
        "query",
        b"GET /end-string/4?kind=ascii&body=flat HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ),
];

fn head_scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("head_scan");
    for (name, head) in HEADS {
        group.throughput(Throughput::Bytes(head.len() as u64));
        group.bench_with_input(BenchmarkId::new("scan", name), head, |b, head| {
            b.iter(|| {
                // Uninitialised, as the server's: no cost to make.
                let mut fields = [MaybeUninit::uninit(); 64];
                let scanned = scan(black_box(head), &mut fields).unwrap().unwrap();
                assert_eq!(scanned.len, head.len());
                black_box(scanned.fields.len())
            })
        });
        group.bench_with_input(BenchmarkId::new("httparse", name), head, |b, head| {
            b.iter(|| {
                let mut fields = [MaybeUninit::uninit(); 64];
                let mut req = httparse::Request::new(&mut []);
                let len = req
                    .parse_with_uninit_headers(black_box(head), &mut fields)
                    .unwrap();
                assert_eq!(len, httparse::Status::Complete(head.len()));
                black_box(req.headers.len())
            })
        });
    }
    group.finish();
}

/// Queries as routes read them: a search for `&` then `=` in each pair.
const QUERIES: [&str; 3] = [
    "kind=ascii",
    "kind=latin1&body=rope",
    "chunks=16&every=250&kind=twobyte&body=flat",
];

/// The query's byte search (`h1::find_byte`, eight bytes at a time)
/// against `memchr`, which it is written in place of: it is kept only
/// while it is the faster on queries of these lengths.
fn find_byte(c: &mut Criterion) {
    let mut group = c.benchmark_group("find_byte");
    let split = |query: &str, find: fn(&[u8], u8) -> Option<usize>| {
        let (mut rest, mut found) = (query.as_bytes(), 0);
        loop {
            let end = find(rest, b'&').unwrap_or(rest.len());
            found += find(&rest[..end], b'=').map_or(0, |at| at + 1);
            if end == rest.len() {
                return found;
            }
            rest = &rest[end + 1..];
        }
    };
    for query in QUERIES {
        let want = split(query, |s, b| s.iter().position(|&x| x == b));
        group.throughput(Throughput::Bytes(query.len() as u64));
        for (name, find) in [
            (
                "words",
                unflat_server::h1::find_byte as fn(&[u8], u8) -> Option<usize>,
            ),
            ("memchr", |s: &[u8], b| memchr::memchr(b, s)),
        ] {
            group.bench_with_input(BenchmarkId::new(name, query.len()), query, |b, query| {
                b.iter(|| assert_eq!(split(black_box(query), find), want))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, head_scan, find_byte);
criterion_main!(benches);
