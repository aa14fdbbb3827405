//! The server's test suite, one binary: the core and the demo driven
//! through sockets, the binary (`CARGO_BIN_EXE_unflat-server`, or
//! `UNFLAT_SERVER_BIN`), proxies in front of it, and sessions in memory.
//! One module per concern; `common` holds what they share.

#[path = "../common/mod.rs"]
mod common;

mod application;
mod async_door;
mod cli;
mod conformance;
mod connection_size;
mod example_app;
mod framing;
mod head_scan;
mod hostile;
mod http_properties;
mod large;
mod logging;
mod memory;
mod one_walk;
mod ops;
mod paced;
mod panics;
mod replicas;
mod send_rate;
mod server_e2e;
mod server_raw;
mod server_syscalls;
mod service;
mod shutdown_cut;
mod stream;
mod tls;
