//! Response heads from templates: the whole head of a response — status
//! line, the service's prepared fields, `Date`, framing and persistence —
//! rendered once per second per worker thread and copied as one piece into
//! every later response that would render the same bytes. A repeated
//! request's response is then one copy and its body.

use std::cell::RefCell;

use unflat::head::Framing;

/// Templates kept per thread: a few shapes of response alternate (two
/// lengths, keep-alive and close) without rendering each time.
const SLOTS: usize = 4;

/// The longest head kept as a template; a longer one is rendered each time.
pub(super) const MOST: usize = 256;

/// What makes two heads the same bytes, besides the second of their `Date`:
/// the [`Prepared`](super::Prepared) start's own number, the framing line
/// (none for a bodiless status, and for a body the close ends),
/// keep-alive and a `HEAD` request — packed into two words, so that a
/// slot is told apart in two comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key([u64; 2]);

impl Key {
    /// The key of a head of the start numbered `start` (below 2⁶⁰, a count
    /// of starts made that no process reaches), framed by `framing`.
    #[inline]
    pub fn new(start: u64, framing: Framing, keep_alive: bool, head_request: bool) -> Key {
        debug_assert!(start < 1 << 60, "a start's number fits beside its flags");
        let (kind, len) = match framing {
            Framing::None => (0, 0),
            Framing::Chunked => (1, 0),
            Framing::Length(n) => (2, n),
        };
        let flags = u64::from(keep_alive) << 2 | u64::from(head_request) << 3;
        Key([start << 4 | flags | kind, len])
    }
}

struct Template {
    key: Key,
    /// The `Date` second the bytes show; `u64::MAX` for an empty slot.
    second: u64,
    /// `None` for a head found too long to keep: it is not rendered into
    /// a slot again that second.
    len: Option<usize>,
    bytes: [u8; MOST],
}

struct Templates {
    /// The [`Writer`](super::Writer) whose heads the slots hold: writers
    /// differ in lines a key does not name (`Keep-Alive`'s timeout,
    /// `Server`), so a thread that serves another writer starts over.
    owner: u64,
    slots: [Template; SLOTS],
    /// The slot the next new template replaces.
    next: usize,
}

impl Templates {
    /// No templates, for the writer numbered `owner` (0: none yet).
    const fn new(owner: u64) -> Templates {
        Templates {
            owner,
            slots: [EMPTY; SLOTS],
            next: 0,
        }
    }
}

const EMPTY: Template = Template {
    key: Key([0; 2]),
    second: u64::MAX,
    len: None,
    bytes: [0; MOST],
};

thread_local! {
    static TEMPLATES: RefCell<Templates> = const {
        RefCell::new(Templates::new(0))
    };
}

/// Hands `then` the head of `key` whose `Date` shows `second`, as the
/// writer numbered `owner` (never 0) writes it: the template's bytes, or,
/// when there is none, what `render` writes into a new one (it returns the
/// length, or `None` when the head does not fit in [`MOST`] bytes: `then`
/// is not called, and the slot remembers it).
pub(super) fn with_head<R>(
    owner: u64,
    key: Key,
    second: u64,
    render: impl FnOnce(&mut [u8; MOST]) -> Option<usize>,
    then: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        if t.owner != owner {
            *t = Templates::new(owner);
        }
        let found = t
            .slots
            .iter()
            .position(|s| s.key == key && s.second == second);
        let at = match found {
            Some(at) => at,
            None => {
                let at = t.next;
                t.next = (at + 1) % SLOTS;
                let slot = &mut t.slots[at];
                (slot.key, slot.second, slot.len) = (key, second, render(&mut slot.bytes));
                at
            }
        };
        let slot = &t.slots[at];
        Some(then(&slot.bytes[..slot.len?]))
    })
}
