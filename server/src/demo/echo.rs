//! The JSON `/echo` answers with by default: the request as received, every
//! part base64-encoded (the origin format of the HTTP Garden differential
//! harness), made in one allocation of the exact size once the body is in.

use std::fmt::Write as _;

use base64::Engine as _;

use unflat_server::h1::RequestHead;

/// The JSON `/echo` answers with: method, target, version, fields in order
/// and body, each base64-encoded.
#[derive(Debug)]
pub struct EchoJson {
    /// Everything up to the body's value.
    pub(super) prefix: String,
}

/// What ends the echo's JSON document.
const SUFFIX: &[u8] = b"\"}\n";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl EchoJson {
    /// The JSON for `head`, waiting for its body.
    pub fn new(head: &RequestHead<'_>) -> EchoJson {
        let version = if head.version == 0 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        };
        let mut prefix = String::with_capacity(256);
        // base64 has no character JSON must escape, so plain formatting is
        // well-formed JSON.
        let _ = write!(
            prefix,
            "{{\"method\":\"{}\",\"target\":\"{}\",\"version\":\"{}\",\"headers\":[",
            b64(head.method.as_bytes()),
            b64(head.target.as_bytes()),
            b64(version.as_bytes())
        );
        for (i, (name, value)) in head.fields().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                prefix,
                "{sep}[\"{}\",\"{}\"]",
                b64(name.as_bytes()),
                b64(value)
            );
        }
        prefix.push_str("],\"body\":\"");
        EchoJson { prefix }
    }

    /// The length of the whole document for a body of `body_len` bytes.
    pub fn len(&self, body_len: usize) -> usize {
        self.prefix.len() + body_len.div_ceil(3) * 4 + SUFFIX.len()
    }

    /// The whole JSON document, with `body`, in one allocation of `len`
    /// ([`EchoJson::len`]) bytes.
    pub fn finish(&self, body: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(self.prefix.as_bytes());
        let at = out.len();
        out.resize(len - SUFFIX.len(), 0);
        let n = base64::engine::general_purpose::STANDARD
            .encode_slice(body, &mut out[at..])
            .expect("room for the base64 of the body");
        debug_assert_eq!(at + n, len - SUFFIX.len());
        out.extend_from_slice(SUFFIX);
        out
    }
}
