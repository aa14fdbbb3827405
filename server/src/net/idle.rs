//! The buffers a connection puts away while it waits for its next request
//! (read buffer, the queue's [`Spare`], its frame buffer; after a short
//! hold for a client that asks again at once), in a pool per worker
//! thread: an idle keep-alive connection holds only its task and state,
//! and a pool rather than freeing keeps a request at zero allocations. At
//! most [`KEPT`] of each kind; each connection's base still covers its
//! buffers. Only a socket with [`UNBUFFERED`](super::Socket::UNBUFFERED)
//! does this.

use std::cell::RefCell;

use bytes::BytesMut;
use unflat::queue::Spare;

use super::READ_CHUNK;
use crate::session::WRITE_BUFFER_FIRST;

/// Buffers of each kind a worker thread keeps: a small fixed cost (1.5 MiB
/// per worker at most).
pub const KEPT: usize = 64;

/// The largest write buffer the pool keeps: the one every connection's
/// base covers, so a pooled buffer never needs more lease than a new one.
const LARGEST_WRITE_BUFFER: usize = WRITE_BUFFER_FIRST;

/// Frame buffers a worker thread keeps: they are larger (64 KiB by
/// default), and only a connection streaming a body needs one.
pub const KEPT_FRAMES: usize = 4;

/// A connection's buffers, as it puts them away and takes them out.
#[derive(Debug, Default)]
pub struct Buffers {
    /// An empty read buffer of [`READ_CHUNK`] bytes; `None` when it had
    /// grown and was freed.
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

/// Puts a connection's buffers away, in one visit to the pool; a write
/// buffer over [`LARGEST_WRITE_BUFFER`] is freed, its lists kept.
pub fn put_away(buffers: Buffers) {
    POOL.with_borrow_mut(|p| {
        if let Some(read) = buffers.read {
            if p.read.len() < KEPT {
                p.read.push(read);
            }
        }
        if let Some(mut write) = buffers.write {
            if write.buffer_capacity() > LARGEST_WRITE_BUFFER {
                // The lists are kept: long bodies then allocate one buffer
                // per response, not the lists too.
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

/// A read buffer of [`READ_CHUNK`] bytes, pooled or new, and a queue's
/// spare if the pool keeps one (frame buffers: [`take_frame`]).
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
