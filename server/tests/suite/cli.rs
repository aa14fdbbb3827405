//! The server binary's command line: every value is checked at start-up
//! (a clear one-line error and exit status 2, never a panic later), every
//! flag can come from an `UNFLAT_*` environment variable, the banner goes to
//! stdout and logs to stderr.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn server() -> Command {
    let mut cmd = Command::new(crate::common::server_binary());
    // A clean environment for the variables under test.
    for (k, _) in std::env::vars() {
        if k.starts_with("UNFLAT_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// Runs the binary with `args` and the `env` variables; it must exit within
/// 10 s. Returns (status code, stdout, stderr).
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = server();
    cmd.args(args).envs(env.iter().copied());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let begun = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if begun.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("{args:?} {env:?}: still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    (
        status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn values_that_cannot_work_exit_2_with_one_line_naming_the_option() {
    for (args, env, names) in [
        (&["--send-timeout", "1e30"][..], &[][..], "1e30"),
        (
            &["--max-queued-responses", "0"],
            &[],
            "--max-queued-responses",
        ),
        (&["--head-timeout", "0"], &[], "--head-timeout"),
        (&["--body-timeout", "-5"], &[], "-5"),
        (&["--idle-timeout", "NaN"], &[], "NaN"),
        (&["--grace", "3 fortnights"], &[], "fortnights"),
        (&["--workers", "0"], &[], "--workers"),
        (&["--max-connections", "0"], &[], "--max-connections"),
        (&[], &[("UNFLAT_SEND_TIMEOUT", "inf")], "inf"),
        (&[], &[("UNFLAT_MAX_FIELDS", "9999")], "--max-fields"),
        // Past tokio's semaphore maximum, which used to panic after
        // "listening".
        (
            &["--max-connections", "2305843009213693952"],
            &[],
            "--max-connections",
        ),
        (&["--max-queued-responses", "65537"], &[], "1 to 65536"),
        (&["--max-head", "10"], &[], "64 bytes to 1 MiB"),
        (&["--frame", "2"], &[], "--frame"),
        (&["--body-min-rate", "x"], &[], "not a whole number"),
        // Every timeout has a floor of 1 s: below it a server listens but
        // cannot serve.
        (&["--handshake-timeout", "1ms"], &[], "must be 1s to 24h"),
        (&["--head-timeout", "1ns"], &[], "must be 1s to 24h"),
        (&["--send-timeout", "1ns"], &[], "must be 1s to 24h"),
        (&[], &[("UNFLAT_BODY_TIMEOUT", "0.5")], "must be 1s to 24h"),
        (&["--idle-timeout", "999ms"], &[], "must be 1s to 24h"),
        (&["--grace", "25h"], &[], "must be 0s to 24h"),
        // Parts of the memory limit cannot be larger than it.
        (
            &["--connection-memory", "2GiB"],
            &[],
            "--connection-memory 2147483648 is more than --memory-limit",
        ),
        (&["--memory-limit", "1KiB"], &[], "1 MiB to 1 TiB"),
        // One of rustls's two providers, by its name.
        (&["--tls-provider", "openssl"], &[], "--tls-provider"),
        (
            &[],
            &[("UNFLAT_TLS_PROVIDER", "boringssl")],
            "UNFLAT_TLS_PROVIDER=boringssl",
        ),
    ] {
        let (code, _, stderr) = run(args, env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?} {env:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?} {env:?}: {stderr}");
    }
}

#[test]
fn a_busy_address_is_one_line_naming_it_and_exit_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, _, stderr) = run(&["--addr", &addr], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    let want = format!("error: cannot listen on {addr}: ");
    assert!(stderr.starts_with(&want), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn a_tls_certificate_or_key_that_cannot_be_used_is_one_line_naming_the_file_and_exit_2() {
    let dir = std::env::temp_dir().join(format!("unflat-cli-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let one = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(path("cert.pem"), one.cert.pem()).unwrap();
    std::fs::write(path("other-key.pem"), other.signing_key.serialize_pem()).unwrap();
    std::fs::write(path("empty.pem"), "not PEM at all\n").unwrap();
    std::fs::write(path("huge.pem"), vec![b'#'; (1 << 20) + 1]).unwrap();
    let made = Command::new("mkfifo")
        .arg(path("fifo.pem"))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    let fixture = |name: &str| format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let (cert, other_key, empty, missing) = (
        path("cert.pem"),
        path("other-key.pem"),
        path("empty.pem"),
        path("missing.pem"),
    );
    let (fifo, huge, dir_path) = (path("fifo.pem"), path("huge.pem"), path(""));
    let dir_path = dir_path.trim_end_matches('/').to_string();
    let (rsa_1024, secp256k1) = (fixture("rsa-1024-key.pem"), fixture("secp256k1-key.pem"));
    for (args, names) in [
        (
            vec!["--tls-cert", &missing, "--tls-key", &other_key],
            format!("--tls-cert {missing}: No such file"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &missing],
            format!("--tls-key {missing}: No such file"),
        ),
        (
            vec!["--tls-cert", &empty, "--tls-key", &other_key],
            format!("--tls-cert {empty}: no PEM certificate"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &empty],
            format!("--tls-key {empty}: no PEM private key"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &other_key],
            format!("--tls-cert {cert} and --tls-key {other_key}: "),
        ),
        (vec!["--tls-cert", &cert], "--tls-key".to_string()),
        (
            vec![
                "--tls-cert",
                &cert,
                "--tls-key",
                &other_key,
                "--tls-self-signed",
            ],
            "--tls-self-signed".to_string(),
        ),
        (
            vec!["--handshake-timeout", "0"],
            "--handshake-timeout".to_string(),
        ),
        // Regular files only, of 1 MiB at most, never read when they are
        // not: a device used to be read until a 1 GiB allocation aborted,
        // and a FIFO to hang the start-up.
        (
            vec!["--tls-cert", "/dev/zero", "--tls-key", &other_key],
            "--tls-cert /dev/zero: not a regular file (a character device)".to_string(),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &fifo],
            format!("--tls-key {fifo}: not a regular file (a FIFO)"),
        ),
        (
            vec!["--tls-cert", &dir_path, "--tls-key", &other_key],
            format!("--tls-cert {dir_path}: not a regular file (a directory)"),
        ),
        (
            vec!["--tls-cert", &huge, "--tls-key", &other_key],
            format!("--tls-cert {huge}: 1048577 bytes; a PEM file of more than 1 MiB is refused"),
        ),
        // A key of a type or size rustls does not take, named as such.
        (
            vec!["--tls-cert", &cert, "--tls-key", &rsa_1024],
            format!("--tls-key {rsa_1024}: an RSA key of 1024 bits, a size not supported"),
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &secp256k1],
            format!("--tls-key {secp256k1}: an ECDSA key on secp256k1, a curve not supported"),
        ),
    ] {
        let mut args = args;
        args.extend(["--addr", "127.0.0.1:0"]);
        let (code, stdout, stderr) = run(&args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(&names), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: listened: {stdout}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A chain whose Certificate message is longer than OpenSSL's clients take
/// (102 400 bytes; every handshake would fail) is refused before the server
/// listens, naming the limit and its size; the longest they take starts.
#[test]
fn a_certificate_chain_longer_than_openssl_clients_take_is_one_line_and_exit_2() {
    use crate::common::tls::{certificate_message, most_copies_taken, Cert};
    let over = Cert::new("cli-chain-over");
    let copies = most_copies_taken(over.der.len()) + 1;
    over.repeat(copies);
    let size = certificate_message(over.der.len(), copies);
    assert!(size > 102_400, "{size}");
    let args = over.args();
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    args.extend(["--addr", "127.0.0.1:0"]);
    let (code, stdout, stderr) = run(&args, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: --tls-cert {}: ", args[1])),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("a chain of {copies} certificates makes a Certificate message of {size} bytes, over the 102400")),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stdout.is_empty(), "listened: {stdout}");

    let taken = Cert::new("cli-chain-taken");
    taken.repeat(most_copies_taken(taken.der.len()));
    let args = taken.args();
    let (mut child, _addr) =
        crate::common::spawn_server(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn version_and_help() {
    let (code, stdout, _) = run(&["--version"], &[]);
    assert_eq!(code, Some(0));
    assert!(stdout.starts_with("unflat-server "), "{stdout}");
    let (code, stdout, _) = run(&["--help"], &[]);
    assert_eq!(code, Some(0));
    for flag in [
        "--frame",
        "--copy-below",
        "UNFLAT_ADDR",
        "UNFLAT_SEND_TIMEOUT",
    ] {
        assert!(stdout.contains(flag), "--help lacks {flag}:\n{stdout}");
    }
}

#[test]
fn flags_come_from_the_environment_and_logs_go_to_stderr() {
    let mut child = server()
        .env("UNFLAT_ADDR", "127.0.0.1:0")
        .env("UNFLAT_WORKERS", "1")
        .env("UNFLAT_STRATEGY", "flatten")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut banner = String::new();
    stdout.read_line(&mut banner).unwrap();
    // The log line follows the banner, on the other stream.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    while !log.contains("listening") {
        if stderr.read_line(&mut log).unwrap() == 0 {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        banner.contains("(flatten strategy) at http://127.0.0.1:"),
        "{banner}"
    );
    assert!(
        log.contains("listening"),
        "the log line is on stderr: {log}"
    );
    assert!(!banner.contains("listening"));
}

#[test]
fn sizes_take_units_and_invalid_sizes_exit_2_with_one_line() {
    for (args, names) in [
        (&["--max-body", "1.5.5MiB"][..], "\"1.5.5MiB\""),
        (&["--max-body=-1KiB"], "--max-body"),
        (&["--max-body", "1e3KiB"], "not a whole number"),
        (&["--max-body", "12 parsecs"], "64KiB, 1MiB, 2GiB"),
        (&["--max-body", "2GiB"], "0 bytes to 1 GiB"),
        (&["--frame", "1B"], "--frame"),
        (&["--max-queued-total", "1KiB"], "1 MiB to 1 TiB"),
    ] {
        let mut args = args.to_vec();
        args.extend(["--addr", "127.0.0.1:0"]);
        let (code, stdout, stderr) = run(&args, &[]);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: listened: {stdout}");
    }
    // The same values from the environment.
    let (code, _, stderr) = run(&["--addr", "127.0.0.1:0"], &[("UNFLAT_MAX_BODY", "x1KiB")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--max-body"), "{stderr}");
}

#[test]
fn help_shows_size_defaults_with_units_and_the_logging_options() {
    let (code, stdout, _) = run(&["--help"], &[]);
    assert_eq!(code, Some(0));
    for shown in [
        "[default: 1GiB]",
        "[default: 1MiB]",
        "[default: 16KiB]",
        "[default: 64KiB]",
        "--log-level <LOG_LEVEL>",
        "[env: UNFLAT_LOG_LEVEL=]",
        "RUST_LOG",
        "--access-log",
        "[env: UNFLAT_ACCESS_LOG=]",
        "--reuse-port",
    ] {
        assert!(stdout.contains(shown), "--help lacks {shown}:\n{stdout}");
    }
    // No byte count without a unit as a default.
    assert!(!stdout.contains("[default: 1048576]"), "{stdout}");
}

#[test]
fn sizes_with_units_start_the_server() {
    let mut child = server()
        .args(["--addr", "127.0.0.1:0", "--workers", "1"])
        .args([
            "--max-body",
            "64KiB",
            "--cache-bytes",
            "1 GiB",
            "--frame",
            "16384",
        ])
        .args(["--max-large", "1MB", "--memory-limit", "1.5GiB"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(banner.contains("http://127.0.0.1:"), "{banner}");
}

#[test]
fn booleans_from_the_environment_take_what_users_type_and_errors_name_the_variable() {
    for yes in ["1", "true", "yes", "on", "TRUE"] {
        let (code, stdout, stderr) = run(
            &["--addr", "127.0.0.1:70000"],
            &[("UNFLAT_ACCESS_LOG", yes)],
        );
        // Parsed (the port is what stops it), not refused as a boolean.
        assert_eq!(code, Some(2), "{yes}: {stderr}");
        assert!(stderr.contains("--addr"), "{yes}: {stderr}");
        assert!(stdout.is_empty());
    }
    let (code, _, stderr) = run(&[], &[("UNFLAT_ACCESS_LOG", "2")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: UNFLAT_ACCESS_LOG=2: "),
        "{stderr}"
    );
    // On the command line, the flag is what is named.
    let (code, _, stderr) = run(&["--max-body", "x"], &[("UNFLAT_MAX_BODY", "y")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("UNFLAT_MAX_BODY"), "{stderr}");
    assert!(stderr.contains("'x'"), "{stderr}");
}

#[test]
fn an_address_may_be_a_port_or_a_host_name() {
    for addr in [":0", "0", "localhost:0"] {
        let mut child = server()
            .args(["--addr", addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut banner = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut banner)
            .unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(banner.contains("http://127.0.0.1:"), "{addr}: {banner}");
    }
}

#[test]
fn help_is_grouped_under_headings_and_h_is_shorter() {
    let (code, long, _) = run(&["--help"], &[]);
    assert_eq!(code, Some(0));
    for heading in [
        "Network:",
        "TLS:",
        "Limits:",
        "Timeouts:",
        "Bodies:",
        "Responses:",
        "Logging:",
    ] {
        assert!(
            long.lines().any(|l| l == heading),
            "--help lacks {heading}:\n{long}"
        );
    }
    // The TLS options under their heading, the provider among them.
    let tls: Vec<&str> = long
        .lines()
        .skip_while(|l| *l != "TLS:")
        .take_while(|l| l.is_empty() || l.starts_with(' ') || *l == "TLS:")
        .collect();
    for flag in ["--tls-cert", "--tls-self-signed", "--tls-provider"] {
        assert!(
            tls.iter().any(|l| l.trim_start().starts_with(flag)),
            "{flag} not under TLS:\n{long}"
        );
    }
    let (code, short, _) = run(&["-h"], &[]);
    assert_eq!(code, Some(0));
    assert!(
        short.lines().count() < long.lines().count() * 3 / 4,
        "-h:\n{short}"
    );
    assert!(
        short.contains("Network:") && !short.contains("Accepts "),
        "-h:\n{short}"
    );
}

/// `--probe URL`, the container's health check: 0 while the server answers
/// 2xx, 1 with the reason for anything else — another status, or no
/// server at all once it has stopped.
#[test]
fn the_probe_fails_once_the_server_has_stopped() {
    let mut server = crate::common::Spawned::start(&[]);
    let url = |path: &str| format!("http://{}{path}", server.addr);
    let (code, _, err) = run(&["--probe", &url("/healthz")], &[]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&["--probe", &url("/nowhere")], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("404"), "{err}");
    let healthz = url("/healthz");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let (code, _, err) = run(&["--probe", &healthz], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("refused"), "{err}");
    let (code, _, err) = run(&["--probe", "https://localhost/"], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("only http://"), "{err}");
}
