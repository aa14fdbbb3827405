//! The flatten strategy, the old copying path kept to be measured: head and
//! body collected into one flat string, then encoded into the write buffer,
//! every byte copied twice; a shared payload copied into an owned buffer
//! first (the Deno write path before its fix).

use std::sync::Arc;

use bytes::{Buf, Bytes};
use unflat::flatten::{flatten, Flat};
use unflat::queue::WriteQueue;
use unflat::{Encoding, Latin1, Rope, Utf16};

use super::{encode, Body, Lead, Unqueued};
use crate::memory::{Charge, Memory, Part};

/// Queues `head` and `body` as the old path did; a shared payload's owned
/// copy is charged to `memory` for as long as the queue holds it. Nothing
/// is queued when a value of the head is refused as it is flattened.
pub(super) fn write<const N: usize>(
    queue: &mut WriteQueue,
    head: Lead<'_, '_, N>,
    body: &Body<'_>,
    memory: &Arc<Memory>,
) -> Result<(), Unqueued> {
    // The head flattened first, as Node's `ValueView` flattened a header
    // string (copy 1); copied into the write buffer with the body (copy 2).
    let mut flat = head.flat()?;
    match body {
        Body::Empty | Body::Unsent(_) | Body::Stream => queue.copy(&flat),
        Body::Bytes(b) => {
            // Bytes are no text: they join the flat head as they are,
            // and the whole is copied into the write buffer.
            flat.extend_from_slice(b);
            queue.copy(&flat);
        }
        Body::SharedText(b) => flatten_into(queue, flat, &Latin1(b)),
        Body::Rope(r, _) => flatten_into(queue, flat, *r),
        Body::Transcoded(r, _) => flatten_into(queue, flat, &***r),
        Body::SharedBytes(payload) => {
            // The copy is charged for as long as the queue holds it.
            let charge = memory.charge(Part::Connections, payload.len())?;
            queue.copy(&flat);
            let owned = Bytes::from_owner(Charged {
                bytes: payload.to_vec(),
                _charge: charge,
            });
            let before = queue.remaining();
            queue.share(&owned);
            debug_assert_eq!(queue.remaining() - before, payload.len());
        }
    }
    Ok(())
}

/// A buffer and the charge of its memory, dropped together.
struct Charged {
    bytes: Vec<u8>,
    _charge: Charge,
}

impl AsRef<[u8]> for Charged {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Collects the text `body` behind the flat head into one flat string
/// (copy 1), then encodes it into the write buffer (copy 2): the head as
/// its bytes, the body as UTF-8.
fn flatten_into(queue: &mut WriteQueue, mut head: Vec<u8>, body: &dyn Rope) {
    let head_len = head.len();
    match flatten(body) {
        Flat::OneByte(text) => {
            head.extend_from_slice(&text);
            queue.copy(&head[..head_len]);
            encode(queue, &Latin1(&head[head_len..]), Encoding::Utf8);
        }
        Flat::TwoByte(text) => {
            queue.copy(&head);
            encode(queue, &Utf16(&text[..]), Encoding::Utf8);
        }
    }
}
