//! The admin address (`--admin-addr`): `/metrics`, `/livez` and `/readyz`
//! apart from the public port, served by the core itself on the server's
//! runtime, beside the application and never by it.

use std::borrow::Cow;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use unflat::head::Status;

use crate::config::Config;
use crate::h1::RequestHead;
use crate::memory::Full;
use crate::response::{Body, Fields, Response};
use crate::service::{Observe, Reply, Service};

use super::accept::listen;
use super::Stack;

/// Connections the admin address serves at once: a scraper and a probe
/// or two, never the public's load.
const MAX_CONNECTIONS: usize = 16;

/// The admin address's listener and layers, bound beside the public port.
pub(super) struct AdminPort<S: Service> {
    pub(super) listener: std::net::TcpListener,
    pub(super) stack: Arc<Stack<Admin<S>>>,
}

impl<S: Service> AdminPort<S> {
    /// Binds `addr` to answer for the server whose layers are `main`,
    /// with `main`'s limits and timeouts, charged to its memory account,
    /// in cleartext, without an access log, at most [`MAX_CONNECTIONS`]
    /// at once.
    pub(super) fn bind(addr: SocketAddr, main: &Arc<Stack<S>>) -> io::Result<AdminPort<S>> {
        let listener = listen(addr, false).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("--admin-addr: cannot listen on {addr}: {e}"),
            )
        })?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let config = Config {
            addr: local,
            admin_addr: None,
            reuse_port: false,
            tls_cert: None,
            tls_key: None,
            tls_self_signed: false,
            access_log: false,
            max_connections: MAX_CONNECTIONS,
            ..main.config().clone()
        };
        let memory = main.protocol().memory.clone();
        let main = main.clone();
        let stack = Stack::on_account(config, local, None, memory, |_| Admin { main });
        Ok(AdminPort {
            listener,
            stack: Arc::new(stack),
        })
    }
}

/// What the admin address answers, for the server whose layers are `main`.
pub struct Admin<S: Service> {
    main: Arc<Stack<S>>,
}

impl<S: Service> Service for Admin<S> {
    type Reply = AdminReply;
    type Conn = ();
    type Observer = ();

    fn observer(&self) {}

    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> AdminReply {
        let text = |status, body: &'static str| AdminReply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Cow::Borrowed(body),
            allow: false,
        };
        let known = matches!(head.path, "/livez" | "/readyz" | "/metrics");
        if !known {
            return text(Status::NOT_FOUND, "not found: /livez, /readyz, /metrics\n");
        }
        if head.method != "GET" && head.method != "HEAD" {
            return AdminReply {
                allow: true,
                ..text(Status::METHOD_NOT_ALLOWED, "GET or HEAD\n")
            };
        }
        let protocol = self.main.protocol();
        match head.path {
            // Alive while it answers at all: a restart would not help.
            "/livez" => text(Status::OK, "alive\n"),
            // Ready until shutdown begins: from then on a balancer sends
            // no new requests, while those in progress finish.
            "/readyz" if protocol.draining.is_on() => {
                text(Status::SERVICE_UNAVAILABLE, "shutting down\n")
            }
            "/readyz" => text(Status::OK, "ready\n"),
            _ => match protocol.observer.exposition(head.field("accept")) {
                Some((content_type, rendered)) => AdminReply {
                    status: Status::OK,
                    content_type,
                    body: Cow::Owned(rendered),
                    allow: false,
                },
                None => text(
                    Status::NOT_FOUND,
                    "this server's observer keeps no metrics\n",
                ),
            },
        }
    }
}

/// One answer of the admin address: a status and a short text.
#[derive(Debug)]
pub struct AdminReply {
    status: Status,
    content_type: &'static str,
    body: Cow<'static, str>,
    /// A 405: `Allow` names the methods.
    allow: bool,
}

impl Reply for AdminReply {
    fn respond<'a>(
        &'a mut self,
        _: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        fields
            .add("content-type", self.content_type)
            .add("cache-control", "no-store");
        if self.allow {
            fields.add("allow", "GET, HEAD");
        }
        Ok(Response::new(
            self.status,
            Body::Bytes(self.body.as_bytes()),
        ))
    }
}
