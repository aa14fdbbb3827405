//! Replicas of unflat-server behind haproxy (`deploy/haproxy.cfg`,
//! docs/deploy.md): two replicas, each on a port of its own, and a rolling
//! restart under load — each replica in turn is sent SIGTERM while clients
//! keep requesting through haproxy, and a replacement is started on its
//! port. No request may fail and no response may be cut: every response is
//! a 200 whose body is the full text asked for.
//!
//! Skipped, with a message saying so, when `haproxy` is not on PATH
//! (`apt-get install haproxy`).

use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::haproxy::Haproxy;

/// The backend's name in deploy/haproxy.cfg, and its servers' names.
const BACKEND: &str = "replicas";
const SERVERS: [&str; 2] = ["r1", "r2"];
/// Client threads driving load through haproxy.
const CLIENTS: usize = 4;

/// One unflat-server process on a fixed port; killed by its pid if still
/// running when dropped.
struct Replica {
    child: Child,
}

impl Replica {
    /// Starts the server binary on 127.0.0.1:`port` and waits for its
    /// banner. The port of a replica that was just stopped may take a
    /// moment to be free: a start that cannot listen is tried again.
    fn start(port: u16) -> Replica {
        let begun = Instant::now();
        loop {
            let mut child = Command::new(crate::common::server_binary())
                .args(["--addr", &format!("127.0.0.1:{port}"), "--workers", "1"])
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start unflat-server");
            if crate::common::banner_address(&mut child).is_some() {
                return Replica { child };
            }
            let status = child.wait().unwrap();
            assert!(
                begun.elapsed() < Duration::from_secs(10),
                "unflat-server on port {port} did not start within 10 s: {status}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops it as an operator would, SIGTERM, and waits for it to finish
    /// what it has (at most 20 s).
    fn terminate(mut self) -> ExitStatus {
        // SAFETY: kill only sends a signal to the child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let begun = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                begun.elapsed() < Duration::from_secs(20),
                "still draining 20 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Tells the clients to stop when dropped: at the end, or when an
/// assertion fails first (haproxy and the replicas then go too).
struct Stop(Arc<AtomicBool>);

impl Drop for Stop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The requests the clients cycle through: every kind and body form, at
/// lengths from one character to a body written in frames.
fn requests() -> Vec<(String, Vec<u8>)> {
    let mut all = Vec::new();
    for len in [1, 700, 9000, 120_000] {
        for kind in ["ascii", "latin1", "twobyte"] {
            for body in ["flat", "rope"] {
                all.push((
                    format!(
                        "GET /end-string/{len}?kind={kind}&body={body} HTTP/1.1\r\nHost: replicas\r\n\r\n"
                    ),
                    crate::common::end_string_body(len, kind),
                ));
            }
        }
    }
    all
}

/// One client: keep-alive requests through haproxy at `frontend` until
/// `stop`, each response checked in full. Returns the number of good
/// responses and a description of every failure.
fn client(id: usize, frontend: String, stop: Arc<AtomicBool>) -> JoinHandle<(usize, Vec<String>)> {
    std::thread::spawn(move || {
        let requests = requests();
        let connect = || {
            let s = TcpStream::connect(&frontend).expect("connect to haproxy");
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.set_nodelay(true).unwrap();
            s
        };
        let (mut conn, mut buf) = (connect(), Vec::new());
        let (mut good, mut failures) = (0, Vec::new());
        let mut i = id * 5;
        while !stop.load(Ordering::Relaxed) {
            let (request, expected) = &requests[i % requests.len()];
            i += 1;
            let path = request.split(' ').nth(1).unwrap();
            let answer = conn
                .write_all(request.as_bytes())
                .and_then(|()| crate::common::read_response(&mut conn, &mut buf, false));
            match answer {
                Ok(r) if r.status == 200 && r.body == *expected => good += 1,
                Ok(r) => {
                    failures.push(format!(
                        "{path}: status {}, {} body bytes of {}: {:.200}",
                        r.status,
                        r.body.len(),
                        expected.len(),
                        String::from_utf8_lossy(&r.body)
                    ));
                }
                Err(e) => {
                    failures.push(format!("{path}: {e}"));
                    (conn, buf) = (connect(), Vec::new());
                }
            }
        }
        (good, failures)
    })
}

#[test]
fn a_rolling_restart_behind_haproxy_fails_no_request() {
    if !crate::common::haproxy::installed() {
        eprintln!("skipped: haproxy is not on PATH (apt-get install haproxy runs this test)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("unflat-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = [
        crate::common::haproxy::free_port(),
        crate::common::haproxy::free_port(),
    ];
    let mut replicas: Vec<Option<Replica>> =
        ports.iter().map(|&p| Some(Replica::start(p))).collect();
    let frontend = format!("127.0.0.1:{}", crate::common::haproxy::free_port());
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let proxy = Haproxy::start(&frontend, &addrs, &dir);
    for server in SERVERS {
        proxy.wait_up(BACKEND, server, Duration::from_secs(10));
    }

    let stop = Stop(Arc::new(AtomicBool::new(false)));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| client(id, frontend.clone(), stop.0.clone()))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    for (i, server) in SERVERS.iter().enumerate() {
        let status = replicas[i].take().unwrap().terminate();
        assert!(status.success(), "{server} after SIGTERM: {status}");
        // Its health checks fail from the SIGTERM on (503, then refused).
        proxy.wait_down(BACKEND, server, Duration::from_secs(5));
        replicas[i] = Some(Replica::start(ports[i]));
        let up = proxy.wait_up(BACKEND, server, Duration::from_secs(10));
        // The replacement takes its share of the load.
        std::thread::sleep(Duration::from_secs(1));
        let later = proxy.server(BACKEND, server);
        assert!(
            later.sessions > up.sessions,
            "{server}'s replacement got no requests: {up:?} then {later:?}"
        );
    }
    drop(stop);
    let (mut good, mut failures) = (0, Vec::new());
    for c in clients {
        let (g, f) = c.join().expect("a client thread");
        good += g;
        failures.extend(f);
    }
    let log = proxy.log();
    drop(proxy);
    for r in replicas.into_iter().flatten() {
        assert!(r.terminate().success());
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "{good} responses through haproxy, {} failed; haproxy's log:\n{log}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} requests failed or were cut, the first: {:#?}",
        failures.len(),
        good + failures.len(),
        &failures[..failures.len().min(10)]
    );
    // The clients were busy throughout, not stopped by some early error.
    assert!(good >= 200, "only {good} responses");
}
