//! What an operator watches of any service, as of nginx or Envoy: the
//! counters of `/metrics` (`metrics.rs`: responses by label and status,
//! their latency (`latency.rs`), the transport, the memory account, the
//! process (`process.rs`), in either text format (`exposition.rs`)) and the
//! access log (`access.rs`), both fed by one [`Observe`]r, [`Standard`],
//! which any service names as its own. A service labels its responses
//! ([`Label`]: its routes, say) through its reply ([`Labelled`]); one that
//! does not counts them all under `()`.

mod access;
mod exposition;
mod latency;
mod metrics;
#[cfg(feature = "metrics")]
mod process;

use std::net::SocketAddr;

pub use access::{LogFormat, FIELD_MOST};
pub use exposition::{to_prometheus_text, Exposition};
pub use metrics::{Metrics, Report, Tally};
/// The crate a [`Report`] writes its families with.
#[cfg(feature = "metrics")]
pub use prometheus_client;

use access::AccessLog;

use crate::h1::RequestHead;
use crate::service::{Answered, Observe};

/// What responses are counted under on `/metrics` (its `route` label): a
/// small fixed set, such as a service's routes. [`Metrics::new`] checks
/// that [`Label::ALL`] lists each label at its [`Label::index`].
pub trait Label: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// Every label, each at its [`Label::index`]; at most 256.
    const ALL: &'static [Self];
    /// What a response is counted under when the service gave it no
    /// label: the core's refusal of a head it could not read, or its 500
    /// for a panic during a turn.
    const REFUSED: Self;

    /// Its place in [`Label::ALL`].
    fn index(self) -> usize;

    /// Its value on `/metrics`.
    fn name(self) -> &'static str;
}

/// No labels: every response counted under `route="all"`.
impl Label for () {
    const ALL: &'static [()] = &[()];
    const REFUSED: () = ();

    #[inline(always)]
    fn index(self) -> usize {
        0
    }

    fn name(self) -> &'static str {
        "all"
    }
}

/// A reply that names what its response is counted under.
pub trait Labelled<L> {
    /// The label of this reply's response.
    fn label(&self) -> L;
}

/// Every reply is counted under `()`. (A reply that also names labels of
/// its own is counted under them when its observer is a `Standard` of
/// those labels: `making.standard::<Route>()`.)
impl<R> Labelled<()> for R {
    #[inline(always)]
    fn label(&self) {}
}

/// The core's observer: the counters of `/metrics` and the access log
/// (`--access-log`), responses counted under the label `L` their replies
/// name. Cloned as cheaply as an `Arc`: the service keeps a clone to
/// render `/metrics` ([`Standard::metrics`]).
#[derive(Clone, Debug)]
pub struct Standard<L: Label = ()> {
    metrics: Metrics<L>,
    access_log: Option<LogFormat>,
    request_line: usize,
}

impl<L: Label> Standard<L> {
    /// Counting into `metrics`, writing an access log in `access_log`'s
    /// format when there is one, for request lines of at most
    /// `request_line` bytes (`--max-request-line`, which sizes its
    /// buffers). A server's [`Making::standard`](crate::server::Making::standard)
    /// makes one from its configuration.
    pub fn new(metrics: Metrics<L>, access_log: Option<LogFormat>, request_line: usize) -> Self {
        Standard {
            metrics,
            access_log,
            request_line,
        }
    }

    /// The counters, for `/metrics` ([`Metrics::render`]).
    pub fn metrics(&self) -> &Metrics<L> {
        &self.metrics
    }
}

/// What the observer keeps for one connection: its access log's lines
/// waiting for their responses, and the counts of the batch answered.
#[derive(Debug)]
pub struct Watched {
    log: AccessLog,
    tally: Tally,
}

/// The counters and the access log hear of every response, counted under
/// its reply's label.
impl<L: Label, R: Labelled<L>> Observe<R> for Standard<L> {
    type Conn = Watched;
    type Label = L;

    fn open(&self, peer: Option<SocketAddr>) -> Watched {
        Watched {
            log: AccessLog::new(self.access_log, self.request_line, peer),
            tally: Tally::default(),
        }
    }

    fn conn_memory(&self) -> usize {
        match self.access_log {
            Some(_) => AccessLog::memory(self.request_line),
            None => 0,
        }
    }

    fn writes_access_log(&self) -> bool {
        self.access_log.is_some()
    }

    #[inline(always)]
    fn begun(&self, head: &RequestHead<'_>, reply: &R, conn: &mut Watched) -> L {
        conn.log.note(head);
        reply.label()
    }

    fn refused(&self, line: &[u8], conn: &mut Watched) {
        conn.log.note_refused(line);
    }

    #[cfg(feature = "metrics")]
    fn exposition(&self, accept: Option<&[u8]>) -> Option<(&'static str, String)> {
        let format = Exposition::from_accept(accept);
        Some((format.content_type(), self.metrics.render(format)))
    }

    #[inline(always)]
    fn answered(&self, answered: Answered<L>, conn: &mut Watched) {
        let label = answered.label.unwrap_or(L::REFUSED);
        // The clock ticks in milliseconds: no Duration on the way.
        let us = answered.took_ms().saturating_mul(1000);
        self.metrics
            .tally(&mut conn.tally, label, answered.status, us);
        conn.log.queued(&answered);
    }

    #[inline]
    fn turn_ended(&self, conn: &mut Watched) {
        self.metrics.count(&mut conn.tally);
    }

    #[inline]
    fn sent(&self, total: u64, conn: &mut Watched) {
        conn.log.sent(total);
    }
}
