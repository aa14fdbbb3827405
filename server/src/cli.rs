//! The command line: options, logging, the banner, signals. The banner
//! goes to stdout (harnesses wait for its `http://` address); logs go to
//! stderr through [`crate::log`].

use std::ffi::OsString;
use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};
use tracing_subscriber::EnvFilter;

use crate::config::{Config, EventFormat};
use crate::log;
use crate::server::{Control, Server};

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

/// Runs the server from the command line until Ctrl-C or SIGTERM. A
/// configuration that cannot work exits with status 2 before anything starts.
pub fn main() -> std::io::Result<()> {
    let config = match Config::from_command_line() {
        Ok(config) => config,
        Err(e) if e.use_stderr() => {
            eprintln!("{}", error_line(&e));
            std::process::exit(2);
        }
        // --help and --version.
        Err(e) => e.exit(),
    };
    let events = tracing_subscriber::fmt()
        .with_writer(log::Events)
        .with_env_filter(filter(
            &config,
            std::env::var("RUST_LOG")
                .ok()
                .filter(|v| !v.trim().is_empty()),
        ));
    match config.log_format {
        EventFormat::Text => events
            .with_ansi(colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ))
            .init(),
        EventFormat::Json => events.json().flatten_event(true).init(),
    }
    if let Some(note) = config.cache_clamped() {
        warn!("{note}");
    }
    let workers = config.worker_threads();
    let tls = config.tls().map(|_| config.tls_provider);
    let server = match Server::bind(config) {
        Ok(server) => server,
        Err(e) => {
            // The one line a user needs, after any logged before it.
            log::flush(FLUSH);
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let addr = server.local_addr();
    let banner = server.stack().site().help().to_string();
    let ran = server.run_controlled(move |controls| async move {
        // The handlers first: a signal sent as soon as the banner shows
        // must find them (SIGHUP would otherwise end the process).
        let signals = Signals::listen();
        // Best effort: a closed stdout (`unflat-server | head -1`) must not
        // stop the server.
        let _ = writeln!(std::io::stdout(), "{banner}");
        match tls {
            Some(provider) => info!(%addr, workers, tls = provider.name(), "listening"),
            None => info!(%addr, workers, "listening"),
        }
        signals.forward(controls).await;
    });
    if ran.is_ok() {
        info!("stopped");
    }
    log::flush(FLUSH);
    ran
}

/// How long the process waits at exit for its last log lines: a stderr
/// that takes nothing must not keep it from exiting.
const FLUSH: Duration = Duration::from_secs(2);

/// Whether logs are coloured: only on a terminal, and never when `NO_COLOR`
/// is set to anything but the empty string (<https://no-color.org>).
fn colour(terminal: bool, no_color: Option<OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// What is logged: RUST_LOG's directives when set (wrong ones skipped), in
/// place of `--log-level`. Neither filters the access log.
fn filter(config: &Config, rust_log: Option<String>) -> EnvFilter {
    let directives = match rust_log {
        Some(directives) => directives,
        None => config.log_level.directive().to_string(),
    };
    EnvFilter::builder().parse_lossy(directives)
}

/// SIGINT and SIGTERM stop the server (a second one while it drains closes
/// what is left); SIGHUP reloads the TLS certificate and key, as nginx does.
struct Signals {
    #[cfg(unix)]
    streams: [(Option<tokio::signal::unix::Signal>, &'static str, Control); 3],
}

impl Signals {
    /// Installs the handlers (on the runtime of the caller).
    fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen = |kind: SignalKind, name: &'static str, control| {
                let stream = signal(kind)
                    .map_err(|e| warn!("cannot listen for {name}: {e}"))
                    .ok();
                (stream, name, control)
            };
            Signals {
                streams: [
                    listen(SignalKind::interrupt(), "SIGINT", Control::Stop),
                    listen(SignalKind::terminate(), "SIGTERM", Control::Stop),
                    listen(SignalKind::hangup(), "SIGHUP", Control::Reload),
                ],
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Sends what each signal asks to `controls` until the server no longer
    /// listens.
    async fn forward(mut self, controls: UnboundedSender<Control>) {
        loop {
            let (name, control) = self.next().await;
            info!(signal = name, "signal received");
            if controls.send(control).is_err() {
                return;
            }
        }
    }

    /// The next signal: its name and what it asks.
    #[cfg(unix)]
    async fn next(&mut self) -> (&'static str, Control) {
        std::future::poll_fn(|cx| {
            for (stream, name, control) in &mut self.streams {
                if let Some(stream) = stream {
                    if stream.poll_recv(cx).is_ready() {
                        return std::task::Poll::Ready((*name, *control));
                    }
                }
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// The next signal: its name and what it asks.
    #[cfg(not(unix))]
    async fn next(&mut self) -> (&'static str, Control) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        ("Ctrl-C", Control::Stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }

    #[test]
    fn rust_log_replaces_the_level() {
        let config = |args: &[&str]| {
            let mut argv = vec!["unflat-server"];
            argv.extend_from_slice(args);
            Config::from_args(argv).unwrap()
        };
        let shown = |c: &Config, rust_log: Option<&str>| {
            filter(c, rust_log.map(str::to_string)).to_string()
        };
        let warn = config(&["--log-level", "warn"]);
        assert_eq!(shown(&warn, None), "warn");
        assert_eq!(shown(&warn, Some("debug")), "debug");
        let both = shown(&warn, Some("info,unflat_server=trace"));
        assert!(
            both.contains("unflat_server=trace") && !both.contains("warn"),
            "{both}"
        );
    }
}
