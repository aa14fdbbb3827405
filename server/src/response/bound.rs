//! What writing a response may add to the connection's queue, bounded
//! before anything is written: for the direct strategy, what the queue
//! says each of its pushes will add ([`WriteQueue::pushes`], the queue's
//! own rules); for the flatten strategy, the flat string it encodes and
//! the transient copy it builds on the way.

use unflat::queue::{Push, Pushes, WriteQueue};
use unflat::Encoding;

use super::Body;

/// The push the direct strategy makes of `body` (see `direct.rs`).
fn direct_push<'a>(body: &Body<'a>) -> Option<Push<'a>> {
    Some(match *body {
        Body::Empty | Body::Unsent(_) | Body::Stream => return None,
        Body::Bytes(b) => Push::Copy(b.len()),
        Body::SharedText(b) | Body::SharedBytes(b) => Push::Share(b.len()),
        Body::Rope(_, len) => Push::ShareRope(len),
        Body::Transcoded(rope, len) => Push::Stream {
            rope,
            encoding: Encoding::Utf8,
            len,
        },
    })
}

/// What the direct strategy's pushes of a head of `head_len` bytes and
/// `body` add to `queue`.
pub(super) fn direct_pushes(queue: &WriteQueue, head_len: usize, body: &Body<'_>) -> Pushes {
    let head = queue.pushes(Push::Copy(head_len));
    match direct_push(body) {
        Some(push) => head.then(queue.pushes(push)),
        None => head,
    }
}

/// What the flatten strategy's writing of `body` behind a head of
/// `head_len` bytes may add to `queue`, and its transient flat string: at
/// most two bytes per unit flattened, three of UTF-8 per unit. A shared
/// payload is not flattened; its owned copy carries its own charge.
pub(super) fn flattened_pushes(
    queue: &WriteQueue,
    head_len: usize,
    body: &Body<'_>,
) -> (Pushes, usize) {
    let (flattened, body_push) = match *body {
        Body::SharedBytes(b) => (head_len, Some(Push::Share(b.len()))),
        Body::Empty | Body::Unsent(_) | Body::Stream => (head_len, None),
        _ => (head_len + body.content_length(), None),
    };
    let text = match *body {
        Body::Bytes(b) => b.len(),
        Body::SharedText(_) | Body::Rope(..) | Body::Transcoded(..) => 3 * body.content_length(),
        _ => 0,
    };
    let pushes = queue.pushes(Push::Copy(head_len + text));
    let pushes = match body_push {
        Some(push) => pushes.then(queue.pushes(push)),
        None => pushes,
    };
    (pushes, 2 * flattened)
}
