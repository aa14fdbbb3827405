//! `cargo bench --bench copies -- [--requests 100] [--quick]`: how many
//! times unflat-server writes each body byte into its memory, per
//! strategy, over cleartext and over HTTPS — the copies per body byte.
//!
//! The server runs under valgrind's DHAT, which counts every byte written
//! into each heap block by any instruction (a memcpy, an encoder kernel,
//! an in-place encryption alike) and names the code that allocated the
//! block. To let DHAT see the heap, the server is this bench's own binary
//! re-run in server mode (`UNFLAT_COPIES_SERVE=1`: `unflat_server::cli`
//! with the system allocator; the release binary uses jemalloc, whose
//! blocks DHAT cannot see). Each (transport, strategy, length) runs twice,
//! `W` warm-up requests and then `W + N`, each on one keep-alive
//! connection ended by a graceful stop (SIGTERM); the difference over `N`
//! is what one request writes — start-up, the handshake and the body cache
//! cancel out. Printed: bytes written to the heap per request and per body
//! byte, the slope between the two lengths (which cancels what every
//! request writes whatever its body: the head, the request), and, for the
//! longer body, the allocation sites that take the writes.

mod support;

/// The binary's demo, served by this harness's own process in server mode
/// (the system allocator, for valgrind): it uses `main` of it, and none of
/// its unit tests.
#[path = "../server/src/demo/mod.rs"]
#[allow(dead_code, unused_imports)]
mod demo;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use clap::Parser;
use support::{
    cli, connect, installed, machine, out_dir, server_args, Proc, Progress, Responses, Tls,
};

/// How many times unflat-server writes each body byte into its memory, per
/// strategy (flatten, direct), over cleartext and over HTTPS: bytes
/// written to the heap per request and per body byte, counted by
/// valgrind's DHAT, and the allocation sites that take the writes.
///
/// The server is this binary re-run in server mode under DHAT (with the
/// system allocator, whose heap DHAT sees). Each (transport, strategy,
/// length) runs twice, 20 warm-up requests and then 20 + --requests, on
/// one keep-alive connection ended by SIGTERM; the difference over
/// --requests is what one request writes. Under valgrind the server runs
/// many times slower. Progress (run k of N, time elapsed and left) goes
/// to stderr; the tables to stdout. Needs valgrind.
///
/// Writes to target/unflat-bench/: DHAT's output of the last run,
/// copies-PID.dhat.json, and the certificate of the HTTPS server,
/// copies-cert.pem and copies-key.pem.
///
/// Examples:
///   cargo bench --bench copies -- --quick    10 requests, the longer body only
///   cargo bench --bench copies -- --requests 500
#[derive(Parser, Debug)]
#[command(
    name = "copies",
    bin_name = "cargo bench --bench copies --",
    verbatim_doc_comment
)]
struct Opts {
    /// Requests counted per (transport, strategy, length), after the
    /// warm-up (1 to 100000).
    #[arg(long, default_value_t = 100, value_parser = cli::count(1..=100_000))]
    requests: usize,
    /// A short smoke run: 10 requests, the longer body only.
    #[arg(long)]
    quick: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long)]
    bench: bool,
}

/// Warm-up requests: the body cache filled, buffers grown.
const WARM_UP: usize = 20;
/// Body lengths (ASCII): both above the queue's copy threshold.
const LENS: [usize; 2] = [16384, 102400];
/// The variable that turns this binary into the server.
const SERVE: &str = "UNFLAT_COPIES_SERVE";

/// Heap writes of one server run, by allocation site.
struct Writes {
    /// Bytes written, per site (its stack, frames joined).
    by_site: BTreeMap<String, u64>,
}

impl Writes {
    fn total(&self) -> u64 {
        self.by_site.values().sum()
    }
}

/// Serves `requests` requests for a body of `len` on one connection, the
/// server under DHAT from start to a graceful stop; what it wrote.
fn run(tls: Option<&Tls>, strategy: &str, len: usize, requests: usize) -> Writes {
    let out = out_dir().join(format!("copies-{}.dhat.json", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let mut cmd = Command::new("valgrind");
    cmd.args(["-q", "--tool=dhat"])
        .arg(format!("--dhat-out-file={}", out.display()))
        .arg(std::env::current_exe().expect("this binary"))
        .args(server_args(1, strategy))
        .args(tls.iter().flat_map(|t| t.server_args.iter()))
        .env(SERVE, "1");
    let server = Proc::spawn(strategy, cmd);
    {
        let mut conn = connect(&server, tls);
        let mut responses = Responses::default();
        let request = format!("GET /end-string/{len} HTTP/1.1\r\nHost: bench\r\n\r\n");
        for _ in 0..requests {
            conn.write_all(request.as_bytes()).unwrap();
            assert_eq!(responses.next(&mut conn), len);
        }
    }
    let status = server.terminate();
    assert!(status.success(), "the server's exit: {status}");
    read_dhat(&out)
}

/// The bytes written per allocation site, from DHAT's JSON output.
fn read_dhat(path: &Path) -> Writes {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (did DHAT run?)", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text).expect("DHAT's JSON");
    let frames: Vec<&str> = json["ftbl"]
        .as_array()
        .expect("ftbl")
        .iter()
        .map(|f| f.as_str().unwrap_or(""))
        .collect();
    let mut by_site = BTreeMap::new();
    for pp in json["pps"].as_array().expect("pps") {
        let stack: Vec<&str> = pp["fs"]
            .as_array()
            .expect("fs")
            .iter()
            .filter_map(|i| frames.get(i.as_u64()? as usize).copied())
            .collect();
        if let Some(site) = site(&stack) {
            *by_site.entry(site).or_default() += pp["wb"].as_u64().unwrap_or(0);
        }
    }
    Writes { by_site }
}

/// A site's name: the first frame of the project's crates or of rustls
/// (below the allocator and `Vec`/`BytesMut` growth), with the address and
/// library dropped, and the frame that called it; `None` for aws-lc's
/// CPU-jitter entropy source, whose start-up writes differ from run to run
/// (they are timing measurements) and so would not cancel out.
fn site(stack: &[&str]) -> Option<String> {
    if stack.iter().any(|f| f.contains("jent_")) {
        return None;
    }
    let name = |f: &str| {
        let f = f.split_once(": ").map_or(f, |(_, name)| name);
        f.split(" (").next().unwrap_or(f).to_string()
    };
    let ours = |f: &&str| {
        [
            "unflat",
            "unflat_server",
            "rustls",
            "tokio_rustls",
            "bytes",
            "tokio",
        ]
        .iter()
        .any(|c| f.contains(&format!(": {c}::")) || f.contains(&format!("<{c}::")))
    };
    Some(match stack.iter().position(ours) {
        Some(i) => {
            let caller = stack.get(i + 1).map(|f| name(f)).unwrap_or_default();
            format!("{} ← {}", name(stack[i]), caller)
        }
        None => stack
            .iter()
            .skip(1)
            .take(3)
            .map(|f| name(f))
            .collect::<Vec<_>>()
            .join(" ← "),
    })
}

fn main() {
    if std::env::var_os(SERVE).is_some() {
        // Server mode: the real command line, the system allocator.
        if let Err(e) = demo::main() {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        return;
    }
    let o: Opts = cli::parse();
    if !installed("valgrind") {
        eprintln!("copies: valgrind is not installed (apt-get install valgrind)");
        std::process::exit(2);
    }
    let (n, lens) = if o.quick {
        (10, &LENS[1..])
    } else {
        (o.requests, &LENS[..])
    };
    let tls = Tls::new("copies");
    println!("machine: {}", machine());
    println!(
        "bytes written into the server's heap per request, by DHAT: ({WARM_UP} + {n} requests) − ({WARM_UP} requests), over {n}; ASCII bodies\n"
    );
    println!(
        "{:<6} {:<8} {:>7} {:>16} {:>14}",
        "", "strategy", "len", "written/request", "per body byte"
    );
    let mut breakdowns = Vec::new();
    // Two runs of each (transport, strategy, length), each under valgrind.
    let mut progress = Progress::new("copies", 2 * 2 * lens.len() * 2, None);
    for transport in [None, Some(&tls)] {
        let name = if transport.is_some() { "tls" } else { "clear" };
        for strategy in ["flatten", "direct"] {
            let mut per_request = Vec::new();
            for &len in lens {
                progress.step(&format!("{name} {strategy} len={len}, {WARM_UP} requests"));
                let warm = run(transport, strategy, len, WARM_UP);
                progress.step(&format!(
                    "{name} {strategy} len={len}, {} requests",
                    WARM_UP + n
                ));
                let all = run(transport, strategy, len, WARM_UP + n);
                let bytes = all.total().saturating_sub(warm.total()) as f64 / n as f64;
                per_request.push(bytes);
                println!(
                    "{name:<6} {strategy:<8} {len:>7} {bytes:>16.0} {:>14.3}",
                    bytes / len as f64
                );
                if len == LENS[1] {
                    let mut sites: Vec<(f64, String)> = all
                        .by_site
                        .iter()
                        .map(|(site, &b)| {
                            let before = warm.by_site.get(site).copied().unwrap_or(0);
                            (
                                b.saturating_sub(before) as f64 / n as f64 / len as f64,
                                site.clone(),
                            )
                        })
                        .filter(|(per_byte, _)| *per_byte >= 0.05)
                        .collect();
                    sites.sort_by(|a, b| b.0.total_cmp(&a.0));
                    breakdowns.push((format!("{name} {strategy}"), sites));
                }
            }
            if let [short, long] = per_request[..] {
                let slope = (long - short) / (LENS[1] - LENS[0]) as f64;
                println!(
                    "{name:<6} {strategy:<8} {:>7} {:>16} {slope:>14.3}",
                    "slope", ""
                );
            }
        }
    }
    println!(
        "\nwhere the writes land, len {} (bytes written per body byte, sites ≥ 0.05):",
        LENS[1]
    );
    for (variant, sites) in breakdowns {
        println!("{variant}:");
        for (per_byte, site) in sites {
            println!("  {per_byte:6.3}  {site:.150}");
        }
    }
}
