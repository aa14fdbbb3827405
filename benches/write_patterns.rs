//! `cargo bench --bench write-patterns -- [--runs 7] [--quick]`: the Deno
//! write-up's TLS write patterns — 2000 × 4 KB awaited, fire-and-forget,
//! corked, and 1 × 32 MB — as HTTP responses from unflat-server, over
//! cleartext and over HTTPS, with `--strategy flatten` and `direct`.
//!
//! The four servers (cleartext and TLS, each strategy) run with one worker
//! on core 0 (`taskset`), the harness's client on core 1; each pattern runs
//! on every server in turn, run after run, so the four alternate. Per
//! pattern and server, medians over the runs: wall time from the first
//! request written to the last body byte read, and the server's CPU time
//! (its threads' /proc/PID/task/*/schedstat, nanoseconds). Then the ratios
//! the patterns are for: direct against flatten on each transport, and TLS
//! against cleartext for each strategy.
//!
//! The patterns, all on one keep-alive connection per run:
//! - `4k awaited`: 2000 requests for a 4096-byte body, each written only
//!   after the previous response has been read;
//! - `4k corked`: the same 2000, 16 per write (wrk's pipelining, the
//!   TechEmpower depth), a batch's responses read before the next batch;
//! - `4k fire-and-forget`: all 2000 requests in one write, then all
//!   responses read;
//! - `32m`: one 32 MiB `/large` body (built and cached by a warm-up
//!   request first).

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Parser;
use support::{
    build_release, cli, connect, machine, median, pin_self, server_args, Proc, Progress, Responses,
    Tls,
};

/// The Deno write-up's TLS write patterns as HTTP responses from
/// unflat-server, --strategy flatten and direct, over cleartext and HTTPS:
/// wall time and server CPU time per pattern, and their ratios (direct
/// against flatten, TLS against cleartext).
///
/// The patterns, each on one keep-alive connection: 2000 requests for a
/// 4096-byte body, each written once the previous answer is read (4k
/// awaited), 16 per write (4k corked), or all in one write (4k
/// fire-and-forget); and one 32 MiB /large body (32m). Builds the release
/// server and starts four (two strategies, two transports), one worker
/// each on core 0, the client on core 1; the servers alternate, run after
/// run. Progress (run k of N, time elapsed and left) goes to stderr; the
/// medians and ratios to stdout.
///
/// Writes only the certificate the HTTPS servers use:
/// target/unflat-bench/write-patterns-cert.pem and write-patterns-key.pem.
///
/// Examples:
///   cargo bench --bench write-patterns -- --quick    1 run of 200 requests: a smoke run
///   cargo bench --bench write-patterns -- --runs 15
#[derive(Parser, Debug)]
#[command(
    name = "write-patterns",
    bin_name = "cargo bench --bench write-patterns --",
    verbatim_doc_comment
)]
struct Opts {
    /// Runs per (pattern, server) (1 to 1000).
    #[arg(long, default_value_t = 7, value_parser = cli::count(1..=1000))]
    runs: usize,
    /// A short smoke run: 1 run, 200 responses instead of 2000.
    #[arg(long)]
    quick: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long)]
    bench: bool,
}

/// The 4 KB responses' body length.
const SMALL: usize = 4096;
/// The large response's body length.
const LARGE: usize = 32 << 20;

/// How a pattern sends its requests.
#[derive(Clone, Copy)]
enum Pattern {
    /// `n` small responses, `per_write` requests per write, each batch's
    /// responses read before the next batch is written.
    Small { per_write: usize },
    /// One large response.
    Large,
}

impl Pattern {
    fn name(self, n: usize) -> String {
        match self {
            Pattern::Small { per_write: 1 } => "4k awaited".into(),
            Pattern::Small { per_write } if per_write >= n => "4k fire-and-forget".into(),
            Pattern::Small { per_write } => format!("4k corked ({per_write} per write)"),
            Pattern::Large => "32m".into(),
        }
    }
}

/// One server of the four.
struct Server {
    proc: Proc,
    tls: bool,
    strategy: &'static str,
}

impl Server {
    fn label(&self) -> String {
        format!(
            "{} {}",
            if self.tls { "tls" } else { "clear" },
            self.strategy
        )
    }
}

/// Runs `pattern` once against `s` (`n` small responses): wall time and
/// the server's CPU time.
fn run(s: &Server, tls: &Tls, pattern: Pattern, n: usize) -> (Duration, Duration) {
    let mut conn = connect(&s.proc, s.tls.then_some(tls));
    let mut responses = Responses::default();
    // The handshake is not part of the pattern: one response first.
    conn.write_all(request(SMALL).as_bytes()).unwrap();
    assert_eq!(responses.next(&mut conn), SMALL);
    let cpu = s.proc.thread_times();
    let start = Instant::now();
    match pattern {
        Pattern::Small { per_write } => {
            let batch = request(SMALL).repeat(per_write);
            let mut left = n;
            while left > 0 {
                let k = left.min(per_write);
                conn.write_all(&batch.as_bytes()[..k * batch.len() / per_write])
                    .unwrap();
                for _ in 0..k {
                    assert_eq!(responses.next(&mut conn), SMALL);
                }
                left -= k;
            }
        }
        Pattern::Large => {
            conn.write_all(
                format!("GET /large/{LARGE} HTTP/1.1\r\nHost: bench\r\n\r\n").as_bytes(),
            )
            .unwrap();
            assert_eq!(responses.next(&mut conn), LARGE);
        }
    }
    (start.elapsed(), cpu.until(&s.proc.thread_times()))
}

fn request(len: usize) -> String {
    format!("GET /end-string/{len} HTTP/1.1\r\nHost: bench\r\n\r\n")
}

fn main() {
    let o: Opts = cli::parse();
    let (runs, n) = if o.quick { (1, 200) } else { (o.runs, 2000) };
    let bin = build_release(&["unflat-server"]);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let tls = Tls::new("write-patterns");
    let servers: Vec<Server> = [false, true]
        .into_iter()
        .flat_map(|t| ["flatten", "direct"].map(|s| (t, s)))
        .map(|(t, strategy)| {
            let mut args = server_args(1, strategy);
            if t {
                args.extend(tls.server_args.iter().cloned());
            }
            let cpus = (cores > 1).then_some("0");
            let name = format!("{} {strategy}", if t { "tls" } else { "clear" });
            Server {
                proc: Proc::start_on(cpus, &name, &bin.join("unflat-server"), &args),
                tls: t,
                strategy,
            }
        })
        .collect();
    // Before pinning: machine() counts the cores this thread may use.
    println!("machine: {}", machine());
    if cores > 1 {
        pin_self(1);
    }
    println!(
        "servers with 1 worker{}; {n} × {SMALL} B and 1 × {} MiB; {runs} run(s), servers alternating\n",
        if cores > 1 { " on core 0, the client on core 1" } else { "" },
        LARGE >> 20
    );
    // The 32 MiB payload is built on first use; build it outside the runs.
    for s in &servers {
        run(s, &tls, Pattern::Large, n);
    }
    let patterns = [
        Pattern::Small { per_write: 1 },
        Pattern::Small { per_write: 16 },
        Pattern::Small { per_write: n },
        Pattern::Large,
    ];
    // (pattern, server) → wall ms, server CPU ms, per run.
    let mut wall = vec![vec![Vec::new(); servers.len()]; patterns.len()];
    let mut cpu = wall.clone();
    let mut progress = Progress::new("write-patterns", runs * patterns.len(), None);
    for r in 0..runs {
        for (p, &pattern) in patterns.iter().enumerate() {
            progress.step(&format!("run {} of {runs}, {}", r + 1, pattern.name(n)));
            for (i, s) in servers.iter().enumerate() {
                let (w, c) = run(s, &tls, pattern, n);
                wall[p][i].push(w.as_secs_f64() * 1e3);
                cpu[p][i].push(c.as_secs_f64() * 1e3);
            }
        }
    }
    println!(
        "{:<28} {:<14} {:>10} {:>14}",
        "pattern", "server", "wall ms", "server CPU ms"
    );
    let mut medians = vec![vec![(0.0, 0.0); servers.len()]; patterns.len()];
    for (p, &pattern) in patterns.iter().enumerate() {
        for (i, s) in servers.iter().enumerate() {
            let m = (median(&mut wall[p][i]), median(&mut cpu[p][i]));
            medians[p][i] = m;
            println!(
                "{:<28} {:<14} {:>10.2} {:>14.2}",
                pattern.name(n),
                s.label(),
                m.0,
                m.1
            );
        }
    }
    // Servers are [clear flatten, clear direct, tls flatten, tls direct].
    println!(
        "\nratios of medians (wall / server CPU; below 1 is faster or less CPU)\n{:<28} {:>22} {:>22} {:>22} {:>22}",
        "pattern",
        "direct/flatten clear",
        "direct/flatten tls",
        "tls/clear flatten",
        "tls/clear direct"
    );
    for (p, &pattern) in patterns.iter().enumerate() {
        let m = &medians[p];
        let r = |a: usize, b: usize| format!("{:.2} / {:.2}", m[a].0 / m[b].0, m[a].1 / m[b].1);
        println!(
            "{:<28} {:>22} {:>22} {:>22} {:>22}",
            pattern.name(n),
            r(1, 0),
            r(3, 2),
            r(2, 0),
            r(3, 1)
        );
    }
}
