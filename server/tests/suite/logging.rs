//! The log never stops the server: with a stderr nobody reads, every request
//! is still answered, the lines that did not fit are counted in `/metrics`
//! and named in one line once stderr moves again; a failure that repeats
//! (accepting past the file-descriptor limit) is logged about once a
//! second, with a count of the others.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{banner_address, read_response, server_binary};

/// Keep-alive requests on one connection: their access-log lines are far
/// more than a pipe (64 KiB) and the server's buffer hold.
const KEPT: usize = 3_000;

/// New connections, one `/healthz` each, among them.
const NEW: usize = 100;

/// How long a request may wait for its answer before the test fails.
const PROMPT: Duration = Duration::from_secs(5);

/// A server process, killed when dropped: a failed assertion stops it too.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the binary on port 0 with one worker and `args`, stderr piped,
/// `RUST_LOG` unset, its descriptors limited to `nofile`; returns it, its
/// address and its stderr, unread.
fn spawn(args: &[&str], nofile: Option<u64>) -> (Server, String, ChildStderr) {
    let (mut server, err) = start(args, nofile);
    let addr = banner_address(&mut server.0).expect("a banner");
    (server, addr, err)
}

/// The server `args` ask for, started as [`spawn`] starts it; its stderr,
/// unread, and its stdout left piped.
fn start(args: &[&str], nofile: Option<u64>) -> (Server, ChildStderr) {
    let mut command = Command::new(server_binary());
    command
        .args(["--addr", "127.0.0.1:0", "--workers", "1"])
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(n) = nofile {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: setrlimit is async-signal-safe, and the closure touches
        // nothing else between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: n,
                    rlim_max: n,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut server = Server(command.spawn().unwrap());
    let err = server.0.stderr.take().unwrap();
    (server, err)
}

/// Reads `err`'s lines on a thread of their own.
fn lines(err: ChildStderr) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(PROMPT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// One request on `s`, its answer's status: `None` when none came within
/// [`PROMPT`].
fn ask(s: &mut TcpStream, buf: &mut Vec<u8>, request: &[u8]) -> Option<u16> {
    s.write_all(request).ok()?;
    read_response(s, buf, false).ok().map(|r| r.status)
}

#[test]
fn a_stderr_nobody_reads_never_stops_serving_and_drops_are_counted() {
    let (server, addr, err) = spawn(&["--access-log"], None);
    // A long User-Agent: each access line about 400 bytes.
    let agent = "a".repeat(200);
    let request = format!("GET /healthz HTTP/1.1\r\nHost: a\r\nUser-Agent: {agent}\r\n\r\n");
    let mut kept = connect(&addr);
    let mut buf = Vec::new();
    let begun = Instant::now();
    let (mut answered, mut answered_new) = (0, 0);
    for i in 0..KEPT {
        let status = ask(&mut kept, &mut buf, request.as_bytes());
        assert_eq!(
            status,
            Some(200),
            "keep-alive request {i} unanswered within {PROMPT:?}, after {answered} answered and {answered_new} new connections ({:?})",
            begun.elapsed()
        );
        answered += 1;
        if i % (KEPT / NEW) == 0 {
            let status = ask(&mut connect(&addr), &mut Vec::new(), request.as_bytes());
            assert_eq!(
                status,
                Some(200),
                "new connection {answered_new} unanswered within {PROMPT:?}, after {answered} keep-alive requests"
            );
            answered_new += 1;
        }
    }
    assert_eq!((answered, answered_new), (KEPT, NEW));
    let mut s = connect(&addr);
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false).expect("/metrics answered");
    let text = String::from_utf8_lossy(&r.body).into_owned();
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("unflat_log_lines_dropped_total "))
        .unwrap_or_else(|| panic!("no unflat_log_lines_dropped_total in\n{text}"))
        .parse()
        .unwrap();
    assert!(dropped > 0, "no line dropped:\n{text}");
    eprintln!(
        "{} requests answered in {:?} with stderr unread; {dropped} lines dropped",
        KEPT + NEW,
        begun.elapsed()
    );
    // stderr moves again: what the buffer held, then the count (in more
    // than one line when lines were dropped while one batch was written
    // and again while the next waited).
    let rx = lines(err);
    let (mut seen, mut notices, mut named) = (Vec::new(), Vec::new(), 0);
    while named < dropped {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.contains("log lines dropped") => {
                named += line
                    .split_whitespace()
                    .find_map(|w| w.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("no count in {line:?}"));
                notices.push(line);
            }
            Ok(line) => seen.push(line),
            Err(e) => panic!(
                "{named} of {dropped} dropped lines named after {} lines: {e}: {notices:#?}",
                seen.len()
            ),
        }
    }
    // The scrape's own line may have been dropped too.
    assert!(named <= dropped + 1, "{notices:#?}, {dropped} counted");
    // Lines are whole: each begins with its time and holds one entry,
    // never two run together.
    for line in &seen {
        assert!(
            line.starts_with("20") && line.matches(" access peer=").count() <= 1,
            "{line:?}"
        );
    }
    drop(server);
}

#[test]
fn accept_failures_are_logged_about_once_a_second_with_a_count() {
    // Few descriptors: the connections below run out of them, and the
    // rest wait in the accept backlog while `accept` fails.
    let (server, addr, err) = spawn(&[], Some(40));
    let rx = lines(err);
    let held: Vec<TcpStream> = (0..80).map(|_| connect(&addr)).collect();
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let mut seen = Vec::new();
    while let Ok(line) = rx.try_recv() {
        seen.push(line);
    }
    let secs = began.elapsed().as_secs_f64();
    let failed: Vec<&String> = seen
        .iter()
        .filter(|l| l.contains("accept failed"))
        .collect();
    eprintln!("{} accept-failure lines in {secs:.1} s", failed.len());
    assert!(!failed.is_empty(), "the limit was not reached: {seen:#?}");
    assert!(
        failed.len() as f64 <= secs.ceil() + 1.0,
        "{} accept-failure lines in {secs:.1} s: {failed:#?}",
        failed.len()
    );
    assert!(
        failed.iter().any(|l| l.contains(" more in the last ")),
        "no count of the failures not logged: {failed:#?}"
    );
    drop(held);
    // Descriptors free again: the connections waiting are accepted, and a
    // request is answered.
    let mut s = connect(&addr);
    let status = ask(
        &mut s,
        &mut Vec::new(),
        b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(status, Some(200));
    drop(server);
}

/// With `--log-format json` and `--access-log-format json`, every line on
/// stderr is one JSON object of one schema: `timestamp`, `level`,
/// `message` and `target` in the server's messages and in each response's
/// record (`message` "access", `target` unflat_server::access) with the
/// fields a log pipeline reads, whatever bytes the request held — text as
/// text, a byte that is not UTF-8 named.
#[test]
fn json_logs_are_one_object_per_line() {
    // The access log follows --log-format; the banner is a record too.
    let args = [
        "--log-format",
        "json",
        "--access-log",
        "--head-timeout",
        "1s",
    ];
    let (mut server, err) = start(&args, None);
    let mut stdout = server.0.stdout.take().unwrap();
    let lines = lines(err);
    let mut banner = false;
    let addr = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the server's first lines");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        banner |= value["message"] == "banner"
            && value["banner"]
                .as_str()
                .is_some_and(|b| b.contains("Routes:"));
        if value["message"] == "listening" {
            break value["addr"].as_str().unwrap().to_string();
        }
    };
    assert!(banner, "the banner, as a record before the address");
    let mut s = connect(&addr);
    let mut buf = Vec::new();
    let requests: [&[u8]; 3] = [
        b"GET /end-string/3?kind=%74wobyte HTTP/1.1\r\nHost: a\r\n\r\n",
        // A quote, a backslash and bytes above ASCII in field values.
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nUser-Agent: a \"q\" \\ \xc3\xa9\xff\r\nReferer: http://r/\r\n\r\n",
        b"GET /nowhere HTTP/1.1\r\nHost: a\r\n\r\n",
    ];
    let statuses: Vec<_> = requests.iter().map(|r| ask(&mut s, &mut buf, r)).collect();
    assert_eq!(statuses, [Some(200), Some(200), Some(404)]);
    // A head the parser refuses (a raw quote in the target): logged with
    // what its line held, escaped.
    assert_eq!(
        ask(
            &mut connect(&addr),
            &mut buf,
            b"GET /a\"b\xff HTTP/1.1\r\nHost: a\r\n\r\n"
        ),
        Some(400)
    );
    // A head not whole in time (--head-timeout 1s): logged with what its
    // line held.
    assert_eq!(
        ask(
            &mut connect(&addr),
            &mut buf,
            b"GET /a%22b HTTP/1.1\r\nHost: a"
        ),
        Some(408)
    );
    drop(s);
    let mut access = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while access.len() < 5 && Instant::now() < until {
        let Ok(line) = lines.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        let value: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON object: {e}: {line:?}"));
        let object = value.as_object().expect("an object");
        for key in ["timestamp", "level", "message", "target"] {
            assert!(object[key].is_string(), "{key}: {line}");
        }
        if object.contains_key("status") {
            assert_eq!(
                (&object["message"], &object["target"], &object["level"]),
                (
                    &"access".into(),
                    &"unflat_server::access".into(),
                    &"INFO".into()
                )
            );
            access.push(value);
        }
    }
    drop(server);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut out).unwrap();
    assert_eq!(out, "", "nothing unstructured on stdout");
    assert_eq!(access.len(), 5, "{access:?}");
    for line in &access {
        let time = line["timestamp"].as_str().unwrap();
        assert!(time.len() == 27 && time.ends_with('Z'), "{line}");
        assert!(
            line["duration"].as_f64().is_some_and(|d| d >= 0.0),
            "{line}"
        );
        assert!(line["bytes"].is_u64() && line["peer"].is_string(), "{line}");
    }
    let field = |i: usize, name: &str| access[i][name].clone();
    assert_eq!(field(0, "method"), "GET");
    assert_eq!(field(0, "uri"), "/end-string/3?kind=%74wobyte");
    assert_eq!(
        (field(0, "status"), field(0, "bytes")),
        (200.into(), 9.into())
    );
    assert_eq!(field(1, "user_agent"), "a \"q\" \\ \u{e9}\\xFF");
    assert_eq!(field(1, "referer"), "http://r/");
    assert_eq!(field(2, "status"), 404);
    assert_eq!(
        (field(3, "status"), field(3, "method"), field(3, "uri")),
        (400.into(), "GET".into(), "/a\"b\\xFF".into())
    );
    assert_eq!(field(3, "version"), "HTTP/1.1");
    assert_eq!(
        (field(4, "status"), field(4, "method"), field(4, "uri")),
        (408.into(), "GET".into(), "/a%22b".into())
    );
    assert_eq!(field(4, "version"), "HTTP/1.1");
}
