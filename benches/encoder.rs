//! `cargo bench --bench encoder`: the direct encoder against the flatten
//! reference, a plain memcpy of the same bytes, and encoding_rs over the text
//! already flat.
//!
//! Groups (throughput in output bytes):
//! - `head`: a response head (`unflat::head::Head`, 13 pieces, ~170 bytes)
//!   as latin1;
//! - `body/{kind}/{repr}`: bodies of 4 … 102400 characters of each kind
//!   (`ascii` 'a', `latin1` 'é', `twobyte` '€') as a ropey rope (`ropey`) or
//!   as a concatenation of 16 pieces in the kind's own representation
//!   (`pieces`: one-byte for ascii and latin1, two-byte for twobyte), as utf8.
//!
//! Variants: `direct` (unflat::write), `flatten` (flatten then write),
//! `memcpy` (copy of the encoded bytes from a flat buffer), `encoding_rs_flat`
//! (encoding_rs's converter over the flat text, `pieces` only).
//!
//! `python3 benches/encoder_table.py` turns the results into the table in
//! `docs/encoder.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::SystemTime;
use unflat::flatten::flatten_then_write;

use unflat::head::{DateLine, Head, HeaderName, HeaderValue, Line, Persistence, Status};
use unflat::{size, storage_size, write, Encoding, Mode, Piece, Rope};

const LENS: [usize; 5] = [4, 64, 1024, 16384, 102400];
const PIECES: usize = 16;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(400))
        .measurement_time(Duration::from_millis(1200))
        .sample_size(30)
}

fn head(c: &mut Criterion) {
    // A head like the server's for /end-string/102400: 13 pieces, ~170 B.
    let content_type = Line::parse("Content-Type", "text/plain; charset=utf-8").unwrap();
    let keep_alive = Line::parse("Keep-Alive", "timeout=5").unwrap();
    let date = DateLine::at(SystemTime::now());
    let mut rope = Head::new(Status::OK, false);
    rope.line(&content_type).unwrap();
    let server = (
        HeaderName::new("Server").unwrap(),
        HeaderValue::new(b"unflat").unwrap(),
    );
    rope.field(server.0, server.1).unwrap();
    rope.date(&date)
        .content_length(102400)
        .unwrap()
        .persistence(Persistence::KeepAlive(&keep_alive));
    let mut pieces = 0;
    let _ = rope.for_each_piece(&mut |_| {
        pieces += 1;
        std::ops::ControlFlow::Continue(())
    });
    assert_eq!(pieces, 13);
    let n = size(&rope, Encoding::Latin1);
    let mut flat = vec![0; n];
    write(&rope, Encoding::Latin1, Mode::Strict, &mut flat).unwrap();
    let mut dst = vec![0u8; n];
    let mut g = c.benchmark_group("head");
    g.throughput(Throughput::Bytes(n as u64));
    g.bench_function("direct", |b| {
        b.iter(|| write(black_box(&rope), Encoding::Latin1, Mode::Strict, &mut dst).unwrap())
    });
    g.bench_function("flatten", |b| {
        b.iter(|| {
            flatten_then_write(black_box(&rope), Encoding::Latin1, Mode::Strict, &mut dst).unwrap()
        })
    });
    g.bench_function("memcpy", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&flat)))
    });
    g.finish();
}

/// Where the `memcpy` baseline copies to: a buffer placed so that its start
/// is 2 KiB from the source's within a page. glibc copies a few KiB and up
/// with `rep movsb`, which on some x86 cores slows down many-fold when
/// source and destination share their offset within a page (seen on the
/// development machine: 16 KiB at 1.8 GB/s instead of 40); the baseline is
/// meant to be the memory's speed, not that.
struct Landing {
    buf: Vec<u8>,
    at: usize,
}

impl Landing {
    fn new(src: &[u8]) -> Landing {
        let buf = vec![0u8; src.len() + 4096];
        let want = (src.as_ptr() as usize + 2048) % 4096;
        let at = (want + 4096 - buf.as_ptr() as usize % 4096) % 4096;
        Landing { buf, at }
    }

    fn copy(&mut self, src: &[u8]) {
        self.buf[self.at..self.at + src.len()].copy_from_slice(src);
    }
}

/// The body text of one kind, flat, as UTF-16 code units.
fn body_units(kind: &str, len: usize) -> Vec<u16> {
    let c = match kind {
        "ascii" => 'a',
        "latin1" => 'é',
        _ => '€',
    };
    vec![c as u16; len]
}

fn bodies(c: &mut Criterion) {
    for kind in ["ascii", "latin1", "twobyte"] {
        bench_body(c, kind, "ropey");
        bench_body(c, kind, "pieces");
    }
}

fn bench_body(c: &mut Criterion, kind: &str, repr: &str) {
    let mut g = c.benchmark_group(format!("body/{kind}/{repr}"));
    for len in LENS {
        let units = body_units(kind, len);
        let text = String::from_utf16(&units).unwrap();
        let one_byte: Vec<u8> = units.iter().map(|&u| u as u8).collect();
        let ropey = ropey::Rope::from_str(&text);
        // The concatenation of PIECES pieces in the kind's representation.
        let chunk = len.div_ceil(PIECES).max(1);
        let pieces: Vec<Piece<'_>> = if kind == "twobyte" {
            units.chunks(chunk).map(Piece::TwoByte).collect()
        } else {
            one_byte.chunks(chunk).map(Piece::OneByte).collect()
        };
        let pieces: &[Piece<'_>] = &pieces;
        let rope: &dyn Rope = if repr == "ropey" { &ropey } else { &pieces };

        let n = size(rope, Encoding::Utf8);
        assert_eq!(n, text.len());
        // Every variant writes into a buffer with room for the worst case,
        // as Node's stack buffer of 3 × length.
        let mut dst = vec![0u8; storage_size(rope, Encoding::Utf8)];
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_with_input(BenchmarkId::new("direct", len), &len, |b, _| {
            b.iter(|| write(black_box(rope), Encoding::Utf8, Mode::Strict, &mut dst).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("flatten", len), &len, |b, _| {
            b.iter(|| {
                flatten_then_write(black_box(rope), Encoding::Utf8, Mode::Strict, &mut dst).unwrap()
            })
        });
        let mut landing = Landing::new(text.as_bytes());
        g.bench_with_input(BenchmarkId::new("memcpy", len), &len, |b, _| {
            b.iter(|| landing.copy(black_box(text.as_bytes())))
        });
        if repr == "pieces" {
            g.bench_with_input(BenchmarkId::new("encoding_rs_flat", len), &len, |b, _| {
                b.iter(|| {
                    if kind == "twobyte" {
                        encoding_rs::mem::convert_utf16_to_utf8_partial(black_box(&units), &mut dst)
                            .1
                    } else {
                        encoding_rs::mem::convert_latin1_to_utf8_partial(
                            black_box(&one_byte),
                            &mut dst,
                        )
                        .1
                    }
                })
            });
        }
        // Check the direct output once, so a fast wrong answer cannot pass.
        let written = write(rope, Encoding::Utf8, Mode::Strict, &mut dst).unwrap();
        assert_eq!(&dst[..written], text.as_bytes());
    }
    g.finish();
}

/// The two ways to walk a ropey rope's chunks, each copying the text into
/// a flat buffer, against one `memcpy` of the same bytes: what chooses
/// `ITERATE_ABOVE` in `encoder/src/rope.rs`.
fn ropey_walk(c: &mut Criterion) {
    let mut g = c.benchmark_group("ropey_walk");
    for len in [1024, 4096, 16384, 32768, 65536, 102400] {
        let text = "a".repeat(len);
        let rope = ropey::Rope::from_str(&text);
        let mut dst = vec![0u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("look_up", len), &len, |b, _| {
            b.iter(|| {
                let rope = black_box(&rope);
                let mut at = 0;
                while at < len {
                    let (chunk, start, _, _) = rope.chunk_at_byte(at);
                    let piece = &chunk.as_bytes()[at - start..];
                    dst[at..at + piece.len()].copy_from_slice(piece);
                    at += piece.len();
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("iterate", len), &len, |b, _| {
            b.iter(|| {
                let mut at = 0;
                for chunk in black_box(&rope).chunks() {
                    dst[at..at + chunk.len()].copy_from_slice(chunk.as_bytes());
                    at += chunk.len();
                }
            })
        });
        let mut landing = Landing::new(text.as_bytes());
        g.bench_with_input(BenchmarkId::new("memcpy", len), &len, |b, _| {
            b.iter(|| landing.copy(black_box(text.as_bytes())))
        });
        g.bench_with_input(BenchmarkId::new("unflat_write", len), &len, |b, _| {
            b.iter(|| write(black_box(&rope), Encoding::Utf8, Mode::Strict, &mut dst).unwrap())
        });
    }
    g.finish();
}

criterion_group! {
    name = encoder;
    config = config();
    targets = head, bodies, ropey_walk
}
criterion_main!(encoder);
