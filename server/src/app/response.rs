//! The response an async handler returns, owned: a status, its own field
//! lines (values as ropes, written into the head in the one walk that
//! checks them), and a body in its own form — bytes shared, a rope, text
//! encoded as it is sent, or a stream of chunks.

use std::borrow::Cow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrayvec::ArrayVec;
use bytes::Bytes;
use futures_core::Stream;
use smallvec::SmallVec;
use unflat::head::Status;
use unflat::queue::{Policy, SharedRope};
use unflat::{Encoding, Rope};

use crate::response::{Body as Sent, Chunk, Digits, Fields, Part, Value};

/// A response built by a handler:
/// `Response::text("hi").header("Cache-Control", "no-store")`.
///
/// **Status**: 200 unless [`Response::status`] says otherwise, with any of
/// [`Status`]'s constants (`Status::SEE_OTHER`, `Status::NOT_FOUND`, …, or
/// [`Status::from_code`]). A final status is 200–599: anything else is
/// answered 500 by the core, and the cause logged.
///
/// **Fields**: any number ([`MAX_FIELDS`](crate::response::MAX_FIELDS) at
/// most), names repeated as given (`Set-Cookie`); a value is text (written
/// as Latin-1: a character above U+00FF is refused), bytes, an integer, a
/// tuple of up to four of these, or any [`Rope`]. The core writes
/// `Content-Length` or `Transfer-Encoding`, `Connection`, `Keep-Alive`,
/// `Date` and `X-Content-Type-Options` itself: a response that names one,
/// or whose value has a CR, LF or other control character, is answered 500
/// and the cause logged — nothing of it is sent.
///
/// **Framing is the core's**: a body of known length gets
/// `Content-Length`, a stream `Transfer-Encoding: chunked` (to HTTP/1.0,
/// the close ends it); the answer to `HEAD` has the same head and no body;
/// 204 and 304 are sent without body or `Content-Length` (a 304 built with
/// the resource's `ETag` and no body is all it takes).
pub struct Response {
    status: Status,
    /// Inline up to three: a `Content-Type` and two more cost no allocation.
    fields: SmallVec<[(Cow<'static, str>, FieldValue); 3]>,
    body: Payload,
}

/// The body of a [`Response`].
enum Payload {
    Empty,
    Static(&'static [u8]),
    /// Short enough to be copied into the write buffer: kept as it was
    /// given, with no allocation to share it.
    Owned(Vec<u8>),
    Shared(Bytes),
    Rope(ropey::Rope),
    /// Text of any kind (Latin-1, UTF-16 pieces), encoded to UTF-8 as it
    /// is sent: this many bytes.
    Text(SharedRope, usize),
    Stream(Pin<Box<dyn Stream<Item = std::io::Result<Chunk>> + Send>>),
}

/// The value of one field line: up to four parts, one after the other.
#[derive(Clone)]
pub struct FieldValue(ArrayVec<Owned, 4>);

/// One part of a [`FieldValue`]: small, so that a response with a few
/// fields stays small to move (bytes are a rope of their own).
#[derive(Clone)]
enum Owned {
    Text(Cow<'static, str>),
    /// Integers as they are, their digits made as the value is written.
    Unsigned(u64),
    Signed(i64),
    Rope(Arc<dyn Rope + Send + Sync>),
}

/// Bytes as a field value's part: one-byte pieces, sent as they are.
struct BytesPart(Bytes);

impl Rope for BytesPart {
    fn for_each_piece<'s>(
        &'s self,
        visit: &mut dyn FnMut(unflat::Piece<'s>) -> std::ops::ControlFlow<()>,
    ) -> std::ops::ControlFlow<()> {
        visit(unflat::Piece::OneByte(&self.0))
    }
}

impl FieldValue {
    /// Any rope of the application's, shared.
    pub fn rope(rope: impl Rope + Send + Sync + 'static) -> FieldValue {
        FieldValue(std::iter::once(Owned::Rope(Arc::new(rope))).collect())
    }

    /// Bytes as they are (obs-text allowed).
    pub fn bytes(bytes: impl Into<Bytes>) -> FieldValue {
        FieldValue::rope(BytesPart(bytes.into()))
    }

    fn value(&self) -> Value<'_> {
        Value::of_parts(self.0.iter().map(|p| match p {
            Owned::Text(t) => Part::Text(t),
            Owned::Unsigned(n) => Part::Int(Digits::new(*n)),
            Owned::Signed(n) => Part::Int(Digits::new(*n)),
            Owned::Rope(r) => Part::Rope(&**r),
        }))
    }
}

/// One part of a field's value: text, bytes, an integer.
pub trait IntoPart {
    /// The part.
    #[doc(hidden)]
    fn into_part(self) -> FieldValue;
}

impl IntoPart for &'static str {
    fn into_part(self) -> FieldValue {
        FieldValue(std::iter::once(Owned::Text(Cow::Borrowed(self))).collect())
    }
}

impl IntoPart for String {
    fn into_part(self) -> FieldValue {
        FieldValue(std::iter::once(Owned::Text(Cow::Owned(self))).collect())
    }
}

impl IntoPart for Bytes {
    fn into_part(self) -> FieldValue {
        FieldValue::bytes(self)
    }
}

macro_rules! int_values {
    ($($variant:ident $as:ty: $($t:ty)*;)*) => {$($(
        impl IntoPart for $t {
            fn into_part(self) -> FieldValue {
                FieldValue(std::iter::once(Owned::$variant(self as $as)).collect())
            }
        }
    )*)*};
}
int_values! {
    Unsigned u64: u8 u16 u32 u64 usize;
    Signed i64: i8 i16 i32 i64 isize;
}

impl<P: IntoPart> From<P> for FieldValue {
    fn from(part: P) -> FieldValue {
        part.into_part()
    }
}

macro_rules! tuple_values {
    ($($p:ident)+) => {
        impl<$($p: IntoPart),+> From<($($p,)+)> for FieldValue {
            #[allow(non_snake_case)]
            fn from(($($p,)+): ($($p,)+)) -> FieldValue {
                FieldValue([$($p.into_part().0),+].into_iter().flatten().collect())
            }
        }
    };
}
tuple_values!(A B);
tuple_values!(A B C);
tuple_values!(A B C D);

impl Response {
    /// An empty 200.
    pub fn new() -> Response {
        Response {
            status: Status::OK,
            fields: SmallVec::new(),
            body: Payload::Empty,
        }
    }

    /// A response of `status` with no body.
    pub fn with_status(status: Status) -> Response {
        Response::new().status(status)
    }

    /// 200 with `text`, `Content-Type: text/plain; charset=utf-8`.
    pub fn text(text: impl Into<Text>) -> Response {
        Response::new()
            .header("Content-Type", "text/plain; charset=utf-8")
            .body(Body(text.into().0))
    }

    /// 200 with `html`, `Content-Type: text/html; charset=utf-8`.
    pub fn html(html: impl Into<Text>) -> Response {
        Response::new()
            .header("Content-Type", "text/html; charset=utf-8")
            .body(Body(html.into().0))
    }

    /// 200 with `body` and no `Content-Type` of its own.
    pub fn bytes(body: impl Into<Body>) -> Response {
        Response::new().body(body)
    }

    /// 200 with a body of chunks as `stream` yields them, sent as each
    /// comes (chunked to HTTP/1.1): the core asks for the next while it has
    /// less than 64 KiB queued, so a slow reader holds that and one chunk.
    pub fn stream<T: Into<Chunk>>(stream: impl Stream<Item = T> + Send + 'static) -> Response {
        Response::new().body(Body::stream(stream))
    }

    /// 200 with `value` as JSON, `Content-Type: application/json`; a value
    /// serde cannot write (a map with keys that are not strings) is a 500,
    /// logged. Feature `json`.
    #[cfg(feature = "json")]
    pub fn json(value: &impl serde::Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::new()
                .header("Content-Type", "application/json")
                .body(body),
            Err(e) => {
                tracing::error!(error = %e, "a JSON response could not be written");
                Response::with_status(Status::INTERNAL_SERVER_ERROR)
            }
        }
    }

    /// A redirect: `status` (303, 307, …) with `Location: location`.
    pub fn redirect(status: Status, location: impl Into<FieldValue>) -> Response {
        Response::with_status(status).header("Location", location)
    }

    /// Its status.
    pub fn status(mut self, status: Status) -> Response {
        self.status = status;
        self
    }

    /// Adds `name: value` after the fields added before (a name may
    /// repeat). `value`: text, bytes, an integer, a tuple of up to four of
    /// them (`("sid=", id, "; Path=/")`), or [`FieldValue::rope`].
    pub fn header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<FieldValue>,
    ) -> Response {
        self.fields.push((name.into(), value.into()));
        self
    }

    /// Its body.
    pub fn body(mut self, body: impl Into<Body>) -> Response {
        self.body = body.into().0;
        self
    }

    /// The status set.
    pub fn status_code(&self) -> Status {
        self.status
    }

    /// The fields added, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &FieldValue)> {
        self.fields.iter().map(|(n, v)| (&**n, v))
    }

    /// The response as the core writes it, its fields added to `fields`.
    pub(crate) fn sent<'a>(&'a self, fields: &mut Fields<'a>) -> crate::response::Response<'a> {
        for (name, value) in &self.fields {
            fields.add(name, value.value());
        }
        let body = match &self.body {
            Payload::Empty => Sent::Empty,
            Payload::Static(b) => Sent::Bytes(b),
            Payload::Owned(b) => Sent::Bytes(b),
            Payload::Shared(b) => Sent::SharedBytes(b),
            Payload::Rope(r) => Sent::Rope(r, r.len_bytes()),
            Payload::Text(t, n) => Sent::Transcoded(t, *n),
            Payload::Stream(_) => Sent::Stream,
        };
        crate::response::Response::new(self.status, body)
    }

    /// The next chunk of a stream body (none for any other).
    pub(crate) fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        let Payload::Stream(stream) = &mut self.body else {
            return Poll::Ready(None);
        };
        match std::task::ready!(stream.as_mut().poll_next(cx)) {
            Some(Ok(chunk)) => Poll::Ready(Some(chunk)),
            // As a panic: logged once; a 500 before the head is sent, the
            // body cut short after.
            Some(Err(e)) => panic!("a response body's stream failed: {e}"),
            None => Poll::Ready(None),
        }
    }
}

impl Default for Response {
    fn default() -> Response {
        Response::new()
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status.code())
            .field("fields", &self.fields.len())
            .finish()
    }
}

/// A handler's answer as a [`Response`]: a response, a status alone, text
/// (`(Status, &str)` for a status with a text body).
impl From<Status> for Response {
    fn from(status: Status) -> Response {
        Response::with_status(status)
    }
}

impl From<&'static str> for Response {
    fn from(text: &'static str) -> Response {
        Response::text(text)
    }
}

impl From<String> for Response {
    fn from(text: String) -> Response {
        Response::text(text)
    }
}

impl<T: Into<Text>> From<(Status, T)> for Response {
    fn from((status, text): (Status, T)) -> Response {
        Response::text(text).status(status)
    }
}

/// Text for a body: a `&'static str` (sent from where it is), a `String`,
/// shared [`Bytes`] of UTF-8, or any [`Body`] (a rope encoded to UTF-8 as
/// it is sent: [`Body::rope`]; a stream).
pub struct Text(Payload);

impl From<&'static str> for Text {
    fn from(s: &'static str) -> Text {
        Text(Payload::Static(s.as_bytes()))
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text(Payload::owned(s.into_bytes()))
    }
}

impl Payload {
    /// Owned bytes: copied when short (as the write queue copies a short
    /// buffer by default), else shared — `Bytes` takes them without a copy
    /// (and allocates its count of owners, worth it only for a long body).
    fn owned(bytes: Vec<u8>) -> Payload {
        if bytes.len() < Policy::DEFAULT.copy_below {
            Payload::Owned(bytes)
        } else {
            Payload::Shared(bytes.into())
        }
    }
}

impl From<Bytes> for Text {
    fn from(b: Bytes) -> Text {
        Text(Payload::Shared(b))
    }
}

impl From<Body> for Text {
    fn from(b: Body) -> Text {
        Text(b.0)
    }
}

/// The body of a [`Response`]: bytes (`&'static`, `Vec<u8>`, `String`,
/// shared [`Bytes`], all sent from where they are when large), a ropey
/// rope (its chunks sent as they lie), text of any kind as a [`Rope`]
/// ([`Body::rope`]), a stream of chunks ([`Body::stream`]), or a file's
/// contents ([`Body::file`]).
pub struct Body(Payload);

impl Body {
    /// No body.
    pub fn empty() -> Body {
        Body(Payload::Empty)
    }

    /// Text of any kind (Latin-1, UTF-8, UTF-16 pieces), encoded to UTF-8
    /// straight into the write buffer as it is sent.
    pub fn rope(rope: impl Rope + Send + Sync + 'static) -> Body {
        let len = unflat::size(&rope, Encoding::Utf8);
        Body(Payload::Text(Arc::new(rope), len))
    }

    /// Chunks as `stream` yields them.
    pub fn stream<T: Into<Chunk>>(stream: impl Stream<Item = T> + Send + 'static) -> Body {
        Body::try_stream(Infallible { stream })
    }

    /// Chunks as `stream` yields them; an error ends the response as a
    /// panic does (logged, a 500 before anything is sent, the body cut
    /// short after: a client never takes it for whole).
    pub fn try_stream<T: Into<Chunk>>(
        stream: impl Stream<Item = std::io::Result<T>> + Send + 'static,
    ) -> Body {
        Body(Payload::Stream(Box::pin(Chunks { stream })))
    }

    /// The contents of the file at `path`, read 64 KiB at a time as the
    /// client takes them (a stream: only what the connection queues is
    /// held). An error opening it is returned; one reading it cuts the
    /// body short.
    pub async fn file(path: impl AsRef<std::path::Path>) -> std::io::Result<Body> {
        let file = tokio::fs::File::open(path).await?;
        Ok(Body::try_stream(FileChunks {
            file,
            buf: bytes::BytesMut::new(),
        }))
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Body {
        Body(Payload::Static(s.as_bytes()))
    }
}

impl From<&'static [u8]> for Body {
    fn from(b: &'static [u8]) -> Body {
        Body(Payload::Static(b))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Body {
        Body(Payload::owned(s.into_bytes()))
    }
}

impl From<Vec<u8>> for Body {
    fn from(b: Vec<u8>) -> Body {
        Body(Payload::owned(b))
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Body {
        Body(Payload::Shared(b))
    }
}

impl From<ropey::Rope> for Body {
    fn from(r: ropey::Rope) -> Body {
        Body(Payload::Rope(r))
    }
}

pin_project_lite::pin_project! {
    /// A stream of chunks that cannot fail.
    struct Infallible<S> {
        #[pin]
        stream: S,
    }
}

impl<S: Stream> Stream for Infallible<S> {
    type Item = std::io::Result<S::Item>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.project().stream.poll_next(cx).map(|c| c.map(Ok))
    }
}

pin_project_lite::pin_project! {
    /// A stream's items as chunks.
    struct Chunks<S> {
        #[pin]
        stream: S,
    }
}

impl<S: Stream<Item = std::io::Result<T>>, T: Into<Chunk>> Stream for Chunks<S> {
    type Item = std::io::Result<Chunk>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.project()
            .stream
            .poll_next(cx)
            .map(|c| c.map(|r| r.map(Into::into)))
    }
}

/// A file read a piece at a time.
struct FileChunks {
    file: tokio::fs::File,
    buf: bytes::BytesMut,
}

/// Bytes one read of a file takes.
const FILE_READ: usize = 64 * 1024;

impl Stream for FileChunks {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        use tokio::io::AsyncRead;
        let this = &mut *self;
        this.buf.resize(FILE_READ, 0);
        let mut read = tokio::io::ReadBuf::new(&mut this.buf[..]);
        std::task::ready!(Pin::new(&mut this.file).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        if n == 0 {
            return Poll::Ready(None);
        }
        this.buf.truncate(n);
        Poll::Ready(Some(Ok(this.buf.split().freeze())))
    }
}
