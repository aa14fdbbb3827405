//! What a program on the command line needs beyond its options
//! ([`Config::command_with`](crate::config::Config::command_with)): errors
//! as one line and exit status 2, the banner, signals. The banner goes to
//! stdout (harnesses wait for its `http://` address); logs go to stderr
//! through [`crate::log`].

use std::io::Write as _;

use crate::config::EventFormat;
use crate::log;
use crate::server::Server;
use crate::service::Service;

/// clap's error as the one line a user needs: its first paragraph joined,
/// without the usage hint (the benchmark harnesses print theirs the same way).
pub fn error_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let line: Vec<&str> = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    line.join(" ")
}

/// What the command line gave, or the process's end: a value that cannot
/// work is one line on stderr and exit status 2 before anything starts;
/// `--help` and `--version` print and exit 0.
pub fn parsed<T>(parsed: Result<T, clap::Error>) -> T {
    match parsed {
        Ok(parsed) => parsed,
        Err(e) if e.use_stderr() => {
            eprintln!("{}", error_line(&e));
            std::process::exit(2);
        }
        // --help and --version.
        Err(e) => e.exit(),
    }
}

/// The bound server, or the process's end: a configuration, a certificate
/// or an address that cannot be used is one line on stderr, after any
/// logged before it, and exit status 2.
pub fn bound<S: Service>(bound: std::io::Result<Server<S>>) -> Server<S> {
    bound.unwrap_or_else(|e| {
        log::flush(log::AT_EXIT);
        eprintln!("error: {e}");
        std::process::exit(2);
    })
}

/// Runs `server` until SIGINT or SIGTERM (SIGHUP reloads its certificate),
/// `banner` on stdout once its signal handlers are in place — or, under
/// `--log-format json`, as a log record on stderr, so that every line the
/// server writes is JSON and nothing unstructured reaches stdout.
pub fn run<S: Service>(server: Server<S>, banner: String) -> std::io::Result<()> {
    let json = server.stack().config().log_format == EventFormat::Json;
    server.run_on_signals(move || {
        if json {
            tracing::info!(banner = %banner.trim_end(), "banner");
            return;
        }
        // Best effort: a closed stdout (`unflat-server | head -1`) must not
        // stop the server.
        let _ = writeln!(std::io::stdout(), "{banner}");
    })
}

/// Asks `url` (`http://host[:port]/path`) once, within `within`, and gives
/// its answer's status: a health check that needs no tool but the binary
/// (a container's `HEALTHCHECK`, a probe of Kubernetes' `exec` kind). An
/// `Err` says what failed: the URL, the connection, or an answer that is
/// not HTTP.
pub fn probe(url: &str, within: std::time::Duration) -> Result<u16, String> {
    use std::io::Read as _;
    use std::net::ToSocketAddrs as _;
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url:?}: only http:// URLs are probed"))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("{authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    let mut s =
        std::net::TcpStream::connect_timeout(&addr, within).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(within))
        .and_then(|()| s.set_write_timeout(Some(within)))
        .map_err(|e| format!("{addr}: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nUser-Agent: unflat-probe\r\n\r\n"
    );
    s.write_all(request.as_bytes())
        .map_err(|e| format!("{addr}: {e}"))?;
    // The status line is all it reads: 12 bytes, `HTTP/1.1 200`.
    let mut line = [0u8; 12];
    s.read_exact(&mut line)
        .map_err(|e| format!("{addr}: no answer: {e}"))?;
    let status = std::str::from_utf8(&line)
        .ok()
        .filter(|l| l.starts_with("HTTP/1.") && l.as_bytes()[8] == b' ')
        .and_then(|l| l[9..12].parse().ok())
        .ok_or_else(|| {
            format!(
                "{addr}: not an HTTP answer: {:?}",
                String::from_utf8_lossy(&line)
            )
        })?;
    Ok(status)
}
