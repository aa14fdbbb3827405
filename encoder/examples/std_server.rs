//! A blocking `std::net` HTTP/1.1 server built on unflat alone — proof that
//! the crate needs no async runtime.
//!
//! `cargo run -p unflat --example std_server -- --addr 127.0.0.1:3001`
//! (the flags every example takes: `--addr HOST:PORT`, port 0 for a free
//! one, or `--port PORT`; the address alone, `-- 127.0.0.1:3001`, works
//! too), then
//! `curl http://127.0.0.1:3001/5000` returns 5000 characters of text: the
//! head is written (its values checked as they go) into the write queue's buffer, the body a ropey
//! rope queued as iovecs at its own chunks, and both go out with
//! `write_vectored`, resumed at the queue's cursor after partial writes.

#[path = "support/args.rs"]
mod args;

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::time::SystemTime;

use unflat::head::{DateLine, Head, Line, Persistence, RequestMethod, Status};
use unflat::queue::WriteQueue;

fn main() -> io::Result<()> {
    // The address alone, without a flag, is accepted as well: the first
    // form this example took.
    let mut bare = None;
    let addr = args::addr_from_args("127.0.0.1:3001", |arg, _| match arg {
        _ if !arg.starts_with('-') && bare.is_none() => {
            bare = Some(arg.to_string());
            Ok(())
        }
        _ => Err(format!("unknown argument {arg:?}")),
    })
    .unwrap_or_else(|e| {
        eprintln!("std_server: {e}; usage: std_server [--addr HOST:PORT | --port PORT]");
        std::process::exit(2)
    });
    let addr = bare.unwrap_or(addr);
    let listener = TcpListener::bind(&addr)?;
    println!("listening on http://{}/{{len}}", listener.local_addr()?);
    // The body every response slices: built once, shared by every thread.
    let text = ropey::Rope::from_str(&"unflat ".repeat(1 << 17));
    for stream in listener.incoming() {
        let (stream, text) = (stream?, text.clone());
        std::thread::spawn(move || {
            if let Err(e) = serve(stream, &text) {
                eprintln!("connection: {e}");
            }
        });
    }
    Ok(())
}

/// Serves keep-alive requests on one connection until the peer closes it.
fn serve(mut stream: TcpStream, text: &ropey::Rope) -> io::Result<()> {
    let plain = Line::parse("Content-Type", "text/plain").expect("valid line");
    let mut input = Vec::new();
    let mut queue = WriteQueue::new();
    loop {
        // Read until a whole head is in; this example ignores request bodies.
        let (len, path) = loop {
            let mut fields = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut fields);
            match req.parse(&input) {
                Ok(httparse::Status::Complete(n)) => break (n, req.path.unwrap_or("/").to_owned()),
                Ok(httparse::Status::Partial) => {
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk)? {
                        0 => return Ok(()),
                        n => input.extend_from_slice(&chunk[..n]),
                    }
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        };
        input.drain(..len);

        // The route: /{n} answers n characters of the shared text; another
        // path is not found, and a target that is not a path ("*", or
        // anything not starting with '/') is a bad request.
        let (status, body_len) = match path.strip_prefix('/') {
            None => (Status::BAD_REQUEST, 0),
            Some(n) => match n.parse::<usize>().ok().filter(|&n| n <= text.len_bytes()) {
                Some(n) => (Status::OK, n),
                None => (Status::NOT_FOUND, 0),
            },
        };
        let date = DateLine::at(SystemTime::now());
        let mut head = Head::new(status, RequestMethod::Other);
        head.line(&plain).expect("room for a line");
        head.date(&date)
            .content_length(body_len as u64)
            .expect("one framing")
            .persistence(Persistence::Default);

        // Head: encoded into the queue's buffer; body: iovecs at the rope.
        queue.head(&head).expect("its lines are checked when built");
        queue.share_rope(text, 0..body_len);
        queue.end_response();
        // `write_vectored` until the queue is empty, resumed at its cursor.
        queue.write_to(&mut stream)?;
    }
}
