//! probe-latency: how long a normal client's `GET /healthz` takes while
//! other clients pipeline builds of distinct large bodies.
//!
//! The server (release build, `--workers 1`: one async worker, the hardest
//! case) runs pinned to one CPU, the clients to another. Attackers each
//! send `--pipeline` requests for distinct `/end-string/{len}?kind=twobyte&
//! body=rope` bodies — every one a build — and read the answers, round
//! after round; a probe sends `GET /healthz` on a keep-alive connection
//! every 10 ms and times each answer. The same probe runs first with no
//! attack, as the baseline. `--compare BIN` runs another server binary
//! (an older build, say) the same way, alternating with this one.
//!
//! Usage: `cargo bench --bench probe-latency -- [--seconds N]`.

#[path = "support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use support::{build_release, cli, machine, pin_self, Proc, Progress, Responses};

/// The latency of a normal client's GET /healthz while other clients
/// pipeline builds of distinct large bodies: p50, p99 and max, first with no
/// attack (the baseline), then under it; and the bodies built meanwhile.
///
/// Builds the release server and runs it with --workers 1 (the hardest
/// case) pinned to CPU 0, the clients on CPU 1. --attackers connections
/// each pipeline --pipeline requests for distinct
/// /end-string/{len}?kind=twobyte&body=rope bodies, round after round; a
/// probe sends GET /healthz on a keep-alive connection every 10 ms. Each
/// round takes about 1.5 × --seconds. Progress (round k of N, time
/// elapsed and left) goes to stderr; the latencies to stdout. Writes no
/// files.
///
/// Examples:
///   cargo bench --bench probe-latency -- --quick    2 s, bodies of 256 Ki characters
///   cargo bench --bench probe-latency -- --rounds 3 --compare OLD-BUILD/unflat-server
#[derive(Parser, Debug)]
#[command(
    name = "probe-latency",
    bin_name = "cargo bench --bench probe-latency --",
    verbatim_doc_comment
)]
struct Opts {
    /// Seconds each measurement lasts (1 to 3600).
    #[arg(long, default_value_t = 10, value_parser = cli::count(1..=3600))]
    seconds: usize,
    /// Attacking connections (1 to 64).
    #[arg(long, default_value_t = 2, value_parser = cli::count(1..=64))]
    attackers: usize,
    /// Requests each attacker pipelines per round (1 to 1000).
    #[arg(long, default_value_t = 50, value_parser = cli::count(1..=1000))]
    pipeline: usize,
    /// Characters of each body (two-byte text in a ropey rope: three bytes
    /// each on the wire; 1 to 16777216).
    #[arg(long, default_value_t = 4 << 20, value_parser = cli::count(1..=16 << 20))]
    len: usize,
    /// Rounds, alternating the servers (1 to 100).
    #[arg(long, default_value_t = 1, value_parser = cli::count(1..=100))]
    rounds: usize,
    /// Another server binary to measure the same way (an older build).
    #[arg(long, value_name = "BIN")]
    compare: Option<PathBuf>,
    /// A smoke run: 2 s, bodies of 256 Ki characters.
    #[arg(long)]
    quick: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long)]
    bench: bool,
}

/// Latencies of the probe, sorted.
struct Probed(Vec<Duration>);

impl Probed {
    fn at(&self, q: f64) -> Duration {
        let i = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[i]
    }

    fn line(&self, what: &str) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        format!(
            "{what:<34} probes {:>5}  p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
            self.0.len(),
            ms(self.at(0.5)),
            ms(self.at(0.99)),
            ms(self.at(1.0))
        )
    }
}

/// `GET /healthz` every 10 ms on one keep-alive connection for `seconds`.
fn probe(server: &Proc, seconds: f64) -> Probed {
    let mut s = TcpStream::connect(server.authority()).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut responses = Responses::default();
    let begun = Instant::now();
    let mut took = Vec::new();
    while begun.elapsed().as_secs_f64() < seconds {
        let sent = Instant::now();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
            .unwrap();
        // Panics on anything but a 200.
        responses.next(&mut s);
        took.push(sent.elapsed());
        std::thread::sleep(Duration::from_millis(10));
    }
    took.sort();
    Probed(took)
}

/// Attackers pipelining builds until `stop`; each round asks for bodies
/// no earlier round asked for.
fn attack(server: &Proc, o: &Opts, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<()>> {
    (0..o.attackers)
        .map(|a| {
            let (addr, stop) = (server.authority().to_string(), stop.clone());
            let (pipeline, len) = (o.pipeline, o.len);
            std::thread::spawn(move || {
                let mut round = 0;
                let mut sink = vec![0u8; 1 << 20];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(&addr) else {
                        return;
                    };
                    let batch: String = (0..pipeline)
                        .map(|i| {
                            let n = len + (a * 100_000 + round * pipeline + i) % 1_000_000;
                            format!(
                                "GET /end-string/{n}?kind=twobyte&body=rope HTTP/1.1\r\nHost: a\r\n\r\n"
                            )
                        })
                        .collect();
                    round += 1;
                    if s.write_all(batch.as_bytes()).is_err() {
                        continue;
                    }
                    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
                    // Read whatever comes (and drop it) until the round ends
                    // or time is up.
                    loop {
                        match s.read(&mut sink) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut =>
                            {
                                if stop.load(Ordering::Relaxed) {
                                    return;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
            })
        })
        .collect()
}

/// The value of one `/metrics` series.
fn metric(server: &Proc, series: &str) -> u64 {
    let mut s = TcpStream::connect(server.authority()).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let mut o: Opts = cli::parse();
    if o.quick {
        o.seconds = 2;
        o.len = 256 << 10;
    }
    let bin = build_release(&["unflat-server"]).join("unflat-server");
    println!("machine: {}", machine());
    println!(
        "probe-latency: GET /healthz every 10 ms while {} connections pipeline {} builds each of /end-string/~{}?kind=twobyte&body=rope, {} s per measurement",
        o.attackers, o.pipeline, o.len, o.seconds
    );
    println!("pinned: the server on CPU 0, the clients on CPU 1; --workers 1\n");
    let mut servers = vec![("unflat-server".to_string(), bin)];
    if let Some(other) = &o.compare {
        servers.push((format!("compare ({})", other.display()), other.clone()));
    }
    pin_self(1);
    let mut progress = Progress::new(
        "probe-latency",
        o.rounds * servers.len(),
        // The baseline's half, the attack's whole, start and stop.
        Some(Duration::from_secs_f64(1.5 * o.seconds as f64 + 0.5)),
    );
    for round in 0..o.rounds {
        for (name, bin) in &servers {
            progress.step(&format!("round {} of {}, {name}", round + 1, o.rounds));
            let args: Vec<String> = ["--addr", "127.0.0.1:0", "--workers", "1"]
                .map(String::from)
                .to_vec();
            let server = Proc::start_on(Some("0"), name, bin, &args);
            let quiet = probe(&server, o.seconds as f64 / 2.0);
            let stop = Arc::new(AtomicBool::new(false));
            let attackers = attack(&server, &o, stop.clone());
            // The builds under way before the probe begins.
            std::thread::sleep(Duration::from_millis(300));
            let loaded = probe(&server, o.seconds as f64);
            stop.store(true, Ordering::Relaxed);
            let builds = metric(&server, "unflat_body_builds_total{shared=\"false\"}");
            let refused = metric(&server, "unflat_memory_refusals_total");
            drop(server);
            for a in attackers {
                let _ = a.join();
            }
            println!("round {} of {}, {name}", round + 1, o.rounds);
            println!("  {}", quiet.line("no attack"));
            println!("  {}", loaded.line("while builds are pipelined"));
            println!("  bodies built: {builds}; refused for memory: {refused}");
        }
    }
}
