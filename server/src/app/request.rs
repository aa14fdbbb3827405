//! A request as an async handler owns it: its head copied once into one
//! buffer as the router hands it over — method, target, the field lines
//! and the path parameters decoded — looked up in place, and its body.

use std::borrow::Cow;
use std::sync::Arc;

use arrayvec::ArrayVec;

use super::body::RequestBody;
use crate::h1::{pairs, Pair, QueryError, RequestHead};

/// Parameters a route's path may name (`{name}` segments and a `{*rest}`).
pub const MAX_PARAMS: usize = 8;

/// A request handed to an async handler: what it needs of the head, owned
/// (one allocation, whatever the number of fields: the head's bytes are
/// copied once and read in place), and its [`RequestBody`].
///
/// Text is as the core checked it: the method is a token, the target's
/// path and query are ASCII as sent (escapes undone by
/// [`Request::decoded_path`] and [`Request::query_pairs`]), a path
/// parameter is UTF-8 once decoded (the core answers 400 to a path whose
/// escapes decode to anything else), field
/// values are bytes (obs-text allowed; [`Request::field_str`] reads one as
/// text).
#[derive(Debug)]
pub struct Request {
    /// `method target` then each field as `name:value\n`, then the path
    /// when it is not part of the target, then the decoded parameters that
    /// had escapes.
    buf: Vec<u8>,
    method_end: u32,
    target_end: u32,
    /// Where the field lines end: what follows (a path not in the target,
    /// decoded parameters) is no field, whatever bytes it holds.
    fields_end: u32,
    path: (u32, u32),
    query: Option<(u32, u32)>,
    /// The target holds no `%` and no `+` (`RequestHead`'s walk found
    /// none): the query's pairs are handed over as they are.
    plain: bool,
    /// Each parameter's text in `buf`.
    params: ArrayVec<(u32, u32), MAX_PARAMS>,
    /// The route's parameter names, in order.
    names: Option<Arc<[Box<str>]>>,
    version: u8,
    head_request: bool,
    content_length: Option<u64>,
    body: RequestBody,
}

impl Request {
    /// The request whose head is `head`, with the path parameters at
    /// `params` (ranges of `head.path`, as sent) named `names`; the last is
    /// a `{*rest}` when `rest`, kept as sent.
    pub(crate) fn new(
        head: &RequestHead<'_>,
        params: &[(usize, usize)],
        names: Option<&Arc<[Box<str>]>>,
        rest: bool,
        body: RequestBody,
    ) -> Request {
        let fields_len: usize = head.fields().map(|(n, v)| n.len() + v.len() + 2).sum();
        let path_query = head.path.len() + head.query.map_or(0, str::len);
        let mut buf =
            Vec::with_capacity(head.method.len() + head.target.len() + fields_len + 2 * path_query);
        buf.extend_from_slice(head.method.as_bytes());
        buf.extend_from_slice(head.target.as_bytes());
        let method_end = head.method.len();
        let target_end = buf.len();
        for (name, value) in head.fields() {
            buf.extend_from_slice(name.as_bytes());
            buf.push(b':');
            buf.extend_from_slice(value);
            buf.push(b'\n');
        }
        let fields_end = buf.len();
        // Where the path and query sit in the copied target; a part that is
        // not a slice of the target (the `/` of `http://host`, the `*` of
        // `OPTIONS *`) is copied after the fields.
        let target = head.target.as_bytes().as_ptr_range();
        let (start, end) = (target.start as usize, target.end as usize);
        let place = |part: &str, buf: &mut Vec<u8>| {
            let at = part.as_ptr() as usize;
            if at >= start && at + part.len() <= end {
                let at = at - start + method_end;
                return (at as u32, (at + part.len()) as u32);
            }
            let at = buf.len();
            buf.extend_from_slice(part.as_bytes());
            (at as u32, buf.len() as u32)
        };
        let path = place(head.path, &mut buf);
        let query = head.query.map(|q| place(q, &mut buf));
        let path_at = path.0 as usize;
        let mut kept = ArrayVec::new();
        for (i, &(start, end)) in params.iter().take(MAX_PARAMS).enumerate() {
            let raw = &head.path.as_bytes()[start..end];
            let as_sent = rest && i + 1 == params.len();
            if as_sent || !raw.contains(&b'%') {
                let at = path_at + start;
                kept.push((at as u32, (at + raw.len()) as u32));
                continue;
            }
            // UTF-8: the core refused (400) a path whose escapes decode to
            // anything else, and a segment ends at an ASCII `/`.
            let at = buf.len();
            buf.extend(percent_encoding::percent_decode(raw));
            kept.push((at as u32, buf.len() as u32));
        }
        let content_length = match head.framing {
            unflat::head::Framing::Length(n) => Some(n),
            _ => None,
        };
        Request {
            // Kept as made: shrinking it would reallocate.
            buf,
            method_end: method_end as u32,
            target_end: target_end as u32,
            fields_end: fields_end as u32,
            path,
            query,
            plain: head.query_is_plain(),
            params: kept,
            names: names.cloned(),
            version: head.version,
            head_request: head.is_head(),
            content_length,
            body,
        }
    }

    /// Bytes it holds: its copy of the head.
    pub(crate) fn held(&self) -> usize {
        self.buf.capacity()
    }

    fn text(&self, (start, end): (u32, u32)) -> &str {
        std::str::from_utf8(&self.buf[start as usize..end as usize])
            .expect("text checked when the request was made")
    }

    /// The method (`GET`; `HEAD` too when the router answers it with the
    /// route's `GET` handler: [`Request::is_head`]).
    pub fn method(&self) -> &str {
        self.text((0, self.method_end))
    }

    /// True for `HEAD`: the core sends the framing of the handler's
    /// response and none of its body.
    pub fn is_head(&self) -> bool {
        self.head_request
    }

    /// The request target as sent.
    pub fn target(&self) -> &str {
        self.text((self.method_end, self.target_end))
    }

    /// The target's path as sent (percent-encoded).
    pub fn path(&self) -> &str {
        self.text(self.path)
    }

    /// The path percent-decoded: borrowed when it has no escape.
    pub fn decoded_path(&self) -> Cow<'_, str> {
        percent_encoding::percent_decode_str(self.path())
            .decode_utf8()
            .expect("checked when the head was parsed")
    }

    /// The target's query as sent, if any.
    pub fn query(&self) -> Option<&str> {
        self.query.map(|q| self.text(q))
    }

    /// The query's `name=value` pairs in order, percent-decoded with `+`
    /// as a space; a pair that cannot be decoded is an error naming it.
    #[inline]
    pub fn query_pairs(&self) -> impl Iterator<Item = Result<Pair<'_>, QueryError>> {
        pairs(self.query(), self.plain)
    }

    /// The first query parameter named `name`, decoded; an error when a
    /// pair before it, or it, cannot be decoded.
    pub fn query_param(&self, name: &str) -> Result<Option<Cow<'_, str>>, QueryError> {
        for pair in self.query_pairs() {
            let (n, v) = pair?;
            if n == name {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// The path parameter `name` of the route (`{name}` in
    /// `/hello/{name}`), percent-decoded within its segment: a `%2F` stays
    /// in it as `/`. A `{*rest}` is the rest of the path as sent
    /// (percent-encoded): decoded whole, `%2F` and `/` could not be told
    /// apart, nor `%2E%2E` from `..`.
    pub fn param(&self, name: &str) -> Option<&str> {
        let names = self.names.as_ref()?;
        let i = names.iter().position(|n| &**n == name)?;
        self.params.get(i).map(|&p| self.text(p))
    }

    /// Every path parameter, name and decoded value, in the route's order.
    pub fn params(&self) -> impl Iterator<Item = (&str, &str)> {
        let names = self.names.as_deref().unwrap_or_default();
        names
            .iter()
            .zip(&self.params)
            .map(|(n, &p)| (&**n, self.text(p)))
    }

    /// Each field line kept, as `name:value` bytes.
    fn lines(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.buf[self.target_end as usize..self.fields_end as usize]
            .split_inclusive(|&b| b == b'\n')
            .take_while(|line| line.last() == Some(&b'\n'))
            .map(|line| {
                let colon = line.iter().position(|&b| b == b':').expect("name:value");
                (&line[..colon], &line[colon + 1..line.len() - 1])
            })
    }

    /// The header fields in order, as received: name and value.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.lines()
            .map(|(name, value)| (std::str::from_utf8(name).expect("a token"), value))
    }

    /// The value of the first field named `name` (in any case).
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.lines()
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// The value of the first field named `name` as text, when it is UTF-8.
    pub fn field_str(&self, name: &str) -> Option<&str> {
        self.field(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The values of every field named `name` (in any case), in order.
    pub fn field_values<'r>(&'r self, name: &'r str) -> impl Iterator<Item = &'r [u8]> + 'r {
        self.lines()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }

    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The body's declared length (`None` for a chunked body or none).
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The body, taken out (a second call gets an empty one).
    pub fn body(&mut self) -> RequestBody {
        std::mem::take(&mut self.body)
    }

    /// The whole body, once it has arrived (the route's limit bounds it).
    pub async fn bytes(mut self) -> bytes::Bytes {
        self.body().bytes().await
    }

    /// The whole body as `application/x-www-form-urlencoded` pairs, decoded
    /// (`+` a space): owned, in order.
    pub async fn form_pairs(self) -> Vec<(String, String)> {
        let body = self.bytes().await;
        form_urlencoded::parse(&body).into_owned().collect()
    }
}

/// Why a request body could not be read as the handler asked: a reason
/// for its 400 (or 415), naming what was wrong and where.
#[cfg(any(feature = "json", feature = "form"))]
#[derive(Debug)]
pub struct Rejection {
    /// The status to answer with.
    pub status: unflat::head::Status,
    /// What was wrong.
    pub reason: String,
}

#[cfg(any(feature = "json", feature = "form"))]
impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

#[cfg(any(feature = "json", feature = "form"))]
impl std::error::Error for Rejection {}

/// A rejection answers with its status and reason.
#[cfg(any(feature = "json", feature = "form"))]
impl From<Rejection> for super::Response {
    fn from(r: Rejection) -> super::Response {
        super::Response::text(format!("{}\n", r.reason)).status(r.status)
    }
}

#[cfg(any(feature = "json", feature = "form"))]
impl Request {
    /// 415 unless `Content-Type`'s media type is `media` (parameters, such
    /// as a charset, aside; any case).
    fn expect_type(&self, media: &str) -> Result<(), Rejection> {
        let sent = self.field_str("content-type").unwrap_or("");
        let kind = sent.split(';').next().unwrap_or("").trim();
        if kind.eq_ignore_ascii_case(media) {
            return Ok(());
        }
        Err(Rejection {
            status: unflat::head::Status::UNSUPPORTED_MEDIA_TYPE,
            reason: format!("expected Content-Type {media}, got {sent:?}"),
        })
    }

    /// The whole body, once it has arrived, read by `parse` as `media`
    /// (415 for another `Content-Type`; `parse`'s error a 400 about `what`).
    async fn parsed<T, E: std::fmt::Display>(
        self,
        media: &str,
        what: &str,
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<T, Rejection> {
        self.expect_type(media)?;
        let body = self.bytes().await;
        parse(&body).map_err(|e| Rejection {
            status: unflat::head::Status::BAD_REQUEST,
            reason: format!("{what}: {e}"),
        })
    }

    /// The whole body as JSON, into `T` (`Content-Type: application/json`,
    /// else 415; a body that is not `T` is a 400 naming the line and
    /// column). Feature `json`.
    #[cfg(feature = "json")]
    pub async fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, Rejection> {
        self.parsed("application/json", "the JSON body", |b| {
            serde_json::from_slice(b)
        })
        .await
    }

    /// The whole body as a form (`application/x-www-form-urlencoded`, else
    /// 415), into `T`; a body that is not `T` is a 400 with serde's reason.
    /// Feature `form`.
    #[cfg(feature = "form")]
    pub async fn form<T: serde::de::DeserializeOwned>(self) -> Result<T, Rejection> {
        let media = "application/x-www-form-urlencoded";
        self.parsed(media, "the form", |b| serde_urlencoded::from_bytes(b))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::mem::MaybeUninit;

    use super::*;
    use crate::h1::{parse_head, HeadLimits, Parsed};

    fn with_head<T>(input: &[u8], f: impl FnOnce(&RequestHead<'_>) -> T) -> T {
        let mut fields = [MaybeUninit::uninit(); 16];
        let limits = HeadLimits {
            head: 8192,
            request_line: 8192,
            fields: 16,
        };
        let Parsed::Complete(head) = parse_head(input, &mut fields, limits) else {
            panic!("a whole head")
        };
        f(&head)
    }

    #[test]
    fn owns_the_head() {
        let input = b"GET /hello/Ad%C3%A8le/x%2Fy?greeting=Bonjour+%C3%A0 HTTP/1.1\r\nHost: t\r\nCookie: a=1\r\ncookie: b=2\r\nX-Raw: caf\xe9\r\n\r\n";
        let names: Arc<[Box<str>]> = Arc::from(vec!["name".into(), "rest".into()]);
        let req = with_head(input, |head| {
            Request::new(
                head,
                &[(7, 17), (18, 23)],
                Some(&names),
                false,
                RequestBody::empty(),
            )
        });
        assert_eq!(req.method(), "GET");
        assert_eq!(req.path(), "/hello/Ad%C3%A8le/x%2Fy");
        assert_eq!(req.param("name"), Some("Adèle"));
        assert_eq!(req.param("rest"), Some("x/y"));
        assert_eq!(req.param("other"), None);
        assert_eq!(
            req.query_param("greeting").unwrap().as_deref(),
            Some("Bonjour à")
        );
        assert_eq!(req.field("HOST"), Some(&b"t"[..]));
        assert_eq!(
            req.field_values("cookie").collect::<Vec<_>>(),
            [b"a=1", b"b=2"]
        );
        assert_eq!(req.field("x-raw"), Some(&b"caf\xe9"[..]));
        assert_eq!(req.field_str("x-raw"), None);
        assert_eq!(req.fields().count(), 4);
        assert_eq!(req.version(), 1);
    }

    #[test]
    fn a_decoded_parameter_is_never_a_field() {
        let names: Arc<[Box<str>]> = Arc::from(vec!["name".into()]);
        let input = b"GET /h/X-Admin:yes%0A HTTP/1.1\r\nHost: t\r\n\r\n";
        let req = with_head(input, |head| {
            Request::new(head, &[(3, 17)], Some(&names), false, RequestBody::empty())
        });
        assert_eq!(req.param("name"), Some("X-Admin:yes\n"));
        assert_eq!(req.field("x-admin"), None);
        assert_eq!(req.fields().collect::<Vec<_>>(), [("Host", &b"t"[..])]);
    }

    #[test]
    fn a_path_that_is_not_in_the_target() {
        for (input, path, query) in [
            (&b"GET http://t HTTP/1.1\r\nHost: t\r\n\r\n"[..], "/", None),
            (
                b"GET http://t?q=1 HTTP/1.1\r\nHost: t\r\n\r\n",
                "/",
                Some("q=1"),
            ),
            (b"OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", "*", None),
            (
                b"GET http://t/a/b?c HTTP/1.1\r\nHost: t\r\n\r\n",
                "/a/b",
                Some("c"),
            ),
        ] {
            let req = with_head(input, |head| {
                Request::new(head, &[], None, false, RequestBody::empty())
            });
            assert_eq!((req.path(), req.query()), (path, query));
            assert_eq!(req.field("host"), Some(&b"t"[..]));
        }
    }

    #[test]
    fn a_rest_is_kept_as_sent() {
        let names: Arc<[Box<str>]> = Arc::from(vec!["x".into(), "rest".into()]);
        let req = with_head(
            b"GET /p/a%2Fb/c%2F%2E%2E/d HTTP/1.1\r\nHost: t\r\n\r\n",
            |head| {
                Request::new(
                    head,
                    &[(3, 8), (9, 21)],
                    Some(&names),
                    true,
                    RequestBody::empty(),
                )
            },
        );
        assert_eq!(req.param("x"), Some("a/b"));
        assert_eq!(req.param("rest"), Some("c%2F%2E%2E/d"));
    }
}
