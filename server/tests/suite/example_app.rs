//! `examples/app`, the application on the async door, served here on the
//! test's own runtime and driven through a real client (reqwest), then
//! over HTTP/1.0 and with `HEAD` on each route: path parameters and the
//! query decoded, a form login with a body limit, an awaited timer, a
//! download with `Content-Disposition`, an `ETag` and 304, a stream that
//! waits, an upload hashed as it arrives with its limit, a JSON 404, a
//! panic answered 500 on a connection that goes on.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use unflat_server::{Config, Server};

#[path = "../../examples/app/service.rs"]
mod service;

/// Everything `request` gets on its own connection, until the close.
fn http10(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_application_answers_as_written() {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        max_body: service::UPLOAD_LIMIT as usize,
        ..Config::default()
    };
    let server = Server::bind_with(config, |m| service::router().observed(m.standard())).unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async {
        let _ = stopped.await;
    }));
    // reqwest builds a TLS configuration for every client, from the
    // process's default provider (installed by another test, or here).
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = |path: &str| format!("http://{addr}{path}");

    // The path parameter and the query decoded; a custom field.
    let r = client
        .get(url("/hello/Ad%C3%A8le%2Fx?greeting=Bonjour+%C3%A0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["cache-control"], "max-age=60");
    assert_eq!(r.text().await.unwrap(), "Bonjour à, Adèle/x!\n");
    let r = client
        .get(url("/hello/x?greeting=%zz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("greeting"));

    // A form read whole by an awaiting handler: 303 with its fields.
    let form = "application/x-www-form-urlencoded";
    let begun = Instant::now();
    let r = client
        .post(url("/login"))
        .header("Content-Type", form)
        .body("user=ad%C3%A8le&password=open+sesame")
        .send()
        .await
        .unwrap();
    assert!(begun.elapsed() >= service::DATABASE);
    assert_eq!(r.status(), 303);
    let h = r.headers();
    assert_eq!(h["location"], "/hello/ad%C3%A8le");
    let cookies: Vec<&str> = h
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    assert!(cookies[0].starts_with("session=") && cookies[0].ends_with("; HttpOnly; SameSite=Lax"));
    assert_eq!(cookies[1], "user=ad%C3%A8le; Path=/; Max-Age=86400");
    assert_eq!(h["cache-control"], "no-store");
    let wrong = client
        .post(url("/login"))
        .header("Content-Type", form)
        .body("user=a&password=no");
    assert_eq!(wrong.send().await.unwrap().status(), 401);
    let r = client
        .post(url("/login"))
        .body("user=a&password=no")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415, "a form is asked for by its type");
    let r = client
        .post(url("/login"))
        .header("Content-Type", form)
        .body("user=a")
        .send()
        .await;
    assert_eq!(r.unwrap().status(), 400);
    // Past the route's 4 KiB: 413 from the length, before the body is read.
    let big = vec![b'a'; service::LOGIN_LIMIT as usize + 1];
    let r = client
        .post(url("/login"))
        .header("Content-Type", form)
        .body(big)
        .send()
        .await;
    assert_eq!(r.unwrap().status(), 413);

    // An awaited timer.
    let begun = Instant::now();
    let r = client.get(url("/slow")).send().await.unwrap();
    assert_eq!(r.text().await.unwrap(), "waited 50 ms\n");
    assert!(begun.elapsed() >= service::DATABASE);

    // A download: its name percent-encoded, an ETag, then 304.
    let r = client
        .get(url("/download/caf%C3%A9%20menu.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename*=UTF-8''caf%C3%A9%20menu.txt"
    );
    assert_eq!(r.text().await.unwrap(), "Croissant 2 €\nCafé 1,50 €\n");
    let r = client
        .get(url("/download/report.txt"))
        .send()
        .await
        .unwrap();
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert_eq!(r.bytes().await.unwrap().len(), 100_000);
    let r = client
        .get(url("/download/report.txt"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert_eq!(r.headers()["etag"], &*etag);
    assert!(r.headers().get("content-length").is_none());
    assert!(r.bytes().await.unwrap().is_empty());

    // A stream that waits: five chunks, 20 ms apart.
    let begun = Instant::now();
    let r = client.get(url("/events")).send().await.unwrap();
    assert_eq!(r.headers()["transfer-encoding"], "chunked");
    let events: String = (1..=service::EVENTS)
        .map(|i| format!("<p>event {i}</p>\n"))
        .collect();
    assert_eq!(r.text().await.unwrap(), events);
    assert!(begun.elapsed() >= service::EVENT_EVERY * 4);

    // 5 MB hashed as it arrives, by length and chunked; 413 past 10 MiB.
    let upload: Vec<u8> = (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let want = format!("5000000 bytes, sha256 {:x}\n", Sha256::digest(&upload));
    let r = client
        .post(url("/upload"))
        .body(upload.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), want);
    let mut chunked = b"POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for piece in upload.chunks(70_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let out = tokio::task::spawn_blocking(move || http10(addr, &chunked))
        .await
        .unwrap();
    assert!(out.ends_with(&want), "{out}");
    // Refused from its length alone: no byte of it is sent.
    let over = format!(
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        service::UPLOAD_LIMIT + 1
    );
    let out = tokio::task::spawn_blocking(move || http10(addr, over.as_bytes()))
        .await
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 413 "), "{out}");

    // A JSON 404; a panic answered 500, and the connection goes on; 405.
    let r = client.get(url("/nowhere/\"x\"")).send().await.unwrap();
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["content-type"].to_str().unwrap()
        ),
        (404, "application/json")
    );
    let json: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(json["path"], "/nowhere/%22x%22");
    let out = tokio::task::spawn_blocking(move || {
        http10(addr, b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\nGET /hello/a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    })
    .await
    .unwrap();
    assert!(out.starts_with("HTTP/1.1 500 "), "{out}");
    assert!(out.ends_with("Hello, a!\n"), "{out}");
    let r = client.delete(url("/slow")).send().await.unwrap();
    assert_eq!(
        (r.status().as_u16(), r.headers()["allow"].to_str().unwrap()),
        (405, "GET, HEAD")
    );

    // HEAD and HTTP/1.0 on each route.
    tokio::task::spawn_blocking(move || {
        let routes = [
            ("/hello/Ada", "Hello, Ada!\n"),
            ("/slow", "waited 50 ms\n"),
            ("/download/caf%C3%A9%20menu.txt", "Croissant 2 €\nCafé 1,50 €\n"),
            ("/events", &*events),
            ("/nowhere", r#"{"error":"not found","path":"/nowhere"}"#),
        ];
        for (path, body) in routes {
            let out = http10(addr, format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
            let (head, got) = out.split_once("\r\n\r\n").unwrap();
            assert!(head.contains("\r\nConnection: close"), "{path}: {head}");
            assert_eq!(got, body, "{path} over HTTP/1.0");
            let head_request = format!("HEAD {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            let out = http10(addr, head_request.as_bytes());
            assert!(out.ends_with("\r\n\r\n"), "{path}: a body after HEAD: {out}");
        }
        let out = http10(
            addr,
            b"POST /login HTTP/1.0\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 29\r\n\r\nuser=bob&password=open+sesame",
        );
        assert!(out.starts_with("HTTP/1.1 303 See Other\r\n"), "{out}");
        assert!(out.contains("\r\nSet-Cookie: user=bob; Path=/; Max-Age=86400\r\n"), "{out}");
    })
    .await
    .unwrap();

    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
}
