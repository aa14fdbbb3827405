use std::any::TypeId;
use std::net::SocketAddr;

use super::*;

fn parse(args: &[&str]) -> Result<Config, String> {
    let mut argv = vec!["unflat-server"];
    argv.extend_from_slice(args);
    let config = Config::from_args(argv).map_err(|e| e.to_string())?;
    config.validate()?;
    Ok(config)
}

#[test]
fn durations_take_units_or_seconds() {
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
    for bad in ["1e30", "inf", "NaN", "-1", "5 parsecs", ""] {
        assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn values_that_cannot_work_are_refused_with_the_option_named() {
    for (args, names) in [
        (&["--send-timeout", "1e30"][..], "1e30"),
        (&["--head-timeout", "0"], "--head-timeout"),
        (&["--idle-timeout", "300ms"], "--idle-timeout"),
        (&["--handshake-timeout", "1ms"], "--handshake-timeout"),
        (&["--head-timeout", "1ns"], "--head-timeout"),
        (&["--send-timeout", "999ms"], "--send-timeout"),
        (&["--body-timeout", "25h"], "1s to 24h"),
        (&["--max-queued-responses", "0"], "max-queued-responses"),
        (&["--max-connections", "0"], "max-connections"),
        (&["--workers", "0"], "workers"),
        (&["--max-fields", "1000"], "max-fields"),
        (&["--max-requests", "0"], "max-requests"),
        (&["--max-head", "10"], "max-head"),
        (&["--frame", "2"], "--frame"),
        (
            &["--connection-memory", "3GiB", "--memory-limit", "2GiB"],
            "--connection-memory",
        ),
        (&["--grace", "2d"], "0s to 24h"),
        (&["--server-header", ""], "--server-header"),
        (&["--server-header", "a\r\nX-Evil: 1"], "byte 0x0D at 1"),
        (&["--server-header", "caf\u{e9}\u{2615}"], "U+2615 at 4"),
    ] {
        let err = parse(args).expect_err(&format!("{args:?} accepted"));
        assert!(err.contains(names), "{args:?}: {err}");
    }
    assert!(parse(&["--send-timeout", "2m", "--grace", "0", "--workers", "3"]).is_ok());
    let config = parse(&["--server-header", "unflat/0.1 (caf\u{e9})"]).unwrap();
    assert_eq!(
        config.server_line().unwrap().unwrap().as_bytes(),
        b"Server: unflat/0.1 (caf\xe9)\r\n"
    );
}

#[test]
fn a_config_built_in_code_is_checked_by_the_same_ranges() {
    let bad = Config {
        head_timeout: Duration::from_millis(10),
        ..Config::default()
    };
    assert_eq!(
        bad.validate().unwrap_err(),
        "--head-timeout 10ms: must be 1s to 24h"
    );
    let bad = Config {
        max_fields: 300,
        ..Config::default()
    };
    assert_eq!(
        bad.validate().unwrap_err(),
        "--max-fields 300: must be 1 to 256"
    );
    let bad = Config {
        server_header: Some(format!("{} ", "x".repeat(10))),
        ..Config::default()
    };
    assert_eq!(
        bad.validate().unwrap_err(),
        "--server-header \"xxxxxxxxxx \": invalid header value: byte 0x20 at 10 is not allowed"
    );
    let bad = Config {
        server_header: Some("x".repeat(MAX_SERVER_HEADER + 1)),
        ..Config::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .contains("129 characters, more than 128"));
}

#[test]
fn every_ranged_option_states_its_range_and_its_variable() {
    let cmd = Config::command();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "help" || id == "version" {
            continue;
        }
        // Every number, size and duration has a range.
        let parsed = arg.get_value_parser().type_id();
        let ranged_type = [
            TypeId::of::<u16>(),
            TypeId::of::<u64>(),
            TypeId::of::<usize>(),
            TypeId::of::<Duration>(),
        ]
        .iter()
        .any(|t| parsed == *t);
        let ranged = RANGED.iter().find(|r| r.id == id);
        assert_eq!(ranged_type, ranged.is_some(), "--{id}");
        // `--help`'s text; `-h` shows its first sentence.
        let help = arg.get_long_help().unwrap().to_string();
        let short = arg.get_help().unwrap().to_string();
        assert!(
            help.starts_with(&short),
            "-h {short:?} begins --help {help:?}"
        );
        if let Some(r) = ranged {
            assert!(
                help.ends_with(&format!("Accepts {}.", r.range.describe())),
                "{help}"
            );
        }
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        assert_eq!(env, Some(format!("UNFLAT_{}", id.to_uppercase())));
    }
    let d = Config::default();
    for r in RANGED {
        if let Some(v) = (r.value)(&d) {
            r.range.check(v).unwrap();
        }
    }
}

#[test]
fn ranges_are_stated_in_their_units() {
    assert_eq!(Bounds::bytes(64, MIB).describe(), "64 bytes to 1 MiB");
    assert_eq!(Bounds::bytes(0, 64 * GIB).describe(), "0 bytes to 64 GiB");
    assert_eq!(Bounds::count(1, u64::MAX).describe(), "at least 1");
    assert_eq!(
        Bounds::duration(MIN_TIMEOUT, MAX_DURATION).describe(),
        "1s to 24h"
    );
    assert_eq!(
        Bounds::duration(Duration::ZERO, Duration::from_millis(1500)).describe(),
        "0s to 1500ms"
    );
    assert_eq!(Bounds::bytes(0, TIB).show(3 * 1024), "3 KiB");
}

#[test]
fn the_defaults_are_those_documented_and_valid() {
    // docs/robustness.md, "Limits and timeouts".
    let d = Config::default();
    assert_eq!(d.addr, "127.0.0.1:3000".parse().unwrap());
    assert_eq!(
        (d.max_head, d.max_fields, d.max_body),
        (16 << 10, 100, 1 << 20)
    );
    assert_eq!(
        (d.head_timeout, d.body_timeout),
        (Duration::from_secs(10), Duration::from_secs(30))
    );
    assert_eq!((d.body_min_rate, d.connection_memory()), (500, 512 << 20));
    assert_eq!(d.memory_limit, 1 << 30);
    assert_eq!((d.max_connections, d.max_requests), (10_000, None));
    assert_eq!(
        (d.copy_below, d.frame),
        (Policy::DEFAULT.copy_below, Policy::DEFAULT.frame)
    );
    d.validate().unwrap();
}

#[test]
fn an_address_takes_a_port_alone_or_a_host_name() {
    let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
    assert_eq!(parse_addr("127.0.0.1:3000"), Ok(local(3000)));
    assert_eq!(parse_addr(":3000"), Ok(local(3000)));
    assert_eq!(parse_addr("3000"), Ok(local(3000)));
    assert_eq!(parse_addr("0.0.0.0:80"), Ok(SocketAddr::from(([0; 4], 80))));
    assert_eq!(parse_addr("[::1]:8080"), Ok("[::1]:8080".parse().unwrap()));
    assert_eq!(parse_addr("localhost:3000"), Ok(local(3000)));
    for (bad, says) in [
        ("70000", "not 0 to 65535"),
        (":", "is not HOST:PORT"),
        ("localhost", "is not HOST:PORT"),
        ("localhost:http", "port of 0 to 65535"),
        ("host.invalid:3000", "cannot resolve \"host.invalid\""),
    ] {
        let e = parse_addr(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn short_help_is_the_first_sentence() {
    assert_eq!(
        declare::first_sentence("Most fields. More: 431."),
        "Most fields"
    );
    assert_eq!(
        declare::first_sentence("Worker threads (e.g. 4)"),
        "Worker threads (e.g. 4)"
    );
}

#[test]
#[cfg(feature = "tls-ring")]
fn the_tls_provider_is_aws_lc_rs_or_ring_and_anything_else_is_refused_by_name() {
    assert_eq!(Config::default().tls_provider, tls::Provider::AwsLcRs);
    for (value, provider) in [
        ("aws-lc-rs", tls::Provider::AwsLcRs),
        ("ring", tls::Provider::Ring),
    ] {
        let config = parse(&["--tls-provider", value, "--tls-self-signed"]).unwrap();
        assert_eq!(config.tls_provider, provider, "{value}");
        assert_eq!(config.tls(), Some(tls::CertSource::SelfSigned));
    }
    for bad in ["openssl", "Ring", "aws_lc_rs", "aws-lc", ""] {
        let err = parse(&["--tls-provider", bad]).expect_err(bad);
        assert!(err.contains("--tls-provider"), "{bad:?}: {err}");
        assert!(
            err.contains("aws-lc-rs") && err.contains("ring"),
            "{bad:?}: {err}"
        );
    }
}

/// `Config::default()`, made from the declarations without clap, is what
/// an empty command line gives.
#[test]
fn the_default_is_the_empty_command_line() {
    let cmd = Config::command().mut_args(|a| a.env(None::<&str>));
    let matches = cmd.try_get_matches_from(["unflat-server"]).unwrap();
    let parsed = <Config as clap::FromArgMatches>::from_arg_matches(&matches).unwrap();
    assert_eq!(format!("{parsed:?}"), format!("{:?}", Config::default()));
}
