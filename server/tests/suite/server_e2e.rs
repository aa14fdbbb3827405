//! End to end with reqwest: every route, bodies byte-exact, both strategies,
//! over cleartext and over HTTPS.

use crate::common::start_demo;
use crate::common::tls::Cert;
use crate::common::{end_string_body, large_body, sha256, start};
use unflat_server::{Running, Strategy};

/// A server and a reqwest client for it, over cleartext or HTTPS (a
/// certificate for localhost that the client alone trusts).
struct Site {
    server: Running<crate::common::Site>,
    client: reqwest::Client,
    /// `http://127.0.0.1:PORT` or `https://localhost:PORT`.
    base: String,
    _cert: Option<Cert>,
}

impl Site {
    fn start(strategy: Strategy, tls: bool) -> Site {
        if !tls {
            let server = start(strategy);
            return Site {
                base: format!("http://{}", server.addr()),
                server,
                client: crate::common::tls::reqwest_cleartext(),
                _cert: None,
            };
        }
        let cert = Cert::new(&format!("e2e-{strategy:?}"));
        let server = start_demo(cert.config(strategy)).unwrap();
        Site {
            base: format!("https://localhost:{}", server.addr().port()),
            server,
            client: cert.reqwest(),
            _cert: Some(cert),
        }
    }
}

/// Both transports (TLS or not).
const TRANSPORTS: [bool; 2] = [false, true];

/// Each transport with each strategy.
fn every_site() -> impl Iterator<Item = (bool, Strategy)> {
    TRANSPORTS
        .into_iter()
        .flat_map(|t| [Strategy::Direct, Strategy::Flatten].map(|s| (t, s)))
}

const LENS: [usize; 10] = [0, 1, 4, 64, 1024, 16384, 65535, 65536, 102400, 1_048_576];

async fn get(
    client: &reqwest::Client,
    url: String,
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let res = client
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let (status, headers) = (res.status(), res.headers().clone());
    (status, headers, res.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_string_every_kind_and_length_both_strategies() {
    for (tls, strategy) in every_site() {
        let site = Site::start(strategy, tls);
        let (client, base) = (&site.client, &site.base);
        for kind in ["ascii", "latin1", "twobyte"] {
            for len in LENS {
                let url = format!("{base}/end-string/{len}?kind={kind}");
                let (status, headers, body) = get(client, url).await;
                let expected = end_string_body(len, kind);
                let ctx = format!("{base} {strategy:?} {kind} {len}");
                assert_eq!(status, 200, "{ctx}");
                assert_eq!(
                    headers["content-type"], "text/plain; charset=utf-8",
                    "{ctx}"
                );
                assert_eq!(
                    headers["content-length"],
                    expected.len().to_string().as_str(),
                    "{ctx}"
                );
                assert_eq!(headers["connection"], "keep-alive", "{ctx}");
                assert_eq!(headers["keep-alive"], "timeout=5", "{ctx}");
                assert!(
                    httpdate::parse_http_date(headers["date"].to_str().unwrap()).is_ok(),
                    "{ctx}"
                );
                assert_eq!(sha256(&body), sha256(&expected), "{ctx}");
            }
        }
        // The default kind is ascii.
        let (_, _, body) = get(client, format!("{base}/end-string/7")).await;
        assert_eq!(body, b"aaaaaaa");
        site.server.stop().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_payloads_are_byte_exact() {
    for (tls, strategy) in every_site() {
        let site = Site::start(strategy, tls);
        let (client, base) = (&site.client, &site.base);
        for size in [1 << 20, 64 << 20] {
            let (status, headers, body) = get(client, format!("{base}/large/{size}")).await;
            assert_eq!(status, 200);
            assert_eq!(headers["content-length"], size.to_string().as_str());
            assert_eq!(body.len(), size);
            assert_eq!(
                sha256(&body),
                sha256(&large_body(size)),
                "{base} {strategy:?} {size}"
            );
        }
        site.server.stop().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_echo_and_errors() {
    for tls in TRANSPORTS {
        help_echo_and_errors_on(Site::start(Strategy::Direct, tls)).await;
    }
}

async fn help_echo_and_errors_on(site: Site) {
    use base64::Engine as _;
    let (client, base) = (&site.client, &site.base);

    let (status, _, body) = get(client, format!("{base}/")).await;
    assert_eq!(status, 200);
    let help = String::from_utf8(body).unwrap();
    assert!(
        help.contains("/end-string/{len}") && help.contains("wrk -s wrk_scripts/end-string.lua"),
        "{help}"
    );

    let res = client
        .put(format!("{base}/echo?x=1"))
        .header("X-Test", "héllo")
        .body("payload")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let json = res.text().await.unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    assert!(
        json.starts_with(&format!(
            "{{\"method\":\"{}\",\"target\":\"{}\",\"version\":\"{}\"",
            b64("PUT"),
            b64("/echo?x=1"),
            b64("HTTP/1.1")
        )),
        "{json}"
    );
    assert!(
        json.contains(&format!("[\"{}\",\"{}\"]", b64("x-test"), b64("héllo"))),
        "{json}"
    );
    assert!(
        json.ends_with(&format!("\"body\":\"{}\"}}\n", b64("payload"))),
        "{json}"
    );

    for (path, status, reason) in [
        ("/nope", 404, "no route for /nope"),
        ("/end-string/abc", 400, "len must be a decimal number"),
        (
            "/end-string/16777217",
            400,
            "exceeds the limit of 16777216 characters",
        ),
        ("/end-string/5?kind=utf7", 400, "unknown kind"),
        ("/end-string/5?size=3", 400, "unknown query parameter"),
        ("/large/1073741825", 400, "exceeds the limit"),
        ("/large/99999999999999999999999", 400, "out of range"),
    ] {
        let (s, headers, body) = get(client, format!("{base}{path}")).await;
        let body = String::from_utf8(body).unwrap();
        assert_eq!(s.as_u16(), status, "{path}: {body}");
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
        assert!(body.contains(reason), "{path}: {body}");
    }
    let res = client
        .post(format!("{base}/end-string/4"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "GET, HEAD, OPTIONS");
    let res = client
        .request(reqwest::Method::OPTIONS, format!("{base}/end-string/4"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(res.headers()["allow"], "GET, HEAD, OPTIONS");
    assert!(res.headers().get("content-length").is_none());
    site.server.stop().unwrap();
}
