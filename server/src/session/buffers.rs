//! What the connection asks of its session's [`Budget`](crate::memory::Budget)
//! (its base, a larger read buffer, a TLS write), and what a write gives
//! back: bodies no response needs, memory the buffers no longer occupy.

use unflat::queue::WriteQueue;

use super::{Dispatch, Protocol, Service, Session, WRITE_BUFFER_FIRST};
use crate::memory::Full;

impl<S: Service> Session<S> {
    /// A connection's base ([`Lease`](crate::memory::Lease)): its read
    /// buffer, its socket's buffers, a write buffer for a small response,
    /// and what the service and its observer keep for it.
    pub fn base_memory(service: &Protocol<S>, read_buffer: usize, socket: usize) -> usize {
        read_buffer + socket + WRITE_BUFFER_FIRST + Session::kept_memory(service)
    }

    /// What the service and its observer keep for a connection, at most.
    pub(super) fn kept_memory(service: &Protocol<S>) -> usize {
        Dispatch::memory(service)
    }

    /// Makes the lease cover the read buffer grown to `bytes`, or fails (the
    /// buffer must then not grow).
    pub fn grow_read_buffer(&mut self, queue: &WriteQueue, bytes: usize) -> Result<(), Full> {
        self.budget.grow_read_buffer(bytes, queue.footprint())
    }

    /// Makes the lease cover `bytes` the socket may hold of the write about
    /// to begin, or fails (the socket must then hold no more than its own
    /// buffers allow); [`Session::settle`] gives it back.
    pub fn cover_sending(&mut self, queue: &WriteQueue, bytes: usize) -> Result<(), Full> {
        self.budget.cover_sending(bytes, queue.footprint())
    }

    /// After a write: tells the observer what was written, lets go of the
    /// bodies responses no longer need, and gives back what the buffers no
    /// longer occupy.
    #[inline]
    pub fn settle(&mut self, queue: &WriteQueue, service: &Protocol<S>) {
        self.release_written(queue, service);
        self.budget.settle(queue.footprint());
    }

    /// Tells the observer how much of the output the queue has written
    /// ([`Observe::sent`]), and drops the bodies of the responses written
    /// whole.
    #[inline]
    pub(super) fn release_written(&mut self, queue: &WriteQueue, service: &Protocol<S>) {
        let written = queue.ledger().written();
        self.app.sent(service, written);
        while self
            .referenced
            .front()
            .is_some_and(|&(end, _)| end <= written)
        {
            if let Some((_, reply)) = self.referenced.pop_front() {
                self.app.recycle(service, reply);
            }
        }
    }

    /// Bytes the session's lease covers.
    pub fn leased(&self) -> usize {
        self.budget.leased()
    }
}
