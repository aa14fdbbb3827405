//! An HTTP/1.1 server on the `unflat` crate: each response head is built
//! by concatenation and written into the connection's write queue in one
//! walk that checks its values, and large bodies go to the
//! socket as iovecs at their own memory (`--strategy flatten` is the old
//! copying path, for measurement).
//!
//! An application starts at [`app`]: everything it implements or receives
//! is there.
//!
//! Layers, bottom up, each using only those below it: [`clock`], [`units`],
//! [`log`], [`memory`], [`h1`], [`response`], [`service`] (the contract
//! with the application), [`session`], [`net`], [`observe`] (what an
//! operator watches of any service), [`config`], [`server`], [`app`],
//! [`cli`]. The library names nothing of the demo: the binary
//! (`src/main.rs`, `src/demo/`) is an application on this API like any
//! other. docs/design.md has the map of every file.
//!
//! Features (README.md, "What each feature costs"): `tls` (rustls on
//! aws-lc-rs) and `tls-ring`, `self-signed`, `metrics` (`/metrics`'
//! rendering), `cli` (clap), `simdutf`, and the binary's `jemalloc` and
//! `demo`; all on by default. With none, an application builds with no C
//! compiler.
// Only `net/acked.rs` (a kernel counter) and `h1/scan.rs` (ASCII bytes
// read as text, fields written into uninitialised slots) need `unsafe`.
#![deny(unsafe_code)]

pub mod app;
#[cfg(feature = "cli")]
pub mod cli;
pub mod clock;
pub mod config;
pub mod events;
pub mod h1;
pub mod log;
pub mod memory;
pub mod net;
pub mod observe;
pub mod response;
pub mod server;
pub mod service;
pub mod session;
pub mod units;

pub use config::Config;
pub use response::Strategy;
pub use server::{Running, Server, Stack};

/// The README's Rust examples, compiled (and run, but for `no_run`) by
/// `cargo test` as this crate's doctests.
#[cfg(all(doctest, feature = "cli"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExamples;
