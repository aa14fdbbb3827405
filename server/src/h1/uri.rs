//! The URI grammar of a request: the request target's forms and bytes
//! (RFC 9112 §3.2, RFC 3986) and a Host's (RFC 9110 §7.2), checked byte by
//! byte through tables on every request.

use percent_encoding::percent_decode;
use unflat::head::Status;

use super::{reject, Reject, Walked};

/// What follows `http://` or `https://` (in any case) at the start of an
/// absolute-form target.
fn after_scheme(target: &str) -> Option<&str> {
    // Compared as bytes: the target may hold any UTF-8, and a scheme that
    // matches ends with an ASCII '/', so slicing after it is safe.
    ["http://", "https://"].iter().find_map(|scheme| {
        let head = target.as_bytes().get(..scheme.len())?;
        head.eq_ignore_ascii_case(scheme.as_bytes())
            .then(|| &target[scheme.len()..])
    })
}

/// Checks the request target and splits it into `(path, query)`, from what
/// the scan found of it (`walked`), walking it again only when it holds an
/// escape or a byte a URI may not. Origin- and absolute-form (no userinfo)
/// for every method, `*` for OPTIONS; CONNECT is refused with 501 (no
/// proxy; the close keeps tunnel bytes from being read as requests). Only
/// URI bytes (RFC 3986), no fragment; a `%` of the path must begin an
/// escape (the query's are the route's to check).
pub(super) fn parse_target<'t>(
    method: &str,
    target: &'t str,
    walked: Walked,
) -> Result<(&'t str, Option<&'t str>), Reject> {
    let bad = |reason| Err(reject(Status::BAD_REQUEST, reason));
    if method == "CONNECT" {
        return if target.contains(':') && valid_host(target.as_bytes()) {
            Err(reject(
                Status::NOT_IMPLEMENTED,
                "CONNECT is not supported: this server is not a proxy",
            ))
        } else {
            bad("a CONNECT target must be host:port")
        };
    }
    // Origin form, what nearly every request has, needs no scheme search.
    let rest = if target.starts_with('/') {
        target
    } else if target == "*" {
        return if method == "OPTIONS" {
            Ok(("*", None))
        } else {
            bad("the asterisk-form target (*) is only for OPTIONS")
        };
    } else if let Some(after) = after_scheme(target) {
        let end = after.find(['/', '?']).unwrap_or(after.len());
        let authority = &after[..end];
        if authority.contains('#') {
            return bad(FRAGMENT);
        }
        if authority.contains('@') {
            return bad("userinfo (user@) is not allowed in a request target");
        }
        if !valid_host(authority.as_bytes()) {
            return bad("invalid authority in an absolute-form target");
        }
        &after[end..]
    } else {
        return bad("the request target must begin with / (or be http://host/… or * for OPTIONS)");
    };
    // Nearly every target holds URI bytes only, no `%` and no `+`: the
    // scan that found its end found its query too; any other byte takes
    // the detailed pass, which says what is wrong.
    let query_at = if walked.plain {
        // The first `?` is never in an authority, which ends before it.
        walked.query_at.map(|q| q - (target.len() - rest.len()))
    } else {
        query_in_escaped(rest.as_bytes())?
    };
    // Every byte is ASCII now, so slicing anywhere is safe.
    let (path, query) = match query_at {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    Ok((if path.is_empty() { "/" } else { path }, query))
}

/// Where the query begins (its `?`), for a target with bytes besides
/// [`URI_BYTE`]'s: each `%` of the path must begin an escape; a `%` of the
/// query is left to the route, which names the parameter it is in.
fn query_in_escaped(bytes: &[u8]) -> Result<Option<usize>, Reject> {
    let bad = |reason| Err(reject(Status::BAD_REQUEST, reason));
    let mut query_at = None;
    let mut escaped = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'?' if query_at.is_none() => query_at = Some(i),
            b if URI_BYTE[usize::from(b)] => {}
            b'%' if query_at.is_some() => {}
            b'%' => {
                if !begins_escape(bytes, i) {
                    return bad("a % not followed by two hex digits in the request target");
                }
                escaped = true;
                i += 3;
                continue;
            }
            b'#' => return bad(FRAGMENT),
            _ => return bad("a byte not allowed in a URI in the request target"),
        }
        i += 1;
    }
    // The path as an application reads it (`RequestHead::decoded_path`)
    // is text: its escapes must decode to UTF-8.
    let path = &bytes[..query_at.unwrap_or(bytes.len())];
    if escaped && percent_decode(path).decode_utf8().is_err() {
        return bad("the request target's path is not UTF-8 once percent-decoded");
    }
    Ok(query_at)
}

const FRAGMENT: &str = "a fragment (#) is not allowed in a request target";

/// Whether the `%` at `at` begins an escape: two hex digits follow it
/// (RFC 3986 §2.1).
pub fn begins_escape(bytes: &[u8], at: usize) -> bool {
    let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
    hex(at + 1) && hex(at + 2)
}

/// The bytes a path and query may hold besides `%` (RFC 3986 §3.3, §3.4):
/// unreserved, sub-delims, `:`, `@`, `/` and `?`.
pub(super) static URI_BYTE: [bool; 256] = alphanumeric_and(b"-._~!$&'()*+,;=:@/?");

/// [`URI_BYTE`] but `+`, which a query reads as a space: the bytes a
/// target and its query are read as they are.
pub(super) static PLAIN_BYTE: [bool; 256] = {
    let mut table = URI_BYTE;
    table[b'+' as usize] = false;
    table
};

/// `uri-host [ ":" port ]` (RFC 9110 §7.2, RFC 3986 §3.2.2); empty is
/// allowed (RFC 9112 §3.2, for targets without an authority).
pub(super) fn valid_host(v: &[u8]) -> bool {
    if v.first() == Some(&b'[') {
        let Some(end) = v.iter().position(|&b| b == b']') else {
            return false;
        };
        let literal = &v[1..end];
        if literal.is_empty()
            || !literal
                .iter()
                .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return false;
        }
        return match &v[end + 1..] {
            [] => true,
            [b':', port @ ..] => port.len() <= 5 && port.iter().all(u8::is_ascii_digit),
            _ => false,
        };
    }
    // A port is at most five digits after the last `:`: looked for
    // from the end, five bytes at most, not through the whole value
    // (a `:` further in is then the host's, which refuses it).
    let digits = v
        .iter()
        .rev()
        .take(5)
        .take_while(|b| b.is_ascii_digit())
        .count();
    // The port, if any, is those digits: checked as they were counted.
    let host = match v[..v.len() - digits].split_last() {
        Some((b':', host)) => host,
        _ => v,
    };
    all_in(host, &REG_NAME)
}

/// Whether every byte of `bytes` is one `table` allows. No early exit, so
/// the loop unrolls: a Host or a target is a few dozen bytes, checked in
/// every request, and nearly always passes.
fn all_in(bytes: &[u8], table: &[bool; 256]) -> bool {
    bytes.iter().fold(true, |ok, &b| ok & table[usize::from(b)])
}

/// The bytes of a reg-name (RFC 3986 §3.2.2): unreserved, sub-delims and
/// `%` (a table: every request's Host is checked byte by byte).
static REG_NAME: [bool; 256] = alphanumeric_and(b"-._~%!$&'()*+,;=");

/// A table of the ASCII letters and digits and the bytes of `allowed`.
const fn alphanumeric_and(allowed: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < allowed.len() {
        table[allowed[i] as usize] = true;
        i += 1;
    }
    let mut b = 0;
    while b < 256 {
        if (b as u8).is_ascii_alphanumeric() {
            table[b] = true;
        }
        b += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_ports() {
        for ok in [
            "",
            "localhost",
            "localhost:3000",
            "127.0.0.1:80",
            "a:",
            ":80",
            "12345",
            "123456",
            "x:12345",
            "[::1]",
            "[::1]:8080",
            "%41.example",
        ] {
            assert!(valid_host(ok.as_bytes()), "{ok:?}");
        }
        for bad in [
            "a:b:1",
            "host:123456",
            "a b",
            "a:1x",
            "a/b",
            "[::1",
            "[]",
            "[::1]x",
            "a@b",
            "é",
        ] {
            assert!(!valid_host(bad.as_bytes()), "{bad:?}");
        }
    }

    /// What the head's scan finds of `target` on its walk; for a target it
    /// would not take (a space in it), what that walk would say.
    fn walked(target: &str) -> Walked {
        let head = format!("GET {target} HTTP/1.1\r\n\r\n");
        let mut fields = [std::mem::MaybeUninit::uninit(); 1];
        match crate::h1::scan(head.as_bytes(), &mut fields) {
            Ok(Some(s)) if s.target == target => s.walked,
            _ => Walked {
                query_at: target.find('?'),
                plain: all_in(target.as_bytes(), &PLAIN_BYTE),
            },
        }
    }

    #[test]
    fn targets_split_into_path_and_query() {
        let get = |t| parse_target("GET", t, walked(t)).map_err(|r| r.reason);
        assert_eq!(get("/a/b?x=1&y"), Ok(("/a/b", Some("x=1&y"))));
        assert_eq!(get("/a?b?c"), Ok(("/a", Some("b?c"))));
        assert_eq!(get("/a"), Ok(("/a", None)));
        assert_eq!(get("HTTP://host:80/p?q"), Ok(("/p", Some("q"))));
        assert_eq!(get("https://host"), Ok(("/", None)));
        assert_eq!(get("http://host?q=1"), Ok(("/", Some("q=1"))));
        assert_eq!(get("/%41%7e"), Ok(("/%41%7e", None)));
        assert_eq!(get("/caf%C3%A9?x=%FF"), Ok(("/caf%C3%A9", Some("x=%FF"))));
        // A path's `+` is itself (no form encoding), hex in either case.
        let decoded = percent_decode(b"/caf%C3%a9+%2F").decode_utf8();
        assert_eq!(decoded.unwrap(), "/café+/");
        // The query's escapes are checked by the route that reads them.
        assert_eq!(get("/a?q=%zz&r=%4"), Ok(("/a", Some("q=%zz&r=%4"))));
        assert_eq!(parse_target("OPTIONS", "*", walked("*")), Ok(("*", None)));
        // Multi-byte characters where a scheme would end (found by the
        // session fuzz target: slicing at byte 7 used to panic), and
        // anywhere else: not URI bytes.
        assert!(get("httpsܫx").is_err());
        assert!(get("/ééé?q").is_err());
        for bad in [
            "*",
            "a/b",
            "/a#b",
            "/a b",
            "/%4",
            "/%zz",
            // Escapes that do not decode to UTF-8: the path is text.
            "/%FF",
            "/caf%E9",
            "/%C3",
            "/a|b",
            "http://u@h/",
        ] {
            assert!(get(bad).is_err(), "{bad:?} accepted");
        }
    }
}
