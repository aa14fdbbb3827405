//! The process's own metrics, under the names every Prometheus client
//! library gives them, read from `/proc` when `/metrics` is scraped (only
//! the start time without `/proc`); nothing is counted per request.

use std::time::SystemTime;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads the process's figures on each scrape.
#[derive(Debug)]
pub struct Process {
    /// When the server started, in seconds since the Unix epoch.
    started: f64,
}

impl Process {
    /// The collector of a server starting now.
    pub fn new() -> Process {
        let started = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Process { started }
    }
}

/// What `/proc` says of this process.
struct Figures {
    cpu_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    open_fds: i64,
    max_fds: i64,
}

/// Clock ticks per second in `/proc/self/stat` (`USER_HZ`): 100 on
/// Linux's x86, ARM and RISC-V alike, a constant of its ABI there.
const USER_HZ: f64 = 100.0;

/// The value of `name` (`VmRSS:`) in `/proc/self/status`, in bytes.
fn status_bytes(status: &str, name: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kib: i64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The figures, or `None` without `/proc`.
fn read() -> Option<Figures> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command, which is in parentheses and may hold spaces.
    let after = stat.rsplit_once(')')?.1;
    let field = |n: usize| after.split_whitespace().nth(n)?.parse::<f64>().ok();
    // utime and stime are fields 14 and 15 of proc(5)'s stat; `after`
    // starts at field 3.
    let cpu_ticks = field(11)? + field(12)?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as i64;
    // "Max open files            1024                 524288               files"
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let max_fds = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(-1);
    Some(Figures {
        cpu_seconds: cpu_ticks / USER_HZ,
        resident_bytes: status_bytes(&status, "VmRSS:")?,
        virtual_bytes: status_bytes(&status, "VmSize:")?,
        open_fds,
        max_fds,
    })
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauge = |encoder: &mut DescriptorEncoder, name, help, v: f64| {
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
        };
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch, in seconds.",
            self.started,
        )?;
        let Some(f) = read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(f.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds.",
            None,
            cpu.metric_type(),
        )?)?;
        for (name, help, v) in [
            (
                "process_resident_memory_bytes",
                "Resident memory size, in bytes.",
                f.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size, in bytes.",
                f.virtual_bytes,
            ),
            ("process_open_fds", "Open file descriptors.", f.open_fds),
            (
                "process_max_fds",
                "The most open file descriptors allowed.",
                f.max_fds,
            ),
        ] {
            gauge(&mut encoder, name, help, v as f64)?;
        }
        Ok(())
    }
}
