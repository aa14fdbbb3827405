//! Queries (`application/x-www-form-urlencoded`, decoded by
//! `form_urlencoded`) and the counts of the paths. A parameter a route
//! reads may be given once; a repeated one, a `%` that begins no escape, or
//! a value that is not UTF-8 is refused with 400 naming the parameter (the
//! request's checks leave the query's escapes to the routes).

use std::borrow::Cow;

use unflat::head::Status;

use super::reply::{Answer, Echoed};
use crate::h1::begins_escape;

/// 400 for `reason`.
pub(super) fn bad_request(reason: String) -> Answer {
    Answer::error(Status::BAD_REQUEST, reason)
}

/// `s` as a decimal count: digits only (refused naming `what` otherwise),
/// within `usize`. One pass: the count is in every end-string request.
#[inline]
pub(super) fn parse_count(what: &str, s: &str) -> Result<usize, Answer> {
    let mut n: Option<usize> = Some(0);
    for b in s.bytes() {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return Err(not_a_count(what, s));
        }
        // An overflow is reported only once every byte is known to be a
        // digit: "not a number" comes first, as it did with `str::parse`.
        n = n.and_then(|n| n.checked_mul(10)?.checked_add(usize::from(digit)));
    }
    match n {
        _ if s.is_empty() => Err(not_a_count(what, s)),
        Some(n) => Ok(n),
        None => Err(bad_request(format!("{what} {s} is out of range"))),
    }
}

#[cold]
fn not_a_count(what: &str, s: &str) -> Answer {
    bad_request(format!("{what} must be a decimal number, got {s:?}"))
}

/// Passes every `name=value` pair of `query`, decoded, to `set`; a pair
/// without `=` is refused. A query without an escape or a `+`, what nearly
/// every one is, is looked at once for them and its pairs are handed over
/// as they are: nothing decoded, nothing allocated.
pub(super) fn query_pairs(
    query: Option<&str>,
    mut set: impl FnMut(&str, &str) -> Result<(), Answer>,
) -> Result<(), Answer> {
    let plain = query.is_some_and(|q| !has_escapes(q));
    for pair in query_parts(query).filter(|p| !p.is_empty()) {
        let Some((name, value)) = split_once_byte(pair, b'=') else {
            return Err(bad_request(format!(
                "query parameter {pair:?} has no value"
            )));
        };
        if plain {
            set(name, value)?;
        } else {
            let (name, value) = decode_escaped(pair, name, value)?;
            set(&name, &value)?;
        }
    }
    Ok(())
}

/// Whether `s` holds a byte that needs decoding: an escape, or `+`. A fold
/// over a table, with no early exit, so that the loop unrolls: a query is
/// a few dozen bytes and nearly never has one.
fn has_escapes(s: &str) -> bool {
    s.bytes().fold(false, |e, b| e | ESCAPES[usize::from(b)])
}

/// The `&`-separated parts of a query, empty ones included (none for no
/// query).
fn query_parts(query: Option<&str>) -> impl Iterator<Item = &str> {
    let mut rest = query;
    std::iter::from_fn(move || {
        let s = rest?;
        let (part, tail) = split_once_byte(s, b'&').map_or((s, None), |(p, t)| (p, Some(t)));
        rest = tail;
        Some(part)
    })
}

/// `s` split around its first `sep`, an ASCII byte. A byte search: `str`'s
/// search for a `char` cost more than the rest of the query's parsing
/// (callgrind), and a target is ASCII anyway.
fn split_once_byte(s: &str, sep: u8) -> Option<(&str, &str)> {
    debug_assert!(sep.is_ascii(), "a separator is one byte of UTF-8");
    let at = s.bytes().position(|b| b == sep)?;
    Some((&s[..at], &s[at + 1..]))
}

/// Sets a parameter read once at most: the refusal of a repeated one.
pub(super) fn once<T>(slot: &mut Option<T>, name: &str, value: T) -> Result<(), Answer> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(repeated(name)),
    }
}

fn repeated(name: &str) -> Answer {
    bad_request(format!(
        "query parameter {name:?} is given more than once; give it once"
    ))
}

/// The bytes that make a pair need decoding: an escape, or `+`.
static ESCAPES: [bool; 256] = {
    let mut t = [false; 256];
    t[b'%' as usize] = true;
    t[b'+' as usize] = true;
    t
};

/// A decoded query parameter: name and value.
type Pair<'q> = (Cow<'q, str>, Cow<'q, str>);

/// One `name=value` pair, percent-decoded with `+` as a space; `None`
/// when it has no `=`. A name or value that is not UTF-8 once decoded is
/// refused, naming the parameter.
fn decode_pair(pair: &str) -> Result<Option<Pair<'_>>, Answer> {
    let Some((name, value)) = split_once_byte(pair, b'=') else {
        return Ok(None);
    };
    if has_escapes(pair) {
        return decode_escaped(pair, name, value).map(Some);
    }
    Ok(Some((Cow::Borrowed(name), Cow::Borrowed(value))))
}

/// A pair decoded: `raw_name` and `raw_value` are its two sides.
#[cold]
fn decode_escaped<'q>(pair: &'q str, raw_name: &str, raw_value: &str) -> Result<Pair<'q>, Answer> {
    // form_urlencoded keeps a `%` that begins no escape as it is; here it
    // is an error, in the name or the value.
    if bad_escape(raw_name) {
        return Err(bad_request(format!(
            "query parameter name {raw_name:?}: a % not followed by two hex digits"
        )));
    }
    if bad_escape(raw_value) {
        return Err(bad_request(format!(
            "query parameter {raw_name:?}: a % not followed by two hex digits in {raw_value:?}"
        )));
    }
    let (name, value) = form_urlencoded::parse(pair.as_bytes())
        .next()
        .expect("a pair with = is one name and one value");
    if !utf8_once_decoded(raw_name, &name) {
        return Err(bad_request(format!(
            "query parameter name {raw_name:?} is not UTF-8 once percent-decoded"
        )));
    }
    if !utf8_once_decoded(raw_value, &value) {
        return Err(bad_request(format!(
            "query parameter {name:?}: {raw_value:?} is not UTF-8 once percent-decoded"
        )));
    }
    Ok((name, value))
}

/// Whether some `%` of `raw` does not begin an escape ([`begins_escape`]).
fn bad_escape(raw: &str) -> bool {
    let b = raw.as_bytes();
    (0..b.len()).any(|i| b[i] == b'%' && !begins_escape(b, i))
}

/// Whether `raw` decoded to UTF-8 without loss: `form_urlencoded` puts
/// U+FFFD for bytes that are not UTF-8, and in an ASCII target the only
/// other U+FFFD is its own escape, `%EF%BF%BD` (whose `EF` no bad sequence
/// swallows), so equal counts of the two mean nothing was replaced.
fn utf8_once_decoded(raw: &str, decoded: &str) -> bool {
    let replaced = decoded.matches('\u{FFFD}').count();
    replaced == 0
        || replaced
            == raw
                .as_bytes()
                .windows(9)
                .filter(|w| w.eq_ignore_ascii_case(b"%EF%BF%BD"))
                .count()
}

/// The reply `format` asks for: `None` for JSON (the default), or the raw
/// echo, or an error.
pub(super) fn echo_format(query: Option<&str>) -> Result<Option<Answer>, Answer> {
    let mut format = None;
    for pair in query_parts(query) {
        // Only pairs whose name decodes to `format` are the server's.
        let named = split_once_byte(pair, b'=').is_some_and(|(name, _)| {
            form_urlencoded::parse(name.as_bytes()).any(|(n, _)| n == "format")
        });
        if !named {
            continue;
        }
        let (_, value) = decode_pair(pair)?.expect("a pair with a name has =");
        once(&mut format, "format", value)?;
    }
    match format.as_deref() {
        None | Some("json") => Ok(None),
        Some("raw") => Ok(Some(Answer::Echo(Echoed::Raw))),
        Some(other) => Err(bad_request(format!(
            "unknown format {other:?}: expected json or raw"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte searches split a query as `str::split` and
    /// `str::split_once` do, empty parts and missing separators included.
    #[test]
    fn queries_split_as_the_standard_library_splits_them() {
        let queries = [
            "", "a", "a=1", "a=1&b=2", "&", "a=1&&b=", "=&=", "a==b&", "%3D=x&y",
        ];
        for q in queries {
            let parts: Vec<&str> = query_parts(Some(q)).collect();
            assert_eq!(parts, q.split('&').collect::<Vec<_>>(), "{q:?}");
            for part in parts {
                assert_eq!(
                    split_once_byte(part, b'='),
                    part.split_once('='),
                    "{part:?}"
                );
            }
        }
        assert_eq!(query_parts(None).count(), 0);
    }

    /// A count is read as `str::parse` reads it, digits only; a byte that
    /// is not a digit is named before an overflow, wherever it is.
    #[test]
    fn counts_parse_as_the_standard_library_parses_them() {
        let reason = |s: &str| match parse_count("len", s) {
            Ok(n) => Ok(n),
            Err(Answer::Error { reason, .. }) => Err(reason.into_owned()),
            Err(other) => panic!("{s:?}: not an error reply: {other:?}"),
        };
        for s in ["0", "4", "007", "102400", &usize::MAX.to_string()] {
            assert_eq!(reason(s), Ok(s.parse::<usize>().unwrap()), "{s:?}");
        }
        let not_a_number = |s: &str| Err(format!("len must be a decimal number, got {s:?}"));
        for s in [
            "",
            "+4",
            "-4",
            " 4",
            "4 ",
            "4a",
            "0x10",
            "99999999999999999999999x",
        ] {
            assert_eq!(reason(s), not_a_number(s), "{s:?}");
        }
        let over = format!("{}0", usize::MAX);
        assert_eq!(reason(&over), Err(format!("len {over} is out of range")));
    }
}
