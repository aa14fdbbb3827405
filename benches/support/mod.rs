//! What the wrk and large-write harnesses share: building the release
//! binaries, starting a server process on a free port, reading its CPU
//! time and memory from /proc, and the CPU time of the harness's children.
#![allow(dead_code)] // each harness uses a different part

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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

/// Builds the release binaries the harness starts, with the cargo that runs
/// the harness, and returns the directory they are in.
pub fn build_release(bins: &[&str]) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root())
        .args(["build", "--release", "--quiet"]);
    for b in bins {
        cmd.args(["--bin", b]);
    }
    let status = cmd.status().expect("run cargo build");
    assert!(status.success(), "cargo build --release failed");
    root().join("target").join("release")
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
        let mut child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
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

    /// User + system CPU time used so far, from /proc/PID/stat.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .expect("read /proc/PID/stat");
        // Fields after the command name, which is in parentheses and may hold
        // spaces: state is field 3, utime 14, stime 15.
        let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
    }

    /// Resident set size now, in bytes, from /proc/PID/status.
    pub fn rss(&self) -> u64 {
        rss_of(self.pid()).expect("read VmRSS")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of `pid` in bytes.
pub fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Clock ticks per second (100 on Linux), asked of libc rather than of
/// `getconf`, so that reading a server's CPU time starts no child process
/// that `children_cpu_time` would count.
fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
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
