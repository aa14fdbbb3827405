//! What a body is: its key, the form it is kept in, its length on the
//! wire, how it is built, and the charge of its memory. An `/end-string`
//! body is kept in the form that suits sending it: `body=flat` ascii is one
//! [`Bytes`] (as Node's flattened string, and hyper's), latin1 and twobyte a
//! flat one- or two-byte string encoded as it is sent; `body=rope` a ropey
//! rope of ~1 KiB chunks. A `/large` payload is one [`Bytes`].
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use unflat::queue::SharedRope;
use unflat::{Latin1, Measured, Rope, Utf16};

use unflat_server::memory::Charge;

/// The character kinds of `/end-string`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Kind {
    /// `a`, U+0061: the default.
    #[default]
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

/// Which body: an `/end-string` text, or a `/large` payload of so many
/// bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyKey {
    /// `/end-string/{len}?kind=…&body=…`.
    Text(Key),
    /// `/large/{size}`.
    Large(usize),
}

/// Characters a rope is built from per append: a little less than one of
/// ropey's leaves, so that the builder never holds more than a leaf's text
/// besides the rope.
const ROPE_PIECE_CHARS: usize = 960;

impl BodyKey {
    /// The body's length on the wire, known without building it (a `HEAD`
    /// is answered from it).
    pub fn len(self) -> usize {
        match self {
            BodyKey::Text(k) => k.len * k.kind.char().len_utf8(),
            BodyKey::Large(n) => n,
        }
    }

    /// An upper bound of the memory building the body takes at its peak,
    /// and of what the body then occupies: charged before the build.
    pub fn footprint(self) -> usize {
        // Allocation headers, the Arc, a rope's measured shape.
        const SMALL: usize = 256;
        // A flat body's one allocation and what the build leaves resident
        // beside it: 0.3 to 0.6 % more, measured (docs/robustness.md,
        // "What a body occupies"); a sixty-fourth over.
        let flat = |bytes: usize| bytes + bytes / 64;
        SMALL
            + match self {
                BodyKey::Text(Key {
                    len,
                    kind,
                    form: Form::Flat,
                }) => match kind {
                    Kind::Ascii | Kind::Latin1 => flat(len),
                    Kind::TwoByte => flat(len.saturating_mul(2)),
                },
                // Ropey's 1 KiB nodes and the build's freed ones: 1.17 to
                // 1.19 resident bytes per byte of text, measured
                // (docs/robustness.md; server/tests/suite/memory.rs). A fifth over.
                BodyKey::Text(
                    k @ Key {
                        form: Form::Rope, ..
                    },
                ) => {
                    let text = BodyKey::Text(k).len();
                    text + text / 5 + 2 * ROPE_PIECE_CHARS * 4 + 4096
                }
                BodyKey::Large(n) => flat(n),
            }
    }

    /// Builds the body (blocking: run it off the async workers).
    pub fn build(self) -> Text {
        match self {
            BodyKey::Text(key) => {
                let c = key.kind.char();
                match (key.form, key.kind) {
                    (Form::Rope, _) => Text::Rope(Measured::new(rope_of(c, key.len))),
                    (Form::Flat, Kind::Ascii) => Text::Ascii(Bytes::from(vec![c as u8; key.len])),
                    (Form::Flat, Kind::Latin1) => {
                        Text::Transcoded(Arc::new(Latin1(vec![c as u8; key.len])))
                    }
                    (Form::Flat, Kind::TwoByte) => {
                        Text::Transcoded(Arc::new(Utf16(vec![c as u16; key.len])))
                    }
                }
            }
            BodyKey::Large(n) => Text::Payload(large_payload(n)),
        }
    }
}

/// A ropey rope of `len` times `c`, appended a piece at a time (never the
/// whole text twice in memory).
fn rope_of(c: char, len: usize) -> ropey::Rope {
    let piece = c.to_string().repeat(ROPE_PIECE_CHARS.min(len));
    let mut builder = ropey::RopeBuilder::new();
    let mut left = len;
    while left > 0 {
        let n = left.min(ROPE_PIECE_CHARS);
        builder.append(&piece[..n * c.len_utf8()]);
        left -= n;
    }
    builder.finish()
}

/// A body in the form it is sent from.
#[derive(Clone)]
pub enum Text {
    /// ASCII as one contiguous buffer, already its UTF-8 encoding.
    Ascii(Bytes),
    /// A ropey rope (measured once, see [`unflat::Measured`]).
    Rope(Measured<ropey::Rope>),
    /// One-byte (Latin-1) or two-byte (UTF-16) text, encoded to UTF-8 as it
    /// is sent.
    Transcoded(SharedRope),
    /// A `/large` payload: bytes, not text.
    Payload(Bytes),
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Text::Ascii(b) => write!(f, "Ascii({} bytes)", b.len()),
            Text::Rope(r) => write!(f, "Rope({} bytes)", r.get().len_bytes()),
            Text::Transcoded(r) => write!(f, "Transcoded({:?})", r.shape()),
            Text::Payload(b) => write!(f, "Payload({} bytes)", b.len()),
        }
    }
}

/// A body, its length on the wire (so that no request pays for measuring
/// it), and the charge of its memory.
#[derive(Debug)]
pub struct Built {
    /// The text or payload.
    pub text: Text,
    /// Its length on the wire.
    pub len: usize,
    /// Given back when the last holder drops the body.
    charge: Charge,
    /// Asked for since the cache last looked: its second chance before
    /// eviction (the cache's clock, `bodies.rs`).
    used: AtomicBool,
}

impl Built {
    /// A body of `text`, `len` bytes on the wire, its memory `charge`d.
    pub(crate) fn new(text: Text, len: usize, charge: Charge) -> Built {
        Built {
            text,
            len,
            charge,
            used: AtomicBool::new(false),
        }
    }

    /// Marks the body asked for. A load first: a hot body's mark is written
    /// once per pass of the cache's clock, not per request.
    #[inline]
    pub(super) fn touch(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }

    /// Whether it was asked for since the last call, clearing the mark.
    pub(super) fn take_used(&self) -> bool {
        self.used.swap(false, Ordering::Relaxed)
    }

    /// Bytes charged for it.
    pub fn charged(&self) -> usize {
        self.charge.bytes()
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
