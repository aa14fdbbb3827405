//! The command line: options, logging, the banner, signals.
//!
//! The banner goes to stdout (harnesses wait for its `http://` address);
//! logs go to stderr.

use std::io::Write as _;

use tracing::info;

use crate::config::Config;
use crate::server::Server;

/// Runs the server from the command line until Ctrl-C or SIGTERM. A
/// configuration that cannot work exits with status 2 before anything starts.
pub fn main() -> std::io::Result<()> {
    let config = match Config::from_command_line() {
        Ok(config) => config,
        Err(e) if e.use_stderr() => {
            // One line, `error: invalid value '…' for '--flag …': why`,
            // without clap's usage hint after it (a list clap indents on
            // the lines below, such as missing arguments, joined to it).
            let text = e.to_string();
            let line: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("{}", line.join(" "));
            std::process::exit(2);
        }
        // --help and --version.
        Err(e) => e.exit(),
    };
    if let Err(e) = config.validate() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let workers = config.worker_threads();
    let server = match Server::bind(config) {
        Ok(server) => server,
        Err(e) => {
            // `cannot listen on ADDR: …`, the one line a user needs.
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let addr = server.local_addr();
    // Best effort: a closed stdout (`unflat-server | head -1`) must not
    // stop the server.
    let _ = writeln!(std::io::stdout(), "{}", server.app().help);
    info!(%addr, workers, "listening");
    server.run(stop_signal())?;
    info!("stopped");
    Ok(())
}

/// Completes on Ctrl-C or SIGTERM.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    info!("signal received");
}
