//! The head builder with arbitrary names and values: invalid ones are
//! refused, and so are the framing names (the head owns framing); valid
//! ones give a head that httparse parses back to the same fields, with no
//! CR, LF or NUL outside the line ends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unflat::head::{Head, HeadError, HeaderName, HeaderValue, Status, RequestMethod};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let (name, value) = rest.split_at(usize::from(split).min(rest.len()));
    let name_ok = std::str::from_utf8(name).ok().map(HeaderName::new);
    let value_ok = HeaderValue::from_bytes(value);
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let valid_name = !name.is_empty() && name.iter().all(|&b| tchar(b));
    let valid_value = value.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7F))
        && !matches!(value.first(), Some(b' ' | b'\t'))
        && !matches!(value.last(), Some(b' ' | b'\t'));
    assert_eq!(matches!(name_ok, Some(Ok(_))), valid_name);
    assert_eq!(value_ok.is_ok(), valid_value);
    if let (Some(Ok(n)), Ok(v)) = (name_ok, value_ok) {
        let mut head = Head::new(Status::OK, RequestMethod::Other);
        let framing = name.eq_ignore_ascii_case(b"content-length")
            || name.eq_ignore_ascii_case(b"transfer-encoding");
        if framing {
            assert!(matches!(head.field(n, v), Err(HeadError::FramingField)));
            return;
        }
        let owned = [&b"connection"[..], b"keep-alive", b"date"]
            .iter()
            .any(|o| name.eq_ignore_ascii_case(o));
        if owned {
            assert!(matches!(head.field(n, v), Err(HeadError::OwnedField { .. })));
            assert!(matches!(head.value(n, &""), Err(HeadError::OwnedField { .. })));
            return;
        }
        // The text door: the same bytes read as a str go out as Latin-1,
        // one byte per character, or the write is refused.
        if let Ok(text) = std::str::from_utf8(value) {
            let mut by_text = Head::new(Status::OK, RequestMethod::Other);
            by_text.value(n, &text).unwrap();
            let latin1: Option<Vec<u8>> = text.chars().map(|c| u8::try_from(c).ok()).collect();
            let sendable = latin1.as_ref().is_some_and(|b| {
                b.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7F))
                    && !matches!(b.first(), Some(b' ' | b'\t'))
                    && !matches!(b.last(), Some(b' ' | b'\t'))
            });
            match by_text.to_vec() {
                Ok(bytes) => {
                    assert!(sendable);
                    let mut line = name.to_vec();
                    line.extend_from_slice(b": ");
                    line.extend_from_slice(&latin1.unwrap());
                    line.extend_from_slice(b"\r\n");
                    assert!(bytes.windows(line.len()).any(|w| w == line));
                }
                Err(_) => assert!(!sendable),
            }
        }
        head.field(n, v).unwrap();
        head.content_length(value.len() as u64).unwrap();
        let bytes = head.to_vec().unwrap();
        for (i, &b) in bytes.iter().enumerate() {
            assert!(b != 0);
            if b == b'\n' {
                assert_eq!(bytes[i - 1], b'\r');
            }
            if b == b'\r' {
                assert_eq!(bytes[i + 1], b'\n');
            }
        }
        let mut fields = [httparse::EMPTY_HEADER; 4];
        let mut res = httparse::Response::new(&mut fields);
        assert_eq!(res.parse(&bytes), Ok(httparse::Status::Complete(bytes.len())));
        assert_eq!(res.headers[0].name.as_bytes(), name);
        assert_eq!(res.headers[0].value, value);
    }
});
