//! `may-peer`: the end-string route on may_minihttp, the design behind the
//! TechEmpower plaintext leaders in Rust — stackful coroutines on `may`, one
//! buffer per connection into which every response of a pipelined batch is
//! encoded, body included, then written at once.
//!
//! It serves `GET /end-string/{len}?kind=ascii|latin1|twobyte` for the
//! lengths given by `--lens` (the benchmark's by default), with the headers
//! unflat-server sends (Content-Type, X-Content-Type-Options, Content-Length,
//! Date, Connection: keep-alive, Keep-Alive; the end-string harness checks
//! that they agree) plus may_minihttp's own `Server: M`, which the harness
//! has unflat-server send too (`--server-header M`): the same bytes. Its
//! strongest fair configuration: every body is built once at start-up and
//! leaked into a `&'static str`, which may_minihttp's `Response::body`
//! takes without allocating, so a request costs a lookup and the copy into
//! the connection's buffer that its design makes (a body can only be given
//! as a `&'static str` or a `Vec` it copies from). `--workers` sets may's
//! worker threads.
//!
//! may_minihttp binds its own listener and does not say on which port; the
//! peer asks the kernel for a free port first, when `--addr` has port 0,
//! and then starts on it (another process could take the port in between;
//! start-up then fails with an error, never silently).
//!
//! `cargo run --release -p unflat-peers --bin may-peer -- --addr 127.0.0.1:0 --workers 1`
//! prints `may-peer at http://ADDR` once it listens.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};

use clap::Parser;
use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};

/// may-peer: the end-string route on may_minihttp, for comparison.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on (port 0: a free port).
    #[arg(long, default_value = "127.0.0.1:3003")]
    addr: SocketAddr,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Body lengths served, comma-separated: each is built at start-up for
    /// every kind.
    #[arg(long, value_delimiter = ',', default_values_t = [4usize, 64, 1024, 16384, 102400])]
    lens: Vec<usize>,
}

/// The bodies, by (len, kind), built once and never freed.
type Bodies = HashMap<(usize, &'static str), &'static str>;

/// The kinds and the character each repeats.
const KINDS: [(&str, char); 3] = [("ascii", 'a'), ("latin1", 'é'), ("twobyte", '€')];

/// One connection's service: the shared bodies.
struct EndString {
    bodies: &'static Bodies,
}

impl HttpService for EndString {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        let target = req.path();
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let kind = match query {
            "" => Some("ascii"),
            q => q.strip_prefix("kind="),
        };
        let len = path
            .strip_prefix("/end-string/")
            .and_then(|l| l.parse().ok());
        match (req.method(), len, kind) {
            ("GET", Some(len), Some(kind)) => match self.bodies.get(&(len, kind)) {
                Some(body) => {
                    rsp.header("Content-Type: text/plain; charset=utf-8")
                        .header("X-Content-Type-Options: nosniff")
                        .header("Connection: keep-alive")
                        .header("Keep-Alive: timeout=5")
                        .body(body);
                }
                None => {
                    rsp.status_code(404, "Not Found")
                        .body("no such length or kind (see --lens)\n");
                }
            },
            _ => {
                rsp.status_code(404, "Not Found")
                    .body("only GET /end-string/{len}?kind=ascii|latin1|twobyte\n");
            }
        }
        Ok(())
    }
}

/// Makes each connection's service.
struct Factory {
    bodies: &'static Bodies,
}

impl HttpServiceFactory for Factory {
    type Service = EndString;

    fn new_service(&self, _: usize) -> EndString {
        EndString {
            bodies: self.bodies,
        }
    }
}

fn main() {
    let args = Args::parse();
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    may::config().set_workers(workers);
    let bodies: Bodies = args
        .lens
        .iter()
        .flat_map(|&len| KINDS.map(|(kind, c)| ((len, kind), &*c.to_string().repeat(len).leak())))
        .collect();
    let bodies: &'static Bodies = Box::leak(Box::new(bodies));
    let addr = match free_port(args.addr) {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("error: --addr {}: {e}", args.addr);
            std::process::exit(2);
        }
    };
    let server = match (Factory { bodies }).start(addr) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: --addr {addr}: {e}");
            std::process::exit(2);
        }
    };
    println!("may-peer at http://{addr}");
    let _ = io::stdout().flush();
    let _ = server.join();
}

/// `addr`, with a port the kernel says is free when its port is 0.
fn free_port(addr: SocketAddr) -> io::Result<SocketAddr> {
    if addr.port() != 0 {
        return Ok(addr);
    }
    TcpListener::bind(addr)?.local_addr()
}
