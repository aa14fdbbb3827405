//! `cargo bench --bench tls-providers -- [--rounds 2] [--handshakes 3000]
//! [--bulk-mib 1024] [--providers ring,aws-lc-rs]`: handshakes per second and bulk
//! throughput of rustls's two crypto providers, *ring* and aws-lc-rs, in
//! memory (no sockets, one thread): a server and a client connection pass
//! records to each other through a buffer. TLS 1.3, each provider's
//! default suites, an ECDSA P-256 certificate made by rcgen. What chose the
//! server's provider (docs/results/history.md, "HTTPS").

mod support;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection,
};
use support::{cli, Progress};

/// A rustls crypto provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Provider {
    /// *ring*.
    Ring,
    /// aws-lc-rs, the server's.
    #[value(name = "aws-lc-rs")]
    AwsLcRs,
}

impl Provider {
    /// Its name in the report.
    fn name(self) -> &'static str {
        match self {
            Provider::Ring => "ring",
            Provider::AwsLcRs => "aws-lc-rs",
        }
    }

    /// A fresh provider with its default suites.
    fn provider(self) -> CryptoProvider {
        match self {
            Provider::Ring => rustls::crypto::ring::default_provider(),
            Provider::AwsLcRs => rustls::crypto::aws_lc_rs::default_provider(),
        }
    }
}

/// Handshakes per second and bulk throughput of rustls's two crypto
/// providers, ring and aws-lc-rs, in memory: no sockets, one thread, a
/// server and a client connection passing records through a buffer. TLS
/// 1.3, each provider's default suites, an ECDSA P-256 certificate.
///
/// Per round, every provider in turn: --handshakes full handshakes (after
/// 200 untimed), then --bulk-mib MiB encrypted by the server in 256 KiB
/// writes and decrypted by the client (after 64 MiB untimed). Progress
/// (round k of N, time elapsed and left) goes to stderr; one line per
/// provider and round to stdout. Writes no files.
///
/// Examples:
///   cargo bench --bench tls-providers -- --rounds 1 --handshakes 500 --bulk-mib 64    a quick look
///   cargo bench --bench tls-providers -- --providers aws-lc-rs
#[derive(Parser, Debug)]
#[command(
    name = "tls-providers",
    bin_name = "cargo bench --bench tls-providers --",
    verbatim_doc_comment
)]
struct Opts {
    /// Rounds; each measures every provider once, in turn (1 to 100).
    #[arg(long, default_value_t = 2, value_parser = cli::count(1..=100))]
    rounds: usize,
    /// Full handshakes timed per provider and round, after 200 untimed
    /// (1 to 1000000).
    #[arg(long, default_value_t = 3000, value_parser = cli::count(1..=1_000_000))]
    handshakes: usize,
    /// MiB the server encrypts and the client decrypts per provider and
    /// round, after 64 MiB untimed (1 to 65536).
    #[arg(long, default_value_t = 1024, value_parser = cli::count(1..=65_536))]
    bulk_mib: usize,
    /// Providers, comma-separated, measured in this order.
    #[arg(long, value_delimiter = ',', default_values = ["ring", "aws-lc-rs"])]
    providers: Vec<Provider>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long)]
    bench: bool,
}

/// Moves every pending record from `a` to `b`, and reads whatever
/// plaintext they carry out of `b` into `sink` (so that `b`'s bounded
/// plaintext buffer never fills); true if any record moved.
fn flow(a: &mut Connection, b: &mut Connection, buf: &mut Vec<u8>, sink: &mut [u8]) -> bool {
    buf.clear();
    while a.wants_write() {
        a.write_tls(buf).unwrap();
    }
    if buf.is_empty() {
        return false;
    }
    let mut rd = &buf[..];
    while !rd.is_empty() {
        b.read_tls(&mut rd).unwrap();
        b.process_new_packets().unwrap();
        loop {
            match b.reader().read(sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
    }
    true
}

fn main() {
    let o: Opts = cli::parse();
    // The providers alternate, round after round.
    let mut progress = Progress::new("tls-providers", o.rounds * o.providers.len(), None);
    for round in 0..o.rounds {
        for p in &o.providers {
            progress.step(&format!(
                "round {} of {}, {}",
                round + 1,
                o.rounds,
                p.name()
            ));
            measure(&o, p.name(), p.provider());
        }
    }
}

/// One provider: full handshakes (no resumption, both sides' work) per
/// second, then `--bulk-mib` written by the server in 256 KiB writes and
/// read by the client.
fn measure(o: &Opts, name: &str, provider: CryptoProvider) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let der = made.cert.der().clone();
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der()).unwrap();
    let p = Arc::new(provider);
    let server = Arc::new(
        ServerConfig::builder_with_provider(p.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap(),
    );
    let mut roots = RootCertStore::empty();
    roots.add(der).unwrap();
    let client = Arc::new(
        ClientConfig::builder_with_provider(p)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let (mut buf, mut sink) = (Vec::new(), vec![0u8; 256 * 1024]);
    let connect = |buf: &mut Vec<u8>, sink: &mut [u8]| {
        let mut c = Connection::Client(
            ClientConnection::new(client.clone(), ServerName::try_from("localhost").unwrap())
                .unwrap(),
        );
        let mut s = Connection::Server(ServerConnection::new(server.clone()).unwrap());
        while c.is_handshaking() || s.is_handshaking() {
            let a = flow(&mut c, &mut s, buf, sink);
            let b = flow(&mut s, &mut c, buf, sink);
            assert!(a || b, "stuck");
        }
        flow(&mut s, &mut c, buf, sink);
        (c, s)
    };
    // Handshakes: full (no resumption), both sides' work, in one thread.
    for _ in 0..200 {
        connect(&mut buf, &mut sink);
    }
    let n = o.handshakes;
    let t = Instant::now();
    for _ in 0..n {
        connect(&mut buf, &mut sink);
    }
    let hs = n as f64 / t.elapsed().as_secs_f64();
    // Bulk: the server encrypts in writes of 256 KiB; the client decrypts.
    let (mut c, mut s) = connect(&mut buf, &mut sink);
    let chunk = vec![0x61u8; 256 * 1024];
    let total = o.bulk_mib << 20;
    let run = |c: &mut Connection,
               s: &mut Connection,
               buf: &mut Vec<u8>,
               sink: &mut [u8],
               bytes: usize| {
        let mut sent = 0;
        while sent < bytes {
            sent += s.writer().write(&chunk).unwrap();
            flow(s, c, buf, sink);
        }
    };
    run(&mut c, &mut s, &mut buf, &mut sink, 64 << 20);
    let t = Instant::now();
    run(&mut c, &mut s, &mut buf, &mut sink, total);
    let secs = t.elapsed().as_secs_f64();
    let suite = s.negotiated_cipher_suite().unwrap().suite();
    println!("{name}: {hs:.0} handshakes/s (both sides, one core); bulk {:.2} GiB/s encrypted and decrypted ({suite:?})", total as f64 / secs / (1u64 << 30) as f64);
}
