//! A head is checked in the walk that writes it: a value rope whose pieces
//! change from one walk to the next (shared state another thread changes,
//! an interior-mutable cache, malice) never puts a byte on the wire that
//! was not checked, whichever walk — or measure — it changes on. And one
//! rule for header text at every door: the same `&str` gives the same
//! bytes through every text door, or is refused by all of them.

#[path = "common/head.rs"]
mod head_common;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};

use head_common::parse_fields;
use unflat::head::{
    Head, HeadError, HeaderName, HeaderValue, Line, RequestMethod, Status, WriteError,
};
use unflat::queue::WriteQueue;
use unflat::{Piece, Rope, Shape};

/// What a flipping value turns into: a forged field and an early end of
/// the head.
const FORGED: &str = "x\r\nInjected: 1\r\n\r\n";

/// A value that is `x` on every call but the `flip_at`-th (counting its
/// measures and its walks together, from 0), where its pieces — or its
/// measure — are [`FORGED`]'s.
struct Flip {
    calls: AtomicUsize,
    flip_at: usize,
    /// Which pieces the forged value comes in.
    form: Form,
}

#[derive(Clone, Copy, Debug)]
enum Form {
    Utf8,
    OneByte,
    TwoByte,
}

impl Flip {
    fn new(flip_at: usize, form: Form) -> Flip {
        Flip {
            calls: AtomicUsize::new(0),
            flip_at,
            form,
        }
    }

    /// Whether this call is the one that flips.
    fn flips(&self) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst) == self.flip_at
    }
}

thread_local! {
    static UNITS: Vec<u16> = FORGED.encode_utf16().collect();
}

impl Rope for Flip {
    fn for_each_piece<'a>(
        &'a self,
        visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if !self.flips() {
            return visit(Piece::Utf8("x"));
        }
        match self.form {
            Form::Utf8 => visit(Piece::Utf8(FORGED)),
            Form::OneByte => visit(Piece::OneByte(FORGED.as_bytes())),
            Form::TwoByte => {
                let units: &'static [u16] = UNITS.with(|u| Box::leak(u.clone().into_boxed_slice()));
                visit(Piece::TwoByte(units))
            }
        }
    }

    fn shape(&self) -> Shape {
        // A measure that flips says the forged length, so that the room
        // would be there for it.
        let text = if self.flips() { FORGED } else { "x" };
        Shape::of_piece(Piece::Utf8(text))
    }
}

/// What a head carrying `value` must be, whenever it is written at all.
fn check_written(bytes: &[u8], flip_at: usize, form: Form) {
    let (status, _, fields) = parse_fields(bytes);
    assert_eq!(status, 200);
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["X-Before", "X-Flip", "X-After", "Content-Length"],
        "flip at {flip_at}, {form:?}: {:?}",
        String::from_utf8_lossy(bytes)
    );
    assert_eq!(fields[1].1, b"x");
    assert!(
        !bytes.windows(8).any(|w| w == b"Injected"),
        "flip at {flip_at}, {form:?}"
    );
}

/// A value that flips on any of its first nine calls (N = 0…8), whether
/// the call is a measure or a walk, in any of the three piece forms,
/// written through every way out of the crate, eight times over: every
/// head written has the fields it was built with, and the forged bytes
/// never go out — a flip seen by the write fails it, with nothing kept.
#[test]
fn a_value_that_changes_between_walks_never_puts_an_unchecked_byte_out() {
    let before = Line::parse("X-Before", "1").unwrap();
    let after = HeaderName::new("X-After").unwrap();
    let name = HeaderName::new("X-Flip").unwrap();
    for form in [Form::Utf8, Form::OneByte, Form::TwoByte] {
        for flip_at in 0..=8 {
            let flip = Flip::new(flip_at, form);
            let mut head = Head::new(Status::OK, RequestMethod::Other);
            head.line(&before).unwrap();
            head.value(name, &flip).unwrap();
            head.value(after, &"2").unwrap();
            head.content_length(0).unwrap();
            let mut refused = 0;
            for round in 0..8 {
                let outcomes = [
                    head.to_vec(),
                    {
                        let mut out = b"kept".to_vec();
                        head.write_to_vec(&mut out).map(|_| {
                            assert!(out.starts_with(b"kept"));
                            out.split_off(4)
                        })
                    },
                    {
                        let mut q = WriteQueue::new();
                        let queued = q.head(&head);
                        let mut wire = Vec::new();
                        q.write_to(&mut wire).unwrap();
                        if queued.is_err() {
                            assert!(wire.is_empty(), "nothing of a refused head queued");
                        }
                        queued.map(|_| wire)
                    },
                    {
                        let mut dst = vec![0; 256];
                        head.write(&mut dst).map(|n| dst[..n].to_vec())
                    },
                ];
                for outcome in outcomes {
                    match outcome {
                        Ok(bytes) => check_written(&bytes, flip_at, form),
                        Err(WriteError::Value { name: n, error }) => {
                            assert_eq!(n, name.as_str(), "round {round}");
                            assert!(
                                matches!(
                                    error,
                                    HeadError::InvalidValue { at: 1, byte: b'\r' }
                                        | HeadError::ValueChanged { .. }
                                ),
                                "{error:?}"
                            );
                            refused += 1;
                        }
                        Err(e) => panic!("flip at {flip_at}: {e}"),
                    }
                }
            }
            // Each flip is seen by one call: a write refused, or a measure
            // (harmless: more room than needed).
            assert!(refused <= 1, "flip at {flip_at}, {form:?}: {refused}");
        }
    }
}

/// The same strings through every door: ASCII, Latin-1 and above U+00FF.
/// The text doors give the same bytes (Latin-1) or all refuse; the bytes
/// door sends what it is given.
#[test]
fn the_same_string_gives_the_same_bytes_through_every_door() {
    let name = HeaderName::new("X-Text").unwrap();
    let cases: [(&str, Option<&[u8]>); 5] = [
        ("plain", Some(b"plain")),
        ("na\u{ef}ve", Some(b"na\xefve")),
        ("\u{a0}x\u{ff}", Some(b"\xa0x\xff")),
        ("5\u{20ac}", None),
        ("\u{1f600}", None),
    ];
    for (text, expected) in cases {
        let line = Line::parse("X-Text", text);
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        head.value(name, &text).unwrap();
        let from_value = head.to_vec();
        let mut by_parts = Head::new(Status::OK, RequestMethod::Other);
        let (a, b) = text.split_at(text.char_indices().nth(1).map_or(text.len(), |(i, _)| i));
        let parts = unflat::Concat::new([&a, &b]);
        by_parts.value(name, &parts).unwrap();
        let from_parts = by_parts.to_vec();
        let utf16: Vec<u16> = text.encode_utf16().collect();
        let two_byte = unflat::Utf16(utf16);
        let mut by_units = Head::new(Status::OK, RequestMethod::Other);
        by_units.value(name, &two_byte).unwrap();
        let from_units = by_units.to_vec();
        match expected {
            Some(value) => {
                let mut wire = b"X-Text: ".to_vec();
                wire.extend_from_slice(value);
                wire.extend_from_slice(b"\r\n");
                assert_eq!(line.unwrap().as_bytes(), &wire[..], "{text:?}: Line::parse");
                for (door, bytes) in [
                    ("Head::value(&str)", from_value),
                    ("Head::value(Concat)", from_parts),
                    ("Head::value(Utf16)", from_units),
                ] {
                    let bytes = bytes.unwrap();
                    assert!(
                        bytes.windows(wire.len()).any(|w| w == wire),
                        "{text:?}: {door}: {bytes:?}"
                    );
                }
            }
            None => {
                assert!(
                    matches!(line, Err(HeadError::UnsendableChar { .. })),
                    "{text:?}: Line::parse"
                );
                for bytes in [from_value, from_parts, from_units] {
                    assert!(matches!(
                        bytes,
                        Err(WriteError::Value {
                            error: HeadError::UnsendableChar { .. },
                            ..
                        })
                    ));
                }
            }
        }
        // The bytes door: a str's bytes, as given, because its name says so.
        let bytes = HeaderValue::from_bytes(text.as_bytes()).unwrap();
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        head.field(name, bytes).unwrap();
        let out = head.to_vec().unwrap();
        assert!(out.windows(text.len()).any(|w| w == text.as_bytes()));
    }
}

/// The fields a head writes itself are refused by name, through every
/// door, in any case.
#[test]
fn the_fields_a_head_writes_itself_are_refused() {
    for (given, error) in [
        ("content-length", HeadError::FramingField),
        ("Transfer-Encoding", HeadError::FramingField),
        ("connection", HeadError::OwnedField { name: "Connection" }),
        ("KEEP-ALIVE", HeadError::OwnedField { name: "Keep-Alive" }),
        ("Date", HeadError::OwnedField { name: "Date" }),
    ] {
        let name = HeaderName::new(given).unwrap();
        let line = Line::parse(given, "x").unwrap();
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        assert_eq!(head.value(name, &"x").unwrap_err(), error, "{given}");
        assert_eq!(head.line(&line).unwrap_err(), error, "{given}");
        let bytes = HeaderValue::from_bytes(b"x").unwrap();
        assert_eq!(head.field(name, bytes).unwrap_err(), error, "{given}");
        assert!(error.to_string().len() > 10);
    }
    // Names that only look alike are fields like any other.
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    for given in ["Dates", "Connections", "X-Date", "Keep-Alive-X"] {
        head.value(HeaderName::new(given).unwrap(), &"x").unwrap();
    }
    assert_eq!(parse_fields(&head.to_vec().unwrap()).2.len(), 4);
}

/// A rope that walks on after it was told to stop, and one that measures
/// less than it gives: the first bad character is the one reported, and
/// an overrun is counted from the value's own start.
#[test]
fn errors_name_the_first_fault_and_where_in_the_value() {
    struct Deaf;
    impl Rope for Deaf {
        fn for_each_piece<'a>(
            &'a self,
            visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
        ) -> ControlFlow<()> {
            let _ = visit(Piece::Utf8("a\r"));
            visit(Piece::Utf8("b\n"))
        }
        fn shape(&self) -> Shape {
            Shape::of_piece(Piece::Utf8("a\rb\n"))
        }
    }
    /// Measures one byte, gives six.
    struct Short;
    impl Rope for Short {
        fn for_each_piece<'a>(
            &'a self,
            visit: &mut dyn FnMut(Piece<'a>) -> ControlFlow<()>,
        ) -> ControlFlow<()> {
            visit(Piece::Utf8("abcdef"))
        }
        fn shape(&self) -> Shape {
            Shape::of_piece(Piece::Utf8("a"))
        }
    }
    let name = HeaderName::new("X-V").unwrap();
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    head.value(name, &Deaf).unwrap();
    let error = HeadError::InvalidValue { at: 1, byte: b'\r' };
    assert_eq!(head.to_vec(), Err(WriteError::Value { name: "X-V", error }));
    let mut head = Head::new(Status::NO_CONTENT, RequestMethod::Other);
    head.value(name, &Short).unwrap();
    match head.to_vec() {
        Err(WriteError::Value {
            name: "X-V",
            error: HeadError::ValueChanged { at },
        }) => assert!(at <= 6, "{at}"),
        other => panic!("{other:?}"),
    }
}
