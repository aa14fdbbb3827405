//! The direct strategy: the head encoded straight into the write buffer,
//! the body in the form its route keeps it — shared, copied, or encoded
//! behind the head — as the queue's copy-or-share policy decides.

use bytes::Buf;
use unflat::queue::WriteQueue;
use unflat::{Encoding, Mode};

use super::{Body, FieldError, Lead};

/// Queues `head`, `head_len` bytes at most, and `body`; neither when a
/// value of the head is refused as it is written.
pub(super) fn write<const N: usize>(
    queue: &mut WriteQueue,
    head: Lead<'_, '_, N>,
    head_len: usize,
    body: &Body<'_>,
) -> Result<(), FieldError> {
    if runs_code(body) {
        return queue.marked(|queue| {
            head.queue(queue, head_len)?;
            self::body(queue, body);
            Ok(())
        });
    }
    head.queue(queue, head_len)?;
    self::body(queue, body);
    Ok(())
}

/// Whether queueing `body` runs a rope of the application's — encoded as
/// it is queued, so it may panic, or give other bytes than it measured
/// (`body` checks that): its head and it are then queued behind a mark
/// ([`WriteQueue::marked`]), so that a failure takes the head back too and
/// the 500 in its place is whole, never inside a body.
pub(super) fn runs_code(body: &Body<'_>) -> bool {
    matches!(body, Body::Transcoded(..))
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
    // A body's text is measured on one walk and encoded on another: a
    // rope of the application's whose pieces changed between the two
    // would break the framing. Checked in every build; the panic is the
    // application's, and the session ends the response as for any other.
    assert_eq!(
        queue.remaining() - before,
        body.content_length(),
        "a body's text gave other bytes than it measured"
    );
}
