//! The command line: options, logging, the banner, signals. The banner
//! goes to stdout (harnesses wait for its `http://` address); logs go to
//! stderr through [`crate::log`].

use std::io::Write as _;

use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};

use crate::config::Config;
use crate::server::{Control, Server};
use crate::{events, log};

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
    events::install(&config);
    if let Some(note) = config.cache_clamped() {
        warn!("{note}");
    }
    let workers = config.worker_threads();
    let tls = config.tls().map(|_| config.tls_provider);
    let server = match Server::bind(config) {
        Ok(server) => server,
        Err(e) => {
            // The one line a user needs, after any logged before it.
            log::flush(log::AT_EXIT);
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
    // The server said it stopped, and waited for its lines.
    ran
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
