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
//! `--workers`, …) and none of the demo site's (`Config::from_app_args`);
//! `examples/app` shows the rest of what an application can do.

use unflat::head::{Line, Status};
use unflat_server::h1::RequestHead;
use unflat_server::memory::Full;
use unflat_server::response::{Body, Fields, Response};
use unflat_server::session::{Reply, Service};
use unflat_server::{Config, Server};

/// The service: two field lines, made once.
#[derive(Debug)]
struct Hello {
    text_plain: Line,
}

/// What it answers a request with.
#[derive(Debug)]
enum Answer {
    /// `GET /` (and `HEAD /`).
    Hello,
    /// `POST /`: the body's length, once read.
    Count(String),
    /// Any other request.
    NotFound,
}

impl Reply for Answer {
    /// Only `POST /` reads its body.
    fn wants_body(&self) -> bool {
        matches!(self, Answer::Count(_))
    }
}

impl Service for Hello {
    type Reply = Answer;
    type Conn = ();
    type Label = ();

    fn call(&self, head: &RequestHead<'_>, _: &mut ()) -> ((), Answer) {
        let answer = match (head.method, head.path) {
            ("GET" | "HEAD", "/") => Answer::Hello,
            ("POST", "/") => Answer::Count(String::new()),
            _ => Answer::NotFound,
        };
        ((), answer)
    }

    fn respond<'a>(
        &'a self,
        reply: &'a mut Answer,
        request_body: &'a [u8],
        _: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        let text = Some(&self.text_plain);
        Ok(match reply {
            Answer::Hello => {
                Response::new(Status::OK, [text, None], Body::Bytes(b"Hello, world!\n"))
            }
            Answer::Count(made) => {
                // Made into the reply, which the core keeps while the
                // response is queued.
                *made = format!("{} bytes\n", request_body.len());
                Response::new(Status::OK, [text, None], Body::Bytes(made.as_bytes()))
            }
            Answer::NotFound => {
                Response::new(Status::NOT_FOUND, [text, None], Body::Bytes(b"not found\n"))
            }
        })
    }
}

fn main() {
    let config = match Config::from_app_args(std::env::args_os()) {
        Ok(config) => config,
        Err(e) => e.exit(),
    };
    let hello = |_: unflat_server::server::Making<'_>| Hello {
        text_plain: Line::parse("Content-Type", "text/plain; charset=utf-8")
            .expect("a valid field line"),
    };
    let server = match Server::bind_with(config, hello) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    println!("hello at http://{}/ (Ctrl-C stops it)", server.local_addr());
    let stopped = server.run(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    if let Err(e) = stopped {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
