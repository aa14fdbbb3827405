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
//! (encoding_rs's converter over the flat text, `pieces` only),
//! `simdutf_flat` (simdutf's, one-byte `pieces` only).
//!
//! The `shapes` group is the shape matrix (ropes through `&dyn Rope`); the
//! `generic` group its rows of short pieces called with the rope's own type
//! as well (`shapes_generic`).
//!
//! `python3 benches/encoder_table.py` turns the results into the table in
//! `docs/encoder-measurements.md`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::time::SystemTime;
use unflat::flatten::flatten_then_write;

use std::ops::ControlFlow;
use unflat::head::{
    DateLine, Head, HeaderName, HeaderValue, Line, Persistence, RequestMethod, Status,
};
use unflat::{size, storage_size, write, CharRange, Encoding, Mode, Piece, Rope, Shape};

const LENS: [usize; 5] = [4, 64, 1024, 16384, 102400];
const PIECES: usize = 16;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(400))
        .measurement_time(Duration::from_millis(1200))
        .sample_size(30)
}

fn head(c: &mut Criterion) {
    // A head like the server's for /end-string/102400: 11 pieces, ~170 B.
    let content_type = Line::parse("Content-Type", "text/plain; charset=utf-8").unwrap();
    let keep_alive = Line::parse("Keep-Alive", "timeout=5").unwrap();
    let date = DateLine::at(SystemTime::now());
    let mut rope = Head::new(Status::OK, RequestMethod::Other);
    rope.line(&content_type).unwrap();
    let server = (
        HeaderName::new("Server").unwrap(),
        HeaderValue::from_bytes(b"unflat").unwrap(),
    );
    rope.field(server.0, server.1).unwrap();
    rope.date(&date)
        .content_length(102400)
        .unwrap()
        .persistence(Persistence::KeepAlive(&keep_alive));
    let n = rope.max_len();
    let mut flat = vec![0; n];
    assert_eq!(rope.write(&mut flat).unwrap(), n);
    let mut dst = vec![0u8; n];
    let mut g = c.benchmark_group("head");
    g.throughput(Throughput::Bytes(n as u64));
    g.bench_function("direct", |b| {
        b.iter(|| black_box(&rope).write(&mut dst).unwrap())
    });
    g.bench_function("flatten", |b| {
        b.iter(|| {
            // Rendered into a new flat buffer first, then copied.
            let flat = black_box(&rope).to_vec().unwrap();
            dst.copy_from_slice(&flat);
        })
    });
    // Six fields whose values are ropes (text, integers and their
    // concatenations), checked in the walk that writes them.
    let id = unflat::Decimal::new(1_234_567_u64);
    let cookie = unflat::Concat::new([&"sid=", &id, &"; Path=/; HttpOnly"]);
    let etag = unflat::Concat::new([&"\"", &id, &"-v2\""]);
    let location = unflat::Concat::new([&"/users/", &id, &"/profile"]);
    let values: [(&str, &(dyn unflat::Rope + Sync)); 6] = [
        ("Content-Type", &"text/plain; charset=utf-8"),
        ("Set-Cookie", &cookie),
        ("Cache-Control", &"private, max-age=0, no-store"),
        ("ETag", &etag),
        ("Location", &location),
        ("X-Request-Count", &id),
    ];
    let mut valued = Head::new(Status::OK, RequestMethod::Other);
    for (name, value) in values {
        valued.value(HeaderName::new(name).unwrap(), value).unwrap();
    }
    valued.date(&date).content_length(3).unwrap();
    let mut valued_dst = vec![0u8; valued.max_len()];
    g.bench_function("six values", |b| {
        b.iter(|| black_box(&valued).write(&mut valued_dst).unwrap())
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
        if repr == "pieces" && kind != "twobyte" {
            // SAFETY: `dst` holds two bytes per byte of `one_byte`
            // (`storage_size` of one-byte text in UTF-8), the most UTF-8
            // that Latin-1 can take.
            assert!(dst.len() >= 2 * one_byte.len());
            g.bench_with_input(BenchmarkId::new("simdutf_flat", len), &len, |b, _| {
                b.iter(|| unsafe {
                    let src = black_box(&one_byte);
                    simdutf::convert_latin1_to_utf8(src.as_ptr(), src.len(), dst.as_mut_ptr())
                })
            });
        }
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

/// Text for the kernels: Latin-1 with every 8th byte 'é', and UTF-16 that
/// mixes characters of one, two and three UTF-8 bytes ('a', 'é', '€' in
/// turn, with runs of 'a').
fn kernel_texts(len: usize) -> (Vec<u8>, Vec<u16>) {
    let latin1 = (0..len)
        .map(|i| {
            if i % 8 == 7 {
                0xE9
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect();
    let utf16 = (0..len)
        .map(|i| match i % 16 {
            5 => 0xE9,
            11 => 0x20AC,
            _ => u16::from(b'a') + (i % 26) as u16,
        })
        .collect();
    (latin1, utf16)
}

/// The conversions the encoder runs, each by every library that offers it,
/// over text already flat: what chooses the kernels in
/// `encoder/src/kernel/mod.rs` and the lengths below which encoding_rs or a
/// loop keeps a conversion (`SIMD_MIN`, `COUNT_SIMD_MIN`).
fn kernels(c: &mut Criterion) {
    let lens = [8, 16, 32, 64, 256, 1024, 16384, 102400];
    let mut g = c.benchmark_group("kernels/latin1_to_utf8");
    for len in lens {
        let (latin1, _) = kernel_texts(len);
        let mut dst = vec![0u8; 2 * len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("encoding_rs", len), &len, |b, _| {
            b.iter(|| {
                encoding_rs::mem::convert_latin1_to_utf8_partial(black_box(&latin1), &mut dst)
            })
        });
        g.bench_with_input(BenchmarkId::new("simdutf", len), &len, |b, _| {
            // SAFETY: `dst` holds two bytes per byte of `latin1`, the most
            // UTF-8 that Latin-1 can take.
            b.iter(|| unsafe {
                let src = black_box(&latin1);
                simdutf::convert_latin1_to_utf8(src.as_ptr(), src.len(), dst.as_mut_ptr())
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("kernels/utf16_to_utf8");
    for len in lens {
        let (_, utf16) = kernel_texts(len);
        let mut dst = vec![0u8; 3 * len];
        g.throughput(Throughput::Bytes(2 * len as u64));
        g.bench_with_input(BenchmarkId::new("encoding_rs", len), &len, |b, _| {
            b.iter(|| encoding_rs::mem::convert_utf16_to_utf8_partial(black_box(&utf16), &mut dst))
        });
        g.bench_with_input(BenchmarkId::new("simdutf", len), &len, |b, _| {
            // SAFETY: `dst` holds three bytes per unit of `utf16`, the most
            // UTF-8 that UTF-16 can take.
            b.iter(|| unsafe {
                let src = black_box(&utf16);
                simdutf::convert_utf16_to_utf8_with_errors(
                    src.as_ptr(),
                    src.len(),
                    dst.as_mut_ptr(),
                )
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("kernels/latin1_to_utf16");
    for len in lens {
        let (latin1, _) = kernel_texts(len);
        let mut dst = vec![0u16; len];
        let mut bytes = vec![0u8; 2 * len];
        g.throughput(Throughput::Bytes(len as u64));
        // The loop of `unflat::kernel::convert_latin1_to_utf16le` below its
        // simdutf threshold (and into a destination not aligned for units).
        g.bench_with_input(BenchmarkId::new("loop", len), &len, |b, _| {
            b.iter(|| {
                for (d, &x) in bytes.chunks_exact_mut(2).zip(black_box(&latin1)) {
                    d.copy_from_slice(&[x, 0]);
                }
            })
        });
        g.bench_with_input(BenchmarkId::new("encoding_rs", len), &len, |b, _| {
            b.iter(|| encoding_rs::mem::convert_latin1_to_utf16(black_box(&latin1), &mut dst))
        });
        g.bench_with_input(BenchmarkId::new("simdutf", len), &len, |b, _| {
            // SAFETY: `dst` holds one unit per byte of `latin1`.
            b.iter(|| unsafe {
                let src = black_box(&latin1);
                simdutf::convert_latin1_to_utf16le(src.as_ptr(), src.len(), dst.as_mut_ptr())
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("kernels/utf8_to_utf16");
    for len in lens {
        let (_, utf16) = kernel_texts(len);
        let text = String::from_utf16(&utf16).expect("no surrogates");
        let mut dst = vec![0u16; text.len()];
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::new("encoding_rs", len), &len, |b, _| {
            b.iter(|| encoding_rs::mem::convert_str_to_utf16(black_box(&text), &mut dst))
        });
        g.bench_with_input(BenchmarkId::new("simdutf", len), &len, |b, _| {
            // SAFETY: `text` is valid UTF-8 and `dst` holds one unit per
            // byte of it.
            b.iter(|| unsafe {
                let src = black_box(&text);
                simdutf::convert_valid_utf8_to_utf16le(src.as_ptr(), src.len(), dst.as_mut_ptr())
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("kernels/count_high_bytes");
    for len in lens {
        let (latin1, _) = kernel_texts(len);
        g.throughput(Throughput::Bytes(len as u64));
        // The loop of `unflat::kernel::count_high_bytes` below its simdutf
        // threshold, spelled out here to be timed at every length.
        g.bench_with_input(BenchmarkId::new("loop", len), &len, |b, _| {
            b.iter(|| {
                black_box(&latin1)
                    .chunks(255)
                    .map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + (b >> 7))))
                    .sum::<usize>()
            })
        });
        g.bench_with_input(BenchmarkId::new("simdutf", len), &len, |b, _| {
            b.iter(|| simdutf::utf8_length_from_latin1(black_box(&latin1)) - len)
        });
        g.bench_with_input(BenchmarkId::new("unflat_size", len), &len, |b, _| {
            b.iter(|| size(&unflat::Latin1(black_box(&latin1[..])), Encoding::Utf8))
        });
    }
    g.finish();
    let mut g = c.benchmark_group("kernels/ascii_prefix");
    for len in lens {
        let text = vec![b'a'; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("encoding_rs", len), &len, |b, _| {
            b.iter(|| encoding_rs::Encoding::ascii_valid_up_to(black_box(&text)))
        });
        g.bench_with_input(BenchmarkId::new("simdutf", len), &len, |b, _| {
            b.iter(|| simdutf::validate_ascii_with_errors(black_box(&text)).count)
        });
    }
    g.finish();
}

/// One-byte text that the rope declares ASCII: its shape says so, so no
/// byte is read to size it (as the head's pieces do).
struct AsciiKnown<'a>(&'a [u8]);

impl Rope for AsciiKnown<'_> {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        visit(Piece::OneByte(self.0))
    }

    fn shape(&self) -> Shape {
        Shape {
            range: CharRange::Ascii,
            ..Shape::of_piece(Piece::OneByte(self.0))
        }
    }
}

/// The piece kinds of the shape matrix.
const SHAPE_KINDS: [&str; 6] = ["ascii_known", "one_byte", "latin1", "str", "utf16", "ropey"];

/// (piece length, piece count) of the shape matrix: 1 B to 64 KiB, 1 to
/// 10 000 pieces, at most 1 MiB in all. A ropey rope chooses its own
/// chunks, so its rows are by total length only (the shapes of one piece,
/// and 64 KiB × 16).
fn shapes_of(kind: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for len in [1, 16, 256, 4096, 65536] {
        for count in [1, 16, 256, 4096, 10_000] {
            let one_piece = count == 1 || (len, count) == (65536, 16);
            if len * count <= 1 << 20 && (kind != "ropey" || one_piece) {
                out.push((len, count));
            }
        }
    }
    out
}

/// The character at position `i` of the matrix's text: mostly ASCII, with
/// one non-ASCII character in 8 for the kinds that can hold one ('é' for
/// Latin-1; 'é' and '€' in turn for UTF-8 and UTF-16).
fn shape_char(kind: &str, i: usize) -> char {
    let ascii = char::from(b'a' + (i % 26) as u8);
    match (kind, i % 16) {
        ("latin1", 7 | 15) | ("str" | "utf16" | "ropey", 7) => 'é',
        ("str" | "utf16" | "ropey", 15) => '€',
        _ => ascii,
    }
}

/// `count` pieces of `len` units each in the kind's representation (a UTF-8
/// piece holds a character only where it fits whole, ASCII elsewhere).
enum ShapePieces {
    Bytes(Vec<Vec<u8>>),
    Str(Vec<String>),
    Units(Vec<Vec<u16>>),
}

fn shape_pieces(kind: &str, len: usize, count: usize) -> ShapePieces {
    let mut i = 0;
    let mut next = || {
        i += 1;
        shape_char(kind, i - 1)
    };
    match kind {
        "utf16" => ShapePieces::Units(
            (0..count)
                .map(|_| (0..len).map(|_| next() as u16).collect())
                .collect(),
        ),
        "str" | "ropey" => ShapePieces::Str(
            (0..count)
                .map(|_| {
                    let mut p = String::with_capacity(len);
                    while p.len() < len {
                        let c = next();
                        p.push(if p.len() + c.len_utf8() <= len {
                            c
                        } else {
                            'a'
                        });
                    }
                    p
                })
                .collect(),
        ),
        _ => ShapePieces::Bytes(
            (0..count)
                .map(|_| (0..len).map(|_| next() as u8).collect())
                .collect(),
        ),
    }
}

/// simdutf over the whole text flat, where simdutf has the conversion:
/// one-byte text to UTF-8 or UTF-16LE, UTF-8 to UTF-16LE, UTF-16 to UTF-8
/// (the others are a copy, or a lossy conversion simdutf does not offer).
/// `units` is scratch for UTF-16 output.
fn simdutf_flat(
    flat: &ShapeFlat,
    target: Encoding,
    dst: &mut [u8],
    units: &mut [u16],
) -> Option<usize> {
    // SAFETY (every call): `dst` holds three bytes, and `units` one unit,
    // per source unit: the most any of these conversions writes.
    unsafe {
        Some(match (flat, target) {
            (ShapeFlat::Bytes(b), Encoding::Utf8) => {
                simdutf::convert_latin1_to_utf8(b.as_ptr(), b.len(), dst.as_mut_ptr())
            }
            (ShapeFlat::Bytes(b), Encoding::Utf16Le) => {
                simdutf::convert_latin1_to_utf16le(b.as_ptr(), b.len(), units.as_mut_ptr())
            }
            (ShapeFlat::Str(s), Encoding::Utf16Le) => {
                simdutf::convert_valid_utf8_to_utf16le(s.as_ptr(), s.len(), units.as_mut_ptr())
            }
            (ShapeFlat::Units(u), Encoding::Utf8) => {
                simdutf::convert_valid_utf16_to_utf8(u.as_ptr(), u.len(), dst.as_mut_ptr())
            }
            _ => return None,
        })
    }
}

/// The matrix's text flat, in its kind's representation.
enum ShapeFlat {
    Bytes(Vec<u8>),
    Str(String),
    Units(Vec<u16>),
}

/// The shape matrix: for each piece kind, target encoding and shape,
/// `direct` (unflat::write), `flatten` (flatten then write), `memcpy` (a
/// copy of the output bytes) and `simdutf_flat` (simdutf over the flat
/// text). `python3 benches/encoder_table.py --shapes` draws the table and
/// the heat map of docs/encoder-measurements.md from it.
fn shapes(c: &mut Criterion) {
    for kind in SHAPE_KINDS {
        for target in [Encoding::Utf8, Encoding::Latin1, Encoding::Utf16Le] {
            let mut g = c.benchmark_group(format!("shapes/{kind}/{target}"));
            for (len, count) in shapes_of(kind) {
                let pieces = shape_pieces(kind, len, count);
                let ropey_rope;
                let known: Vec<AsciiKnown<'_>>;
                let views: Vec<Piece<'_>>;
                let (rope, flat): (&dyn Rope, ShapeFlat) = match &pieces {
                    ShapePieces::Bytes(b) if kind == "ascii_known" => {
                        known = b.iter().map(|p| AsciiKnown(p)).collect();
                        (&known, ShapeFlat::Bytes(b.concat()))
                    }
                    ShapePieces::Bytes(b) => {
                        views = b.iter().map(|p| Piece::OneByte(p)).collect();
                        (&views, ShapeFlat::Bytes(b.concat()))
                    }
                    ShapePieces::Str(s) if kind == "ropey" => {
                        ropey_rope = ropey::Rope::from_str(&s.concat());
                        (&ropey_rope, ShapeFlat::Str(s.concat()))
                    }
                    ShapePieces::Str(s) => {
                        views = s.iter().map(|p| Piece::Utf8(p)).collect();
                        (&views, ShapeFlat::Str(s.concat()))
                    }
                    ShapePieces::Units(u) => {
                        views = u.iter().map(|p| Piece::TwoByte(p)).collect();
                        (&views, ShapeFlat::Units(u.concat()))
                    }
                };
                let mut dst = vec![0u8; storage_size(rope, target)];
                let n = write(rope, target, Mode::Lossy, &mut dst).unwrap();
                let output = dst[..n].to_vec();
                let mut check = vec![0u8; dst.len()];
                let m = flatten_then_write(rope, target, Mode::Lossy, &mut check).unwrap();
                assert_eq!(&check[..m], &output[..], "{kind} {target} {len}x{count}");
                let id = format!("{len}x{count}");
                g.throughput(Throughput::Bytes(n as u64));
                g.bench_function(BenchmarkId::new("direct", &id), |b| {
                    b.iter(|| write(black_box(rope), target, Mode::Lossy, &mut dst).unwrap())
                });
                g.bench_function(BenchmarkId::new("flatten", &id), |b| {
                    b.iter(|| {
                        flatten_then_write(black_box(rope), target, Mode::Lossy, &mut dst).unwrap()
                    })
                });
                let mut landing = Landing::new(&output);
                g.bench_function(BenchmarkId::new("memcpy", &id), |b| {
                    b.iter(|| landing.copy(black_box(&output)))
                });
                let mut units = vec![0u16; dst.len()];
                if simdutf_flat(&flat, target, &mut dst, &mut units).is_some() {
                    g.bench_function(BenchmarkId::new("simdutf_flat", &id), |b| {
                        b.iter(|| simdutf_flat(black_box(&flat), target, &mut dst, &mut units))
                    });
                }
            }
            g.finish();
        }
    }
}

/// The generic rows of the shape matrix: the same texts as the `shapes`
/// group's one-byte, Latin-1 and `&str` kinds, in pieces of 1 to 64 bytes,
/// as a `&[Piece]` (one-byte kinds) or a `&[&str]` passed to `write` by its
/// own type — the call a caller with a concrete rope makes, monomorphised
/// for it — and through `&dyn Rope` as the `shapes` group passes them.
/// Shapes are piece length × piece count; a length of `5-50` is pieces of
/// 5 to 50 bytes in turn (a response head's sizes).
const GENERIC_KINDS: [&str; 3] = ["one_byte", "latin1", "str"];

/// (label, piece lengths) of the generic rows.
fn generic_shapes() -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for count in [16, 200, 1000] {
        for len in [1, 4, 16, 64] {
            out.push((format!("{len}x{count}"), vec![len; count]));
        }
        // 5, 28, 51 → 5, … : lengths 5 to 50 spread evenly, not in order.
        let mixed = (0..count).map(|i| 5 + (i * 23) % 46).collect();
        out.push((format!("5-50x{count}"), mixed));
    }
    out
}

/// The generic rows: `direct` and `flatten` called with the rope's own
/// type, `direct_dyn` and `flatten_dyn` with the same rope as `&dyn Rope`,
/// into UTF-8 and latin1, into a destination with room for the worst case;
/// `direct_exact` and `flatten_exact` called with the rope's own type into
/// exactly the encoded size.
fn shapes_generic(c: &mut Criterion) {
    for kind in GENERIC_KINDS {
        for target in [Encoding::Utf8, Encoding::Latin1] {
            let mut g = c.benchmark_group(format!("generic/{kind}/{target}"));
            for (id, lens) in generic_shapes() {
                // Built as `shape_pieces` builds the matrix's: one-byte
                // pieces of `len` characters, `&str` pieces of `len` bytes.
                let mut i = 0;
                let mut next = || {
                    i += 1;
                    shape_char(kind, i - 1)
                };
                let mut texts: Vec<String> = Vec::new();
                let mut bytes: Vec<Vec<u8>> = Vec::new();
                for &len in &lens {
                    if kind == "str" {
                        let mut p = String::with_capacity(len);
                        while p.len() < len {
                            let c = next();
                            let fits = p.len() + c.len_utf8() <= len;
                            p.push(if fits { c } else { 'a' });
                        }
                        texts.push(p);
                    } else {
                        bytes.push((0..len).map(|_| next() as u8).collect());
                    }
                }
                let pieces: Vec<Piece<'_>> = bytes.iter().map(|b| Piece::OneByte(b)).collect();
                let strs: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
                if kind == "str" {
                    bench_generic(&mut g, &id, &strs[..], target);
                } else {
                    bench_generic(&mut g, &id, &pieces[..], target);
                }
            }
            g.finish();
        }
    }
}

fn bench_generic<R: Rope + ?Sized>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: &str,
    rope: &R,
    target: Encoding,
) {
    let dynamic: &dyn Rope = &rope;
    let mut dst = vec![0u8; storage_size(rope, target)];
    let n = write(rope, target, Mode::Lossy, &mut dst).unwrap();
    let output = dst[..n].to_vec();
    let mut check = vec![0u8; dst.len()];
    let m = flatten_then_write(rope, target, Mode::Lossy, &mut check).unwrap();
    assert_eq!(&check[..m], &output[..], "{id} {target}");
    let m = write(dynamic, target, Mode::Lossy, &mut check).unwrap();
    assert_eq!(&check[..m], &output[..], "{id} {target} dyn");
    g.throughput(Throughput::Bytes(n as u64));
    g.bench_function(BenchmarkId::new("direct", id), |b| {
        b.iter(|| write(black_box(rope), target, Mode::Lossy, &mut dst).unwrap())
    });
    g.bench_function(BenchmarkId::new("flatten", id), |b| {
        b.iter(|| flatten_then_write(black_box(rope), target, Mode::Lossy, &mut dst).unwrap())
    });
    g.bench_function(BenchmarkId::new("direct_dyn", id), |b| {
        b.iter(|| write(black_box(dynamic), target, Mode::Lossy, &mut dst).unwrap())
    });
    g.bench_function(BenchmarkId::new("flatten_dyn", id), |b| {
        b.iter(|| flatten_then_write(black_box(dynamic), target, Mode::Lossy, &mut dst).unwrap())
    });
    // Into exactly the encoded size, as a caller that sized its buffer
    // with `size` or `plan` does: UTF-8 from one-byte text has to be
    // counted before it is written.
    let exact = &mut dst[..n];
    g.bench_function(BenchmarkId::new("direct_exact", id), |b| {
        b.iter(|| write(black_box(rope), target, Mode::Lossy, exact).unwrap())
    });
    g.bench_function(BenchmarkId::new("flatten_exact", id), |b| {
        b.iter(|| flatten_then_write(black_box(rope), target, Mode::Lossy, exact).unwrap())
    });
}

/// The matrix has ~1000 cells: shorter runs per cell than the other groups.
fn shapes_config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(300))
        .sample_size(10)
}

criterion_group! {
    name = encoder;
    config = config();
    targets = head, bodies, ropey_walk, kernels
}
criterion_group! {
    name = matrix;
    config = shapes_config();
    targets = shapes, shapes_generic
}
criterion_main!(encoder, matrix);
