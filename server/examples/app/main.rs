//! A small application on unflat-server's core, using what an application
//! needs: field lines built as ropes (cookies, a `Location`, an `ETag`, a
//! `Content-Disposition`), replies that await timers and read their POST
//! body, a stream whose chunks come on a timer, the request's path, query
//! and fields decoded, its own runtime (`#[tokio::main]`), and the core's
//! counters (`/metrics`) and access log (`--access-log`).
//!
//! ```sh
//! cargo run --release -p unflat-server --example app -- --addr 127.0.0.1:3003
//! curl -i 'http://127.0.0.1:3003/hello/Ad%C3%A8le?greeting=Bonjour'
//! curl -i -d 'user=ada&password=open+sesame' http://127.0.0.1:3003/login
//! curl -i http://127.0.0.1:3003/slow
//! curl -i 'http://127.0.0.1:3003/download/caf%C3%A9%20menu.txt'
//! curl -iN http://127.0.0.1:3003/events
//! curl http://127.0.0.1:3003/metrics
//! ```

mod service;

use unflat_server::{Config, Server};

#[tokio::main]
async fn main() {
    let config = match Config::from_app_args(std::env::args_os()) {
        Ok(config) => config,
        Err(e) => e.exit(),
    };
    let server = match Server::bind_with(config, service::app) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    println!("app at http://{}/ (Ctrl-C stops it)", server.local_addr());
    let stopped = server
        .serve(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    if let Err(e) = stopped {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
