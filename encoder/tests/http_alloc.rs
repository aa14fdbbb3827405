//! Building a head from `http` types and encoding it allocates nothing:
//! the status from a `StatusCode`, fields from `HeaderName`/`HeaderValue`
//! and a whole 40-field `HeaderMap`, measured and written into a buffer made
//! beforehand — counted by a global allocator (feature `http`).
#![cfg(feature = "http")]

use http::header::{HeaderMap, HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::StatusCode;
use unflat::head::{DateLine, Head, RequestMethod};

#[path = "common/alloc.rs"]
mod alloc;

use alloc::allocations_during;

#[test]
fn building_and_encoding_a_head_from_http_types_allocates_nothing() {
    let mut map = HeaderMap::new();
    for i in 0..40 {
        let name = HeaderName::from_bytes(format!("x-field-{i}").as_bytes()).unwrap();
        map.append(
            name,
            HeaderValue::from_str(&format!(" value {i} ")).unwrap(),
        );
    }
    let content_type = HeaderValue::from_static("text/html; charset=utf-8");
    let cache = HeaderValue::from_static("no-store");
    let date = DateLine::at(std::time::UNIX_EPOCH);
    let mut dst = vec![0u8; 4096];
    let mut written = 0;
    let n = allocations_during(|| {
        for code in [
            StatusCode::OK,
            StatusCode::IM_A_TEAPOT,
            StatusCode::from_u16(299).unwrap(),
        ] {
            let mut head = Head::new(code.into(), RequestMethod::Other);
            head.field((&CONTENT_TYPE).into(), (&content_type).into())
                .unwrap()
                .field((&CACHE_CONTROL).into(), (&cache).into())
                .unwrap()
                .header_map(&map)
                .unwrap()
                .date(&date)
                .content_length(1234)
                .unwrap();
            let needed = head.max_len();
            written = head.write(&mut dst).unwrap();
            assert_eq!(written, needed);
        }
    });
    assert_eq!(n, 0, "allocations while building and encoding");
    // What was written is the whole head.
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut res = httparse::Response::new(&mut fields);
    assert_eq!(
        res.parse(&dst[..written]),
        Ok(httparse::Status::Complete(written))
    );
    assert_eq!(res.code, Some(299));
    assert_eq!(res.headers.len(), 2 + 40 + 2);
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the guard: a test that cannot fail proves nothing.
    let n = allocations_during(|| {
        std::hint::black_box(HeaderValue::from_str("x").unwrap().as_bytes().to_vec());
    });
    assert!(n >= 1);
}
