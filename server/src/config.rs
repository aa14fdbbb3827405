//! Command-line options, the limits they set, and their validation.
//!
//! Every option can also come from an environment variable (`UNFLAT_ADDR`,
//! `UNFLAT_WORKERS`, …: the flag's name in upper case with `UNFLAT_`
//! before it); a flag on the command line wins. Every value is checked
//! when the server starts ([`Config::validate`]): one that cannot work is a
//! one-line error and exit status 2, never a panic later.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, ValueEnum};
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

/// The longest timeout or grace period accepted: a day. Longer is a
/// mistake (a typo in the unit), and tokio's timers cannot go past ~2 years.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

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

/// `unflat-server`: an HTTP/1.1 server that writes rope-built responses
/// without flattening them.
#[derive(Clone, Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "UNFLAT_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,

    /// Worker threads (default: one per core).
    #[arg(long, env = "UNFLAT_WORKERS")]
    pub workers: Option<u16>,

    /// How responses are written.
    #[arg(long, env = "UNFLAT_STRATEGY", value_enum, default_value_t = Strategy::Direct)]
    pub strategy: Strategy,

    /// Largest `len` accepted by /end-string/{len}, in characters (at most
    /// 2^30).
    #[arg(long, env = "UNFLAT_MAX_LEN", default_value_t = 16 * 1024 * 1024)]
    pub max_len: usize,

    /// Largest size accepted by /large/{bytes} (at most 64 GiB).
    #[arg(long, env = "UNFLAT_MAX_LARGE", default_value_t = 1024 * 1024 * 1024)]
    pub max_large: usize,

    /// Bytes of `/large` payloads held at once, cached or being built (a
    /// payload larger than this is refused with 503).
    #[arg(long, env = "UNFLAT_LARGE_BYTES", default_value_t = 2 * 1024 * 1024 * 1024)]
    pub large_bytes: usize,

    /// Largest request body /echo accepts, in bytes (larger: 413).
    #[arg(long, env = "UNFLAT_MAX_BODY", default_value_t = 1024 * 1024)]
    pub max_body: usize,

    /// Largest request head (request line and fields), in bytes (larger:
    /// 431; at least 64).
    #[arg(long, env = "UNFLAT_MAX_HEAD", default_value_t = 16 * 1024)]
    pub max_head: usize,

    /// Largest request line, in bytes (longer: 414; at least 16).
    #[arg(long, env = "UNFLAT_MAX_REQUEST_LINE", default_value_t = 8 * 1024)]
    pub max_request_line: usize,

    /// Most header fields in a request (more: 431; 1 to 256).
    #[arg(long, env = "UNFLAT_MAX_FIELDS", default_value_t = 100)]
    pub max_fields: usize,

    /// Time to receive a whole request head, from its first byte (then:
    /// 408 and close). Seconds, or with a unit: 10s, 500ms.
    #[arg(long, env = "UNFLAT_HEAD_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub head_timeout: Duration,

    /// Time an idle keep-alive connection is kept open (advertised in
    /// `Keep-Alive: timeout=N`, in whole seconds).
    #[arg(long, env = "UNFLAT_IDLE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Time a write may make no progress before the connection is reset.
    #[arg(long, env = "UNFLAT_SEND_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub send_timeout: Duration,

    /// Time a request body may stay silent before the connection is closed.
    #[arg(long, env = "UNFLAT_BODY_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub body_timeout: Duration,

    /// Most connections served at once; more wait in the accept backlog.
    #[arg(long, env = "UNFLAT_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// Requests served on one connection before it is closed (default: no
    /// limit; at least 1).
    #[arg(long, env = "UNFLAT_MAX_REQUESTS")]
    pub max_requests: Option<u64>,

    /// Bytes of copied (not shared) output a connection may have queued before
    /// it stops reading pipelined requests until the queue drains.
    #[arg(long, env = "UNFLAT_MAX_QUEUED_BYTES", default_value_t = 1024 * 1024)]
    pub max_queued_bytes: usize,

    /// Responses a connection may have queued before it stops reading
    /// pipelined requests until the queue drains (1 to 65536).
    #[arg(long, env = "UNFLAT_MAX_QUEUED_RESPONSES", default_value_t = 64)]
    pub max_queued_responses: usize,

    /// Bodies, and chunks of rope bodies, shorter than this many bytes are
    /// copied behind the head rather than sent as iovecs at their own memory.
    #[arg(long, env = "UNFLAT_COPY_BELOW", default_value_t = Policy::DEFAULT.copy_below)]
    pub copy_below: usize,

    /// Transcoded bodies longer than this many bytes are encoded a frame of
    /// this size at a time as the socket drains, so that a connection holds
    /// one frame of them, not the whole body (at least 4).
    #[arg(long, env = "UNFLAT_FRAME", default_value_t = Policy::DEFAULT.frame)]
    pub frame: usize,

    /// Time to let responses in progress finish after Ctrl-C / SIGTERM.
    #[arg(long, env = "UNFLAT_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,

    /// End-string bodies kept in the cache, in bytes of their text.
    #[arg(long, env = "UNFLAT_CACHE_BYTES", default_value_t = 256 * 1024 * 1024)]
    pub cache_bytes: usize,
}

impl Default for Config {
    /// The defaults, whatever the environment says.
    fn default() -> Self {
        Config {
            addr: "127.0.0.1:3000".parse().expect("a valid address"),
            workers: None,
            strategy: Strategy::Direct,
            max_len: 16 * 1024 * 1024,
            max_large: 1024 * 1024 * 1024,
            large_bytes: 2 * 1024 * 1024 * 1024,
            max_body: 1024 * 1024,
            max_head: 16 * 1024,
            max_request_line: 8 * 1024,
            max_fields: 100,
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            send_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            max_requests: None,
            max_queued_bytes: 1024 * 1024,
            max_queued_responses: 64,
            copy_below: Policy::DEFAULT.copy_below,
            frame: Policy::DEFAULT.frame,
            grace: Duration::from_secs(30),
            cache_bytes: 256 * 1024 * 1024,
        }
    }
}

impl Config {
    /// Worker threads to run.
    pub fn worker_threads(&self) -> usize {
        self.workers.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            usize::from,
        )
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
            ("--head-timeout", self.head_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--send-timeout", self.send_timeout),
            ("--body-timeout", self.body_timeout),
        ] {
            if d.is_zero() {
                return Err(format!(
                    "{flag} 0 would close every connection at once; give a positive time"
                ));
            }
            if d > MAX_DURATION {
                return Err(format!("{flag} {d:?} is longer than the maximum of 24h"));
            }
        }
        if self.idle_timeout < Duration::from_secs(1) {
            return Err(format!(
                "--idle-timeout {:?} is under a second; it is advertised in whole seconds (Keep-Alive: timeout=N)",
                self.idle_timeout
            ));
        }
        if self.grace > MAX_DURATION {
            return Err(format!(
                "--grace {:?} is longer than the maximum of 24h",
                self.grace
            ));
        }
        let checks: [(&str, bool, &str); 10] = [
            (
                "--workers",
                self.workers.is_some_and(|w| w == 0 || w > 1024),
                "1 to 1024",
            ),
            (
                "--max-fields",
                !(1..=crate::request::FIELDS_CAP).contains(&self.max_fields),
                "1 to 256",
            ),
            ("--max-head", self.max_head < 64, "at least 64"),
            (
                "--max-request-line",
                self.max_request_line < 16,
                "at least 16",
            ),
            ("--max-connections", self.max_connections == 0, "at least 1"),
            ("--max-requests", self.max_requests == Some(0), "at least 1"),
            (
                "--max-queued-responses",
                self.max_queued_responses == 0,
                "at least 1",
            ),
            (
                "--frame",
                self.frame < unflat::Encoder::MIN_DST,
                "at least 4",
            ),
            ("--max-len", self.max_len > 1 << 30, "at most 2^30"),
            ("--max-large", self.max_large > 64 << 30, "at most 64 GiB"),
        ];
        for (flag, bad, rule) in checks {
            if bad {
                return Err(format!("{flag}: must be {rule}"));
            }
        }
        if self.max_large > self.large_bytes {
            return Err(format!(
                "--max-large {} is more than --large-bytes {}: the largest payload could never be held",
                self.max_large, self.large_bytes
            ));
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
            (&["--max-queued-responses", "0"], "max-queued-responses"),
            (&["--max-connections", "0"], "max-connections"),
            (&["--workers", "0"], "workers"),
            (&["--max-fields", "1000"], "max-fields"),
            (&["--max-requests", "0"], "max-requests"),
            (&["--max-large", "68719476737"], "max-large"),
            (&["--max-head", "10"], "max-head"),
            (&["--frame", "2"], "--frame"),
            (
                &["--max-large", "3000000000", "--large-bytes", "1000"],
                "--max-large",
            ),
            (&["--grace", "2d"], "2d"),
        ] {
            let err = parse(args).expect_err(&format!("{args:?} accepted"));
            assert!(err.contains(names), "{args:?}: {err}");
        }
        assert!(parse(&["--send-timeout", "2m", "--grace", "0", "--workers", "3"]).is_ok());
    }

    #[test]
    fn the_default_is_what_an_empty_command_line_gives() {
        let parsed = Config::try_parse_from(["unflat-server"]).unwrap();
        assert_eq!(format!("{parsed:?}"), format!("{:?}", Config::default()));
        parsed.validate().unwrap();
    }
}
