//! An application's panics and log, as the operator asked, in a process of
//! its own (this test binary run again as the application, `child`): the
//! core installs its log and panic hook for any server, so that a request's
//! panic never blocks a worker on a stderr nobody reads, and under
//! `--log-format json` every line on stderr — panics included, whatever
//! bytes the request held — is one JSON object.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{banner_address, read_response};
use unflat::head::Status;
use unflat_server::app::reply::{
    Body, Config, Fields, Full, Handler, Reply, RequestHead, Response, Server,
};

/// The variable that makes [`child`] the application.
const CHILD: &str = "UNFLAT_PANICS_CHILD";

/// The application: `/ok` answers, any other path panics with the path
/// (decoded: it may hold a line end or a forged JSON object) in its
/// message.
struct Panicky;

#[derive(Debug)]
struct Fine;

impl Handler for Panicky {
    type Reply = Fine;

    fn call(&self, head: &RequestHead<'_>) -> Fine {
        if head.path == "/ok" {
            return Fine;
        }
        panic!("failed on purpose at {}", head.decoded_path());
    }
}

impl Reply for Fine {
    fn respond<'a>(&'a mut self, _: &'a [u8], _: &mut Fields<'a>) -> Result<Response<'a>, Full> {
        Ok(Response::new(Status::OK, Body::Bytes(b"ok\n")))
    }
}

/// Not a test: the application the tests below start as a process of its
/// own, with the flags in `UNFLAT_PANICS_CHILD`, its banner on stdout.
#[test]
#[ignore = "the child process of the tests in this module"]
fn child() {
    let Some(flags) = std::env::var_os(CHILD) else {
        return;
    };
    let flags = flags.into_string().unwrap();
    let args = ["app", "--addr", "127.0.0.1:0", "--workers", "1"]
        .into_iter()
        .chain(flags.split_whitespace());
    let config = Config::from_app_args(args).unwrap();
    let server = Server::bind_with(config, |_| Panicky).unwrap();
    println!("listening at http://{}", server.local_addr());
    std::io::stdout().flush().unwrap();
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server.run(stop).unwrap();
}

/// The application as a process, killed when dropped.
struct App(Child, String);

impl App {
    /// Started with `flags`, its stderr piped (for the caller to read or
    /// leave unread).
    fn start(flags: &str) -> App {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "panics::child",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD, flags)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let addr = banner_address(&mut child).expect("the application's banner");
        App(child, addr)
    }

    /// The status of `GET target` on a new connection, if it came within
    /// `within`.
    fn get(&self, target: &str, within: Duration) -> Option<u16> {
        let mut s = TcpStream::connect(&self.1).ok()?;
        s.set_read_timeout(Some(within)).unwrap();
        let request = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        s.write_all(request.as_bytes()).ok()?;
        read_response(&mut s, &mut Vec::new(), false)
            .ok()
            .map(|r| r.status)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// 1 000 panicking requests, their stderr a pipe nobody reads: each is
/// answered 500, and `/ok` is answered at once after them. The standard
/// hook wrote each panic straight to stderr: ~730 panics in, a worker
/// blocked writing to the full pipe and `/ok` went unanswered.
#[test]
fn a_thousand_panics_into_an_unread_pipe_block_nothing() {
    let app = App::start("");
    let _unread = app.0.stderr.as_ref();
    let begun = Instant::now();
    for i in 0..1_000 {
        let target = format!("/boom/{i}/{}", "x".repeat(200));
        assert_eq!(
            app.get(&target, Duration::from_secs(5)),
            Some(500),
            "panic {i}, {:?} in",
            begun.elapsed()
        );
    }
    assert_eq!(app.get("/ok", Duration::from_secs(1)), Some(200));
}

/// Under `--log-format json`, an application that installed no subscriber
/// of its own logs as the demo does: every line on its stderr is one JSON
/// object — its request's panic included, whose message holds a line end
/// and a JSON object of the request's — with a level and a message.
#[test]
fn an_applications_json_log_is_json_to_the_last_line() {
    let mut app = App::start("--log-format json");
    let stderr = app.0.stderr.take().unwrap();
    assert_eq!(
        app.get("/forge/%0A%7B%22forged%22:1%7D%0A", Duration::from_secs(5)),
        Some(500)
    );
    assert_eq!(app.get("/ok", Duration::from_secs(5)), Some(200));
    // SIGINT: the server drains and stops, and logs it.
    // SAFETY: kill(2) on the child's own pid.
    unsafe {
        libc::kill(app.0.id() as i32, libc::SIGINT);
    }
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && app.0.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut panics = 0;
    let mut lines = 0;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        // libtest's own lines of the child process go to stdout.
        let value: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON object: {e}: {line:?}"));
        let object = value.as_object().expect("an object");
        assert!(
            object["level"].is_string() && object["message"].is_string(),
            "{line}"
        );
        let message = object["message"].as_str().unwrap();
        if message.contains("panic") {
            panics += 1;
            assert!(message.contains(r#"{\"forged\":1}"#), "escaped: {line}");
            assert_eq!(object["level"], "ERROR");
        }
        lines += 1;
    }
    assert_eq!(panics, 1, "the panic logged once");
    assert!(lines >= 2, "the shutdown logged too: {lines} lines");
}
