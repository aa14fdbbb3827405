//! haproxy for the tests: started in the foreground with
//! `deploy/haproxy.cfg` and the addresses it reads from the environment,
//! asked for its servers' state on its stats socket, stopped by pid.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The haproxy to run: `haproxy` on PATH, else Debian's `/usr/sbin/haproxy`
/// (not on a user's PATH there); `None` when neither runs.
pub fn binary() -> Option<&'static str> {
    ["haproxy", "/usr/sbin/haproxy"].into_iter().find(|bin| {
        Command::new(bin)
            .arg("-v")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// True when haproxy runs ([`binary`]).
pub fn installed() -> bool {
    binary().is_some()
}

/// A port on 127.0.0.1 that was free a moment ago: for a configuration
/// file, which needs the port before anything listens on it.
///
/// Chosen below the kernel's ephemeral range (32768 and up by default),
/// not by binding port 0: a replica restarted on its port must find it
/// free, and haproxy's own connections to the other replica take their
/// source ports from the ephemeral range, one of which could be a stopped
/// replica's port for as long as that connection lives.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    // Apart per process (test binaries may run side by side) and per call.
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::process::id().wrapping_mul(7919);
    (0..SPAN)
        .map(|_| {
            let step = NEXT.fetch_add(1, Ordering::Relaxed);
            (FIRST + base.wrapping_add(step) % SPAN) as u16
        })
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free port below the ephemeral range")
}

/// A running haproxy, killed (by its pid) when dropped.
pub struct Haproxy {
    child: Child,
    socket: PathBuf,
    /// What haproxy wrote to stderr (its warnings: servers going DOWN, UP).
    log: Arc<Mutex<String>>,
}

/// One server's line of `show stat`.
#[derive(Debug, Clone)]
pub struct ServerStat {
    /// `UP`, `DOWN`, `MAINT`, `UP 1/2` while rising…
    pub status: String,
    /// The last health check's result: `L7OK`, `L4CON`, `L7STS`…
    pub check_status: String,
    /// Requests sent to the server so far.
    pub sessions: u64,
}

impl Haproxy {
    /// Starts haproxy with `deploy/haproxy.cfg`, the frontend on
    /// `frontend` and the replicas at `replicas` (as many as the file
    /// names), its stats socket in `dir`; waits until the socket answers.
    pub fn start(frontend: &str, replicas: &[&str], dir: &Path) -> Haproxy {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/haproxy.cfg");
        let socket = dir.join("haproxy.sock");
        let mut cmd = Command::new(binary().expect("haproxy is installed"));
        // -db: in the foreground, so that its pid is the one to stop.
        cmd.arg("-db")
            .arg("-f")
            .arg(&config)
            .env("UNFLAT_FRONTEND", frontend)
            .env("UNFLAT_HAPROXY_SOCKET", &socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (i, r) in replicas.iter().enumerate() {
            cmd.env(format!("UNFLAT_REPLICA_{}", i + 1), r);
        }
        let mut child = cmd.spawn().expect("start haproxy");
        let log = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut haproxy = Haproxy { child, socket, log };
        let begun = Instant::now();
        while haproxy.command("show info").is_err() {
            if let Ok(Some(status)) = haproxy.child.try_wait() {
                panic!("haproxy exited: {status}\n{}", haproxy.log());
            }
            assert!(
                begun.elapsed() < Duration::from_secs(10),
                "haproxy's stats socket did not answer within 10 s\n{}",
                haproxy.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        haproxy
    }

    /// What haproxy has written to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends one command to the stats socket and returns the answer.
    pub fn command(&self, command: &str) -> std::io::Result<String> {
        let mut s = UnixStream::connect(&self.socket)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(format!("{command}\n").as_bytes())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?;
        Ok(answer)
    }

    /// The state of `server` in `backend`, from `show stat`'s CSV.
    pub fn server(&self, backend: &str, server: &str) -> ServerStat {
        let csv = self.command("show stat").expect("show stat");
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .expect("a header")
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let column = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .unwrap_or_else(|| panic!("no {name} column in show stat"))
        };
        let (status, check, stot) = (column("status"), column("check_status"), column("stot"));
        let row: Vec<&str> = lines
            .map(|l| l.split(',').collect::<Vec<&str>>())
            .find(|f| f.first() == Some(&backend) && f.get(1) == Some(&server))
            .unwrap_or_else(|| panic!("no {backend}/{server} in show stat:\n{csv}"));
        ServerStat {
            status: row[status].to_string(),
            check_status: row[check].to_string(),
            sessions: row[stot].parse().unwrap_or(0),
        }
    }

    /// Waits until `backend/server` is UP after a passed health check,
    /// for at most `within`; returns its state then.
    pub fn wait_up(&self, backend: &str, server: &str, within: Duration) -> ServerStat {
        self.wait(backend, server, within, "UP after a passed check", |s| {
            s.status == "UP" && s.check_status == "L7OK"
        })
    }

    /// Waits until haproxy has marked `backend/server` DOWN, for at most
    /// `within`; returns its state then.
    pub fn wait_down(&self, backend: &str, server: &str, within: Duration) -> ServerStat {
        self.wait(backend, server, within, "DOWN", |s| {
            s.status.starts_with("DOWN")
        })
    }

    /// Waits until the state of `backend/server` is `what` (`done`), for at
    /// most `within`.
    fn wait(
        &self,
        backend: &str,
        server: &str,
        within: Duration,
        what: &str,
        done: impl Fn(&ServerStat) -> bool,
    ) -> ServerStat {
        let begun = Instant::now();
        loop {
            let s = self.server(backend, server);
            if done(&s) {
                return s;
            }
            assert!(
                begun.elapsed() < within,
                "{backend}/{server} not {what} within {within:?}: {s:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}
