//! The chunked transfer coding (RFC 9112 §7.1), decoded strictly, one byte
//! of framing at a time, without IO and without buffering.
//!
//! **Strict**: a bare LF or CR, whitespace where the grammar has none
//! (obs-fold included), a control byte in an extension or trailer, data not
//! followed by CRLF — each is refused, naming the fault, since a lenient
//! reading is how requests are smuggled past a strict front end.
//! **Split invariant**: the decoder keeps its place in its [`ChunkState`], so
//! no verdict and no limit depends on how the bytes arrive; every limit
//! counts bytes decoded, never bytes buffered.

use unflat::head::{is_field_value_byte as is_field_byte, is_tchar, Status};

use super::{reject, BodyLimits, Reject, BODY_TOO_LARGE};

/// Most bytes of chunk extensions one body may carry, over all its chunks:
/// the server reads none, and hyper caps them alike.
pub const MAX_EXTENSION_BYTES: usize = 16 * 1024;

/// Most hex digits in one chunk size: the grammar allows leading zeros,
/// but an unbounded run of them would be a line without an end.
pub const MAX_SIZE_DIGITS: usize = 64;

/// Where the decoder stands in the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkState {
    /// At the start of a chunk-size line: a HEXDIG must come.
    SizeStart,
    /// In the chunk size.
    Size,
    /// In BWS that must lead to `;` (after the size, or after a value).
    BeforeSemicolon,
    /// After `;`, in BWS before an extension name.
    BeforeName,
    /// In an extension name.
    Name,
    /// In BWS after a name, before `=` or `;`.
    AfterName,
    /// After `=`, in BWS before the value.
    BeforeValue,
    /// In a token value.
    Token,
    /// In a quoted-string value.
    Quoted,
    /// After a backslash in a quoted-string.
    QuotedPair,
    /// Right after the closing quote.
    AfterQuoted,
    /// After the CR that ends a chunk-size line.
    SizeLf,
    /// In chunk data.
    Data,
    /// After chunk data: CR must come.
    DataCr,
    /// After chunk data's CR: LF must come.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    /// In a trailer field name.
    TrailerName,
    /// In a trailer field value.
    TrailerValue,
    /// After the CR that ends a trailer line.
    TrailerLf,
    /// After the CR of the final CRLF.
    EndLf,
    /// The whole body has been read.
    Done,
}

/// A chunked body being decoded.
#[derive(Clone, Debug)]
pub struct Chunked {
    state: ChunkState,
    /// The chunk size being read, then the data bytes left in the chunk.
    size: u64,
    size_digits: usize,
    limits: BodyLimits,
    data: u64,
    extension_bytes: usize,
    trailer_bytes: usize,
    trailer_fields: usize,
}

/// `qdtext` (RFC 9110 §5.6.4).
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e | 0x80..=0xff)
}

fn bad(reason: &'static str) -> Reject {
    reject(Status::BAD_REQUEST, reason)
}

const NO_CRLF: Reject = reject(Status::BAD_REQUEST, "chunk-size line not ended by CRLF");
const BAD_EXTENSION: Reject = reject(Status::BAD_REQUEST, "invalid chunk extension");

impl Chunked {
    /// A decoder at the start of a chunked body.
    pub fn new(limits: BodyLimits) -> Chunked {
        Chunked {
            state: ChunkState::SizeStart,
            size: 0,
            size_digits: 0,
            limits,
            data: 0,
            extension_bytes: 0,
            trailer_bytes: 0,
            trailer_fields: 0,
        }
    }

    /// Where the decoder stands.
    #[cfg(test)]
    pub fn state(&self) -> ChunkState {
        self.state
    }

    /// True once the final CRLF has been read.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Decodes `input`, passing chunk data to `sink`; returns the bytes
    /// used. Stops at the end of the body (the rest of `input` belongs to
    /// the next request) or of `input`.
    pub fn decode(&mut self, input: &[u8], sink: &mut dyn FnMut(&[u8])) -> Result<usize, Reject> {
        let mut at = 0;
        while at < input.len() && self.state != ChunkState::Done {
            if self.state == ChunkState::Data {
                let n = self.size.min((input.len() - at) as u64) as usize;
                sink(&input[at..at + n]);
                at += n;
                self.size -= n as u64;
                if self.size == 0 {
                    self.state = ChunkState::DataCr;
                }
                continue;
            }
            self.step(input[at])?;
            at += 1;
        }
        Ok(at)
    }

    /// One byte of framing (anything but chunk data): counted, then read.
    fn step(&mut self, b: u8) -> Result<(), Reject> {
        self.count_framing()?;
        self.state = self.next(b)?;
        Ok(())
    }

    /// Counts the byte about to be read against the extension cap or the
    /// trailer section's limit, by where the decoder stands.
    fn count_framing(&mut self) -> Result<(), Reject> {
        use ChunkState as S;
        match self.state {
            S::BeforeSemicolon
            | S::BeforeName
            | S::Name
            | S::AfterName
            | S::BeforeValue
            | S::Token
            | S::Quoted
            | S::QuotedPair
            | S::AfterQuoted => {
                self.extension_bytes += 1;
                if self.extension_bytes > MAX_EXTENSION_BYTES {
                    return Err(bad("chunk extensions too long"));
                }
            }
            S::TrailerStart | S::TrailerName | S::TrailerValue | S::TrailerLf | S::EndLf => {
                self.trailer_bytes += 1;
                if self.trailer_bytes > self.limits.trailer_bytes {
                    return Err(reject(
                        Status::HEADER_FIELDS_TOO_LARGE,
                        "trailer section too large",
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// One more hex digit of the chunk size.
    fn size_digit(&mut self, b: u8) -> Result<ChunkState, Reject> {
        if self.size > u64::MAX >> 4 {
            return Err(bad("chunk size too large"));
        }
        self.size_digits += 1;
        if self.size_digits > MAX_SIZE_DIGITS {
            return Err(bad("chunk size too long"));
        }
        // `to_digit` cannot fail: b is a hex digit.
        self.size = self.size << 4 | u64::from((b as char).to_digit(16).unwrap_or(0));
        Ok(ChunkState::Size)
    }

    /// The data of a chunk of `size` bytes begins: counted against
    /// `--max-body` before a byte of it is taken.
    fn data_begins(&mut self) -> Result<ChunkState, Reject> {
        if self.size > self.limits.data - self.data {
            return Err(BODY_TOO_LARGE);
        }
        self.data += self.size;
        Ok(ChunkState::Data)
    }

    /// A new chunk-size line begins.
    fn next_chunk(&mut self) -> ChunkState {
        self.size = 0;
        self.size_digits = 0;
        ChunkState::SizeStart
    }

    /// A trailer field begins: counted against the fields left.
    fn trailer_field_begins(&mut self) -> Result<ChunkState, Reject> {
        self.trailer_fields += 1;
        if self.trailer_fields > self.limits.trailer_fields {
            return Err(reject(
                Status::HEADER_FIELDS_TOO_LARGE,
                "too many trailer fields",
            ));
        }
        Ok(ChunkState::TrailerName)
    }

    /// The state after the framing byte `b`, or the fault it is: the
    /// grammar, one arm per state.
    ///
    /// ```text
    /// chunked-body    = *chunk last-chunk trailer-section CRLF
    /// chunk           = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
    /// chunk-size      = 1*HEXDIG
    /// last-chunk      = 1*("0") [ chunk-ext ] CRLF
    /// chunk-ext       = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
    /// chunk-ext-name  = token
    /// chunk-ext-val   = token / quoted-string
    /// trailer-section = *( field-line CRLF )
    /// field-line      = field-name ":" OWS field-value OWS
    /// ```
    fn next(&mut self, b: u8) -> Result<ChunkState, Reject> {
        use ChunkState as S;
        let ws = b == b' ' || b == b'\t';
        Ok(match self.state {
            S::SizeStart | S::Size => match b {
                _ if b.is_ascii_hexdigit() => self.size_digit(b)?,
                _ if self.state == S::SizeStart => return Err(bad("chunk size missing")),
                b';' => S::BeforeName,
                b'\r' => S::SizeLf,
                b'\n' => return Err(NO_CRLF),
                _ if ws => S::BeforeSemicolon,
                _ => return Err(bad("invalid chunk size")),
            },
            S::BeforeSemicolon => match b {
                b';' => S::BeforeName,
                _ if ws => S::BeforeSemicolon,
                _ => return Err(BAD_EXTENSION),
            },
            S::BeforeName => match b {
                _ if ws => S::BeforeName,
                _ if is_tchar(b) => S::Name,
                _ => return Err(BAD_EXTENSION),
            },
            S::Name => match b {
                _ if is_tchar(b) => S::Name,
                b'=' => S::BeforeValue,
                b';' => S::BeforeName,
                b'\r' => S::SizeLf,
                b'\n' => return Err(NO_CRLF),
                _ if ws => S::AfterName,
                _ => return Err(BAD_EXTENSION),
            },
            S::AfterName => match b {
                b'=' => S::BeforeValue,
                b';' => S::BeforeName,
                _ if ws => S::AfterName,
                _ => return Err(BAD_EXTENSION),
            },
            S::BeforeValue => match b {
                b'"' => S::Quoted,
                _ if ws => S::BeforeValue,
                _ if is_tchar(b) => S::Token,
                _ => return Err(BAD_EXTENSION),
            },
            S::Token => match b {
                _ if is_tchar(b) => S::Token,
                b';' => S::BeforeName,
                b'\r' => S::SizeLf,
                b'\n' => return Err(NO_CRLF),
                _ if ws => S::BeforeSemicolon,
                _ => return Err(BAD_EXTENSION),
            },
            S::Quoted => match b {
                b'"' => S::AfterQuoted,
                b'\\' => S::QuotedPair,
                _ if is_qdtext(b) => S::Quoted,
                _ => return Err(BAD_EXTENSION),
            },
            S::QuotedPair => match b {
                // HTAB / SP / VCHAR / obs-text
                _ if is_field_byte(b) => S::Quoted,
                _ => return Err(BAD_EXTENSION),
            },
            S::AfterQuoted => match b {
                b';' => S::BeforeName,
                b'\r' => S::SizeLf,
                b'\n' => return Err(NO_CRLF),
                _ if ws => S::BeforeSemicolon,
                _ => return Err(BAD_EXTENSION),
            },
            S::SizeLf => match b {
                b'\n' if self.size == 0 => S::TrailerStart,
                b'\n' => self.data_begins()?,
                _ => return Err(NO_CRLF),
            },
            S::Data => unreachable!("chunk data is taken in bulk"),
            S::DataCr => match b {
                b'\r' => S::DataLf,
                _ => return Err(bad("chunk data not followed by CRLF")),
            },
            S::DataLf => match b {
                b'\n' => self.next_chunk(),
                _ => return Err(bad("chunk data not followed by CRLF")),
            },
            S::TrailerStart => match b {
                b'\r' => S::EndLf,
                _ if is_tchar(b) => self.trailer_field_begins()?,
                _ if ws => {
                    return Err(bad("obs-fold or whitespace at the start of a trailer line"))
                }
                b'\n' => return Err(bad("trailer line not ended by CRLF")),
                _ => return Err(bad("invalid trailer field name")),
            },
            S::TrailerName => match b {
                b':' => S::TrailerValue,
                _ if is_tchar(b) => S::TrailerName,
                _ if ws => return Err(bad("whitespace before the colon of a trailer field")),
                b'\r' | b'\n' => return Err(bad("trailer field line without a colon")),
                _ => return Err(bad("invalid trailer field name")),
            },
            S::TrailerValue => match b {
                b'\r' => S::TrailerLf,
                _ if is_field_byte(b) => S::TrailerValue,
                _ => return Err(bad("invalid trailer field value")),
            },
            S::TrailerLf | S::EndLf => match b {
                b'\n' if self.state == S::EndLf => S::Done,
                b'\n' => S::TrailerStart,
                _ => return Err(bad("trailer line not ended by CRLF")),
            },
            S::Done => unreachable!("nothing is decoded after the body"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BodyLimits = BodyLimits {
        data: 1 << 20,
        trailer_bytes: 64,
        trailer_fields: 2,
    };

    /// Decodes `input` whole and split at every byte; both must agree.
    /// Returns the body and the bytes used, or the refusal.
    fn decode(input: &[u8]) -> Result<(Vec<u8>, usize), Reject> {
        let whole = run(&[input]);
        for cut in 1..input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(run(&[a, b]), whole, "split at {cut}: {input:?}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(run(&bytes), whole, "byte by byte: {input:?}");
        whole
    }

    fn run(parts: &[&[u8]]) -> Result<(Vec<u8>, usize), Reject> {
        let mut c = Chunked::new(LIMITS);
        let mut body = Vec::new();
        let mut used = 0;
        for part in parts {
            used += c.decode(part, &mut |d| body.extend_from_slice(d))?;
            if c.is_done() {
                break;
            }
        }
        assert!(c.is_done(), "incomplete: {:?}", c.state());
        Ok((body, used))
    }

    fn refused(input: &[u8]) -> Reject {
        let mut c = Chunked::new(LIMITS);
        let r = c.decode(input, &mut |_| {});
        let Err(e) = r else {
            panic!(
                "accepted {:?}: {r:?}, {:?}",
                String::from_utf8_lossy(input),
                c.state()
            )
        };
        // The same refusal byte by byte.
        let mut c = Chunked::new(LIMITS);
        let split = input
            .chunks(1)
            .try_for_each(|b| c.decode(b, &mut |_| {}).map(drop));
        assert_eq!(split, Err(e), "{input:?}");
        e
    }

    #[test]
    fn valid_bodies_decode_the_same_however_split() {
        for (input, body) in [
            (&b"3\r\nabc\r\n0\r\n\r\n"[..], &b"abc"[..]),
            (b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789"),
            (b"0000000000000000000003\r\nabc\r\n000\r\n\r\n", b"abc"),
            (
                b"0000000000000000000000000000000000000000000000000000000000000003\r\nabc\r\n\
                  0000000000000000000000000000000000000000000000000000000000000000\r\n\r\n",
                b"abc",
            ),
            (b"3;a\r\nabc\r\n0\r\n\r\n", b"abc"),
            (
                b"3 ;a=b ; c = \"q\\\"t d\"\t;e\r\nabc\r\n0;x=y\r\n\r\n",
                b"abc",
            ),
            (b"3;a=b;c\r\nabc\r\n0\r\nX-T: 1\r\nY:\r\n\r\n", b"abc"),
            (b"0\r\nX-T: caf\xe9 \t v\r\n\r\n", b""),
        ] {
            let (got, used) = decode(input).expect("accepted");
            assert_eq!(got, body, "{:?}", String::from_utf8_lossy(input));
            assert_eq!(used, input.len());
        }
    }

    #[test]
    fn decoding_stops_at_the_end_of_the_body() {
        let mut c = Chunked::new(LIMITS);
        let input = b"1\r\na\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
        assert_eq!(c.decode(input, &mut |_| {}), Ok(11));
        assert!(c.is_done());
    }

    #[test]
    fn every_malformed_line_is_refused_with_its_reason() {
        for (input, reason) in [
            (&b"\r\n\r\n"[..], "chunk size missing"),
            (b";x\r\n\r\n", "chunk size missing"),
            (b"zz\r\n", "chunk size missing"),
            (b"3x\r\n", "invalid chunk size"),
            (b"-3\r\n", "chunk size missing"),
            (b"0x3\r\n", "invalid chunk size"),
            (b"1ffffffffffffffff\r\n", "chunk size too large"),
            (&[b'0'; MAX_SIZE_DIGITS + 1], "chunk size too long"),
            (b"3\r\nabc\r\n00000000000000000000000000000000000000000000000000000000000000000\r\n", "chunk size too long"),
            (b"3\nabc\r\n", "chunk-size line not ended by CRLF"),
            (b"3\rabc", "chunk-size line not ended by CRLF"),
            (b"3 \r\n", "invalid chunk extension"),
            (b"2;\nxx\r\n", "invalid chunk extension"),
            (b"2;a\nxx\r\n", "chunk-size line not ended by CRLF"),
            (b"2;a\0\r\n", "invalid chunk extension"),
            (b"2;a=\x01\r\n", "invalid chunk extension"),
            (b"2;a=\"\x7f\"\r\n", "invalid chunk extension"),
            (b"2;a=\"x\r\n", "invalid chunk extension"),
            (b"2;=v\r\n", "invalid chunk extension"),
            (b"2;a=\r\n", "invalid chunk extension"),
            (b"2;a b\r\n", "invalid chunk extension"),
            (b"2;a=\"x\"y\r\n", "invalid chunk extension"),
            (b"3\r\nabc\r\n\r\n", "chunk size missing"),
            (b"3\r\nabcd\r\n", "chunk data not followed by CRLF"),
            (b"3\r\nabc\n0\r\n", "chunk data not followed by CRLF"),
            (b"3\r\nabc\rX", "chunk data not followed by CRLF"),
            (
                b"0\r\nGET / HTTP/1.1\r\n",
                "whitespace before the colon of a trailer field",
            ),
            (
                b"0\r\nno-colon\r\n\r\n",
                "trailer field line without a colon",
            ),
            (
                b"0\r\nX-A: 1\r\n folded\r\n\r\n",
                "obs-fold or whitespace at the start of a trailer line",
            ),
            (
                b"0\r\nX-A : 1\r\n\r\n",
                "whitespace before the colon of a trailer field",
            ),
            (b"0\r\nX-A: a\rb\r\n\r\n", "trailer line not ended by CRLF"),
            (b"0\r\nX-A: a\0b\r\n\r\n", "invalid trailer field value"),
            (b"0\r\nX-A: a\x7f\r\n\r\n", "invalid trailer field value"),
            (b"0\r\nX-A: 1\n\r\n", "invalid trailer field value"),
            (b"0\r\n\n", "trailer line not ended by CRLF"),
            (b"0\r\n:v\r\n\r\n", "invalid trailer field name"),
        ] {
            let e = refused(input);
            assert_eq!(e.status, Status::BAD_REQUEST, "{input:?}");
            assert_eq!(e.reason, reason, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn limits_hold_however_the_bytes_arrive() {
        // Extensions: 16 KiB over all chunks of a body.
        let ext = format!("1;{}\r\na\r\n", "e".repeat(8000));
        let twice = format!("{ext}{ext}0\r\n\r\n");
        assert_eq!(decode(twice.as_bytes()).unwrap().0, b"aa");
        let thrice = format!("{ext}{ext}{ext}0\r\n\r\n");
        assert_eq!(
            refused(thrice.as_bytes()).reason,
            "chunk extensions too long"
        );
        // Data: refused at the size line, before the data arrives.
        let mut c = Chunked::new(BodyLimits { data: 5, ..LIMITS });
        assert_eq!(c.decode(b"3\r\nabc\r\n", &mut |_| {}), Ok(8));
        let e = c.decode(b"3\r\n", &mut |_| {}).unwrap_err();
        assert_eq!(e, BODY_TOO_LARGE);
        // Trailers: bytes (the final CRLF included) and fields.
        let fits = format!("0\r\nX: {}\r\n\r\n", "v".repeat(64 - 7));
        assert!(decode(fits.as_bytes()).is_ok());
        let over = format!("0\r\nX: {}\r\n\r\n", "v".repeat(64 - 6));
        assert_eq!(
            refused(over.as_bytes()).status,
            Status::HEADER_FIELDS_TOO_LARGE
        );
        assert!(decode(b"0\r\nA: 1\r\nB: 2\r\n\r\n").is_ok());
        let e = refused(b"0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
        assert_eq!(
            (e.status, e.reason),
            (Status::HEADER_FIELDS_TOO_LARGE, "too many trailer fields")
        );
    }
}
