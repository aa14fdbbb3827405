//! Which reply a request gets: the routes, each path written once in
//! [`TABLE`] (which also gives the help text and the metrics' labels), and
//! their arguments and errors. No IO and no encoding here.

use std::fmt::Write as _;
use std::time::Duration;

use unflat::head::Status;

use super::body::{BodyKey, Form, Key, Kind};
use super::chunks::{Plan, MAX_CHUNKS, MAX_EVERY_MS, MAX_PACED};
use super::query::{bad_request, echo_format, once, parse_count, refused};
use super::reply::{Answer, Made};
use super::{RouteLimits, Routed};
use unflat_server::h1::{self, QueryError, RequestHead};
use unflat_server::observe::Exposition;

/// The routes, as the metrics count requests by them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /`.
    Help,
    /// `/end-string/{len}`.
    EndString,
    /// `/large/{size}`.
    Large,
    /// `/echo`.
    Echo,
    /// `/healthz`.
    Healthz,
    /// `/metrics`.
    Metrics,
    /// `OPTIONS *`.
    ServerWide,
    /// No route: a path the server does not have (404), or a request
    /// refused before it was routed.
    Unmatched,
}

/// A route's path and what the help text says of it. A path that ends in
/// `/` takes an argument: it matches every path that begins with it.
struct Listing {
    route: Route,
    path: &'static str,
    /// The methods, the argument and the query, as the help text shows.
    usage: &'static str,
}

/// Every route that has a path, in the order the help text lists them.
const TABLE: [Listing; 7] = [
    Listing {
        route: Route::EndString,
        path: "/end-string/",
        usage: "GET|HEAD /end-string/{len}  text of len characters: ?kind=ascii|latin1|twobyte, ?body=flat|rope, ?chunks=K (streamed in K chunks, at most one per character), &every=MS (chunk i due i × MS ms after the first, on a timer; chunks × every at most 60 s)",
    },
    Listing {
        route: Route::Large,
        path: "/large/",
        usage: "GET|HEAD /large/{size}      size bytes: digits, or with a unit (kB, MB, GB: 1000s; KiB, MiB, GiB: 1024s; 1.5KiB)",
    },
    Listing {
        route: Route::Echo,
        path: "/echo",
        usage: "*        /echo              the request as JSON, strings base64-encoded; ?format=raw: the body",
    },
    Listing {
        route: Route::Healthz,
        path: "/healthz",
        usage: "GET|HEAD /healthz           200 ok; 503 while shutting down",
    },
    Listing {
        route: Route::Metrics,
        path: "/metrics",
        usage: "GET|HEAD /metrics           Prometheus text 0.0.4, or OpenMetrics when Accept asks for it",
    },
    Listing {
        route: Route::Help,
        path: "/",
        usage: "GET|HEAD /                  this text",
    },
    Listing {
        route: Route::ServerWide,
        path: "*",
        usage: "OPTIONS  *                  and every path above: 204 with Allow",
    },
];

impl Route {
    /// Every route, in the order of [`Route::index`].
    pub const ALL: [Route; 8] = [
        Route::Help,
        Route::EndString,
        Route::Large,
        Route::Echo,
        Route::Healthz,
        Route::Metrics,
        Route::ServerWide,
        Route::Unmatched,
    ];

    /// The route's position in [`Route::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The route as a metric label: its path without the argument.
    pub fn label(self) -> &'static str {
        TABLE
            .iter()
            .find(|e| e.route == self)
            .map_or("unmatched", |e| match e.path {
                "/" => "/",
                path => path.trim_end_matches('/'),
            })
    }

    /// The route `path` takes, and its argument (what follows the route's
    /// path, for a path that takes one).
    fn of(path: &str) -> Option<(Route, &str)> {
        TABLE.iter().find_map(|e| {
            if e.path.len() > 1 && e.path.ends_with('/') {
                path.strip_prefix(e.path)
                    .map(|argument| (e.route, argument))
            } else {
                (path == e.path).then_some((e.route, ""))
            }
        })
    }
}

/// The routes, a line each, for the help text and 404s.
pub fn usage() -> String {
    TABLE.iter().fold(String::new(), |mut text, e| {
        let _ = writeln!(text, "  {}", e.usage);
        text
    })
}

/// Chooses the reply for a request head within `limits`, says which route
/// gave it, and makes it ready (`ready`: [`Answer::resolve`]) before it is
/// put in the [`Routed`] it returns — made ready where it was made, so
/// that it is not moved once more after.
#[inline(always)]
pub fn route(
    limits: RouteLimits,
    head: &RequestHead<'_>,
    ready: impl FnOnce(Answer) -> Answer,
) -> Routed {
    let path = head.path;
    let (route, answer) = match Route::of(path) {
        Some((route, argument)) => (route, reply(limits, route, argument, head)),
        None => (Route::Unmatched, not_found(path)),
    };
    Routed {
        route,
        answer: ready(answer),
    }
}

#[inline]
fn reply(limits: RouteLimits, route: Route, argument: &str, head: &RequestHead<'_>) -> Answer {
    let path = head.path;
    match route {
        // Only OPTIONS gets this far with `*` (the request's checks).
        Route::ServerWide => return Answer::OptionsAny,
        Route::Echo => return echo(head),
        _ => {}
    }
    if head.method == "OPTIONS" {
        return Answer::Options;
    }
    if head.method != "GET" && head.method != "HEAD" {
        return Answer::method_not_allowed(head.method, path);
    }
    let no_query = |reply: Answer| match head.query {
        None => reply,
        Some(_) => bad_request(format!("{path} takes no query")),
    };
    match route {
        Route::Help => no_query(Answer::Help),
        Route::Healthz | Route::Metrics if limits.admin_apart => Answer::error(
            Status::NOT_FOUND,
            format!("{path} is served at the admin address (--admin-addr)"),
        ),
        Route::Healthz => no_query(Answer::Health),
        Route::Metrics => no_query(Answer::made(Made::Metrics(Exposition::from_accept(
            head.field("accept"),
        )))),
        Route::EndString => end_string(limits, argument, head),
        Route::Large => large(limits, argument, head.query).unwrap_or_else(|e| e),
        Route::ServerWide | Route::Echo | Route::Unmatched => {
            unreachable!("answered above, or never routed")
        }
    }
}

/// `/end-string/{len}`: the text's key; a query is read out of line
/// ([`end_string_query`]), so that the common request, without one, builds
/// its answer where it is used. Refusals are answers too: what each path
/// gives is an answer in two registers, never a `Result` of two answers,
/// which is stored to be merged and copied before its pieces are written.
#[inline(always)]
fn end_string(limits: RouteLimits, len: &str, head: &RequestHead<'_>) -> Answer {
    let len = match parse_count("len", len) {
        Ok(len) if len > limits.max_len => return too_long(len, limits),
        Ok(len) => len,
        Err(refused) => return refused,
    };
    match head.query {
        None => Answer::Body(BodyKey::Text(Key {
            len,
            kind: Kind::default(),
            form: Form::default(),
        })),
        // Nothing to decode in nearly every query: its pairs as sent.
        Some(query) if head.query_is_plain() => end_string_query(len, h1::plain_pairs(Some(query))),
        Some(_) => end_string_query(len, head.query_pairs()),
    }
}

#[cold]
fn too_long(len: usize, limits: RouteLimits) -> Answer {
    bad_request(format!(
        "len {len} exceeds the limit of {} characters (--max-len)",
        limits.max_len
    ))
}

/// [`end_string`] for a text of `len` characters asked with a query, its
/// pairs (as sent, or decoded).
#[inline(never)]
fn end_string_query<T: std::ops::Deref<Target = str>>(
    len: usize,
    pairs: impl Iterator<Item = Result<(T, T), QueryError>>,
) -> Answer {
    let mut asked = Asked::default();
    for pair in pairs {
        let set = match pair {
            Ok((name, value)) => asked.set(&name, &value),
            Err(e) => Err(refused(e)),
        };
        if let Err(refusal) = set {
            return refusal;
        }
    }
    asked.answer(len)
}

/// The parameters an `/end-string` query gives, each at most once.
#[derive(Default)]
struct Asked {
    kind: Option<Kind>,
    form: Option<Form>,
    chunks: Option<usize>,
    every: Option<Duration>,
}

impl Asked {
    /// Sets the parameter `name` to `value`, or refuses it. Every refusal
    /// is made out of line: this runs for each pair of every query.
    #[inline(always)]
    fn set(&mut self, name: &str, value: &str) -> Result<(), Answer> {
        match name {
            "kind" => match Kind::parse(value) {
                Some(kind) => once(&mut self.kind, name, kind),
                None => Err(unknown(name, value, "ascii, latin1 or twobyte")),
            },
            "body" => match Form::parse(value) {
                Some(form) => once(&mut self.form, name, form),
                None => Err(unknown(name, value, "flat or rope")),
            },
            "chunks" => {
                let count = parse_count(name, value)?;
                if count == 0 || count > MAX_CHUNKS {
                    return Err(out_of_range(name, count as u64, MAX_CHUNKS as u64, ""));
                }
                once(&mut self.chunks, name, count)
            }
            "every" => {
                let ms = parse_count(name, value)? as u64;
                if ms == 0 || ms > MAX_EVERY_MS {
                    return Err(out_of_range(name, ms, MAX_EVERY_MS, " milliseconds"));
                }
                once(&mut self.every, name, Duration::from_millis(ms))
            }
            _ => Err(unknown_parameter(name)),
        }
    }

    /// The answer for a text of `len` characters, or the refusal of a
    /// pacing without chunks or of one that holds the connection too long.
    #[inline(always)]
    fn answer(self, len: usize) -> Answer {
        let key = BodyKey::Text(Key {
            len,
            kind: self.kind.unwrap_or_default(),
            form: self.form.unwrap_or_default(),
        });
        match (self.chunks, self.every) {
            (None, None) => Answer::Body(key),
            (None, Some(_)) => paced_without_chunks(),
            (Some(count), every) => streamed(key, len, count, every),
        }
    }
}

/// `/end-string`'s answer streamed in `count` chunks, `every` apart: the
/// waits a paced stream makes a connection hold are bounded.
#[cold]
fn streamed(key: BodyKey, len: usize, count: usize, every: Option<Duration>) -> Answer {
    let waits = every.map_or(Duration::ZERO, |e| {
        e * count.min(len).saturating_sub(1) as u32
    });
    if waits > MAX_PACED {
        return bad_request(format!(
            "chunks × every is {} s, above the limit of {} s",
            waits.as_secs_f64(),
            MAX_PACED.as_secs()
        ));
    }
    Answer::made(Made::Streamed(key, Plan { count, every }))
}

#[cold]
fn paced_without_chunks() -> Answer {
    bad_request("every=MS paces chunks: it needs chunks=K".into())
}

#[cold]
fn unknown(name: &str, value: &str, expected: &str) -> Answer {
    bad_request(format!("unknown {name} {value:?}: expected {expected}"))
}

#[cold]
fn out_of_range(name: &str, n: u64, most: u64, unit: &str) -> Answer {
    bad_request(format!("{name} {n} is out of range: 1 to {most}{unit}"))
}

#[cold]
fn unknown_parameter(name: &str) -> Answer {
    bad_request(format!(
        "unknown query parameter {name:?}: only kind=ascii|latin1|twobyte, body=flat|rope, chunks=K and every=MS"
    ))
}

fn large(limits: RouteLimits, size: &str, query: Option<&str>) -> Result<Answer, Answer> {
    if query.is_some() {
        return Err(bad_request("/large/{size} takes no query".into()));
    }
    let n = unflat_server::units::parse_size(size)
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            let digits = !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit());
            bad_request(if digits {
                format!("size {size} is out of range (at most --max-large)")
            } else {
                format!(
                    "size {size:?} is not a number of bytes nor a size with a unit (64KiB, 1MiB, 2GiB)"
                )
            })
        })?;
    if n > limits.max_large {
        return Err(bad_request(format!(
            "{n} bytes exceeds the limit of {} (--max-large)",
            limits.max_large
        )));
    }
    Ok(Answer::Body(BodyKey::Large(n)))
}

/// `/echo` reads only `format` (decoded, once at most); any other part of
/// the query is the client's, echoed back in the JSON target unread.
fn echo(head: &RequestHead<'_>) -> Answer {
    match echo_format(head.query) {
        Ok(None) => Answer::echo_json(head),
        Ok(Some(raw)) => raw,
        Err(e) => e,
    }
}

/// 404, with the routes there are.
fn not_found(path: &str) -> Answer {
    Answer::error(
        Status::NOT_FOUND,
        format!("no route for {path}; routes:\n{}", usage()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_size_takes_the_flags_units() {
        let limits = RouteLimits {
            max_len: 0,
            max_large: 64 << 20,
            admin_apart: false,
        };
        for (size, bytes) in [
            ("5", 5),
            ("64KiB", 64 << 10),
            ("64MiB", 64 << 20),
            ("1kB", 1000),
        ] {
            match large(limits, size, None) {
                Ok(Answer::Body(BodyKey::Large(n))) => assert_eq!(n, bytes, "{size}"),
                other => panic!("{size}: {other:?}"),
            }
        }
        for bad in ["", "x", "-1", "1e3", "65MiB", "64 MiB and more"] {
            assert!(
                matches!(large(limits, bad, None), Err(a) if a.refuses()),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn each_path_is_routed_and_labelled_from_the_table() {
        for (path, route, argument) in [
            ("/", Route::Help, ""),
            ("/echo", Route::Echo, ""),
            ("/healthz", Route::Healthz, ""),
            ("/metrics", Route::Metrics, ""),
            ("*", Route::ServerWide, ""),
            ("/end-string/42", Route::EndString, "42"),
            ("/large/", Route::Large, ""),
        ] {
            assert_eq!(Route::of(path), Some((route, argument)), "{path}");
        }
        for path in ["/echo/", "/end-string", "/healthz2", "/x", "//"] {
            assert_eq!(Route::of(path), None, "{path}");
        }
        let labels: Vec<&str> = Route::ALL.iter().map(|r| r.label()).collect();
        assert_eq!(
            labels,
            [
                "/",
                "/end-string",
                "/large",
                "/echo",
                "/healthz",
                "/metrics",
                "*",
                "unmatched"
            ]
        );
        assert!(usage().starts_with("  GET|HEAD /end-string/{len}"));
        assert_eq!(usage().lines().count(), TABLE.len());
    }
}
