//! The benchmark harnesses' command lines: a bad option is a usage error —
//! exit status 2 and one line on stderr naming the option and the value —
//! before any benchmark starts, never a panic; `--bench`, which `cargo
//! bench` passes, is accepted; `--help` describes every option.
//!
//! The harnesses are bench targets, which no test can ask cargo for, and
//! building them inside `cargo test` would nest one cargo in another: so
//! these tests are ignored by a plain `cargo test`, and `.ci/run` runs them
//! (`cargo test --test bench_cli -- --ignored`) with `UNFLAT_HARNESSES`
//! naming a directory of the executables it built for its smoke runs.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why these tests are ignored by a plain `cargo test`.
const NEEDS: &str = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)";

/// The custom harnesses (`harness = false` benches with a command line).
const HARNESSES: [&str; 6] = [
    "end-string",
    "large-write",
    "write-patterns",
    "copies",
    "tls-providers",
    "probe-latency",
];

/// A harness's executable: `$UNFLAT_HARNESSES/<bench name>`.
fn executable(name: &str) -> PathBuf {
    let dir = std::env::var_os("UNFLAT_HARNESSES").unwrap_or_else(|| panic!("{NEEDS}"));
    let exe = PathBuf::from(dir).join(name);
    assert!(
        exe.is_file(),
        "{}: no such executable ({NEEDS})",
        exe.display()
    );
    exe
}

/// Runs `harness args…`, which must exit within 20 s (a harness that took
/// a bad option would start its benchmark instead, and be killed here).
/// Returns (status code, stdout, stderr).
fn run(harness: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(executable(harness))
        .args(args)
        // copies turns into a server when this is set.
        .env_remove("UNFLAT_COPIES_SERVE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {harness}: {e}"));
    let begun = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if begun.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{harness} {args:?}: still running after 20 s, so it took the options");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `harness args…` (and the same with `--bench` after them, as `cargo
/// bench` runs it) exits 2 with one line on stderr, `error: …`, containing
/// each of `names`; nothing on stdout, no panic.
fn refused(harness: &str, args: &[&str], names: &[&str]) {
    for with_bench in [false, true] {
        let mut argv = args.to_vec();
        if with_bench {
            argv.push("--bench");
        }
        let (code, stdout, stderr) = run(harness, &argv);
        let what = format!("{harness} {argv:?}");
        assert_eq!(code, Some(2), "{what}: exit status, stderr: {stderr}");
        assert!(stdout.is_empty(), "{what}: printed {stdout:?}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{what}: not one line: {stderr}");
        assert!(stderr.starts_with("error: "), "{what}: {stderr}");
        for name in names {
            assert!(
                stderr.contains(name),
                "{what}: {name:?} not named in {stderr}"
            );
        }
    }
}

#[test]
#[ignore = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)"]
fn end_string_refuses_bad_options_with_one_line_and_status_2() {
    for (args, names) in [
        (
            &["--variants", "foo"][..],
            &["--variants", "foo", "flatten"][..],
        ),
        (&["--kinds", "utf7"], &["--kinds", "utf7", "twobyte"]),
        (&["--body", "chunked"], &["--body", "chunked", "rope"]),
        (&["--lens", "0"], &["--lens", "0"]),
        (&["--lens", "4,x"], &["--lens", "x"]),
        (&["--lens", "16777217"], &["--lens", "16777217"]),
        (&["--runs", "-1"], &["--runs", "-1"]),
        (&["--runs", "0"], &["--runs"]),
        (&["--min-runs", "0"], &["--min-runs"]),
        (&["--accuracy", "nan"], &["--accuracy", "NaN"]),
        (&["--accuracy", "0"], &["--accuracy"]),
        (&["--budget", "-1"], &["--budget", "-1"]),
        (&["--budget", "inf"], &["--budget"]),
        (&["--duration", "0"], &["--duration"]),
        (&["--threads", "0"], &["--threads"]),
        (&["--connections", "0"], &["--connections"]),
        (&["--workers", "0"], &["--workers"]),
        (&["--pipeline", "0"], &["--pipeline"]),
        (&["--syscall-requests", "0"], &["--syscall-requests"]),
        (&["--nonsense"], &["--nonsense"]),
        (&["stray"], &["stray"]),
        // Combinations, checked before anything starts.
        (
            &["--threads", "4", "--connections", "2"],
            &["--connections", "--threads"],
        ),
        (
            &["--tls", "--variants", "direct,ceiling"],
            &["--tls", "ceiling"],
        ),
        (
            &["--variants", "direct,hyper-stock"],
            &["--variants", "hyper-stock", "--tls"],
        ),
        (&["--tls-provider", "ring"], &["--tls-provider", "--tls"]),
        (
            &["--tls", "--tls-provider", "openssl"],
            &["--tls-provider", "openssl", "aws-lc-rs", "ring"],
        ),
        (&["--variants", "direct,direct"], &["--variants", "direct"]),
        (&["--kinds", "ascii,ascii"], &["--kinds", "ascii"]),
        (&["--lens", "64,64"], &["--lens", "64"]),
    ] {
        refused("end-string", args, names);
    }
}

/// An empty directory of this test process's own for runs files, named
/// after `label`; the test removes it.
fn scratch_dir(label: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("unflat-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A runs file in `dir` (end-string's `*-runs.csv` layout) holding `rows`.
fn runs_file(dir: &std::path::Path, name: &str, rows: &[&str]) -> String {
    let path = dir.join(name);
    let header =
        "variant,kind,len,run,req_per_s,server_cpu_us_per_req,wrk_cpu_us_per_req,p99_us,errors";
    std::fs::write(
        &path,
        [header]
            .iter()
            .chain(rows)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
#[ignore = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)"]
fn end_string_prints_the_tables_of_a_runs_file_and_names_a_broken_line() {
    let dir = scratch_dir("from-runs");
    // Two rounds: the machine twice as busy in the second, direct 10 %
    // above the ceiling's CPU and 5 % below its req/s in both.
    let good = runs_file(
        &dir,
        "good.csv",
        &[
            "direct,ascii,64,1,95000,1.1,1.0,500,0",
            "ceiling,ascii,64,1,100000,1.0,1.0,500,0",
            "direct,ascii,64,2,47500,2.2,2.0,900,0",
            "ceiling,ascii,64,2,50000,2.0,2.0,900,0",
        ],
    );
    let (code, stdout, stderr) = run("end-string", &["--from-runs", &good]);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    let paired_cpu = stdout
        .split("CPU µs/req: old → new (− is less CPU), paired by round")
        .nth(1)
        .unwrap_or_else(|| panic!("no paired CPU table: {stdout}"));
    let row = paired_cpu
        .lines()
        .find(|l| l.contains("end-string ceiling → direct kind=ascii len=64"))
        .unwrap_or_else(|| panic!("no ceiling → direct row: {paired_cpu}"));
    // The same ratio in both rounds: exactly +10 %, with no spread.
    assert!(row.contains("10.00 %"), "{row}");
    assert!(stdout.contains("req/s (mean ± sd)"), "{stdout}");
    // Welch's table leaves the ceiling to its column.
    let welch = stdout.split("paired by round").next().unwrap();
    assert!(!welch.contains("ceiling → direct"), "{welch}");

    for (rows, names) in [
        (
            &["direct,ascii,64,one,1,1,1,1,0"][..],
            &["line 2", "run", "`one`"][..],
        ),
        (
            &["direct,ascii,64,1,1,1,1,1"],
            &["line 2", "8 fields, not 9"],
        ),
        (
            &["nginx,ascii,64,1,1,1,1,1,0"],
            &["line 2", "unknown variant `nginx`"],
        ),
        (&["direct,ascii,64,0,1,1,1,1,0"], &["line 2", "run 0"]),
        (
            &["direct,ascii,64,1,1,-1,1,1,0"],
            &["line 2", "server_cpu_us_per_req", "`-1`"],
        ),
        (
            &["direct,ascii,64,1,NaN,1,1,1,0"],
            &["line 2", "req_per_s", "`NaN`"],
        ),
        (&[], &["no runs"]),
    ] {
        let broken = runs_file(&dir, "broken.csv", rows);
        refused("end-string", &["--from-runs", &broken], names);
    }
    // Today's layout: the TCP fast path and the wake IPIs after errors,
    // each a figure or NaN.
    let newest = dir.join("newest.csv");
    std::fs::write(
        &newest,
        "variant,kind,len,run,req_per_s,server_cpu_us_per_req,wrk_cpu_us_per_req,p99_us,errors,\
         tcp_fast_path_per_req,server_wake_ipis_per_req\n\
         direct,ascii,64,1,1,1,1,1,0,NaN,-0.5\n",
    )
    .unwrap();
    refused(
        "end-string",
        &["--from-runs", newest.to_str().unwrap()],
        &["line 2", "server_wake_ipis_per_req", "`-0.5`"],
    );
    let headless = dir.join("headless.csv");
    std::fs::write(&headless, "direct,ascii,64,1,1,1,1,1,0\n").unwrap();
    refused(
        "end-string",
        &["--from-runs", headless.to_str().unwrap()],
        &["line 1", "header"],
    );
    refused(
        "end-string",
        &["--from-runs", dir.join("absent.csv").to_str().unwrap()],
        &["absent.csv"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)"]
fn end_string_takes_several_runs_files_as_one_set_and_each_as_one_measurement() {
    let dir = scratch_dir("from-runs-pooled");
    // Two runs hours apart, two rounds each, numbered 1 and 2 in both:
    // direct 10 % above the ceiling's CPU in the first, 20 % in the
    // second, where the machine is twice as busy. Rounds paired by their
    // numbers across the files (the second's ceiling with the first's
    // direct, 0.55) would not give the +14.89 % below.
    let first = runs_file(
        &dir,
        "first-runs.csv",
        &[
            "direct,ascii,64,1,95000,1.1,1.0,500,0",
            "ceiling,ascii,64,1,100000,1.0,1.0,500,0",
            "direct,ascii,64,2,95000,1.1,1.0,500,0",
            "ceiling,ascii,64,2,100000,1.0,1.0,500,0",
        ],
    );
    let second = runs_file(
        &dir,
        "second-runs.csv",
        &[
            "direct,ascii,64,1,45000,2.4,2.0,900,0",
            "ceiling,ascii,64,1,50000,2.0,2.0,900,0",
            "direct,ascii,64,2,45000,2.4,2.0,900,0",
            "ceiling,ascii,64,2,50000,2.0,2.0,900,0",
        ],
    );
    // A third run, of another length only.
    let third = runs_file(
        &dir,
        "third-runs.csv",
        &[
            "direct,ascii,128,1,95000,1.05,1.0,500,0",
            "ceiling,ascii,128,1,100000,1.0,1.0,500,0",
        ],
    );
    let (code, stdout, stderr) = run(
        "end-string",
        &["--from-runs", &format!("{first},{second},{third}")],
    );
    assert_eq!(code, Some(0), "stderr: {stderr}");
    let row = |table: &str| -> String {
        let part = stdout
            .split(table)
            .nth(1)
            .unwrap_or_else(|| panic!("no table `{table}`: {stdout}"));
        part.lines()
            .find(|l| l.contains("end-string ceiling → direct kind=ascii len=64"))
            .unwrap_or_else(|| panic!("no ceiling → direct row after `{table}`: {part}"))
            .to_string()
    };
    // The four rounds in one set, each paired within its own file: the
    // mean log ratio of 1.1, 1.1, 1.2, 1.2 is that of √1.32, +14.89 %.
    let pooled = row("CPU µs/req: old → new (− is less CPU), paired by round");
    assert!(pooled.contains("14.89 %"), "{pooled}");
    // Each file one measurement: +10 % and +20 %, their mean the same;
    // the third file has no rounds at this length.
    let between = row("CPU µs/req: old → new (− is less CPU), between runs files");
    assert!(between.contains("+10.00 +20.00 –"), "{between}");
    assert!(between.contains("14.89 %"), "{between}");
    assert!(stdout.contains("first-pooled.svg"), "{stdout}");
    // One file: no table between files.
    let (code, stdout, _) = run("end-string", &["--from-runs", &first]);
    assert_eq!(code, Some(0));
    assert!(!stdout.contains("between runs files"), "{stdout}");
    // An empty name in the list is refused before any file is read.
    refused(
        "end-string",
        &["--from-runs", &format!("{first},")],
        &["--from-runs", "a value is required"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)"]
fn end_string_compares_hyper_stock_with_direct_and_with_hyper() {
    let dir = scratch_dir("stock-runs");
    let runs = runs_file(
        &dir,
        "stock-runs.csv",
        &[
            "direct,ascii,64,1,95000,1.1,1.0,500,0",
            "hyper,ascii,64,1,90000,1.2,1.0,500,0",
            "hyper-stock,ascii,64,1,92000,1.15,1.0,500,0",
            "direct,ascii,64,2,96000,1.1,1.0,500,0",
            "hyper,ascii,64,2,91000,1.2,1.0,500,0",
            "hyper-stock,ascii,64,2,93000,1.16,1.0,500,0",
        ],
    );
    let (code, stdout, stderr) = run("end-string", &["--from-runs", &runs]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("ascii") && l.contains(" hyper-stock ")),
        "no summary row for hyper-stock: {stdout}"
    );
    for pair in [
        "hyper-stock → direct",
        "hyper → hyper-stock",
        "hyper → direct",
    ] {
        let label = format!("end-string {pair} kind=ascii len=64");
        // Welch's table and the paired one, for req/s and for CPU.
        let rows = stdout.lines().filter(|l| l.contains(&label)).count();
        assert_eq!(rows, 4, "{label}: {stdout}");
    }
}

#[test]
#[ignore = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)"]
fn the_other_harnesses_refuse_bad_options_with_one_line_and_status_2() {
    for (harness, args, names) in [
        ("large-write", &["--size-mib", "0"][..], &["--size-mib"][..]),
        (
            "large-write",
            &["--size-mib", "4096"],
            &["--size-mib", "4096"],
        ),
        ("large-write", &["--runs", "many"], &["--runs", "many"]),
        ("large-write", &["--nonsense"], &["--nonsense"]),
        ("write-patterns", &["--runs", "0"], &["--runs"]),
        ("write-patterns", &["--runs", "-3"], &["--runs", "-3"]),
        ("copies", &["--requests", "0"], &["--requests"]),
        ("copies", &["--requests", "1e3"], &["--requests", "1e3"]),
        (
            "tls-providers",
            &["--providers", "rsa"],
            &["--providers", "rsa", "aws-lc-rs"],
        ),
        ("tls-providers", &["--handshakes", "0"], &["--handshakes"]),
        ("tls-providers", &["--bulk-mib", "65537"], &["--bulk-mib"]),
        ("tls-providers", &["--rounds", "0"], &["--rounds"]),
        ("tls-providers", &["--quick"], &["--quick"]),
        ("probe-latency", &["--seconds", "0"], &["--seconds"]),
        ("probe-latency", &["--len", "99999999"], &["--len"]),
        ("probe-latency", &["--attackers", "x"], &["--attackers"]),
    ] {
        refused(harness, args, names);
    }
}

/// The options `--help` lists, each with the text that describes it: the
/// rest of its line, or the lines below it up to the next option.
fn described_options(help: &str) -> Vec<(String, String)> {
    let mut options: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        // An option's line is indented as clap lists options (2 to 6
        // spaces); a description wrapped onto a line that happens to begin
        // with a flag is indented further.
        let indent = line.len() - trimmed.len();
        let listed = trimmed.starts_with('-') && indent <= 6;
        if let Some(at) = trimmed.find("--").filter(|_| listed) {
            let name = trimmed[at..]
                .split(|c: char| c.is_whitespace() || c == ',')
                .next()
                .unwrap_or("");
            let rest = trimmed[at + name.len()..].trim_start();
            // `--flag <VALUE>  text`: skip the value's name.
            let rest = match rest.strip_prefix('<') {
                Some(r) => r.split_once('>').map_or("", |(_, t)| t),
                None => rest,
            };
            options.push((name.to_string(), rest.trim().to_string()));
        } else if let Some((_, text)) = options.last_mut() {
            if !trimmed.is_empty() {
                text.push(' ');
                text.push_str(trimmed);
            }
        }
    }
    options
}

#[test]
#[ignore = "needs UNFLAT_HARNESSES, a directory of the bench executables (.ci/run)"]
fn help_describes_every_option_and_bench_is_accepted() {
    for harness in HARNESSES {
        // `--bench` first, as if cargo bench had put it anywhere: accepted.
        let (code, stdout, stderr) = run(harness, &["--bench", "--help"]);
        assert_eq!(code, Some(0), "{harness} --bench --help: {stderr}");
        assert!(
            stdout.contains(&format!("cargo bench --bench {harness} --")),
            "{harness}: usage line: {stdout}"
        );
        let options = described_options(&stdout);
        assert!(
            options.iter().any(|(name, _)| name == "--bench"),
            "{harness}: --bench not listed: {stdout}"
        );
        // Options of its own besides --bench and --help.
        assert!(options.len() > 2, "{harness}: {stdout}");
        for (name, text) in &options {
            assert!(
                text.chars().filter(|c| c.is_alphabetic()).count() >= 4,
                "{harness}: {name} has no description: {stdout}"
            );
        }
    }
    // The options .ci/run passes are still there.
    let (_, help, _) = run("end-string", &["--help"]);
    let named: Vec<String> = described_options(&help).into_iter().map(|o| o.0).collect();
    for ci in [
        "--quick",
        "--syscalls",
        "--syscall-requests",
        "--pipeline",
        "--tls",
        "--from-runs",
    ] {
        assert!(named.iter().any(|n| n == ci), "end-string: {ci} gone");
    }
}
