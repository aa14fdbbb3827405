//! After warm-up, keep-alive requests to /end-string in the direct strategy
//! allocate nothing at any of the benchmark's lengths, and the rope form
//! (`?body=rope`) at most once per request: counted by a global allocator
//! over the whole process (server threads included), with a client that
//! allocates nothing per request; with the access log on too, its lines
//! written by the log's thread. And what a connection holds on the heap
//! beyond what the server's memory account counts for it is its fixed
//! cost: a few kilobytes (docs/robustness.md's formula); idle, it holds
//! less than 3 KiB in all.

mod common;

use std::io::{Read, Write};

use crate::common::{start_demo, Site};
use common::{config, connect, read_response, start};
use unflat_server::h1::RequestHead;
use unflat_server::memory::Full;
use unflat_server::memory::Part;
use unflat_server::response::{Body, Fields, Response};
use unflat_server::service::{Job, Reply, Service};
use unflat_server::{Running, Strategy};

#[path = "../../encoder/tests/common/alloc.rs"]
mod alloc;

use alloc::{live_bytes, process_allocations};

/// The heap a connection may hold beyond its lease (the part the account
/// counts): its task, its socket's registration, its session and queue
/// before any buffer. docs/robustness.md's fixed cost per connection is
/// this and the lease's base.
const FIXED_HEAP: usize = 4096;

/// The heap an idle keep-alive connection holds in all: its task and its
/// state; its read and write buffers wait in the worker's pool
/// (`server/src/net/idle.rs`).
const IDLE_HEAP: usize = 3072;

/// Heap bytes per open connection, in all and beyond what its lease
/// counts, with `connections` keep-alive connections each served
/// `requests` responses of `target`, one after the other, and left open.
fn heap_per_connection(
    server: &Running<Site>,
    target: &str,
    connections: usize,
    requests: usize,
) -> (f64, f64) {
    let memory = &server.stack().memory();
    let counted = || memory.used(Part::Bases) + memory.used(Part::Connections);
    let request = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes();
    let mut kept = Vec::with_capacity(connections);
    let (live, leased) = (live_bytes(), counted());
    for _ in 0..connections {
        let mut s = connect(server);
        for _ in 0..requests {
            s.write_all(&request).unwrap();
            assert_eq!(
                read_response(&mut s, &mut Vec::new(), false)
                    .unwrap()
                    .status,
                200
            );
        }
        kept.push(s);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let heap = live_bytes() as f64 - live as f64;
    let lease = counted() as f64 - leased as f64;
    drop(kept);
    let n = connections as f64;
    (heap / n, (heap - lease) / n)
}

/// Heap allocations per request over 2 000 keep-alive requests for
/// `target`, after warm-up.
fn allocations_per_request<S: Service>(server: &Running<S>, target: &str) -> f64 {
    let request = format!("GET {target} HTTP/1.1\r\nHost: bench\r\n\r\n").into_bytes();
    let mut s = connect(server);
    // Warm-up: caches filled, buffers grown. Learn the response's length,
    // which stays the same (the Date line has a fixed width).
    let mut buf = Vec::new();
    s.write_all(&request).unwrap();
    let first = read_response(&mut s, &mut buf, false).unwrap();
    assert_eq!(first.status, 200, "{target}");
    let len = first.head.len() + first.body.len();
    let mut response = vec![0u8; len];
    for _ in 0..500 {
        s.write_all(&request).unwrap();
        s.read_exact(&mut response).unwrap();
    }
    let requests = 2_000;
    let before = process_allocations();
    for _ in 0..requests {
        s.write_all(&request).unwrap();
        s.read_exact(&mut response).unwrap();
    }
    let allocated = process_allocations() - before;
    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(response.ends_with(b"aaaa"));
    allocated as f64 / requests as f64
}

const LENS: [usize; 5] = [4, 64, 1024, 16384, 102400];

/// Whether this process runs `test` alone. The counter is the process's,
/// and the demo's unit tests are built into this binary with the demo
/// (`common::demo`): the first call runs `test` again in a process of its
/// own, alone (`--exact`), asserts that it passed, and answers `false`.
fn alone(test: &str) -> bool {
    const ALONE: &str = "UNFLAT_ALLOC_ALONE";
    if std::env::var_os(ALONE).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("this test binary");
    let ran = std::process::Command::new(exe)
        .args([test, "--exact", "--test-threads=1"])
        .env(ALONE, "1")
        .output()
        .expect("this test binary runs");
    let said = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (out, err) = (said(&ran.stdout), said(&ran.stderr));
    assert!(ran.status.success(), "{test}, alone:\n{out}{err}");
    assert!(
        out.contains("test result: ok. 1 passed"),
        "{test} not run:\n{out}"
    );
    false
}

/// One test: the counter is global to the process, so two tests running at
/// once would count each other's allocations ([`alone`]).
#[test]
fn keep_alive_requests_allocate_nothing_after_warm_up_and_ropes_at_most_once() {
    if !alone("keep_alive_requests_allocate_nothing_after_warm_up_and_ropes_at_most_once") {
        return;
    }
    let server = start(Strategy::Direct);
    for len in LENS {
        let per_request = allocations_per_request(&server, &format!("/end-string/{len}"));
        assert_eq!(
            per_request, 0.0,
            "heap allocations per request at len {len}"
        );
    }
    for len in LENS {
        let per_request = allocations_per_request(&server, &format!("/end-string/{len}?body=rope"));
        assert!(
            per_request <= 1.0,
            "{per_request} heap allocations per request at len {len}, body=rope"
        );
    }
    // The bodies are cached by now: what the connections hold is theirs.
    // What the workers' pools keep for all connections, at most: 4 frame
    // buffers of 64 KiB each (those a streamed body is encoded into,
    // `KEPT_FRAMES` in server/src/net/idle.rs), in each of the server's 2
    // workers; shared by the 200 connections, it is in the heap measured
    // per connection. How many each pool holds depends on which worker
    // each connection ran on.
    let pool = |target: &str| {
        if target.contains("twobyte") {
            2 * 4 * 65536 / 200
        } else {
            0
        }
    };
    for target in ["/end-string/4", "/end-string/102400?kind=twobyte"] {
        let (idle, beyond) = heap_per_connection(&server, target, 200, 1);
        eprintln!(
            "{target}: {idle:.0} bytes of heap per idle connection, {beyond:.0} beyond its lease"
        );
        assert!(
            idle <= (IDLE_HEAP + pool(target)) as f64,
            "{target}: {idle:.0} bytes of heap per idle connection"
        );
        assert!(
            beyond <= FIXED_HEAP as f64,
            "{target}: {beyond:.0} bytes per connection beyond its lease"
        );
    }
    // A client that asks again at once keeps its buffers through a short
    // hold (server/src/net/connection.rs, `HOLD`); quiet past it, they
    // go to the pool. What the pools keep, at most: `KEPT` (64) read
    // buffers of 16 KiB and write buffers of 8 KiB, with their lists, in
    // each of the 2 workers; held by each of 200 connections instead,
    // they would be 24 KiB each.
    let pools = 2 * 64 * (16 + 8 + 1) * 1024 / 200;
    let (idle, _) = heap_per_connection(&server, "/end-string/4", 200, 2);
    eprintln!("after two requests each: {idle:.0} bytes of heap per idle connection");
    assert!(
        idle <= (IDLE_HEAP + pools) as f64,
        "{idle:.0} bytes of heap per idle connection after two requests each"
    );
    server.stop().unwrap();
    // The access log: each line rendered into buffers kept from one line
    // to the next, copied into the log's fixed buffer, written out by its
    // thread (to /dev/null here, in place of the test's stderr).
    let logged = start_demo(unflat_server::Config {
        access_log: true,
        ..config(Strategy::Direct)
    })
    .expect("server starts");
    let quiet = std::fs::File::options()
        .write(true)
        .open("/dev/null")
        .unwrap();
    use std::os::fd::AsRawFd as _;
    // SAFETY: descriptors of this process only; stderr is put back below.
    let stderr = unsafe { libc::dup(2) };
    assert!(stderr >= 0 && unsafe { libc::dup2(quiet.as_raw_fd(), 2) } == 2);
    let per_request = allocations_per_request(&logged, "/end-string/64");
    logged.stop().unwrap();
    unflat_server::log::flush(std::time::Duration::from_secs(5));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::dup2(stderr, 2) }, 2);
    unsafe { libc::close(stderr) };
    assert_eq!(
        per_request, 0.0,
        "heap allocations per request, access log on"
    );

    // An application's ready response with six field lines of its own,
    // two of them Set-Cookie, values ropes of text, integers and their
    // concatenations: written into the head with no allocation.
    let app = Running::start_with(config(Strategy::Direct), |_| Fielded).expect("app starts");
    let per_request = allocations_per_request(&app, "/fields");
    app.stop().unwrap();
    assert_eq!(
        per_request, 0.0,
        "heap allocations per request, six rope fields"
    );

    // The same response after an awaited job: the job's box, once.
    let app = Running::start_with(config(Strategy::Direct), |_| Fielded).expect("app starts");
    let per_request = allocations_per_request(&app, "/awaited");
    app.stop().unwrap();
    eprintln!("an awaited reply: {per_request} heap allocations per request");
    assert!(
        per_request <= 1.0,
        "{per_request} heap allocations per request, an awaited reply"
    );

    an_async_handler_costs_two_allocations();
}

/// The async door: a handler that allocates nothing itself costs the
/// request's head, copied once, and its future — two allocations; one that
/// awaits a timer, and one whose response has field lines of its own, no
/// more. (Called from the one test.)
fn an_async_handler_costs_two_allocations() {
    use unflat_server::app::{get, Request, Response as Answer, Router};
    async fn plain(_: Request) -> Answer {
        Answer::text("aaaa")
    }
    async fn fielded(req: Request) -> Answer {
        let n = req.param("n").map_or(0, str::len);
        Answer::text("aaaa")
            .header("Cache-Control", ("max-age=", 60 + n))
            .header("Vary", "Cookie")
    }
    // Its own String, one allocation: the response takes it as it is.
    async fn formatted(req: Request) -> Answer {
        Answer::text(req.param("n").unwrap_or_default().to_string())
    }
    async fn awaiting(_: Request) -> Answer {
        tokio::time::sleep(std::time::Duration::from_micros(1)).await;
        Answer::text("aaaa")
    }
    let router = || {
        Router::new()
            .route("/plain", get(plain))
            .route("/fielded/{n}", get(fielded))
            .route("/awaiting", get(awaiting))
            .route("/formatted/{n}", get(formatted))
    };
    let app = Running::start_with(config(Strategy::Direct), |m| {
        router().observed(m.standard())
    })
    .expect("app starts");
    for (target, most) in [
        ("/plain", 2.0),
        ("/fielded/abc", 2.0),
        ("/awaiting", 2.0),
        ("/formatted/aaaa", 3.0),
    ] {
        let per_request = allocations_per_request(&app, target);
        eprintln!("{target}: {per_request} heap allocations per request");
        assert!(
            per_request <= most,
            "{target}: {per_request} heap allocations per request"
        );
    }
    app.stop().unwrap();
}

/// A service whose one response carries six field lines of its own.
#[derive(Debug)]
struct Fielded;

/// Its reply: a session number, different for every request, of 7 digits
/// (the response keeps its length), and whether a job makes it first.
#[derive(Debug)]
struct Session(u64, bool);

impl Service for Fielded {
    type Reply = Session;
    type Conn = u64;
    type Observer = ();

    fn observer(&self) {}

    fn call(&self, head: &RequestHead<'_>, served: &mut u64) -> Session {
        *served += 1;
        let awaited = head.path == "/awaited";
        Session(1_000_000 + *served % 1_000_000, awaited)
    }
}

impl Reply for Session {
    /// `/awaited`: the reply is made by a job the connection awaits.
    fn prepare(&mut self, _: &[u8]) -> Option<Job<Session>> {
        if !self.1 {
            return None;
        }
        let session = Session(self.0, false);
        Some(Job::new(async move { session }))
    }

    fn respond<'a>(
        &'a mut self,
        _: &'a [u8],
        fields: &mut Fields<'a>,
    ) -> Result<Response<'a>, Full> {
        fields
            .add("Content-Type", "text/plain")
            .add("Set-Cookie", ("sid=", self.0, "; Path=/; HttpOnly"))
            .add("Set-Cookie", ("seen=", self.0 * 2, "; Max-Age=", 3600))
            .add("Cache-Control", "no-store")
            .add("ETag", ("\"", self.0, "\""))
            .add("Vary", "Cookie");
        Ok(Response::new(
            unflat::head::Status::OK,
            Body::Bytes(b"aaaa"),
        ))
    }
}
