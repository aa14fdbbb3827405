//! Reading a response head back with httparse. Included by the head tests.

/// Parses `bytes` as one whole response head; returns the code, the reason
/// and the fields as httparse reads them.
pub fn parse_fields(bytes: &[u8]) -> (u16, String, Vec<(String, Vec<u8>)>) {
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let mut res = httparse::Response::new(&mut fields);
    assert_eq!(
        res.parse(bytes),
        Ok(httparse::Status::Complete(bytes.len())),
        "{:?}",
        String::from_utf8_lossy(bytes)
    );
    let fields = res
        .headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect();
    (res.code.unwrap(), res.reason.unwrap().to_string(), fields)
}
