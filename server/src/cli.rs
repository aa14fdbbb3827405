//! What a program on the command line needs beyond its options
//! ([`Config::command_with`](crate::config::Config::command_with)): errors
//! as one line and exit status 2, the banner, signals. The banner goes to
//! stdout (harnesses wait for its `http://` address); logs go to stderr
//! through [`crate::log`].

use std::io::Write as _;

use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};

use crate::log;
use crate::server::{Control, Server};
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

/// Runs `server` until Ctrl-C or SIGTERM, `banner` on stdout once its
/// signal handlers are in place.
pub fn run<S: Service>(server: Server<S>, banner: String) -> std::io::Result<()> {
    let config = server.stack().config();
    let workers = config.worker_threads();
    let tls = config.tls().map(|_| config.tls_provider);
    let addr = server.local_addr();
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
