//! HTTP/1.1 requests, without IO: the head's grammar and RFC 9112's rules
//! (`request.rs`, its target's and Host's URI grammar in `uri.rs`, its
//! fields' rules in `fields.rs`), the body's framing and its limits
//! (`body.rs`), the chunked coding (`chunked.rs`); bytes tested eight at
//! a time, for the scan and the query's search (`word.rs`). Every refusal is a
//! [`Reject`]: a status, a short reason, and a close. The nouns the files
//! share are here.

mod body;
mod chunked;
mod fields;
pub(crate) mod query;
mod request;
mod scan;
mod uri;
mod word;

use unflat::head::Status;

pub use body::{BodyDecoder, Decoded};
pub(crate) use query::pairs;
pub use query::{decode_pair, find_byte, plain_pairs, query_pairs, Pair, PlainPairs, QueryError};
pub use request::{begins_head_request, first_line, parse_head, Parsed, RequestHead};
pub use scan::{scan, Scanned};
pub use uri::begins_escape;

/// Most header fields a request may have, whatever `--max-fields` says
/// (they are parsed into an array on the stack).
pub const FIELDS_CAP: usize = 256;

/// What the walk through a target found of it besides its end
/// ([`Scanned::walked`], `scan.rs`), for the target's check (`uri.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    /// Where in the target its first `?` is.
    pub query_at: Option<usize>,
    /// Whether every byte of the target is one a URI holds as it is
    /// (RFC 3986's unreserved, sub-delims but `+`, `:@/?`): no `%`, no
    /// `+`, no byte above ASCII, none a URI may not hold. Its query then
    /// needs no decoding.
    pub plain: bool,
}

/// Limits that apply to a request head.
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    /// Bytes in the whole head.
    pub head: usize,
    /// Bytes in the request line.
    pub request_line: usize,
    /// Header fields.
    pub fields: usize,
}

/// A request refused before it was served: the status, a plain-text reason,
/// and always a close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject {
    /// The status to answer with.
    pub status: Status,
    /// Why, in a few words, sent as the body.
    pub reason: &'static str,
}

/// A [`Reject`] of `status` for `reason`.
pub const fn reject(status: Status, reason: &'static str) -> Reject {
    Reject { status, reason }
}

/// A request body over `--max-body`, whether announced by Content-Length or
/// found while decoding chunks.
pub const BODY_TOO_LARGE: Reject = Reject {
    status: Status::PAYLOAD_TOO_LARGE,
    reason: "request body too large",
};

/// The limits a request body is decoded within, whatever its framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyLimits {
    /// Bytes of body data (`--max-body`; over it: 413).
    pub data: u64,
    /// Bytes of a chunked body's trailer section, its final CRLF included:
    /// what is left of `--max-head` after the request head (over it: 431).
    pub trailer_bytes: usize,
    /// Trailer fields: what is left of `--max-fields` after the head's
    /// fields (over it: 431).
    pub trailer_fields: usize,
}
