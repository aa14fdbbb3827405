//! Operating the server: logs (no colour on a pipe, the access log),
//! sizes with units, percent-decoded queries, `/healthz` (503 while
//! draining), `/metrics`, and `--reuse-port`. Its sessions in memory
//! (`ask`) are the demo's, not the trivial service's: they test its routes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::{
    app, banner_address, connect, exchange, read_response, serve_in_memory, server_binary, Raw,
};
use crate::common::{start_demo, Site};
use unflat_server::{Config, Running, Strategy};

/// Parses the one response `out` holds (in-memory sessions).
fn response(out: &[u8], head_request: bool) -> Raw {
    read_response(&mut &out[..], &mut Vec::new(), head_request).unwrap()
}

/// Answers `request` with a new in-memory session of the default app.
fn ask(request: &str) -> Raw {
    let (out, _) = serve_in_memory(&app(), &[request.as_bytes()]);
    response(&out, request.starts_with("HEAD "))
}

fn get(target: &str) -> Raw {
    ask(&format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n"))
}

fn text(r: &Raw) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Starts the binary with `args` on port 0, stderr piped, `RUST_LOG` unset;
/// returns it, its address, and its stderr's lines as they come.
fn spawn_logging(args: &[&str], env: &[(&str, &str)]) -> (Child, String, mpsc::Receiver<String>) {
    let mut child = Command::new(server_binary())
        .args(["--addr", "127.0.0.1:0", "--workers", "1"])
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = banner_address(&mut child).expect("a banner");
    let (tx, rx) = mpsc::channel();
    let err = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, addr, rx)
}

/// Lines from `rx` until one satisfies `want` (or 10 s pass); all of them.
fn lines_until(rx: &mpsc::Receiver<String>, want: impl Fn(&str) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
        let done = want(&line);
        seen.push(line);
        if done {
            break;
        }
    }
    seen
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends `request` to `addr` on a new connection and reads the response.
fn request_to(addr: &str, request: &str) -> Raw {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    read_response(&mut s, &mut Vec::new(), request.starts_with("HEAD ")).unwrap()
}

#[test]
fn logs_on_a_pipe_have_no_colour_and_the_access_log_has_every_field() {
    let (child, addr, rx) = spawn_logging(&["--access-log"], &[]);
    let started = lines_until(&rx, |l| l.contains("listening"));
    let target = "/end-string/3?kind=%74wobyte";
    let r = request_to(
        &addr,
        &format!("GET {target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!((r.status, text(&r).as_str()), (200, "€€€"));
    let access = lines_until(&rx, |l| l.contains(" access peer="));
    stop(child);
    let all: Vec<&String> = started.iter().chain(&access).collect();
    assert!(
        all.iter().all(|l| !l.contains('\x1b')),
        "an escape code on a pipe: {all:?}"
    );
    let line = access.last().expect("an access-log line");
    // `2026-12-01T04:07:12.215216Z access peer=127.0.0.1:… method=GET
    // target=… status=200 bytes=9 duration_us=…`
    let (time, rest) = line.split_once(" access ").expect("an access line");
    assert!(
        time.len() == 27 && time.starts_with("20") && time.ends_with('Z'),
        "no time first: {line}"
    );
    let fields: HashMap<&str, &str> = rest.split(' ').filter_map(|f| f.split_once('=')).collect();
    assert!(fields["peer"].starts_with("127.0.0.1:"), "{line}");
    assert_eq!(fields["method"], "GET", "{line}");
    assert_eq!(fields["target"], target, "{line}");
    assert_eq!(fields["status"], "200", "{line}");
    assert_eq!(fields["bytes"], "9", "{line}");
    assert!(fields["duration_us"].parse::<u64>().is_ok(), "{line}");
    assert_eq!(fields["version"], "HTTP/1.1", "{line}");
    assert_eq!(fields["host"], "\"a\"", "{line}");
    assert_eq!(fields["referer"], "\"-\"", "{line}");
}

#[test]
fn the_combined_log_format_is_what_log_tooling_reads() {
    let (child, addr, rx) =
        spawn_logging(&["--access-log", "--access-log-format", "combined"], &[]);
    lines_until(&rx, |l| l.contains("listening"));
    let r = request_to(
        &addr,
        "GET /end-string/4 HTTP/1.1\r\nHost: a\r\nReferer: http://r/\r\nUser-Agent: t \"q\"\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let access = lines_until(&rx, |l| l.starts_with("127.0.0.1 - - ["));
    stop(child);
    let line = access.last().unwrap();
    // `127.0.0.1 - - [02/Dec/2026:10:00:39 +0000] "GET /end-string/4 HTTP/1.1" 200 4 "http://r/" "t \x22q\x22"`
    let (stamp, rest) = line["127.0.0.1 - - [".len()..]
        .split_once("] ")
        .expect(line);
    assert!(stamp.len() == 26 && stamp.ends_with(" +0000"), "{line}");
    assert_eq!(
        rest, "\"GET /end-string/4 HTTP/1.1\" 200 4 \"http://r/\" \"t \\x22q\\x22\"",
        "{line}"
    );
}

#[test]
fn no_access_log_unless_asked_and_log_level_filters() {
    // --log-level warn: no start-up line at info; the access log, asked
    // for, is written whatever the level.
    let (child, addr, rx) = spawn_logging(&["--log-level", "warn", "--access-log"], &[]);
    request_to(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let seen = lines_until(&rx, |l| l.contains(" access peer="));
    stop(child);
    assert!(
        seen.iter().all(|l| !l.contains("listening")),
        "an info line at warn: {seen:?}"
    );
    assert!(seen.last().unwrap().contains("target=/healthz"), "{seen:?}");

    // Without --access-log: the start-up line, then nothing for a request.
    let (child, addr, rx) = spawn_logging(&[], &[("UNFLAT_LOG_LEVEL", "info")]);
    lines_until(&rx, |l| l.contains("listening"));
    request_to(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    let after = rx.recv_timeout(Duration::from_millis(500));
    stop(child);
    assert!(
        after.is_err(),
        "a line per request without --access-log: {after:?}"
    );
}

#[test]
fn rust_log_replaces_the_log_level() {
    let (child, _, rx) = spawn_logging(&["--log-level", "error"], &[("RUST_LOG", "info")]);
    let seen = lines_until(&rx, |l| l.contains("listening"));
    stop(child);
    assert!(seen.iter().any(|l| l.contains("listening")), "{seen:?}");
}

#[test]
fn sizes_take_units() {
    let (child, addr, _rx) = spawn_logging(&["--max-body", "1KiB"], &[]);
    let post = |n: usize| {
        let body = "x".repeat(n);
        request_to(
            &addr,
            &format!(
                "POST /echo?format=raw HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: {n}\r\n\r\n{body}"
            ),
        )
    };
    let (fits, over) = (post(1024), post(1025));
    stop(child);
    assert_eq!(fits.status, 200);
    assert_eq!(over.status, 413);
}

#[test]
fn queries_are_percent_decoded() {
    // An escape, and a value made of escapes only.
    let twobyte = get("/end-string/2?kind=twobyte");
    assert_eq!(text(&twobyte), "€€");
    assert_eq!(get("/end-string/2?kind=%74wobyte").body, twobyte.body);
    assert_eq!(
        get("/end-string/2?%6B%69%6E%64=%74%77%6F%62%79%74%65").body,
        twobyte.body
    );
    assert_eq!(text(&get("/echo?format=r%61w")), "");
    // `+` is a space.
    let plus = get("/end-string/2?kind=two+byte");
    assert_eq!(plus.status, 400);
    assert!(text(&plus).contains("\"two byte\""), "{}", text(&plus));
    // %2B is a `+`, not a space.
    assert!(text(&get("/end-string/2?kind=two%2Bbyte")).contains("\"two+byte\""));
}

#[test]
fn a_repeated_parameter_is_refused_naming_it() {
    for target in [
        "/end-string/2?kind=ascii&kind=latin1",
        "/end-string/2?kind=ascii&body=flat&kind=ascii",
        // The same name, once escaped.
        "/end-string/2?kind=ascii&%6Bind=ascii",
    ] {
        let r = get(target);
        assert_eq!(r.status, 400, "{target}");
        assert!(
            text(&r).contains("\"kind\" is given more than once"),
            "{target}: {}",
            text(&r)
        );
    }
    let r = get("/echo?format=raw&format=json");
    assert_eq!(r.status, 400);
    assert!(text(&r).contains("\"format\""), "{}", text(&r));
    // /echo reads only `format`: the client's own parameters may repeat.
    assert_eq!(get("/echo?a=1&a=2&format=raw").status, 200);
}

#[test]
fn invalid_escapes_and_invalid_utf8_are_refused() {
    // 400, the reason saying `why` and naming `name`.
    let refused = |target: &str, why: &str, name: &str| {
        let r = get(target);
        assert_eq!(r.status, 400, "{target}");
        let reason = text(&r);
        assert!(
            reason.contains(why) && reason.contains(name),
            "{target}: {reason}"
        );
    };
    // Not an escape: refused, naming the parameter (and, in the path, by
    // the request's checks).
    for (target, name) in [
        ("/end-string/2?kind=%zz", "\"kind\""),
        ("/end-string/2?kind=%4", "\"kind\""),
        ("/end-string/2?body=flat&k%g=1", "\"k%g\""),
        ("/echo?format=%", "\"format\""),
        ("/end-string/%zz", "request target"),
    ] {
        refused(target, "two hex digits", name);
    }
    // Escapes that are not UTF-8 once decoded, in a value and in a name.
    for (target, name) in [
        ("/end-string/2?kind=%FF", "\"kind\""),
        ("/end-string/2?kind=%C3", "\"kind\""),
        ("/end-string/2?kind=%EF%BF%BD%FF", "\"kind\""),
        ("/end-string/2?body=%E2%82", "\"body\""),
        ("/echo?format=%C0%AF", "\"format\""),
        ("/end-string/2?k%FFnd=ascii", "\"k%FFnd\""),
    ] {
        refused(target, "not UTF-8", name);
    }
    // U+FFFD itself is UTF-8: an unknown kind, not a decoding error.
    let r = get("/end-string/2?kind=%EF%BF%BD");
    assert_eq!(r.status, 400);
    assert!(
        text(&r).contains("unknown kind \"\u{FFFD}\""),
        "{}",
        text(&r)
    );
}

#[test]
fn healthz_is_ok_until_shutdown_and_works_like_the_other_routes() {
    let app = app();
    let ok = |request: &str| {
        let (out, _) = serve_in_memory(&app, &[request.as_bytes()]);
        response(&out, request.starts_with("HEAD "))
    };
    let r = ok("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!((r.status, text(&r).as_str()), (200, "ok\n"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let head = ok("HEAD /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("3"));
    assert!(head.body.is_empty());
    let options = ok("OPTIONS /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(options.status, 204);
    assert_eq!(
        ok("POST /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").status,
        405
    );
    assert_eq!(
        ok("GET /healthz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").status,
        400
    );
    app.protocol().draining.begin();
    let r = ok("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.status, 503, "{}", text(&r));
    // Draining, the connection closes after the response, and says so.
    assert_eq!(r.header("connection"), Some("close"));
}

#[test]
fn healthz_answers_503_after_sigterm_while_draining() {
    let (child, addr, _rx) = spawn_logging(&["--grace", "10s"], &[]);
    // A request begun before the signal, its head finished during the
    // drain: the connection is not idle, so it is served.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    // The drain has begun once the listener is gone.
    let begun = std::time::Instant::now();
    while TcpStream::connect(&addr).is_ok() {
        assert!(begun.elapsed() < Duration::from_secs(10), "still accepting");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.write_all(b"\r\n").unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    let mut rest = Vec::new();
    let closed = s.read_to_end(&mut rest).is_ok() && rest.is_empty();
    let mut child = child;
    let exited = child.wait().unwrap();
    assert_eq!(r.status, 503, "{}", text(&r));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(closed, "the connection closes after the response");
    assert!(exited.success(), "{exited:?}");
}

#[test]
fn the_routes_list_names_healthz_and_metrics() {
    for r in [get("/no-such-path"), get("/")] {
        let body = text(&r);
        assert!(
            body.contains("/healthz") && body.contains("/metrics"),
            "{body}"
        );
    }
}

/// The samples of an OpenMetrics text: `name{labels}` → value. Every line
/// is a comment or `name{labels} value`.
fn samples(text: &str) -> HashMap<String, f64> {
    assert!(text.ends_with("# EOF\n"), "{text}");
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let name_end = series.find('{').unwrap_or(series.len());
        assert!(
            series[..name_end]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{line:?}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "{line:?}");
        }
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
        out.insert(series.to_string(), value);
    }
    out
}

fn scrape(server: &Running<Site>) -> HashMap<String, f64> {
    let r = exchange(
        server,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    samples(&text(&r))
}

#[test]
fn metrics_parse_and_move_with_requests() {
    let server = crate::common::start(Strategy::Direct);
    let before = scrape(&server);
    let at = |m: &HashMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    let ok = r#"unflat_requests_total{route="/end-string",status="200"}"#;
    let missing = r#"unflat_requests_total{route="unmatched",status="404"}"#;
    let bytes = r#"unflat_response_bytes_total{strategy="direct"}"#;
    let mut s = connect(&server);
    let mut buf = Vec::new();
    for _ in 0..3 {
        s.write_all(b"GET /end-string/4 HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        assert_eq!(read_response(&mut s, &mut buf, false).unwrap().status, 200);
    }
    s.write_all(b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s, &mut buf, false).unwrap().status, 404);
    // `s` is still open.
    let after = scrape(&server);
    assert_eq!(at(&after, ok) - at(&before, ok), 3.0, "{after:?}");
    assert_eq!(at(&after, missing) - at(&before, missing), 1.0, "{after:?}");
    // The first scrape was counted, and its bytes written, by the second.
    assert_eq!(
        at(
            &after,
            r#"unflat_requests_total{route="/metrics",status="200"}"#
        ),
        1.0
    );
    assert!(
        at(&after, bytes) - at(&before, bytes) > 3.0 * 4.0,
        "{after:?}"
    );
    // `s` and the scrape's own connection.
    assert!(at(&after, "unflat_open_connections") >= 2.0, "{after:?}");
    // The body was built once and then served from the cache; the two
    // open connections' buffers are counted.
    let builds = r#"unflat_body_builds_total{shared="false"}"#;
    assert_eq!(at(&after, builds) - at(&before, builds), 1.0, "{after:?}");
    let cached = r#"unflat_memory_bytes{part="bodies_cached"}"#;
    assert!(at(&after, cached) >= 4.0, "{after:?}");
    let bases = r#"unflat_memory_bytes{part="connection_bases"}"#;
    assert!(at(&after, bases) >= 2.0 * 16384.0, "{after:?}");
    for name in [
        "unflat_memory_bytes{part=\"connections\"}",
        "unflat_memory_limit_bytes{part=\"total\"}",
        "unflat_memory_refusals_total",
        "unflat_body_builds_total{shared=\"false\"}",
        "unflat_send_timeout_resets_total",
        "unflat_log_lines_dropped_total",
        "unflat_worker_naps_total",
    ] {
        assert!(after.contains_key(name), "{name}: {after:?}");
    }
    drop(s);
    server.stop().unwrap();
}

/// A pipelined batch at a time from one client while three others keep
/// their connections open: each batch is a stretch of one turn that
/// answers one connection in four, longer than `--nap` in a test build, and
/// the worker runs dry after it and naps (`server/src/net/nap.rs`); the
/// metric counts the naps. Other tests in this process can only add to it.
#[test]
fn pipelined_batches_earn_naps_and_the_metric_counts_them() {
    let config = Config {
        workers: Some(1),
        ..crate::common::config(Strategy::Direct)
    };
    let server = start_demo(config).unwrap();
    let request = b"GET /end-string/4 HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut buf = Vec::new();
    let open: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = connect(&server);
            s.write_all(request).unwrap();
            assert_eq!(read_response(&mut s, &mut buf, false).unwrap().status, 200);
            s
        })
        .collect();
    let naps = |m: &HashMap<String, f64>| m.get("unflat_worker_naps_total").copied();
    let before = naps(&scrape(&server)).expect("unflat_worker_naps_total is listed");
    let mut s = connect(&server);
    let batch = request.repeat(32);
    for _ in 0..20 {
        s.write_all(&batch).unwrap();
        for _ in 0..32 {
            assert_eq!(read_response(&mut s, &mut buf, false).unwrap().status, 200);
        }
    }
    let after = naps(&scrape(&server)).unwrap();
    assert!(
        after > before,
        "no nap after 20 batches of 32: {before} then {after}"
    );
    drop((s, open));
    server.stop().unwrap();
}

#[test]
fn reuse_port_lets_two_servers_bind_one_port() {
    let config = |addr: &str, reuse_port: bool| Config {
        addr: addr.parse().unwrap(),
        reuse_port,
        ..crate::common::config(Strategy::Direct)
    };
    let first = start_demo(config("127.0.0.1:0", true)).unwrap();
    let addr = first.addr().to_string();
    // Without the option on the second, the port is taken.
    let refused = start_demo(config(&addr, false)).unwrap_err();
    assert!(refused.to_string().contains("cannot listen"), "{refused}");
    let second = start_demo(config(&addr, true)).expect("a second server on the port");
    assert_eq!(second.addr(), first.addr());
    // Connections reach a server while either is up.
    first.stop().unwrap();
    let r = request_to(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    second.stop().unwrap();
}

#[test]
fn what_describes_the_server_or_one_request_is_never_stored_by_a_cache() {
    for target in ["/healthz", "/metrics"] {
        assert_eq!(
            get(target).header("cache-control"),
            Some("no-store"),
            "{target}"
        );
    }
    let echo = ask("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(echo.status, 200);
    assert_eq!(echo.header("cache-control"), Some("no-store"), "/echo");
    // The benchmark routes' bodies are a function of the URL: no policy
    // sent, their bytes those of Node's benchmark.
    let body = get("/end-string/4");
    assert_eq!(body.status, 200);
    assert_eq!(body.header("cache-control"), None);
}

/// The families a metrics text declares: each `# TYPE` line's name and
/// type, in order; every `# HELP` is followed by the `# TYPE` of the same
/// name, and every sample belongs to the family declared last (its name,
/// or a counter's with `_total`).
fn families(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut help: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(help.take().as_deref(), Some(name), "HELP before {line:?}");
            out.push((name.to_string(), kind.to_string()));
        } else if !line.starts_with('#') {
            let series = line.split(['{', ' ']).next().unwrap();
            let (family, kind) = out
                .last()
                .unwrap_or_else(|| panic!("{line:?} before any TYPE"));
            let suffixed = |suffixes: &[&str]| {
                suffixes
                    .iter()
                    .any(|s| series.strip_suffix(s) == Some(family))
            };
            let ok = series == family
                || (kind == "counter" && suffixed(&["_total"]))
                || (kind == "histogram" && suffixed(&["_bucket", "_sum", "_count"]));
            assert!(ok, "{line:?} outside its family {family} ({kind})");
        }
    }
    out
}

#[test]
fn metrics_speak_the_prometheus_text_format_unless_openmetrics_is_asked_for() {
    let server = crate::common::start(Strategy::Direct);
    let answered = exchange(&server, b"GET /end-string/4 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(answered.status, 200);
    for (accept, content_type) in [
        ("", "text/plain; version=0.0.4; charset=utf-8"),
        (
            "Accept: */*\r\n",
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        (
            "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    ] {
        let request = format!("GET /metrics HTTP/1.1\r\nHost: a\r\n{accept}\r\n");
        let r = exchange(&server, request.as_bytes());
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some(content_type), "{accept:?}");
        let body = text(&r);
        let declared = families(&body);
        let openmetrics = content_type.starts_with("application/openmetrics-text");
        assert_eq!(body.ends_with("# EOF\n"), openmetrics, "{accept:?}");
        // In 0.0.4 a counter's HELP and TYPE name its samples, `_total` and
        // all; in OpenMetrics they name the family without it.
        let requests = if openmetrics {
            "unflat_requests"
        } else {
            "unflat_requests_total"
        };
        assert!(
            declared.contains(&(requests.into(), "counter".into())),
            "{body}"
        );
        // The latency histogram, of the request answered before the loop.
        assert!(
            declared.contains(&("unflat_request_duration_seconds".into(), "histogram".into())),
            "{body}"
        );
        for process in [
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                declared.iter().any(|(n, _)| n == process),
                "{process} missing:\n{body}"
            );
        }
        let rss = samples_any(&body, "process_resident_memory_bytes");
        assert!(rss > 1e6, "resident memory {rss}");
    }
}

/// The value of the sample `name` (without labels).
fn samples_any(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// Sends `signal` to `child`.
fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

#[test]
fn every_signal_is_logged_sighup_keeps_serving_and_a_second_sigterm_cuts_the_drain() {
    let (child, addr, rx) = spawn_logging(&["--grace", "60s"], &[]);
    signal(&child, libc::SIGHUP);
    let seen = lines_until(&rx, |l| l.contains("nothing to reload"));
    assert!(
        seen.iter().any(|l| l.contains("signal=\"SIGHUP\"")),
        "{seen:#?}"
    );
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).unwrap();
    assert_eq!(r.status, 200, "still serving after SIGHUP");
    // A request in progress, its body still coming: the drain would wait
    // for it (within --body-timeout).
    let mut stuck = TcpStream::connect(&addr).unwrap();
    stuck
        .write_all(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nabc")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(s);
    signal(&child, libc::SIGTERM);
    let seen = lines_until(&rx, |l| l.contains("shutting down"));
    let line = seen.last().unwrap();
    assert!(
        line.contains("open=1"),
        "only the stuck connection is open: {seen:#?}"
    );
    second_sigterm_cuts_one(child, &rx);
}

/// Sends `child`, draining, a second SIGTERM: the one connection left is
/// cut, said so in the log, and the server exits well and at once.
fn second_sigterm_cuts_one(mut child: Child, rx: &mpsc::Receiver<String>) {
    let begun = std::time::Instant::now();
    signal(&child, libc::SIGTERM);
    let seen = lines_until(rx, |l| l.contains("second signal"));
    let status = child.wait().unwrap();
    assert!(seen.last().unwrap().contains("cut=1"), "{seen:#?} {status}");
    assert!(status.success(), "{status}");
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "exited {:?} after the second signal",
        begun.elapsed()
    );
}

/// The admin address the server's `listening` line names.
fn admin_address(rx: &mpsc::Receiver<String>) -> String {
    let listening = lines_until(rx, |l| l.contains("listening"));
    listening
        .last()
        .and_then(|l| l.split(' ').find_map(|w| w.strip_prefix("admin=")))
        .expect("the admin address logged")
        .to_string()
}

/// Under systemd's `Type=notify` (`$NOTIFY_SOCKET`): `READY=1` once the
/// server listens, `STOPPING=1` as SIGTERM begins its shutdown; and
/// `/metrics` says what was built (`unflat_build_info`) and counts
/// certificate reloads by result.
#[test]
fn systemd_hears_ready_and_stopping_and_metrics_name_the_build() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut child = Command::new(server_binary())
        .args(["--addr", "127.0.0.1:0", "--workers", "1"])
        .env("NOTIFY_SOCKET", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = banner_address(&mut child).expect("a banner");
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut metrics = String::new();
    s.read_to_string(&mut metrics).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        metrics.contains(&format!(
            "unflat_build_info{{version=\"{version}\",features=\""
        )),
        "{metrics}"
    );
    assert!(metrics.contains("tls,"), "the features listed: {metrics}");
    assert!(
        metrics.contains("unflat_tls_reloads_total{result=\"refused\"} 0"),
        "{metrics}"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_admin_address_serves_metrics_liveness_and_readiness_apart() {
    let args = ["--admin-addr", "127.0.0.1:0", "--shutdown-delay", "3s"];
    let (child, public, rx) = spawn_logging(&args, &[]);
    let admin = admin_address(&rx);
    assert_ne!(admin, public);
    let get_at = |addr: &str, target: &str, extra: &str| {
        request_to(
            addr,
            &format!("GET {target} HTTP/1.1\r\nHost: a\r\n{extra}Connection: close\r\n\r\n"),
        )
    };
    let live = get_at(&admin, "/livez", "");
    assert_eq!((live.status, text(&live).as_str()), (200, "alive\n"));
    assert_eq!(get_at(&admin, "/readyz", "").status, 200);
    let metrics = get_at(&admin, "/metrics", "");
    assert_eq!(metrics.status, 200);
    assert!(
        text(&metrics).contains("unflat_build_info{"),
        "{}",
        text(&metrics)
    );
    assert_eq!(
        metrics.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let open = get_at(
        &admin,
        "/metrics",
        "Accept: application/openmetrics-text\r\n",
    );
    assert!(text(&open).ends_with("# EOF\n"), "{}", text(&open));
    assert_eq!(get_at(&admin, "/", "").status, 404);
    let post = request_to(
        &admin,
        "POST /livez HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        (post.status, post.header("allow")),
        (405, Some("GET, HEAD"))
    );
    // The public port answers none of them.
    for target in ["/healthz", "/metrics", "/livez", "/readyz"] {
        assert_eq!(get_at(&public, target, "").status, 404, "{target}");
    }
    assert_eq!(get_at(&public, "/end-string/3", "").status, 200);
    // Shutting down: not ready, still alive, for --shutdown-delay.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let begun = std::time::Instant::now();
    while get_at(&admin, "/readyz", "").status == 200 {
        assert!(begun.elapsed() < Duration::from_secs(2), "still ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let draining = get_at(&admin, "/readyz", "");
    assert_eq!(draining.status, 503, "{}", text(&draining));
    assert_eq!(get_at(&admin, "/livez", "").status, 200);
    let mut child = child;
    assert!(child.wait().unwrap().success());
    assert!(
        TcpStream::connect(&admin).is_err(),
        "the admin address closed"
    );
}

/// The admin address drains after the public port, and a second SIGTERM
/// cuts its drain as it cuts the public one's.
#[test]
fn a_second_sigterm_cuts_the_admin_address_drain_too() {
    let args = [
        "--admin-addr",
        "127.0.0.1:0",
        "--grace",
        "60s",
        "--head-timeout",
        "60s",
    ];
    let (child, _, rx) = spawn_logging(&args, &[]);
    let admin = admin_address(&rx);
    // A scrape whose head never ends: its drain would wait for it.
    let mut stuck = TcpStream::connect(&admin).unwrap();
    stuck.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGTERM);
    let seen = lines_until(&rx, |l| l.contains("shutting down") && l.contains(&admin));
    assert!(seen.last().unwrap().contains("open=1"), "{seen:#?}");
    second_sigterm_cuts_one(child, &rx);
    drop(stuck);
}
