//! The direct strategy: the head encoded straight into the write buffer,
//! the body in the form its route keeps it — shared, copied, or encoded
//! behind the head — as the queue's copy-or-share policy decides.

use bytes::Buf;
use unflat::queue::WriteQueue;
use unflat::{Encoding, Measured, Mode, Rope};

use super::{encode, Body};

/// Queues `head` and `body`.
pub(super) fn write<H: Rope>(queue: &mut WriteQueue, head: &Measured<H>, body: &Body<'_>) {
    encode(queue, head, Encoding::Latin1);
    self::body(queue, body);
}

/// Queues `body`, behind its head.
#[inline]
pub(super) fn body(queue: &mut WriteQueue, body: &Body<'_>) {
    let before = queue.remaining();
    match body {
        Body::Empty | Body::Unsent(_) | Body::Stream => {}
        Body::Bytes(b) => queue.copy(b),
        Body::SharedText(b) | Body::SharedBytes(b) => queue.share(b),
        Body::Rope(rope, len) => queue.share_rope(rope, 0..*len),
        Body::Transcoded(text, _) => {
            queue
                .stream(text, Encoding::Utf8, Mode::Strict)
                .expect("utf8 refuses nothing");
        }
    }
    debug_assert_eq!(
        queue.remaining() - before,
        body.content_length(),
        "the body bytes queued are the Content-Length sent"
    );
}
