//! Command-line options, the limits they set, and their validation.
//!
//! Every option can also come from an environment variable (`UNFLAT_ADDR`,
//! `UNFLAT_WORKERS`, …: the flag's name in upper case with `UNFLAT_`
//! before it); a flag on the command line wins. Every value is checked
//! when the server starts ([`Config::validate`]): one that cannot work is a
//! one-line error and exit status 2, never a panic later. A size takes
//! plain bytes or a unit (`64KiB`, `1MiB`, `2GiB`), and `--help` shows the
//! defaults with theirs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, ValueEnum};
use unflat::queue::Policy;

/// How responses are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Strategy {
    /// Heads and text bodies encoded straight into the write buffer; large
    /// bodies sent as iovecs at their own memory.
    Direct,
    /// The old copying path: head and body collected into one new flat
    /// buffer, then copied into the write buffer; `/large` payloads copied
    /// into a fresh owned buffer first.
    Flatten,
}

impl Strategy {
    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Direct => "direct",
            Strategy::Flatten => "flatten",
        }
    }
}

/// The least severe log messages written (`--log-level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
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

/// The shortest timeout accepted (`--handshake-timeout`, `--head-timeout`,
/// `--idle-timeout`, `--send-timeout`, `--body-timeout`): less gives a server
/// that listens but cannot serve — a TLS handshake, a request head or a
/// write to a client across a continent takes tens to hundreds of
/// milliseconds, and the idle timeout is advertised in whole seconds.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(1);

/// A timeout from the command line: a duration ([`parse_duration`]) of at
/// least [`MIN_TIMEOUT`].
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < MIN_TIMEOUT {
        return Err(format!(
            "{:?} is under 1s, the shortest timeout accepted",
            s.trim()
        ));
    }
    Ok(d)
}

/// A duration from the command line: humantime (`30s`, `500ms`, `2m`,
/// `1h 30m`) or plain seconds (`10`, `0.25`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let d = if let Ok(secs) = s.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "{s:?} is not a duration: seconds must be finite and not negative"
            ));
        }
        Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))?
    } else {
        humantime::parse_duration(s).map_err(|e| {
            format!(
                "{s:?} is not a duration ({e}); use seconds (10, 0.5) or units (30s, 500ms, 2m)"
            )
        })?
    };
    if d > MAX_DURATION {
        return Err(format!("{s:?} is longer than the maximum of 24h"));
    }
    Ok(d)
}

/// A size from the command line: plain bytes (`65536`) or a number with a
/// unit, read by `bytesize` (`64KiB`, `1MiB`, `2GiB`; `1MB` is 10^6 bytes,
/// `1MiB` 2^20; case and a space before the unit do not matter).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    // The number before the unit: digits with at most one fraction (bytesize
    // alone would also take a sign or an exponent).
    let number = s
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .trim_end();
    let number_ok = number.starts_with(|c: char| c.is_ascii_digit())
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.matches('.').count() <= 1;
    match s.parse::<bytesize::ByteSize>() {
        Ok(size) if number_ok => Ok(size.as_u64()),
        _ => Err(format!(
            "{s:?} is not a whole number of bytes, nor a size with a unit (64KiB, 1MiB, 2GiB)"
        )),
    }
}

/// The range a numeric option accepts: the one place each rule is written,
/// read by the command line's parser (so that a value out of range is
/// refused as it is parsed) and by [`Config::validate`] (for a `Config`
/// built in code).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// The flag.
    pub flag: &'static str,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
    /// Whether the values are bytes (shown with units).
    pub bytes: bool,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// The bounds of every numeric option.
pub mod bounds {
    use super::{Bounds, GIB, MIB, TIB};

    /// A count of things.
    const fn n(flag: &'static str, min: u64, max: u64) -> Bounds {
        Bounds {
            flag,
            min,
            max,
            bytes: false,
        }
    }
    /// A size in bytes.
    const fn b(flag: &'static str, min: u64, max: u64) -> Bounds {
        Bounds {
            flag,
            min,
            max,
            bytes: true,
        }
    }
    /// `--workers`.
    pub const WORKERS: Bounds = n("--workers", 1, 1024);
    /// `--max-len`: the longest text body.
    pub const MAX_LEN: Bounds = n("--max-len", 0, GIB);
    /// `--max-large`.
    pub const MAX_LARGE: Bounds = b("--max-large", 0, 64 * GIB);
    /// `--memory-limit`: room for a connection's first buffers, and more.
    pub const MEMORY_LIMIT: Bounds = b("--memory-limit", MIB, TIB);
    /// `--connection-memory`.
    pub const CONNECTION_MEMORY: Bounds = b("--connection-memory", MIB, TIB);
    /// `--max-builds`.
    pub const MAX_BUILDS: Bounds = n("--max-builds", 1, 1024);
    /// `--max-body`: a body /echo holds in memory.
    pub const MAX_BODY: Bounds = b("--max-body", 0, GIB);
    /// `--max-head`: no request line fits in less than 64 bytes.
    pub const MAX_HEAD: Bounds = b("--max-head", 64, MIB);
    /// `--max-request-line`.
    pub const MAX_REQUEST_LINE: Bounds = b("--max-request-line", 16, MIB);
    /// `--max-fields`: the parser's array holds 256.
    pub const MAX_FIELDS: Bounds = n("--max-fields", 1, crate::request::FIELDS_CAP as u64);
    /// `--max-connections`: far below tokio's semaphore maximum (2^61 − 1).
    pub const MAX_CONNECTIONS: Bounds = n("--max-connections", 1, 10_000_000);
    /// `--max-requests`.
    pub const MAX_REQUESTS: Bounds = n("--max-requests", 1, u64::MAX);
    /// `--max-queued-bytes`.
    pub const MAX_QUEUED_BYTES: Bounds = b("--max-queued-bytes", 0, GIB);
    /// `--max-queued-responses`.
    pub const MAX_QUEUED_RESPONSES: Bounds = n("--max-queued-responses", 1, 65536);
    /// `--copy-below`.
    pub const COPY_BELOW: Bounds = b("--copy-below", 0, GIB);
    /// `--frame`: at least what always makes progress.
    pub const FRAME: Bounds = b("--frame", unflat::Encoder::MIN_DST as u64, 16 * MIB);
    /// `--cache-bytes`.
    pub const CACHE_BYTES: Bounds = b("--cache-bytes", 0, TIB);
    /// `--body-min-rate`, bytes per second (0: no extension).
    pub const BODY_MIN_RATE: Bounds = b("--body-min-rate", 0, GIB);
}

/// How to read one numeric option's value from a [`Config`] (`None`: not
/// set).
type ValueOf = fn(&Config) -> Option<u64>;

/// Every numeric option: its bounds, and its value in a [`Config`]. The one
/// list both the help text (each option's range) and [`Config::validate`]
/// go through.
const NUMERIC: [(Bounds, ValueOf); 18] = [
    (bounds::WORKERS, |c| c.workers.map(u64::from)),
    (bounds::MAX_LEN, |c| Some(c.max_len as u64)),
    (bounds::MAX_LARGE, |c| c.max_large.map(|v| v as u64)),
    (bounds::MEMORY_LIMIT, |c| Some(c.memory_limit as u64)),
    (bounds::CONNECTION_MEMORY, |c| {
        c.connection_memory.map(|v| v as u64)
    }),
    (bounds::MAX_BUILDS, |c| c.max_builds.map(u64::from)),
    (bounds::MAX_BODY, |c| Some(c.max_body as u64)),
    (bounds::MAX_HEAD, |c| Some(c.max_head as u64)),
    (bounds::MAX_REQUEST_LINE, |c| {
        Some(c.max_request_line as u64)
    }),
    (bounds::MAX_FIELDS, |c| Some(c.max_fields as u64)),
    (bounds::MAX_CONNECTIONS, |c| Some(c.max_connections as u64)),
    (bounds::MAX_REQUESTS, |c| c.max_requests),
    (bounds::MAX_QUEUED_BYTES, |c| {
        Some(c.max_queued_bytes as u64)
    }),
    (bounds::MAX_QUEUED_RESPONSES, |c| {
        Some(c.max_queued_responses as u64)
    }),
    (bounds::COPY_BELOW, |c| Some(c.copy_below as u64)),
    (bounds::FRAME, |c| Some(c.frame as u64)),
    (bounds::CACHE_BYTES, |c| c.cache_bytes.map(|v| v as u64)),
    (bounds::BODY_MIN_RATE, |c| Some(c.body_min_rate)),
];

impl Bounds {
    /// `Err` saying the range when `v` is outside it.
    pub fn check(self, v: u64) -> Result<(), String> {
        if (self.min..=self.max).contains(&v) {
            return Ok(());
        }
        Err(format!("must be {}", self.range()))
    }

    /// The range in words: `1 to 256`, `64 bytes to 1 MiB`, `at least 1`.
    pub fn range(self) -> String {
        let shown = |n: u64| match [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")]
            .into_iter()
            // Units are powers of two: a multiple has no bit below the unit's.
            .find(|&(unit, _)| self.bytes && n >= unit && n & (unit - 1) == 0)
        {
            Some((unit, name)) => format!("{} {name}", n / unit),
            None if self.bytes => format!("{n} bytes"),
            None => n.to_string(),
        };
        if self.max == u64::MAX {
            format!("at least {}", shown(self.min))
        } else {
            format!("{} to {}", shown(self.min), shown(self.max))
        }
    }

    /// The argument's id (its field in [`Config`]).
    fn id(self) -> String {
        self.flag.trim_start_matches("--").replace('-', "_")
    }

    /// A command-line parser for a value within these bounds. A size in
    /// bytes also takes a unit (`parse_size`).
    pub fn parser<T: TryFrom<u64>>(
        self,
    ) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
        move |s: &str| {
            let v = if self.bytes {
                parse_size(s)?
            } else {
                s.trim()
                    .parse()
                    .map_err(|e| format!("{s:?} is not a whole number ({e})"))?
            };
            self.check(v)?;
            T::try_from(v).map_err(|_| format!("{v} does not fit on this machine"))
        }
    }
}

/// `unflat-server`: an HTTP/1.1 server that writes rope-built responses
/// without flattening them.
#[derive(Clone, Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "UNFLAT_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    /// Bind with SO_REUSEPORT, so that several servers can listen on the
    /// same port (the kernel spreads connections among them; a new one can
    /// start before the old one stops).
    #[arg(long, env = "UNFLAT_REUSE_PORT")]
    pub reuse_port: bool,

    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(
        long,
        env = "UNFLAT_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "UNFLAT_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// Serve HTTPS with a certificate for localhost made at start-up; its
    /// PEM is written to a private directory the banner names (`curl
    /// --cacert FILE`), removed when the server stops.
    #[arg(long, env = "UNFLAT_TLS_SELF_SIGNED", conflicts_with = "tls_cert")]
    pub tls_self_signed: bool,

    /// Time a client has to complete the TLS handshake.
    #[arg(long, env = "UNFLAT_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = parse_timeout)]
    pub handshake_timeout: Duration,

    /// Worker threads (default: one per core).
    #[arg(long, env = "UNFLAT_WORKERS", value_parser = bounds::WORKERS.parser::<u16>())]
    pub workers: Option<u16>,

    /// How responses are written. `flatten` is the old copying path, kept
    /// to be measured: it holds each response whole, whatever the bounds
    /// below say.
    #[arg(long, env = "UNFLAT_STRATEGY", value_enum, default_value_t = Strategy::Direct)]
    pub strategy: Strategy,

    /// Largest `len` accepted by /end-string/{len}, in characters.
    #[arg(long, env = "UNFLAT_MAX_LEN", default_value_t = 16 * 1024 * 1024,
          value_parser = bounds::MAX_LEN.parser::<usize>())]
    pub max_len: usize,

    /// Largest size accepted by /large/{bytes} (default: a quarter of
    /// --memory-limit; at most all of it).
    #[arg(long, env = "UNFLAT_MAX_LARGE", value_parser = bounds::MAX_LARGE.parser::<usize>())]
    pub max_large: Option<usize>,

    /// Memory a client can make the server hold, all together: bodies
    /// cached, being built or referenced by responses in flight, and every
    /// connection's buffers (read buffer, queued output and frames, request
    /// bodies kept for /echo, TLS records). A request that would pass it is
    /// answered 503 with Retry-After, and its connection closed.
    #[arg(long, env = "UNFLAT_MEMORY_LIMIT", default_value = "1GiB",
          value_parser = bounds::MEMORY_LIMIT.parser::<usize>())]
    pub memory_limit: usize,

    /// Of --memory-limit, what all connections' own buffers may hold
    /// together: read buffers, queued output and frames, request bodies
    /// kept for /echo, TLS records (default: half of --memory-limit). Past
    /// it, new connections are refused (503) and a connection whose queue
    /// is not empty waits for it to drain before it answers more.
    #[arg(long, env = "UNFLAT_CONNECTION_MEMORY", alias = "max-queued-total",
          value_parser = bounds::CONNECTION_MEMORY.parser::<usize>())]
    pub connection_memory: Option<usize>,

    /// Bodies built at once, on the blocking pool (default: half the
    /// cores, at least 1). More wait their turn; a connection builds one at
    /// a time, and identical builds in flight are shared.
    #[arg(long, env = "UNFLAT_MAX_BUILDS", value_parser = bounds::MAX_BUILDS.parser::<u16>())]
    pub max_builds: Option<u16>,

    /// Largest request body, in bytes, on any route (larger: 413). /echo
    /// keeps it; other routes read and drop it.
    #[arg(long, env = "UNFLAT_MAX_BODY", default_value = "1MiB",
          value_parser = bounds::MAX_BODY.parser::<usize>())]
    pub max_body: usize,

    /// Largest request head (request line and fields), in bytes (larger:
    /// 431). A chunked body's trailer section counts against what the head
    /// left of it.
    #[arg(long, env = "UNFLAT_MAX_HEAD", default_value = "16KiB",
          value_parser = bounds::MAX_HEAD.parser::<usize>())]
    pub max_head: usize,

    /// Largest request line, in bytes (longer: 414).
    #[arg(long, env = "UNFLAT_MAX_REQUEST_LINE", default_value = "8KiB",
          value_parser = bounds::MAX_REQUEST_LINE.parser::<usize>())]
    pub max_request_line: usize,

    /// Most header fields in a request, trailer fields included (more:
    /// 431).
    #[arg(long, env = "UNFLAT_MAX_FIELDS", default_value_t = 100,
          value_parser = bounds::MAX_FIELDS.parser::<usize>())]
    pub max_fields: usize,

    /// Time to receive a whole request head, from its first byte (then:
    /// 408 and close). Seconds, or with a unit: 10s, 500ms.
    #[arg(long, env = "UNFLAT_HEAD_TIMEOUT", default_value = "10s", value_parser = parse_timeout)]
    pub head_timeout: Duration,

    /// Time an idle keep-alive connection is kept open (advertised in
    /// `Keep-Alive: timeout=N`, in whole seconds).
    #[arg(long, env = "UNFLAT_IDLE_TIMEOUT", default_value = "5s", value_parser = parse_timeout)]
    pub idle_timeout: Duration,

    /// Time a write may make no progress before the connection is reset.
    #[arg(long, env = "UNFLAT_SEND_TIMEOUT", default_value = "30s", value_parser = parse_timeout)]
    pub send_timeout: Duration,

    /// Time to receive a whole request body, trailers included, from the
    /// end of its head, plus a second for every --body-min-rate bytes
    /// received (then: 408 and close). A body trickled slower than that
    /// rate is cut off however often its bytes come.
    #[arg(long, env = "UNFLAT_BODY_TIMEOUT", default_value = "30s", value_parser = parse_timeout)]
    pub body_timeout: Duration,

    /// Bytes per second a request body must average beyond --body-timeout
    /// to keep its connection (0: the body must arrive within
    /// --body-timeout).
    #[arg(long, env = "UNFLAT_BODY_MIN_RATE", default_value = "500",
          value_parser = bounds::BODY_MIN_RATE.parser::<u64>())]
    pub body_min_rate: u64,

    /// Most connections served at once; more wait in the accept backlog.
    #[arg(long, env = "UNFLAT_MAX_CONNECTIONS", default_value_t = 10_000,
          value_parser = bounds::MAX_CONNECTIONS.parser::<usize>())]
    pub max_connections: usize,

    /// Requests served on one connection before it is closed (default: no
    /// limit).
    #[arg(long, env = "UNFLAT_MAX_REQUESTS", value_parser = bounds::MAX_REQUESTS.parser::<u64>())]
    pub max_requests: Option<u64>,

    /// Bytes of copied or encoded output (not shared) a connection may have
    /// queued before it stops reading pipelined requests until the queue
    /// drains.
    #[arg(long, env = "UNFLAT_MAX_QUEUED_BYTES", default_value = "1MiB",
          value_parser = bounds::MAX_QUEUED_BYTES.parser::<usize>())]
    pub max_queued_bytes: usize,

    /// Responses a connection may have queued before it stops reading
    /// pipelined requests until the queue drains.
    #[arg(long, env = "UNFLAT_MAX_QUEUED_RESPONSES", default_value_t = 64,
          value_parser = bounds::MAX_QUEUED_RESPONSES.parser::<usize>())]
    pub max_queued_responses: usize,

    /// Bodies, and chunks of rope bodies, shorter than this many bytes are
    /// copied behind the head rather than sent as iovecs at their own memory.
    #[arg(long, env = "UNFLAT_COPY_BELOW", default_value = "8KiB",
          value_parser = bounds::COPY_BELOW.parser::<usize>())]
    pub copy_below: usize,

    /// Transcoded bodies, and the copied runs of rope bodies, longer than
    /// this many bytes are written a frame of this size at a time as the
    /// socket drains, so that a connection holds one frame of them, not the
    /// whole body.
    #[arg(long, env = "UNFLAT_FRAME", default_value = "64KiB",
          value_parser = bounds::FRAME.parser::<usize>())]
    pub frame: usize,

    /// Time to let responses in progress finish after Ctrl-C / SIGTERM.
    #[arg(long, env = "UNFLAT_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,

    /// Bodies (/end-string and /large) kept in the cache for reuse, in
    /// bytes, within --memory-limit (default: a quarter of it); a larger
    /// body is served and not kept.
    #[arg(long, env = "UNFLAT_CACHE_BYTES", value_parser = bounds::CACHE_BYTES.parser::<usize>())]
    pub cache_bytes: Option<usize>,

    /// The least severe log messages written to stderr. RUST_LOG, when set,
    /// replaces it with its own directives (`warn,unflat_server=debug`).
    #[arg(long, env = "UNFLAT_LOG_LEVEL", value_enum, default_value_t = LogLevel::Info)]
    pub log_level: LogLevel,

    /// Write one line per response to stderr, whatever the log level:
    /// time, peer, method, target, status, body bytes, and the time from
    /// the request head to the response queued.
    #[arg(long, env = "UNFLAT_ACCESS_LOG")]
    pub access_log: bool,
}

impl Default for Config {
    /// What an empty command line gives, whatever the environment says:
    /// every default is stated once, in its argument's attribute.
    fn default() -> Self {
        let cmd = Config::command().mut_args(|a| a.env(None::<&str>));
        let matches = cmd
            .try_get_matches_from(["unflat-server"])
            .expect("the defaults parse");
        Config::from_arg_matches(&matches).expect("the defaults make a Config")
    }
}

impl Config {
    /// The command line: the derived arguments, with each numeric option's
    /// range, from [`bounds`], added to its help.
    pub fn command() -> clap::Command {
        let mut cmd = <Config as CommandFactory>::command();
        for (b, _) in NUMERIC {
            cmd = cmd.mut_arg(b.id(), |a| {
                let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                let help = format!("{}. Accepts {}.", help.trim_end_matches('.'), b.range());
                a.help(help)
            });
        }
        cmd
    }

    /// The configuration the process's arguments and environment give.
    pub fn from_command_line() -> Result<Config, clap::Error> {
        Config::from_arg_matches(&Config::command().try_get_matches()?)
    }

    /// Worker threads to run.
    pub fn worker_threads(&self) -> usize {
        self.workers.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        )
    }

    /// How long after the end of its head a body of which `payload` bytes
    /// have arrived may take in all (see `--body-timeout`): only payload
    /// earns time, never framing (chunk sizes, extensions, trailers).
    pub fn body_deadline(&self, payload: u64) -> Duration {
        // At most a day more, so that the deadline stays within tokio's
        // timers however many bytes arrive.
        let earned = match self.body_min_rate {
            0 => Duration::ZERO,
            rate => Duration::from_millis(payload.saturating_mul(1000) / rate).min(MAX_DURATION),
        };
        self.body_timeout + earned
    }

    /// The largest `/large` payload: `--max-large`, or a quarter of
    /// `--memory-limit`.
    pub fn max_large(&self) -> usize {
        self.max_large.unwrap_or(self.memory_limit / 4)
    }

    /// What connections' buffers may hold together: `--connection-memory`,
    /// or half of `--memory-limit`.
    pub fn connection_memory(&self) -> usize {
        self.connection_memory.unwrap_or(self.memory_limit / 2)
    }

    /// What the cache keeps: `--cache-bytes`, or a quarter of
    /// `--memory-limit`.
    pub fn cache_bytes(&self) -> usize {
        self.cache_bytes.unwrap_or(self.memory_limit / 4)
    }

    /// Builds run at once: `--max-builds`, or half the cores (at least 1),
    /// so that the async workers keep a core to answer on.
    pub fn build_threads(&self) -> usize {
        self.max_builds.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
            usize::from,
        )
    }

    /// Where the TLS certificate comes from; `None` for cleartext HTTP.
    pub fn tls(&self) -> Option<crate::tls::Source> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(crate::tls::Source::Files {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ if self.tls_self_signed => Some(crate::tls::Source::SelfSigned),
            _ => None,
        }
    }

    /// The write queue's copy-or-share policy.
    pub fn policy(&self) -> Policy {
        Policy {
            copy_below: self.copy_below,
            frame: self.frame,
        }
    }

    /// Checks what the command line's parsers cannot see on their own, and
    /// every value of a `Config` built in code: a value that cannot work is
    /// an error naming the option.
    pub fn validate(&self) -> Result<(), String> {
        for (flag, d) in [
            ("--handshake-timeout", self.handshake_timeout),
            ("--head-timeout", self.head_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--send-timeout", self.send_timeout),
            ("--body-timeout", self.body_timeout),
        ] {
            if d < MIN_TIMEOUT {
                return Err(format!(
                    "{flag} {d:?} is under 1s, the shortest timeout accepted"
                ));
            }
            if d > MAX_DURATION {
                return Err(format!("{flag} {d:?} is longer than the maximum of 24h"));
            }
        }
        if self.grace > MAX_DURATION {
            return Err(format!(
                "--grace {:?} is longer than the maximum of 24h",
                self.grace
            ));
        }
        for (bounds, value) in NUMERIC {
            if let Some(v) = value(self) {
                bounds
                    .check(v)
                    .map_err(|rule| format!("{} {v}: {rule}", bounds.flag))?;
            }
        }
        for (flag, v) in [
            ("--max-large", self.max_large),
            ("--cache-bytes", self.cache_bytes),
            ("--connection-memory", self.connection_memory),
        ] {
            let Some(v) = v else { continue };
            if v > self.memory_limit {
                return Err(format!(
                    "{flag} {v} is more than --memory-limit {}, which it is a part of",
                    self.memory_limit
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["unflat-server"];
        argv.extend_from_slice(args);
        let config = Config::try_parse_from(argv).map_err(|e| e.to_string())?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn durations_take_units_or_seconds() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        for bad in ["1e30", "inf", "NaN", "-1", "5 parsecs", "", "25h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn values_that_cannot_work_are_refused_with_the_option_named() {
        for (args, names) in [
            (&["--send-timeout", "1e30"][..], "1e30"),
            (&["--head-timeout", "0"], "--head-timeout"),
            (&["--idle-timeout", "300ms"], "--idle-timeout"),
            (&["--handshake-timeout", "1ms"], "--handshake-timeout"),
            (&["--head-timeout", "1ns"], "--head-timeout"),
            (&["--send-timeout", "999ms"], "--send-timeout"),
            (&["--max-queued-responses", "0"], "max-queued-responses"),
            (&["--max-connections", "0"], "max-connections"),
            (&["--workers", "0"], "workers"),
            (&["--max-fields", "1000"], "max-fields"),
            (&["--max-requests", "0"], "max-requests"),
            (&["--max-large", "68719476737"], "max-large"),
            (&["--max-head", "10"], "max-head"),
            (&["--frame", "2"], "--frame"),
            (
                &["--max-large", "3000000000", "--memory-limit", "2GiB"],
                "--max-large",
            ),
            (&["--cache-bytes", "2GiB"], "--cache-bytes"),
            (&["--max-builds", "0"], "max-builds"),
            (&["--grace", "2d"], "2d"),
        ] {
            let err = parse(args).expect_err(&format!("{args:?} accepted"));
            assert!(err.contains(names), "{args:?}: {err}");
        }
        assert!(parse(&["--send-timeout", "2m", "--grace", "0", "--workers", "3"]).is_ok());
    }

    #[test]
    fn every_numeric_option_states_its_range_and_is_checked() {
        use std::any::TypeId;
        let cmd = Config::command();
        let listed: Vec<String> = NUMERIC.iter().map(|(b, _)| b.id()).collect();
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            let parsed = arg.get_value_parser().type_id();
            let numeric = [
                TypeId::of::<u16>(),
                TypeId::of::<u64>(),
                TypeId::of::<usize>(),
            ]
            .iter()
            .any(|t| parsed == *t);
            assert_eq!(numeric, listed.iter().any(|l| l == id), "--{id}");
        }
        let d = Config::default();
        for (b, value) in NUMERIC {
            let help = cmd
                .get_arguments()
                .find(|a| a.get_id() == b.id().as_str())
                .and_then(|a| a.get_help())
                .unwrap()
                .to_string();
            assert!(help.ends_with(&format!("Accepts {}.", b.range())), "{help}");
            if let Some(v) = value(&d) {
                b.check(v).unwrap();
            }
        }
    }

    #[test]
    fn the_defaults_are_those_documented_and_valid() {
        // docs/robustness.md, "Limits and timeouts".
        let d = Config::default();
        assert_eq!(d.addr, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(
            (d.max_head, d.max_fields, d.max_body),
            (16 << 10, 100, 1 << 20)
        );
        assert_eq!(
            (d.head_timeout, d.body_timeout),
            (Duration::from_secs(10), Duration::from_secs(30))
        );
        assert_eq!((d.body_min_rate, d.connection_memory()), (500, 512 << 20));
        assert_eq!((d.memory_limit, d.cache_bytes()), (1 << 30, 256 << 20));
        assert_eq!(d.max_large(), 256 << 20);
        assert_eq!((d.max_connections, d.max_requests), (10_000, None));
        assert_eq!(
            (d.copy_below, d.frame),
            (Policy::DEFAULT.copy_below, Policy::DEFAULT.frame)
        );
        d.validate().unwrap();
    }
}
