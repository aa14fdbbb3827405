//! The zero-allocation door, beneath the async handlers: the
//! [`Handler`] an application writes (or the whole [`Service`], for one that keeps
//! per-connection state or names an [`Observe`]r of its responses), the
//! request it reads ([`RequestHead`]: fields by name, the path and query
//! decoded), the [`Reply`] it gives for each — which the core owns, asks
//! for work to await ([`Job`]) and for its [`Response`] ([`Body`], its own
//! [`Fields`] built as ropes, the [`Chunk`]s of a stream) — and the
//! [`Server`] that runs it on its runtime or its caller's. The service is
//! called once per request; everything after is its reply's. What an
//! operator watches — `/metrics`' counters, the access log — is the core's
//! [`Standard`] observer, which a handler takes by being [`Observed`].
//!
//! ```no_run
//! use unflat_server::app::reply::{Body, Config, Fields, Full, Handler, Reply, RequestHead};
//! use unflat_server::app::reply::{Response, Server, Status};
//!
//! struct Hello;
//! #[derive(Debug)]
//! struct Greeting(String);
//!
//! impl Handler for Hello {
//!     type Reply = Greeting;
//!     fn call(&self, head: &RequestHead<'_>) -> Greeting {
//!         Greeting(format!("Hello, {}!\n", head.decoded_path().trim_start_matches('/')))
//!     }
//! }
//!
//! impl Reply for Greeting {
//!     fn respond<'a>(&'a mut self, _: &'a [u8], fields: &mut Fields<'a>) -> Result<Response<'a>, Full> {
//!         fields
//!             .add("Content-Type", "text/plain; charset=utf-8")
//!             .add("Cache-Control", ("max-age=", 60));
//!         Ok(Response::new(Status::OK, Body::Bytes(self.0.as_bytes())))
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let config = Config::from_app_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
//!     let server = Server::bind_with(config, |_| Hello)?;
//!     server.serve(async { let _ = tokio::signal::ctrl_c().await; }).await
//! }
//! ```

pub use unflat::head::{Line, Status};
pub use unflat::{Concat, Decimal, Rope};

pub use crate::config::Config;
pub use crate::h1::{Pair, QueryError, RequestHead};
pub use crate::memory::Full;
pub use crate::observe::{Exposition, Label, Labelled, Metrics, Standard};
pub use crate::response::{
    Body, Chunk, FieldError, Fields, Part, Prepared, Response, Value, MAX_FIELDS,
};
pub use crate::server::{Making, Server};
pub use crate::service::{Answered, Finished, Job, Observe, Panicked, Reply, Service};

/// What an application implements when it keeps nothing per connection
/// and observes nothing: the [`Reply`] to each request, from its head.
/// Every `Handler` is a [`Service`].
pub trait Handler: Send + Sync + 'static {
    /// The answer to one request, from its head until its response.
    type Reply: Reply;

    /// The reply to the request whose head is `head` (the one call per
    /// request).
    fn call(&self, head: &RequestHead<'_>) -> Self::Reply;
}

impl<H: Handler> Service for H {
    type Reply = H::Reply;
    type Conn = ();
    type Observer = ();

    fn observer(&self) {}

    #[inline]
    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> H::Reply {
        Handler::call(self, head)
    }
}

/// A [`Handler`] whose responses the core's [`Standard`] observer counts
/// for `/metrics` (under the [`Label`] each reply names, [`Labelled`]) and
/// writes to the access log (`--access-log`). The handler renders the
/// counters where it chooses ([`Observed::with`] hands them to it).
///
/// ```
/// use unflat_server::app::reply::{Body, Config, Exposition, Fields, Full, Handler, Metrics};
/// use unflat_server::app::reply::{Observed, Reply, RequestHead, Response, Server, Status};
///
/// struct Hello {
///     metrics: Metrics,
/// }
/// #[derive(Debug)]
/// struct Text(String);
///
/// impl Handler for Hello {
///     type Reply = Text;
///     fn call(&self, head: &RequestHead<'_>) -> Text {
///         match head.path {
///             "/metrics" => Text(self.metrics.render(Exposition::Prometheus)),
///             _ => Text("Hello!\n".into()),
///         }
///     }
/// }
///
/// impl Reply for Text {
///     fn respond<'a>(&'a mut self, _: &'a [u8], _: &mut Fields<'a>) -> Result<Response<'a>, Full> {
///         Ok(Response::new(Status::OK, Body::Bytes(self.0.as_bytes())))
///     }
/// }
///
/// let config = Config { addr: "127.0.0.1:0".parse().unwrap(), access_log: true, ..Config::default() };
/// // Every response counted under `route="all"` (labels `()`); a handler
/// // whose replies name routes uses `m.standard::<Route>()`.
/// let server = Server::bind_with(config, |m| {
///     Observed::with(m.standard::<()>(), |metrics| Hello { metrics: metrics.clone() })
/// });
/// assert!(server.is_ok(), "the core's observer writes the access log");
/// ```
#[derive(Debug)]
pub struct Observed<H, L: Label = ()> {
    handler: H,
    observer: Standard<L>,
}

impl<H, L: Label> Observed<H, L> {
    /// `handler`, observed by `observer` (a server's
    /// [`Making::standard`](crate::server::Making::standard)).
    pub fn new(handler: H, observer: Standard<L>) -> Self {
        Observed { handler, observer }
    }

    /// `make`'s handler, given the counters `observer` keeps (for its
    /// `/metrics`), observed by `observer`.
    pub fn with(observer: Standard<L>, make: impl FnOnce(&Metrics<L>) -> H) -> Self {
        let handler = make(observer.metrics());
        Observed { handler, observer }
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        &self.handler
    }
}

impl<H: Handler, L: Label> Service for Observed<H, L>
where
    H::Reply: Labelled<L>,
{
    type Reply = H::Reply;
    type Conn = ();
    type Observer = Standard<L>;

    fn observer(&self) -> Standard<L> {
        self.observer.clone()
    }

    #[inline]
    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> H::Reply {
        self.handler.call(head)
    }
}
