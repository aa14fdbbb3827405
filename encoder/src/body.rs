//! [`RopeBody`]: any rope as an [`http_body::Body`], for hyper and the rest
//! of the `http-body` ecosystem, never flattened (feature `http-body`).
//!
//! Two ways to make the data frames:
//!
//! - **Shared chunks.** A [`ropey::Rope`] whose chunks already are the output
//!   (UTF-8, or an ASCII rope in latin1/ascii) is sent chunk by chunk: each
//!   frame is a [`Bytes`] made with [`Bytes::from_owner`] from a clone of the
//!   rope (an `Arc` increment) that exposes one chunk, so the frame points
//!   into the rope's own memory. hyper's vectored writes hand those frames
//!   to the socket as iovecs: no byte is copied in user space.
//! - **Encoded frames.** Any other rope — one-byte and two-byte text,
//!   concatenations, a ropey rope transcoded — is encoded by the resumable
//!   [`Encoder`] into frames of at most [`DEFAULT_FRAME`] bytes (or
//!   [`RopeBody::frame_size`]), so the memory a body costs is bounded by the
//!   frame size, not by the body. A frame's buffer is reclaimed for the next
//!   one once the previous frame has been written and dropped.
//!
//! The body's size is known before the first frame ([`crate::plan`]), so
//! [`Body::size_hint`] is exact and hyper sends a `Content-Length`.

use std::any::Any;
use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

use crate::encoding::{EncodeError, Encoding, Mode};
use crate::measure::{plan, EncodePath};
use crate::resume::Encoder;
use crate::rope::Rope;

/// The default most bytes of one encoded frame ([`RopeBody::frame_size`]
/// changes it). A ropey rope's frames are its chunks, not encoded frames.
///
/// ```
/// use std::pin::Pin;
/// use std::task::{Context, Poll, Waker};
/// use http_body::Body as _;
/// use unflat::body::{RopeBody, DEFAULT_FRAME};
/// use unflat::Utf16;
///
/// let mut body = RopeBody::new(Utf16(vec![0x41; 40_000])); // 40 000 bytes as UTF-8
/// let mut cx = Context::from_waker(Waker::noop());
/// let mut frames = Vec::new();
/// while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
///     frames.push(frame.unwrap().into_data().unwrap().len());
/// }
/// assert_eq!(frames, [DEFAULT_FRAME, DEFAULT_FRAME, 40_000 - 2 * DEFAULT_FRAME]);
/// ```
pub const DEFAULT_FRAME: usize = 16 * 1024;

/// A rope served as a response body. See the [module documentation](self).
///
/// ```
/// use std::pin::Pin;
/// use std::task::{Context, Poll, Waker};
/// use http_body::Body as _;
/// use unflat::body::RopeBody;
/// use unflat::{Latin1, Rope, Utf16};
///
/// // Owned pieces of three kinds, one rope.
/// let parts: Vec<Box<dyn Rope + Send + Sync>> = vec![
///     Box::new("<p>"),
///     Box::new(Latin1(b"cr\xe8me".to_vec())),
///     Box::new(Utf16(vec![0x20, 0x20AC, 0x3C, 0x2F, 0x70, 0x3E])),
/// ];
/// let mut body = RopeBody::new(parts).frame_size(8);
/// assert_eq!(body.size_hint().exact(), Some(17));
/// let mut cx = Context::from_waker(Waker::noop());
/// let mut out = Vec::new();
/// while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
///     let data = frame.unwrap().into_data().unwrap();
///     assert!(data.len() <= 8);
///     out.extend_from_slice(&data);
/// }
/// assert_eq!(out, "<p>crème €</p>".as_bytes());
/// ```
pub struct RopeBody {
    source: Source,
    /// Bytes not yet handed out as frames.
    remaining: usize,
}

enum Source {
    /// A ropey rope whose UTF-8 chunks are the output; `at` is the byte
    /// index of the next chunk.
    Chunks { rope: ropey::Rope, at: usize },
    /// Any other rope, encoded frame by frame.
    Encoded {
        rope: Box<dyn Rope + Send>,
        encoder: Encoder,
        frame: usize,
        buf: BytesMut,
    },
}

impl RopeBody {
    /// `rope` in UTF-8. A [`ropey::Rope`] is served as shared chunks, any
    /// other rope in encoded frames.
    pub fn new<R: Rope + Send + 'static>(rope: R) -> RopeBody {
        match RopeBody::encoded(rope, Encoding::Utf8, Mode::Strict) {
            Ok(body) => body,
            Err(e) => unreachable!("utf8 refuses no character: {e}"),
        }
    }

    /// `rope` in `encoding`. In [`Mode::Strict`], a rope with a character
    /// the encoding cannot hold is refused here, before any frame, with
    /// [`EncodeError::Unencodable`]. A [`ropey::Rope`] whose chunks already
    /// are the output (UTF-8; ASCII text in latin1 or ascii) is served as
    /// shared chunks, any other rope in encoded frames.
    pub fn encoded<R: Rope + Send + 'static>(
        rope: R,
        encoding: Encoding,
        mode: Mode,
    ) -> Result<RopeBody, EncodeError> {
        let plan = plan(&rope, encoding, mode)?;
        let mut slot = Some(rope);
        if plan.path() == EncodePath::OneByte {
            if let Some(ropey) = (&mut slot as &mut dyn Any).downcast_mut::<Option<ropey::Rope>>() {
                let rope = ropey.take().expect("the slot is full");
                return Ok(RopeBody {
                    source: Source::Chunks { rope, at: 0 },
                    remaining: plan.size(),
                });
            }
        }
        let rope = slot.expect("the slot is full");
        Ok(RopeBody {
            source: Source::Encoded {
                rope: Box::new(rope),
                // The plan has made the strict check already.
                encoder: Encoder::from_plan(&plan),
                frame: DEFAULT_FRAME,
                buf: BytesMut::new(),
            },
            remaining: plan.size(),
        })
    }

    /// Sets the most bytes of one encoded frame (at least
    /// [`Encoder::MIN_DST`]). Shared chunks are sent as they are, whatever
    /// their size.
    pub fn frame_size(mut self, bytes: usize) -> RopeBody {
        if let Source::Encoded { frame, .. } = &mut self.source {
            *frame = bytes.max(Encoder::MIN_DST);
        }
        self
    }

    /// Bytes not yet handed out as frames.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    /// True when the frames point into the rope's own chunks.
    pub fn is_shared(&self) -> bool {
        matches!(self.source, Source::Chunks { .. })
    }

    /// The next data frame, or `None` at the end.
    fn next_frame(&mut self) -> Option<Bytes> {
        if self.remaining == 0 {
            return None;
        }
        let data = match &mut self.source {
            Source::Chunks { rope, at } => {
                let (chunk, start, _, _) = rope.chunk_at_byte(*at);
                let len = chunk.len() - (*at - start);
                let shared = Bytes::from_owner(HeldChunk {
                    rope: rope.clone(),
                    at: *at,
                    len,
                });
                *at += len;
                shared
            }
            Source::Encoded {
                rope,
                encoder,
                frame,
                buf,
            } => {
                // The rest of the output is exactly `remaining` bytes, so a
                // destination of `remaining` bytes holds its next character;
                // one of `frame ≥ MIN_DST` bytes holds any character.
                let n = (*frame).min(self.remaining);
                buf.clear();
                buf.resize(n, 0);
                let step = encoder
                    .encode(&**rope, &mut buf[..])
                    .expect("checked when the body was made");
                assert!(step.written > 0, "an encoded frame makes progress");
                buf.truncate(step.written);
                buf.split().freeze()
            }
        };
        self.remaining -= data.len();
        Some(data)
    }
}

/// One chunk of a ropey rope, kept alive by a clone of the rope.
///
/// **The chunk never moves or changes while this lives.** The clone shares
/// the rope's tree (`Arc`s), which ropey never mutates while shared: an edit
/// to another clone copies the nodes it touches. This clone is never edited.
/// So the slice [`Bytes::from_owner`] reads once from `as_ref` stays valid
/// and the same for as long as the `Bytes` holds this owner.
struct HeldChunk {
    rope: ropey::Rope,
    at: usize,
    len: usize,
}

impl AsRef<[u8]> for HeldChunk {
    fn as_ref(&self) -> &[u8] {
        let (chunk, start, _, _) = self.rope.chunk_at_byte(self.at);
        &chunk.as_bytes()[self.at - start..][..self.len]
    }
}

impl From<ropey::Rope> for RopeBody {
    /// [`RopeBody::new`]: UTF-8, as shared chunks.
    fn from(rope: ropey::Rope) -> RopeBody {
        RopeBody::new(rope)
    }
}

impl Body for RopeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().next_frame().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining as u64)
    }
}

impl fmt::Debug for RopeBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RopeBody");
        match &self.source {
            Source::Chunks { at, .. } => d.field("shared_chunks_at", at),
            Source::Encoded { encoder, frame, .. } => {
                d.field("encoder", encoder).field("frame", frame)
            }
        };
        d.field("remaining", &self.remaining).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rope::{Latin1, Utf16};

    fn drain(body: &mut RopeBody) -> Vec<Bytes> {
        std::iter::from_fn(|| body.next_frame()).collect()
    }

    #[test]
    fn only_ropey_ropes_whose_chunks_are_the_output_are_shared() {
        let ascii = ropey::Rope::from_str("plain");
        let accented = ropey::Rope::from_str("caf\u{e9}");
        assert!(RopeBody::new(ascii.clone()).is_shared());
        assert!(RopeBody::new(accented.clone()).is_shared());
        assert!(RopeBody::encoded(ascii, Encoding::Latin1, Mode::Strict)
            .unwrap()
            .is_shared());
        let latin1 = RopeBody::encoded(accented.clone(), Encoding::Latin1, Mode::Strict);
        assert!(!latin1.unwrap().is_shared(), "é is transcoded to latin1");
        assert!(
            !RopeBody::encoded(accented, Encoding::Utf16Le, Mode::Strict)
                .unwrap()
                .is_shared()
        );
        assert!(!RopeBody::new(Latin1(b"plain")).is_shared());
    }

    #[test]
    fn encoded_frames_are_bounded_and_counted_down_exactly() {
        let rope = (Latin1(vec![0xE9; 1000]), Utf16(vec![0xD83D, 0xDE00]));
        let parts: Vec<Box<dyn Rope + Send>> = vec![Box::new(rope.0), Box::new(rope.1)];
        let mut body = RopeBody::new(parts).frame_size(7);
        assert_eq!(body.size_hint().exact(), Some(2004));
        let frames = drain(&mut body);
        assert!(frames.iter().all(|f| f.len() <= 7 && !f.is_empty()));
        let out: Vec<u8> = frames.concat();
        let expected = format!("{}😀", "é".repeat(1000));
        assert_eq!(out, expected.as_bytes());
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
    }

    #[test]
    fn strict_refusal_comes_before_any_frame() {
        let err = RopeBody::encoded("\u{20AC}", Encoding::Ascii, Mode::Strict).unwrap_err();
        assert!(matches!(err, EncodeError::Unencodable { index: 0, .. }));
    }
}
