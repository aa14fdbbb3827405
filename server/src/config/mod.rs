//! The command line: every option declared once (`declare.rs`), the values
//! it takes (`range.rs`), the configuration checked once when the server
//! binds ([`Config::validate`]), and what each layer is given of it, never
//! the whole. Every option can come from an environment variable
//! (`UNFLAT_` and the flag's name); a flag wins. A value that cannot work is
//! a one-line error and exit status 2, never a panic later.

#[macro_use]
mod declare;
#[cfg(feature = "cli")]
mod command;
mod range;
// Through the command line, as a user gives the options.
#[cfg(all(test, feature = "cli"))]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use unflat::head::Line;
use unflat::queue::Policy;

pub use range::{parse_addr, parse_duration, parse_size, Bounds, Field, Unit, Value, DEFAULT_HOST};

use range::{GIB, MIB, TIB};

use crate::h1::{HeadLimits, FIELDS_CAP};
use crate::net::{tls, PaceRules, Timeouts};
use crate::observe::LogFormat;
use crate::response::{Strategy, SERVER};
use crate::session;

/// The least severe log messages written (`--log-level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// Start-up, shutdown, warnings, errors.
    Info,
    /// Also each connection's end and its cause.
    Debug,
    /// Everything the server and its libraries log.
    Trace,
}

/// How log messages are written (`--log-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum EventFormat {
    /// A line of text each, coloured on a terminal.
    Text,
    /// One JSON object per line (`timestamp` in RFC 3339, `level`,
    /// `target`, `message` and the event's fields), for a log pipeline.
    Json,
}

impl LogLevel {
    /// The `tracing` filter directive.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// The longest timeout or grace period accepted: a day. Longer is a
/// mistake (a typo in the unit), and tokio's timers cannot go past ~2 years.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest `--nap`: longer would hold pipelined requests for as long
/// as a slow client takes to send them.
pub const MAX_NAP: Duration = Duration::from_millis(1);

/// The shortest timeout accepted: less gives a server that listens but
/// cannot serve — a TLS handshake, a request head or a write to a client
/// across a continent takes tens to hundreds of milliseconds, and the idle
/// timeout is advertised in whole seconds.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(1);

options! {
/// The server's configuration: one field per command-line option.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct Config {
    /// Address to listen on: HOST:PORT (an IP address or a host name),
    /// :PORT or PORT (on 127.0.0.1; 0.0.0.0:PORT listens on every
    /// interface).
    #[arg(default_value = "127.0.0.1:3000", help_heading = "Network", value_parser = parse_addr)]
    pub addr: SocketAddr,

    /// Bind with SO_REUSEPORT, so that several servers can listen on the
    /// same port (the kernel spreads connections among them; a new one can
    /// start before the old one stops).
    #[arg(help_heading = "Network", value_parser = clap::builder::BoolishValueParser::new())]
    pub reuse_port: bool,

    /// Serve `/metrics`, `/livez` and `/readyz` (503 while shutting down)
    /// on this address, apart from the public port, which then answers
    /// none of them: HOST:PORT, :PORT or PORT, as --addr. Plain HTTP: bind
    /// it where only the operator's network reaches.
    #[arg(value_name = "ADDR", help_heading = "Network", value_parser = parse_addr)]
    pub admin_addr: Option<SocketAddr>,

    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(value_name = "PATH", requires = "tls_key", help_heading = "TLS")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(value_name = "PATH", requires = "tls_cert", help_heading = "TLS")]
    pub tls_key: Option<PathBuf>,

    /// Serve HTTPS with a certificate for localhost made at start-up; its
    /// PEM is written to a private directory the banner names (`curl
    /// --cacert FILE`), removed when the server stops.
    #[arg(conflicts_with = "tls_cert", help_heading = "TLS", value_parser = clap::builder::BoolishValueParser::new())]
    pub tls_self_signed: bool,

    /// The rustls crypto provider HTTPS is built on: `aws-lc-rs` or `ring`.
    /// The certificate's key must be one it takes; without --tls-cert or
    /// --tls-self-signed it has no effect.
    #[arg(value_enum, default_value_t = tls::Provider::AwsLcRs, help_heading = "TLS")]
    pub tls_provider: tls::Provider,

    /// Time a client has to complete the TLS handshake.
    #[arg(default_value = "10s", help_heading = "TLS")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub handshake_timeout: Duration,

    /// Worker threads (default: one per core).
    #[arg(help_heading = "Network")]
    #[range(Bounds::count(1, 1024))]
    pub workers: Option<u16>,

    /// How long a worker that runs out of work sleeps on its own timer
    /// before it waits to be woken, after a stretch of work at least as
    /// long whose reads carried pipelined requests (two or more a read on
    /// average) and that answered at most half of the worker's
    /// connections; 0: never. A client's write that wakes a waiting worker
    /// costs the client an interrupt (in a VM, an exit to the host); the
    /// writes that come during a nap wake no one, and are answered
    /// together after it. A request waits at most this much more (and a
    /// tenth, the worker's timer slack on Linux); one sent alone, not
    /// pipelined, never does.
    #[arg(default_value = "75us", help_heading = "Network")]
    #[range(Bounds::duration(Duration::ZERO, MAX_NAP))]
    pub nap: Duration,

    /// How responses are written. `flatten` is the old copying path, kept
    /// to be measured: it holds each response whole, whatever the bounds
    /// below say.
    #[arg(value_enum, default_value_t = Strategy::Direct, help_heading = "Bodies")]
    pub strategy: Strategy,

    /// Memory a client can make the server hold, all together: bodies
    /// cached, being built or referenced by responses in flight, and every
    /// connection's buffers (read buffer, queued output and frames, request
    /// bodies kept for /echo, TLS records). A request that would pass it is
    /// answered 503 with Retry-After, and its connection closed.
    #[arg(default_value = "1GiB", help_heading = "Limits")]
    #[range(Bounds::bytes(MIB, TIB))]
    pub memory_limit: usize,

    /// Of --memory-limit, what all connections' own buffers may hold
    /// together: read buffers, queued output and frames, request bodies
    /// kept for /echo, TLS records (default: half of --memory-limit). Past
    /// it, new connections are refused (503) and a connection whose queue
    /// is not empty waits for it to drain before it answers more.
    #[arg(alias = "max-queued-total", help_heading = "Limits")]
    #[range(Bounds::bytes(MIB, TIB))]
    pub connection_memory: Option<usize>,

    /// Largest request body, in bytes, on any route (larger: 413). /echo
    /// keeps it; other routes read and drop it.
    #[arg(default_value = "1MiB", help_heading = "Limits")]
    #[range(Bounds::bytes(0, GIB))]
    pub max_body: usize,

    /// Largest request head (request line and fields), in bytes (larger:
    /// 431). A chunked body's trailer section counts against what the head
    /// left of it.
    #[arg(default_value = "16KiB", help_heading = "Limits")]
    #[range(Bounds::bytes(64, MIB))]
    pub max_head: usize,

    /// Largest request line, in bytes (longer: 414).
    #[arg(default_value = "8KiB", help_heading = "Limits")]
    #[range(Bounds::bytes(16, MIB))]
    pub max_request_line: usize,

    /// Most header fields in a request, trailer fields included (more:
    /// 431).
    #[arg(default_value_t = 100, help_heading = "Limits")]
    #[range(Bounds::count(1, FIELDS_CAP as u64))]
    pub max_fields: usize,

    /// Time to receive a whole request head, from its first byte (then:
    /// 408 and close). Seconds, or with a unit: 10s, 500ms.
    #[arg(default_value = "10s", help_heading = "Timeouts")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub head_timeout: Duration,

    /// Time an idle keep-alive connection is kept open (advertised in
    /// `Keep-Alive: timeout=N`, in whole seconds).
    #[arg(default_value = "5s", help_heading = "Timeouts")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub idle_timeout: Duration,

    /// Time a response may wait with the client acknowledging none of it
    /// (it stopped reading) before the connection is reset; longer for a
    /// client whose acknowledgements came in steps further apart (three
    /// times the longest wait between two), as a slow reader's do; and
    /// --min-send-rate-grace more.
    #[arg(default_value = "30s", help_heading = "Timeouts")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub send_timeout: Duration,

    /// Bytes per second a client must keep acknowledging while a response
    /// waits for it: each step buys its bytes' time at this rate and
    /// --min-send-rate-grace, from its own moment, at most what the
    /// client's receive window holds at this rate, never added to what
    /// earlier steps bought; slower, the connection is reset (as Kestrel's
    /// MinResponseDataRate).
    #[arg(default_value = "240", help_heading = "Timeouts")]
    #[range(Bounds::bytes(64, GIB))]
    pub min_send_rate: u64,

    /// Time before --min-send-rate counts, from the first acknowledgement of
    /// a response that waits for its client; also added to --send-timeout,
    /// for acknowledgements that come in uneven steps.
    #[arg(default_value = "5s", help_heading = "Timeouts")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub min_send_rate_grace: Duration,

    /// Time to receive a whole request body, trailers included, from the
    /// end of its head, plus a second for every --body-min-rate bytes
    /// received (then: 408 and close). A body trickled slower than that
    /// rate is cut off however often its bytes come.
    #[arg(default_value = "30s", help_heading = "Timeouts")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub body_timeout: Duration,

    /// Bytes per second a request body must average beyond --body-timeout
    /// to keep its connection (0: the body must arrive within
    /// --body-timeout).
    #[arg(default_value = "500", help_heading = "Timeouts")]
    #[range(Bounds::bytes(0, GIB))]
    pub body_min_rate: u64,

    /// The most a whole request body may take from the end of its head,
    /// whatever its payload earned at --body-min-rate (then: 408 and
    /// close). Raised to --body-timeout when set below it.
    #[arg(default_value = "60s", help_heading = "Timeouts")]
    #[range(Bounds::duration(MIN_TIMEOUT, MAX_DURATION))]
    pub max_body_time: Duration,

    /// Most connections served at once; more wait in the accept backlog.
    #[arg(default_value_t = 10_000, help_heading = "Network")]
    #[range(Bounds::count(1, 10_000_000))]
    pub max_connections: usize,

    /// Requests served on one connection before it is closed (default: no
    /// limit).
    #[arg(help_heading = "Limits")]
    #[range(Bounds::count(1, u64::MAX))]
    pub max_requests: Option<u64>,

    /// Bytes of copied or encoded output (not shared) a connection may have
    /// queued before it stops reading pipelined requests until the queue
    /// drains.
    #[arg(default_value = "1MiB", help_heading = "Limits")]
    #[range(Bounds::bytes(0, GIB))]
    pub max_queued_bytes: usize,

    /// Responses a connection may have queued before it stops reading
    /// pipelined requests until the queue drains.
    #[arg(default_value_t = 64, help_heading = "Limits")]
    #[range(Bounds::count(1, 65536))]
    pub max_queued_responses: usize,

    /// Bodies, and chunks of rope bodies, shorter than this many bytes are
    /// copied behind the head rather than sent as iovecs at their own memory.
    #[arg(default_value = "8KiB", help_heading = "Bodies")]
    #[range(Bounds::bytes(0, GIB))]
    pub copy_below: usize,

    /// Transcoded bodies, and the copied runs of rope bodies, longer than
    /// this many bytes are written a frame of this size at a time as the
    /// socket drains, so that a connection holds one frame of them, not the
    /// whole body.
    #[arg(default_value = "64KiB", help_heading = "Bodies")]
    #[range(Bounds::bytes(unflat::Encoder::MIN_DST as u64, 16 * MIB))]
    pub frame: usize,

    /// The `Server` field sent on every final response (default: none):
    /// product tokens such as `unflat/0.1` (RFC 9110 §10.2.4), at most
    /// 128 characters, each at most U+00FF, no control character and no
    /// whitespace first or last. A response whose own fields name `Server`
    /// keeps its own.
    #[arg(value_name = "VALUE", help_heading = "Responses", value_parser = parse_server_header)]
    pub server_header: Option<String>,

    /// Time to let responses in progress finish after Ctrl-C / SIGTERM
    /// (after --shutdown-delay).
    #[arg(default_value = "30s", help_heading = "Timeouts")]
    #[range(Bounds::duration(Duration::ZERO, MAX_DURATION))]
    pub grace: Duration,

    /// Time to keep accepting and serving after Ctrl-C / SIGTERM, /healthz
    /// answering 503 and each response closing its connection, before the
    /// listener closes and the --grace drain begins: a load balancer (a
    /// Kubernetes Service) goes on sending new connections for a few
    /// seconds after it is told. A second signal ends it at once.
    #[arg(default_value = "0s", help_heading = "Timeouts")]
    #[range(Bounds::duration(Duration::ZERO, MAX_DURATION))]
    pub shutdown_delay: Duration,

    /// The least severe log messages written to stderr. RUST_LOG, when set,
    /// replaces it with its own directives (`warn,unflat_server=debug`).
    #[arg(value_enum, default_value_t = LogLevel::Info, help_heading = "Logging")]
    pub log_level: LogLevel,

    /// How log messages are written: `text`, or `json`, one object per line.
    #[arg(value_enum, default_value_t = EventFormat::Text, help_heading = "Logging")]
    pub log_format: EventFormat,

    /// Write one line per response to stderr, whatever the log level,
    /// once its last byte is sent: peer, method, target, version, Host,
    /// status, body bytes, the time from the request head to the last
    /// byte, Referer and User-Agent (see --access-log-format). An
    /// application whose observer writes none refuses it.
    #[arg(help_heading = "Logging", value_parser = clap::builder::BoolishValueParser::new())]
    pub access_log: bool,

    /// The access log's format: `unflat` (key=value pairs, with the
    /// duration), `combined` (the Combined Log Format of Apache and nginx,
    /// which log tooling reads) or `json` (one object per line in the
    /// events' schema: timestamp, level, message, peer, method, uri,
    /// version, host, status, bytes, duration in seconds, referer,
    /// user_agent, target). Unset, it follows --log-format: `json` with
    /// `json`, else `unflat`.
    #[arg(value_enum, help_heading = "Logging")]
    pub access_log_format: Option<LogFormat>,
}
}

/// The longest `--server-header` value, in characters: a product, its
/// version and a comment fit; the whole head stays short enough to be kept
/// as a template (`response/template.rs`).
pub const MAX_SERVER_HEADER: usize = 128;

/// `--server-header`'s value, checked as every head will write it: `Err`
/// says what is wrong and where.
pub fn parse_server_header(value: &str) -> Result<String, String> {
    server_line(value).map(|_| value.to_string())
}

/// The `Server` line of `value`, rendered once for every response.
fn server_line(value: &str) -> Result<Line, String> {
    let chars = value.chars().count();
    if chars == 0 {
        return Err("empty (leave it out to send no Server field)".into());
    }
    if chars > MAX_SERVER_HEADER {
        return Err(format!("{chars} characters, more than {MAX_SERVER_HEADER}"));
    }
    Line::parse(SERVER, value).map_err(|e| e.to_string())
}

/// `Err` naming `flag` when its value `v`, a part of `--memory-limit`, is
/// more than the whole: for the core's parts as for an application's (a
/// cache of its own).
pub fn within_memory_limit(config: &Config, flag: &str, v: Option<usize>) -> Result<(), String> {
    match v {
        Some(v) if v > config.memory_limit => Err(format!(
            "{flag} {v} is more than --memory-limit {}, which it is a part of",
            config.memory_limit
        )),
        _ => Ok(()),
    }
}

impl Config {
    /// Checks every value of the configuration, for one built in code as
    /// for one the command line gave (whose parsers checked each range
    /// already): a value that cannot work is an error naming the option.
    pub fn validate(&self) -> Result<(), String> {
        for r in RANGED {
            if let Some(v) = (r.value)(self) {
                r.range
                    .check(v)
                    .map_err(|rule| format!("{} {}: {rule}", r.flag(), r.show(v)))?;
            }
        }
        within_memory_limit(self, "--connection-memory", self.connection_memory)?;
        self.server_line().map(|_| ())
    }

    /// The `Server` line every final response carries, if any
    /// (`--server-header`).
    pub fn server_line(&self) -> Result<Option<Line>, String> {
        let Some(value) = self.server_header.as_deref() else {
            return Ok(None);
        };
        server_line(value)
            .map(Some)
            .map_err(|e| format!("--server-header {value:?}: {e}"))
    }

    /// Worker threads to run: `--workers`, or one per core.
    pub fn worker_threads(&self) -> usize {
        self.workers.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        )
    }

    /// What connections' buffers may hold together: `--connection-memory`,
    /// or half of `--memory-limit`.
    pub fn connection_memory(&self) -> usize {
        self.connection_memory.unwrap_or(self.memory_limit / 2)
    }

    /// Where the TLS certificate comes from; `None` for cleartext HTTP.
    pub fn tls(&self) -> Option<tls::CertSource> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(tls::CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ if self.tls_self_signed => Some(tls::CertSource::SelfSigned),
            _ => None,
        }
    }

    /// The access log's format, when there is one (`--access-log`,
    /// `--access-log-format`).
    pub fn access_log(&self) -> Option<LogFormat> {
        let follows = match self.log_format {
            EventFormat::Json => LogFormat::Json,
            EventFormat::Text => LogFormat::Unflat,
        };
        self.access_log
            .then(|| self.access_log_format.unwrap_or(follows))
    }

    /// The limits a session keeps to.
    pub fn session(&self) -> session::Limits {
        session::Limits {
            head: HeadLimits {
                head: self.max_head,
                request_line: self.max_request_line,
                fields: self.max_fields,
            },
            max_body: self.max_body,
            max_queued_bytes: self.max_queued_bytes,
            max_queued_responses: self.max_queued_responses,
            max_requests: self.max_requests,
        }
    }

    /// The timeouts a connection keeps.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts {
            handshake: self.handshake_timeout,
            head: self.head_timeout,
            idle: self.idle_timeout,
            pace: PaceRules {
                send_timeout: self.send_timeout,
                min_rate: self.min_send_rate,
                grace: self.min_send_rate_grace,
            },
            body: self.body_timeout,
            body_min_rate: self.body_min_rate,
            max_body: self.max_body_time.max(self.body_timeout),
        }
    }

    /// The write queue's copy-or-share policy.
    pub fn policy(&self) -> Policy {
        Policy {
            copy_below: self.copy_below,
            frame: self.frame,
        }
    }
}
