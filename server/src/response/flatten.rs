//! The flatten strategy, the old copying path kept to be measured: head and
//! body collected into one flat string, then encoded into the write buffer,
//! every byte copied twice; a shared payload copied into an owned buffer
//! first (the Deno write path before its fix).

use std::sync::Arc;

use bytes::{Buf, Bytes};
use unflat::flatten::{flatten, Flat};
use unflat::queue::WriteQueue;
use unflat::{Encoding, Latin1, Measured, Rope, Utf16};

use super::{encode, Body};
use crate::memory::{Charge, Full, Memory, Part};

/// Queues `head` and `body` as the old path did; a shared payload's owned
/// copy is charged to `memory` for as long as the queue holds it.
pub(super) fn write<H: Rope>(
    queue: &mut WriteQueue,
    head: &Measured<H>,
    body: &Body<'_>,
    memory: &Arc<Memory>,
) -> Result<(), Full> {
    match body {
        Body::Empty | Body::Unsent(_) | Body::Stream => flatten_into(queue, head, &[head]),
        Body::Bytes(b) => {
            // Bytes are no text: they join the flat head as they are,
            // and the whole is copied into the write buffer.
            let Flat::OneByte(mut flat) = flatten(head.get()) else {
                unreachable!("a head is one-byte text");
            };
            flat.extend_from_slice(b);
            queue.copy(&flat);
        }
        Body::SharedText(b) => flatten_into(queue, head, &[head, &Latin1(b)]),
        Body::Rope(r, _) => flatten_into(queue, head, &[head, *r]),
        Body::Transcoded(r, _) => flatten_into(queue, head, &[head, &***r]),
        Body::SharedBytes(payload) => {
            // The copy is charged for as long as the queue holds it.
            let charge = memory.charge(Part::Connections, payload.len())?;
            flatten_into(queue, head, &[head]);
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

/// Collects `parts`, head first, into one flat string (copy 1), then
/// encodes it into the write buffer (copy 2): the head as latin1, the rest
/// as UTF-8.
fn flatten_into<H: Rope>(queue: &mut WriteQueue, head: &Measured<H>, parts: &[&dyn Rope]) {
    let head_len = head.shape().one_byte;
    match flatten(parts) {
        Flat::OneByte(flat) => {
            encode(queue, &Latin1(&flat[..head_len]), Encoding::Latin1);
            encode(queue, &Latin1(&flat[head_len..]), Encoding::Utf8);
        }
        Flat::TwoByte(flat) => {
            encode(queue, &Utf16(&flat[..head_len]), Encoding::Latin1);
            encode(queue, &Utf16(&flat[head_len..]), Encoding::Utf8);
        }
    }
}
