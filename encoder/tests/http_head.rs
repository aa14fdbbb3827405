//! Heads from the `http` crate's types (feature `http`): every status code,
//! fields from `HeaderName`/`HeaderValue` and whole `HeaderMap`s, read back
//! with httparse.
#![cfg(feature = "http")]

#[path = "common/head.rs"]
mod head_common;

use head_common::parse_fields;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::StatusCode;
use proptest::prelude::*;
use unflat::head::{Head, HeadError, RequestMethod, Status};

/// The value a recipient sees: no surrounding SP or HTAB.
fn trimmed(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|&b| b != b' ' && b != b'\t');
    let end = v.iter().rposition(|&b| b != b' ' && b != b'\t');
    match (start, end) {
        (Some(s), Some(e)) => &v[s..=e],
        _ => &[],
    }
}

#[test]
fn every_status_code_converts_with_its_canonical_reason() {
    for code in 100..=999 {
        let sc = StatusCode::from_u16(code).unwrap();
        let status = Status::from(sc);
        assert_eq!(status.code(), code);
        assert_eq!(status.reason(), sc.canonical_reason());
        let (parsed, reason, _) =
            parse_fields(&Head::new(status, RequestMethod::Other).to_vec().unwrap());
        assert_eq!(parsed, code);
        assert_eq!(reason, sc.canonical_reason().unwrap_or(""));
    }
    // Where http's phrase is the IANA one, the line is one static piece.
    assert_eq!(Status::from(StatusCode::NOT_FOUND), Status::NOT_FOUND);
    assert!(Status::from(StatusCode::OK).line().is_some());
}

/// A header value `http` accepts: any byte but controls other than HTAB, so
/// leading and trailing whitespace and obs-text included.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => 0x21u8..0x7F,
            1 => Just(b' '),
            1 => Just(b'\t'),
            1 => 0x80u8..=0xFF,
        ],
        0..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn http_fields_round_trip_through_httparse(
        fields in prop::collection::vec(("[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}", header_value()), 0..40),
        code in 100u16..=999,
    ) {
        let fields: Vec<(HeaderName, HeaderValue)> = fields
            .into_iter()
            .filter_map(|(n, v)| {
                let name = HeaderName::from_bytes(n.as_bytes()).ok()?;
                let framing = name == http::header::CONTENT_LENGTH
                    || name == http::header::TRANSFER_ENCODING;
                (!framing).then_some(())?;
                Some((name, HeaderValue::from_bytes(&v).unwrap()))
            })
            .collect();
        // One field per slot, and the same fields as one map.
        let mut head = Head::<'_, 40>::with_room(StatusCode::from_u16(code).unwrap().into(), RequestMethod::Other);
        let mut map = HeaderMap::new();
        for (n, v) in &fields {
            head.field(n.into(), v.into()).unwrap();
            map.append(n.clone(), v.clone());
        }
        let mut from_map = Head::new(StatusCode::from_u16(code).unwrap().into(), RequestMethod::Other);
        from_map.header_map(&map).unwrap();
        let seen = |(n, v): (&HeaderName, &HeaderValue)| {
            (n.as_str().to_string(), trimmed(v.as_bytes()).to_vec())
        };
        let in_slots: Vec<_> = fields.iter().map(|(n, v)| seen((n, v))).collect();
        let in_map: Vec<_> = map.iter().map(seen).collect();
        for (built, expected) in [(&head.to_vec().unwrap(), in_slots), (&from_map.to_vec().unwrap(), in_map)] {
            let (parsed, _, got) = parse_fields(built);
            prop_assert_eq!(parsed, code);
            prop_assert_eq!(got, expected);
            // Sent trimmed, not trimmed by the parser: each field line is
            // `name: value` with nothing around the value.
            let lines = built.split(|&b| b == b'\n').skip(1).filter(|l| l.len() > 1);
            for line in lines {
                let colon = line.iter().position(|&b| b == b':').unwrap();
                let value = &line[colon + 2..line.len() - 1];
                prop_assert_eq!(value, trimmed(value));
            }
        }
        // Its measure is exact: the map's values are bytes.
        let mut exact = vec![0; from_map.max_len()];
        let n = from_map.write(&mut exact).unwrap();
        prop_assert_eq!(n, exact.len());
        prop_assert_eq!(exact, from_map.to_vec().unwrap());
    }
}

#[test]
fn a_map_of_forty_fields_takes_one_slot() {
    let mut map = HeaderMap::new();
    for i in 0..40 {
        let name = HeaderName::from_bytes(format!("x-field-{}", i % 30).as_bytes()).unwrap();
        map.append(name, HeaderValue::from_str(&format!("value {i}")).unwrap());
    }
    assert_eq!(map.len(), 40);
    let mut head = Head::new(StatusCode::PARTIAL_CONTENT.into(), RequestMethod::Other);
    head.header_map(&map).unwrap();
    head.content_length(9).unwrap();
    let bytes = head.to_vec().unwrap();
    assert!(bytes.starts_with(b"HTTP/1.1 206 Partial Content\r\n"));
    let (_, _, fields) = parse_fields(&bytes);
    assert_eq!(fields.len(), 41);
    let expected: Vec<(String, Vec<u8>)> = map
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec()))
        .chain([("Content-Length".to_string(), b"9".to_vec())])
        .collect();
    assert_eq!(fields, expected);
}

#[test]
fn framing_names_in_a_map_or_a_field_are_refused() {
    for framing in [
        http::header::CONTENT_LENGTH,
        http::header::TRANSFER_ENCODING,
    ] {
        let mut map = HeaderMap::new();
        map.insert(http::header::SERVER, HeaderValue::from_static("unflat"));
        map.insert(framing.clone(), HeaderValue::from_static("5"));
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        assert!(matches!(
            head.header_map(&map),
            Err(HeadError::FramingField)
        ));
        let value = HeaderValue::from_static("5");
        assert!(matches!(
            head.field((&framing).into(), (&value).into()),
            Err(HeadError::FramingField)
        ));
    }
}
