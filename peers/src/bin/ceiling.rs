//! `ceiling`: the least any HTTP/1.1 server can do for end-string on this
//! kernel, so the benchmark can say how far each real server is from it.
//!
//! Per request it does only what no server can avoid: parse the request
//! with httparse, and hand the kernel one contiguous response in one
//! `write_all`. The response for a length (head and `a` × len body, with the
//! headers unflat-server sends) is built once per worker thread and length,
//! and rebuilt when the second changes, for its Date; the per-request cost
//! beyond parse and write is a clock read, a thread-local lookup and a
//! reference count. A thread-local cache takes no lock, and keeps one copy
//! of a response per thread however many connections ask for it, so large
//! bodies stay in the CPU caches as a shared body would.
//!
//! It serves `GET /end-string/{len}` with no query or `kind=ascii`; anything
//! else gets a plain 404 or 400. Pipelined requests are answered in order,
//! a batch — every complete request a read brought, up to 64 — with one
//! vectored write of the built responses, allocating nothing. It is a
//! measuring stick, not a server: no request bodies (a request with one is
//! refused and the connection closed), no HEAD, no timeouts, no graceful
//! shutdown.
//!
//! It runs on one tokio runtime of `--workers` threads (the current-thread
//! scheduler for one), as unflat-server does, so the two differ only in
//! what they do per request.
//!
//! `cargo run --release -p unflat-peers --bin ceiling -- --addr 127.0.0.1:0 --workers 2`
//! prints `ceiling at http://ADDR` once it listens.

use std::cell::RefCell;
use std::io::{self, IoSlice, Write as _};
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Buf, Bytes};
use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Largest len served: the other servers' default `--max-len`.
const MAX_LEN: usize = 16 * 1024 * 1024;
/// Read buffer size, and so the largest request head accepted.
const READ_BUF: usize = 16 * 1024;
/// Lengths whose responses one thread keeps built.
const CACHED_LENS: usize = 8;
/// Most responses answered by one write.
const BATCH: usize = 64;

/// ceiling: the end-string route with nothing but parse and one write.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3002")]
    addr: SocketAddr,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
}

fn main() -> io::Result<()> {
    let args = Args::parse();
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    // Bound before the banner, so the printed address accepts at once.
    let listener = std::net::TcpListener::bind(args.addr)?;
    listener.set_nonblocking(true)?;
    println!("ceiling at http://{}", listener.local_addr()?);
    io::stdout().flush()?;
    // One worker: the current-thread scheduler, as unflat-server uses.
    let mut runtime = match workers {
        1 => tokio::runtime::Builder::new_current_thread(),
        workers => {
            let mut runtime = tokio::runtime::Builder::new_multi_thread();
            runtime.worker_threads(workers);
            runtime
        }
    };
    runtime.enable_io().build()?.block_on(accept(listener))
}

/// Accepts forever on `listener`, one task per connection.
async fn accept(listener: std::net::TcpListener) -> io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = connection(stream).await;
        });
    }
}

/// Answers every request on one connection, pipelined ones included: the
/// complete requests in the buffer get their responses, in order, up to
/// [`BATCH`] with one write, before the next read.
async fn connection(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; READ_BUF];
    // Empty `Bytes` are static: filling the array allocates nothing.
    let mut batch: [Bytes; BATCH] = std::array::from_fn(|_| Bytes::new());
    let (mut start, mut end) = (0, 0);
    loop {
        let mut n = 0;
        let mut invalid = None;
        while start < end && n < BATCH {
            match parse(&buf[start..end]) {
                Parsed::Partial => break,
                Parsed::Request { used, route } => {
                    start += used;
                    batch[n] = respond(route);
                    n += 1;
                }
                Parsed::Invalid(why) => {
                    invalid = Some(respond(Err((BAD_REQUEST, why))));
                    break;
                }
            }
        }
        write_batch(&mut stream, &mut batch[..n]).await?;
        if let Some(reply) = invalid {
            return stream.write_all(&reply).await;
        }
        if n == BATCH {
            continue;
        }
        if start == end {
            (start, end) = (0, 0);
        } else if end == buf.len() {
            if start == 0 {
                let reply = respond(Err((BAD_REQUEST, "request head too large\n")));
                return stream.write_all(&reply).await;
            }
            buf.copy_within(start..end, 0);
            (start, end) = (0, end - start);
        }
        let n = stream.read(&mut buf[end..]).await?;
        if n == 0 {
            return Ok(());
        }
        end += n;
    }
}

/// Writes `batch` in order with as few vectored writes as the socket
/// allows, leaving every entry empty.
async fn write_batch(stream: &mut TcpStream, batch: &mut [Bytes]) -> io::Result<()> {
    let mut first = 0;
    while first < batch.len() {
        let mut slices = [IoSlice::new(&[]); BATCH];
        for (slice, bytes) in slices.iter_mut().zip(&batch[first..]) {
            *slice = IoSlice::new(bytes);
        }
        let mut sent = stream
            .write_vectored(&slices[..batch.len() - first])
            .await?;
        if sent == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while first < batch.len() && sent >= batch[first].len() {
            sent -= batch[first].len();
            batch[first] = Bytes::new();
            first += 1;
        }
        if sent > 0 {
            batch[first].advance(sent);
        }
    }
    Ok(())
}

const BAD_REQUEST: &str = "400 Bad Request";
const NOT_FOUND: &str = "404 Not Found";

/// What a request asks for: a length to serve, or a status and message.
type Route = Result<usize, (&'static str, &'static str)>;

enum Parsed {
    /// More bytes are needed.
    Partial,
    /// A complete request of `used` bytes.
    Request { used: usize, route: Route },
    /// Not HTTP/1.x, or a request this server cannot skip past.
    Invalid(&'static str),
}

fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let used = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Invalid("malformed request\n"),
    };
    let has_body = req.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            || (h.name.eq_ignore_ascii_case("content-length") && h.value != b"0")
    });
    if has_body {
        return Parsed::Invalid("request bodies are not supported\n");
    }
    let route = route(req.method.unwrap_or(""), req.path.unwrap_or(""));
    Parsed::Request { used, route }
}

fn route(method: &str, target: &str) -> Route {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let Some(len) = path.strip_prefix("/end-string/") else {
        return Err((NOT_FOUND, "only GET /end-string/{len}\n"));
    };
    if method != "GET" {
        return Err((BAD_REQUEST, "only GET\n"));
    }
    if !matches!(query, "" | "kind=ascii") {
        return Err((BAD_REQUEST, "the only query is kind=ascii\n"));
    }
    match len.parse::<usize>() {
        Ok(len) if len <= MAX_LEN => Ok(len),
        _ => Err((BAD_REQUEST, "len must be a number up to 16777216\n")),
    }
}

thread_local! {
    /// This worker thread's built responses.
    static RESPONSES: RefCell<Responses> = RefCell::default();
}

/// The bytes to write for `route`, with the current Date.
fn respond(route: Route) -> Bytes {
    RESPONSES.with(|r| r.borrow_mut().get(route))
}

/// One thread's built responses, at most `CACHED_LENS` of them.
#[derive(Default)]
struct Responses {
    date: Date,
    built: Vec<Built>,
}

/// The whole 200 response for `len`, dated `second`.
struct Built {
    len: usize,
    second: u64,
    bytes: Bytes,
}

impl Responses {
    fn get(&mut self, route: Route) -> Bytes {
        let (second, date) = self.date.now();
        match route {
            Ok(len) => self.built(len, second, &date),
            // Errors are rare: built each time.
            Err((status, message)) => {
                let mut out = Vec::new();
                head(&mut out, status, message.len(), &date);
                out.extend_from_slice(message.as_bytes());
                out.into()
            }
        }
    }

    /// The 200 response for `len`, built on first use and again when the
    /// second changes.
    fn built(&mut self, len: usize, second: u64, date: &[u8; 29]) -> Bytes {
        let at = match self.built.iter().position(|b| b.len == len) {
            Some(at) => at,
            None => {
                if self.built.len() == CACHED_LENS {
                    self.built.remove(0);
                }
                self.built.push(Built {
                    len,
                    second,
                    bytes: ok(len, date),
                });
                self.built.len() - 1
            }
        };
        let b = &mut self.built[at];
        if b.second != second {
            b.bytes = ok(len, date);
            b.second = second;
        }
        b.bytes.clone()
    }
}

/// A 200 response with `len` × `a`, head and body in one buffer.
fn ok(len: usize, date: &[u8; 29]) -> Bytes {
    let mut out = Vec::with_capacity(len + 160);
    head(&mut out, "200 OK", len, date);
    out.resize(out.len() + len, b'a');
    out.into()
}

/// Appends a response head with unflat-server's headers, in its order.
fn head(out: &mut Vec<u8>, status: &str, content_length: usize, date: &[u8; 29]) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(
        b"\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nDate: ",
    );
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(content_length.to_string().as_bytes());
    out.extend_from_slice(b"\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n");
}

/// The IMF-fixdate of the current second, formatted once per second.
#[derive(Default)]
struct Date {
    second: Option<u64>,
    text: [u8; 29],
}

impl Date {
    fn now(&mut self) -> (u64, [u8; 29]) {
        let now = SystemTime::now();
        let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if self.second != Some(second) {
            self.text
                .copy_from_slice(httpdate::fmt_http_date(now).as_bytes());
            self.second = Some(second);
        }
        (second, self.text)
    }
}
