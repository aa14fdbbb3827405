//! The request body, without IO: `Content-Length` and chunked framing
//! (RFC 9112 §6, §7) decoded as the bytes arrive.
//!
//! A [`BodyDecoder`] is fed whatever input there is; it passes body bytes to
//! a sink, says how much input it used and whether the body is complete, and
//! keeps its place between calls, so a body split at any byte decodes the
//! same. Chunk extensions are skipped (httparse's `parse_chunk_size`),
//! trailer fields read and dropped.

use unflat::head::Status;

use crate::request::{reject, Framing, Reject};

/// Decodes a request body as it arrives.
#[derive(Debug)]
pub enum BodyDecoder {
    /// `Content-Length`: bytes still to come.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunked),
}

/// Where a chunked body decoder stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Chunked {
    /// Expecting a chunk-size line.
    Size,
    /// Inside chunk data, this many bytes to go.
    Data(u64),
    /// Expecting the CRLF after chunk data.
    DataEnd,
    /// Reading trailer fields; the count of bytes read so far.
    Trailers(usize),
}

/// What [`BodyDecoder::decode`] did with the input.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes used.
    pub consumed: usize,
    /// The whole body has been read.
    pub done: bool,
}

impl Decoded {
    /// `consumed` bytes used, the body not finished yet.
    fn partial(consumed: usize) -> Decoded {
        Decoded {
            consumed,
            done: false,
        }
    }
}

impl BodyDecoder {
    /// A decoder for `framing`, or `None` when there is no body.
    pub fn new(framing: Framing) -> Option<BodyDecoder> {
        match framing {
            Framing::None => None,
            Framing::Length(n) => Some(BodyDecoder::Length(n)),
            Framing::Chunked => Some(BodyDecoder::Chunked(Chunked::Size)),
        }
    }

    /// Decodes what `input` holds, passing body bytes to `sink`. Trailer
    /// fields are read and dropped; at most `max_trailers` bytes of them.
    pub fn decode(
        &mut self,
        input: &[u8],
        max_trailers: usize,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Reject>,
    ) -> Result<Decoded, Reject> {
        let mut at = 0;
        loop {
            match self {
                BodyDecoder::Length(left) => {
                    at += take(left, &input[at..], sink)?;
                    return Ok(Decoded {
                        consumed: at,
                        done: *left == 0,
                    });
                }
                BodyDecoder::Chunked(state) => match state {
                    Chunked::Size => match httparse::parse_chunk_size(&input[at..]) {
                        Ok(httparse::Status::Complete((used, size))) => {
                            at += used;
                            *state = if size == 0 {
                                Chunked::Trailers(0)
                            } else {
                                Chunked::Data(size)
                            };
                        }
                        Ok(httparse::Status::Partial) => {
                            if input.len() - at > 1024 {
                                return Err(reject(
                                    Status::BAD_REQUEST,
                                    "chunk size line too long",
                                ));
                            }
                            return Ok(Decoded::partial(at));
                        }
                        Err(_) => return Err(reject(Status::BAD_REQUEST, "invalid chunk size")),
                    },
                    Chunked::Data(left) => {
                        at += take(left, &input[at..], sink)?;
                        if *left > 0 {
                            return Ok(Decoded::partial(at));
                        }
                        *state = Chunked::DataEnd;
                    }
                    Chunked::DataEnd => match &input[at..] {
                        [b'\r', b'\n', ..] => {
                            at += 2;
                            *state = Chunked::Size;
                        }
                        [] | [b'\r'] => return Ok(Decoded::partial(at)),
                        _ => {
                            return Err(reject(
                                Status::BAD_REQUEST,
                                "chunk data not followed by CRLF",
                            ))
                        }
                    },
                    Chunked::Trailers(seen) => {
                        // One line at a time; an empty line ends the body.
                        let Some(nl) = input[at..].iter().position(|&b| b == b'\n') else {
                            if *seen + input.len() - at > max_trailers {
                                return Err(reject(
                                    Status::HEADER_FIELDS_TOO_LARGE,
                                    "trailer section too large",
                                ));
                            }
                            return Ok(Decoded::partial(at));
                        };
                        let line = &input[at..at + nl];
                        *seen += nl + 1;
                        at += nl + 1;
                        if *seen > max_trailers {
                            return Err(reject(
                                Status::HEADER_FIELDS_TOO_LARGE,
                                "trailer section too large",
                            ));
                        }
                        match line {
                            b"" | b"\r" => {
                                return Ok(Decoded {
                                    consumed: at,
                                    done: true,
                                })
                            }
                            _ if line.strip_suffix(b"\r").is_none() => {
                                return Err(reject(
                                    Status::BAD_REQUEST,
                                    "trailer line without CRLF",
                                ))
                            }
                            _ => {}
                        }
                    }
                },
            }
        }
    }
}

/// Passes up to `left` bytes of `input` to `sink`; returns how many.
fn take(
    left: &mut u64,
    input: &[u8],
    sink: &mut dyn FnMut(&[u8]) -> Result<(), Reject>,
) -> Result<usize, Reject> {
    let n = (*left).min(input.len() as u64) as usize;
    sink(&input[..n])?;
    *left -= n as u64;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `parts` one call each; returns the body, the state after each
    /// call, and whether the body completed.
    fn feed(framing: Framing, parts: &[&[u8]]) -> Result<(Vec<u8>, Vec<String>, bool), Reject> {
        let mut d = BodyDecoder::new(framing).expect("a body");
        let mut body = Vec::new();
        let mut states = Vec::new();
        let mut pending = Vec::new();
        for part in parts {
            pending.extend_from_slice(part);
            let r = d.decode(&pending, 64, &mut |c: &[u8]| {
                body.extend_from_slice(c);
                Ok(())
            })?;
            pending.drain(..r.consumed);
            states.push(format!("{d:?}"));
            if r.done {
                assert!(pending.is_empty(), "input left after the body: {pending:?}");
                return Ok((body, states, true));
            }
        }
        Ok((body, states, false))
    }

    #[test]
    fn no_body_needs_no_decoder() {
        assert!(BodyDecoder::new(Framing::None).is_none());
    }

    #[test]
    fn content_length_counts_down_to_zero() {
        let (body, states, done) = feed(Framing::Length(5), &[b"ab", b"cde"]).unwrap();
        assert_eq!(body, b"abcde");
        assert_eq!(states, ["Length(3)", "Length(0)"]);
        assert!(done);
    }

    #[test]
    fn chunked_walks_size_data_crlf_and_trailers() {
        let parts: [&[u8]; 7] = [
            b"3\r",
            b"\nab",
            b"c",
            b"\r",
            b"\n0\r\n",
            b"X-T: 1\r\n",
            b"\r\n",
        ];
        let (body, states, done) = feed(Framing::Chunked, &parts).unwrap();
        assert_eq!(body, b"abc");
        assert!(done);
        assert_eq!(
            states,
            [
                "Chunked(Size)",
                "Chunked(Data(1))",
                "Chunked(DataEnd)",
                "Chunked(DataEnd)",
                "Chunked(Trailers(0))",
                "Chunked(Trailers(8))",
                "Chunked(Trailers(10))",
            ]
        );
    }

    #[test]
    fn chunk_extensions_are_skipped_and_sizes_are_hex() {
        let (body, _, done) =
            feed(Framing::Chunked, &[b"A;name=v\r\n0123456789\r\n0\r\n\r\n"]).unwrap();
        assert_eq!(body, b"0123456789");
        assert!(done);
    }

    #[test]
    fn malformed_chunked_bodies_are_refused() {
        for (input, status) in [
            (&b"zz\r\n"[..], Status::BAD_REQUEST),            // not hex
            (b"ffffffffffffffffff\r\n", Status::BAD_REQUEST), // overflows
            (b"3\r\nabcX", Status::BAD_REQUEST),              // no CRLF after data
            (b"0\r\nno-crlf\n", Status::BAD_REQUEST),         // trailer line with bare LF
            (&[b'1'; 2000][..], Status::BAD_REQUEST),         // size line too long
        ] {
            let err = feed(Framing::Chunked, &[input]).expect_err("refused");
            assert_eq!(err.status, status, "{:?}", String::from_utf8_lossy(input));
        }
        let big_trailer = [&b"0\r\n"[..], &[b'x'; 100][..]].concat();
        let err = feed(Framing::Chunked, &[&big_trailer]).expect_err("trailers over the limit");
        assert_eq!(err.status, Status::HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn a_sink_error_stops_decoding() {
        let mut d = BodyDecoder::new(Framing::Length(10)).unwrap();
        let refuse = Reject {
            status: Status::PAYLOAD_TOO_LARGE,
            reason: "too large",
        };
        let r = d.decode(b"0123456789", 64, &mut |_: &[u8]| Err(refuse));
        assert_eq!(r, Err(refuse));
    }
}
