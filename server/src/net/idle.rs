//! What a connection puts away while it waits for its next request: its
//! read buffer, its queue's write buffer and lists ([`Spare`]) and its
//! frame buffer (what a streamed body is encoded into) go to a pool of the
//! worker thread's,
//! so that an idle keep-alive connection holds its task and its protocol
//! state only (measured in docs/results/instructions-and-profiles.md).
//!
//! Why a pool rather than freeing them: a connection that is answered and
//! waits again — every sequential keep-alive request — takes its buffers
//! back without the allocator, so a request still costs no allocation.
//! The pool keeps at most [`KEPT`] buffers of each kind per worker thread;
//! what it holds is the server's own, outside every connection's lease
//! (each connection's base still covers its buffers: the lease is what it
//! may use, and it uses them again as soon as it reads).
//!
//! Only a socket that can wait for readability without a buffer
//! ([`Socket::READY_WITHOUT_BUFFER`](super::Socket::READY_WITHOUT_BUFFER))
//! puts its buffers away: a TLS stream reads records into buffers of its own.

use std::cell::RefCell;

use bytes::BytesMut;
use unflat::queue::Spare;

use super::READ_CHUNK;
use crate::session::WRITE_BUFFER_FIRST;

/// Buffers of each kind a worker thread keeps for its connections: enough
/// for the connections that are answered at once, few enough that the
/// pool is a small fixed cost (64 × 16 KiB read and 64 × at most 8 KiB
/// write buffers: 1.5 MiB per worker at most).
pub const KEPT: usize = 64;

/// The largest write buffer the pool keeps: the one every connection's
/// base covers, so that a buffer taken from the pool never needs more of a
/// lease than a new one; one grown by a large encoded body is freed.
const LARGEST_WRITE_BUFFER: usize = WRITE_BUFFER_FIRST;

/// Frame buffers a worker thread keeps: they are larger (64 KiB by
/// default), and only a connection streaming a body needs one.
pub const KEPT_FRAMES: usize = 4;

/// A connection's buffers, as it puts them away and takes them out.
#[derive(Debug, Default)]
pub struct Buffers {
    /// An empty read buffer whose allocation is [`READ_CHUNK`] bytes (its
    /// consumed front is reclaimed by the connection that takes it, as its
    /// own would be); `None` when it had grown and was freed.
    pub read: Option<BytesMut>,
    /// The queue's write buffer and lists.
    pub write: Option<Spare>,
    /// The queue's frame buffer.
    pub frame: Option<Vec<u8>>,
}

struct Pool {
    read: Vec<BytesMut>,
    write: Vec<Spare>,
    frames: Vec<Vec<u8>>,
}

thread_local! {
    // Initialised in place (`const`): no lazy initialisation to check on
    // every visit, which a request pays twice.
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            read: Vec::new(),
            write: Vec::new(),
            frames: Vec::new(),
        })
    };
}

/// Puts a connection's buffers away (a write buffer larger than
/// [`LARGEST_WRITE_BUFFER`] is freed, its lists kept, and any beyond what
/// the pool keeps).
/// One visit to the pool for all.
pub fn put_away(buffers: Buffers) {
    POOL.with_borrow_mut(|p| {
        if let Some(read) = buffers.read {
            if p.read.len() < KEPT {
                p.read.push(read);
            }
        }
        if let Some(mut write) = buffers.write {
            if write.buffer_capacity() > LARGEST_WRITE_BUFFER {
                // Grown by a long body: freed; the lists are kept, so that
                // a connection sending long bodies allocates one buffer
                // per response, not its lists too.
                write.free_buffer();
            }
            if p.write.len() < KEPT {
                p.write.push(write);
            }
        }
        if let Some(frame) = buffers.frame {
            if p.frames.len() < KEPT_FRAMES {
                p.frames.push(frame);
            }
        }
    });
}

/// A read buffer whose allocation is [`READ_CHUNK`] bytes (one put away,
/// or a new one), and a queue's spare if the pool keeps one. A frame buffer
/// is taken apart ([`take_frame`]), by a connection that had one.
pub fn take_out() -> (BytesMut, Option<Spare>) {
    let (read, write) = POOL.with_borrow_mut(|p| (p.read.pop(), p.write.pop()));
    let read = read.unwrap_or_else(|| BytesMut::with_capacity(READ_CHUNK));
    (read, write)
}

/// A frame buffer the pool keeps, if it has one.
pub fn take_frame() -> Option<Vec<u8>> {
    POOL.with_borrow_mut(|p| p.frames.pop())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue's spare whose write buffer is `n` bytes (at least 4 KiB,
    /// the queue's first size).
    fn spare(n: usize) -> Spare {
        let mut q = unflat::queue::WriteQueue::new();
        q.copy(&vec![0; n]);
        q.write_to(&mut std::io::sink()).unwrap();
        q.take_spare().unwrap()
    }

    #[test]
    fn buffers_come_back_and_a_large_write_buffer_is_freed() {
        let mut read = BytesMut::with_capacity(READ_CHUNK);
        read.extend_from_slice(&[7; 100]);
        bytes::Buf::advance(&mut read, 100);
        put_away(Buffers {
            read: Some(read),
            write: Some(spare(4096)),
            frame: Some(vec![0; 64]),
        });
        let (read, write) = take_out();
        // The consumed front comes with it, for its next owner to reclaim.
        assert_eq!((read.len(), read.capacity()), (0, READ_CHUNK - 100));
        assert_eq!(write.map(|w| w.buffer_capacity()), Some(4096));
        assert_eq!(take_frame().map(|f| f.len()), Some(64));
        put_away(Buffers {
            write: Some(spare(LARGEST_WRITE_BUFFER + 1)),
            ..Buffers::default()
        });
        let lists = take_out().1.expect("the lists are kept");
        assert_eq!(lists.buffer_capacity(), 0, "the grown buffer is freed");
    }

    #[test]
    fn the_pool_keeps_at_most_kept_buffers_and_makes_new_ones_when_empty() {
        for _ in 0..KEPT + 5 {
            put_away(Buffers {
                read: Some(BytesMut::with_capacity(READ_CHUNK)),
                write: Some(spare(4096)),
                frame: Some(Vec::with_capacity(8)),
            });
        }
        POOL.with_borrow(|p| {
            assert_eq!(
                (p.read.len(), p.write.len(), p.frames.len()),
                (KEPT, KEPT, KEPT_FRAMES)
            )
        });
        for _ in 0..KEPT {
            assert!(take_out().1.is_some());
        }
        let (read, write) = take_out();
        assert_eq!(read.capacity(), READ_CHUNK);
        assert!(write.is_none());
    }
}
