//! The server's one-walk head scanner (`h1::scan`) answers what httparse's
//! `Request::parse_with_uninit_headers` answers, for every input: the same
//! head, the same `Partial`, the same error. Heads are built from the
//! pieces a request is made of, the odd ones included, then cut at every
//! length and mutated byte by byte.

use std::mem::MaybeUninit;

use proptest::prelude::*;
use unflat_server::h1::{scan, Scanned};

/// What either parser says of `input` with room for `room` fields.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Complete {
        method: String,
        target: String,
        version: u8,
        fields: Vec<(String, Vec<u8>)>,
        len: usize,
    },
    Partial,
    Error(httparse::Error),
}

fn by_httparse(input: &[u8], room: usize) -> Verdict {
    let mut fields = vec![MaybeUninit::uninit(); room];
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(input, &mut fields) {
        Ok(httparse::Status::Complete(len)) => Verdict::Complete {
            method: req.method.unwrap().to_owned(),
            target: req.path.unwrap().to_owned(),
            version: req.version.unwrap(),
            fields: req
                .headers
                .iter()
                .map(|h| (h.name.to_owned(), h.value.to_vec()))
                .collect(),
            len,
        },
        Ok(httparse::Status::Partial) => Verdict::Partial,
        Err(e) => Verdict::Error(e),
    }
}

/// Whether every byte of `target` is one a URI holds as it is (RFC 3986:
/// unreserved, sub-delims, `:@/?`) and a query reads as it is: no `+`.
fn plain(target: &str) -> bool {
    target
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*,;=:@/?".contains(&b))
}

fn by_scan(input: &[u8], room: usize) -> Verdict {
    let mut fields = vec![MaybeUninit::uninit(); room];
    let verdict = scan(input, &mut fields);
    // What the walk found of the target besides its end: what a second
    // look at it finds.
    if let Ok(Some(s)) = &verdict {
        assert_eq!(s.walked.query_at, s.target.find('?'), "{:?}", s.target);
        assert_eq!(s.walked.plain, plain(s.target), "{:?}", s.target);
    }
    match verdict {
        Ok(Some(Scanned {
            method,
            target,
            version,
            fields,
            len,
            ..
        })) => Verdict::Complete {
            method: method.to_owned(),
            target: target.to_owned(),
            version,
            fields: fields
                .iter()
                .map(|h| (h.name.to_owned(), h.value.to_vec()))
                .collect(),
            len,
        },
        Ok(None) => Verdict::Partial,
        Err(e) => Verdict::Error(e),
    }
}

/// Both parsers on `input` and every prefix of it, with room for `room`
/// fields.
fn agree(input: &[u8], room: usize) {
    for end in 0..=input.len() {
        let part = &input[..end];
        assert_eq!(
            by_scan(part, room),
            by_httparse(part, room),
            "{:?} with room for {room} fields",
            String::from_utf8_lossy(part)
        );
    }
}

/// The pieces heads are made of: right, and each kind of wrong.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&'static [u8]> = vec![
        b"GET",
        b"POST",
        b"HEAD",
        b"G\xc3T",
        b"GE T",
        b"",
        b" ",
        b"  ",
        b"\t",
        b"/",
        b"/end-string/4",
        b"/a?b=c&d",
        b"?",
        b"/a%20b?c=%zz",
        b"/{x}|[y]",
        b"<\"#^`\\>",
        b"/\xc3\xa9",
        b"/\xff",
        b"/\x7f",
        b"*",
        b"http://h/p",
        b"HTTP/1.1",
        b"HTTP/1.0",
        b"HTTP/1.2",
        b"HTTP/2.0",
        b"HTTP/1.",
        b"HTTP/1",
        b"http/1.1",
        b"\r\n",
        b"\n",
        b"\r",
        b"\r\r",
        b"Host",
        b"host",
        b"Content-Length",
        b"Transfer-Encoding",
        b"X-A",
        b"Bad Name",
        b"a\x00b",
        b":",
        b": ",
        b":\t",
        b"localhost",
        b"value with spaces ",
        b"v\tv\t",
        b"caf\xe9",
        b"\x01",
        b"\x1f",
        b"\x7f",
        b"\x80",
        b"0123456789abcdefghij0123456789abcdefghij",
        b"text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7",
    ];
    prop_oneof![
        proptest::sample::select(fixed).prop_map(<[u8]>::to_vec),
        proptest::collection::vec(any::<u8>(), 0..20),
    ]
}

/// A request head of well-formed lines and arbitrary pieces.
fn head() -> impl Strategy<Value = Vec<u8>> {
    let line = proptest::collection::vec(piece(), 0..6).prop_map(|p| p.concat());
    (
        proptest::bool::ANY,
        proptest::collection::vec(line, 0..6),
        proptest::bool::ANY,
    )
        .prop_map(|(lead, lines, well_formed)| {
            let mut head = Vec::new();
            if lead {
                head.extend_from_slice(b"\r\n");
            }
            if well_formed {
                head.extend_from_slice(
                    b"GET /end-string/4?kind=ascii HTTP/1.1\r\nHost: localhost\r\n",
                );
            }
            for l in lines {
                head.extend_from_slice(&l);
                head.extend_from_slice(b"\r\n");
            }
            head.extend_from_slice(b"\r\n");
            head
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn scan_answers_as_httparse_answers(head in head(), room in 0usize..5) {
        agree(&head, room);
    }

    #[test]
    fn a_byte_changed_anywhere_changes_both_alike(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        room in 0usize..5,
    ) {
        let mut head = b"GET /a/b?c=d HTTP/1.1\r\nHost: example.com:8080\r\nAccept: text/plain, */*;q=0.5\t \r\nX-Long: 0123456789abcdef0123456789abcdef0123456789\r\nConnection: keep-alive\r\n\r\n".to_vec();
        let i = at.index(head.len());
        head[i] = byte;
        agree(&head, room);
    }
}

#[test]
fn the_heads_the_benchmarks_send_agree() {
    let heads: [&[u8]; 4] = [
        b"GET /end-string/4 HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /end-string/4?kind=ascii&body=flat HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n\r\n",
        b"\r\n\nPOST /echo HTTP/1.0\nContent-Length: 3\n\nabc",
    ];
    for head in heads {
        for room in [0, 1, 2, 3, 16] {
            agree(head, room);
        }
    }
}
