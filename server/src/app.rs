//! Everything an application implements or receives, in one place: the
//! [`Handler`] it writes (or the whole [`Service`], for one that keeps
//! per-connection state or observes its responses), the request it reads
//! ([`RequestHead`]: fields by name, the path and query decoded), the
//! response it gives ([`Response`], [`Body`], its own [`Fields`] built as
//! ropes, the [`Chunk`]s of a stream), the work it awaits ([`Job`]), and
//! the [`Server`] that runs it on its runtime or its caller's.
//!
//! ```no_run
//! use unflat_server::app::{Body, Config, Fields, Full, Handler, Line, Reply, RequestHead};
//! use unflat_server::app::{Response, Server, Status};
//!
//! struct Hello(Line);
//! #[derive(Debug)]
//! struct Greeting(String);
//! impl Reply for Greeting {}
//!
//! impl Handler for Hello {
//!     type Reply = Greeting;
//!     fn call(&self, head: &RequestHead<'_>) -> Greeting {
//!         Greeting(format!("Hello, {}!\n", head.decoded_path().trim_start_matches('/')))
//!     }
//!     fn respond<'a>(
//!         &'a self,
//!         reply: &'a mut Greeting,
//!         _: &'a [u8],
//!         fields: &mut Fields<'a>,
//!     ) -> Result<Response<'a>, Full> {
//!         fields.add("Cache-Control", ("max-age=", 60));
//!         Ok(Response::new(Status::OK, [Some(&self.0), None], Body::Bytes(reply.0.as_bytes())))
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let config = Config::from_app_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
//!     let text = Line::parse("Content-Type", "text/plain; charset=utf-8").unwrap();
//!     let server = Server::bind_with(config, |_| Hello(text))?;
//!     server.serve(async { let _ = tokio::signal::ctrl_c().await; }).await
//! }
//! ```

use std::task::{Context, Poll};

pub use unflat::head::{Line, Status};
pub use unflat::{Concat, Decimal, Rope};

pub use crate::config::Config;
pub use crate::h1::{Pair, QueryError, RequestHead};
pub use crate::memory::Full;
pub use crate::response::{
    Body, Chunk, Exchange, FieldError, Fields, Part, Prepared, Response, Value, MAX_FIELDS,
};
pub use crate::server::{Making, Server};
pub use crate::session::{Answered, Finished, Job, Panicked, Reply, Service};

/// What an application implements when it keeps nothing per connection,
/// labels nothing and observes nothing: the request's reply from its head
/// ([`Handler::call`]), work to await first ([`Handler::prepare`]), the
/// response ([`Handler::respond`]) and, for a stream, its chunks
/// ([`Handler::poll_chunk`]). Every `Handler` is a [`Service`].
pub trait Handler: Send + Sync + 'static {
    /// The answer to one request, from its head until its response.
    type Reply: Reply;

    /// The reply to the request whose head is `head`.
    fn call(&self, head: &RequestHead<'_>) -> Self::Reply;

    /// Work to await before the response, once the request body is read
    /// (`request_body`, kept when [`Reply::wants_body`]): a [`Job`] on the
    /// server's runtime, timers included, whose result replaces `reply`.
    /// None by default.
    fn prepare(
        &self,
        reply: &mut Self::Reply,
        request_body: &[u8],
        exchange: Exchange,
    ) -> Option<Job<Self::Reply>> {
        let _ = (reply, request_body, exchange);
        None
    }

    /// The response for `reply`, with field lines of its own added to
    /// `fields` ([`Service::respond`]).
    fn respond<'a>(
        &'a self,
        reply: &'a mut Self::Reply,
        request_body: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full>;

    /// The next chunk of a [`Body::Stream`], `Pending` while it waits
    /// ([`Service::poll_chunk`]); `None` at its end. A stream that ends at
    /// once by default.
    fn poll_chunk(
        &self,
        reply: &mut Self::Reply,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Chunk>, Full>> {
        let _ = (reply, cx);
        Poll::Ready(Ok(None))
    }
}

impl<H: Handler> Service for H {
    type Reply = H::Reply;
    type Conn = ();
    type Label = ();

    #[inline]
    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> ((), H::Reply) {
        ((), Handler::call(self, head))
    }

    #[inline]
    fn prepare(
        &self,
        reply: &mut H::Reply,
        request_body: &[u8],
        exchange: Exchange,
        _: &mut (),
    ) -> Option<Job<H::Reply>> {
        Handler::prepare(self, reply, request_body, exchange)
    }

    #[inline]
    fn respond<'a>(
        &'a self,
        reply: &'a mut H::Reply,
        request_body: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        Handler::respond(self, reply, request_body, fields)
    }

    #[inline]
    fn poll_chunk(
        &self,
        reply: &mut H::Reply,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Chunk>, Full>> {
        Handler::poll_chunk(self, reply, cx)
    }
}
