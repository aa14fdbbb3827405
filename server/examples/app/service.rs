//! The application: its routes, its replies, and how each is answered,
//! observed by the core's counters (its `/metrics`, by route) and access
//! log (`--access-log`). No socket and no process here — `main.rs` serves
//! it; the tests serve it too (server/tests/suite/example_app.rs).

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use unflat_server::app::{
    Body, Chunk, Exposition, Fields, Full, Handler, Job, Label, Labelled, Making, Metrics,
    Observed, Reply, RequestHead, Response, Rope, Status,
};

/// How long a "database" call takes (`/login`, `/slow`).
pub const DATABASE: Duration = Duration::from_millis(50);

/// Chunks `/events` sends, and the wait before each after the first.
pub const EVENTS: u64 = 5;
/// See [`EVENTS`].
pub const EVENT_EVERY: Duration = Duration::from_millis(20);

/// The files `/download/{name}` serves: name, content, and the name
/// percent-encoded for `Content-Disposition` (a rope, made once).
static FILES: [(&str, &str, Encoded); 2] = [
    (
        "notes.txt",
        "Rope-built heads, bodies at their own memory.\n",
        Encoded("notes.txt"),
    ),
    (
        "café menu.txt",
        "Croissant 2 €\nCafé 1,50 €\n",
        Encoded("café menu.txt"),
    ),
];

/// The application: what it shares among requests.
#[derive(Debug)]
pub struct App {
    /// Session numbers given out so far.
    sessions: AtomicU64,
    /// What the core counts of its responses, for `/metrics`.
    metrics: Metrics<Route>,
}

/// The application as a server makes it, observed by the core: its
/// responses counted by [`Route`], and logged when `--access-log` asks.
pub fn app(making: Making<'_>) -> Observed<App, Route> {
    Observed::with(making.standard::<Route>(), |metrics| App {
        sessions: AtomicU64::new(0),
        metrics: metrics.clone(),
    })
}

/// The `Content-Type` of every text answer.
const TEXT: &str = "text/plain; charset=utf-8";

/// What `/metrics` counts responses under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/hello/{name}`.
    Hello,
    /// `POST /login`.
    Login,
    /// `/slow`.
    Slow,
    /// `/download/{name}`.
    Download,
    /// `/events`.
    Events,
    /// `/echo`.
    Echo,
    /// `/metrics`.
    Metrics,
    /// A path the application does not have, or a response the core gave
    /// no route (a head it could not read, a 500 for a panic).
    Other,
}

impl Label for Route {
    const ALL: &'static [Route] = &[
        Route::Hello,
        Route::Login,
        Route::Slow,
        Route::Download,
        Route::Events,
        Route::Echo,
        Route::Metrics,
        Route::Other,
    ];
    const REFUSED: Route = Route::Other;

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            Route::Hello => "/hello",
            Route::Login => "/login",
            Route::Slow => "/slow",
            Route::Download => "/download",
            Route::Events => "/events",
            Route::Echo => "/echo",
            Route::Metrics => "/metrics",
            Route::Other => "other",
        }
    }
}

/// Each answer is counted under the route it was chosen for (a job's
/// result, under its request's: the label is taken at the call).
impl Labelled<Route> for Answer {
    fn label(&self) -> Route {
        match self {
            Answer::Text(_) | Answer::BadRequest(_) => Route::Hello,
            Answer::Login { .. } | Answer::SignedIn { .. } => Route::Login,
            Answer::Slow => Route::Slow,
            Answer::Download(_) | Answer::NoFile => Route::Download,
            Answer::Events(_) => Route::Events,
            Answer::Echo(_) => Route::Echo,
            Answer::Metrics(..) => Route::Metrics,
            Answer::Status(..) => Route::Other,
        }
    }
}

/// What a request is answered with, from its head until its response.
#[derive(Debug)]
pub enum Answer {
    /// `GET /hello/{name}?greeting=…`: made from the head at once.
    Text(String),
    /// `POST /login`: the form is checked by async work once read; the
    /// session number it would get.
    Login { session: u64 },
    /// Signed in as the user, with a session number.
    SignedIn { user: String, session: u64 },
    /// `GET /slow`: answered after an awaited timer.
    Slow,
    /// A file of [`FILES`].
    Download(&'static (&'static str, &'static str, Encoded)),
    /// `/download/{name}` of a file not in [`FILES`].
    NoFile,
    /// `GET /events`: chunks that come on a timer.
    Events(Events),
    /// `GET /echo?v=…`: the value sent back as a field (`X-Echo`).
    Echo(String),
    /// `GET /metrics`: the counters, rendered in the format asked for.
    Metrics(Exposition, String),
    /// A status with a short text.
    Status(Status, &'static str),
    /// 400, and why.
    BadRequest(String),
}

/// A stream of [`EVENTS`] chunks, one per [`EVENT_EVERY`].
#[derive(Debug)]
pub struct Events {
    sent: u64,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Handler for App {
    type Reply = Answer;

    fn call(&self, head: &RequestHead<'_>) -> Answer {
        let path = head.decoded_path();
        let get = matches!(head.method, "GET" | "HEAD");
        match (get, &*path) {
            (true, p) if p.starts_with("/hello/") => {
                let mut greeting = "Hello".to_string();
                for pair in head.query_pairs() {
                    match pair {
                        Ok((name, value)) if name == "greeting" => greeting = value.into_owned(),
                        Ok(_) => {}
                        Err(e) => return Answer::BadRequest(format!("{e}\n")),
                    }
                }
                Answer::Text(format!("{greeting}, {}!\n", &p["/hello/".len()..]))
            }
            (false, "/login") if head.method == "POST" => Answer::Login {
                session: self.sessions.fetch_add(1, Ordering::Relaxed) + 1,
            },
            (true, "/slow") => Answer::Slow,
            (true, p) if p.starts_with("/download/") => {
                match FILES
                    .iter()
                    .find(|(name, ..)| p["/download/".len()..] == **name)
                {
                    Some(file) => Answer::Download(file),
                    None => Answer::NoFile,
                }
            }
            (true, "/events") => Answer::Events(Events {
                sent: 0,
                wait: None,
            }),
            (true, "/echo") => {
                let v = head
                    .query_pairs()
                    .filter_map(Result::ok)
                    .find(|(name, _)| name == "v")
                    .map(|(_, v)| v.into_owned());
                Answer::Echo(v.unwrap_or_default())
            }
            (true, "/metrics") => {
                let format = Exposition::from_accept(head.field("accept"));
                Answer::Metrics(format, self.metrics.render(format))
            }
            _ => Answer::Status(Status::NOT_FOUND, "not found\n"),
        }
    }
}

impl Reply for Answer {
    /// Only `/login` reads its body.
    fn wants_body(&self) -> bool {
        matches!(self, Answer::Login { .. })
    }

    fn prepare(&mut self, request_body: &[u8]) -> Option<Job<Answer>> {
        match *self {
            Answer::Login { session } => {
                let form = request_body.to_vec();
                Some(Job::new(async move {
                    // As a database would be asked whether the password is right.
                    tokio::time::sleep(DATABASE).await;
                    let (mut user, mut password) = (None, None);
                    for (name, value) in form_pairs(&form) {
                        match &*name {
                            "user" => user = Some(value.into_owned()),
                            "password" => password = Some(value.into_owned()),
                            _ => {}
                        }
                    }
                    match (user, password.as_deref()) {
                        (Some(user), Some("open sesame")) => Answer::SignedIn { user, session },
                        _ => Answer::Status(Status::FORBIDDEN, "wrong user or password\n"),
                    }
                }))
            }
            Answer::Slow => Some(Job::new(async {
                tokio::time::sleep(DATABASE).await;
                Answer::Text(format!("waited {} ms\n", DATABASE.as_millis()))
            })),
            _ => None,
        }
    }

    fn respond<'a>(
        &'a mut self,
        _: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        let (status, body): (_, Body<'a>) = match self {
            Answer::Text(t) => (Status::OK, Body::Bytes(t.as_bytes())),
            Answer::SignedIn { user, session } => {
                // Six lines of its own, two of them Set-Cookie; values built
                // of pieces, written into the head as they are.
                fields
                    .add("Location", ("/hello/", user.as_str()))
                    .add(
                        "Set-Cookie",
                        ("session=", *session, "; Path=/; HttpOnly; SameSite=Lax"),
                    )
                    .add(
                        "Set-Cookie",
                        ("user=", user.as_str(), "; Path=/; Max-Age=", 86_400),
                    )
                    .add("Cache-Control", "no-store")
                    .add("X-Session-Count", *session)
                    .add("Vary", "Cookie");
                (Status::SEE_OTHER, Body::Bytes(b"signed in\n"))
            }
            Answer::Download((_, content, encoded)) => {
                let mut hash = std::collections::hash_map::DefaultHasher::new();
                content.hash(&mut hash);
                let encoded: &(dyn Rope + Sync) = encoded;
                fields
                    .add(
                        "Content-Disposition",
                        ("attachment; filename*=UTF-8''", encoded),
                    )
                    .add("ETag", ("\"", hash.finish(), "\""));
                (Status::OK, Body::Bytes(content.as_bytes()))
            }
            Answer::Events(_) => {
                fields.add("Content-Type", "text/html; charset=utf-8");
                return Ok(Response::new(Status::OK, [None, None], Body::Stream));
            }
            Answer::Metrics(format, text) => {
                fields
                    .add("Content-Type", format.content_type())
                    .add("Cache-Control", "no-store");
                let body = Body::Bytes(text.as_bytes());
                return Ok(Response::new(Status::OK, [None, None], body));
            }
            Answer::NoFile => (Status::NOT_FOUND, Body::Bytes(b"no such file\n")),
            Answer::Echo(v) => {
                fields.add("X-Echo", v.as_str());
                (Status::OK, Body::Bytes(b"echoed\n"))
            }
            Answer::BadRequest(why) => (Status::BAD_REQUEST, Body::Bytes(why.as_bytes())),
            Answer::Status(status, reason) => (*status, Body::Bytes(reason.as_bytes())),
            Answer::Login { .. } | Answer::Slow => unreachable!("replaced by their jobs"),
        };
        fields.add("Content-Type", TEXT);
        Ok(Response::new(status, [None, None], body))
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Chunk>, Full>> {
        let Answer::Events(events) = self else {
            return Poll::Ready(Ok(None));
        };
        if events.sent == EVENTS {
            return Poll::Ready(Ok(None));
        }
        if let Some(wait) = &mut events.wait {
            std::task::ready!(wait.as_mut().poll(cx));
        }
        events.sent += 1;
        events.wait = Some(Box::pin(tokio::time::sleep(EVENT_EVERY)));
        let line = format!("<p>event {}</p>\n", events.sent);
        Poll::Ready(Ok(Some(Chunk::Bytes(line.into()))))
    }
}

/// A form body's pairs, decoded.
fn form_pairs(
    body: &[u8],
) -> impl Iterator<Item = (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>)> {
    form_urlencoded::parse(body)
}

/// A file name percent-encoded for `filename*=UTF-8''…` (RFC 8187): a rope
/// of its own, one piece per byte, written into the head with no `String`.
#[derive(Debug)]
pub struct Encoded(&'static str);

impl Rope for Encoded {
    fn for_each_piece<'s>(
        &'s self,
        visit: &mut dyn FnMut(unflat::Piece<'s>) -> std::ops::ControlFlow<()>,
    ) -> std::ops::ControlFlow<()> {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        static ESCAPES: [[u8; 3]; 256] = {
            let mut t = [[0; 3]; 256];
            let mut b = 0;
            while b < 256 {
                t[b] = [b'%', HEX[b >> 4], HEX[b & 15]];
                b += 1;
            }
            t
        };
        for (i, &b) in self.0.as_bytes().iter().enumerate() {
            let plain = b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b);
            if plain {
                visit(unflat::Piece::OneByte(&self.0.as_bytes()[i..i + 1]))?;
            } else {
                visit(unflat::Piece::OneByte(&ESCAPES[usize::from(b)]))?;
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}
