//! Command-line options and the limits they set.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, ValueEnum};

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

/// `unflat-server`: an HTTP/1.1 server that writes rope-built responses
/// without flattening them.
#[derive(Clone, Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    /// Worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,

    /// How responses are written.
    #[arg(long, value_enum, default_value_t = Strategy::Direct)]
    pub strategy: Strategy,

    /// Largest `len` accepted by /end-string/{len}, in characters.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    pub max_len: usize,

    /// Largest size accepted by /large/{bytes}.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub max_large: usize,

    /// Largest request body /echo accepts, in bytes (larger: 413).
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_body: usize,

    /// Largest request head (request line and fields), in bytes (larger: 431).
    #[arg(long, default_value_t = 16 * 1024)]
    pub max_head: usize,

    /// Largest request line, in bytes (longer: 414).
    #[arg(long, default_value_t = 8 * 1024)]
    pub max_request_line: usize,

    /// Most header fields in a request (more: 431).
    #[arg(long, default_value_t = 100)]
    pub max_fields: usize,

    /// Seconds to receive a whole request head, from its first byte (then:
    /// 408 and close).
    #[arg(long, default_value_t = 10.0)]
    pub head_timeout: f64,

    /// Seconds an idle keep-alive connection is kept open (advertised in
    /// `Keep-Alive: timeout=N`).
    #[arg(long, default_value_t = 5)]
    pub idle_timeout: u64,

    /// Seconds a write may make no progress before the connection is closed.
    #[arg(long, default_value_t = 30.0)]
    pub send_timeout: f64,

    /// Seconds a request body may stay silent before the connection is closed.
    #[arg(long, default_value_t = 30.0)]
    pub body_timeout: f64,

    /// Most connections served at once; more wait in the accept backlog.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,

    /// Requests served on one connection before it is closed (default: no limit).
    #[arg(long)]
    pub max_requests: Option<u64>,

    /// Bytes of copied (not shared) output a connection may have queued before
    /// it stops reading pipelined requests until the queue drains.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_queued_bytes: usize,

    /// Responses a connection may have queued before it stops reading
    /// pipelined requests until the queue drains.
    #[arg(long, default_value_t = 64)]
    pub max_queued_responses: usize,

    /// Bodies shorter than this are copied behind the head (one contiguous
    /// write) rather than sent as iovecs at their own memory.
    #[arg(long, default_value_t = crate::response::DEFAULT_COPY_BELOW)]
    pub copy_below: usize,

    /// Seconds to let responses in progress finish after Ctrl-C / SIGTERM.
    #[arg(long, default_value_t = 30.0)]
    pub grace: f64,

    /// End-string bodies kept in the cache, in bytes of their text.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub cache_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config::parse_from(["unflat-server"])
    }
}

impl Config {
    /// Worker threads to run.
    pub fn worker_threads(&self) -> usize {
        self.workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    /// The head deadline.
    pub fn head_timeout(&self) -> Duration {
        secs(self.head_timeout)
    }

    /// The idle keep-alive timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.idle_timeout)
    }

    /// The send timeout.
    pub fn send_timeout(&self) -> Duration {
        secs(self.send_timeout)
    }

    /// The request body idle timeout.
    pub fn body_timeout(&self) -> Duration {
        secs(self.body_timeout)
    }

    /// The shutdown grace period.
    pub fn grace(&self) -> Duration {
        secs(self.grace)
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}
