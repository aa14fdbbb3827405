//! What writing a response may add to the connection's queue, bounded
//! before anything is written: the bytes each strategy copies or encodes
//! into the write buffer, whether a framed segment comes with them, how
//! many segments — mirroring the queue's own rules (a buffer shorter than
//! the copy threshold is copied, text longer than a frame is framed) — and
//! the flatten strategy's transient flat string.

use unflat::queue::{Policy, Pushes};
use unflat::{storage_size, Encoding};

use super::Body;

/// The longest chunk of a ropey rope (its leaves hold at most 984 bytes on
/// 64-bit targets): a rope whose chunks are all shorter than the copy
/// threshold is queued as one run.
const ROPE_CHUNK_MAX: usize = 1024;

/// What the direct strategy's pushes of `body` may add to a queue of
/// `policy` (see `direct.rs`, and the queue's own rules: a buffer shorter
/// than the copy threshold is copied, text longer than a frame is framed).
pub(super) fn direct_pushes(policy: Policy, body: &Body<'_>) -> Pushes {
    let frame = policy.frame.max(unflat::Encoder::MIN_DST);
    let copy = |copied| Pushes {
        copied,
        framed: false,
        segments: 0,
    };
    match *body {
        Body::Empty | Body::Unsent(_) => Pushes::default(),
        Body::Bytes(b) => copy(b.len()),
        Body::SharedText(b) | Body::SharedBytes(b) if b.len() < policy.copy_below => copy(b.len()),
        Body::SharedText(_) | Body::SharedBytes(_) => Pushes {
            segments: 1,
            ..Pushes::default()
        },
        Body::Rope(_, len) => Pushes {
            copied: if len > frame { 0 } else { len },
            framed: len > frame,
            // Runs alternate between shared and copied only when some
            // chunks are long enough to share.
            segments: if policy.copy_below > ROPE_CHUNK_MAX {
                1
            } else {
                len / 256 + 2
            },
        },
        // As `WriteQueue::stream` decides: encoded at once into room for the
        // worst case when that fits a frame, else into room for the exact
        // size when that does, else framed.
        Body::Transcoded(text, len) => match storage_size(&**text, Encoding::Utf8) {
            bound if bound <= frame => copy(bound),
            _ if len <= frame => copy(len),
            _ => Pushes {
                copied: 0,
                framed: true,
                segments: 1,
            },
        },
    }
}

/// What the flatten strategy's writing of `body` behind a head of
/// `head_len` bytes may add to a queue of `policy`, and the transient flat
/// string it builds on the way: at most two bytes per unit of what it
/// flattens, and three bytes of UTF-8 per unit. A shared payload is not
/// flattened: only the head is, and the payload's owned copy carries its
/// own charge (the queue copies it, as any buffer, when it is short).
pub(super) fn flattened_pushes(
    policy: Policy,
    head_len: usize,
    body: &Body<'_>,
) -> (Pushes, usize) {
    let flattened = match body {
        Body::SharedBytes(_) => head_len,
        _ => head_len + body.content_length(),
    };
    let pushes = match *body {
        Body::Empty | Body::Unsent(_) => Pushes::default(),
        Body::Bytes(b) => Pushes {
            copied: b.len(),
            ..Pushes::default()
        },
        Body::SharedBytes(b) if b.len() < policy.copy_below => Pushes {
            copied: b.len(),
            ..Pushes::default()
        },
        Body::SharedBytes(_) => Pushes {
            segments: 1,
            ..Pushes::default()
        },
        Body::SharedText(_) | Body::Rope(..) | Body::Transcoded(..) => Pushes {
            copied: 3 * body.content_length(),
            ..Pushes::default()
        },
    };
    (pushes, 2 * flattened)
}
