//! A response with field lines of its own, for counting what they cost:
//! `GET /fields/{n}` answers `ok` with `n` (0 to 6) fields whose values are
//! ropes — text, an integer and their concatenations, the shapes an
//! application sends (a cookie, a cache line, an `ETag`, a `Location`, …).
//!
//! ```sh
//! cargo run --release -p unflat-server --example fields -- --addr 127.0.0.1:3003
//! curl -i http://127.0.0.1:3003/fields/6
//! ```
//!
//! `benches/instructions.py --path /fields/6` counts its instructions per
//! request (docs/results/instructions-and-profiles.md).

use unflat_server::app::reply::{
    Body, Config, Fields, Full, Handler, Reply, RequestHead, Response, Server, Status, Value,
};

/// The service: it keeps nothing.
struct Service;

/// How many fields to answer with, or none for a 404.
#[derive(Debug)]
struct Answer(Option<usize>);

/// The most fields `/fields/{n}` answers with.
const MOST: usize = 6;

impl Handler for Service {
    type Reply = Answer;

    fn call(&self, head: &RequestHead<'_>) -> Answer {
        let n = match (head.method, head.path.strip_prefix("/fields/")) {
            ("GET" | "HEAD", Some(n)) => n.parse().ok().filter(|&n| n <= MOST),
            _ => None,
        };
        Answer(n)
    }
}

impl Reply for Answer {
    fn respond<'a>(
        &'a mut self,
        _request_body: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        let Some(n) = self.0 else {
            return Ok(Response::new(
                Status::NOT_FOUND,
                Body::Bytes(b"not found\n"),
            ));
        };
        let id = 1_234_567_u64;
        let all: [(&str, Value<'_>); MOST] = [
            (
                "Content-Type",
                ("text/plain; charset=", "utf-8", "", "").into(),
            ),
            ("Set-Cookie", ("sid=", id, "; Path=/; HttpOnly", "").into()),
            ("Cache-Control", "private, max-age=0, no-store".into()),
            ("ETag", ("\"", id, "-", "v2\"").into()),
            ("Location", ("/users/", id, "/profile", "").into()),
            ("X-Request-Count", id.into()),
        ];
        for (name, value) in all.into_iter().take(n) {
            fields.add(name, value);
        }
        Ok(Response::new(Status::OK, Body::Bytes(b"ok\n")))
    }
}

fn main() -> std::io::Result<()> {
    let config = Config::from_app_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    let server = Server::bind_with(config, |_| Service)?;
    println!(
        "fields at http://{}/fields/6 (Ctrl-C stops it)",
        server.local_addr()
    );
    // Its own runtime, of `--workers` threads (one, for a count).
    server.run(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
