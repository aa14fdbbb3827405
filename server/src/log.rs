//! The log's sink: every line bound for stderr is copied into a fixed
//! buffer that a thread of its own writes out, so a stderr nobody reads
//! never holds a worker. A line that finds the buffer full is dropped and
//! counted ([`dropped`]). [`Repeated`] rate-limits a failure to a line a
//! second.

use std::fmt;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

use crate::clock::Moment;

/// Bytes of lines waiting for stderr, at most; lines fill one buffer of
/// this size while the thread writes the other.
pub const BUFFER: usize = 128 * 1024;

/// Bytes the sink holds, fixed: its two buffers.
pub const MEMORY: usize = 2 * BUFFER;

/// How long lines gather after a small write: a busy server's lines cost
/// one write and no wake per interval.
const GATHER: Duration = Duration::from_millis(2);

/// How long a process waits at exit for its last log lines: a stderr that
/// takes nothing must not keep it from exiting.
pub const AT_EXIT: Duration = Duration::from_secs(2);

/// How often a [`Repeated`] failure is logged, at most.
pub const EVERY: Duration = Duration::from_secs(1);

/// Writes `line` (whole, with its newline) to stderr, or drops and counts
/// it when the buffer is full. Never blocks; allocates nothing.
pub fn line(line: &[u8]) {
    let sink = sink();
    let mut state = sink.lock();
    if state.filling.len() + line.len() > BUFFER {
        state.unreported += 1;
        sink.dropped.fetch_add(1, Ordering::Relaxed);
    } else {
        state.filling.extend_from_slice(line);
    }
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

/// Waits at most `within` for every line taken to be written (before the
/// process exits); whether they were.
pub fn flush(within: Duration) -> bool {
    let Some(sink) = SINK.get() else {
        return true;
    };
    let begun = Moment::now();
    loop {
        let state = sink.lock();
        if state.filling.is_empty() && state.unreported == 0 && !state.writing {
            return true;
        }
        drop(state);
        if Moment::now().since(begun) >= within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `tracing`'s writer: the formatter writes each event whole, as one line.
#[derive(Clone, Copy, Debug)]
pub struct Events;

impl std::io::Write for Events {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        line(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Events {
    type Writer = Events;

    fn make_writer(&'a self) -> Events {
        Events
    }
}

static SINK: OnceLock<Sink> = OnceLock::new();

/// The one sink, made and its thread started on first use.
fn sink() -> &'static Sink {
    SINK.get_or_init(|| {
        // Without the thread, lines are dropped and counted; serving goes on.
        let _ = std::thread::Builder::new()
            .name("log".into())
            .spawn(|| SINK.wait().run());
        Sink {
            state: Mutex::new(Filling {
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
    state: Mutex<Filling>,
    wake: Condvar,
    dropped: AtomicU64,
}

/// The buffer being filled, and the writer's state.
#[derive(Debug)]
struct Filling {
    filling: Vec<u8>,
    /// Dropped since the last line that said how many.
    unreported: u64,
    asleep: bool,
    writing: bool,
}

impl Sink {
    fn lock(&self) -> MutexGuard<'_, Filling> {
        // A panic while holding the lock leaves the buffer whole: go on.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer: swaps its empty buffer for the lines waiting, and writes
    /// them out while new ones fill it.
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
            // A failed write (stderr closed) loses the lines.
            let _ = std::io::stderr().write_all(&out);
            let wrote = out.len();
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
            if wrote < BUFFER / 2 {
                // Sleeping, not waiting: no line pays a wake (a system call).
                std::thread::sleep(GATHER);
            }
        }
    }
}

/// A failure that may repeat many times a second (`accept` out of file
/// descriptors): logged at most once per [`EVERY`] with a count of those
/// not logged.
#[derive(Debug, Default)]
pub struct Repeated {
    logged: Option<Moment>,
    /// Occurrences since, not logged.
    more: u64,
}

impl Repeated {
    /// Notes one occurrence: `Some` when it is to be logged, with what
    /// to append to its line, `None` when it is only counted.
    pub fn occurred(&mut self) -> Option<More> {
        let more = self.due();
        if more.is_none() {
            self.more += 1;
        }
        more
    }

    /// Notes a success: `Some` with the occurrences not logged yet, when a
    /// line is due. One test when there are none.
    #[inline]
    pub fn passed(&mut self) -> Option<More> {
        if self.more == 0 {
            return None;
        }
        self.due()
    }

    /// The occurrences not logged, taken, when none was logged for
    /// [`EVERY`]: a failure that comes and goes stays within the bound.
    fn due(&mut self) -> Option<More> {
        let now = Moment::now();
        let over = match self.logged {
            Some(at) if now.since(at) < EVERY => return None,
            Some(at) => now.since(at),
            None => Duration::ZERO,
        };
        self.logged = Some(now);
        Some(More {
            n: std::mem::take(&mut self.more),
            over,
        })
    }
}

/// Occurrences of a [`Repeated`] failure not logged, and the time since
/// the last one that was: ` (37 more in the last 1.0s)`, or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct More {
    /// Occurrences not logged.
    pub n: u64,
    /// Time since the last one logged.
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
        assert_eq!(r.passed(), None);
        assert_eq!(r.occurred().map(|m| m.to_string()), Some(String::new()));
        for _ in 0..37 {
            assert_eq!(r.occurred(), None);
            // Successes between failures log nothing within the second.
            assert_eq!(r.passed(), None);
        }
        r.logged = r.logged.map(|at| at.before(EVERY));
        let more = r.occurred().unwrap();
        assert_eq!(more.n, 37);
        assert!(
            more.to_string().starts_with(" (37 more in the last 1."),
            "{more}"
        );
        assert_eq!(r.occurred(), None);
        assert_eq!(r.passed(), None);
        r.logged = r.logged.map(|at| at.before(EVERY));
        // Stopped: the one left is logged on the next success.
        assert_eq!(r.passed().map(|m| m.n), Some(1));
        assert_eq!(r.passed(), None);
    }

    #[test]
    fn lines_are_written_whole_or_dropped_and_counted() {
        let before = dropped();
        line(b"");
        let long = vec![b'x'; BUFFER + 1];
        line(&long);
        assert_eq!(dropped(), before + 1);
        // The writer, asleep, is woken to say so.
        assert!(flush(Duration::from_secs(5)));
    }
}
