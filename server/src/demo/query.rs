//! The routes' queries, decoded by the core (`h1/query.rs`), and the
//! counts of the paths. A parameter a route reads may be given once; a
//! repeated one, or one the core cannot decode (a `%` that begins no
//! escape, a value that is not UTF-8), is refused with 400 naming the
//! parameter.

use unflat::head::Status;

use super::reply::{Answer, Echoed, Made};
use unflat_server::h1::{decode_pair, QueryError};

/// 400 for `reason`.
pub(super) fn bad_request(reason: String) -> Answer {
    Answer::error(Status::BAD_REQUEST, reason)
}

/// `s` as a decimal count: digits only (refused naming `what` otherwise),
/// within `usize`. One pass: the count is in every end-string request.
#[inline(always)]
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

/// 400 for a query the core could not decode.
#[cold]
pub(super) fn refused(e: QueryError) -> Answer {
    bad_request(e.0)
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

/// The reply `format` asks for: `None` for JSON (the default), or the raw
/// echo, or an error.
pub(super) fn echo_format(query: Option<&str>) -> Result<Option<Answer>, Answer> {
    let mut format = None;
    // Only /echo asks: a `str` search is fast enough here.
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        // Only pairs whose name decodes to `format` are the server's.
        let named = pair.split_once('=').is_some_and(|(name, _)| {
            form_urlencoded::parse(name.as_bytes()).any(|(n, _)| n == "format")
        });
        if !named {
            continue;
        }
        let (_, value) = decode_pair(pair)
            .map_err(refused)?
            .expect("a pair with a name has =");
        once(&mut format, "format", value)?;
    }
    match format.as_deref() {
        None | Some("json") => Ok(None),
        Some("raw") => Ok(Some(Answer::made(Made::Echo(Echoed::Raw)))),
        Some(other) => Err(bad_request(format!(
            "unknown format {other:?}: expected json or raw"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count is read as `str::parse` reads it, digits only; a byte that
    /// is not a digit is named before an overflow, wherever it is.
    #[test]
    fn counts_parse_as_the_standard_library_parses_them() {
        let reason = |s: &str| match parse_count("len", s) {
            Ok(n) => Ok(n),
            Err(Answer::Made(made)) => match *made {
                Made::Error(e) => Err(e.reason.into_owned()),
                other => panic!("{s:?}: not an error reply: {other:?}"),
            },
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
