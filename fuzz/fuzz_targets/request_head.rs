//! The server's one-walk head scanner against httparse, which it stands in
//! for: on any bytes, with room for 0 to 7 fields, the same head (method,
//! target, version, fields, length), the same `Partial`, the same error.
#![no_main]

use std::mem::MaybeUninit;

use libfuzzer_sys::fuzz_target;
use unflat_server::h1::scan;

fuzz_target!(|data: &[u8]| {
    let Some((&room, input)) = data.split_first() else { return };
    let room = usize::from(room % 8);
    let mut ours = vec![MaybeUninit::uninit(); room];
    let mut theirs = vec![MaybeUninit::uninit(); room];
    let mut req = httparse::Request::new(&mut []);
    match (scan(input, &mut ours), req.parse_with_uninit_headers(input, &mut theirs)) {
        (Ok(Some(s)), Ok(httparse::Status::Complete(len))) => {
            assert_eq!(s.len, len);
            assert_eq!(Some(s.method), req.method);
            assert_eq!(Some(s.target), req.path);
            assert_eq!(Some(s.version), req.version);
            assert_eq!(s.fields, &*req.headers);
        }
        (Ok(None), Ok(httparse::Status::Partial)) => {}
        (Err(a), Err(b)) => assert_eq!(a, b),
        (ours, theirs) => panic!("scan: {ours:?}, httparse: {theirs:?}"),
    }
});
