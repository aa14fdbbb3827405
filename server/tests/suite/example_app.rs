//! `examples/app`, the application of every capability the core offers
//! one, served here on the test's own runtime as its `main` serves it and
//! driven through a real client (reqwest), then over HTTP/1.0 and with
//! `HEAD` on each route: fields built as ropes, an awaited timer, a POST
//! body read by async work, a stream that waits, the request decoded, and
//! a header value with a CR refused; its responses counted by route on
//! its `/metrics`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use unflat_server::{Config, Server};

#[path = "../../examples/app/service.rs"]
mod service;

/// Everything `request` gets on its own connection, until the close.
fn http10(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_application_answers_as_written() {
    let config = Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..Config::default()
    };
    let server = Server::bind_with(config, service::app).unwrap();
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

    // The path and the query decoded.
    let r = client
        .get(url("/hello/Ad%C3%A8le?greeting=Bonjour"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "Bonjour, Adèle!\n");
    let r = client
        .get(url("/hello/x?greeting=%zz"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("greeting"));

    // A POST body read by async work (a 50 ms "database"), answered with
    // six field lines of its own, two of them Set-Cookie, values built of
    // several pieces.
    let begun = Instant::now();
    let r = client
        .post(url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("user=ada&password=open+sesame")
        .send()
        .await
        .unwrap();
    assert!(
        begun.elapsed() >= service::DATABASE,
        "{:?}",
        begun.elapsed()
    );
    assert_eq!(r.status(), 303);
    let h = r.headers();
    assert_eq!(h["location"], "/hello/ada");
    let cookies: Vec<&str> = h
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    let session = cookies[0]
        .strip_prefix("session=")
        .and_then(|c| c.strip_suffix("; Path=/; HttpOnly; SameSite=Lax"))
        .unwrap_or_else(|| panic!("{cookies:?}"));
    assert!(session.parse::<u64>().unwrap() >= 1);
    assert_eq!(cookies[1], "user=ada; Path=/; Max-Age=86400");
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["vary"], "Cookie");
    assert!(
        h["x-session-count"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(r.text().await.unwrap(), "signed in\n");
    let wrong = client
        .post(url("/login"))
        .body("user=ada&password=no")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 403);

    // An awaited timer.
    let begun = Instant::now();
    let r = client.get(url("/slow")).send().await.unwrap();
    assert_eq!(r.text().await.unwrap(), "waited 50 ms\n");
    assert!(begun.elapsed() >= service::DATABASE);

    // A download: its name percent-encoded as a rope, an ETag of its body.
    let r = client
        .get(url("/download/caf%C3%A9%20menu.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename*=UTF-8''caf%C3%A9%20menu.txt"
    );
    let etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert!(
        etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'),
        "{etag}"
    );
    assert_eq!(r.text().await.unwrap(), "Croissant 2 €\nCafé 1,50 €\n");

    // A stream that waits: five chunks, 20 ms apart.
    let begun = Instant::now();
    let r = client.get(url("/events")).send().await.unwrap();
    assert_eq!(r.headers()["transfer-encoding"], "chunked");
    let events: String = (1..=service::EVENTS)
        .map(|i| format!("<p>event {i}</p>\n"))
        .collect();
    assert_eq!(r.text().await.unwrap(), events);
    assert!(begun.elapsed() >= service::EVENT_EVERY * 4);

    // A header value with a CR is never written: a 500; the next is served.
    let r = client
        .get(url("/echo?v=a%0DSet-Cookie:%20x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    assert!(r.headers().get("x-echo").is_none());
    let r = client.get(url("/echo?v=fine")).send().await.unwrap();
    assert_eq!(r.headers()["x-echo"], "fine");

    // HEAD and HTTP/1.0 on each route.
    tokio::task::spawn_blocking(move || {
        let routes = [
            ("/hello/Ada", "Hello, Ada!\n"),
            ("/slow", "waited 50 ms\n"),
            (
                "/download/notes.txt",
                "Rope-built heads, bodies at their own memory.\n",
            ),
            ("/events", &*events),
            ("/echo?v=x", "echoed\n"),
            ("/nowhere", "not found\n"),
        ];
        for (path, body) in routes {
            let out = http10(addr, &format!("GET {path} HTTP/1.0\r\n\r\n"));
            let (head, got) = out.split_once("\r\n\r\n").unwrap();
            assert!(head.contains("\r\nConnection: close"), "{path}: {head}");
            assert_eq!(got, body, "{path} over HTTP/1.0");
            let out = http10(
                addr,
                &format!("HEAD {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
            );
            assert!(
                out.ends_with("\r\n\r\n"),
                "{path}: a body after HEAD: {out}"
            );
        }
        let out = http10(
            addr,
            "POST /login HTTP/1.0\r\nContent-Length: 29\r\n\r\nuser=bob&password=open+sesame",
        );
        assert!(out.starts_with("HTTP/1.1 303 See Other\r\n"), "{out}");
        assert!(
            out.contains("\r\nSet-Cookie: user=bob; Path=/; Max-Age=86400\r\n"),
            "{out}"
        );
    })
    .await
    .unwrap();

    // The core's counters, by the application's routes (each response is
    // counted before it is written).
    let r = client.get(url("/metrics")).send().await.unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    for line in [
        r#"unflat_requests_total{route="/hello",status="200"} 3"#,
        r#"unflat_requests_total{route="/hello",status="400"} 1"#,
        r#"unflat_requests_total{route="/echo",status="500"} 1"#,
        r#"unflat_requests_total{route="/echo",status="200"} 3"#,
        r#"unflat_requests_total{route="other",status="404"} 2"#,
        // Counted under the route of the call, whatever its job made.
        r#"unflat_requests_total{route="/slow",status="200"} 3"#,
        r#"unflat_requests_total{route="/login",status="303"} 2"#,
        r#"unflat_requests_total{route="/login",status="403"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }

    stop.send(()).unwrap();
    serving.await.unwrap().unwrap();
}
