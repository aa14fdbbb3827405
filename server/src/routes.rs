//! Which reply a request gets: the routes, their arguments and their errors.
//! No IO and no encoding here; [`crate::reply`] writes the reply.

use unflat::head::Status;

use crate::bodies::{Form, Key, Kind};
use crate::reply::{Echo, Reply};
use crate::request::RequestHead;
use crate::App;

/// Chooses the reply for a request head.
pub fn route(app: &App, head: &RequestHead<'_>) -> Reply {
    let path = head.path;
    if path == "*" {
        // Only OPTIONS gets this far with `*` (the request's checks).
        return Reply::Options { server_wide: true };
    }
    if path == "/echo" {
        return echo(head);
    }
    let known = path == "/" || path.starts_with("/end-string/") || path.starts_with("/large/");
    if !known {
        return Reply::not_found(path);
    }
    if head.method == "OPTIONS" {
        return Reply::Options { server_wide: false };
    }
    if head.method != "GET" && head.method != "HEAD" {
        return Reply::method_not_allowed(head.method, path);
    }
    if path == "/" {
        return match head.query {
            None => Reply::Help,
            Some(_) => Reply::error(Status::BAD_REQUEST, "/ takes no query"),
        };
    }
    if let Some(len) = path.strip_prefix("/end-string/") {
        return end_string(app, len, head.query).unwrap_or_else(|e| e);
    }
    if let Some(size) = path.strip_prefix("/large/") {
        return large(app, size, head.query).unwrap_or_else(|e| e);
    }
    unreachable!("every known path is handled above")
}

fn bad_request(reason: String) -> Reply {
    Reply::error(Status::BAD_REQUEST, reason)
}

fn parse_count(what: &str, s: &str) -> Result<usize, Reply> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad_request(format!(
            "{what} must be a decimal number, got {s:?}"
        )));
    }
    s.parse()
        .map_err(|_| bad_request(format!("{what} {s} is out of range")))
}

/// Passes every `name=value` pair of `query` to `set`; a pair without `=`
/// is refused.
fn query_pairs(
    query: Option<&str>,
    mut set: impl FnMut(&str, &str) -> Result<(), Reply>,
) -> Result<(), Reply> {
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((name, value)) => set(name, value)?,
            None => {
                return Err(bad_request(format!(
                    "query parameter {pair:?} has no value"
                )))
            }
        }
    }
    Ok(())
}

fn end_string(app: &App, len: &str, query: Option<&str>) -> Result<Reply, Reply> {
    let len = parse_count("len", len)?;
    if len > app.config.max_len {
        return Err(bad_request(format!(
            "len {len} exceeds the limit of {} characters (--max-len)",
            app.config.max_len
        )));
    }
    let mut key = Key {
        len,
        kind: Kind::Ascii,
        form: Form::Flat,
    };
    query_pairs(query, |name, value| {
        match name {
            "kind" => {
                key.kind = Kind::parse(value).ok_or_else(|| {
                    bad_request(format!(
                        "unknown kind {value:?}: expected ascii, latin1 or twobyte"
                    ))
                })?
            }
            "body" => {
                key.form = Form::parse(value).ok_or_else(|| {
                    bad_request(format!("unknown body {value:?}: expected flat or rope"))
                })?
            }
            _ => {
                return Err(bad_request(format!(
                    "unknown query parameter {name:?}: only kind=ascii|latin1|twobyte and body=flat|rope"
                )))
            }
        }
        Ok(())
    })?;
    Ok(Reply::EndString(key))
}

fn large(app: &App, size: &str, query: Option<&str>) -> Result<Reply, Reply> {
    if query.is_some() {
        return Err(bad_request("/large/{bytes} takes no query".into()));
    }
    let n = parse_count("bytes", size)?;
    if n > app.config.max_large {
        return Err(bad_request(format!(
            "{n} bytes exceeds the limit of {} (--max-large)",
            app.config.max_large
        )));
    }
    Ok(Reply::Large(n))
}

/// `/echo` reads only `format`; any other part of the query is the
/// client's, echoed back in the JSON target.
fn echo(head: &RequestHead<'_>) -> Reply {
    let format = head
        .query
        .unwrap_or("")
        .rsplit('&')
        .find_map(|pair| pair.strip_prefix("format="));
    match format {
        None | Some("json") => Reply::echo_json(head),
        Some("raw") => Reply::Echo(Echo::Raw),
        Some(other) => bad_request(format!("unknown format {other:?}: expected json or raw")),
    }
}
