//! A small application on unflat-server's async door: a greeting, a form
//! login, a timer, a download with its `ETag`, a stream of events, an
//! upload hashed as it arrives, a JSON 404 and a route that panics
//! (`service.rs`). The same application on axum is peers/src/bin/axum-app.rs.
//!
//! ```sh
//! cargo run --release -p unflat-server --example app -- --addr 127.0.0.1:3003
//! curl -i 'http://127.0.0.1:3003/hello/Ad%C3%A8le?greeting=Bonjour'
//! curl -i -d 'user=ada&password=open+sesame' http://127.0.0.1:3003/login
//! curl -i 'http://127.0.0.1:3003/download/caf%C3%A9%20menu.txt'
//! curl -iN http://127.0.0.1:3003/events
//! head -c 5000000 /dev/urandom | curl -i --data-binary @- http://127.0.0.1:3003/upload
//! ```

mod service;

use unflat_server::app::{run, Config};

fn main() -> std::io::Result<()> {
    let mut config = Config::from_app_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    // A route's limit applies within --max-body: room for the upload's.
    config.max_body = config.max_body.max(service::UPLOAD_LIMIT as usize);
    run(config, service::router())
}
