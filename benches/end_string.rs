//! `cargo bench --bench end-string -- [options]`: Node's
//! `benchmark/http/end-string.js`, driven by wrk, against four servers
//! started by the harness — unflat-server `--strategy flatten`, unflat-server
//! `--strategy direct`, hyper-peer, and `ceiling` (peers/src/bin/ceiling.rs: parse
//! and one write of a prebuilt response, the floor any server pays on this
//! kernel) — with each variant's ratio to the ceiling and Node's comparison
//! tables.
//!
//! Every run is `wrk -c 50 -d {duration} -s wrk_scripts/end-string.lua`; the
//! variants alternate run by run, as Node's compare.js does (every other
//! round in the reverse order, so that none always goes first), after one
//! unrecorded 1 s warm-up run each. Server CPU time is read around each run
//! from /proc/PID/task/*/schedstat (nanoseconds, per thread), giving CPU µs
//! per request, a figure that holds even when wrk is the bottleneck; wrk's
//! own CPU time (getrusage of the harness's children) is recorded too, and,
//! on Linux, how many TCP segments per request the kernel took on its
//! receive fast path: on loopback a segment that misses it is worked on by
//! its sender's CPU, wrk's for a request (docs/results/pipelined.md).
//!
//! The servers and wrk run on disjoint cores (`taskset`): the servers'
//! `--workers` on cores 0.. (default: half the cores, so 1 + 1 on 2 cores),
//! wrk on the cores after them; `--no-pin` lets them share every core. On
//! 2 cores sharing makes the figures swing by 1.5×: a second server worker
//! fights wrk.
//!
//! Runs: up to Node's 30 per cell; a length stops early once, after
//! `--min-runs`, every variant's mean CPU per request is known to within
//! `--accuracy` (±1 % at 95 %), and no round starts past `--budget` (20
//! minutes).
//!
//! Comparisons: Node's compare.R tables (Welch's t-test on the two sets of
//! runs), then the same comparisons paired by round — the log ratio of the
//! two variants' runs of each round, which are seconds apart — so that a
//! shift of the whole machine between rounds cancels out; the paired tables
//! also compare direct with the ceiling. `--from-runs FILE` prints the
//! summary and the tables again from a runs file, and draws its chart
//! again (`end-string-runs.csv` gives `end-string.svg`), running nothing;
//! `--from-runs A,B,…` takes runs made hours apart as one set and adds a
//! table with each file as one measurement, whose interval counts what
//! moves the ratio between runs as well as between rounds.
//!
//! With `--pipeline N` each connection sends N requests per write, the
//! TechEmpower plaintext shape (`wrk_scripts/pipeline.lua`), and may-peer
//! (may_minihttp, the design behind that benchmark's Rust leaders) joins the
//! variants; hyper-peer then runs with `--pipeline-flush`. Every server's
//! answers to one pipelined batch are checked before the runs.
//!
//! Every server must send the field lines unflat-server sends, values
//! included, but for `Date`'s value: the runs then compare one response,
//! and a peer that drifts from it stops the harness before any run. Only
//! a `Server` line may be missing from one of two servers: may_minihttp
//! always sends `Server: M`, so when may-peer runs, unflat-server sends
//! the same line (`--server-header M`) and the two answer with the same
//! bytes — a response a few bytes longer or shorter can change how the
//! kernel's receive path treats the next request on loopback, on wrk's
//! CPU (docs/results/pipelined.md), which is no server's work.
//!
//! With `--tls` every server speaks HTTPS with a certificate made here for
//! localhost (wrk connects with OpenSSL): unflat-server with
//! `--tls-cert`/`--tls-key`, hyper-peer on tokio-rustls with the same rustls
//! configuration and handshake; the ceiling is cleartext only and left out.
//! `--tls-provider aws-lc-rs|ring` is the rustls crypto provider of every
//! one of them (default aws-lc-rs), so that the providers can be compared
//! run against run. The variant `hyper-stock` (`--variants`, with `--tls`
//! only; not run by default) is hyper-peer `--tls-stock`: hyper on a stock
//! tokio-rustls acceptor, as its users write it, none of unflat-server's
//! handshake or record bound.
//!
//! Written to target/unflat-bench/: `end-string.csv` in the layout of Node's
//! compare.js, one `end-string.OLD-NEW.csv` per comparison with the variants
//! renamed `old` and `new` (`Rscript benchmark/compare.R < FILE` reads it
//! unchanged), `end-string-runs.csv` with every figure of every run, and
//! `end-string.svg` (each named `end-string-tls…` with `--tls`,
//! `end-string-tls-ring…` with `--tls-provider ring`).

mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::statistics::Statistics;
use support::{
    build_release, children_cpu_time, cli, connect, hms, installed, machine, on_cpus, out_dir,
    root, tcp_fast_path_segments, wake_ipis, Proc, Progress, Responses, Tls,
};
use unflat_server::net::tls::Provider;

/// A server the benchmark runs, in the default order (may-peer by default
/// only with `--pipeline`, the shape it is built for; hyper-stock only when
/// `--variants` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Variant {
    /// unflat-server `--strategy flatten`.
    Flatten,
    /// unflat-server `--strategy direct`.
    Direct,
    /// hyper-peer (peers/src/bin/hyper-peer.rs).
    Hyper,
    /// hyper-peer --tls-stock: hyper on a stock tokio-rustls acceptor
    /// (with --tls only).
    HyperStock,
    /// may-peer, may_minihttp (peers/src/bin/may-peer.rs).
    May,
    /// The floor: peers/src/bin/ceiling.rs.
    Ceiling,
}

impl Variant {
    /// Its name in tables, file names and the CSV files.
    fn name(self) -> &'static str {
        match self {
            Variant::Flatten => "flatten",
            Variant::Direct => "direct",
            Variant::Hyper => "hyper",
            Variant::HyperStock => "hyper-stock",
            Variant::May => "may",
            Variant::Ceiling => "ceiling",
        }
    }

    /// True for the servers that speak cleartext only.
    fn cleartext_only(self) -> bool {
        matches!(self, Variant::May | Variant::Ceiling)
    }

    /// True for the servers that speak HTTPS only.
    fn https_only(self) -> bool {
        self == Variant::HyperStock
    }
}

/// The text of the body: the route's `kind` parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// One byte per character.
    Ascii,
    /// `é`: two UTF-8 bytes from one Latin-1 byte.
    Latin1,
    /// `€`: three UTF-8 bytes from one UTF-16 unit.
    Twobyte,
}

impl Kind {
    /// The route's `kind` value.
    fn name(self) -> &'static str {
        match self {
            Kind::Ascii => "ascii",
            Kind::Latin1 => "latin1",
            Kind::Twobyte => "twobyte",
        }
    }
}

/// How unflat-server keeps an `/end-string` body: the route's `body`
/// parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Body {
    /// One contiguous string.
    Flat,
    /// A ropey rope of ~1 KiB chunks.
    Rope,
}

impl Body {
    /// The route's `body` value.
    fn name(self) -> &'static str {
        match self {
            Body::Flat => "flat",
            Body::Rope => "rope",
        }
    }
}

/// The comparisons, old → new: Node's tables and the pair CSV files.
/// hyper → hyper-stock is what hyper gains or loses on a stock acceptor
/// rather than on unflat-server's handshake.
const PAIRS: [(Variant, Variant); 6] = [
    (Variant::Flatten, Variant::Direct),
    (Variant::Hyper, Variant::Direct),
    (Variant::HyperStock, Variant::Direct),
    (Variant::Hyper, Variant::HyperStock),
    (Variant::May, Variant::Direct),
    (Variant::Ceiling, Variant::Direct),
];
/// The comparisons in Node's (Welch) tables: the ceiling has its own
/// column there. The paired tables take all of [`PAIRS`], so that the
/// ratios to the ceiling get an accuracy too.
const TABLE_PAIRS: usize = 5;
/// The longest body: the servers' default `--max-len` (the ceiling's
/// limit too).
const MAX_LEN: u64 = 16 * 1024 * 1024;

/// Node's end-string benchmark under wrk: requests per second and server CPU
/// µs per request of unflat-server (--strategy flatten and direct),
/// hyper-peer, may-peer (with --pipeline) and a ceiling server (parse, one
/// write of a prebuilt response), each as a ratio to the ceiling. Over
/// HTTPS (--tls) on the rustls provider --tls-provider names, and
/// hyper-peer on a stock tokio-rustls acceptor too when --variants names
/// hyper-stock.
///
/// Builds the release binaries, starts every server pinned to cores of its
/// own, warms each up with one unrecorded 1 s wrk run per length, then runs
/// wrk against the variants in turn, round after round: up to --runs
/// rounds, fewer once every variant's CPU per request is known to within
/// --accuracy, and none begins that would end past --budget (20 minutes,
/// warm-up not counted). Progress (warm-up, run k of N, time elapsed and
/// left) goes to stderr; every run's figures, the summary and Node's
/// comparison tables (Welch's, then paired by round) to stdout.
///
/// Writes to target/unflat-bench/: end-string.csv (Node's compare.js
/// layout), end-string.OLD-NEW.csv per comparison (for compare.R),
/// end-string-runs.csv (every figure of every run, read by --from-runs) and
/// end-string.svg; with --pipeline or --tls they are named
/// end-string-pipeline… or end-string-tls… (end-string-tls-ring… with
/// --tls-provider ring); with --syscalls also strace-VARIANT-LEN.txt.
/// Needs wrk (strace for --syscalls, valgrind for --instructions).
///
/// Examples:
///   cargo bench --bench end-string -- --quick    a smoke run, 1 to 2 minutes
///   cargo bench --bench end-string               the full run, up to about 20 minutes
///   cargo bench --bench end-string -- --lens 1024 --runs 10 --tls
///   cargo bench --bench end-string -- --tls --tls-provider ring --variants direct,hyper,hyper-stock
#[derive(Parser, Debug, Clone)]
#[command(
    name = "end-string",
    bin_name = "cargo bench --bench end-string --",
    verbatim_doc_comment
)]
struct Opts {
    /// Most runs per (variant, len, kind), Node's default; fewer when every
    /// variant's mean CPU per request is known to within --accuracy first,
    /// or when --budget runs out (1 to 10000).
    #[arg(long, default_value_t = 30, value_parser = cli::count(1..=10_000))]
    runs: usize,
    /// Fewest runs per cell before a length may stop early (1 to 10000).
    #[arg(long, default_value_t = 5, value_parser = cli::count(1..=10_000))]
    min_runs: usize,
    /// A length stops once every variant's mean server CPU per request has
    /// a 95 % interval within this many per cent of itself (above 0, at
    /// most 100).
    #[arg(long, default_value_t = 1.0, value_parser = cli::positive(100.0))]
    accuracy: f64,
    /// No new round of runs starts past this many minutes (warm-up not
    /// counted; above 0, at most a day).
    #[arg(long, default_value_t = 20.0, value_parser = cli::positive(1440.0))]
    budget: f64,
    /// Seconds per run (1 to 3600).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    duration: u64,
    /// Body lengths in characters, comma-separated (1 to 16777216, the
    /// servers' --max-len).
    #[arg(long, value_delimiter = ',', default_values_t = [4usize, 64, 1024, 16384, 102400],
          value_parser = cli::count(1..=MAX_LEN))]
    lens: Vec<usize>,
    /// Kinds, comma-separated (the ceiling serves ascii only).
    #[arg(long, value_delimiter = ',', default_values = ["ascii"])]
    kinds: Vec<Kind>,
    /// Variants, comma-separated (default: all but may and hyper-stock;
    /// with --pipeline, all but hyper-stock; with --tls, flatten, direct
    /// and hyper). hyper-stock, hyper on a stock tokio-rustls acceptor,
    /// needs --tls.
    #[arg(long, value_delimiter = ',')]
    variants: Vec<Variant>,
    /// Pipeline this many requests per connection, TechEmpower's plaintext
    /// shape (wrk_scripts/pipeline.lua; TechEmpower uses 16; 1 to 1024).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pipeline: Option<u32>,
    /// wrk threads (1 to 256).
    #[arg(long, default_value_t = 1, value_parser = cli::count(1..=256))]
    threads: usize,
    /// Server worker threads (default: half the cores, one per core of
    /// its own; all of them with --no-pin; 1 to 1024).
    #[arg(long, value_parser = cli::count(1..=1024))]
    workers: Option<usize>,
    /// Let the servers and wrk share every core, instead of the servers on
    /// cores 0.. and wrk on the cores after them (`taskset`).
    #[arg(long)]
    no_pin: bool,
    /// Over HTTPS: the servers with a certificate for localhost made here,
    /// wrk through OpenSSL.
    #[arg(long)]
    tls: bool,
    /// With --tls, the rustls crypto provider of every server that speaks
    /// HTTPS: unflat-server's and hyper-peer's --tls-provider (default
    /// aws-lc-rs).
    #[arg(long, value_enum)]
    tls_provider: Option<Provider>,
    /// How unflat-server keeps the body (the wrk script's third argument).
    #[arg(long, default_value = "flat")]
    body: Body,
    /// wrk connections (at least --threads: wrk gives each thread its
    /// share; at most 65535).
    #[arg(long, default_value_t = 50, value_parser = cli::count(1..=65_535))]
    connections: usize,
    /// A short smoke run: 1 run of 1 s per cell.
    #[arg(long)]
    quick: bool,
    /// Also count the servers' read and write system calls per request
    /// (needs strace).
    #[arg(long)]
    syscalls: bool,
    /// Also count each server's user-space instructions per request
    /// (callgrind, benches/instructions.py: needs valgrind and python3;
    /// one request at a time, or --pipeline's depth per write).
    #[arg(long)]
    instructions: bool,
    /// Requests per variant and length for --syscalls (1 to 10000000).
    #[arg(long, default_value_t = 2000, value_parser = cli::count(1..=10_000_000))]
    syscall_requests: usize,
    /// Print the summary and the comparison tables of a runs file this
    /// harness wrote (`target/unflat-bench/*-runs.csv`) and draw its chart
    /// again into target/unflat-bench/ (`NAME-runs.csv` gives `NAME.svg`),
    /// running nothing. Several files, comma-separated: their rounds in
    /// one set (each file's numbered after the one before), the chart
    /// named after the first with `-pooled`, and a table of each file's
    /// paired ratio and their mean, each file one measurement.
    #[arg(long, value_name = "CSV[,CSV…]", value_delimiter = ',')]
    from_runs: Vec<PathBuf>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long)]
    bench: bool,
}

/// One wrk run.
#[derive(Clone, Debug)]
struct Run {
    variant: String,
    kind: String,
    len: usize,
    run: usize,
    req_per_s: f64,
    /// wrk's measured duration, seconds.
    duration_s: f64,
    cpu_us_per_req: f64,
    wrk_cpu_us_per_req: f64,
    p99_us: f64,
    errors: u64,
    /// TCP data segments received on Linux's fast path, both ways, per
    /// request ([`tcp_fast_path_segments`]; NaN where it is not known).
    fast_path_per_req: f64,
    /// Wake-up IPIs to the servers' CPUs per request ([`wake_ipis`]; NaN
    /// where it is not known, or the servers are not pinned).
    wakes_per_req: f64,
}

/// The first value `values` holds twice.
fn twice<T: PartialEq>(values: &[T]) -> Option<&T> {
    values
        .iter()
        .enumerate()
        .find(|(i, v)| values[..*i].contains(v))
        .map(|(_, v)| v)
}

/// The options once defaults that depend on others are filled in.
struct Plan {
    /// Server worker threads.
    workers: usize,
    /// `taskset -c` lists for the servers and wrk, when pinned (the default).
    cpus: Option<(String, String)>,
    /// The certificate, with `--tls`.
    tls: Option<Tls>,
    /// The servers' crypto provider, with `--tls`.
    provider: Provider,
    /// The output files' stem: `end-string`, then `-pipeline` and `-tls`
    /// (`-tls-ring` with *ring*) as they apply.
    stem: String,
}

/// Fills in the defaults that depend on other options, or says which
/// combination cannot run.
fn plan(o: &mut Opts) -> Result<Plan, String> {
    if o.variants.is_empty() {
        o.variants = Variant::value_variants()
            .iter()
            .copied()
            .filter(|v| !(o.tls && v.cleartext_only()))
            .filter(|v| *v != Variant::May || o.pipeline.is_some())
            .filter(|v| *v != Variant::HyperStock)
            .collect();
    } else if o.tls {
        if let Some(v) = o.variants.iter().find(|v| v.cleartext_only()) {
            return Err(format!(
                "--tls: {} serves cleartext only; leave it out of --variants",
                v.name()
            ));
        }
    } else if let Some(v) = o.variants.iter().find(|v| v.https_only()) {
        return Err(format!(
            "--variants {}: it serves HTTPS only; add --tls",
            v.name()
        ));
    }
    if let (Some(p), false) = (o.tls_provider, o.tls) {
        return Err(format!(
            "--tls-provider {}: the provider of HTTPS; add --tls",
            p.name()
        ));
    }
    let provider = o.tls_provider.unwrap_or_default();
    if let Some(v) = twice(&o.variants) {
        return Err(format!("--variants names {} twice", v.name()));
    }
    if let Some(k) = twice(&o.kinds) {
        return Err(format!("--kinds names {} twice", k.name()));
    }
    if let Some(len) = twice(&o.lens) {
        return Err(format!("--lens names {len} twice"));
    }
    if o.connections < o.threads {
        return Err(format!(
            "--connections {} is fewer than --threads {}: wrk needs a connection per thread",
            o.connections, o.threads
        ));
    }
    if o.instructions {
        for tool in ["valgrind", "python3"] {
            if !installed(tool) {
                return Err(format!(
                    "--instructions needs {tool}, which is not installed"
                ));
            }
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // One core cannot be split: the servers and wrk share it.
    let pin = !o.no_pin && cores > 1;
    let workers = o
        .workers
        .unwrap_or(if pin { (cores / 2).max(1) } else { cores });
    let cpus = if pin {
        if workers >= cores {
            return Err(format!(
                "{workers} server workers leave none of the {cores} cores for wrk (pinned; --no-pin shares them)"
            ));
        }
        let list = |from: usize, to: usize| format!("{from}-{to}");
        Some((list(0, workers - 1), list(workers, cores - 1)))
    } else {
        None
    };
    Ok(Plan {
        workers,
        cpus,
        tls: o.tls.then(|| Tls::new("end-string")),
        provider,
        stem: format!(
            "end-string{}{}",
            if o.pipeline.is_some() {
                "-pipeline"
            } else {
                ""
            },
            match (o.tls, provider) {
                (false, _) => "",
                (true, Provider::AwsLcRs) => "-tls",
                (true, Provider::Ring) => "-tls-ring",
            }
        ),
    })
}

fn main() {
    let mut o: Opts = cli::parse();
    if o.quick {
        (o.runs, o.min_runs, o.duration) = (1, 1, 1);
    }
    if !o.from_runs.is_empty() {
        from_runs(&mut o);
        return;
    }
    let p = plan(&mut o).unwrap_or_else(|e| cli::usage_error(&e));
    if !installed("wrk") {
        eprintln!("end-string: wrk is not installed. Install it with `apt-get install wrk` (Debian/Ubuntu) and run again.");
        std::process::exit(2);
    }
    let bin = build_release(&["unflat-server", "hyper-peer", "may-peer", "ceiling"]);
    let servers: Vec<Proc> = o
        .variants
        .iter()
        .map(|v| start(&o, &p, &bin, v.name()))
        .collect();
    if let Err(e) = checked(&o, &p, &servers) {
        eprintln!("end-string: {e}");
        // `exit` runs no destructor: the servers are stopped first.
        drop(servers);
        std::process::exit(1);
    }

    println!("machine: {}", machine());
    println!(
        "wrk -t{} -c{} -d{}s{}{}; servers with {} workers{}; body={}; up to {} run(s) per cell (at least {}, until ±{} % at 95 %, within {} min), variants alternating\n",
        o.threads,
        o.connections,
        o.duration,
        o.pipeline.map_or(String::new(), |d| format!(", {d} requests pipelined per connection (wrk_scripts/pipeline.lua)")),
        if p.tls.is_some() { format!(" over HTTPS (rustls with {}; wrk with OpenSSL)", p.provider) } else { String::new() },
        p.workers,
        match &p.cpus {
            Some((server, wrk)) => format!(", pinned: servers on CPUs {server}, wrk on CPUs {wrk}"),
            None => ", not pinned: servers and wrk share every core".to_string(),
        },
        o.body.name(),
        o.runs,
        o.min_runs.min(o.runs),
        o.accuracy,
        o.budget
    );
    println!("warm-up: one 1 s run per server, kind and length\n");
    // Warm-up: one short unrecorded run per server, kind and length, so
    // that caches are filled and the first recorded run is like the rest.
    let mut warming = Progress::new(
        "end-string",
        o.kinds.len() * o.lens.len(),
        Some(servers.len() as u32 * Duration::from_millis(1100)),
    );
    for kind in o.kinds.iter().map(|k| k.name()) {
        for &len in &o.lens {
            warming.step(&format!("warm-up, kind={kind} len={len}"));
            for s in servers.iter().filter(|s| serves(&s.name, kind)) {
                wrk(
                    &Opts {
                        duration: 1,
                        ..o.clone()
                    },
                    &p,
                    s,
                    len,
                    kind,
                    0,
                );
            }
        }
    }
    let started = Instant::now();
    let mut settled: Vec<(String, usize)> = Vec::new();
    let mut runs = Vec::new();
    let mut last_round: Option<Duration> = None;
    for run in 0..o.runs {
        round_progress(
            &o,
            &settled,
            servers.len(),
            run,
            started.elapsed(),
            last_round,
        );
        let round = Instant::now();
        for kind in o.kinds.iter().map(|k| k.name()) {
            for &len in o
                .lens
                .iter()
                .filter(|&&l| !settled.contains(&(kind.to_string(), l)))
            {
                // Every other round in the reverse order, so that no
                // variant always runs first, just after another length.
                let mut order: Vec<&Proc> =
                    servers.iter().filter(|s| serves(&s.name, kind)).collect();
                if run % 2 == 1 {
                    order.reverse();
                }
                for s in order {
                    let r = wrk(&o, &p, s, len, kind, run);
                    println!(
                        "run {} {:>11} {:<7} len={:<6} {:>10.0} req/s {:>7.2} CPU µs/req  wrk {:>6.2} µs/req  p99 {:>6} µs  TCP fast path {:.3}/req  wake IPIs {:.4}/req{}",
                        run + 1,
                        s.name,
                        kind,
                        len,
                        r.req_per_s,
                        r.cpu_us_per_req,
                        r.wrk_cpu_us_per_req,
                        r.p99_us,
                        r.fast_path_per_req,
                        r.wakes_per_req,
                        if r.errors > 0 { format!("  {} errors", r.errors) } else { String::new() }
                    );
                    runs.push(r);
                }
            }
        }
        if run + 1 >= o.min_runs {
            for kind in o.kinds.iter().map(|k| k.name()) {
                for &len in &o.lens {
                    let key = (kind.to_string(), len);
                    if !settled.contains(&key) && within(&runs, kind, len, o.accuracy) {
                        println!(
                            "kind={kind} len={len}: every variant within ±{} % after {} runs",
                            o.accuracy,
                            run + 1
                        );
                        settled.push(key);
                    }
                }
            }
        }
        last_round = Some(round.elapsed());
        if settled.len() == o.kinds.len() * o.lens.len() {
            break;
        }
        if run + 1 < o.runs && (started.elapsed() + round.elapsed()).as_secs_f64() > o.budget * 60.0
        {
            println!(
                "budget of {} min: no further round after {} runs",
                o.budget,
                run + 1
            );
            break;
        }
    }
    println!();
    let counts = if o.instructions {
        match o.pipeline {
            Some(d) => println!("instructions per request (callgrind; {d} pipelined per write)…"),
            None => println!("instructions per request (callgrind; one request at a time)…"),
        }
        instructions(&o, &p, &bin)
    } else {
        BTreeMap::new()
    };
    report(&o, &runs, &counts);
    let files = write_csvs(&o, &p.stem, &runs);
    let svg = out_dir().join(format!("{}.svg", p.stem));
    chart(&svg, &o, &runs);
    if o.syscalls {
        syscalls(&o, &servers, p.tls.as_ref());
    }
    println!();
    for f in files.iter().chain([&svg]) {
        println!("wrote {}", f.display());
    }
    if runs.iter().any(|r| r.errors > 0) {
        eprintln!("some runs had socket errors or non-2xx responses");
        std::process::exit(1);
    }
}

/// `run k of N` on stderr as round `run` begins, with the time elapsed and
/// an estimate of what is left: the last round's time (or, before the
/// first, the wrk runs it holds) for each round still possible, capped by
/// --budget. Lengths that settle early make it shorter.
fn round_progress(
    o: &Opts,
    settled: &[(String, usize)],
    servers: usize,
    run: usize,
    elapsed: Duration,
    last_round: Option<Duration>,
) {
    let cells = o.kinds.len() * o.lens.len() - settled.len();
    let per_round = last_round.unwrap_or_else(|| {
        (cells * servers) as u32 * Duration::from_millis(o.duration * 1000 + 100)
    });
    let mut left = per_round * (o.runs - run) as u32;
    let mut why = "";
    // No round begins that would end past the budget (see main); this one
    // has begun.
    let cap = Duration::from_secs_f64(o.budget * 60.0)
        .saturating_sub(elapsed)
        .max(per_round);
    if left > cap {
        (left, why) = (cap, " (--budget)");
    }
    let of = if o.min_runs < o.runs && o.runs > 1 {
        format!("of up to {}", o.runs)
    } else {
        format!("of {}", o.runs)
    };
    eprintln!(
        "end-string: run {} {of}, {} elapsed, up to about {} left{why}",
        run + 1,
        hms(elapsed),
        hms(left)
    );
}

/// The summary table, then the comparisons: Welch's, then paired by round.
fn report(o: &Opts, runs: &[Run], instructions: &BTreeMap<(String, usize, String), f64>) {
    let by = group(runs);
    summary(&by, instructions);
    for test in [Test::Welch, Test::Paired] {
        for metric in [Metric::ReqPerS, Metric::CpuPerReq] {
            compare_table(o, &by, metric, test);
        }
    }
}

/// True when, for every variant that ran `kind` at `len`, the 95 %
/// interval of its mean server CPU per request is within `accuracy` per
/// cent of the mean.
fn within(runs: &[Run], kind: &str, len: usize, accuracy: f64) -> bool {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.kind == kind && r.len == len) {
        by.entry(&r.variant).or_default().push(r.cpu_us_per_req);
    }
    !by.is_empty()
        && by
            .values()
            .all(|v| ci95(v).is_some_and(|half| half / v.mean() * 100.0 <= accuracy))
}

/// The half-width of the 95 % confidence interval of the mean of `v`
/// (Student's t); `None` for fewer than two values.
fn ci95(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, v.len() as f64 - 1.0).expect("a t distribution");
    Some(t.inverse_cdf(0.975) * v.std_dev() / (v.len() as f64).sqrt())
}

/// Starts one variant's server on a free port.
fn start(o: &Opts, p: &Plan, bin: &Path, variant: &str) -> Proc {
    let (exe, args) = command(o, p, variant, "127.0.0.1:0");
    let cpus = p.cpus.as_ref().map(|(server, _)| server.as_str());
    Proc::start_on(cpus, variant, &bin.join(exe), &args)
}

/// The binary and arguments of `variant`'s server, listening on `addr`.
fn command(o: &Opts, p: &Plan, variant: &str, addr: &str) -> (&'static str, Vec<String>) {
    let mut args = vec![
        "--addr".to_string(),
        addr.into(),
        "--workers".into(),
        p.workers.to_string(),
    ];
    if let Some(tls) = &p.tls {
        args.extend(tls.server_args.iter().cloned());
        // Every variant that speaks HTTPS is unflat-server or hyper-peer.
        args.extend(["--tls-provider".into(), p.provider.name().into()]);
    }
    let exe = match variant {
        "hyper" | "hyper-stock" => {
            // hyper's own answer to pipelining: one write per batch.
            if o.pipeline.is_some() {
                args.push("--pipeline-flush".into());
            }
            if variant == "hyper-stock" {
                args.push("--tls-stock".into());
            }
            "hyper-peer"
        }
        "may" => {
            let lens = o.lens.iter().map(usize::to_string).collect::<Vec<_>>();
            args.extend(["--lens".into(), lens.join(",")]);
            "may-peer"
        }
        "ceiling" => "ceiling",
        strategy => {
            args.extend(["--strategy".into(), strategy.into()]);
            if o.variants.contains(&Variant::May) {
                args.extend(["--server-header".into(), MAY_SERVER.into()]);
            }
            "unflat-server"
        }
    };
    (exe, args)
}

/// may_minihttp's own `Server` value, which unflat-server sends too when
/// may-peer runs: the same bytes from both.
const MAY_SERVER: &str = "M";

/// User-space instructions per request of each variant at each length,
/// by (kind, len, variant): `benches/instructions.py` (callgrind, one
/// connection, one request at a time or `--pipeline`'s depth per write),
/// run on the servers' cores, one
/// variant at a time (each with its own `body` parameter).
fn instructions(o: &Opts, p: &Plan, bin: &Path) -> BTreeMap<(String, usize, String), f64> {
    let mut counts = BTreeMap::new();
    let each_len = o
        .kinds
        .iter()
        .flat_map(|k| o.variants.iter().filter(|v| serves(v.name(), k.name())))
        .count();
    let mut progress = Progress::new("end-string", each_len * o.lens.len(), None);
    for kind in o.kinds.iter().map(|k| k.name()) {
        for &len in &o.lens {
            for v in o
                .variants
                .iter()
                .map(|v| v.name())
                .filter(|v| serves(v, kind))
            {
                progress.step(&format!("callgrind, {v} kind={kind} len={len}"));
                let mut cmd = on_cpus(
                    p.cpus.as_ref().map(|(server, _)| server.as_str()),
                    "python3",
                );
                cmd.arg(root().join("benches/instructions.py")).args([
                    "--request",
                    "query",
                    "--len",
                    &len.to_string(),
                    "--kind",
                    kind,
                    "--body",
                    body_arg(o, v),
                ]);
                if let Some(tls) = &p.tls {
                    cmd.args(["--tls", &tls.server_args[1]]);
                }
                if let Some(depth) = o.pipeline {
                    cmd.args(["--pipeline", &depth.to_string()]);
                }
                let (exe, args) = command(o, p, v, "127.0.0.1:PORT");
                let line = std::iter::once(bin.join(exe).display().to_string())
                    .chain(args)
                    .collect::<Vec<_>>()
                    .join(" ");
                let out = cmd
                    .arg(format!("{v}={line}"))
                    .output()
                    .expect("run benches/instructions.py");
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "instructions.py failed: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                // The line `  NAME  COUNT  RATIO× NAME` after the heading.
                let count = text.lines().find_map(|l| {
                    let words: Vec<&str> = l.split_whitespace().collect();
                    (words.first() == Some(&v)).then(|| words.get(1)?.parse().ok())?
                });
                if let Some(n) = count {
                    counts.insert((kind.to_string(), len, v.to_string()), n);
                }
            }
        }
    }
    counts
}

/// Sends `depth` requests for `/end-string/{len}?kind={kind}` in one write
/// and checks that `depth` answers come back, in order, each a 200 whose
/// body is `len` characters of `kind`: what the timed runs then count.
fn check_pipelined(
    s: &Proc,
    tls: Option<&Tls>,
    depth: u32,
    len: usize,
    kind: &str,
) -> Result<(), String> {
    let width = match kind {
        "latin1" => 2,
        "twobyte" => 3,
        _ => 1,
    };
    let request = format!("GET /end-string/{len}?kind={kind} HTTP/1.1\r\nHost: bench\r\n\r\n");
    let mut conn = connect(s, tls);
    conn.write_all(request.repeat(depth as usize).as_bytes())
        .map_err(|e| e.to_string())?;
    let mut responses = Responses::default();
    for i in 0..depth {
        let got = responses.next(&mut conn);
        if got != len * width {
            return Err(format!(
                "answer {} of {depth} at len {len}, kind {kind}: {got} body bytes, not {}",
                i + 1,
                len * width
            ));
        }
    }
    Ok(())
}

/// What is checked before any run: every server sends unflat-server's
/// field lines, and, pipelined, answers a batch whole and in order.
fn checked(o: &Opts, p: &Plan, servers: &[Proc]) -> Result<(), String> {
    same_fields(servers, p.tls.as_ref(), o.lens[0])
        .map_err(|e| format!("the servers' responses differ, so they cannot be compared: {e}"))?;
    let Some(depth) = o.pipeline else {
        return Ok(());
    };
    for s in servers {
        for kind in o
            .kinds
            .iter()
            .map(|k| k.name())
            .filter(|k| serves(&s.name, k))
        {
            for &len in &o.lens {
                check_pipelined(s, p.tls.as_ref(), depth, len, kind)
                    .map_err(|e| format!("{} answers a pipelined batch wrongly: {e}", s.name))?;
            }
        }
    }
    Ok(())
}

/// Checks that every server answers `/end-string/{len}` with the field
/// lines unflat-server sends, values included: the runs then compare the
/// same response. Only `Date`'s value (the clock's) may differ, and a
/// `Server` line be missing from one of the two (hyper-peer and the
/// ceiling send none).
fn same_fields(servers: &[Proc], tls: Option<&Tls>, len: usize) -> Result<(), String> {
    let fields = |s: &Proc| -> Result<Vec<(String, String)>, String> {
        let mut conn = connect(s, tls);
        let request = format!("GET /end-string/{len}?kind=ascii HTTP/1.1\r\nHost: bench\r\n\r\n");
        conn.write_all(request.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut responses = Responses::default();
        let head = responses
            .head(&mut conn)
            .map_err(|e| format!("{}: {e}", s.name))?;
        let (_, mut fields) = responses.fields(head);
        fields.retain(|(name, _)| name != "date");
        fields.sort();
        Ok(fields)
    };
    let server = |fields: &[(String, String)]| fields.iter().any(|(name, _)| name == "server");
    let Some(ours) = servers
        .iter()
        .find(|s| s.name == "direct" || s.name == "flatten")
    else {
        return Ok(());
    };
    let want = fields(ours)?;
    for s in servers {
        let mut got = fields(s)?;
        let mut want = want.clone();
        if !(server(&got) && server(&want)) {
            got.retain(|(name, _)| name != "server");
            want.retain(|(name, _)| name != "server");
        }
        if got != want {
            return Err(format!(
                "{} sends {got:?} where {} sends {want:?}",
                s.name, ours.name
            ));
        }
    }
    Ok(())
}

/// The ceiling prebuilds ascii bodies only.
fn serves(variant: &str, kind: &str) -> bool {
    variant != "ceiling" || kind == "ascii"
}

/// The wrk script's body argument for `variant`: `--body` chooses how
/// unflat-server keeps the body; hyper-peer and the ceiling have one way (a
/// contiguous buffer) and take no body parameter.
fn body_arg(o: &Opts, variant: &str) -> &'static str {
    if matches!(variant, "flatten" | "direct") {
        o.body.name()
    } else {
        "flat"
    }
}

fn wrk(o: &Opts, p: &Plan, s: &Proc, len: usize, kind: &str, run: usize) -> Run {
    let (script, depth) = match o.pipeline {
        Some(depth) => ("pipeline.lua", vec![depth.to_string()]),
        None => ("end-string.lua", Vec::new()),
    };
    let script = root().join("wrk_scripts").join(script);
    let threads = s.thread_times();
    let wrk_before = children_cpu_time();
    let fast_before = tcp_fast_path_segments();
    // Only pinned servers have CPUs of their own, whose wakes are theirs.
    let server_cpus = p.cpus.as_ref().map(|(server, _)| server.as_str());
    let wakes_before = server_cpus.and_then(wake_ipis);
    let out = on_cpus(p.cpus.as_ref().map(|(_, wrk)| wrk.as_str()), "wrk")
        .args([
            "-t",
            &o.threads.to_string(),
            "-c",
            &o.connections.to_string(),
            "-d",
            &format!("{}s", o.duration),
        ])
        .arg("-s")
        .arg(&script)
        .arg(url(p, s))
        .arg("--")
        .args(depth)
        .args([&len.to_string(), kind, body_arg(o, &s.name)])
        .stderr(Stdio::inherit())
        .output()
        .expect("run wrk");
    let wrk_cpu = children_cpu_time() - wrk_before;
    // A machine-wide count's growth over the run; NaN where it is unknown.
    let grown = |before: Option<u64>, after: Option<u64>| {
        before.zip(after).map_or(f64::NAN, |(before, after)| {
            after.saturating_sub(before) as f64
        })
    };
    let fast = grown(fast_before, tcp_fast_path_segments());
    let wakes = grown(wakes_before, server_cpus.and_then(wake_ipis));
    let cpu = threads.until(&s.thread_times());
    assert!(
        out.status.success(),
        "wrk failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let json = done_json(&String::from_utf8_lossy(&out.stdout));
    let num = |path: &[&str]| -> f64 {
        path.iter()
            .fold(&json, |v, key| &v[*key])
            .as_f64()
            .unwrap_or_else(|| panic!("{} missing in {json}", path.join(".")))
    };
    let requests = num(&["requests"]).max(1.0);
    let errors = ["connect", "read", "write", "timeout", "status"]
        .iter()
        .map(|k| num(&["errors", k]) as u64)
        .sum();
    Run {
        variant: s.name.clone(),
        kind: kind.into(),
        len,
        run,
        req_per_s: num(&["req_per_s"]),
        duration_s: num(&["duration_s"]),
        cpu_us_per_req: cpu.as_secs_f64() * 1e6 / requests,
        wrk_cpu_us_per_req: wrk_cpu.as_secs_f64() * 1e6 / requests,
        p99_us: num(&["latency_us", "p99"]),
        errors,
        fast_path_per_req: fast / requests,
        wakes_per_req: wakes / requests,
    }
}

/// The URL wrk asks: over TLS with the host named `localhost` (the
/// certificate's name), so that wrk's SNI names a host — an IP address
/// there is not allowed, and rustls logs a warning for every connection
/// that sends one.
fn url(p: &Plan, s: &Proc) -> String {
    match p.tls {
        Some(_) => s.url.replacen("127.0.0.1", "localhost", 1),
        None => s.url.clone(),
    }
}

/// The JSON line the script's done() prints after wrk's own report.
fn done_json(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line from wrk:\n{stdout}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("wrk's JSON line: {e}: {line}"))
}

/// Runs by (kind, len, variant).
type Groups<'a> = BTreeMap<(String, usize, String), Vec<&'a Run>>;

fn group(runs: &[Run]) -> Groups<'_> {
    let mut by = Groups::new();
    for r in runs {
        by.entry((r.kind.clone(), r.len, r.variant.clone()))
            .or_default()
            .push(r);
    }
    by
}

/// `(round, metric)` of each run of `v` at `kind` and `len` in `by`.
fn series(by: &Groups, kind: &str, len: usize, v: &str, metric: Metric) -> Vec<(usize, f64)> {
    by.get(&(kind.to_string(), len, v.to_string()))
        .map(|rs| rs.iter().map(|r| (r.run, metric.of(r))).collect())
        .unwrap_or_default()
}

/// A figure compared between variants.
#[derive(Clone, Copy)]
enum Metric {
    ReqPerS,
    CpuPerReq,
}

impl Metric {
    fn of(self, r: &Run) -> f64 {
        match self {
            Metric::ReqPerS => r.req_per_s,
            Metric::CpuPerReq => r.cpu_us_per_req,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Metric::ReqPerS => "req/s: old → new (+ is faster)",
            Metric::CpuPerReq => "CPU µs/req: old → new (− is less CPU)",
        }
    }
}

/// `mean ± sd` of `values` (sd `–` from a single run).
fn mean_sd(values: &[f64], decimals: usize) -> String {
    let sd = values.std_dev();
    let sd = if sd.is_nan() {
        "–".to_string()
    } else {
        format!("{sd:.decimals$}")
    };
    format!("{:.decimals$} ± {sd}", values.mean())
}

/// Per (kind, len, variant): req/s, server CPU and wrk CPU per request, and
/// the variant's req/s and CPU as a multiple of the ceiling's.
fn summary(by: &Groups, instructions: &BTreeMap<(String, usize, String), f64>) {
    let pick = |rs: &[&Run], f: fn(&Run) -> f64| rs.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let rows: Vec<Vec<String>> = by
        .iter()
        .map(|((kind, len, variant), rs)| {
            let req = pick(rs, |r| r.req_per_s);
            let cpu = pick(rs, |r| r.cpu_us_per_req);
            let ceiling = by.get(&(kind.clone(), *len, "ceiling".to_string()));
            let ratio = |mine: &[f64], f: fn(&Run) -> f64| {
                ceiling.map_or("–".to_string(), |c| {
                    format!("{:.2}×", mine.mean() / pick(c, f).mean())
                })
            };
            vec![
                kind.clone(),
                len.to_string(),
                variant.clone(),
                mean_sd(&req, 0),
                mean_sd(&cpu, 2),
                mean_sd(&pick(rs, |r| r.wrk_cpu_us_per_req), 2),
                Some(pick(rs, |r| r.fast_path_per_req).mean())
                    .filter(|f| f.is_finite())
                    .map_or("–".to_string(), |f| format!("{f:.3}")),
                Some(pick(rs, |r| r.wakes_per_req).mean())
                    .filter(|f| f.is_finite())
                    .map_or("–".to_string(), |f| format!("{f:.4}")),
                ratio(&req, |r| r.req_per_s),
                ratio(&cpu, |r| r.cpu_us_per_req),
                instructions
                    .get(&(kind.clone(), *len, variant.clone()))
                    .map_or("–".to_string(), |n| format!("{n:.0}")),
            ]
        })
        .collect();
    print_table(
        &[
            "kind",
            "len",
            "variant",
            "req/s (mean ± sd)",
            "server CPU µs/req",
            "wrk CPU µs/req",
            "TCP fast path/req",
            "server wake IPIs/req",
            "req/s ratio to ceiling",
            "CPU ratio to ceiling",
            "instructions/req",
        ],
        &rows,
    );
}

/// Prints `rows` under `header`, each column as wide as its widest cell or
/// label; the first column left-aligned, the others right-aligned.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let _ = match i {
                0 => write!(s, "{cell:<w$}"),
                _ => write!(s, "  {cell:>w$}"),
            };
        }
        println!("{}", s.trim_end());
    };
    line(header.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
}

/// Welch's two-sided t-test of `new` against `old`: improvement %, p-value,
/// and the accuracy (half-width of the confidence interval of the
/// difference, in % of `old`) at 95 %, 99 % and 99.9 %.
struct Compare {
    improvement: f64,
    p: f64,
    accuracy: [f64; 3],
}

fn welch(old: &[f64], new: &[f64]) -> Option<Compare> {
    if old.len() < 2 || new.len() < 2 {
        return None;
    }
    let (m1, m2) = (old.mean(), new.mean());
    let (v1, v2) = (
        old.variance() / old.len() as f64,
        new.variance() / new.len() as f64,
    );
    let se = (v1 + v2).sqrt();
    let improvement = (m2 / m1 - 1.0) * 100.0;
    if se == 0.0 {
        return Some(Compare {
            improvement,
            p: if m1 == m2 { 1.0 } else { 0.0 },
            accuracy: [0.0; 3],
        });
    }
    let df = (v1 + v2).powi(2)
        / (v1 * v1 / (old.len() as f64 - 1.0) + v2 * v2 / (new.len() as f64 - 1.0));
    let t = StudentsT::new(0.0, 1.0, df).expect("a t distribution");
    let p = 2.0 * (1.0 - t.cdf(((m2 - m1) / se).abs()));
    let accuracy = [0.05, 0.01, 0.001].map(|a| t.inverse_cdf(1.0 - a / 2.0) * se / m1 * 100.0);
    Some(Compare {
        improvement,
        p,
        accuracy,
    })
}

/// How two variants' runs are compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Test {
    /// Welch's t-test on the two sets of runs, as Node's compare.R does.
    Welch,
    /// A paired t-test on the log ratio of the two variants' runs of the
    /// same round. Runs alternate, so the two runs of a round are seconds
    /// apart and share the machine's state of the moment: a shift of the
    /// whole machine between rounds, which Welch's test counts as noise of
    /// each variant, cancels out of the ratio.
    Paired,
}

/// The paired test ([`Test::Paired`]) of runs `(round, value)`: the same
/// improvement, p-value and accuracy as [`welch`], from the rounds both
/// variants ran.
fn paired(old: &[(usize, f64)], new: &[(usize, f64)]) -> Option<Compare> {
    one_sample(&log_ratios(old, new))
}

/// The log ratio `new / old` of each round both variants ran.
fn log_ratios(old: &[(usize, f64)], new: &[(usize, f64)]) -> Vec<f64> {
    old.iter()
        .filter_map(|&(round, o)| {
            let &(_, n) = new.iter().find(|(r, _)| *r == round)?;
            Some((n / o).ln())
        })
        .collect()
}

/// Student's one-sample t-test of log ratios against 0: the improvement
/// their mean is, its p-value, and the accuracy as [`welch`] gives it;
/// `None` for fewer than two.
fn one_sample(logs: &[f64]) -> Option<Compare> {
    if logs.len() < 2 {
        return None;
    }
    let n = logs.len() as f64;
    let (mean, se) = (logs.mean(), logs.std_dev() / n.sqrt());
    let improvement = (mean.exp() - 1.0) * 100.0;
    if se == 0.0 {
        return Some(Compare {
            improvement,
            p: if mean == 0.0 { 1.0 } else { 0.0 },
            accuracy: [0.0; 3],
        });
    }
    let t = StudentsT::new(0.0, 1.0, n - 1.0).expect("a t distribution");
    let p = 2.0 * (1.0 - t.cdf((mean / se).abs()));
    // The interval's half-width on the log ratio, in per cent: for the
    // ratios seen here (within ±30 %) it differs from the ratio's own by
    // a small fraction of itself.
    let accuracy = [0.05, 0.01, 0.001].map(|a| t.inverse_cdf(1.0 - a / 2.0) * se * 100.0);
    Some(Compare {
        improvement,
        p,
        accuracy,
    })
}

fn stars(p: f64) -> &'static str {
    if p < 0.001 {
        "***"
    } else if p < 0.01 {
        "**"
    } else if p < 0.05 {
        "*"
    } else {
        ""
    }
}

/// Node's compare.R table for `metric`: flatten → direct and hyper → direct
/// (and the other peers that ran, hyper → hyper-stock), per kind and
/// length, by `test`.
fn compare_table(o: &Opts, by: &Groups, metric: Metric, test: Test) {
    let runs = |kind: &str, len: usize, v: &str| series(by, kind, len, v, metric);
    let compare = |kind: &str, len: usize, old: &str, new: &str| {
        let (old, new) = (runs(kind, len, old), runs(kind, len, new));
        match test {
            Test::Welch => {
                let values = |rs: &[(usize, f64)]| rs.iter().map(|&(_, v)| v).collect::<Vec<_>>();
                welch(&values(&old), &values(&new))
            }
            Test::Paired => paired(&old, &new),
        }
    };
    let mut rows = Vec::new();
    let mut ps = Vec::new();
    let pairs = match test {
        Test::Welch => &PAIRS[..TABLE_PAIRS],
        Test::Paired => &PAIRS[..],
    };
    for (old, new) in ran(o, pairs) {
        for kind in o.kinds.iter().map(|k| k.name()) {
            for &len in &o.lens {
                let label = format!("end-string {old} → {new} kind={kind} len={len}");
                let compared = compare(kind, len, old, new);
                ps.extend(compared.as_ref().map(|c| c.p));
                let row = cells(compared);
                rows.push([vec![label], row].concat());
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    match test {
        Test::Welch => println!("\n{}", metric.title()),
        Test::Paired => println!(
            "\n{}, paired by round (the log ratio of the two runs of each round)",
            metric.title()
        ),
    }
    print_table(&[&[""][..], &COMPARED].concat(), &rows);
    if ps.len() < rows.len() {
        println!("(–: the test needs at least 2 runs per variant, or 2 rounds both ran)");
    }
    holm_note(&ps);
}

/// The headers of [`cells`].
const COMPARED: [&str; 5] = ["confidence", "improvement", "accuracy (*)", "(**)", "(***)"];

/// A comparison's cells in the tables: its stars, the improvement, and
/// the accuracy at 95, 99 and 99.9 %; `–` in each without one.
fn cells(compared: Option<Compare>) -> Vec<String> {
    match compared {
        Some(c) => [stars(c.p).to_string(), format!("{:.2} %", c.improvement)]
            .into_iter()
            .chain(c.accuracy.map(|a| format!("±{a:.2}%")))
            .collect(),
        None => vec!["–".to_string(); 5],
    }
}

/// With several runs files (`--from-runs A,B,…`): each file's paired
/// improvement in `metric` (the mean log ratio of its rounds) and their
/// mean, tested with each file as one measurement. Pairing by round
/// cancels what moves the machine between rounds, not what moves the
/// ratio itself between runs hours apart; this interval counts that too.
fn between_runs(o: &Opts, files: &[Vec<Run>], metric: Metric) {
    let files: Vec<Groups> = files.iter().map(|runs| group(runs)).collect();
    let mut rows = Vec::new();
    for (old, new) in ran(o, &PAIRS) {
        for kind in o.kinds.iter().map(|k| k.name()) {
            for &len in &o.lens {
                // A file without the two variants at this length shows `–`.
                let each: Vec<Option<f64>> = files
                    .iter()
                    .map(|by| {
                        let of = |v: &str| series(by, kind, len, v, metric);
                        let logs = log_ratios(&of(old), &of(new));
                        (!logs.is_empty()).then(|| logs.mean())
                    })
                    .collect();
                let means: Vec<f64> = each.iter().flatten().copied().collect();
                if means.is_empty() {
                    continue;
                }
                let each = each
                    .iter()
                    .map(|m| m.map_or("–".into(), |m| format!("{:+.2}", (m.exp() - 1.0) * 100.0)))
                    .collect::<Vec<_>>()
                    .join(" ");
                let label = format!("end-string {old} → {new} kind={kind} len={len}");
                rows.push([vec![label, each], cells(one_sample(&means))].concat());
            }
        }
    }
    if rows.is_empty() {
        return;
    }
    println!(
        "\n{}, between runs files (each file's paired mean one measurement)",
        metric.title()
    );
    print_table(&[&["", "each file (%)"][..], &COMPARED].concat(), &rows);
}

/// Those of `pairs` whose two variants both ran.
fn ran(o: &Opts, pairs: &[(Variant, Variant)]) -> Vec<(&'static str, &'static str)> {
    pairs
        .iter()
        .filter(|(a, b)| o.variants.contains(a) && o.variants.contains(b))
        .map(|(a, b)| (a.name(), b.name()))
        .collect()
}

/// Node's note on many comparisons, plus the Holm–Bonferroni count.
fn holm_note(ps: &[f64]) {
    let m = ps.len();
    if m == 0 {
        return;
    }
    let mut sorted = ps.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let significant = sorted
        .iter()
        .enumerate()
        .take_while(|&(k, &p)| p < 0.05 / (m - k) as f64)
        .count();
    println!(
        "\nBe aware that when doing many comparisons the risk of a false-positive result increases.\n\
         In this case, there are {m} comparisons, you can thus expect the following amount of false-positive results:\n  \
         {:.2} false positives, when considering a   5% risk acceptance (*, **, ***),\n  \
         {:.2} false positives, when considering a   1% risk acceptance (**, ***),\n  \
         {:.2} false positives, when considering a 0.1% risk acceptance (***)\n\
         The stars above are per comparison and uncorrected. Adjusting for the size of this comparison set\n\
         (Holm–Bonferroni), {significant} comparison(s) remain significant at 5%.",
        m as f64 * 0.05,
        m as f64 * 0.01,
        m as f64 * 0.001
    );
}

/// The header Node's benchmark/compare.js prints, which compare.R reads.
const COMPARE_HEADER: &str = r#""binary","filename","configuration","rate","time""#;

/// Writes the CSV files and returns their paths: all runs in compare.js's
/// layout, one old/new file per comparison that ran, and every figure of
/// every run.
fn write_csvs(o: &Opts, stem: &str, runs: &[Run]) -> Vec<PathBuf> {
    let dir = out_dir();
    let mut written = Vec::new();
    let mut write = |name: String, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        written.push(path);
    };
    write(
        format!("{stem}.csv"),
        compare_csv(o, runs.iter().map(|r| (r.variant.as_str(), r))),
    );
    for (old, new) in ran(o, &PAIRS) {
        let pair = runs.iter().filter_map(|r| match r.variant.as_str() {
            v if v == old => Some(("old", r)),
            v if v == new => Some(("new", r)),
            _ => None,
        });
        write(format!("{stem}.{old}-{new}.csv"), compare_csv(o, pair));
    }
    write(format!("{stem}-runs.csv"), runs_csv(runs));
    written
}

/// `(binary, run)` rows as compare.js prints them: every field but the two
/// numbers in double quotes, `"` inside doubled, no spaces after commas.
fn compare_csv<'a>(o: &Opts, rows: impl Iterator<Item = (&'a str, &'a Run)>) -> String {
    let mut s = format!("{COMPARE_HEADER}\n");
    for (binary, r) in rows {
        let conf = configuration(o, r).replace('"', "\"\"");
        let _ = writeln!(
            s,
            "\"{binary}\",\"http/end-string.js\",\"{conf}\",{},{}",
            r.req_per_s, r.duration_s
        );
    }
    s
}

/// The run's configuration as compare.js writes it: `key=value` joined by
/// spaces, each value as Node's `util.inspect` prints it (strings in single
/// quotes), keys in the order Node's common.js hands them over — the last
/// declared first, so end-string.js's `len, c, duration` come out as
/// `duration c len`; kind, body and benchmarker, which Node's benchmark does
/// not declare, follow.
fn configuration(o: &Opts, r: &Run) -> String {
    format!(
        "duration={} c={} len={} kind={} body={} benchmarker={}{}{}",
        o.duration,
        o.connections,
        r.len,
        inspect(&r.kind),
        inspect(o.body.name()),
        inspect("wrk"),
        o.pipeline
            .map_or(String::new(), |d| format!(" pipeline={d}")),
        if o.tls {
            let provider = o.tls_provider.unwrap_or_default();
            format!(" tls=true tls_provider={}", inspect(provider.name()))
        } else {
            String::new()
        }
    )
}

/// `util.inspect` of a string holding no quote: single-quoted.
fn inspect(s: &str) -> String {
    debug_assert!(!s.contains(['\'', '"']), "inspect would pick other quotes");
    format!("'{s}'")
}

/// Every figure of every run, one line each.
fn runs_csv(runs: &[Run]) -> String {
    let mut s = format!("{RUNS_HEADER}\n");
    for r in runs {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.2},{:.4},{:.4},{},{},{:.4},{:.5}",
            r.variant,
            r.kind,
            r.len,
            r.run + 1,
            r.req_per_s,
            r.cpu_us_per_req,
            r.wrk_cpu_us_per_req,
            r.p99_us,
            r.errors,
            r.fast_path_per_req,
            r.wakes_per_req
        );
    }
    s
}

/// The first line of a runs file. Files written before its last columns
/// (the TCP fast path's, then the wake IPIs') have the ones before as
/// theirs and are read with those columns unknown.
const RUNS_HEADER: &str = "variant,kind,len,run,req_per_s,server_cpu_us_per_req,wrk_cpu_us_per_req,p99_us,errors,tcp_fast_path_per_req,server_wake_ipis_per_req";

/// How many columns a runs file has whose first line is `header`: all of
/// [`RUNS_HEADER`]'s, or only its first nine or ten (older files).
fn runs_columns(header: &str) -> Option<usize> {
    let all: Vec<&str> = RUNS_HEADER.split(',').collect();
    (9..=all.len()).find(|&n| header == all[..n].join(","))
}

/// The runs of a file [`runs_csv`] wrote. An error names the line and the
/// field that could not be read.
fn read_runs(path: &Path) -> Result<Vec<Run>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut lines = text.lines().enumerate();
    let Some(fields) = lines.next().and_then(|(_, h)| runs_columns(h)) else {
        return Err(format!("line 1 is not the header `{RUNS_HEADER}`"));
    };
    let runs = lines
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| {
            let f: Vec<&str> = line.split(',').collect();
            let at = |what: String| format!("line {}: {what}", i + 1);
            if f.len() != fields {
                return Err(at(format!("{} fields, not {fields}", f.len())));
            }
            Variant::from_str(f[0], false)
                .map_err(|_| at(format!("unknown variant `{}`", f[0])))?;
            Kind::from_str(f[1], false).map_err(|_| at(format!("unknown kind `{}`", f[1])))?;
            let run: usize = field(&f, 3).map_err(at)?;
            Ok(Run {
                variant: f[0].to_string(),
                kind: f[1].to_string(),
                len: field(&f, 2).map_err(at)?,
                run: run
                    .checked_sub(1)
                    .ok_or_else(|| at("run 0: runs count from 1".into()))?,
                req_per_s: figure(&f, 4).map_err(at)?,
                // Not in the runs file; only the compare.js files use it,
                // and --from-runs writes none.
                duration_s: f64::NAN,
                cpu_us_per_req: figure(&f, 5).map_err(at)?,
                wrk_cpu_us_per_req: figure(&f, 6).map_err(at)?,
                p99_us: figure(&f, 7).map_err(at)?,
                errors: field(&f, 8).map_err(at)?,
                fast_path_per_req: optional(&f, 9).map_err(at)?,
                wakes_per_req: optional(&f, 10).map_err(at)?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if runs.is_empty() {
        return Err("no runs after the header".into());
    }
    Ok(runs)
}

/// Field `k` of a runs file's line, a figure or NaN (not known); NaN too
/// when the file is older than the column.
fn optional(f: &[&str], k: usize) -> Result<f64, String> {
    let Some(v) = f.get(k) else {
        return Ok(f64::NAN);
    };
    v.parse::<f64>()
        .ok()
        .filter(|v| v.is_nan() || *v >= 0.0)
        .ok_or_else(|| format!("{} `{v}` is not a figure or NaN", column(k)))
}

/// Field `k` of a runs file's line, parsed; an error names the column.
fn field<T: std::str::FromStr>(f: &[&str], k: usize) -> Result<T, String> {
    f[k].parse()
        .map_err(|_| format!("{} `{}` is not a whole number", column(k), f[k]))
}

/// Field `k` of a runs file's line: a measured figure, finite and not
/// negative.
fn figure(f: &[&str], k: usize) -> Result<f64, String> {
    f[k].parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            format!(
                "{} `{}` is not a figure (a number, 0 or more)",
                column(k),
                f[k]
            )
        })
}

/// The name of a runs file's column `k`.
fn column(k: usize) -> &'static str {
    RUNS_HEADER.split(',').nth(k).unwrap_or("?")
}

/// `--from-runs`: the tables and the chart of the runs files named,
/// running nothing.
fn from_runs(o: &mut Opts) {
    let files: Vec<Vec<Run>> = o
        .from_runs
        .iter()
        .map(|path| {
            read_runs(path)
                .unwrap_or_else(|e| cli::usage_error(&format!("{}: {e}", path.display())))
        })
        .collect();
    // One set of rounds: each file's numbered after the one before's.
    let mut runs = Vec::new();
    for file in &files {
        let next = runs.iter().map(|r: &Run| r.run + 1).max().unwrap_or(0);
        runs.extend(file.iter().cloned().map(|r| Run {
            run: r.run + next,
            ..r
        }));
    }
    ran_in(o, &runs);
    report(o, &runs, &BTreeMap::new());
    if files.len() > 1 {
        for metric in [Metric::ReqPerS, Metric::CpuPerReq] {
            between_runs(o, &files, metric);
        }
    }
    // The chart again too, named after the (first) runs file:
    // end-string-pipeline-runs.csv gives end-string-pipeline.svg.
    let name = o.from_runs[0]
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let stem = name
        .strip_suffix("-runs.csv")
        .or_else(|| name.strip_suffix(".csv"))
        .filter(|s| !s.is_empty())
        .unwrap_or("end-string");
    let pooled = if files.len() > 1 { "-pooled" } else { "" };
    let svg = out_dir().join(format!("{stem}{pooled}.svg"));
    chart(&svg, o, &runs);
    println!("\nwrote {}", svg.display());
}

/// Sets the variants, kinds and lengths of `o` to those `runs` hold, in
/// the harness's own order, for tables of a runs file.
fn ran_in(o: &mut Opts, runs: &[Run]) {
    o.variants = Variant::value_variants()
        .iter()
        .copied()
        .filter(|v| runs.iter().any(|r| r.variant == v.name()))
        .collect();
    o.kinds = Kind::value_variants()
        .iter()
        .copied()
        .filter(|k| runs.iter().any(|r| r.kind == k.name()))
        .collect();
    o.lens = runs
        .iter()
        .map(|r| r.len)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
}

/// req/s and server CPU µs per request against length, one series per
/// variant and kind, the ceiling included: each point the mean of the runs,
/// its bar the 95 % confidence interval of that mean. The x axis is the
/// body length on a log scale with a tick at every length measured; both
/// axes say their unit, and the title how many runs each point is.
fn chart(path: &Path, o: &Opts, runs: &[Run]) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 500)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let (fewest, most) = group(runs)
        .values()
        .map(|cell| cell.len())
        .fold((usize::MAX, 0), |(a, b), n| (a.min(n), b.max(n)));
    let per_point = match (fewest, most) {
        (_, 0) => "no runs".to_string(),
        (a, b) if a == b => format!("{a} run(s) per point"),
        (a, b) => format!("{a} to {b} runs per point"),
    };
    let root = root
        .titled(
            &format!(
                "{}: mean of {per_point}, bars the 95 % confidence interval of the mean",
                path.file_stem()
                    .map_or_else(|| "end-string".into(), |s| s.to_string_lossy()),
            ),
            ("sans-serif", 16),
        )
        .unwrap();
    let panels = root.split_evenly((1, 2));
    let colors = [
        RGBColor(214, 39, 40),
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(140, 86, 75),
    ];
    let series: Vec<(String, String)> = o
        .variants
        .iter()
        .flat_map(|v| {
            o.kinds
                .iter()
                .map(move |k| (v.name().to_string(), k.name().to_string()))
        })
        .filter(|(v, k)| serves(v, k))
        .collect();
    for (panel, (title, unit, pick, legend)) in panels.iter().zip([
        (
            "requests per second",
            "requests per second (req/s)",
            (|r: &Run| r.req_per_s) as fn(&Run) -> f64,
            SeriesLabelPosition::UpperRight,
        ),
        (
            "server CPU time per request",
            "server CPU per request (µs)",
            |r: &Run| r.cpu_us_per_req,
            SeriesLabelPosition::UpperLeft,
        ),
    ]) {
        // (log10 length, mean, half-width of its 95 % interval)
        let points = |v: &str, k: &str| -> Vec<(f64, f64, f64)> {
            o.lens
                .iter()
                .filter_map(|&len| {
                    let vals: Vec<f64> = runs
                        .iter()
                        .filter(|r| r.variant == v && r.kind == k && r.len == len)
                        .map(pick)
                        .collect();
                    let half = ci95(&vals).unwrap_or(0.0);
                    (!vals.is_empty()).then(|| ((len as f64).log10(), vals.mean(), half))
                })
                .collect()
        };
        let ymax = series
            .iter()
            .flat_map(|(v, k)| points(v, k))
            .map(|p| p.1 + p.2)
            .fold(0.0, f64::max)
            * 1.1
            + 1e-9;
        let xs: Vec<f64> = o.lens.iter().map(|&l| (l as f64).log10()).collect();
        let (xmin, xmax) = (support::min(&xs) - 0.2, support::max(&xs) + 0.2);
        let mut c = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(
                Lengths {
                    inner: (xmin..xmax).into(),
                    ticks: xs.clone(),
                },
                0.0..ymax,
            )
            .unwrap();
        c.configure_mesh()
            .x_desc("body length (characters; log scale, a tick at each length measured)")
            .y_desc(unit)
            .x_labels(xs.len())
            .x_label_formatter(&|x| format!("{:.0}", 10f64.powf(*x)))
            .y_label_formatter(&|y| {
                if ymax >= 100.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            })
            .draw()
            .unwrap();
        for (i, (v, k)) in series.iter().enumerate() {
            let color = colors[i % colors.len()];
            let pts = points(v, k);
            let means = pts.iter().map(|&(x, m, _)| (x, m));
            c.draw_series(LineSeries::new(means.clone(), color.stroke_width(2)))
                .unwrap()
                .label(format!("{v} {k}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            c.draw_series(means.map(|p| Circle::new(p, 4, color.filled())))
                .unwrap();
            // Each bar a vertical line with a cap at either end.
            let cap = 0.03;
            c.draw_series(pts.iter().filter(|p| p.2 > 0.0).flat_map(|&(x, m, h)| {
                [
                    vec![(x, m - h), (x, m + h)],
                    vec![(x - cap, m - h), (x + cap, m - h)],
                    vec![(x - cap, m + h), (x + cap, m + h)],
                ]
                .map(|line| PathElement::new(line, color.stroke_width(1)))
            }))
            .unwrap();
        }
        c.configure_series_labels()
            .position(legend)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .unwrap();
    }
    root.present().unwrap();
}

/// The chart's x axis: log10 of the body length, mapped as a plain f64
/// range, with its ticks (and grid lines) at the lengths measured only.
struct Lengths {
    inner: plotters::coord::types::RangedCoordf64,
    ticks: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for Lengths {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// Counts the read and write system calls of each server for a fixed number
/// of keep-alive requests, with strace attached to every thread.
fn syscalls(o: &Opts, servers: &[Proc], tls: Option<&Tls>) {
    if !installed("strace") {
        eprintln!("--syscalls: strace is not installed (apt-get install strace); skipped");
        return;
    }
    let kind = o.kinds.first().map_or("ascii", |k| k.name());
    let n = o.syscall_requests;
    println!("\nsystem calls per request ({n} sequential keep-alive requests, kind={kind}):");
    println!(
        "{:>11} {:>7} {:>8} {:>8} {:>8}",
        "variant", "len", "reads", "writes", "writev"
    );
    for &len in &o.lens {
        for s in servers.iter().filter(|s| serves(&s.name, kind)) {
            let out = out_dir().join(format!("strace-{}-{len}.txt", s.name));
            let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", s.pid()))
                .expect("list threads")
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            let mut cmd = Command::new("strace");
            cmd.args([
                "-c",
                "-q",
                "-e",
                "trace=read,write,writev,readv,recvfrom,sendto,recvmsg,sendmsg",
                "-o",
            ])
            .arg(&out);
            for t in &tasks {
                cmd.args(["-p", t]);
            }
            let mut strace = cmd.stderr(Stdio::null()).spawn().expect("start strace");
            std::thread::sleep(Duration::from_millis(500)); // let it attach
            let request =
                format!("GET /end-string/{len}?kind={kind} HTTP/1.1\r\nHost: bench\r\n\r\n");
            let mut conn = connect(s, tls);
            let mut responses = Responses::default();
            for _ in 0..n {
                conn.write_all(request.as_bytes()).unwrap();
                responses.next(&mut conn);
            }
            let _ = Command::new("kill")
                .args(["-INT", &strace.id().to_string()])
                .status();
            let _ = strace.wait();
            let summary = std::fs::read_to_string(&out).unwrap_or_default();
            let calls = |names: &[&str]| -> f64 {
                summary
                    .lines()
                    .filter_map(|l| {
                        let t: Vec<&str> = l.split_whitespace().collect();
                        (t.len() >= 5 && names.contains(t.last().unwrap()))
                            .then(|| t[3].parse::<f64>().ok())
                            .flatten()
                    })
                    // fold from +0.0: an empty f64 sum is -0.0
                    .fold(0.0, |a, b| a + b)
                    / n as f64
            };
            println!(
                "{:>11} {:>7} {:>8.2} {:>8.2} {:>8.2}",
                s.name,
                len,
                calls(&["read", "recvfrom", "readv", "recvmsg"]),
                calls(&["write", "sendto", "sendmsg"]),
                calls(&["writev"]),
            );
        }
    }
}
