//! Every deadline a connection keeps: the [`Timeouts`], the deadline each
//! wait gets ([`Deadlines`]), and the client's pace judged around a write
//! ([`in_time`], `pace.rs`). **No timer work for a request that arrives in time**: the
//! one [`Timer`] is moved only when it would fire late; one that fires early
//! is moved then, once ([`Timer::poll_passed`]), so a keep-alive
//! connection's timer moves about once per `--idle-timeout`.

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};
use std::time::Duration;

use super::pace::{Pace, PaceRules};
use super::timers::Timer;
use super::{Ended, Socket};
use crate::clock::Moment;
use crate::session::Waiting;

/// The connection's timeouts.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// To complete the TLS handshake (`--handshake-timeout`).
    pub handshake: Duration,
    /// To receive a whole request head, from its first byte
    /// (`--head-timeout`).
    pub head: Duration,
    /// To keep an idle keep-alive connection open (`--idle-timeout`).
    pub idle: Duration,
    /// How a client that a write waits for is judged (`--send-timeout`,
    /// `--min-send-rate`, `--min-send-rate-grace`).
    pub pace: PaceRules,
    /// To receive a whole request body, from the end of its head, before
    /// what its payload earns (`--body-timeout`).
    pub body: Duration,
    /// Bytes of payload that earn a body a second more (`--body-min-rate`;
    /// 0: none).
    pub body_min_rate: u64,
    /// The most a body may take in all, credit included
    /// (`--max-body-time`, at least `body`).
    pub max_body: Duration,
}

impl Timeouts {
    /// How long after its head a body of which `payload` bytes have arrived
    /// may take in all: only payload earns time, never framing, and never
    /// past `--max-body-time`, so a fast body cannot buy a long hold.
    pub fn body_deadline(&self, payload: u64) -> Duration {
        let earned = match self.body_min_rate {
            0 => Duration::ZERO,
            rate => Duration::from_millis(payload.saturating_mul(1000) / rate),
        };
        (self.body + earned).min(self.max_body.max(self.body))
    }
}

/// When the head and the body being read began to arrive, each with the
/// count of requests answered then (a new count is a new request, with a
/// deadline of its own); and when the body's payload last grew.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    head: Option<(u64, Moment)>,
    body: Option<(u64, Moment)>,
    /// Payload bytes of the body as last seen, and when they last grew.
    progress: (u64, Option<Moment>),
}

impl Deadlines {
    /// The deadline for what the session is waiting for. A body gets
    /// `--body-timeout` plus its earned credit (as Apache's `MinRate`), and
    /// never more than `--body-timeout` after its payload last grew: a timer
    /// restarted per read would let one byte per timeout hold a connection
    /// forever, and credit alone would buy a long silence.
    pub(super) fn next(&mut self, waiting: Waiting, served: u64, t: &Timeouts) -> Moment {
        let now = Moment::now();
        let began = |slot: &mut Option<(u64, Moment)>| match *slot {
            Some((n, t)) if n == served => t,
            _ => slot.insert((served, now)).1,
        };
        match waiting {
            Waiting::Idle => now.after(t.idle),
            Waiting::Head => began(&mut self.head).after(t.head),
            Waiting::Body { payload } => {
                let start = began(&mut self.body);
                let grew = match self.progress {
                    (seen, Some(at)) if start <= at && seen == payload => at,
                    _ => {
                        self.progress = (payload, Some(now));
                        now
                    }
                };
                start
                    .after(t.body_deadline(payload))
                    .min(grew.after(t.body))
            }
        }
    }
}

/// Polls `op` on `io` until it is ready, failing as `pace` judges the
/// client while it stays pending ([`Ended::SendTimeout`]: stopped,
/// [`Ended::TooSlow`]: below the minimum rate): a slow reader keeps its
/// connection, one that stops does not. Arms `timer` only when `op` is
/// pending.
pub(super) async fn in_time<S: Socket, T>(
    pace: &mut Pace,
    rules: &PaceRules,
    timer: &Timer,
    io: &mut S,
    mut op: impl FnMut(&mut S, &mut Context<'_>) -> Poll<io::Result<T>>,
) -> Result<T, Ended> {
    let mut next: Option<Moment> = None;
    poll_fn(|cx| loop {
        if let Poll::Ready(r) = op(io, cx) {
            return Poll::Ready(r.map_err(Ended::from));
        }
        let check =
            *next.get_or_insert_with(|| pace.waiting(rules, Moment::now(), io.acknowledged()));
        if timer.poll_passed(check, cx).is_pending() {
            return Poll::Pending;
        }
        match pace.check(rules, Moment::now(), io.acknowledged()) {
            Ok(check) => next = Some(check),
            Err(ended) => return Poll::Ready(Err(ended)),
        }
    })
    .await
}
