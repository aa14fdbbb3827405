//! Whether a client takes a response fast enough to keep its connection,
//! judged by what it acknowledges ([`Socket::acknowledged`]) while a write
//! waits for it: [`Pace`], one per connection.
//!
//! Two rules, both measured over a *send period*: from the first write
//! that waits after the connection last read a request, until it reads
//! again.
//! - **Stopped**: nothing acknowledged for `--send-timeout`, or for three
//!   times the longest wait between two acknowledgements seen in the
//!   period, whichever is longer, and `--min-send-rate-grace` more.
//!   A slow reader's receive window reopens in steps — on loopback's 64 KiB
//!   segments, about 64 KiB at a time — so a steady reader at 25 KB/s
//!   acknowledges nothing for seconds, then a step: the wait it showed
//!   before is what the next may take.
//! - **Too slow** (as Kestrel's `MinResponseDataRate`): once the client has
//!   acknowledged something in the period, it must average
//!   `--min-send-rate` from then on, after `--min-send-rate-grace`: at time
//!   `t` after that first step, the bytes acknowledged since the period
//!   began must be at least `rate × (t − grace)`. The first step is
//!   counted, so a reader whose steps come at its own steady rate keeps
//!   ahead however large they are; one that trickles a few bytes every
//!   few seconds does not.
//!
//! Checked only while a write waits, at most every quarter of the shorter
//! of the two times, so a connection whose writes complete costs nothing.

use std::time::Duration;

use super::Ended;
use crate::clock::Moment;

/// The rules a client that a write waits for is held to (`Pace`, one per
/// connection, judges by them).
#[derive(Clone, Copy, Debug)]
pub struct PaceRules {
    /// `--send-timeout`: the least time a stopped client is kept.
    pub send_timeout: Duration,
    /// `--min-send-rate`: bytes per second a client must acknowledge on
    /// average.
    pub min_rate: u64,
    /// `--min-send-rate-grace`: the time before the rate counts.
    pub grace: Duration,
}

/// How many times the longest wait between two acknowledgements a client
/// may go without one: steps vary (a window half drained, then three
/// quarters), and are seen only at a check.
const STEP_SLACK: u32 = 3;

/// The least time between two checks.
const CHECK_LEAST: Duration = Duration::from_millis(100);

/// One connection's judge of its client's pace: what its send period has
/// seen, if one is on. Boxed, and made only when a write waits, so that
/// every idle connection's task holds a pointer, not the period.
#[derive(Debug, Default)]
pub(super) struct Pace {
    period: Option<Box<Period>>,
}

/// What a send period has seen.
#[derive(Clone, Copy, Debug)]
struct Period {
    /// What was acknowledged when its first write waited.
    base: u64,
    /// When the client last acknowledged more, and how much it had then.
    last: Moment,
    acked: u64,
    /// When the first acknowledgement of the period was seen.
    first_step: Option<Moment>,
    /// The longest wait between two acknowledgements seen.
    longest: Duration,
}

impl Pace {
    /// Ends the send period: the connection reads a request.
    #[inline]
    pub(super) fn reset(&mut self) {
        self.period = None;
    }

    /// A write waits at `now`, the client having acknowledged `acked`
    /// (`None`: unknown); when to check next. Begins a period if none is on.
    pub(super) fn waiting(&mut self, rules: &PaceRules, now: Moment, acked: Option<u64>) -> Moment {
        let period = **self.period.get_or_insert_with(|| {
            let acked = acked.unwrap_or(0);
            Box::new(Period {
                base: acked,
                last: now,
                acked,
                first_step: None,
                longest: Duration::ZERO,
            })
        });
        rules.next_check(&period, now)
    }

    /// A check at `now`, the write still waiting and the client having
    /// acknowledged `acked`: when to check next, or how the connection ends.
    pub(super) fn check(
        &mut self,
        rules: &PaceRules,
        now: Moment,
        acked: Option<u64>,
    ) -> Result<Moment, Ended> {
        let Some(period) = self.period.as_mut() else {
            return Ok(self.waiting(rules, now, acked));
        };
        if let Some(acked) = acked.filter(|&a| a > period.acked) {
            period.longest = period.longest.max(now.since(period.last));
            period.last = now;
            period.acked = acked;
            period.first_step.get_or_insert(now);
        }
        let period = **period;
        if now >= rules.stopped_at(&period) {
            return Err(Ended::SendTimeout);
        }
        if rules.too_slow_at(&period).is_some_and(|at| now >= at) {
            return Err(Ended::TooSlow);
        }
        Ok(rules.next_check(&period, now))
    }
}

impl PaceRules {
    /// When a client that acknowledges nothing more counts as stopped.
    fn stopped_at(&self, p: &Period) -> Moment {
        // The grace on top: a window's steps vary in size and in time (the
        // first one may come at once, the next one seconds later).
        let wait = (p.longest * STEP_SLACK).max(self.send_timeout) + self.grace;
        p.last.after(wait)
    }

    /// When the client falls below the minimum rate unless it acknowledges
    /// more; `None` before its first step.
    fn too_slow_at(&self, p: &Period) -> Option<Moment> {
        let first = p.first_step?;
        let rate = self.min_rate.max(1);
        let earned = Duration::from_millis((p.acked - p.base).saturating_mul(1000) / rate);
        Some(first.after(self.grace).after(earned))
    }

    /// The next check: at a deadline, or sooner, to see steps as they come.
    fn next_check(&self, p: &Period, now: Moment) -> Moment {
        let every = (self.send_timeout.min(self.grace) / 4).max(CHECK_LEAST);
        let mut at = now.after(every).min(self.stopped_at(p));
        if let Some(slow) = self.too_slow_at(p) {
            at = at.min(slow);
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: PaceRules = PaceRules {
        send_timeout: Duration::from_secs(3),
        min_rate: 240,
        grace: Duration::from_secs(5),
    };

    /// A moment well after the clock's start.
    fn now() -> Moment {
        Moment::default().after(Duration::from_secs(1000))
    }

    /// A period that began `ago` ms before [`now`] with `base` acknowledged.
    fn pace_since(ago: u64, base: u64) -> Pace {
        let began = now().before(Duration::from_millis(ago));
        Pace {
            period: Some(Box::new(Period {
                base,
                last: began,
                acked: base,
                first_step: None,
                longest: Duration::ZERO,
            })),
        }
    }

    #[test]
    fn a_client_that_acknowledges_nothing_is_stopped_after_the_timeout_and_grace() {
        assert!(pace_since(7_900, 0).check(&RULES, now(), Some(0)).is_ok());
        assert!(matches!(
            pace_since(8_100, 0).check(&RULES, now(), Some(0)),
            Err(Ended::SendTimeout)
        ));
        assert!(matches!(
            pace_since(8_100, 0).check(&RULES, now(), None),
            Err(Ended::SendTimeout)
        ));
    }

    #[test]
    fn steps_as_long_apart_as_before_are_waited_for() {
        let mut pace = pace_since(0, 0);
        let p = pace.period.as_mut().unwrap();
        p.longest = Duration::from_secs(4);
        p.first_step = Some(p.last);
        p.acked = 100_000;
        // Quiet for 16 s after a step that came 4 s after the one before:
        // within three times that and the grace.
        p.last = p.last.before(Duration::from_secs(16));
        assert!(pace.check(&RULES, now(), Some(100_000)).is_ok());
        let p = pace.period.as_mut().unwrap();
        p.last = p.last.before(Duration::from_secs(2));
        assert!(matches!(
            pace.check(&RULES, now(), Some(100_000)),
            Err(Ended::SendTimeout)
        ));
    }

    #[test]
    fn a_trickle_below_the_rate_is_too_slow_after_the_grace() {
        let mut pace = pace_since(0, 0);
        // A step of 576 bytes 8 s ago (earning 2.4 s), then more steps of a
        // few bytes: 5 s of grace and 2.4 s earned are past.
        let p = pace.period.as_mut().unwrap();
        p.first_step = Some(now().before(Duration::from_secs(8)));
        p.acked = 576;
        p.longest = Duration::from_secs(1);
        assert!(matches!(
            pace.check(&RULES, now(), Some(600)),
            Err(Ended::TooSlow)
        ));
        // At the rate, it is kept.
        let mut pace = pace_since(0, 0);
        let p = pace.period.as_mut().unwrap();
        p.first_step = Some(now().before(Duration::from_secs(8)));
        assert!(pace.check(&RULES, now(), Some(8 * 240)).is_ok());
    }
}
