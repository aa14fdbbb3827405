//! A request's query as an application reads it
//! (`application/x-www-form-urlencoded`, decoded by `form_urlencoded`):
//! its `name=value` pairs in order, percent-decoded with `+` as a space.
//! A `%` that begins no escape, a name or value that is not UTF-8 once
//! decoded, or a pair without `=` is an error naming the parameter (the
//! request's own checks leave the query's escapes to whoever reads it). A
//! query without an escape or a `+` — nearly every one — is looked at
//! once for them and its pairs are handed over as they are: nothing
//! decoded, nothing allocated.

use std::borrow::Cow;

use super::uri::begins_escape;
use super::word::equal;

/// A decoded query parameter: name and value.
pub type Pair<'q> = (Cow<'q, str>, Cow<'q, str>);

/// Why a query cannot be read: a reason naming the parameter, for a 400.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryError(pub String);

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for QueryError {}

/// The pairs of a query, in order; empty parts (`a=1&&b=2`) skipped.
///
/// ```
/// use unflat_server::h1::query_pairs;
/// let pairs: Vec<_> = query_pairs(Some("name=Ada+L%C3%B6we&x=1"))
///     .collect::<Result<_, _>>()
///     .unwrap();
/// assert_eq!(pairs[0], ("name".into(), "Ada Löwe".into()));
/// assert_eq!(pairs[1], ("x".into(), "1".into()));
/// assert!(query_pairs(Some("q=%zz")).next().unwrap().is_err());
/// assert!(query_pairs(Some("q=%FF")).next().unwrap().is_err());
/// assert_eq!(query_pairs(None).count(), 0);
/// ```
// Inline: an application's routes, in its own crate, read their query on
// every request (the demo's `/end-string` route ran 19 instructions more per
// request when they could not inline it before link-time optimisation).
#[inline]
pub fn query_pairs(query: Option<&str>) -> impl Iterator<Item = Result<Pair<'_>, QueryError>> {
    pairs(query, false)
}

/// [`query_pairs`] of a query known to hold no escape and no `+` when
/// `plain` (the head's walk through the target found none): then not
/// looked at for them again.
#[inline]
pub(crate) fn pairs(
    query: Option<&str>,
    plain: bool,
) -> impl Iterator<Item = Result<Pair<'_>, QueryError>> {
    // Looked at once for escapes, not pair by pair.
    let plain = plain || query.is_some_and(|q| !has_escapes(q));
    parts(query).map(move |pair| decoded(pair, plain)?.ok_or_else(|| no_value(pair)))
}

/// The pairs of a query in which nothing needs decoding, as sent: what
/// [`query_pairs`] gives for a query with no escape and no `+`
/// ([`RequestHead::query_is_plain`](super::RequestHead::query_is_plain)),
/// with no `Cow` to hand over and no escape to look for.
///
/// ```
/// use unflat_server::h1::plain_pairs;
/// let pairs: Vec<_> = plain_pairs(Some("kind=ascii&&x=")).collect::<Result<_, _>>().unwrap();
/// assert_eq!(pairs, [("kind", "ascii"), ("x", "")]);
/// assert!(plain_pairs(Some("x")).next().unwrap().is_err());
/// ```
#[inline]
pub fn plain_pairs(query: Option<&str>) -> PlainPairs<'_> {
    PlainPairs {
        parts: query_parts(query),
    }
}

/// The iterator of [`plain_pairs`]: a loop of its own, always inlined,
/// where the adapters of [`query_pairs`] were left out of line, a call
/// for each pair.
#[derive(Clone, Debug)]
pub struct PlainPairs<'q> {
    parts: Parts<'q>,
}

impl<'q> Iterator for PlainPairs<'q> {
    type Item = Result<(&'q str, &'q str), QueryError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let pair = self.parts.next()?;
            if !pair.is_empty() {
                return Some(split_once_byte(pair, b'=').ok_or_else(|| no_value(pair)));
            }
        }
    }
}

/// The parts of a query that are not empty (`a=1&&b=2` has two).
#[inline]
fn parts(query: Option<&str>) -> impl Iterator<Item = &str> {
    query_parts(query).filter(|p| !p.is_empty())
}

#[cold]
fn no_value(pair: &str) -> QueryError {
    QueryError(format!("query parameter {pair:?} has no value"))
}

/// Whether `s` holds a byte that needs decoding: an escape, or `+`. Eight
/// bytes at a time, the last eight read again (overlapping) rather than one
/// by one, with no early exit: a query is a few dozen bytes and nearly
/// never has one. Any byte marked means one that is there ([`equal`]: a
/// borrow marks bytes above a match only).
#[inline]
fn has_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(last) = b.len().checked_sub(8) else {
        return b.iter().fold(false, |e, &c| e | ESCAPES[usize::from(c)]);
    };
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"));
    let marks = |w: u64| equal(w, b'%') | equal(w, b'+');
    let mut found = marks(word(last));
    for at in (0..last).step_by(8) {
        found |= marks(word(at));
    }
    found != 0
}

/// The `&`-separated parts of a query, empty ones included (none for no
/// query).
#[inline]
pub(crate) fn query_parts(query: Option<&str>) -> Parts<'_> {
    Parts { rest: query }
}

/// The iterator of [`query_parts`], always inlined: [`PlainPairs`] takes
/// its parts from it on every request.
#[derive(Clone, Debug)]
pub(crate) struct Parts<'q> {
    /// What is left of the query: `None` once its last part is taken.
    rest: Option<&'q str>,
}

impl<'q> Iterator for Parts<'q> {
    type Item = &'q str;

    #[inline(always)]
    fn next(&mut self) -> Option<&'q str> {
        let s = self.rest?;
        let (part, rest) = split_once_byte(s, b'&').map_or((s, None), |(p, t)| (p, Some(t)));
        self.rest = rest;
        Some(part)
    }
}

/// `s` split around its first `sep`, an ASCII byte. A byte search: `str`'s
/// search for a `char` cost more than the rest of the query's parsing
/// (callgrind), and a target is ASCII anyway. Always inlined: a call
/// costs what the split does.
#[inline(always)]
pub(crate) fn split_once_byte(s: &str, sep: u8) -> Option<(&str, &str)> {
    debug_assert!(sep.is_ascii(), "a separator is one byte of UTF-8");
    let at = find_byte(s.as_bytes(), sep)?;
    Some((&s[..at], &s[at + 1..]))
}

/// Where the first `sep` in `s` is: eight bytes at a time, the last few as
/// a word read again (overlapping), or one by one when there are fewer
/// than eight in all. On a query's few dozen bytes this beats a byte at a
/// time and `memchr` alike, whose vector search starts at 16 bytes and
/// goes through a call (`benches/head_scan.rs`, `find_byte`).
#[inline]
pub fn find_byte(s: &[u8], sep: u8) -> Option<usize> {
    let word = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("eight bytes"));
    let found = |at: usize, marks: u64| at + (marks.trailing_zeros() / 8) as usize;
    let mut at = 0;
    while at + 8 <= s.len() {
        let marks = equal(word(at), sep);
        if marks != 0 {
            return Some(found(at, marks));
        }
        at += 8;
    }
    if at == s.len() {
        return None;
    }
    match s.len().checked_sub(8) {
        // The bytes it shares with the words before hold no `sep`, so no
        // borrow marks a byte after them: the lowest marked is exact.
        Some(last) => {
            let marks = equal(word(last), sep);
            (marks != 0).then(|| found(last, marks))
        }
        None => s.iter().position(|&b| b == sep),
    }
}

/// The bytes that make a pair need decoding: an escape, or `+`.
static ESCAPES: [bool; 256] = {
    let mut t = [false; 256];
    t[b'%' as usize] = true;
    t[b'+' as usize] = true;
    t
};

/// One `name=value` pair, percent-decoded with `+` as a space; `None`
/// when it has no `=`.
///
/// ```
/// use unflat_server::h1::decode_pair;
/// let (name, value) = decode_pair("q=a+b%21").unwrap().unwrap();
/// assert_eq!((&*name, &*value), ("q", "a b!"));
/// assert!(decode_pair("q").unwrap().is_none());
/// assert!(decode_pair("q=%zz").is_err());
/// ```
pub fn decode_pair(pair: &str) -> Result<Option<Pair<'_>>, QueryError> {
    decoded(pair, !has_escapes(pair))
}

/// [`decode_pair`] for a pair known to hold no escape and no `+` when
/// `plain`: then handed over as it is.
#[inline]
fn decoded(pair: &str, plain: bool) -> Result<Option<Pair<'_>>, QueryError> {
    let Some((name, value)) = split_once_byte(pair, b'=') else {
        return Ok(None);
    };
    if plain {
        return Ok(Some((Cow::Borrowed(name), Cow::Borrowed(value))));
    }
    decode_escaped(pair, name, value).map(Some)
}

/// A pair decoded: `raw_name` and `raw_value` are its two sides.
#[cold]
fn decode_escaped<'q>(
    pair: &'q str,
    raw_name: &str,
    raw_value: &str,
) -> Result<Pair<'q>, QueryError> {
    // form_urlencoded keeps a `%` that begins no escape as it is; here it
    // is an error, in the name or the value.
    if bad_escape(raw_name) {
        return Err(QueryError(format!(
            "query parameter name {raw_name:?}: a % not followed by two hex digits"
        )));
    }
    if bad_escape(raw_value) {
        return Err(QueryError(format!(
            "query parameter {raw_name:?}: a % not followed by two hex digits in {raw_value:?}"
        )));
    }
    let (name, value) = form_urlencoded::parse(pair.as_bytes())
        .next()
        .expect("a pair with = is one name and one value");
    if !utf8_once_decoded(raw_name, &name) {
        return Err(QueryError(format!(
            "query parameter name {raw_name:?} is not UTF-8 once percent-decoded"
        )));
    }
    if !utf8_once_decoded(raw_value, &value) {
        return Err(QueryError(format!(
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

    /// A query the head's walk found plain gives the pairs a query looked
    /// at for escapes gives, and read as sent ([`plain_pairs`]) the same
    /// text: the walk's `plain` (no `%`, no `+`) is all the look would find.
    #[test]
    fn a_plain_query_gives_the_pairs_it_gives_when_looked_at() {
        for target in [
            "/a?kind=ascii&body=rope",
            "/a?x=1&&y=",
            "/a?x",
            "/a?b?c=d",
            "/a?x=1+2",
            "/a?x=%41",
        ] {
            let head = format!("GET {target} HTTP/1.1\r\n\r\n");
            let mut fields = [std::mem::MaybeUninit::uninit(); 1];
            let scanned = crate::h1::scan(head.as_bytes(), &mut fields)
                .unwrap()
                .unwrap();
            let query = scanned.walked.query_at.map(|q| &target[q + 1..]);
            let plain = scanned.walked.plain;
            assert_eq!(plain, !target.contains(['%', '+']), "{target:?}");
            let looked: Vec<_> = query_pairs(query).collect();
            assert_eq!(
                pairs(query, plain).collect::<Vec<_>>(),
                looked,
                "{target:?}"
            );
            if plain {
                let as_sent: Vec<_> = plain_pairs(query)
                    .map(|p| p.map(|(n, v)| (n.into(), v.into())))
                    .collect();
                assert_eq!(as_sent, looked, "{target:?}");
            }
        }
    }

    proptest::proptest! {
        /// The word-wide look for escapes says what a byte-by-byte look
        /// says, whatever the length (the overlapping last word included)
        /// and wherever the `%` or `+` is.
        #[test]
        fn the_word_look_for_escapes_finds_what_a_byte_look_finds(
            s in "[a-z=&%+\\x{80}-\\x{10FFFF}]{0,40}",
        ) {
            proptest::prop_assert_eq!(has_escapes(&s), s.contains(['%', '+']));
        }

        /// The word-wide search finds the first separator a byte-by-byte
        /// search finds, in any bytes (neighbours of the separator, whose
        /// borrows a word's arithmetic must not mistake, included).
        #[test]
        fn the_word_search_finds_what_a_byte_search_finds(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![b'&', b'=', b'%', b'\'', b'<', b'>', 0, 0xff]),
                    proptest::num::u8::ANY,
                ],
                0..40,
            ),
            sep in proptest::sample::select(vec![b'&', b'=']),
        ) {
            proptest::prop_assert_eq!(
                find_byte(&bytes, sep),
                bytes.iter().position(|&b| b == sep)
            );
        }
    }
}
