//! The smallest service on unflat-server's core: `GET /` answers
//! `Hello, world!`, `POST /` answers the length of its body, anything else
//! 404. The core does the rest — the strict request grammar, framing,
//! persistence, HEAD, pipelining, timeouts, the memory account, TLS — as
//! it does for the demo site.
//!
//! ```sh
//! cargo run --release -p unflat-server --example hello -- --addr 127.0.0.1:3002
//! curl http://127.0.0.1:3002/
//! ```
//!
//! Its `--help` lists the core's flags (`--tls-self-signed`, `--max-body`,
//! `--workers`, …): the demo's own are the binary's (`Config::from_app_args`);
//! `examples/app` shows the rest of what an application can do.

use unflat_server::app::reply::{
    Body, Config, Decimal, Fields, Full, Handler, Reply, RequestHead, Response, Server, Status,
};

/// The service: it keeps nothing.
struct Hello;

/// What it answers a request with.
#[derive(Debug)]
enum Answer {
    /// `GET /` (and `HEAD /`).
    Hello,
    /// `POST /`: the body's length, once read.
    Count(Decimal),
    /// Any other request.
    NotFound,
}

impl Handler for Hello {
    type Reply = Answer;

    fn call(&self, head: &RequestHead<'_>) -> Answer {
        match (head.method, head.path) {
            ("GET" | "HEAD", "/") => Answer::Hello,
            ("POST", "/") => Answer::Count(Decimal::new(0)),
            _ => Answer::NotFound,
        }
    }
}

impl Reply for Answer {
    /// Only `POST /` reads its body.
    fn wants_body(&self) -> bool {
        matches!(self, Answer::Count(_))
    }

    fn respond<'a>(
        &'a mut self,
        request_body: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        fields.add("Content-Type", "text/plain; charset=utf-8");
        let (status, body): (_, &[u8]) = match self {
            Answer::Hello => (Status::OK, b"Hello, world!\n"),
            Answer::Count(n) => {
                // The count in a field of its own; made into the reply,
                // which the core keeps while the response is queued.
                *n = Decimal::new(request_body.len());
                fields.add("X-Body-Bytes", request_body.len());
                (Status::OK, n.as_str().as_bytes())
            }
            Answer::NotFound => (Status::NOT_FOUND, b"not found\n"),
        };
        Ok(Response::new(status, Body::Bytes(body)))
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let config = Config::from_app_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let server = Server::bind_with(config, |_| Hello)?;
    println!("hello at http://{}/ (Ctrl-C stops it)", server.local_addr());
    server
        .serve(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
