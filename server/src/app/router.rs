//! Routes to async handlers: a path pattern per route (`/hello/{name}`,
//! `/files/{*rest}`), a handler per method, a body limit per route, and a
//! fallback. The router is a [`Service`]: its reply to each request is an
//! [`Exchange`], which runs the handler's future on the connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use arrayvec::ArrayVec;
use bytes::Bytes;
use unflat::head::{Framing, Status};

use super::body::{RequestBody, Slot};
use super::request::{Request, MAX_PARAMS};
use super::response::{FieldValue, Response};
use crate::h1::RequestHead;
use crate::memory::Full;
use crate::observe::Standard;
use crate::response::{Chunk, Fields};
use crate::service::{guarded, log, Job, Reply, Service, Work};

/// What an async handler is: `async fn(Request) -> R` (or a closure
/// returning a future), where `R` is a [`Response`] or turns into one
/// (a [`Status`], `&'static str`, `String`, `(Status, text)`).
pub trait Endpoint: Send + Sync + 'static {
    /// The handler's future for `request`, boxed once with room for its
    /// answer.
    fn call(&self, request: Request) -> Running;
}

/// A handler's future and, once it is done, its answer: one allocation,
/// which the core keeps until the response is written.
pub struct Running(Pin<Box<dyn Task>>);

/// A handler's future with its answer beside it; the job that awaits it
/// is the same box.
trait Task: Work<Exchange> + Send {
    /// Polls the handler; `Ready` once its answer is kept.
    fn poll_task(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()>;

    /// The answer's status, once the handler is done.
    fn status(&self) -> Option<Status>;

    /// The answer, once the handler is done.
    fn answer(self: Pin<&mut Self>) -> Option<&mut Response>;
}

pin_project_lite::pin_project! {
    struct Handled<F> {
        #[pin]
        future: F,
        answer: Option<Response>,
    }
}

impl<F: Future<Output: Into<Response>> + Send + 'static> Task for Handled<F> {
    fn poll_task(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.answer.is_none() {
            *this.answer = Some(std::task::ready!(this.future.poll(cx)).into());
        }
        Poll::Ready(())
    }

    fn status(&self) -> Option<Status> {
        self.answer.as_ref().map(Response::status_code)
    }

    fn answer(self: Pin<&mut Self>) -> Option<&mut Response> {
        self.project().answer.as_mut()
    }
}

/// The handler's box is the job the connection awaits, and the answer it
/// hands back: no allocation of its own.
impl<F: Future<Output: Into<Response>> + Send + 'static> Work<Exchange> for Handled<F> {
    fn poll_work(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_task(cx)
    }

    fn finish(self: Pin<Box<Self>>) -> Exchange {
        // Its body was read whole before the job began: no limit is asked.
        Exchange(
            Stage::Done {
                running: Running(self),
                slot: None,
            },
            None,
        )
    }
}

impl<F, Fut, R> Endpoint for F
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: Into<Response>,
{
    fn call(&self, request: Request) -> Running {
        Running(Box::pin(Handled {
            future: self(request),
            answer: None,
        }))
    }
}

/// The handlers of one path, by method, and the longest body they take.
pub struct MethodRouter {
    handlers: Vec<(&'static str, Box<dyn Endpoint>)>,
    limit: Option<u64>,
    /// The `Allow` of a 405, made when the route is added.
    allow: Bytes,
}

macro_rules! methods {
    ($($name:ident $method:literal),*) => {
        $(
            #[doc = concat!("A route whose `", $method, "` requests `handler` answers.")]
            pub fn $name(handler: impl Endpoint) -> MethodRouter {
                MethodRouter::new().on($method, handler)
            }
        )*

        impl MethodRouter {
            $(
                #[doc = concat!("`handler` answers `", $method, "` requests too.")]
                pub fn $name(self, handler: impl Endpoint) -> MethodRouter {
                    self.on($method, handler)
                }
            )*
        }
    };
}
methods!(get "GET", post "POST", put "PUT", delete "DELETE", patch "PATCH", options "OPTIONS");

impl MethodRouter {
    fn new() -> MethodRouter {
        MethodRouter {
            handlers: Vec::new(),
            limit: None,
            allow: Bytes::new(),
        }
    }

    /// `handler` answers requests of `method` (a token, as sent: methods
    /// are case-sensitive). A `GET` handler answers `HEAD` too, unless one
    /// is given for `HEAD`: the core sends its response's head alone.
    ///
    /// # Panics
    /// On a method that is not a token, or given twice.
    pub fn on(mut self, method: &'static str, handler: impl Endpoint) -> MethodRouter {
        assert!(
            !method.is_empty() && method.bytes().all(unflat::head::is_tchar),
            "{method:?} is not a method (a token)"
        );
        assert!(
            self.handlers.iter().all(|(m, _)| *m != method),
            "{method} given twice"
        );
        self.handlers.push((method, Box::new(handler)));
        let mut allow: Vec<&str> = self.handlers.iter().map(|(m, _)| *m).collect();
        if allow.contains(&"GET") && !allow.contains(&"HEAD") {
            allow.push("HEAD");
        }
        self.allow = allow.join(", ").into();
        self
    }

    /// The longest request body these handlers take, within `--max-body`:
    /// a longer one is answered 413 by the core and the connection closes.
    /// A `Content-Length` past it is refused before any of the body is read,
    /// and no handler is begun; a chunked body, as it passes the limit —
    /// its handler, begun, is dropped unanswered.
    pub fn limit(mut self, bytes: u64) -> MethodRouter {
        self.limit = Some(bytes);
        self
    }

    fn find(&self, method: &str) -> Option<&dyn Endpoint> {
        let found = |m: &str| self.handlers.iter().find(|(h, _)| *h == m);
        found(method)
            .or_else(|| (method == "HEAD").then(|| found("GET")).flatten())
            .map(|(_, h)| &**h)
    }
}

/// One segment of a route's pattern.
#[derive(Debug)]
enum Segment {
    /// Matches itself, percent-decoded.
    Literal(Box<str>),
    /// `{name}`: any one non-empty segment.
    Param,
    /// `{*name}`: the rest of the path, slashes included (last only).
    Rest,
}

struct Route {
    pattern: Box<str>,
    segments: Box<[Segment]>,
    names: Option<Arc<[Box<str>]>>,
    methods: MethodRouter,
}

/// Paths to handlers: the first route whose pattern matches the request's
/// path answers it, by method (405 with `Allow` when it has no handler for
/// the method), else the fallback (404 by default).
///
/// ```
/// use unflat_server::app::{get, post, Request, Response, Router, Status};
///
/// async fn hello(req: Request) -> Response {
///     let name = req.param("name").unwrap_or("you");
///     Response::text(format!("Hello, {name}!\n"))
/// }
///
/// let app = Router::new()
///     .route("/hello/{name}", get(hello))
///     .route("/upload", post(|req: Request| async move {
///         let body = req.bytes().await;
///         Response::text(format!("{} bytes\n", body.len()))
///     }).limit(4096))
///     .fallback(|_: Request| async { (Status::NOT_FOUND, "no such page\n") });
/// # drop(app);
/// ```
pub struct Router {
    routes: Vec<Route>,
    fallback: Option<Box<dyn Endpoint>>,
}

impl Router {
    /// No routes: everything is the fallback's.
    pub fn new() -> Router {
        Router {
            routes: Vec::new(),
            fallback: None,
        }
    }

    /// Adds a route: `pattern` is a path of literal segments,
    /// `{name}` segments (one segment each, percent-decoded within it: a
    /// `%2F` stays inside as `/`) and a last `{*name}` (the rest of the
    /// path); [`Request::param`] reads them by name.
    ///
    /// A literal segment is written decoded (`/café`, not `/caf%C3%A9`) and
    /// matches the path's segment once decoded. The first route whose
    /// pattern matches answers: a later one with the same path is never
    /// asked, even for a method the first has not.
    ///
    /// # Panics
    /// On a pattern that does not begin with `/`, a `%` in a literal
    /// segment, a parameter without a name, a `{*name}` not last, a name
    /// given twice, more than eight parameters, or a pattern added twice:
    /// mistakes in the program, found as the router is made.
    pub fn route(mut self, pattern: &str, methods: MethodRouter) -> Router {
        assert!(
            pattern.starts_with('/'),
            "{pattern:?} does not begin with /"
        );
        assert!(
            self.routes.iter().all(|r| &*r.pattern != pattern),
            "{pattern:?} added twice"
        );
        let parts: Vec<&str> = pattern[1..].split('/').collect();
        let mut names: Vec<Box<str>> = Vec::new();
        let mut segments = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let segment = match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(name) if name.trim_start_matches('*').is_empty() => {
                    panic!("{pattern:?}: {part} has no name")
                }
                Some(rest) if rest.starts_with('*') => {
                    assert!(i + 1 == parts.len(), "{pattern:?}: {part} is not last");
                    names.push(rest[1..].into());
                    Segment::Rest
                }
                Some(name) => {
                    names.push(name.into());
                    Segment::Param
                }
                // Compared with the path's segment decoded: written
                // decoded too, or it could never match.
                None if part.contains('%') => {
                    panic!(
                        "{pattern:?}: write {part:?} decoded (a route's text is matched decoded)"
                    )
                }
                None => Segment::Literal((*part).into()),
            };
            segments.push(segment);
        }
        assert!(
            names.len() <= MAX_PARAMS,
            "{pattern:?}: more than eight parameters"
        );
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{pattern:?}: {n} given twice");
        }
        self.routes.push(Route {
            pattern: pattern.into(),
            segments: segments.into(),
            names: (!names.is_empty()).then(|| names.into()),
            methods,
        });
        self
    }

    /// What answers a request no route matches (404 by default).
    pub fn fallback(mut self, handler: impl Endpoint) -> Router {
        self.fallback = Some(Box::new(handler));
        self
    }

    /// The reply to the request whose head is `head`.
    fn answer(&self, head: &RequestHead<'_>) -> Exchange {
        let mut params = ArrayVec::<(usize, usize), MAX_PARAMS>::new();
        for route in &self.routes {
            params.clear();
            if !matches(&route.segments, head.path, &mut params) {
                continue;
            }
            let Some(handler) = route.methods.find(head.method) else {
                let allow = FieldValue::bytes(route.methods.allow.clone());
                let refused = Response::text("method not allowed\n")
                    .status(Status::METHOD_NOT_ALLOWED)
                    .header("Allow", allow);
                return Exchange::answered(refused);
            };
            let rest = matches!(route.segments.last(), Some(Segment::Rest));
            let params = (&params[..], route.names.as_ref(), rest);
            return Exchange::start(handler, head, params, route.methods.limit);
        }
        match &self.fallback {
            Some(handler) => Exchange::start(&**handler, head, (&[], None, false), None),
            None => Exchange::answered(Response::text("not found\n").status(Status::NOT_FOUND)),
        }
    }

    /// The router as a server serves it: every response counted by the
    /// core's `observer` and written to its access log.
    pub fn observed(self, observer: Standard) -> Routed {
        Routed {
            router: self,
            observer,
        }
    }
}

impl Default for Router {
    fn default() -> Router {
        Router::new()
    }
}

/// Whether `path` (as sent) matches `segments`; the parameters' ranges
/// of it go into `params`. Bytes compared as they come, no segment split
/// out first: most routes are told apart by their first bytes.
fn matches(
    segments: &[Segment],
    path: &str,
    params: &mut ArrayVec<(usize, usize), MAX_PARAMS>,
) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    let mut at = 1;
    for (i, segment) in segments.iter().enumerate() {
        if i > 0 {
            // The slash that ends the segment before.
            if bytes.get(at) != Some(&b'/') {
                return false;
            }
            at += 1;
        }
        if let Segment::Rest = segment {
            params.push((at, bytes.len()));
            return true;
        }
        let end = bytes[at..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(bytes.len(), |n| at + n);
        let part = &path[at..end];
        match segment {
            Segment::Literal(lit) => {
                let same = if part.as_bytes().contains(&b'%') {
                    percent_encoding::percent_decode_str(part).eq(lit.bytes())
                } else {
                    part == &**lit
                };
                if !same {
                    return false;
                }
            }
            Segment::Param if part.is_empty() => return false,
            Segment::Param => params.push((at, end)),
            Segment::Rest => unreachable!("handled above"),
        }
        at = end;
    }
    at == bytes.len()
}

/// A [`Router`] with the core's observer: the [`Service`] a server runs.
pub struct Routed {
    router: Router,
    observer: Standard,
}

impl Service for Routed {
    type Reply = Exchange;
    type Conn = ();
    type Observer = Standard;

    fn observer(&self) -> Standard {
        self.observer.clone()
    }

    #[inline]
    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> Exchange {
        self.router.answer(head)
    }
}

/// A route's parameters in a request's path: their ranges, their names,
/// and whether the last is a `{*rest}`.
type Params<'a> = (&'a [(usize, usize)], Option<&'a Arc<[Box<str>]>>, bool);

/// One request's way through an async handler, as the core drives it: the
/// handler's future, polled on the connection (first as the request is
/// routed, then as its body arrives, then as a [`Job`]), and the
/// [`Response`] it made, kept in the same box.
pub struct Exchange(Stage, Option<u64>);

enum Stage {
    /// The handler runs; its body, if the request has one, comes through
    /// the slot, bounded by the route's limit.
    Running {
        running: Running,
        slot: Option<Slot>,
        /// Bytes of the request's head, copied, which the handler holds.
        head: usize,
    },
    /// Refused from its `Content-Length`, past the route's limit: the
    /// core answers 413 before reading the body, and no handler is begun.
    TooLarge,
    /// The handler's job runs (the handler is the job's now).
    Working,
    /// The handler is done: its answer is in its box. The body's way in
    /// stays while something the handler handed its body to reads it.
    Done {
        running: Running,
        slot: Option<Slot>,
    },
    /// Answered by the router itself: 404 and 405, 500 for a panic.
    Answered(Box<Response>),
}

impl Exchange {
    fn answered(response: Response) -> Exchange {
        Exchange(Stage::Answered(Box::new(response)), None)
    }

    /// Starts `handler` on the request: polled once now, so that a handler
    /// that awaits nothing is done before its request's turn ends.
    fn start(
        handler: &dyn Endpoint,
        head: &RequestHead<'_>,
        (params, names, rest): Params<'_>,
        limit: Option<u64>,
    ) -> Exchange {
        if let (Framing::Length(n), Some(limit)) = (head.framing, limit) {
            if n > limit {
                return Exchange(Stage::TooLarge, Some(limit));
            }
        }
        let has_body = match head.framing {
            Framing::Length(n) => n > 0,
            Framing::Chunked => true,
            Framing::None => false,
        };
        let (slot, body) = if has_body {
            let (slot, body) = Slot::new();
            (Some(slot), body)
        } else {
            (None, RequestBody::empty())
        };
        let request = Request::new(head, params, names, rest, body);
        let head = request.held();
        let mut exchange = match guarded(|| handler.call(request)) {
            Ok(running) => Exchange(
                Stage::Running {
                    running,
                    slot,
                    head,
                },
                limit,
            ),
            Err(payload) => return Exchange(failed(&*payload).0, limit),
        };
        exchange.poll_handler(&mut Context::from_waker(Waker::noop()));
        exchange
    }

    /// Polls the handler, if it runs; a panic is logged and answered 500.
    fn poll_handler(&mut self, cx: &mut Context<'_>) {
        let Stage::Running { running, .. } = &mut self.0 else {
            return;
        };
        match guarded(|| running.0.as_mut().poll_task(cx)) {
            Ok(Poll::Pending) => {}
            Ok(Poll::Ready(())) => {
                let Stage::Running { running, slot, .. } =
                    std::mem::replace(&mut self.0, Stage::Working)
                else {
                    unreachable!("matched above")
                };
                let slot = slot.filter(Slot::is_read);
                if let Some(slot) = &slot {
                    slot.outlive_handler();
                }
                self.0 = Stage::Done { running, slot };
            }
            Err(payload) => self.0 = failed(&*payload).0,
        }
    }

    /// The body's way in, while the handler runs.
    fn slot(&self) -> Option<&Slot> {
        match &self.0 {
            Stage::Running { slot, .. } | Stage::Done { slot, .. } => slot.as_ref(),
            _ => None,
        }
    }

    /// The answer, once there is one.
    fn response(&mut self) -> Option<&mut Response> {
        match &mut self.0 {
            Stage::Done { running, .. } => running.0.as_mut().answer(),
            Stage::Answered(response) => Some(response),
            _ => None,
        }
    }
}

/// The answer to a handler that panicked (logged here, once).
fn failed(payload: &(dyn std::any::Any + Send)) -> Exchange {
    log(payload, "a handler", None);
    Exchange::answered(
        Response::text("internal server error\n").status(Status::INTERNAL_SERVER_ERROR),
    )
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Stage::Running { .. } => f.write_str("Running"),
            Stage::TooLarge => write!(f, "TooLarge({:?})", self.1),
            Stage::Working => f.write_str("Working"),
            Stage::Done { .. } => f.write_str("Done"),
            Stage::Answered(r) => r.fmt(f),
        }
    }
}

impl Reply for Exchange {
    fn streams_body(&self) -> bool {
        true
    }

    fn body_chunk(&mut self, chunk: &[u8]) {
        if let Some(slot) = self.slot() {
            slot.push(chunk);
        }
    }

    fn held(&self) -> usize {
        let head = match &self.0 {
            Stage::Running { head, .. } => *head,
            _ => 0,
        };
        head + self.slot().map_or(0, Slot::held)
    }

    /// The route's, whatever the handler's stage: one that answered at
    /// once still has its body read, and no more of it than the route takes.
    fn body_limit(&self) -> Option<u64> {
        self.1
    }

    /// From its head alone: past the route's limit, or answered with a 4xx
    /// or 5xx before the body was asked for (a client waiting for `100
    /// Continue` is answered at once, and sends no body).
    fn refuses(&self) -> bool {
        let status = match &self.0 {
            Stage::TooLarge => return true,
            Stage::Answered(r) => Some(r.status_code()),
            Stage::Done { running, .. } => running.0.status(),
            _ => None,
        };
        status.is_some_and(|s| s.code() >= 400)
    }

    fn poll_body_room(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.poll_handler(cx);
        match self.slot() {
            Some(slot) if slot.is_full() => Poll::Pending,
            _ => Poll::Ready(()),
        }
    }

    fn prepare(&mut self, _: &[u8]) -> Option<Job<Exchange>> {
        if let Some(slot) = self.slot() {
            slot.end();
            self.poll_handler(&mut Context::from_waker(Waker::noop()));
        }
        if !matches!(self.0, Stage::Running { .. }) {
            return None;
        }
        let Stage::Running { running, .. } = std::mem::replace(&mut self.0, Stage::Working) else {
            unreachable!("matched above")
        };
        Some(Job::of(running.0))
    }

    fn respond<'a>(
        &'a mut self,
        _: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<crate::response::Response<'a>, Full> {
        if let Stage::TooLarge = self.0 {
            // Not reached: the core refuses such a body from its length.
            *self = Exchange::answered(
                Response::text("request body too large\n").status(Status::PAYLOAD_TOO_LARGE),
            );
        }
        match self.response() {
            Some(r) => Ok(r.sent(fields)),
            None => unreachable!("a handler's job ends with its answer"),
        }
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        match self.response() {
            Some(r) => r.poll_chunk(cx).map(Ok),
            None => Poll::Ready(Ok(None)),
        }
    }
}
