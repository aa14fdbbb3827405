//! The log's sink: every line bound for stderr (the access log's and
//! `tracing`'s) is copied into a buffer of a fixed size, which one thread
//! of its own writes out, so a stderr nobody reads never holds a worker.
//! A line that finds the buffer full is dropped and counted
//! ([`dropped`], `unflat_log_lines_dropped_total`); once stderr takes bytes
//! again, one line says how many. [`Repeated`] logs a failure that repeats
//! many times a second about once a second, with a count of the others.

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// Bytes of lines waiting for stderr, at most: lines fill one buffer of
/// this size while the thread writes the other out.
pub const BUFFER: usize = 128 * 1024;

/// Bytes the sink holds, fixed: its two buffers.
pub const MEMORY: usize = 2 * BUFFER;

/// How often a [`Repeated`] failure is logged, at most.
pub const EVERY: Duration = Duration::from_secs(1);

/// Writes `line` (one whole line, its newline included) to stderr, in the
/// order lines come; drops and counts it when the buffer is full. Never
/// blocks on stderr, and allocates nothing once the sink is made.
pub fn line(line: &[u8]) {
    let sink = sink();
    let mut state = sink.lock();
    if state.filling.len() + line.len() > BUFFER {
        state.unreported += 1;
        drop(state);
        sink.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    state.filling.extend_from_slice(line);
    // Only a writer asleep is woken: a wake is a system call.
    let wake = std::mem::take(&mut state.asleep);
    drop(state);
    if wake {
        sink.wake.notify_one();
    }
}

/// Lines dropped so far because the buffer was full.
pub fn dropped() -> u64 {
    SINK.get()
        .map_or(0, |sink| sink.dropped.load(Ordering::Relaxed))
}

/// Waits until every line taken has been written, for at most `within`:
/// before the process exits, so that its last lines are not lost, yet
/// without hanging on a stderr that takes nothing.
pub fn flush(within: Duration) {
    let Some(sink) = SINK.get() else {
        return;
    };
    let begun = Instant::now();
    while begun.elapsed() < within {
        let state = sink.lock();
        if state.filling.is_empty() && state.unreported == 0 && !state.writing {
            return;
        }
        drop(state);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `tracing`'s writer (`fmt().with_writer(log::Writer)`): each event,
/// which the formatter writes whole with one `write_all`, is one line.
#[derive(Clone, Copy, Debug)]
pub struct Writer;

impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        line(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Writer {
    type Writer = Writer;

    fn make_writer(&'a self) -> Writer {
        Writer
    }
}

static SINK: OnceLock<Sink> = OnceLock::new();

/// The one sink (stderr is the process's), made and its thread started on
/// first use.
fn sink() -> &'static Sink {
    SINK.get_or_init(|| {
        // Without the thread, lines fill the buffer and are then dropped
        // and counted: the server serves on.
        let _ = std::thread::Builder::new()
            .name("log".into())
            .spawn(|| SINK.wait().run());
        Sink {
            state: Mutex::new(State {
                filling: Vec::with_capacity(BUFFER),
                unreported: 0,
                asleep: false,
                writing: false,
            }),
            wake: Condvar::new(),
            dropped: AtomicU64::new(0),
        }
    })
}

#[derive(Debug)]
struct Sink {
    state: Mutex<State>,
    /// Wakes the writer when a line comes.
    wake: Condvar,
    /// Lines dropped since the start.
    dropped: AtomicU64,
}

#[derive(Debug)]
struct State {
    /// Lines taken and not yet handed to the writer.
    filling: Vec<u8>,
    /// Lines dropped since the last line that said how many.
    unreported: u64,
    /// The writer waits for a line.
    asleep: bool,
    /// The writer is writing lines out.
    writing: bool,
}

impl Sink {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the buffer whole: go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer: takes the lines waiting, leaving its own empty buffer
    /// in their place, and writes them out while new ones fill that one.
    fn run(&self) {
        let mut out = Vec::with_capacity(BUFFER);
        loop {
            let mut state = self.lock();
            state.writing = false;
            while state.filling.is_empty() && state.unreported == 0 {
                state.asleep = true;
                state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.asleep = false;
            state.writing = true;
            std::mem::swap(&mut state.filling, &mut out);
            let unreported = std::mem::take(&mut state.unreported);
            drop(state);
            // A failed write (stderr closed) loses the lines; the server
            // goes on.
            let _ = std::io::stderr().write_all(&out);
            out.clear();
            if unreported > 0 {
                // stderr has just taken bytes again: say what it missed.
                let mut notice = [0u8; 192];
                let mut at = &mut notice[..];
                let _ = writeln!(
                    &mut at,
                    "{}  WARN unflat_server::log: {unreported} log lines dropped: stderr did not take them as fast as they came",
                    humantime::format_rfc3339_micros(SystemTime::now())
                );
                let room = at.len();
                let len = notice.len() - room;
                let _ = std::io::stderr().write_all(&notice[..len]);
            }
        }
    }
}

/// A failure that may repeat many times a second (`accept` out of file
/// descriptors): logged at most once per [`EVERY`], each line counting the
/// occurrences not logged before it.
#[derive(Debug, Default)]
pub struct Repeated {
    /// When it was last logged.
    logged: Option<Instant>,
    /// Occurrences since, not logged.
    more: u64,
}

impl Repeated {
    /// Notes one occurrence: `Some` when it is to be logged, with what
    /// to append to its line, `None` when it is only counted.
    pub fn occurred(&mut self) -> Option<More> {
        let now = Instant::now();
        match self.logged {
            Some(at) if now.duration_since(at) < EVERY => {
                self.more += 1;
                None
            }
            at => {
                let more = More {
                    n: std::mem::take(&mut self.more),
                    over: at.map_or(Duration::ZERO, |at| now.duration_since(at)),
                };
                self.logged = Some(now);
                Some(more)
            }
        }
    }

    /// The occurrences not logged yet, when there are any, once the
    /// failure has stopped; counted from zero again.
    pub fn stopped(&mut self) -> Option<More> {
        let logged = self.logged.take()?;
        let n = std::mem::take(&mut self.more);
        (n > 0).then(|| More {
            n,
            over: logged.elapsed(),
        })
    }
}

/// Occurrences of a [`Repeated`] failure not logged, and the time since
/// the last one that was: ` (37 more in the last 1.0s)`, or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct More {
    /// Occurrences not logged.
    pub n: u64,
    /// Since the last one logged.
    pub over: Duration,
}

impl fmt::Display for More {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.n == 0 {
            return Ok(());
        }
        write!(
            f,
            " ({} more in the last {:.1}s)",
            self.n,
            self.over.as_secs_f64()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_failure_is_logged_once_a_second_with_a_count() {
        let mut r = Repeated::default();
        assert_eq!(r.occurred().map(|m| m.n), Some(0));
        for _ in 0..37 {
            assert_eq!(r.occurred(), None);
        }
        r.logged = r.logged.map(|at| at - EVERY);
        let more = r.occurred().unwrap();
        assert_eq!(more.n, 37);
        assert!(
            more.to_string().starts_with(" (37 more in the last 1."),
            "{more}"
        );
        assert_eq!(r.occurred(), None);
        assert_eq!(r.stopped().map(|m| m.n), Some(1));
        assert_eq!(r.stopped(), None);
        assert_eq!(r.occurred().map(|m| m.to_string()), Some(String::new()));
    }

    #[test]
    fn lines_are_written_whole_or_dropped_and_counted() {
        let before = dropped();
        line(b"");
        let long = vec![b'x'; BUFFER + 1];
        line(&long);
        assert_eq!(dropped(), before + 1);
        flush(Duration::from_secs(5));
        assert!(sink().lock().filling.is_empty());
    }
}
