//! The network side: one connection's IO over a [`Socket`] (TCP, or TLS
//! after its handshake), its deadlines, its idle buffers, shutdown, and the
//! transport's counters. A connection reads bytes, hands them to its
//! [`Session`](crate::session::Session) and writes what the session queued;
//! it knows nothing of HTTP. docs/design.md maps the files.

mod acked;
mod connection;
mod deadlines;
mod give_way;
mod idle;
pub(crate) mod nap;
mod pace;
mod reset;
pub mod shutdown;
mod socket;
pub mod timers;
pub mod tls;
mod transport;
mod write;

use std::io;
use std::sync::Arc;

use unflat::queue::Policy;

pub use acked::Acked;
pub use connection::{handle, lease, serve};
pub use deadlines::Timeouts;
pub use give_way::IdleConnections;
pub use pace::PaceRules;
pub use shutdown::Shutdown;
pub use socket::{limit_unsent, Socket, UNSENT_MOST};
pub use transport::{Open, PerWorker, Transport};

use crate::service::Service;
use crate::session::Protocol;

/// Bytes a connection's read buffer is allocated with, and grows by when
/// full; here because the connection and the idle pool both size by it.
pub const READ_CHUNK: usize = 16 * 1024;

/// What every connection shares.
#[derive(Debug)]
pub struct Connections<S: Service> {
    /// The sessions' service, writer, memory account and limits.
    pub protocol: Protocol<S>,
    /// Every timeout a connection keeps.
    pub timeouts: Timeouts,
    /// Copy or share, and the frame of long bodies (`--copy-below`,
    /// `--frame`).
    pub policy: Policy,
    /// The open connections, those waiting for a request among them.
    pub idle: IdleConnections,
    /// Connections open, bytes written, send timeouts (the service may
    /// hold them too, to expose them).
    pub transport: Arc<Transport>,
}

/// Why a connection ended, when it was not a clean close.
#[derive(Debug)]
pub enum Ended {
    /// The peer acknowledged nothing for `--send-timeout` (or longer, for
    /// a slow reader; `pace.rs`): the caller should reset the connection
    /// rather than leave the kernel to drain it.
    SendTimeout,
    /// The peer acknowledged less than `--min-send-rate` on average: reset
    /// too.
    TooSlow,
    /// A response was cut short where only the close would end it (a
    /// stream to HTTP/1.0): the caller must reset the connection, so that
    /// the client cannot take the body for whole.
    CutShort,
    /// Any other IO error.
    Io(io::Error),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::SendTimeout => f.write_str("send timeout: the peer stopped reading"),
            Ended::CutShort => f.write_str("a response cut short"),
            Ended::TooSlow => f.write_str("the peer read below --min-send-rate"),
            Ended::Io(e) => e.fmt(f),
        }
    }
}

impl From<io::Error> for Ended {
    fn from(e: io::Error) -> Ended {
        Ended::Io(e)
    }
}
