//! The command line: options, logging, the banner, signals.

use std::net::SocketAddr;

use clap::Parser;
use tracing::info;

use crate::config::{Config, Strategy};
use crate::routes::ROUTES;
use crate::server::Server;

/// The text of `GET /` and of the start-up banner.
pub fn help_text(addr: SocketAddr, strategy: Strategy) -> String {
    format!(
        "unflat-server ({strategy} strategy) at http://{addr}\n\n\
         Routes:\n{ROUTES}\n\
         Benchmark it:\n  wrk -s wrk_scripts/end-string.lua http://{addr} -- 1024\n",
        strategy = strategy.name()
    )
}

/// Runs the server from the command line until Ctrl-C or SIGTERM.
pub fn main() -> std::io::Result<()> {
    let config = Config::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads())
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let workers = config.worker_threads();
        let server = Server::bind(config).await?;
        let addr = server.local_addr()?;
        println!("{}", help_text(addr, server.app().config.strategy));
        info!(%addr, workers, "listening");
        server.run(stop_signal()).await?;
        info!("stopped");
        Ok(())
    })
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
