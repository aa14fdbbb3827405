//! The head builder: any status code 100..=999 with any reason phrase or
//! none, the registered ones in one piece; more fields than the default
//! with a larger `N`; framing fields refused by name. Every head is read
//! back with httparse.

#[path = "common/head.rs"]
mod head_common;

use proptest::prelude::*;

use head_common::parse_fields;
use unflat::head::{
    Head, HeadError, HeaderName, HeaderValue, Line, RequestMethod, Status, WriteError, MAX_FIELDS,
};
use unflat::Rope;

#[test]
fn every_code_from_100_to_999_is_sent_and_read_back() {
    let mut registered = 0;
    for code in 100..=999 {
        let status = Status::from_code(code).unwrap();
        let head = Head::new(status, RequestMethod::Other);
        let bytes = head.to_vec().unwrap();
        let (parsed, reason, _) = parse_fields(&bytes);
        assert_eq!(parsed, code);
        assert_eq!(reason, status.reason().unwrap_or(""));
        match status.line() {
            // A registered status's line is one 'static piece.
            Some(line) => {
                registered += 1;
                assert!(bytes.starts_with(line.as_bytes()));
                assert_eq!(Status::new(code, status.reason()), Ok(status));
            }
            None => {
                assert_eq!(status.reason(), None);
                let line = format!("HTTP/1.1 {code} \r\n");
                assert!(bytes.starts_with(line.as_bytes()), "{code}");
            }
        }
        let custom = Status::new(code, Some("Custom \t Phrase")).unwrap();
        assert_eq!(custom.line(), None);
        let (parsed, reason, _) =
            parse_fields(&Head::new(custom, RequestMethod::Other).to_vec().unwrap());
        assert_eq!((parsed, reason.as_str()), (code, "Custom \t Phrase"));
        // A phrase is ASCII text: a character above U+007F is refused.
        assert_eq!(
            Status::new(code, Some("Caf\u{e9}")),
            Err(HeadError::InvalidReason { at: 3, byte: 0xC3 })
        );
    }
    assert_eq!(registered, 61, "the IANA registry, less 104, 306 and 418");
    assert_eq!(Status::from_code(201).unwrap(), Status::CREATED);
    assert_eq!(
        Status::from_code(429).unwrap().line(),
        Some("HTTP/1.1 429 Too Many Requests\r\n")
    );
}

#[test]
fn codes_out_of_range_and_control_bytes_in_reasons_are_refused() {
    for code in [0, 1, 99, 1000, u16::MAX] {
        assert_eq!(Status::new(code, None), Err(HeadError::InvalidStatus(code)));
        assert_eq!(Status::from_code(code), Err(HeadError::InvalidStatus(code)));
    }
    assert_eq!(
        Status::new(200, Some("OK\r\nSet-Cookie: x")),
        Err(HeadError::InvalidReason { at: 2, byte: b'\r' })
    );
    assert_eq!(
        Status::new(200, Some("\0")),
        Err(HeadError::InvalidReason { at: 0, byte: 0 })
    );
    // An empty phrase is no phrase.
    assert_eq!(Status::new(299, Some("")), Status::new(299, None));
}

#[test]
fn bodiless_statuses_refuse_framing_and_the_others_take_it() {
    for code in 100..=999 {
        let status = Status::from_code(code).unwrap();
        let bodiless = code < 200 || code == 204 || code == 304;
        assert_eq!(status.has_no_body(), bodiless, "{code}");
        let mut head = Head::new(status, RequestMethod::Other);
        assert_eq!(head.content_length(0).is_err(), bodiless, "{code}");
        assert_eq!(head.body_allowed(), !bodiless, "{code}");
    }
}

#[test]
fn a_head_holds_n_fields_and_refuses_one_more() {
    let names: Vec<String> = (0..41).map(|i| format!("X-Field-{i}")).collect();
    let values: Vec<String> = (0..41).map(|i| format!("value {i}")).collect();
    let field = |i: usize| {
        (
            HeaderName::new(&names[i]).unwrap(),
            HeaderValue::from_bytes(values[i].as_bytes()).unwrap(),
        )
    };

    let mut small = Head::new(Status::OK, RequestMethod::Other);
    for i in 0..MAX_FIELDS {
        let (n, v) = field(i);
        small.field(n, v).unwrap();
    }
    let (n, v) = field(MAX_FIELDS);
    assert_eq!(small.field(n, v).err(), Some(HeadError::TooManyFields));

    let mut large = Head::<'_, 40>::with_room(Status::OK, RequestMethod::Other);
    for i in 0..40 {
        let (n, v) = field(i);
        large.field(n, v).unwrap();
    }
    let (n, v) = field(40);
    assert_eq!(large.field(n, v).err(), Some(HeadError::TooManyFields));
    large.content_length(0).unwrap();
    let (_, _, fields) = parse_fields(&large.to_vec().unwrap());
    assert_eq!(fields.len(), 41);
    for (i, (name, value)) in fields[..40].iter().enumerate() {
        assert_eq!(
            (name.as_str(), &value[..]),
            (names[i].as_str(), values[i].as_bytes())
        );
    }
}

#[test]
fn framing_fields_are_refused_by_name_in_any_case() {
    let names = [
        "Content-Length",
        "content-length",
        "CONTENT-LENGTH",
        "Transfer-Encoding",
        "transfer-ENCODING",
    ];
    let lines: Vec<Line> = names
        .iter()
        .map(|n| Line::parse(n, "chunked").unwrap())
        .collect();
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    for (name, line) in names.iter().zip(&lines) {
        let err = head
            .field(
                HeaderName::new(name).unwrap(),
                HeaderValue::from_bytes(b"1").unwrap(),
            )
            .err();
        assert!(matches!(err, Some(HeadError::FramingField)), "{name}");
        assert!(
            matches!(head.line(line).err(), Some(HeadError::FramingField)),
            "{name}"
        );
    }
    // Names that only look alike are fields like any other.
    let lookalike = Line::parse("Content-Lengths", "1").unwrap();
    head.line(&lookalike).unwrap();
    head.field(
        HeaderName::new("Transfer-Encodings").unwrap(),
        HeaderValue::from_bytes(b"x").unwrap(),
    )
    .unwrap();
    head.content_length(2).unwrap();
    let (_, _, fields) = parse_fields(&head.to_vec().unwrap());
    let names: Vec<&str> = fields.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        names,
        ["Content-Lengths", "Transfer-Encodings", "Content-Length"]
    );
}

proptest! {
    #[test]
    fn head_builder_refuses_invalid_fields_and_round_trips_valid_ones(
        name in prop::collection::vec(any::<u8>(), 0..12),
        value in prop::collection::vec(any::<u8>(), 0..24),
    ) {
        let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        let name_ok = !name.is_empty() && name.iter().all(|&b| tchar(b));
        let value_ok = value.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7F))
            && !value.first().is_some_and(|&b| b == b' ' || b == b'\t')
            && !value.last().is_some_and(|&b| b == b' ' || b == b'\t');
        let name_str = std::str::from_utf8(&name).ok();
        let parsed_name = name_str.map(HeaderName::new);
        let parsed_value = HeaderValue::from_bytes(&value);
        prop_assert_eq!(parsed_value.is_ok(), value_ok);
        match parsed_name {
            Some(n) => prop_assert_eq!(n.is_ok(), name_ok),
            None => prop_assert!(!name_ok),
        }
        if let (Some(Ok(n)), Ok(v)) = (parsed_name, parsed_value) {
            let mut head = Head::new(Status::OK, RequestMethod::Other);
            head.field(n, v).unwrap();
            head.content_length(0).unwrap();
            let bytes = head.to_vec().unwrap();
            let mut fields = [httparse::EMPTY_HEADER; 4];
            let mut res = httparse::Response::new(&mut fields);
            prop_assert!(matches!(res.parse(&bytes), Ok(httparse::Status::Complete(n)) if n == bytes.len()));
            prop_assert_eq!(res.headers[0].name.as_bytes(), &name[..]);
            prop_assert_eq!(res.headers[0].value, &value[..]);
        }
    }
}

#[test]
fn framing_is_exclusive_in_the_head_builder() {
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    head.content_length(3).unwrap();
    assert!(head.chunked().is_err());
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    head.chunked().unwrap();
    assert!(head.content_length(3).is_err());
    let mut head = Head::new(Status::NO_CONTENT, RequestMethod::Other);
    assert!(
        head.content_length(0).is_err(),
        "204 carries no body framing"
    );
    assert!(
        !Head::new(Status::OK, RequestMethod::Head).body_allowed(),
        "no body after HEAD"
    );
}

#[test]
fn an_empty_name_and_a_nul_name_are_different_errors() {
    assert_eq!(HeaderName::new(""), Err(HeadError::EmptyName));
    assert_eq!(
        HeaderName::new("\0"),
        Err(HeadError::InvalidName { at: 0, byte: 0 })
    );
    assert_eq!(
        HeadError::EmptyName.to_string(),
        "invalid header name: empty"
    );
    assert!(HeadError::InvalidName { at: 0, byte: 0 }
        .to_string()
        .contains("0x00 at 0"));
}

/// A head is one-byte text, and only that: its bytes as given from a line
/// or a pair of bytes, a value rope's characters as their Latin-1 bytes
/// (never their UTF-8 bytes). The API has no way to ask for another
/// encoding (a head is not a `Rope`), so no run-time refusal is left.
#[test]
fn a_head_is_its_one_byte_text() {
    use unflat::{Concat, Decimal};
    let obs = Line::new(
        HeaderName::new("X-Obs").unwrap(),
        HeaderValue::from_bytes(b"caf\xe9").unwrap(),
    );
    let name = HeaderName::new("X-Name").unwrap();
    let value = Concat::new([&"caf", &"\u{e9}"]);
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    head.line(&obs).unwrap();
    head.field(name, HeaderValue::from_bytes(b"\xff").unwrap())
        .unwrap();
    head.value(name, &value).unwrap();
    let bytes = head.to_vec().unwrap();
    assert_eq!(
        bytes,
        b"HTTP/1.1 200 OK\r\nX-Obs: caf\xe9\r\nX-Name: \xff\r\nX-Name: caf\xe9\r\n\r\n"
    );
    // A reason phrase of its own is ASCII text.
    assert_eq!(
        Status::new(299, Some("Caf\u{e9}")),
        Err(HeadError::InvalidReason { at: 3, byte: 0xC3 })
    );

    // Dozens of value ropes, each of several pieces, repeated names.
    let cookie = HeaderName::new("Set-Cookie").unwrap();
    let ids: Vec<Decimal> = (0..40).map(Decimal::new).collect();
    let values: Vec<Concat<'_, 3>> = ids
        .iter()
        .map(|id| Concat::new([&"sid=", id, &"; Path=/; HttpOnly"]))
        .collect();
    let mut big = Head::<'_, 48>::with_room(Status::OK, RequestMethod::Other);
    for v in &values {
        big.value(cookie, v).unwrap();
    }
    big.content_length(0).unwrap();
    let out = encode_n(&big);
    let (_, _, fields) = parse_fields(&out);
    let cookies: Vec<&(String, Vec<u8>)> =
        fields.iter().filter(|(n, _)| n == "Set-Cookie").collect();
    assert_eq!(cookies.len(), 40);
    assert_eq!(cookies[39].1, b"sid=39; Path=/; HttpOnly");
}

/// Writes a head of any room.
fn encode_n<const N: usize>(head: &Head<'_, N>) -> Vec<u8> {
    head.to_vec().unwrap()
}

/// A value rope is checked in the walk that writes it: every control
/// character (CR, LF, NUL, DEL, …), whitespace first or last, and every
/// character above U+00FF — in UTF-8, one-byte or two-byte pieces — fails
/// the write, naming the field and where; nothing of the head is kept.
#[test]
fn a_value_rope_refuses_what_a_field_value_cannot_hold() {
    use unflat::queue::WriteQueue;
    use unflat::{Concat, Latin1, Utf16};
    let name = HeaderName::new("X-V").unwrap();
    let split = Concat::new([&"ab", &Latin1(b"c\r"), &"\nd"]);
    let bad: [(&(dyn Rope + Sync), HeadError); 9] = [
        (&"a\rb", HeadError::InvalidValue { at: 1, byte: b'\r' }),
        (&"ab\n", HeadError::InvalidValue { at: 2, byte: b'\n' }),
        (&Latin1(b"a\0"), HeadError::InvalidValue { at: 1, byte: 0 }),
        (&"\x7f", HeadError::InvalidValue { at: 0, byte: 0x7f }),
        (&" a", HeadError::InvalidValue { at: 0, byte: b' ' }),
        (&"a\t", HeadError::InvalidValue { at: 1, byte: b'\t' }),
        (
            &"\u{e9}\u{100}",
            HeadError::UnsendableChar {
                at: 1,
                code_point: 0x100,
            },
        ),
        (
            &Utf16(vec![0x61, 0xD83D, 0xDE00]),
            HeadError::UnsendableChar {
                at: 1,
                code_point: 0xD83D,
            },
        ),
        // Split across pieces: found at its place in the whole value.
        (&split, HeadError::InvalidValue { at: 3, byte: b'\r' }),
    ];
    for (value, error) in bad {
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        head.value(name, value).unwrap();
        let refused = WriteError::Value {
            name: name.as_str(),
            error,
        };
        assert_eq!(head.to_vec().unwrap_err(), refused);
        let mut out = b"before".to_vec();
        assert_eq!(head.write_to_vec(&mut out).unwrap_err(), refused);
        assert_eq!(out, b"before", "nothing of the head kept");
        let mut q = WriteQueue::new();
        q.copy(b"before");
        assert_eq!(q.head(&head).unwrap_err(), refused);
        let mut wire = Vec::new();
        q.write_to(&mut wire).unwrap();
        assert_eq!(wire, b"before", "nothing of the head queued");
    }
    let mut head = Head::new(Status::OK, RequestMethod::Other);
    let framing = HeaderName::new("content-length").unwrap();
    assert_eq!(
        head.value(framing, &"5").unwrap_err(),
        HeadError::FramingField
    );
}
