//! What the harnesses share: building the release binaries, starting a
//! server process on a free port (pinned to cores when asked), reading its
//! CPU time and memory from /proc, the CPU time of the harness's children,
//! and a localhost certificate with a client that trusts it; progress
//! lines for long runs; their command lines (`cli`).
#![allow(dead_code)] // each harness uses a different part

pub mod cli;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// The workspace root (where `wrk_scripts/` and `target/` are).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the harnesses write their CSV and SVG files.
pub fn out_dir() -> PathBuf {
    let dir = root().join("target").join("unflat-bench");
    std::fs::create_dir_all(&dir).expect("create target/unflat-bench");
    dir
}

/// Builds the release binaries the harness starts (the server's, and the
/// peers' of `peers/`, which is not a default member: hence
/// `--workspace`), with the cargo that runs the harness, and returns the
/// directory they are in. `UNFLAT_BENCH_PROFILE` names another profile for
/// them (CI's smoke runs: `smoke`, no LTO, quick to link); figures are
/// measured with the release profile, the default.
pub fn build_release(bins: &[&str]) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let profile = std::env::var("UNFLAT_BENCH_PROFILE")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "release".into());
    let mut cmd = Command::new(cargo);
    // The variables cargo set for this harness's own run are not the
    // caller's: a build script that declares one (`rerun-if-env-changed`;
    // ring declares CARGO_MANIFEST_DIR and CARGO_PKG_*) would see it
    // change, and this build and the next `cargo bench` would each rebuild
    // ring, rustls and all above them, a minute or more every time.
    for (name, _) in std::env::vars_os() {
        if set_by_cargo_for_a_run(&name.to_string_lossy()) {
            cmd.env_remove(&name);
        }
    }
    cmd.current_dir(root())
        .args(["build", "--profile", &profile, "--quiet", "--workspace"]);
    for b in bins {
        cmd.args(["--bin", b]);
    }
    // Quiet, so say why nothing happens for a while: on a fresh target
    // directory the server's fat LTO alone takes minutes.
    eprintln!(
        "building the release binaries {} (minutes on a fresh clone, a moment when up to date)",
        bins.join(", ")
    );
    let status = cmd.status().expect("run cargo build");
    assert!(status.success(), "cargo build --profile {profile} failed");
    root().join("target").join(profile)
}

/// Whether cargo sets `name` for the program it runs (cargo's "environment
/// variables Cargo sets for crates"), rather than it being the caller's.
fn set_by_cargo_for_a_run(name: &str) -> bool {
    const PREFIXES: [&str; 3] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_"];
    const NAMES: [&str; 5] = [
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
}

/// `42 s`, `3 min 05 s`, `1 h 02 min`: for progress lines.
pub fn hms(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

/// A long run's progress on stderr, so that stdout keeps only the results:
/// `{label}: {what} ({k} of {n}), 1 min 05 s elapsed, about 2 min 10 s
/// left` as each of `n` steps begins. The estimate is the mean step so
/// far, or the guess given before the first step has ended.
pub struct Progress {
    label: String,
    total: usize,
    done: usize,
    guess: Option<Duration>,
    started: Instant,
}

impl Progress {
    /// `total` steps, each expected to take about `guess` when given.
    pub fn new(label: &str, total: usize, guess: Option<Duration>) -> Progress {
        Progress {
            label: label.into(),
            total,
            done: 0,
            guess,
            started: Instant::now(),
        }
    }

    /// The next step, `what`, begins.
    pub fn step(&mut self, what: &str) {
        let elapsed = self.started.elapsed();
        let per = match self.done {
            0 => self.guess,
            done => Some(elapsed / done as u32),
        };
        let left = per.map_or(String::new(), |per| {
            format!(
                ", about {} left",
                hms(per * self.total.saturating_sub(self.done) as u32)
            )
        });
        self.done += 1;
        eprintln!(
            "{}: {what} ({} of {}), {} elapsed{left}",
            self.label,
            self.done,
            self.total,
            hms(elapsed)
        );
    }
}

/// A server process, killed on drop.
pub struct Proc {
    /// Its label in tables.
    pub name: String,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    child: Child,
}

impl Proc {
    /// Starts `bin args…`, which must print a line containing `http://ADDR`
    /// (or `https://ADDR`) once it listens (both servers' banners do), and
    /// waits for that line.
    pub fn start(name: &str, bin: &Path, args: &[String]) -> Proc {
        Proc::start_on(None, name, bin, args)
    }

    /// [`Proc::start`], on the CPUs `cpus` when given ([`on_cpus`]).
    pub fn start_on(cpus: Option<&str>, name: &str, bin: &Path, args: &[String]) -> Proc {
        let mut cmd = on_cpus(cpus, bin);
        cmd.args(args);
        Proc::spawn(name, cmd)
    }

    /// Starts `cmd` (a server with its arguments, and any environment the
    /// caller adds) as [`Proc::start`] does.
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        let mut child = cmd
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            let line = match lines.next() {
                Some(Ok(l)) => l,
                _ => panic!("{name} exited before it listened"),
            };
            if let Some(at) = line.find("http://").or_else(|| line.find("https://")) {
                let url: String = line[at..].split_whitespace().next().unwrap().to_string();
                break url;
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Proc {
            name: name.into(),
            url,
            child,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `host:port`.
    pub fn authority(&self) -> &str {
        let url = self.url.as_str();
        url.strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .unwrap_or(url)
    }

    /// CPU time of each thread alive now, from
    /// /proc/PID/task/*/schedstat (nanoseconds, where /proc/PID/stat counts
    /// clock ticks of 10 ms). Reading it starts no child process, which
    /// `children_cpu_time` would count.
    pub fn thread_times(&self) -> ThreadTimes {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.pid())).expect("list threads");
        ThreadTimes(
            tasks
                .filter_map(|t| {
                    let t = t.ok()?;
                    let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
                    let ns = stat.split_whitespace().next()?.parse().ok()?;
                    Some((t.file_name().to_string_lossy().into_owned(), ns))
                })
                .collect(),
        )
    }

    /// Resident set size now, in bytes, from /proc/PID/status.
    pub fn rss(&self) -> u64 {
        rss_of(self.pid()).expect("read VmRSS")
    }

    /// Stops the server as an operator would (SIGTERM: a graceful
    /// shutdown) and waits for it to exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: kill only sends a signal to the child's pid.
        unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGTERM) };
        self.child.wait().expect("wait for the server")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's CPU time per thread (by thread id), in nanoseconds.
pub struct ThreadTimes(std::collections::BTreeMap<String, u64>);

impl ThreadTimes {
    /// The CPU time the process used from `self` to `later`: what each
    /// thread alive at `later` gained (all of it, for a thread started in
    /// between). A thread that exited in between loses only what it used
    /// in between, where the difference of the sums would lose all it ever
    /// used (tokio's idle blocking threads exit after 10 s).
    pub fn until(&self, later: &ThreadTimes) -> Duration {
        let ns = later
            .0
            .iter()
            .map(|(tid, &ns)| ns.saturating_sub(self.0.get(tid).copied().unwrap_or(0)))
            .sum();
        Duration::from_nanos(ns)
    }
}

/// A command for `program`, run on the CPUs `cpus` (a `taskset -c` list
/// such as `0` or `1-3`) when given: `taskset` sets the affinity, then
/// runs `program` in its own process, so every thread it starts inherits
/// the affinity and its pid is the program's.
pub fn on_cpus(cpus: Option<&str>, program: impl AsRef<std::ffi::OsStr>) -> Command {
    match cpus {
        None => Command::new(program),
        Some(cpus) => {
            let mut c = Command::new("taskset");
            c.args(["-c", cpus]).arg(program);
            c
        }
    }
}

/// VmRSS of `pid` in bytes.
pub fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// User + system CPU time of every child process waited for so far
/// (getrusage RUSAGE_CHILDREN). Its change around one `Command::output()`
/// is that child's CPU time: how the wrk harness measures wrk itself.
pub fn children_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the rusage it is given and reads nothing else.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_CHILDREN)");
    // SAFETY: zero-initialised, then filled by a successful getrusage.
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Linux's count, for the whole machine, of TCP data segments received on
/// the fast path (`TcpExt: TCPHPHits` in /proc/net/netstat; none
/// elsewhere). A segment leaves it, among other reasons, when the
/// receiving socket's memory reserve is smaller than the segment, a matter
/// of where the socket's last write fell against pages
/// (docs/results/pipelined.md); on loopback the slow path's work is done
/// on the sender's CPU.
pub fn tcp_fast_path_segments() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut tcp_ext = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (tcp_ext.next()?, tcp_ext.next()?);
    let at = names.split_whitespace().position(|n| n == "TCPHPHits")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// The interrupts that woke the CPUs `cpus` (a list such as `0`, `0-1`
/// or `0,2-3`) to run a task so far, for the whole machine: rescheduling
/// and function-call IPIs (`RES` and `CAL` in /proc/interrupts; none
/// elsewhere). A task that wakes one asleep on another CPU sends one when
/// that CPU is idle; in a VM guest each is an exit to the host, which the
/// waker pays for (docs/results/pipelined.md).
pub fn wake_ipis(cpus: &str) -> Option<u64> {
    let mut wanted = Vec::new();
    for span in cpus.split(',') {
        let (first, last) = span.split_once('-').unwrap_or((span, span));
        wanted.extend(first.trim().parse::<usize>().ok()?..=last.trim().parse::<usize>().ok()?);
    }
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let columns = wanted
        .iter()
        .map(|c| header.iter().position(|h| *h == format!("CPU{c}")))
        .collect::<Option<Vec<_>>>()?;
    let mut total = 0;
    for line in lines {
        let mut fields = line.split_whitespace();
        if matches!(fields.next(), Some("RES:" | "CAL:")) {
            let counts: Vec<&str> = fields.collect();
            for &c in &columns {
                total += counts.get(c)?.parse::<u64>().ok()?;
            }
        }
    }
    Some(total)
}

/// True when `program --version` (or `-v`) runs.
pub fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The smallest of `values` (infinity when empty).
pub fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The largest of `values` (minus infinity when empty).
pub fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// The machine, for the reports: CPU model, cores, memory, kernel.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpu}, {cores} cores, {mem_gib:.0} GiB, Linux {}",
        kernel.trim()
    )
}

/// The arguments every harness starts unflat-server with: a free port on
/// 127.0.0.1, `workers` worker threads, `strategy`.
pub fn server_args(workers: usize, strategy: &str) -> Vec<String> {
    let workers = workers.to_string();
    [
        "--addr",
        "127.0.0.1:0",
        "--workers",
        &workers,
        "--strategy",
        strategy,
    ]
    .map(String::from)
    .to_vec()
}

/// Pins the calling thread (and the threads it starts after) to `cpu`.
pub fn pin_self(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it,
    // and sched_setaffinity reads exactly size_of::<cpu_set_t>() bytes.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(rc, 0, "sched_setaffinity to CPU {cpu}");
}

/// HTTPS for a harness: a certificate for localhost, written as PEM files
/// for the servers, and a rustls client configuration that trusts only it.
pub struct Tls {
    /// `--tls-cert PATH --tls-key PATH`, for unflat-server and hyper-peer.
    pub server_args: Vec<String>,
    /// The client side (aws-lc-rs, as the server).
    pub client: Arc<ClientConfig>,
}

impl Tls {
    /// A new certificate, its files named `{prefix}-cert.pem` and
    /// `{prefix}-key.pem` in [`out_dir`].
    pub fn new(prefix: &str) -> Tls {
        let made =
            rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("certificate");
        let dir = out_dir();
        let (cert, key) = (
            dir.join(format!("{prefix}-cert.pem")),
            dir.join(format!("{prefix}-key.pem")),
        );
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(made.cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server_args = [
            "--tls-cert".into(),
            cert.display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
        ];
        Tls {
            server_args: server_args.to_vec(),
            client: Arc::new(client),
        }
    }
}

/// A byte stream to a server: a TCP connection, or TLS over one.
pub trait Conn: Read + Write {}
impl<T: Read + Write> Conn for T {}

/// Connects to `server`, through TLS when `tls` is given (the handshake
/// happens on the first read or write).
pub fn connect(server: &Proc, tls: Option<&Tls>) -> Box<dyn Conn> {
    let tcp = TcpStream::connect(server.authority()).expect("connect");
    let _ = tcp.set_nodelay(true);
    match tls {
        None => Box::new(tcp),
        Some(tls) => {
            let name = ServerName::try_from("localhost").unwrap();
            let conn = ClientConnection::new(tls.client.clone(), name).expect("TLS client");
            Box::new(StreamOwned::new(conn, tcp))
        }
    }
}

/// Reads `Content-Length` responses one after another from a connection,
/// keeping what arrives past one response for the next (pipelining).
pub struct Responses {
    buf: Vec<u8>,
    chunk: Vec<u8>,
}

impl Default for Responses {
    fn default() -> Responses {
        Responses {
            buf: Vec::new(),
            chunk: vec![0u8; 256 * 1024],
        }
    }
}

impl Responses {
    /// Reads until the next response's head is whole in the buffer: its
    /// length. Fails on a head httparse refuses or a connection closed
    /// first.
    pub fn head(&mut self, conn: &mut dyn Read) -> Result<usize, String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut res = httparse::Response::new(&mut headers);
            let parsed = res
                .parse(&self.buf)
                .map_err(|e| format!("a response head: {e}"))?;
            if let httparse::Status::Complete(head) = parsed {
                return Ok(head);
            }
            let n = conn.read(&mut self.chunk).map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("the connection closed before a whole response head".into());
            }
            self.buf.extend_from_slice(&self.chunk[..n]);
        }
    }

    /// The status and field lines (names in lower case) of the head
    /// [`Responses::head`] read, `head` bytes long.
    pub fn fields(&self, head: usize) -> (u16, Vec<(String, String)>) {
        self.parsed(head, |res| {
            let fields = res
                .headers
                .iter()
                .map(|h| {
                    let value = String::from_utf8_lossy(h.value).into_owned();
                    (h.name.to_ascii_lowercase(), value)
                })
                .collect();
            (res.code.unwrap_or(0), fields)
        })
    }

    /// `read` of the head [`Responses::head`] read, `head` bytes long,
    /// parsed.
    fn parsed<T>(&self, head: usize, read: impl FnOnce(&httparse::Response) -> T) -> T {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut res = httparse::Response::new(&mut headers);
        res.parse(&self.buf[..head]).expect("a whole head");
        read(&res)
    }

    /// The next response's body length; panics on anything but a 200 with
    /// a Content-Length, or on a closed connection.
    pub fn next(&mut self, conn: &mut dyn Read) -> usize {
        let head = self.head(conn).unwrap_or_else(|e| panic!("{e}"));
        let len: usize = self.parsed(head, |res| {
            assert_eq!(
                res.code,
                Some(200),
                "{}",
                String::from_utf8_lossy(&self.buf[..head])
            );
            res.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
                .expect("a Content-Length")
        });
        // Drain the body as it arrives instead of keeping it all.
        let chunk = &mut self.chunk;
        let mut have = self.buf.len() - head;
        while have < len {
            let n = conn.read(chunk).expect("read");
            assert!(n > 0, "server closed the connection");
            if have + n <= len {
                have += n;
            } else {
                // This read holds the start of the next response.
                self.buf.clear();
                self.buf.extend_from_slice(&chunk[len - have..n]);
                return len;
            }
        }
        self.buf.drain(..(head + len).min(self.buf.len()));
        len
    }
}
