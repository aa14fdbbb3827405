//! `cargo bench --bench end-string -- [options]`: Node's
//! `benchmark/http/end-string.js`, driven by wrk, against three servers
//! started by the harness — unflat-server `--strategy flatten`, unflat-server
//! `--strategy direct`, and hyper-peer — with Node's comparison table.
//!
//! Every run is `wrk -c 50 -d {duration} -s wrk_scripts/end-string.lua`; the
//! variants alternate run by run, as Node's compare.js does. Server CPU time
//! is read from /proc/PID/stat around each run, giving CPU µs per request, a
//! figure that holds even when wrk is the bottleneck.
//!
//! On a 2-core machine the servers get both cores (`--workers 2`) and wrk
//! one thread (`--threads 1`): the server has the larger share.

mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use statrs::distribution::{ContinuousCDF, StudentsT};
use support::{build_release, installed, machine, out_dir, root, Proc};

/// The end-string benchmark.
#[derive(Parser, Debug)]
#[command(name = "end-string")]
struct Opts {
    /// Runs per (variant, len, kind).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Body lengths, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [4usize, 64, 1024, 16384, 102400])]
    lens: Vec<usize>,
    /// Kinds, comma-separated: ascii, latin1, twobyte.
    #[arg(long, value_delimiter = ',', default_values_t = ["ascii".to_string()])]
    kinds: Vec<String>,
    /// Variants, comma-separated: flatten, direct, hyper.
    #[arg(long, value_delimiter = ',', default_values_t = ["flatten".to_string(), "direct".to_string(), "hyper".to_string()])]
    variants: Vec<String>,
    /// wrk threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Server worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// wrk connections.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// A short smoke run: 1 run of 1 s per cell.
    #[arg(long)]
    quick: bool,
    /// Also count the servers' read and write system calls per request
    /// (needs strace).
    #[arg(long)]
    syscalls: bool,
    /// Requests per variant and length for --syscalls.
    #[arg(long, default_value_t = 2000)]
    syscall_requests: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
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
    cpu_us_per_req: f64,
    p99_us: f64,
    errors: u64,
}

fn main() {
    let mut o = Opts::parse();
    if o.quick {
        o.runs = 1;
        o.duration = 1;
    }
    for v in &o.variants {
        assert!(
            ["flatten", "direct", "hyper"].contains(&v.as_str()),
            "unknown variant {v:?}: flatten, direct or hyper"
        );
    }
    for k in &o.kinds {
        assert!(
            ["ascii", "latin1", "twobyte"].contains(&k.as_str()),
            "unknown kind {k:?}: ascii, latin1 or twobyte"
        );
    }
    if !installed("wrk") {
        eprintln!("end-string: wrk is not installed. Install it with `apt-get install wrk` (Debian/Ubuntu) and run again.");
        std::process::exit(2);
    }
    let bin = build_release(&["unflat-server", "hyper-peer"]);
    let workers = o.workers.to_string();
    let servers: Vec<Proc> = o
        .variants
        .iter()
        .map(|v| {
            let mut args = vec![
                "--addr".into(),
                "127.0.0.1:0".into(),
                "--workers".into(),
                workers.clone(),
            ];
            let exe = if v == "hyper" {
                bin.join("hyper-peer")
            } else {
                args.extend(["--strategy".into(), v.clone()]);
                bin.join("unflat-server")
            };
            Proc::start(v, &exe, &args)
        })
        .collect();

    println!("machine: {}", machine());
    println!(
        "wrk -t{} -c{} -d{}s; servers with {} workers; {} run(s) per cell, variants alternating\n",
        o.threads, o.connections, o.duration, o.workers, o.runs
    );
    let mut runs = Vec::new();
    for run in 0..o.runs {
        for kind in &o.kinds {
            for &len in &o.lens {
                for s in &servers {
                    let r = wrk(&o, s, len, kind, run);
                    println!(
                        "run {} {:>7} {:<7} len={:<6} {:>10.0} req/s {:>7.2} CPU µs/req  p99 {:>6} µs{}",
                        run + 1,
                        s.name,
                        kind,
                        len,
                        r.req_per_s,
                        r.cpu_us_per_req,
                        r.p99_us,
                        if r.errors > 0 { format!("  {} errors", r.errors) } else { String::new() }
                    );
                    runs.push(r);
                }
            }
        }
    }
    println!();
    report(&o, &runs);
    let dir = out_dir();
    let csv = dir.join("end-string.csv");
    write_csv(&csv, &runs);
    let svg = dir.join("end-string.svg");
    chart(&svg, &o, &runs);
    if o.syscalls {
        syscalls(&o, &servers);
    }
    println!("\nraw runs: {}\nchart:    {}", csv.display(), svg.display());
    if runs.iter().any(|r| r.errors > 0) {
        eprintln!("some runs had socket errors or non-2xx responses");
        std::process::exit(1);
    }
}

fn wrk(o: &Opts, s: &Proc, len: usize, kind: &str, run: usize) -> Run {
    let script = root().join("wrk_scripts/end-string.lua");
    let before = s.cpu_time();
    let out = Command::new("wrk")
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
        .arg(&s.url)
        .args(["--", &len.to_string(), kind])
        .stderr(Stdio::inherit())
        .output()
        .expect("run wrk");
    let cpu = s.cpu_time() - before;
    assert!(
        out.status.success(),
        "wrk failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line from wrk:\n{stdout}"));
    let num = |key: &str| -> f64 {
        let at = json
            .find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("{key} missing in {json}"))
            + key.len()
            + 3;
        json[at..]
            .split([',', '}'])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let requests = num("requests");
    let errors = ["connect", "read", "write", "timeout", "status"]
        .iter()
        .map(|k| num(k) as u64)
        .sum();
    Run {
        variant: s.name.clone(),
        kind: kind.into(),
        len,
        run,
        req_per_s: num("req_per_s"),
        cpu_us_per_req: cpu.as_secs_f64() * 1e6 / requests.max(1.0),
        p99_us: num("p99"),
        errors,
    }
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        f64::NAN
    };
    (mean, var.sqrt())
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
    let (m1, s1) = mean_sd(old);
    let (m2, s2) = mean_sd(new);
    let (v1, v2) = (s1 * s1 / old.len() as f64, s2 * s2 / new.len() as f64);
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

fn report(o: &Opts, runs: &[Run]) {
    let mut by: BTreeMap<(String, usize, String), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        by.entry((r.kind.clone(), r.len, r.variant.clone()))
            .or_default()
            .push(r);
    }
    println!(
        "{:<8} {:>7} {:>8} {:>22} {:>20}",
        "kind", "len", "variant", "req/s (mean ± sd)", "CPU µs/req"
    );
    for ((kind, len, variant), rs) in &by {
        let (rm, rsd) = mean_sd(&rs.iter().map(|r| r.req_per_s).collect::<Vec<_>>());
        let (cm, csd) = mean_sd(&rs.iter().map(|r| r.cpu_us_per_req).collect::<Vec<_>>());
        println!(
            "{kind:<8} {len:>7} {variant:>8} {:>22} {:>20}",
            format!("{rm:.0} ± {rsd:.0}"),
            format!("{cm:.2} ± {csd:.2}")
        );
    }
    let pairs: Vec<(&str, &str)> = [("flatten", "direct"), ("hyper", "direct")]
        .into_iter()
        .filter(|(a, b)| o.variants.iter().any(|v| v == a) && o.variants.iter().any(|v| v == b))
        .collect();
    for metric in ["req/s", "CPU µs/req"] {
        println!(
            "\n{metric}: old → new{}",
            if metric == "req/s" {
                " (+ is faster)"
            } else {
                " (− is less CPU)"
            }
        );
        println!(
            "{:<44} {:>10} {:>12} {:>14} {:>8} {:>8}",
            "", "confidence", "improvement", "accuracy (*)", "(**)", "(***)"
        );
        let mut ps = Vec::new();
        for (old, new) in &pairs {
            for kind in &o.kinds {
                for &len in &o.lens {
                    let pick = |v: &str| -> Vec<f64> {
                        by.get(&(kind.clone(), len, v.to_string()))
                            .map(|rs| {
                                rs.iter()
                                    .map(|r| {
                                        if metric == "req/s" {
                                            r.req_per_s
                                        } else {
                                            r.cpu_us_per_req
                                        }
                                    })
                                    .collect()
                            })
                            .unwrap_or_default()
                    };
                    let label = format!("end-string {old} → {new} kind={kind} len={len}");
                    match welch(&pick(old), &pick(new)) {
                        Some(c) => {
                            ps.push(c.p);
                            println!(
                                "{label:<44} {:>10} {:>11.2} % {:>13.2}% {:>7.2}% {:>7.2}%",
                                stars(c.p),
                                c.improvement,
                                c.accuracy[0],
                                c.accuracy[1],
                                c.accuracy[2]
                            );
                        }
                        None => println!("{label:<44} (needs at least 2 runs per variant)"),
                    }
                }
            }
        }
        holm_note(&ps);
    }
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

fn write_csv(path: &std::path::Path, runs: &[Run]) {
    let mut s = String::from("variant,kind,len,run,req_per_s,cpu_us_per_req,p99_us,errors\n");
    for r in runs {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.2},{:.3},{},{}",
            r.variant,
            r.kind,
            r.len,
            r.run + 1,
            r.req_per_s,
            r.cpu_us_per_req,
            r.p99_us,
            r.errors
        );
    }
    std::fs::write(path, s).expect("write CSV");
}

fn chart(path: &std::path::Path, o: &Opts, runs: &[Run]) {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).unwrap();
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
        .flat_map(|v| o.kinds.iter().map(move |k| (v.clone(), k.clone())))
        .collect();
    for (panel, (title, pick, legend)) in panels.iter().zip([
        (
            "requests per second",
            (|r: &Run| r.req_per_s) as fn(&Run) -> f64,
            SeriesLabelPosition::UpperRight,
        ),
        (
            "server CPU µs per request",
            |r: &Run| r.cpu_us_per_req,
            SeriesLabelPosition::UpperLeft,
        ),
    ]) {
        let points = |v: &str, k: &str| -> Vec<(f64, f64)> {
            o.lens
                .iter()
                .filter_map(|&len| {
                    let vals: Vec<f64> = runs
                        .iter()
                        .filter(|r| r.variant == v && r.kind == k && r.len == len)
                        .map(pick)
                        .collect();
                    (!vals.is_empty()).then(|| {
                        (
                            (len as f64).log10(),
                            vals.iter().sum::<f64>() / vals.len() as f64,
                        )
                    })
                })
                .collect()
        };
        let ymax = series
            .iter()
            .flat_map(|(v, k)| points(v, k))
            .map(|p| p.1)
            .fold(0.0, f64::max)
            * 1.1
            + 1e-9;
        let xs: Vec<f64> = o.lens.iter().map(|&l| (l as f64).log10()).collect();
        let (xmin, xmax) = (
            xs.iter().cloned().fold(f64::INFINITY, f64::min) - 0.2,
            xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max) + 0.2,
        );
        let mut c = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xmin..xmax, 0.0..ymax)
            .unwrap();
        c.configure_mesh()
            .x_desc("body length (characters, log scale)")
            .x_label_formatter(&|x| format!("{:.0}", 10f64.powf(*x)))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .unwrap();
        for (i, (v, k)) in series.iter().enumerate() {
            let color = colors[i % colors.len()];
            let pts = points(v, k);
            c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .unwrap()
                .label(format!("{v} {k}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            c.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))
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

/// Counts the read and write system calls of each server for a fixed number
/// of keep-alive requests, with strace attached to every thread.
fn syscalls(o: &Opts, servers: &[Proc]) {
    if !installed("strace") {
        eprintln!("--syscalls: strace is not installed (apt-get install strace); skipped");
        return;
    }
    let kind = o.kinds.first().map_or("ascii", String::as_str);
    let n = o.syscall_requests;
    println!("\nsystem calls per request ({n} sequential keep-alive requests, kind={kind}):");
    println!(
        "{:>8} {:>7} {:>8} {:>8} {:>8}",
        "variant", "len", "reads", "writes", "writev"
    );
    for &len in &o.lens {
        for s in servers {
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
            let mut conn = TcpStream::connect(s.authority()).expect("connect");
            for _ in 0..n {
                conn.write_all(request.as_bytes()).unwrap();
                read_one(&mut conn);
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
                    .sum::<f64>()
                    / n as f64
            };
            println!(
                "{:>8} {:>7} {:>8.2} {:>8.2} {:>8.2}",
                s.name,
                len,
                calls(&["read", "recvfrom", "readv", "recvmsg"]),
                calls(&["write", "sendto", "sendmsg"]),
                calls(&["writev"]),
            );
        }
    }
}

/// Reads one response (head and Content-Length body) from `conn`.
fn read_one(conn: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = conn.read(&mut chunk).expect("read");
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                return;
            }
        }
    }
}
