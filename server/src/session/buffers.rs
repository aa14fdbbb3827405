//! What a connection's buffers occupy, as its session counts them against
//! its lease on the memory account: the queue's own (which the queue
//! reports), and those it does not show — the read buffer, the socket's
//! own buffers, a request body or a document a reply holds, what the
//! service keeps for the connection (the demo's access-log lines) — and the
//! bodies queued responses keep alive.

use unflat::queue::WriteQueue;

use super::{Protocol, Service, Session, State, WRITE_BUFFER_FIRST};
use crate::memory::Full;

/// Bytes of memory a connection's buffers occupy that its queue does not
/// show, as the session counts them against its lease.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Outside {
    /// The read buffer's allocation.
    pub read_buffer: usize,
    /// The socket's own buffers, always (TLS records being read).
    pub socket: usize,
    /// What the socket may hold of the write in progress (TLS records).
    pub sending: usize,
    /// What the service's value for the connection holds at most
    /// ([`Service::conn_memory`]).
    pub conn: usize,
}

impl<S: Service> Session<S> {
    /// A connection's base ([`Lease`](crate::memory::Lease)): its read buffer of `read_buffer`
    /// bytes, its socket's buffers of `socket`, a write buffer for a small
    /// response, and what the service keeps for it (the demo's access-log
    /// lines, when the log is on).
    pub fn base_memory(service: &Protocol<S>, read_buffer: usize, socket: usize) -> usize {
        read_buffer + socket + WRITE_BUFFER_FIRST + service.service.conn_memory()
    }

    /// Bytes the connection's buffers occupy outside `queue`.
    pub(super) fn besides(&self) -> usize {
        let o = self.outside;
        let body = match &self.state {
            State::Body { pending, .. } | State::Ready(pending) | State::Deferred(pending) => {
                pending.held()
            }
            State::Head | State::Streaming(_) | State::Closed => 0,
        };
        o.read_buffer + o.socket + o.sending + body + o.conn
    }

    /// Makes the lease cover the read buffer grown to `bytes`, or fails (the
    /// buffer must then not grow).
    pub fn grow_read_buffer(&mut self, queue: &WriteQueue, bytes: usize) -> Result<(), Full> {
        let need = self.besides() - self.outside.read_buffer + bytes + queue.footprint();
        self.lease.cover(need)?;
        self.outside.read_buffer = bytes;
        Ok(())
    }

    /// Makes the lease cover `bytes` the socket may hold of the write about
    /// to begin, or fails (the socket must then hold no more than its own
    /// buffers allow); [`Session::settle`] gives it back.
    pub fn cover_sending(&mut self, queue: &WriteQueue, bytes: usize) -> Result<(), Full> {
        let need = self.besides() - self.outside.sending + bytes + queue.footprint();
        self.lease.cover(need)?;
        self.outside.sending = bytes;
        Ok(())
    }

    /// After a write: tells the service what was written, lets go of the
    /// bodies responses no longer need, and gives back what the buffers no
    /// longer occupy.
    #[inline]
    pub fn settle(&mut self, queue: &WriteQueue, service: &Protocol<S>) {
        self.release_written(queue, service);
        self.outside.sending = 0;
        self.lease.trim(self.besides() + queue.footprint());
    }

    /// Tells the service how much of the output the queue has written
    /// ([`Service::sent`]), and drops the bodies of the responses written
    /// whole.
    #[inline]
    pub(super) fn release_written(&mut self, queue: &WriteQueue, service: &Protocol<S>) {
        let written = queue.ledger().written();
        service.service.sent(written, &mut self.conn);
        while self
            .referenced
            .front()
            .is_some_and(|&(end, _)| end <= written)
        {
            self.referenced.pop_front();
        }
    }

    /// Bytes the session's lease covers.
    pub fn leased(&self) -> usize {
        self.lease.held()
    }
}
