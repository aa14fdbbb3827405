//! The access log (`--access-log`): one line per response, in either
//! [`LogFormat`] (docs/operations.md shows both), written once its last byte
//! has gone to the socket. The request is noted as it is routed
//! (`Observe::begun`), its line rendered when it is answered
//! (`Observe::answered`), and written when the output has passed its end
//! (`Observe::sent`). Not a `tracing` event: its formatter made a line cost
//! more than the request. Field values are escaped as nginx does and cut at
//! [`FIELD_MOST`] bytes. A connection's waiting lines fit one fixed buffer
//! ([`AccessLog::memory`], in its base); a line that does not fit writes the
//! oldest early.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::SystemTime;

use crate::clock::Moment;
use crate::h1::RequestHead;
use crate::service::Answered;

/// The format of the access log's lines (`--access-log-format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum LogFormat {
    /// `key=value` pairs, duration to the last byte included.
    Unflat,
    /// The Combined Log Format (Apache's and nginx's `combined`).
    Combined,
    /// One JSON object per line, for a log pipeline, in the events'
    /// schema: `timestamp` (RFC 3339), `level`, `message` (`access`),
    /// `peer`, `method`, `uri`, `version`, `host`, `status`, `bytes`,
    /// `duration` (seconds, to the last byte), `referer`, `user_agent`,
    /// `target` (`unflat_server::access`).
    Json,
}

/// The most bytes of a field value a line keeps (`Host`, `Referer`,
/// `User-Agent`).
pub const FIELD_MOST: usize = 256;

thread_local! {
    /// The line being written, its buffer kept from one line to the next.
    static LINE: std::cell::RefCell<String> = std::cell::RefCell::new(String::with_capacity(512));
}

/// Lines a connection's buffer holds while they wait, at their longest.
const LINES_WAITING: usize = 4;

/// One connection's access log: one pointer without `--access-log` (every
/// idle connection keeps it).
#[derive(Debug, Default)]
pub(super) struct AccessLog {
    on: Option<Box<Log>>,
}

#[derive(Debug)]
struct Log {
    format: LogFormat,
    /// Rendered once.
    peer: String,
    /// The request being answered (a session answers one at a time).
    request: Noted,
    /// Lines rendered up to their duration, waiting for their responses'
    /// last bytes; their ends in `waiting`.
    text: String,
    waiting: VecDeque<Waiting>,
    /// A refusal of a head never read, queued and waiting for what its
    /// line held ([`AccessLog::note_refused`]) to be rendered.
    unheard: Option<Answered<()>>,
}

/// What is noted of the request being answered, in one buffer.
#[derive(Debug)]
struct Noted {
    /// Method, target, version, host, referer, user agent, one after the
    /// other; `ends` marks where each ends.
    text: String,
    ends: [usize; 6],
}

/// A line waiting for its response's last byte.
#[derive(Debug)]
struct Waiting {
    /// Where the response ends in the queue's output.
    end: u64,
    /// Where the line ends in `Log::text`.
    at: usize,
    began: Moment,
}

impl AccessLog {
    /// Bytes a connection's access log holds at most, for request lines of
    /// at most `request_line` bytes.
    pub(super) fn memory(request_line: usize) -> usize {
        let line = noted_most(request_line);
        line + LINES_WAITING * line + 64
    }

    /// A log of the requests from `peer` (`-` when unknown), whose lines
    /// are at most `request_line` bytes long, in `format`; off without one.
    pub(super) fn new(
        format: Option<LogFormat>,
        request_line: usize,
        peer: Option<SocketAddr>,
    ) -> AccessLog {
        let line = noted_most(request_line);
        AccessLog {
            on: format.map(|format| {
                Box::new(Log {
                    format,
                    peer: match (peer, format) {
                        (None, _) => "-".to_string(),
                        (Some(peer), LogFormat::Unflat | LogFormat::Json) => peer.to_string(),
                        (Some(peer), LogFormat::Combined) => peer.ip().to_string(),
                    },
                    request: Noted {
                        text: String::with_capacity(line),
                        ends: [0; 6],
                    },
                    text: String::with_capacity(LINES_WAITING * line),
                    waiting: VecDeque::with_capacity(LINES_WAITING),
                    unheard: None,
                })
            }),
        }
    }

    /// Notes the request whose head is `head`, about to be answered.
    #[inline]
    pub(super) fn note(&mut self, head: &RequestHead<'_>) {
        if self.on.is_some() {
            let version = if head.version == 0 {
                "HTTP/1.0"
            } else {
                "HTTP/1.1"
            };
            self.note_parts(head.method, head.target, version, |n| head.field(n));
        }
    }

    /// Notes the request about to be answered: its method, target and
    /// version (`-` for a request refused before its head was read), and
    /// the fields the lines name.
    fn note_parts<'f>(
        &mut self,
        method: &str,
        target: &str,
        version: &str,
        field_of: impl Fn(&str) -> Option<&'f [u8]>,
    ) {
        self.note_bytes(
            method.as_bytes(),
            target.as_bytes(),
            version.as_bytes(),
            field_of,
        );
    }

    /// [`AccessLog::note_parts`] of bytes as sent.
    fn note_bytes<'f>(
        &mut self,
        method: &[u8],
        target: &[u8],
        version: &[u8],
        field_of: impl Fn(&str) -> Option<&'f [u8]>,
    ) {
        let Some(log) = &mut self.on else {
            return;
        };
        let field = |name: &str| field_of(name).unwrap_or(b"-");
        let n = &mut log.request;
        n.text.clear();
        let json = log.format == LogFormat::Json;
        let mut push = |i: usize, text: &mut String, bytes: &[u8]| {
            escape(text, bytes, json);
            n.ends[i] = text.len();
        };
        push(0, &mut n.text, method);
        push(1, &mut n.text, target);
        push(2, &mut n.text, version);
        push(3, &mut n.text, field("host"));
        push(4, &mut n.text, field("referer"));
        push(5, &mut n.text, field("user-agent"));
    }

    /// Notes a request refused before its head was read, whose first line
    /// is `line` as sent: its method, target and version as far as spaces
    /// part them (each escaped and cut), no fields; and renders the line of
    /// its refusal, queued before.
    pub(super) fn note_refused(&mut self, line: &[u8]) {
        let Some(unheard) = self.on.as_mut().and_then(|l| l.unheard.take()) else {
            return;
        };
        let mut parts = line.splitn(3, |&b| b == b' ');
        let mut next = || parts.next().filter(|p| !p.is_empty()).unwrap_or(b"-");
        let (method, target, version) = (next(), next(), next());
        self.note_bytes(method, target, version, |_| None);
        self.render(&unheard);
    }

    /// Renders the line of the response `a` tells of, to be written by
    /// [`AccessLog::sent`]; one to a head never read (no label) waits for
    /// what its line held ([`AccessLog::note_refused`]).
    #[inline]
    pub(super) fn queued<L>(&mut self, a: &Answered<L>) {
        // Inlined: with the log off, one test is all a response pays.
        let Some(log) = &mut self.on else {
            return;
        };
        if a.label.is_some() {
            self.render(a);
        } else {
            log.unheard = Some(Answered {
                label: None,
                status: a.status,
                body_bytes: a.body_bytes,
                began: a.began,
                queued: a.queued,
                ends: a.ends,
            });
        }
    }

    /// A refusal never told what its line held is logged with `-` for it.
    #[cold]
    fn unheard(&mut self) {
        if let Some(unheard) = self.on.as_mut().and_then(|l| l.unheard.take()) {
            self.note_parts("-", "-", "-", |_| None);
            self.render(&unheard);
        }
    }

    fn render<L>(&mut self, a: &Answered<L>) {
        let Some(log) = &mut self.on else {
            return;
        };
        let (status, bytes) = (a.status.code(), a.body_bytes);
        let line_most = log.request.text.capacity() + 256;
        while !log.waiting.is_empty() && log.text.len() + line_most > log.text.capacity() {
            // No room: the oldest is written now.
            log.write_first();
        }
        let n = &log.request;
        let part = |i: usize| &n.text[if i == 0 { 0 } else { n.ends[i - 1] }..n.ends[i]];
        let t = &mut log.text;
        let _ = match log.format {
            LogFormat::Unflat => write!(
                t,
                " access peer={} method={} target={} version={} host=\"{}\" status={status} bytes={bytes}",
                log.peer,
                part(0),
                part(1),
                part(2),
                part(3),
            ),
            LogFormat::Combined => {
                t.push_str(&log.peer);
                t.push_str(" - - [");
                clf_time(t, SystemTime::now());
                let _ = write!(t, "] \"{} {} {}\" {status} ", part(0), part(1), part(2));
                match bytes {
                    0 => t.push('-'),
                    n => {
                        let _ = write!(t, "{n}");
                    }
                }
                write!(t, " \"{}\" \"{}\"", part(4), part(5))
            }
            LogFormat::Json => write!(
                t,
                "\"peer\":\"{}\",\"method\":\"{}\",\"uri\":\"{}\",\"version\":\"{}\",\"host\":\"{}\",\"status\":{status},\"bytes\":{bytes}",
                log.peer,
                part(0),
                part(1),
                part(2),
                part(3),
            ),
        };
        if log.format == LogFormat::Json {
            // The duration goes here, stamped when the line is written.
            t.push('\u{0}');
            let _ = write!(
                t,
                ",\"referer\":\"{}\",\"user_agent\":\"{}\",\"target\":\"{ACCESS_TARGET}\"}}",
                part(4),
                part(5)
            );
        }
        if log.format == LogFormat::Unflat {
            // The duration goes between these and the fields that follow.
            t.push('\u{0}');
            let _ = write!(t, " referer=\"{}\" user_agent=\"{}\"", part(4), part(5));
        }
        log.waiting.push_back(Waiting {
            end: a.ends,
            at: t.len(),
            began: a.began,
        });
    }

    /// Writes the lines of the responses written whole, `total` bytes of
    /// the connection's output being written.
    #[inline]
    pub(super) fn sent(&mut self, total: u64) {
        if self.on.as_ref().is_some_and(|l| l.unheard.is_some()) {
            self.unheard();
        }
        if let Some(log) = &mut self.on {
            while log.waiting.front().is_some_and(|w| w.end <= total) {
                log.write_first();
            }
        }
    }
}

impl Log {
    /// Writes the oldest waiting line, stamped now, to stderr.
    fn write_first(&mut self) {
        LINE.with_borrow_mut(|out| {
            if self.take_first(out) {
                crate::log::line(out.as_bytes());
            }
        });
    }

    /// Renders the oldest waiting line, stamped, into `out`, and lets it
    /// go; false when none waits.
    fn take_first(&mut self, out: &mut String) -> bool {
        let Some(w) = self.waiting.pop_front() else {
            return false;
        };
        let line = &self.text[..w.at];
        self.stamp(out, line, &w);
        self.text.drain(..w.at);
        for later in &mut self.waiting {
            later.at -= w.at;
        }
        true
    }

    fn stamp(&self, out: &mut String, line: &str, w: &Waiting) {
        out.clear();
        match self.format {
            LogFormat::Unflat => {
                let (before, after) = line.split_once('\u{0}').unwrap_or((line, ""));
                let _ = write!(
                    out,
                    "{}{before} duration_us={}{after}",
                    humantime::format_rfc3339_micros(SystemTime::now()),
                    Moment::now().since(w.began).as_micros()
                );
            }
            LogFormat::Combined => out.push_str(line),
            LogFormat::Json => {
                let (before, after) = line.split_once('\u{0}').unwrap_or((line, ""));
                let micros = Moment::now().since(w.began).as_micros();
                // The events' schema (events.rs: tracing's JSON, flattened):
                // `timestamp`, `level`, `message`, the fields, `target`.
                let _ = write!(
                    out,
                    "{{\"timestamp\":\"{}\",\"level\":\"INFO\",\"message\":\"access\",{before},\"duration\":{}.{:06}{after}",
                    humantime::format_rfc3339_micros(SystemTime::now()),
                    micros / 1_000_000,
                    micros % 1_000_000,
                );
            }
        }
        out.push('\n');
    }
}

impl Drop for AccessLog {
    /// Lines still waiting when the connection ends (it was reset, or
    /// timed out) are written: each response queued has its line.
    fn drop(&mut self) {
        if let Some(log) = &mut self.on {
            while !log.waiting.is_empty() {
                log.write_first();
            }
        }
    }
}

/// The most bytes a request's noted parts take: the line, three field
/// values of [`FIELD_MOST`] bytes each written as `\u00HH` at worst, the
/// rest.
fn noted_most(request_line: usize) -> usize {
    request_line + 3 * 6 * FIELD_MOST + 256
}

/// The `target` of an access record in JSON, as an event's names its
/// module: a log pipeline tells the two apart by it.
const ACCESS_TARGET: &str = "unflat_server::access";

/// Appends `bytes` with `"`, `\` and every byte outside printable ASCII as
/// `\xHH`, cut at [`FIELD_MOST`] bytes. In JSON (`json`), text is text:
/// UTF-8 is written as the characters it encodes, `"`, `\` and control
/// characters are escaped as a JSON string escapes them, and a byte that
/// is not UTF-8 is written `\\xHH` (the four characters `\xHH` once
/// decoded).
fn escape(text: &mut String, bytes: &[u8], json: bool) {
    let bytes = &bytes[..bytes.len().min(FIELD_MOST)];
    let plain = |b: &u8| (0x20..0x7f).contains(b) && *b != b'"' && *b != b'\\';
    if bytes.iter().all(plain) {
        // What nearly every value is: copied as it is.
        text.push_str(std::str::from_utf8(bytes).unwrap_or_default());
        return;
    }
    if json {
        for chunk in bytes.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '"' | '\\' => {
                        text.push('\\');
                        text.push(c);
                    }
                    c if c.is_control() => {
                        let _ = write!(text, "\\u{:04x}", u32::from(c));
                    }
                    c => text.push(c),
                }
            }
            for b in chunk.invalid() {
                let _ = write!(text, "\\\\x{b:02X}");
            }
        }
        return;
    }
    for &b in bytes {
        if plain(&b) {
            text.push(char::from(b));
        } else {
            let _ = write!(text, "\\x{b:02X}");
        }
    }
}

/// Appends `t` as the Common Log Format writes time:
/// `02/Dec/2026:10:00:39 +0000`.
fn clf_time(out: &mut String, t: SystemTime) {
    // httpdate writes "Wed, 02 Dec 2026 10:00:39 GMT", without allocating.
    let mut http = [0u8; 29];
    let _ = std::io::Write::write_fmt(
        &mut &mut http[..],
        format_args!("{}", httpdate::HttpDate::from(t)),
    );
    let http = std::str::from_utf8(&http).unwrap_or_default();
    let mut parts = http.split(' ').skip(1);
    for sep in ["/", "/", ":", " +0000"] {
        out.push_str(parts.next().unwrap_or("-"));
        out.push_str(sep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first value of a field by name, in any case, as a head's.
    fn lookup<'f>(fields: &'f [httparse::Header<'f>]) -> impl Fn(&str) -> Option<&'f [u8]> {
        move |name| {
            fields
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(name))
                .map(|f| f.value)
        }
    }

    #[test]
    fn field_values_are_escaped_and_cut() {
        let mut t = String::new();
        escape(&mut t, b"a\"b\\c\x01\xff d", false);
        assert_eq!(t, "a\\x22b\\x5Cc\\x01\\xFF d");
        let mut json = String::new();
        escape(&mut json, "a\"b\\c\x01\u{e9}\u{20ac} d".as_bytes(), true);
        assert_eq!(json, "a\\\"b\\\\c\\u0001\u{e9}\u{20ac} d", "text is text");
        json.clear();
        escape(&mut json, b"\xc3\xa9\xff", true);
        assert_eq!(json, "\u{e9}\\\\xFF", "a byte that is not UTF-8, named");
        let mut long = String::new();
        escape(&mut long, &[b'x'; FIELD_MOST + 10], false);
        assert_eq!(long.len(), FIELD_MOST);
    }

    #[test]
    fn time_is_written_as_the_common_log_format_writes_it() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_205_639);
        let mut out = String::new();
        clf_time(&mut out, t);
        assert_eq!(out, "02/Dec/2026:10:00:39 +0000");
    }

    /// A log of `format` from 127.0.0.1:53844, with requests of lines of
    /// at most 64 bytes.
    fn log(format: LogFormat) -> AccessLog {
        AccessLog::new(Some(format), 64, "127.0.0.1:53844".parse().ok())
    }

    /// What the core tells of a 200 with `bytes` of body that ends at `ends`.
    fn answered(label: Option<()>, bytes: usize, ends: u64) -> Answered<()> {
        Answered {
            label,
            status: unflat::head::Status::OK,
            body_bytes: bytes,
            began: Moment::now(),
            queued: Moment::now(),
            ends,
        }
    }

    /// The oldest waiting line of `log`, as it would be written.
    fn first(log: &mut AccessLog) -> String {
        let mut out = String::new();
        assert!(
            log.on.as_mut().unwrap().take_first(&mut out),
            "a line waits"
        );
        out
    }

    /// The bytes of its buffers.
    fn capacity(log: &AccessLog) -> usize {
        let l = log.on.as_ref().unwrap();
        l.request.text.capacity() + l.text.capacity()
    }

    #[test]
    fn lines_are_written_in_each_format() {
        let fields = [
            httparse::Header {
                name: "Host",
                value: b"localhost:3000",
            },
            httparse::Header {
                name: "user-agent",
                value: b"curl/8.5.0",
            },
        ];
        let target = "/end-string/3?kind=%74wobyte";
        let mut unflat = log(LogFormat::Unflat);
        unflat.note_parts("GET", target, "HTTP/1.1", lookup(&fields));
        unflat.queued(&answered(Some(()), 9, 100));
        let line = first(&mut unflat);
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(time.len() == 27 && time.ends_with('Z'), "{line}");
        // The duration, on the coarse clock, is 0 unless it ticked.
        let (rest, duration) = rest.split_once(" duration_us=").unwrap();
        let (duration, after) = duration.split_once(' ').unwrap();
        assert!(duration.parse::<u64>().is_ok(), "{line}");
        assert_eq!(
            rest,
            format!("access peer=127.0.0.1:53844 method=GET target={target} version=HTTP/1.1 host=\"localhost:3000\" status=200 bytes=9")
        );
        assert_eq!(after, "referer=\"-\" user_agent=\"curl/8.5.0\"\n");
        let mut combined = log(LogFormat::Combined);
        combined.note_parts("GET", target, "HTTP/1.1", lookup(&fields));
        combined.queued(&answered(Some(()), 0, 100));
        let line = first(&mut combined);
        let (before, after) = line.split_once(" [").unwrap();
        assert_eq!(before, "127.0.0.1 - -");
        assert_eq!(
            &after[26..],
            format!("] \"GET {target} HTTP/1.1\" 200 - \"-\" \"curl/8.5.0\"\n")
        );
        // A head never read: its line as sent once the session tells it,
        // escaped; no fields.
        combined.queued(&answered(None, 3, 200));
        combined.note_refused(b"GET /a\"b HTTP/1.1");
        let line = first(&mut combined);
        assert!(
            line.ends_with("] \"GET /a\\x22b HTTP/1.1\" 200 3 \"-\" \"-\"\n"),
            "{line}"
        );
        // Never told: `-` for each part, before its response is written.
        combined.queued(&answered(None, 3, 300));
        combined.sent(0);
        let line = first(&mut combined);
        assert!(line.ends_with("] \"- - -\" 200 3 \"-\" \"-\"\n"), "{line}");
        let mut json = log(LogFormat::Json);
        json.note_parts("GET", "/a\"b", "HTTP/1.1", lookup(&fields));
        json.queued(&answered(Some(()), 9, 100));
        let line = first(&mut json);
        let (time, rest) = line
            .split_once("\",\"level\":\"INFO\",\"message\":\"access\",")
            .unwrap();
        assert!(
            time.starts_with("{\"timestamp\":\"") && time.ends_with('Z'),
            "{line}"
        );
        let (rest, duration) = rest.split_once(",\"duration\":").unwrap();
        assert_eq!(
            rest,
            "\"peer\":\"127.0.0.1:53844\",\"method\":\"GET\",\"uri\":\"/a\\\"b\",\"version\":\"HTTP/1.1\",\"host\":\"localhost:3000\",\"status\":200,\"bytes\":9"
        );
        let (seconds, after) = duration.split_once(',').unwrap();
        assert!(seconds.parse::<f64>().is_ok(), "{line}");
        assert_eq!(
            after,
            "\"referer\":\"-\",\"user_agent\":\"curl/8.5.0\",\"target\":\"unflat_server::access\"}\n"
        );
    }

    #[test]
    fn lines_wait_for_their_responses_and_never_pass_their_buffer() {
        let mut log = log(LogFormat::Combined);
        let before = capacity(&log);
        let fields = [httparse::Header {
            name: "User-Agent",
            value: b"t",
        }];
        for i in 0..50u64 {
            log.note_parts("GET", "/x", "HTTP/1.1", lookup(&fields));
            log.queued(&answered(Some(()), 3, i * 10 + 10));
        }
        let waiting = log.on.as_ref().unwrap().waiting.len();
        assert!((1..=50).contains(&waiting), "{waiting}");
        assert_eq!(capacity(&log), before, "the buffers never grow");
        log.sent(u64::MAX);
        assert!(log.on.as_ref().unwrap().waiting.is_empty());
        assert!(before <= AccessLog::memory(64));
    }
}
