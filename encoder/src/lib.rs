#![doc = include_str!("../README.md")]
//!
//! ## The modules
//!
//! The data flow, one module each:
//!
//! 1. [`rope`](crate::Rope) — the model: [`Piece`]s in three representations
//!    (one-byte, UTF-8, two-byte), the [`Rope`] trait (implement it for your
//!    own type: its documentation shows how), [`Concat`], which
//!    joins ropes of any kind without copying or allocating, and owned
//!    ropes ([`Latin1`]`<Vec<u8>>`, [`Utf16`]`<Vec<u16>>`, vectors of boxed
//!    ropes) for bodies that outlive the code that built them.
//! 2. [`plan`] / [`storage_size`] / [`size`] — measuring: the exact encoded
//!    size and which of the three [`EncodePath`]s writes it.
//! 3. [`write()`] / [`write_buf`] / [`write_planned`] — encoding into
//!    `&mut [u8]` or a growable [`bytes::BufMut`], along one of the paths:
//!    * [`EncodePath::OneByte`] — pieces copied as they are;
//!    * [`EncodePath::Expand`] — Latin-1 to UTF-8, through a stage or by
//!      back-of-buffer expansion;
//!    * [`EncodePath::TwoByte`] — transcoded piece by piece.
//! 4. the [`Encoder`] — the same bytes, written into
//!    destinations of any size one after the other (fixed frames, the free
//!    room of a socket buffer), resumed where the last one stopped.
//! 5. [`head`] — the HTTP/1.1 response head, built by concatenation per
//!    response without allocating and written in one walk that checks every
//!    value character as it goes; any status, one rule for header text at
//!    every door, framing, persistence and date owned. With the `http`
//!    feature, built from the `http` crate's types.
//! 6. [`queue`] — the sans-IO zero-copy write queue: heads and small bodies
//!    encoded into one reusable buffer, large bodies as iovecs at their own
//!    memory, a cursor for partial writes.
//! 7. `body` (feature `http-body`) — `RopeBody`, any rope as an
//!    `http_body::Body` for hyper and axum: a ropey rope's chunks as shared
//!    frames, other ropes encoded in bounded frames.
//!
//! And one module to compare against, not to send with: [`flatten`], the
//! copying route this crate replaces.
//!
//! The one module with `unsafe`, the calls into simdutf, states at each
//! call the destination size it relies on.
//!
//! ```
//! use unflat::{plan, write, Concat, Encoding, Latin1, Mode, EncodePath};
//! let body = Latin1(b"cr\xe8me br\xfbl\xe9e");
//! let rope = Concat::new([&"<p>", &body, &"</p>"]);
//! let p = plan(&rope, Encoding::Utf8, Mode::Strict).unwrap();
//! assert_eq!(p.path(), EncodePath::Expand);
//! let mut dst = vec![0; p.size()];
//! write(&rope, Encoding::Utf8, Mode::Strict, &mut dst).unwrap();
//! assert_eq!(dst, "<p>crème brûlée</p>".as_bytes());
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]
// docs.rs builds with `--cfg docsrs` (Cargo.toml) on nightly, where the
// gated items are labelled with the feature that brings them.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "http-body")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
pub mod body;
mod encode;
mod encoding;
mod expand;
pub mod flatten;
pub mod head;
mod kernel;
mod measure;
pub mod queue;
mod resume;
mod rope;
mod surrogate;
mod transcode;

pub use encode::{write, write_buf, write_planned, GrowBuf};
pub use encoding::{EncodeError, Encoding, Mode};
pub use measure::{plan, size, storage_size, EncodePath, Plan};
pub use resume::{Encoder, Progress};
pub use rope::{CharRange, Concat, Decimal, Latin1, Measured, Piece, Rope, Shape, Utf16};

// Crates whose types appear in this crate's public API, re-exported so that
// users name the same versions.

/// `bytes`: [`write_buf`] writes into its [`BufMut`](bytes::BufMut), and
/// [`queue::WriteQueue`] is a [`Buf`](bytes::Buf).
pub use bytes;
/// `http` (feature `http`): [`head::Status`], [`head::HeaderName`] and
/// [`head::HeaderValue`] convert from its types, and
/// [`head::Head::header_map`] takes its `HeaderMap`.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use http;
/// `http_body` (feature `http-body`): [`body::RopeBody`] is its `Body`.
#[cfg(feature = "http-body")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-body")))]
pub use http_body;
/// `ropey`: its `Rope` and `RopeSlice` are ropes here, and the write queue
/// sends a ropey rope's chunks from their own memory.
pub use ropey;
