//! The bodies the benchmark routes send, built once and shared.
//!
//! An `/end-string` body is kept in the form that suits sending it, chosen
//! by its kind and the `body` query parameter:
//!
//! | kind      | `body=flat` (default)                                  | `body=rope`                      |
//! |-----------|--------------------------------------------------------|----------------------------------|
//! | `ascii`   | one contiguous [`Bytes`]: one iovec at its own memory   | a ropey rope: its ~1 KiB chunks  |
//! | `latin1`  | one flat one-byte string: back-of-buffer expansion      | a ropey rope (UTF-8 chunks)      |
//! | `twobyte` | one flat two-byte string: the two-byte path             | a ropey rope (UTF-8 chunks)      |
//!
//! The flat ascii body is what Node's body string is once V8 has flattened
//! it, and what hyper sends; a rope costs the write queue a walk over its
//! chunks (see `unflat::queue`). A `/large` payload is one [`Bytes`]; only the
//! most recent size is kept.
//!
//! **No lock on the request path.** The cache is shared by every worker
//! behind a mutex, but a connection asks it only when its own [`Memo`] does
//! not hold the body: a keep-alive client asking for the same body again
//! (every benchmark client) costs a comparison and a reference count, never
//! the lock. An eviction bumps the cache's generation, which makes every
//! memo ask again, so a memo never keeps an evicted body alive for long.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use unflat::queue::SharedRope;
use unflat::{Latin1, Measured, Rope, Utf16};

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

/// How an `/end-string` body is held: the `body` query value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Form {
    /// `body=flat`, the default: one flat string in the kind's own
    /// representation (see the module table).
    #[default]
    Flat,
    /// `body=rope`: a ropey rope of the text, whatever the kind.
    Rope,
}

impl Form {
    /// Parses the `body` query value.
    pub fn parse(s: &str) -> Option<Form> {
        match s {
            "flat" => Some(Form::Flat),
            "rope" => Some(Form::Rope),
            _ => None,
        }
    }
}

/// Which `/end-string` body: length in characters, kind and form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// Characters.
    pub len: usize,
    /// Which character.
    pub kind: Kind,
    /// How it is held.
    pub form: Form,
}

/// An `/end-string` body in the form it is sent from.
#[derive(Clone)]
pub enum Text {
    /// ASCII as one contiguous buffer, already its UTF-8 encoding.
    Ascii(Bytes),
    /// A ropey rope (measured once, see [`unflat::Measured`]).
    Rope(Measured<ropey::Rope>),
    /// One-byte (Latin-1) or two-byte (UTF-16) text, encoded to UTF-8 as it
    /// is sent.
    Transcoded(SharedRope),
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Text::Ascii(b) => write!(f, "Ascii({} bytes)", b.len()),
            Text::Rope(r) => write!(f, "Rope({} bytes)", r.get().len_bytes()),
            Text::Transcoded(r) => write!(f, "Transcoded({:?})", r.shape()),
        }
    }
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
    /// Builds the body for `key`.
    pub fn build(key: Key) -> EndString {
        let c = key.kind.char();
        let utf8_len = key.len * c.len_utf8();
        let text = match (key.form, key.kind) {
            (Form::Rope, _) => {
                let s = c.to_string().repeat(key.len);
                Text::Rope(Measured::new(ropey::Rope::from_str(&s)))
            }
            (Form::Flat, Kind::Ascii) => Text::Ascii(Bytes::from(vec![c as u8; key.len])),
            (Form::Flat, Kind::Latin1) => {
                Text::Transcoded(Arc::new(Latin1(vec![c as u8; key.len])))
            }
            (Form::Flat, Kind::TwoByte) => {
                Text::Transcoded(Arc::new(Utf16(vec![c as u16; key.len])))
            }
        };
        EndString { text, utf8_len }
    }

    /// Bytes the text occupies in memory.
    fn footprint(&self) -> usize {
        match &self.text {
            Text::Ascii(b) => b.len(),
            Text::Rope(r) => r.get().len_bytes(),
            Text::Transcoded(r) => {
                let s = r.shape();
                s.one_byte + s.utf8 + 2 * s.two_byte
            }
        }
    }
}

/// The `/end-string` bodies, bounded by the bytes they hold; the oldest go
/// first.
#[derive(Debug)]
pub struct EndStrings {
    inner: Mutex<Entries>,
    /// Bumped on every eviction: a [`Memo`] from an older generation may
    /// hold an evicted body and asks again.
    generation: AtomicU64,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Key, EndString>,
    order: VecDeque<Key>,
    bytes: usize,
}

/// One connection's last `/end-string` body, so that asking for it again
/// takes no lock.
#[derive(Debug, Default)]
pub struct Memo {
    last: Option<(Key, u64, EndString)>,
}

impl EndStrings {
    /// An empty cache holding at most `max_bytes` of text (a single larger
    /// body is still served, and kept alone).
    pub fn new(max_bytes: usize) -> EndStrings {
        EndStrings {
            inner: Mutex::new(Entries::default()),
            generation: AtomicU64::new(0),
            max_bytes,
        }
    }

    /// The body for `key`: from `memo` when it holds it and nothing was
    /// evicted since, else from the shared cache (built on first use), which
    /// `memo` then remembers.
    pub fn get<'m>(&self, key: Key, memo: &'m mut Memo) -> &'m EndString {
        // Acquire pairs with the Release of an eviction: a memo stamped with
        // the current generation was filled after the last eviction.
        let generation = self.generation.load(Ordering::Acquire);
        let fresh = matches!(&memo.last, Some((k, g, _)) if *k == key && *g == generation);
        if !fresh {
            memo.last = Some((key, generation, self.get_shared(key)));
        }
        let (_, _, body) = memo.last.as_ref().expect("filled above");
        body
    }

    /// The body for `key` from the shared cache, built on first use. Cloning
    /// it costs a reference-count increment.
    fn get_shared(&self, key: Key) -> EndString {
        if let Some(hit) = self.lock().map.get(&key) {
            return hit.clone();
        }
        // Built outside the lock: a large body takes a while.
        let body = EndString::build(key);
        let mut e = self.lock();
        if let Some(raced) = e.map.get(&key) {
            return raced.clone();
        }
        while e.bytes + body.footprint() > self.max_bytes {
            let Some(old) = e.order.pop_front() else {
                break;
            };
            if let Some(gone) = e.map.remove(&old) {
                e.bytes -= gone.footprint();
                self.generation.fetch_add(1, Ordering::Release);
            }
        }
        e.bytes += body.footprint();
        e.order.push_back(key);
        e.map.insert(key, body.clone());
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

/// The `/large` payloads: the most recent one is kept, and at most
/// `max_bytes` are held at once, counting the cached payload and those being
/// built. A payload is built off the async workers (the connection calls
/// [`Large::build`] on tokio's blocking pool) and no request waits on a lock
/// while one is built.
///
/// The bound covers what this cache holds; a payload that responses still
/// reference lives until they are written, as any queued body does.
#[derive(Debug)]
pub struct Large {
    inner: Mutex<LargeState>,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct LargeState {
    last: Option<Bytes>,
    building: usize,
}

/// A payload could not be held within the memory bound (`--large-bytes`)
/// because others are being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy;

impl Large {
    /// A cache holding at most `max_bytes` of payloads.
    pub fn new(max_bytes: usize) -> Large {
        Large {
            inner: Mutex::new(LargeState::default()),
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LargeState> {
        // Every update is a single assignment: a poisoned lock is consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes of payloads being built now.
    pub fn building(&self) -> usize {
        self.lock().building
    }

    /// The payload of `size` bytes if it is the cached one.
    pub fn cached(&self, size: usize) -> Option<Bytes> {
        self.lock()
            .last
            .as_ref()
            .filter(|b| b.len() == size)
            .cloned()
    }

    /// The payload of `size` bytes: the cached one, or built now (blocking;
    /// call it off the async workers) and cached. Fails with [`Busy`] when
    /// the payloads being built leave no room for it.
    pub fn build(&self, size: usize) -> Result<Bytes, Busy> {
        {
            let mut state = self.lock();
            if let Some(hit) = state.last.as_ref().filter(|b| b.len() == size) {
                return Ok(hit.clone());
            }
            let cached = state.last.as_ref().map_or(0, Bytes::len);
            if state.building + cached + size > self.max_bytes {
                // Make room: the cached payload goes first.
                state.last = None;
            }
            if state.building + size > self.max_bytes {
                return Err(Busy);
            }
            state.building += size;
        }
        let payload = large_payload(size);
        let mut state = self.lock();
        state.building -= size;
        state.last = Some(payload.clone());
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(len: usize, kind: Kind) -> Key {
        Key {
            len,
            kind,
            form: Form::Flat,
        }
    }

    #[test]
    fn large_payload_is_stamped_at_every_4k() {
        let p = large_payload(4096 * 2 + 2);
        assert_eq!(&p[..5], &[0, 0, 0, 0, 0x61]);
        assert_eq!(&p[4096..4101], &[0, 16, 0, 0, 0x61]);
        assert_eq!(&p[8192..], &[0, 32]);
    }

    #[test]
    fn large_payloads_stay_within_their_bound() {
        let large = Large::new(100);
        assert_eq!(large.build(60).unwrap().len(), 60);
        assert_eq!(large.cached(60).unwrap().len(), 60);
        assert!(large.cached(59).is_none());
        // Replacing the cached payload is always possible.
        assert_eq!(large.build(90).unwrap().len(), 90);
        assert!(large.cached(60).is_none());
        assert_eq!(large.build(101), Err(Busy));
        // While one is being built, another must fit beside it.
        large.lock().building = 70;
        assert_eq!(large.build(40), Err(Busy));
        assert!(
            large.cached(90).is_none(),
            "the cached one was dropped to make room"
        );
        assert_eq!(large.build(30).unwrap().len(), 30);
    }

    #[test]
    fn end_strings_are_evicted_oldest_first() {
        let cache = EndStrings::new(100);
        let mut memo = Memo::default();
        cache.get(key(60, Kind::Ascii), &mut memo);
        cache.get(key(30, Kind::Latin1), &mut memo);
        cache.get(key(20, Kind::TwoByte), &mut memo); // 40 bytes: evicts the ascii one
        let e = cache.lock();
        assert!(!e.map.contains_key(&key(60, Kind::Ascii)));
        assert_eq!(e.bytes, 70);
    }

    #[test]
    fn a_memo_keeps_its_body_until_an_eviction() {
        let cache = EndStrings::new(100);
        let mut memo = Memo::default();
        let ptr = |body: &EndString| match &body.text {
            Text::Ascii(b) => b.as_ptr(),
            _ => panic!("ascii bodies are flat"),
        };
        let first = ptr(cache.get(key(10, Kind::Ascii), &mut memo));
        assert_eq!(ptr(cache.get(key(10, Kind::Ascii), &mut memo)), first);
        // Another connection's body evicts it: the memo asks again and gets
        // a body built anew (the old one is still alive while it is built,
        // so the buffer cannot be the same).
        cache.get(key(95, Kind::Ascii), &mut Memo::default());
        assert!(!cache.lock().map.contains_key(&key(10, Kind::Ascii)));
        let renewed = ptr(cache.get(key(10, Kind::Ascii), &mut memo));
        assert_ne!(renewed, first);
        assert!(cache.lock().map.contains_key(&key(10, Kind::Ascii)));
    }
}
