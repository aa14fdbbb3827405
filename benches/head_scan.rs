//! The request head's scanner (`h1::scan`, one walk) against httparse's
//! `Request::parse_with_uninit_headers`, which it stands in for and answers
//! alike (server/tests/suite/head_scan.rs, the `request_head` fuzz target): the time to
//! parse each of the heads `benches/instructions.py` sends — a plain one,
//! TechEmpower's, one with a query — with room for 64 fields.
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

criterion_group!(benches, head_scan);
criterion_main!(benches);
