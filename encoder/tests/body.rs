//! `RopeBody` (feature `http-body`): the data frames of a ropey rope point
//! into the rope's own chunks, and hyper hands them to the socket as iovecs
//! there; random ropes of every kind, served by a hyper server on
//! 127.0.0.1 and read back with hyper's client, arrive as the flattened
//! text, byte for byte.
#![cfg(feature = "http-body")]

use std::convert::Infallible;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::{BodyExt, Empty};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use proptest::prelude::*;
use unflat::body::RopeBody;
use unflat::flatten::{flatten, Flat};
use unflat::{Encoding, Latin1, Mode, Rope, Utf16};

/// The address ranges of a ropey rope's chunks.
fn chunk_ranges(rope: &ropey::Rope) -> Vec<Range<usize>> {
    rope.chunks()
        .map(|c| c.as_ptr() as usize..c.as_ptr() as usize + c.len())
        .collect()
}

fn inside_one(ranges: &[Range<usize>], ptr: usize, len: usize) -> bool {
    ranges.iter().any(|r| r.start <= ptr && ptr + len <= r.end)
}

fn poll_all(body: &mut RopeBody) -> Vec<Bytes> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut frames = Vec::new();
    while let Poll::Ready(Some(frame)) = Pin::new(&mut *body).poll_frame(&mut cx) {
        frames.push(frame.unwrap().into_data().unwrap());
    }
    frames
}

fn big_rope() -> (ropey::Rope, String) {
    let text = "unflat: zero copies, d\u{e9}j\u{e0} vu \u{2713} \u{1F600}\n".repeat(2000);
    (ropey::Rope::from_str(&text), text)
}

#[test]
fn ropey_frames_point_into_the_ropes_own_chunks() {
    let (rope, text) = big_rope();
    let ranges = chunk_ranges(&rope);
    assert!(ranges.len() > 50, "a rope of many chunks");
    let mut body = RopeBody::from(rope.clone());
    assert!(body.is_shared());
    assert_eq!(body.size_hint().exact(), Some(text.len() as u64));
    let frames = poll_all(&mut body);
    for f in &frames {
        assert!(
            inside_one(&ranges, f.as_ptr() as usize, f.len()),
            "a frame of {} bytes outside the rope's chunks",
            f.len()
        );
    }
    assert_eq!(frames.concat(), text.as_bytes());
    // The frames keep the chunks alive after the rope and the body are gone.
    drop((rope, body));
    assert_eq!(frames.concat(), text.as_bytes());
}

/// An in-memory connection for hyper: reads out one request, records every
/// slice hyper hands to `write_vectored`.
struct Recorder {
    request: Vec<u8>,
    written: Vec<u8>,
    slices: Vec<(usize, usize)>,
}

impl hyper::rt::Read for Recorder {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // The whole request, then nothing more: the request says
        // `Connection: close`, so hyper answers, closes, and reads no more.
        if this.request.is_empty() {
            return Poll::Pending;
        }
        buf.put_slice(&std::mem::take(&mut this.request));
        Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for Recorder {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.slices.push((buf.as_ptr() as usize, buf.len()));
        this.written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let mut n = 0;
        for b in bufs {
            this.slices.push((b.as_ptr() as usize, b.len()));
            this.written.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[test]
fn hyper_writes_the_ropes_chunks_as_iovecs() {
    let (rope, text) = big_rope();
    let ranges = chunk_ranges(&rope);
    let mut io = Recorder {
        request: b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".to_vec(),
        written: Vec::new(),
        slices: Vec::new(),
    };
    let served = rope.clone();
    let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
        let body = RopeBody::from(served.clone());
        async move { Ok::<_, Infallible>(Response::new(body)) }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(http1::Builder::new().serve_connection(&mut io, service))
        .unwrap();

    let head_len = io
        .written
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap()
        + 4;
    let head = String::from_utf8_lossy(&io.written[..head_len]).to_lowercase();
    assert!(
        head.contains(&format!("content-length: {}\r\n", text.len())),
        "{head}"
    );
    assert_eq!(&io.written[head_len..], text.as_bytes());
    // Every body byte went to the socket from the rope's own memory.
    let shared: usize = io
        .slices
        .iter()
        .filter(|&&(ptr, len)| inside_one(&ranges, ptr, len))
        .map(|&(_, len)| len)
        .sum();
    assert_eq!(
        shared,
        text.len(),
        "body bytes written from the rope's chunks"
    );
}

/// One part of a generated rope.
#[derive(Clone, Debug)]
enum Part {
    OneByte(Vec<u8>),
    Utf8(String),
    TwoByte(Vec<u16>),
    Ropey(String),
}

impl Part {
    fn boxed(&self) -> Box<dyn Rope + Send + Sync> {
        match self {
            Part::OneByte(b) => Box::new(Latin1(b.clone())),
            Part::Utf8(s) => Box::new(s.clone()),
            Part::TwoByte(u) => Box::new(Utf16(u.clone())),
            Part::Ropey(s) => Box::new(ropey::Rope::from_str(s)),
        }
    }
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Part::OneByte),
        ".{0,200}".prop_map(Part::Utf8),
        // Any code units, lone surrogates included.
        prop::collection::vec(any::<u16>(), 0..200).prop_map(Part::TwoByte),
        "[a-z\u{e9}\u{20ac}\u{1F600} ]{0,3000}".prop_map(Part::Ropey),
    ]
}

/// What `encoding` makes of the flattened rope, by the flatten reference
/// and std.
fn expected(rope: &dyn Rope, encoding: Encoding) -> Vec<u8> {
    let units: Vec<u16> = match flatten(rope) {
        Flat::OneByte(b) => b.iter().map(|&b| u16::from(b)).collect(),
        Flat::TwoByte(u) => u,
    };
    match encoding {
        Encoding::Utf8 => String::from_utf16_lossy(&units).into_bytes(),
        Encoding::Utf16Le => units.iter().flat_map(|u| u.to_le_bytes()).collect(),
        Encoding::Latin1 | Encoding::Ascii => units.iter().map(|&u| u as u8).collect(),
    }
}

/// Serves `make()` once on 127.0.0.1 with hyper, fetches it with hyper's
/// client, and returns the `Content-Length` and the body.
fn fetch(make: impl Fn() -> RopeBody + Send + Sync + 'static) -> (Option<u64>, Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let make = Arc::new(make);
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(move |_req: Request<hyper::body::Incoming>| {
                let body = make();
                async move { Ok::<_, Infallible>(Response::new(body)) }
            });
            http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
                .unwrap();
        });
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let client = tokio::spawn(conn);
        let req = Request::get("/")
            .header("host", "127.0.0.1")
            .header("connection", "close")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let res = sender.send_request(req).await.unwrap();
        assert_eq!(res.status(), 200);
        let length = res
            .headers()
            .get("content-length")
            .map(|v| v.to_str().unwrap().parse().unwrap());
        let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
        server.await.unwrap();
        client.await.unwrap().unwrap();
        (length, body)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_ropes_through_hyper_arrive_as_the_flattened_text(
        parts in prop::collection::vec(part(), 0..8),
        frame in prop_oneof![4usize..64, 64usize..40_000],
        encoding in prop_oneof![Just(Encoding::Utf8), Just(Encoding::Utf16Le), Just(Encoding::Latin1)],
    ) {
        let rope: Arc<Vec<Box<dyn Rope + Send + Sync>>> =
            Arc::new(parts.iter().map(Part::boxed).collect());
        let want = expected(&rope, encoding);
        let served = rope.clone();
        let (length, got) = fetch(move || {
            RopeBody::encoded(served.clone(), encoding, Mode::Lossy).unwrap().frame_size(frame)
        });
        prop_assert_eq!(length, Some(want.len() as u64));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn ropey_ropes_through_hyper_arrive_whole(text in "[a-z\u{e9}\u{20ac}\u{1F600}\n]{0,20000}") {
        let rope = ropey::Rope::from_str(&text);
        // Bodies made: one, and shared (not encoded).
        let made = Arc::new(Mutex::new(0));
        let counted = made.clone();
        let (length, got) = fetch(move || {
            let body = RopeBody::from(rope.clone());
            assert!(body.is_shared());
            *counted.lock().unwrap() += 1;
            body
        });
        prop_assert_eq!(*made.lock().unwrap(), 1);
        prop_assert_eq!(length, Some(text.len() as u64));
        prop_assert_eq!(got, text.as_bytes());
    }
}
