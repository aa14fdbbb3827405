//! The bodies the benchmark routes send, built once and shared.
//!
//! An `/end-string` body is kept in the representation of its kind, so that
//! each encoder path is exercised: `ascii` as a ropey rope (sent as iovecs at
//! its chunks), `latin1` as one-byte text (back-of-buffer expansion), and
//! `twobyte` as UTF-16 (the two-byte path). A `/large` payload is one
//! [`Bytes`]; only the most recent size is kept.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use unflat::Measured;

/// The character kinds of `/end-string`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `a`, U+0061.
    Ascii,
    /// `é`, U+00E9: one-byte text that is not ASCII.
    Latin1,
    /// `€`, U+20AC: above U+00FF, so two-byte text.
    TwoByte,
}

impl Kind {
    /// Parses the `kind` query value.
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "ascii" => Some(Kind::Ascii),
            "latin1" => Some(Kind::Latin1),
            "twobyte" => Some(Kind::TwoByte),
            _ => None,
        }
    }

    /// The character the body repeats.
    pub fn char(self) -> char {
        match self {
            Kind::Ascii => 'a',
            Kind::Latin1 => 'é',
            Kind::TwoByte => '€',
        }
    }
}

/// An `/end-string` body in its kind's representation.
#[derive(Clone, Debug)]
pub enum Text {
    /// ASCII, as a ropey rope (measured once, see [`unflat::Measured`]).
    Rope(Measured<ropey::Rope>),
    /// One-byte (Latin-1) text.
    OneByte(Arc<[u8]>),
    /// Two-byte (UTF-16) text.
    TwoByte(Arc<[u16]>),
}

/// A cached body and its UTF-8 length (the `Content-Length`), so that no
/// request pays for measuring it.
#[derive(Clone, Debug)]
pub struct EndString {
    /// The text.
    pub text: Text,
    /// Its length in UTF-8 bytes.
    pub utf8_len: usize,
}

impl EndString {
    /// Builds the body of `len` characters of `kind`.
    pub fn build(len: usize, kind: Kind) -> EndString {
        let c = kind.char();
        let utf8_len = len * c.len_utf8();
        let text = match kind {
            Kind::Ascii => Text::Rope(Measured::new(ropey::Rope::from_str(&"a".repeat(len)))),
            Kind::Latin1 => Text::OneByte(vec![c as u8; len].into()),
            Kind::TwoByte => Text::TwoByte(vec![c as u16; len].into()),
        };
        EndString { text, utf8_len }
    }

    /// Bytes the text occupies in memory.
    fn footprint(&self) -> usize {
        match &self.text {
            Text::Rope(r) => r.get().len_bytes(),
            Text::OneByte(b) => b.len(),
            Text::TwoByte(u) => 2 * u.len(),
        }
    }
}

/// The `/end-string` bodies, bounded by the bytes they hold; the oldest go
/// first.
#[derive(Debug)]
pub struct EndStrings {
    inner: Mutex<Entries>,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<(usize, Kind), EndString>,
    order: VecDeque<(usize, Kind)>,
    bytes: usize,
}

impl EndStrings {
    /// An empty cache holding at most `max_bytes` of text (a single larger
    /// body is still served, and kept alone).
    pub fn new(max_bytes: usize) -> EndStrings {
        EndStrings {
            inner: Mutex::new(Entries::default()),
            max_bytes,
        }
    }

    /// The body for `(len, kind)`, built on first use. Cloning it costs a
    /// reference-count increment.
    pub fn get(&self, len: usize, kind: Kind) -> EndString {
        if let Some(hit) = self.lock().map.get(&(len, kind)) {
            return hit.clone();
        }
        // Built outside the lock: a large body takes a while.
        let body = EndString::build(len, kind);
        let mut e = self.lock();
        if let Some(raced) = e.map.get(&(len, kind)) {
            return raced.clone();
        }
        while e.bytes + body.footprint() > self.max_bytes {
            let Some(old) = e.order.pop_front() else {
                break;
            };
            if let Some(gone) = e.map.remove(&old) {
                e.bytes -= gone.footprint();
            }
        }
        e.bytes += body.footprint();
        e.order.push_back((len, kind));
        e.map.insert((len, kind), body.clone());
        body
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock leaves the map consistent (every
        // update is a single insert or remove), so a poisoned lock is usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `/large` payload: `size` bytes of `0x61`, with the little-endian u32
/// byte offset stamped at every 4 KiB boundary, so that reordering or
/// corruption changes its SHA-256.
pub fn large_payload(size: usize) -> Bytes {
    let mut v = vec![0x61u8; size];
    for at in (0..size).step_by(4096) {
        let stamp = (at as u32).to_le_bytes();
        let end = (at + 4).min(size);
        v[at..end].copy_from_slice(&stamp[..end - at]);
    }
    Bytes::from(v)
}

/// The most recent `/large` payload.
#[derive(Debug, Default)]
pub struct Large {
    last: Mutex<Option<Bytes>>,
}

impl Large {
    /// The payload of `size` bytes, built unless it is the most recent one.
    pub fn get(&self, size: usize) -> Bytes {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &*last {
            Some(b) if b.len() == size => b.clone(),
            _ => {
                // Drop the old payload before building the new one, so that
                // two large payloads never coexist here.
                *last = None;
                let b = large_payload(size);
                *last = Some(b.clone());
                b
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_payload_is_stamped_at_every_4k() {
        let p = large_payload(4096 * 2 + 2);
        assert_eq!(&p[..5], &[0, 0, 0, 0, 0x61]);
        assert_eq!(&p[4096..4101], &[0, 16, 0, 0, 0x61]);
        assert_eq!(&p[8192..], &[0, 32]);
    }

    #[test]
    fn end_strings_are_evicted_oldest_first() {
        let cache = EndStrings::new(100);
        cache.get(60, Kind::Ascii);
        cache.get(30, Kind::Latin1);
        cache.get(20, Kind::TwoByte); // 40 bytes: evicts the ascii one
        let e = cache.lock();
        assert!(!e.map.contains_key(&(60, Kind::Ascii)));
        assert_eq!(e.bytes, 70);
    }
}
