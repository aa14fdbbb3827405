//! # unflat — encode ropes without flattening them
//!
//! Text built by concatenation (a *rope*) is encoded piece by piece straight
//! into the destination buffer, never first copied into one flat string.
//! This is the technique of Node.js's change to `StreamBase::WriteString`,
//! as a reusable Rust library with no IO and no runtime.
//!
//! The data flow, one module each:
//!
//! 1. [`rope`](crate::Rope) — the model: [`Piece`]s in three representations
//!    (one-byte, UTF-8, two-byte), the [`Rope`] trait, [`Concat`], which
//!    joins ropes of any kind without copying or allocating, and owned
//!    ropes ([`Latin1`]`<Vec<u8>>`, [`Utf16`]`<Vec<u16>>`, vectors of boxed
//!    ropes) for bodies that outlive the code that built them.
//! 2. [`plan`] / [`storage_size`] / [`size`] — measuring: the exact encoded
//!    size and which of the three [`Path`]s writes it.
//! 3. [`write()`] / [`write_buf`] / [`write_planned`] — encoding into
//!    `&mut [u8]` or a growable [`bytes::BufMut`], along one of the paths:
//!    * [`Path::OneByte`] — pieces copied as they are;
//!    * [`Path::Expand`] — Latin-1 to UTF-8 by back-of-buffer expansion;
//!    * [`Path::TwoByte`] — transcoded piece by piece.
//! 4. the [`Encoder`] — the same bytes, written into
//!    destinations of any size one after the other (fixed frames, the free
//!    room of a socket buffer), resumed where the last one stopped.
//! 5. [`head`] — the HTTP/1.1 response head as a rope, built per response
//!    without allocating; any status, names and values validated, framing
//!    owned. With the `http` feature, built from the `http` crate's types.
//! 6. [`queue`] — the sans-IO zero-copy write queue: heads and small bodies
//!    encoded into one reusable buffer, large bodies as iovecs at their own
//!    memory, a cursor for partial writes.
//! 7. `body` (feature `http-body`) — `RopeBody`, any rope as an
//!    `http_body::Body` for hyper: a ropey rope's chunks as shared frames,
//!    other ropes encoded in bounded frames.
//!
//! [`flatten`] is the flatten-then-write reference, what Node did before the
//! change, kept as the baseline for tests and benchmarks.
//!
//! Features: `simdutf` (on by default: simdutf's kernels for Latin-1 and
//! UTF-16 to UTF-8; needs a C++ compiler, and without it encoding_rs's
//! kernels write the same bytes), `http` (heads from `http` types) and
//! `http-body` (`RopeBody`). The crate has no IO and no async runtime, and
//! no `unsafe` outside the one module of calls into simdutf, where each call
//! states the destination size it relies on.
//!
//! ```
//! use unflat::{plan, write, Concat, Encoding, Latin1, Mode, Path};
//! let body = Latin1(b"cr\xe8me br\xfbl\xe9e");
//! let rope = Concat::new([&"<p>", &body, &"</p>"]);
//! let p = plan(&rope, Encoding::Utf8, Mode::Strict).unwrap();
//! assert_eq!(p.path(), Path::Expand);
//! let mut dst = vec![0; p.size()];
//! write(&rope, Encoding::Utf8, Mode::Strict, &mut dst).unwrap();
//! assert_eq!(dst, "<p>crème brûlée</p>".as_bytes());
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "http-body")]
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
pub use measure::{plan, size, storage_size, Path, Plan};
pub use resume::{Encoder, Progress};

// Crates whose types appear in this crate's public API, so that users name
// the same versions.
pub use bytes;
pub use rope::{CharRange, Concat, Latin1, Measured, Piece, Rope, Shape, Utf16};
pub use ropey;
