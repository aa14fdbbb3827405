//! With the `http` feature: heads from the `http` crate's types, trusting
//! what they guarantee (no second validation), allocating nothing.

use super::*;

/// Any `http::StatusCode`, with its `canonical_reason()` as the phrase (one
/// `'static` piece where that is the IANA phrase).
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl From<http::StatusCode> for Status {
    fn from(code: http::StatusCode) -> Status {
        // http guarantees the range, and its phrases are fixed strings
        // of plain text: nothing to check again.
        Status::checked(code.as_u16(), code.canonical_reason().unwrap_or(""))
    }
}

/// `HEAD` is [`RequestMethod::Head`], every other method
/// [`RequestMethod::Other`].
///
/// ```
/// use unflat::head::RequestMethod;
/// assert_eq!(RequestMethod::from(&http::Method::HEAD), RequestMethod::Head);
/// assert_eq!(RequestMethod::from(&http::Method::POST), RequestMethod::Other);
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl From<&http::Method> for RequestMethod {
    fn from(method: &http::Method) -> RequestMethod {
        if method == http::Method::HEAD {
            RequestMethod::Head
        } else {
            RequestMethod::Other
        }
    }
}

/// `http::HeaderName` is a token by construction (and lower case).
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl<'a> From<&'a http::HeaderName> for HeaderName<'a> {
    fn from(name: &'a http::HeaderName) -> HeaderName<'a> {
        HeaderName(name.as_str())
    }
}

/// A bytes door: `http::HeaderValue` holds bytes (its `from_str` stores a
/// `str`'s UTF-8, its `from_bytes` Latin-1 or anything else), field-value
/// bytes only, sent as stored. It may begin or end with whitespace, which
/// a recipient strips (RFC 9110 §5.5): the conversion leaves it out, and
/// cannot fail. Text to go out as Latin-1 goes through
/// [`Head::value`](super::Head::value).
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl<'a> From<&'a http::HeaderValue> for HeaderValue<'a> {
    fn from(value: &'a http::HeaderValue) -> HeaderValue<'a> {
        HeaderValue(trim_ows(value.as_bytes()))
    }
}

/// `bytes` without leading and trailing SP and HTAB.
fn trim_ows(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl<'a, const N: usize> Head<'a, N> {
    /// Adds every field of `map` in one slot, walked when the head is
    /// written: nothing copied, no bound by `N`. Its values are bytes, sent
    /// as stored (the `http` crate's `from_str` stores a `str`'s UTF-8). A
    /// field the head writes itself is refused, as by [`Head::line`].
    ///
    /// ```
    /// use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE, VARY};
    /// use unflat::head::{Head, Status, RequestMethod};
    /// let mut map = HeaderMap::new();
    /// map.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    /// map.append(VARY, HeaderValue::from_static(" accept "));
    /// let mut head = Head::new(http::StatusCode::CREATED.into(), RequestMethod::Other);
    /// head.header_map(&map).unwrap().content_length(0).unwrap();
    /// assert_eq!(
    ///     head.to_vec().unwrap(),
    ///     b"HTTP/1.1 201 Created\r\ncontent-type: text/plain\r\nvary: accept\r\n\
    ///       Content-Length: 0\r\n\r\n"
    /// );
    /// ```
    pub fn header_map(&mut self, map: &'a http::HeaderMap) -> Result<&mut Self, HeadError> {
        for name in map.keys() {
            owned_name(name.as_str().as_bytes())?;
        }
        self.push(Field::Map(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_is_trimmed_from_both_ends_only() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b""), b"");
    }
}
