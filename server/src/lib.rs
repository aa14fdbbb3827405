//! # unflat-server
//!
//! A minimal HTTP/1.1 server that shows the technique of the `unflat`
//! crate end to end: each response head is a rope encoded straight into the
//! connection's write buffer, and large bodies go to the socket as iovecs at
//! their own memory. `--strategy flatten` reproduces the old copying path so
//! that both can be measured from one binary.
//!
//! The layers, from the bottom up; each uses only those below it. The
//! core (`h1` to `net`) names nothing of the demo; `server` makes the demo
//! the default service, and serves any other as well (docs/design.md has
//! the map of every file):
//!
//! - [`clock`]: the one clock, coarse and monotonic, for deadlines and
//!   latency alike;
//! - [`units`]: sizes as users write them, in flags and URLs;
//! - [`log`]: stderr's lines through a bounded buffer, so that logging
//!   never blocks serving;
//! - [`memory`]: the one account of everything a client can make the
//!   server hold;
//! - [`h1`]: the request's grammar, its body's framing, its limits and
//!   rejections, without IO;
//! - [`response`]: the one writer of responses, by [`Strategy`];
//! - [`session`]: one connection's requests, bytes in and responses
//!   queued, without IO; the [`Service`](session::Service) trait an
//!   application implements to be served;
//! - [`net`]: a connection's IO over TCP or TLS, its deadlines, shutdown;
//! - [`site`]: the demo — its routes, replies, bodies and metrics — a
//!   service of the core, beside it rather than inside it;
//! - [`config`]: the command line's options, each declared once;
//! - [`server`]: the listener, the runtime, graceful shutdown;
//! - [`cli`]: the binary's `main`.
// One module reads a kernel counter with `unsafe` (`net/acked.rs`); every
// other is without.
#![deny(unsafe_code)]

pub mod cli;
pub mod clock;
pub mod config;
pub mod h1;
pub mod log;
pub mod memory;
pub mod net;
pub mod response;
pub mod server;
pub mod session;
pub mod site;
pub mod units;

pub use config::Config;
pub use response::Strategy;
pub use server::{Running, Server, Stack};
