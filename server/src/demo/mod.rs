//! The demo site, the binary's own application on the core's public API:
//! its routes (`routes.rs`, one table), replies (`reply.rs`), bodies built
//! off the workers and cached (`bodies.rs`), observed by the core's
//! [`Standard`] observer (`/metrics`' counters by route, the access log),
//! to which its cache and builds are reported; its own flags beside the
//! core's (`options.rs`). [`Site::made`] makes it from its [`Options`] and
//! what the server gives every service ([`Making`]).

mod bodies;
mod body;
mod chunks;
mod echo;
pub mod options;
mod query;
mod reply;
mod routes;

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use unflat::head::{Line, Status};

pub use reply::Answer;
pub use routes::Route;

pub use bodies::Memo;
use bodies::{Bodies, HELD_MOST};
use body::BodyKey;
use reply::ErrorField;

use unflat_server::h1::RequestHead;
use unflat_server::memory::Memory;
use unflat_server::observe::{Exposition, Label, Labelled, Metrics, Report, Standard};
use unflat_server::response::{Prepared, Strategy};
use unflat_server::server::{Making, Server};
use unflat_server::service::Service;
use unflat_server::session::Draining;
use unflat_server::{cli, events, Config};

pub use options::Options;

/// The limits of the routes' arguments.
#[derive(Clone, Copy, Debug)]
pub struct RouteLimits {
    /// The longest `/end-string` body, in characters (`--max-len`).
    pub max_len: usize,
    /// The largest `/large` payload, in bytes (`--max-large`).
    pub max_large: usize,
    /// `--admin-addr` serves the operator's routes: the public port
    /// answers `/healthz` and `/metrics` with 404.
    pub admin_apart: bool,
}

/// The site's reply: the answer, and the route its response is counted
/// under (its label).
#[derive(Debug)]
pub struct Routed {
    /// The route the request took.
    pub route: Route,
    /// What it is answered with.
    pub answer: Answer,
}

impl Labelled<Route> for Routed {
    #[inline(always)]
    fn label(&self) -> Route {
        self.route
    }
}

/// What the site is made with, beside what the server gives it.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// The strategy responses are written by, for the help text.
    pub strategy: Strategy,
    /// The limits of the routes' arguments.
    pub limits: RouteLimits,
    /// Bytes of bodies the cache keeps (`--cache-bytes`).
    pub cache_bytes: usize,
    /// Bodies built at once (`--max-builds`).
    pub builders: usize,
    /// The address the server listens on, for the help text.
    pub address: SocketAddr,
    /// Over HTTPS, the name of its crypto provider.
    pub tls: Option<&'static str>,
    /// The self-signed certificate's PEM, for the help text.
    pub trust: Option<&'a Path>,
}

/// The demo site.
#[derive(Debug)]
pub struct Site {
    bodies: Arc<Bodies>,
    /// What made bodies (the echo's JSON) are charged to.
    memory: Arc<Memory>,
    help: Arc<str>,
    /// The core's: whether the server is shutting down (`/healthz`).
    draining: Draining,
    limits: RouteLimits,
    /// Its observer, whose counters `/metrics` renders.
    observer: Standard<Route>,
}

impl Site {
    /// The site `options` describe, on the server `m` describes: its
    /// bodies charged to the server's memory account, its responses
    /// observed by the core's [`Standard`] observer (counted under its
    /// routes, with its cache and builds reported beside the core's
    /// counters), `/healthz` answering from the server's draining.
    pub fn made(options: &Options, m: Making<'_>) -> Site {
        let settings = options.settings(&m);
        let bodies = Bodies::new(m.memory.clone(), settings.cache_bytes, settings.builders);
        let report: Arc<dyn Report> = bodies.clone();
        Site {
            observer: m.standard_reporting(Some(report)),
            bodies,
            memory: m.memory.clone(),
            help: help_text(&settings).into(),
            draining: m.draining.clone(),
            limits: settings.limits,
        }
    }

    /// The text of `GET /` and of the start-up banner.
    pub fn help(&self) -> &str {
        &self.help
    }

    /// The counters of `/metrics`.
    pub fn metrics(&self) -> &Metrics<Route> {
        self.observer.metrics()
    }

    /// True once the server is shutting down.
    pub fn is_draining(&self) -> bool {
        self.draining.is_on()
    }
}

/// Binds `config.addr` to serve the site `options` describe. Fails on
/// options or a configuration that cannot work, before binding anything,
/// as [`Server::bind_with`] does.
pub fn bind(config: Config, options: Options) -> io::Result<Server<Site>> {
    let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
    options.validate(&config).map_err(invalid)?;
    let server = Server::bind_with(config, |m| Site::made(&options, m))?;
    // The site's jobs build bodies on the blocking pool and await no tokio
    // timer: its runtime goes without the time driver.
    Ok(server.without_time_driver())
}

/// Serves the demo from the command line until Ctrl-C or SIGTERM: the
/// binary's `main`. A configuration that cannot work exits with status 2
/// before anything starts.
pub fn main() -> io::Result<()> {
    use clap::{Args as _, FromArgMatches as _};
    let cmd = Config::command_with(Options::augment_args, &Options::RANGES);
    let matches = cli::parsed(Config::matches(cmd, std::env::args_os()));
    let config = cli::parsed(Config::from_arg_matches(&matches));
    let options = cli::parsed(Options::from_arg_matches(&matches));
    if let Some(url) = &options.probe {
        match cli::probe(url, std::time::Duration::from_secs(2)) {
            Ok(status) if (200..300).contains(&status) => std::process::exit(0),
            Ok(status) => eprintln!("probe: {url}: {status}"),
            Err(e) => eprintln!("probe: {e}"),
        }
        std::process::exit(1);
    }
    events::install(&config);
    if let Some(note) = options.cache_clamped(&config) {
        tracing::warn!("{note}");
    }
    let server = cli::bound(bind(config, options));
    let banner = server.stack().service().help().to_string();
    cli::run(server, banner)
}

/// Routes choose the answer and make it ready: a body from the
/// connection's memo or the cache, or one to build (`reply.rs`).
impl Service for Site {
    type Reply = Routed;
    /// The connection's last body.
    type Conn = Memo;
    type Observer = Standard<Route>;

    fn observer(&self) -> Standard<Route> {
        self.observer.clone()
    }

    /// The body a memo holds, at most: what memos keep alive beside the
    /// cache is counted in each connection's base.
    fn conn_memory(&self) -> usize {
        HELD_MOST
    }

    #[inline(always)]
    fn call(&self, head: &RequestHead<'_>, memo: &mut Memo) -> Routed {
        routes::route(self.limits, head, |answer| {
            answer.resolve(self, head.is_head(), memo)
        })
    }

    /// A body the memo lent goes back to it, moved: no reference counted.
    #[inline(always)]
    fn recycle(&self, reply: Routed, memo: &mut Memo) {
        if let Answer::Lent(body) = reply.answer {
            memo.give_back(body);
        }
    }
}

/// Routes are the labels of the site's counters.
impl Label for Route {
    const ALL: &'static [Route] = &Route::ALL;
    const REFUSED: Route = Route::Unmatched;

    #[inline(always)]
    fn index(self) -> usize {
        Route::index(self)
    }

    fn name(self) -> &'static str {
        self.label()
    }
}

/// The text of `GET /` and of the start-up banner.
fn help_text(s: &Settings<'_>) -> String {
    let (addr, strategy) = (s.address, s.strategy.name());
    let (scheme, tls) = match s.tls {
        Some(provider) => ("https", format!(", rustls with {provider}")),
        None => ("http", String::new()),
    };
    let trust = s.trust.map_or(String::new(), |pem| {
        format!(
            "\nSelf-signed certificate for localhost (removed when the server stops): {}\n  curl --cacert {} https://localhost:{}/\n",
            pem.display(),
            pem.display(),
            addr.port()
        )
    });
    format!(
        "unflat-server ({strategy} strategy{tls}) at {scheme}://{addr}\n{trust}\n{}\n\
         Benchmark it:\n  wrk -s wrk_scripts/end-string.lua {scheme}://{addr} -- 1024\n",
        routes_text()
    )
}

/// The banner's routes, the same for every server. The README quotes it; a
/// test keeps the two equal (`UNFLAT_BLESS=1` rewrites the README's copy).
pub fn routes_text() -> String {
    format!(
        "Routes:\n{}\n\
         /end-string bodies: body=flat (the default) keeps the text as one flat\n\
         string, sent as one iovec at its own memory (ascii) or encoded behind\n\
         the head (latin1, twobyte); body=rope keeps it as a ropey rope of\n\
         ~1 KiB chunks, copied behind the head (a frame at a time when longer\n\
         than one): chunks that short cost the kernel more as iovecs than as\n\
         a copy. chunks=K sends the same text as K slices of it, each in the\n\
         body's own form, asked for as the socket drains: Transfer-Encoding:\n\
         chunked to HTTP/1.1, ended by the close to HTTP/1.0.\n",
        routes::usage()
    )
}

/// The field lines the routes send, rendered once, on first use.
fn fields() -> &'static Fields {
    static FIELDS: LazyLock<Fields> = LazyLock::new(Fields::new);
    &FIELDS
}

/// The field lines the routes send.
#[derive(Debug)]
struct Fields {
    text_plain: Line,
    json: Line,
    octet_stream: Line,
    openmetrics: Line,
    prometheus_text: Line,
    /// The methods of every path but /echo.
    allow: Line,
    /// The methods of `OPTIONS *`: /echo takes any.
    allow_any: Line,
    /// A 503 for a limit the server is at now.
    retry_after: Line,
    /// `Cache-Control: no-store` on what describes the server now or one
    /// request (`/healthz`, `/metrics`, `/echo`). The benchmark routes send
    /// none: their bodies are a function of the URL, as in Node's benchmark.
    no_store: Line,
    /// The start of every `/end-string` body's response.
    ok_text: Prepared,
    /// The start of every `/large` payload's.
    ok_octets: Prepared,
}

impl Fields {
    fn new() -> Fields {
        let line = |n, v| Line::parse(n, v).expect("a valid static header line");
        let text_plain = line("Content-Type", "text/plain; charset=utf-8");
        let octet_stream = line("Content-Type", "application/octet-stream");
        Fields {
            ok_text: Prepared::new(Status::OK, [Some(&text_plain), None]),
            ok_octets: Prepared::new(Status::OK, [Some(&octet_stream), None]),
            text_plain,
            json: line("Content-Type", "application/json"),
            octet_stream,
            openmetrics: line("Content-Type", Exposition::OpenMetrics.content_type()),
            prometheus_text: line("Content-Type", Exposition::Prometheus.content_type()),
            allow: line("Allow", "GET, HEAD, OPTIONS"),
            allow_any: line("Allow", "GET, HEAD, OPTIONS, POST, PUT, PATCH, DELETE"),
            retry_after: line("Retry-After", "1"),
            no_store: line("Cache-Control", "no-store"),
        }
    }

    /// The field line an error response carries besides its type.
    fn error_field(&self, field: ErrorField) -> &Line {
        match field {
            ErrorField::Allow => &self.allow,
            ErrorField::RetryAfter => &self.retry_after,
        }
    }

    /// The `Content-Type` of a body: text for `/end-string`, bytes for
    /// `/large`.
    fn content_type(&self, key: BodyKey) -> &Line {
        match key {
            BodyKey::Text(_) => &self.text_plain,
            BodyKey::Large(_) => &self.octet_stream,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::routes_text;

    /// The README quotes [`routes_text`] between these markers, in a
    /// `text` block.
    const BEGIN: &str = "<!-- routes: server/src/demo/mod.rs, routes_text() -->\n";
    const END: &str = "<!-- /routes -->\n";

    /// What the README says of the routes is what the server says: one
    /// source, the README's copy checked (or, with `UNFLAT_BLESS=1`,
    /// rewritten).
    #[test]
    fn readme_quotes_the_routes_text() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
        let readme = std::fs::read_to_string(path).expect("the README");
        let (Some(begin), Some(end)) = (readme.find(BEGIN), readme.find(END)) else {
            panic!("README.md lacks the {BEGIN:?} … {END:?} markers");
        };
        let quoted = &readme[begin + BEGIN.len()..end];
        let wanted = format!("```text\n{}```\n", routes_text());
        if quoted == wanted {
            return;
        }
        if std::env::var_os("UNFLAT_BLESS").is_some() {
            let blessed = format!(
                "{}{wanted}{}",
                &readme[..begin + BEGIN.len()],
                &readme[end..]
            );
            std::fs::write(path, blessed).expect("README.md rewritten");
            return;
        }
        panic!(
            "README.md's routes differ from the server's (routes_text); \
             `UNFLAT_BLESS=1 cargo test -p unflat-server readme` rewrites them.\n\
             README:\n{quoted}\nserver:\n{wanted}"
        );
    }
}
