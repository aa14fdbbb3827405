//! `examples/axum_rope.rs`'s router, served in process on 127.0.0.1 port 0:
//! every body checked byte for byte against the text it stands for, and its
//! framing (an exact `Content-Length`, never chunked) checked by reading
//! pipelined responses back to back on one connection.

use axum::extract::State;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// The example itself, so that the test serves the very router it runs;
// its `main` and argument parsing are not called from here.
#[allow(dead_code)]
#[path = "../examples/axum_rope.rs"]
mod axum_rope;

/// One response as it came off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    content_length: Option<usize>,
    transfer_encoding: Option<String>,
    body: Vec<u8>,
}

/// Splits `wire` into responses, each framed by its `Content-Length`, and
/// fails if a response lacks one or if bytes are left after the last.
fn split_responses(mut wire: &[u8]) -> Vec<Answer> {
    let mut answers = Vec::new();
    while !wire.is_empty() {
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut res = httparse::Response::new(&mut fields);
        let head = match res.parse(wire) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!(
                "response {} has no whole head ({other:?}): {:?}",
                answers.len(),
                String::from_utf8_lossy(&wire[..wire.len().min(200)])
            ),
        };
        let field = |name: &str| {
            res.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8(h.value.to_vec()).unwrap())
        };
        let content_length = field("content-length").map(|v| v.parse::<usize>().unwrap());
        let len = content_length
            .unwrap_or_else(|| panic!("response {} has no Content-Length", answers.len()));
        assert!(
            wire.len() >= head + len,
            "response {}: Content-Length {len}, {} body bytes on the wire",
            answers.len(),
            wire.len() - head
        );
        answers.push(Answer {
            status: res.code.unwrap(),
            content_type: field("content-type"),
            content_length,
            transfer_encoding: field("transfer-encoding"),
            body: wire[head..head + len].to_vec(),
        });
        wire = &wire[head + len..];
    }
    answers
}

/// Serves the example's router on 127.0.0.1 port 0, sends `requests` on
/// one connection at once (pipelined; the last closes it), reads until
/// the server closes, and stops the server.
async fn exchange(requests: &[&str]) -> Vec<Answer> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, axum_rope::router())
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });

    let mut wire = String::new();
    for (i, target) in requests.iter().enumerate() {
        let close = if i + 1 == requests.len() {
            "Connection: close\r\n"
        } else {
            ""
        };
        wire.push_str(&format!("GET {target} HTTP/1.1\r\nHost: t\r\n{close}\r\n"));
    }
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(wire.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut out),
    )
    .await
    .expect("the server closes the connection after the last response")
    .unwrap();

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    split_responses(&out)
}

/// The text of `/rope`, written out again here.
fn rope_text() -> String {
    "axum serves this rope from its own chunks \u{2014} d\u{e9}j\u{e0} vu \u{2713}\n".repeat(500)
}

/// The text of `/utf16`.
fn utf16_text() -> String {
    "Gr\u{fc}\u{df}e aus UTF-16 \u{2014} \u{1D11E} \u{266A}\n".repeat(1000)
}

#[tokio::test]
async fn every_rope_arrives_whole_with_its_content_length() {
    let answers = exchange(&[
        "/rope",
        "/concat",
        "/utf16",
        "/utf16?charset=utf-16le",
        "/utf16?charset=latin1",
        "/utf16?lang=de",
        "/nowhere",
    ])
    .await;
    assert_eq!(answers.len(), 7);
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(
            a.transfer_encoding, None,
            "response {i}: an exact size is sent as Content-Length, not chunked"
        );
        assert_eq!(a.content_length, Some(a.body.len()), "response {i}");
    }

    let rope = &answers[0];
    assert_eq!(rope.status, 200);
    assert_eq!(rope.body, rope_text().as_bytes());
    assert_eq!(
        rope.content_type.as_deref(),
        Some("text/plain; charset=utf-8")
    );

    let concat = &answers[1];
    assert_eq!(concat.status, 200);
    let expected = "<p>cr\u{e8}me br\u{fb}l\u{e9}e \u{2014} \u{20ac}\u{1F600}</p>\n";
    assert_eq!(concat.body, expected.as_bytes());
    assert_eq!(
        concat.content_type.as_deref(),
        Some("text/html; charset=utf-8")
    );

    // Longer than one 16 KiB frame in both encodings, so the encoder
    // resumes across frames, surrogate pairs included.
    let utf8 = &answers[2];
    assert_eq!(utf8.status, 200);
    assert!(utf8.body.len() > 16 * 1024);
    assert_eq!(utf8.body, utf16_text().as_bytes());

    let utf16le = &answers[3];
    assert_eq!(utf16le.status, 200);
    let le: Vec<u8> = utf16_text()
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    assert_eq!(utf16le.body, le);
    assert_eq!(
        utf16le.content_type.as_deref(),
        Some("text/plain; charset=utf-16le")
    );

    assert_eq!(answers[4].status, 400);
    assert_eq!(
        answers[4].body,
        b"unknown charset \"latin1\": use utf-8 or utf-16le\n"
    );
    assert_eq!(answers[5].status, 400);
    assert_eq!(
        answers[5].body,
        b"unknown query parameter \"lang=de\": only charset\n"
    );
    assert_eq!(answers[6].status, 404);
    assert_eq!(answers[6].body, b"no route for /nowhere\n");
}

#[tokio::test]
async fn the_ropey_rope_is_shared_and_the_others_encoded() {
    use http_body::Body as _;
    let ropes = axum_rope::Ropes::new();
    let rope = axum_rope::rope(State(ropes.clone())).await;
    assert!(rope.body().is_shared(), "ropey chunks go out as they are");
    assert_eq!(
        rope.body().size_hint().exact(),
        Some(rope_text().len() as u64)
    );
    let concat = axum_rope::concat(State(ropes)).await;
    assert!(!concat.body().is_shared());
}
