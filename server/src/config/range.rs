//! The values an option takes: a count, a size in bytes (with or without a
//! unit), or a duration — each within a [`Bounds`], which the command line's
//! parser checks as it reads a value and [`Config::validate`] checks again
//! for a `Config` built in code.
//!
//! [`Config::validate`]: super::Config::validate

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub use crate::units::parse_size;

/// A kibibyte.
pub const KIB: u64 = 1 << 10;
/// A mebibyte.
pub const MIB: u64 = 1 << 20;
/// A gibibyte.
pub const GIB: u64 = 1 << 30;
/// A tebibyte.
pub const TIB: u64 = 1 << 40;

/// What a ranged option counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Things: workers, fields, requests.
    Count,
    /// Bytes: plain (`65536`) or with a unit (`64KiB`).
    Bytes,
    /// Time: humantime (`30s`, `500ms`) or plain seconds (`10`, `0.25`),
    /// kept as nanoseconds.
    Duration,
}

/// The values an option accepts, from `min` to `max` inclusive, in `unit`s
/// (nanoseconds for a duration).
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// What the values count.
    pub unit: Unit,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
}

/// A value an option's field holds, as the `u64` its [`Bounds`] bounds.
pub trait Value: Sized + Clone + Send + Sync + 'static {
    /// The value as a number of its range's units.
    fn to_u64(&self) -> u64;
    /// The value of a number within its range; `None` when it does not fit
    /// the type on this machine.
    fn from_u64(v: u64) -> Option<Self>;
}

macro_rules! integer_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn to_u64(&self) -> u64 {
                *self as u64
            }
            fn from_u64(v: u64) -> Option<Self> {
                Self::try_from(v).ok()
            }
        }
    )*};
}
integer_value!(u16, u64, usize);

impl Value for Duration {
    fn to_u64(&self) -> u64 {
        u64::try_from(self.as_nanos()).unwrap_or(u64::MAX)
    }
    fn from_u64(v: u64) -> Option<Self> {
        Some(Duration::from_nanos(v))
    }
}

/// A ranged option's field: a value, or an optional one (`None`: not set,
/// a default derived from other options).
pub trait Field {
    /// The type of the value.
    type Value: Value;
    /// The value, when set.
    fn value(&self) -> Option<u64>;
}

impl<T: Value> Field for T {
    type Value = T;
    fn value(&self) -> Option<u64> {
        Some(self.to_u64())
    }
}

impl<T: Value> Field for Option<T> {
    type Value = T;
    fn value(&self) -> Option<u64> {
        self.as_ref().map(Value::to_u64)
    }
}

impl Bounds {
    /// A count from `min` to `max`.
    pub const fn count(min: u64, max: u64) -> Bounds {
        Bounds {
            unit: Unit::Count,
            min,
            max,
        }
    }

    /// A size from `min` to `max` bytes.
    pub const fn bytes(min: u64, max: u64) -> Bounds {
        Bounds {
            unit: Unit::Bytes,
            min,
            max,
        }
    }

    /// A duration from `min` to `max`.
    pub const fn duration(min: Duration, max: Duration) -> Bounds {
        Bounds {
            unit: Unit::Duration,
            min: min.as_nanos() as u64,
            max: max.as_nanos() as u64,
        }
    }

    /// `Err` saying the range when `v` is outside it.
    pub fn check(self, v: u64) -> Result<(), String> {
        if (self.min..=self.max).contains(&v) {
            return Ok(());
        }
        Err(format!("must be {}", self.describe()))
    }

    /// The range in words: `1 to 256`, `64 bytes to 1 MiB`, `1s to 24h`,
    /// `at least 1`.
    pub fn describe(self) -> String {
        if self.max == u64::MAX {
            format!("at least {}", self.show(self.min))
        } else {
            format!("{} to {}", self.show(self.min), self.show(self.max))
        }
    }

    /// `n` in the range's unit, in its largest whole unit.
    pub fn show(self, n: u64) -> String {
        let units: &[(u64, &str)] = match self.unit {
            Unit::Count => return n.to_string(),
            Unit::Bytes if n == 0 => return "0 bytes".into(),
            Unit::Duration if n == 0 => return "0s".into(),
            Unit::Bytes => &[
                (TIB, " TiB"),
                (GIB, " GiB"),
                (MIB, " MiB"),
                (KIB, " KiB"),
                (1, " bytes"),
            ],
            Unit::Duration => &[
                (3_600_000_000_000, "h"),
                (60_000_000_000, "m"),
                (1_000_000_000, "s"),
                (1_000_000, "ms"),
                (1, "ns"),
            ],
        };
        let (unit, name) = units
            .iter()
            .copied()
            .find(|&(unit, _)| n.is_multiple_of(unit))
            .expect("the last unit is 1");
        format!("{}{name}", n / unit)
    }

    /// A command-line parser for a value within the range: the value read
    /// in the range's unit, checked, and converted to the field's type.
    pub fn parser<T: Value>(
        self,
    ) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
        move |s: &str| {
            let v = match self.unit {
                Unit::Count => s
                    .trim()
                    .parse()
                    .map_err(|e| format!("{s:?} is not a whole number ({e})"))?,
                Unit::Bytes => parse_size(s)?,
                Unit::Duration => parse_duration(s)?.to_u64(),
            };
            self.check(v)?;
            T::from_u64(v).ok_or_else(|| format!("{v} does not fit on this machine"))
        }
    }
}

/// A type an option's `default_value` is written in, read as the command
/// line reads it, for [`Config`](super::Config)'s `Default` (which needs
/// no command-line parser).
pub(super) trait DefaultValue {
    /// The value `s` says.
    ///
    /// # Panics
    /// If `s` does not parse: a default is a constant of the declaration,
    /// which a test reads.
    fn parse_default(s: &str) -> Self;
}

impl DefaultValue for SocketAddr {
    fn parse_default(s: &str) -> Self {
        parse_addr(s).expect("a default address that parses")
    }
}

impl DefaultValue for Duration {
    fn parse_default(s: &str) -> Self {
        parse_duration(s).expect("a default duration that parses")
    }
}

macro_rules! default_size {
    ($($t:ty),*) => {$(
        impl DefaultValue for $t {
            fn parse_default(s: &str) -> Self {
                let v = parse_size(s).expect("a default size that parses");
                Self::from_u64(v).expect("a default that fits")
            }
        }
    )*};
}
default_size!(u64, usize);

/// The host `--addr` listens on when only a port is given.
pub const DEFAULT_HOST: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// An address to listen on from the command line: `HOST:PORT` (an IP
/// address or a host name, resolved now: `localhost:3000`, `[::1]:3000`),
/// `:PORT` or `PORT` (on [`DEFAULT_HOST`]; `0.0.0.0:PORT` listens on every
/// interface). A name that resolves to several addresses takes the first
/// IPv4 one, if any.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let port_only = s.strip_prefix(':').unwrap_or(s);
    if !port_only.is_empty() && port_only.bytes().all(|b| b.is_ascii_digit()) {
        let port: u16 = port_only
            .parse()
            .map_err(|_| format!("port {port_only} is not 0 to 65535"))?;
        return Ok(SocketAddr::from((DEFAULT_HOST, port)));
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!(
            "{s:?} is not HOST:PORT, :PORT or PORT (e.g. 127.0.0.1:3000, localhost:3000, :3000)"
        ));
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{s:?} is not HOST:PORT with a port of 0 to 65535"));
    }
    let found: Vec<SocketAddr> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .collect();
    let ip = found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .ok_or_else(|| format!("{host:?} resolves to no address"))?
        .ip();
    let port = port.parse().expect("checked above");
    Ok(SocketAddr::new(ip, port))
}

/// A duration from the command line: humantime (`30s`, `500ms`, `2m`,
/// `1h 30m`) or plain seconds (`10`, `0.25`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "{s:?} is not a duration: seconds must be finite and not negative"
            ));
        }
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"));
    }
    humantime::parse_duration(s).map_err(|e| {
        format!("{s:?} is not a duration ({e}); use seconds (10, 0.5) or units (30s, 500ms, 2m)")
    })
}
