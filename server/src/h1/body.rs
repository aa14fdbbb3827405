//! The request body, without IO: `Content-Length` and chunked framing
//! (RFC 9112 §6, §7) decoded as the bytes arrive, the same however they are
//! split. Every limit on a body is applied here (`--max-body`, and through
//! `chunked.rs` the extension cap and the trailers' share of the head's
//! budget). Trailer fields are checked and dropped, never merged into the
//! request's (RFC 9110 §6.5).

use unflat::head::Framing;

use super::chunked::Chunked;
use super::{BodyLimits, Reject, BODY_TOO_LARGE};

/// Decodes a request body as it arrives.
#[derive(Debug)]
pub enum BodyDecoder {
    /// `Content-Length`: bytes still to come.
    Length(u64),
    /// `Transfer-Encoding: chunked`. Boxed: the session moves its state on
    /// every step, and requests without a chunked body should not pay for it.
    Chunked(Box<Chunked>),
}

/// What [`BodyDecoder::decode`] did with the input.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes used.
    pub consumed: usize,
    /// The whole body has been read.
    pub done: bool,
}

impl BodyDecoder {
    /// A decoder for `framing` within `limits`, or `None` when there is no
    /// body. A `Content-Length` over `limits.data` is refused before any of
    /// the body is read.
    pub fn new(framing: Framing, limits: BodyLimits) -> Result<Option<BodyDecoder>, Reject> {
        Ok(match framing {
            Framing::None => None,
            Framing::Length(n) if n > limits.data => return Err(BODY_TOO_LARGE),
            Framing::Length(n) => Some(BodyDecoder::Length(n)),
            Framing::Chunked => Some(BodyDecoder::Chunked(Box::new(Chunked::new(limits)))),
        })
    }

    /// Decodes what `input` holds, passing body bytes to `sink`.
    pub fn decode(&mut self, input: &[u8], sink: &mut dyn FnMut(&[u8])) -> Result<Decoded, Reject> {
        match self {
            BodyDecoder::Length(left) => {
                let n = (*left).min(input.len() as u64) as usize;
                sink(&input[..n]);
                *left -= n as u64;
                Ok(Decoded {
                    consumed: n,
                    done: *left == 0,
                })
            }
            BodyDecoder::Chunked(chunked) => {
                let consumed = chunked.decode(input, sink)?;
                Ok(Decoded {
                    consumed,
                    done: chunked.is_done(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BodyLimits = BodyLimits {
        data: 10,
        trailer_bytes: 64,
        trailer_fields: 4,
    };

    #[test]
    fn no_body_needs_no_decoder() {
        assert!(BodyDecoder::new(Framing::None, LIMITS).unwrap().is_none());
    }

    #[test]
    fn content_length_counts_down_to_zero_and_is_bounded() {
        let mut d = BodyDecoder::new(Framing::Length(5), LIMITS)
            .unwrap()
            .unwrap();
        let mut body = Vec::new();
        let mut sink = |b: &[u8]| body.extend_from_slice(b);
        let r = d.decode(b"ab", &mut sink).unwrap();
        assert_eq!((r.consumed, r.done), (2, false));
        let r = d.decode(b"cdeGET", &mut sink).unwrap();
        assert_eq!((r.consumed, r.done), (3, true));
        assert_eq!(body, b"abcde");
        assert_eq!(
            BodyDecoder::new(Framing::Length(11), LIMITS).unwrap_err(),
            BODY_TOO_LARGE
        );
    }

    #[test]
    fn chunked_bodies_are_decoded_by_the_strict_decoder() {
        let mut d = BodyDecoder::new(Framing::Chunked, LIMITS).unwrap().unwrap();
        let mut body = Vec::new();
        let r = d
            .decode(b"3\r\nabc\r\n0\r\n\r\nnext", &mut |b| {
                body.extend_from_slice(b)
            })
            .unwrap();
        assert_eq!((r.consumed, r.done, &body[..]), (13, true, &b"abc"[..]));
        let mut d = BodyDecoder::new(Framing::Chunked, LIMITS).unwrap().unwrap();
        let e = d.decode(b"b\r\n", &mut |_| {}).unwrap_err();
        assert_eq!(e, BODY_TOO_LARGE);
    }
}
