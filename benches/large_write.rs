//! `cargo bench --bench large-write -- [--size-mib 512] [--runs 7] [--verify] [--tls]`:
//! the Deno write-up's measurement on unflat-server. For each strategy the
//! harness starts the release server, requests `/large/{size}` with a client
//! that streams the body into SHA-256, and samples the server's RSS from
//! /proc/PID/status every 5 ms.
//!
//! Printed per strategy, medians over the runs with their range: time from
//! request to last byte, peak RSS, peak RSS above the idle server, and the
//! integrity line `integrity: OK <first 16 hex>` (FAIL exits non-zero).
//! The digest expected is computed here, from the payload's description,
//! not by the server's code. An SVG of RSS over time for both strategies,
//! each run's range as bars, is written to
//! `target/unflat-bench/large-write.svg`, and every run's figures to
//! `large-write-runs.csv` (`large-write-tls.*` with `--tls`).
//!
//! With `--tls` the server serves HTTPS (a certificate made here for
//! localhost) and the client reads through rustls: the same payload, the
//! same digest, encrypted on the way.

mod support;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use sha2::{Digest, Sha256};
use support::{
    build_release, cli, connect, machine, max, median, min, out_dir, rss_of, Proc, Progress, Tls,
};

/// The largest payload, in MiB (the harness gives the server a memory limit
/// that holds it twice: cached, and the flatten strategy's copy).
const MAX_SIZE_MIB: u64 = 2048;

/// How unflat-server writes one large response, --strategy flatten against
/// direct: time from request to last byte, the server's peak resident
/// memory (and how far above idle), and the body's integrity (SHA-256
/// against a digest computed here from the payload's description).
///
/// Builds the release server; per strategy starts it, fetches
/// /large/{size} once to build and cache the payload, then --runs times
/// with a client that streams the body into SHA-256 while the server's RSS
/// is sampled from /proc every 5 ms. Progress (run k of N, time elapsed and
/// left) goes to stderr; one line per strategy, medians over the runs and
/// `integrity: OK <first 16 hex>` (FAIL exits 1), to stdout.
///
/// Writes target/unflat-bench/large-write.svg, RSS over time for both
/// strategies with each run's range as bars, and large-write-runs.csv,
/// every run's figures (large-write-tls.svg and -tls-runs.csv with --tls, and then the certificate,
/// large-write-cert.pem and large-write-key.pem).
///
/// Examples:
///   cargo bench --bench large-write -- --quick    64 MiB, 1 run: a smoke run
///   cargo bench --bench large-write -- --verify   512 MiB, 7 runs per strategy
///   cargo bench --bench large-write -- --size-mib 1024 --runs 3 --tls
#[derive(Parser, Debug)]
#[command(
    name = "large-write",
    bin_name = "cargo bench --bench large-write --",
    verbatim_doc_comment
)]
struct Opts {
    /// Payload size in MiB (1 to 2048).
    #[arg(long, default_value_t = 512, value_parser = cli::count(1..=MAX_SIZE_MIB))]
    size_mib: usize,
    /// Runs per strategy (1 to 1000).
    #[arg(long, default_value_t = 7, value_parser = cli::count(1..=1000))]
    runs: usize,
    /// Hash every run (always on; accepted for the Deno bench's spelling).
    #[arg(long)]
    verify: bool,
    /// A short smoke run: 64 MiB, 1 run.
    #[arg(long)]
    quick: bool,
    /// Over HTTPS (rustls on both ends).
    #[arg(long)]
    tls: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long)]
    bench: bool,
}

/// The `/large` payload from its description: 0x61, with the little-endian
/// u32 byte offset at every 4 KiB boundary. Streamed into the hash in
/// blocks, so the harness never holds the payload itself.
fn expected_digest(size: usize) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut block = [0x61u8; 4096];
    let mut at = 0;
    while at < size {
        block[..4].copy_from_slice(&(at as u32).to_le_bytes());
        let n = (size - at).min(4096);
        h.update(&block[..n]);
        at += 4096;
    }
    h.finalize().into()
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// One request: the time to the last byte and the body's digest.
fn fetch(server: &Proc, size: usize, tls: Option<&Tls>) -> (Duration, [u8; 32]) {
    let mut conn = connect(server, tls);
    let start = Instant::now();
    conn.write_all(
        format!("GET /large/{size} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut head = Vec::new();
    let mut body = 0usize;
    loop {
        let n = conn.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        let mut chunk = &buf[..n];
        if body == 0 && !head.ends_with(b"\r\n\r\n") {
            // Still in the head: find its end.
            let mut used = 0;
            for &b in chunk {
                head.push(b);
                used += 1;
                if head.ends_with(b"\r\n\r\n") {
                    break;
                }
            }
            chunk = &chunk[used..];
        }
        h.update(chunk);
        body += chunk.len();
        if body >= size {
            break;
        }
    }
    let elapsed = start.elapsed();
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    assert_eq!(body, size, "body length");
    (elapsed, h.finalize().into())
}

/// Samples the RSS of `pid` every 5 ms until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(f64, u64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (s, v) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            while !s.load(Ordering::Relaxed) {
                if let Some(rss) = rss_of(pid) {
                    v.lock()
                        .unwrap()
                        .push((t0.elapsed().as_secs_f64() * 1000.0, rss));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Sampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<(f64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        std::mem::take(&mut self.samples.lock().unwrap())
    }
}

const MIB: f64 = 1024.0 * 1024.0;

fn main() {
    let mut o: Opts = cli::parse();
    if o.quick {
        o.size_mib = 64;
        o.runs = 1;
    }
    let size = o.size_mib << 20;
    let bin = build_release(&["unflat-server"]);
    let expected = expected_digest(size);
    println!("machine: {}", machine());
    println!(
        "payload {} MiB, {} run(s) per strategy, RSS sampled every 5 ms\n",
        o.size_mib, o.runs
    );
    let tls = o.tls.then(|| {
        println!("over HTTPS (rustls, aws-lc-rs)\n");
        Tls::new("large-write")
    });
    let mut traces: Vec<(String, Vec<(f64, u64)>)> = Vec::new();
    // Per strategy: every run's time to the last byte (ms) and peak RSS (MiB).
    let mut spreads: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    let mut failed = false;
    // Every run, for the runs file: strategy, run, ms, peak MiB, above idle MiB.
    let mut rows = String::from("strategy,run,ms_to_last_byte,peak_rss_mib,above_idle_mib\n");
    // The warm-up fetch, which builds the payload, is a step too.
    let mut progress = Progress::new("large-write", 2 * (o.runs + 1), None);
    for strategy in ["flatten", "direct"] {
        let mut args: Vec<String> = [
            "--addr",
            "127.0.0.1:0",
            "--strategy",
            strategy,
            "--max-large",
            &size.to_string(),
            // Room for the payload cached, the flatten strategy's copy of
            // it, and the connection.
            "--memory-limit",
            &(2 * size + (256 << 20)).to_string(),
            "--cache-bytes",
            &size.to_string(),
        ]
        .map(String::from)
        .to_vec();
        args.extend(tls.iter().flat_map(|t| t.server_args.iter().cloned()));
        let server = Proc::start(strategy, &bin.join("unflat-server"), &args);
        std::thread::sleep(Duration::from_millis(200));
        let idle = server.rss();
        // Warm-up: the server builds and caches the payload on first use;
        // the runs then measure writing it.
        progress.step(&format!("{strategy} warm-up"));
        let _ = fetch(&server, size, tls.as_ref());
        let (mut times, mut peaks, mut above) = (Vec::new(), Vec::new(), Vec::new());
        let mut digests_ok = true;
        for run in 0..o.runs {
            progress.step(&format!("{strategy} run {} of {}", run + 1, o.runs));
            let sampler = Sampler::start(server.pid());
            std::thread::sleep(Duration::from_millis(20));
            let (elapsed, digest) = fetch(&server, size, tls.as_ref());
            std::thread::sleep(Duration::from_millis(20));
            let samples = sampler.finish();
            let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
            times.push(elapsed.as_secs_f64() * 1000.0);
            peaks.push(peak as f64 / MIB);
            above.push(peak.saturating_sub(idle) as f64 / MIB);
            digests_ok &= digest == expected;
            let _ = writeln!(
                rows,
                "{strategy},{},{:.1},{:.1},{:.1}",
                run + 1,
                times[run],
                peaks[run],
                above[run]
            );
            if run == 0 {
                traces.push((strategy.to_string(), samples));
            }
        }
        spreads.push((times.clone(), peaks.clone()));
        let integrity = if digests_ok {
            format!("OK {}", &hex(&expected)[..16])
        } else {
            "FAIL".to_string()
        };
        failed |= !digests_ok;
        let (fastest, slowest) = (min(&times), max(&times));
        let (lowest, highest) = (min(&peaks), max(&peaks));
        println!(
            "{strategy:>8}: size={}MiB  request→last byte {:.0} ms ({fastest:.0}–{slowest:.0})  peakRSS {:.0} MiB ({lowest:.0}–{highest:.0})  above idle {:.0} MiB (idle {:.0} MiB)  integrity: {integrity}",
            o.size_mib,
            median(&mut times),
            median(&mut peaks),
            median(&mut above),
            idle as f64 / MIB
        );
    }
    let name = if o.tls {
        "large-write-tls"
    } else {
        "large-write"
    };
    let svg = out_dir().join(format!("{name}.svg"));
    chart(&svg, &traces, &spreads, o.size_mib);
    let runs = out_dir().join(format!("{name}-runs.csv"));
    std::fs::write(&runs, rows).expect("the runs file is written");
    println!(
        "\nRSS over time: {}\nevery run: {}",
        svg.display(),
        runs.display()
    );
    if failed {
        std::process::exit(1);
    }
}

/// RSS over time for the first run of each strategy, and over each trace,
/// at the strategy's median peak, a bar from the fastest to the slowest
/// run's time to the last byte with a dot at the median (no bar with one
/// run).
fn chart(
    path: &std::path::Path,
    traces: &[(String, Vec<(f64, u64)>)],
    spreads: &[(Vec<f64>, Vec<f64>)],
    size_mib: usize,
) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (900, 440)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let runs = spreads.iter().map(|s| s.0.len()).max().unwrap_or(0);
    let tmax = traces
        .iter()
        .flat_map(|t| t.1.iter().map(|s| s.0))
        .chain(spreads.iter().flat_map(|s| s.0.iter().copied()))
        .fold(1.0, f64::max)
        * 1.02;
    let ymax = traces
        .iter()
        .flat_map(|t| t.1.iter().map(|s| s.1 as f64 / MIB))
        .fold(1.0, f64::max)
        * 1.1;
    let mut c = ChartBuilder::on(&root)
        .caption(
            format!(
                "server RSS while writing a {size_mib} MiB /large response; bars: time to last byte, fastest to slowest of {runs} run(s)"
            ),
            ("sans-serif", 15),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..tmax, 0.0..ymax)
        .unwrap();
    c.configure_mesh()
        .x_desc("time since the request (ms)")
        .y_desc("server resident memory, RSS (MiB)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .unwrap();
    for (i, (name, samples)) in traces.iter().enumerate() {
        let color = [RGBColor(214, 39, 40), RGBColor(31, 119, 180)][i % 2];
        c.draw_series(LineSeries::new(
            samples.iter().map(|s| (s.0, s.1 as f64 / MIB)),
            color.stroke_width(2),
        ))
        .unwrap()
        .label(name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        if let Some((times, peaks)) = spreads.get(i) {
            let (mut times, mut peaks) = (times.clone(), peaks.clone());
            if times.len() > 1 {
                let (lo, hi) = (min(&times), max(&times));
                let y = median(&mut peaks);
                let cap = ymax * 0.015;
                c.draw_series(
                    [
                        vec![(lo, y), (hi, y)],
                        vec![(lo, y - cap), (lo, y + cap)],
                        vec![(hi, y - cap), (hi, y + cap)],
                    ]
                    .map(|line| PathElement::new(line, color.stroke_width(1))),
                )
                .unwrap();
                c.draw_series([Circle::new((median(&mut times), y), 4, color.filled())])
                    .unwrap();
            }
        }
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .unwrap();
    root.present().unwrap();
}
