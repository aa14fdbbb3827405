//! The core's own answers: a request refused from its head, for want of
//! memory, for a deadline passed, or in place of a response that could
//! not be sent — each the connection's last.

use super::*;

/// The core's refusal of a request: a status and a plain-text reason
/// (`retry_after`: a limit the server is at now).
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) status: Status,
    pub(super) reason: Cow<'static, str>,
    pub(super) retry_after: bool,
}

impl Refusal {
    /// 503 for want of memory, naming the limit.
    pub(super) fn out_of_memory(full: Full) -> Refusal {
        Refusal {
            status: Status::SERVICE_UNAVAILABLE,
            reason: Cow::Owned(format!(
                "the server's memory is at its limit ({}); try again later",
                full.limit
            )),
            retry_after: true,
        }
    }
}

impl Refusal {
    /// 500 for a request whose service panicked (logged where caught).
    pub(super) fn failed() -> Refusal {
        Refusal {
            status: Status::INTERNAL_SERVER_ERROR,
            reason: Cow::Borrowed("the server failed to answer this request"),
            retry_after: false,
        }
    }
}

impl From<Reject> for Refusal {
    fn from(reject: Reject) -> Refusal {
        Refusal {
            status: reject.status,
            reason: Cow::Borrowed(reject.reason),
            retry_after: false,
        }
    }
}

impl<S: Service> Session<S> {
    /// The end of a request whose handling failed — a panic, logged where
    /// it was caught, or a field refused: a streamed response begun ends
    /// as one cut short ([`cut`](super::stream::cut)'s rule), else a 500 is
    /// the connection's last response.
    pub(super) fn failed(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        head_request: bool,
        label: Option<LabelOf<S>>,
    ) -> State<S> {
        match self.begun.take() {
            Some(true) => State::Closed,
            Some(false) => State::Reset,
            None => {
                let refusal = Outcome::Refusal(Refusal::failed());
                self.refuse(queue, service, refusal, head_request, label)
            }
        }
    }

    /// Queues the answer to a refused request; the connection then closes.
    pub(super) fn reject(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        reject: Reject,
        head_request: bool,
        label: Option<LabelOf<S>>,
    ) -> State<S> {
        let refusal = Outcome::Refusal(reject.into());
        self.refuse(queue, service, refusal, head_request, label)
    }

    /// Queues `503` with `Retry-After` for a request the connection has no
    /// memory left to answer (`full` says which limit), and closes.
    pub(super) fn out_of_memory(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        p: Pending<S>,
        full: Full,
    ) -> State<S> {
        let about = (p.exchange, p.label);
        self.refused_for_memory(queue, service, about, p, full)
    }

    /// Queues `503` with `Retry-After` for the request `about` describes,
    /// once what it `held` (a request body it kept, a stream not begun) is
    /// given back; the connection then closes.
    pub(super) fn refused_for_memory<H>(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        (exchange, label): (Exchange, Option<LabelOf<S>>),
        held: H,
        full: Full,
    ) -> State<S> {
        service.memory.refused();
        drop(held);
        let refusal = Outcome::Refusal(Refusal::out_of_memory(full));
        self.refuse(queue, service, refusal, exchange.head_request, label)
    }

    /// Queues `reply` as the last response of the connection. A refusal is
    /// short and fits the write buffer the connection's base covers; were
    /// there no room even for it, the connection closes without a word.
    pub(super) fn refuse(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        answer: Outcome<S::Reply>,
        head_request: bool,
        label: Option<LabelOf<S>>,
    ) -> State<S> {
        // No request may follow a refusal on this connection.
        let exchange = self.exchange(service, false, head_request, false);
        let mut refusal = Pending::new(answer, exchange, label);
        refusal.refusal = true;
        self.respond(queue, service, refusal)
    }

    /// Queues `503` with `Retry-After` for the head in `input`, or the body,
    /// that the read buffer has no room left to take (`full` says which
    /// limit); the connection then closes.
    pub fn no_room_to_read(
        &mut self,
        input: &[u8],
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        full: Full,
    ) {
        self.read_clocks();
        let (head_request, label) = match std::mem::replace(&mut self.state, State::Closed) {
            State::Body { pending, .. } => (pending.exchange.head_request, pending.label),
            _ => {
                self.noted();
                (begins_head_request(input), None)
            }
        };
        service.memory.refused();
        let refusal = Outcome::Refusal(Refusal::out_of_memory(full));
        self.state = self.refuse(queue, service, refusal, head_request, label);
        if self.unheard {
            self.hear(input, service);
        }
        self.app.turn_ended(service);
    }

    /// Queues `408 Request Timeout` for the head in `input`, or the body,
    /// that did not arrive in time; the connection then closes.
    pub fn timed_out(&mut self, input: &[u8], queue: &mut WriteQueue, service: &Protocol<S>) {
        self.read_clocks();
        let (reason, head_request, about) = match std::mem::replace(&mut self.state, State::Closed)
        {
            State::Body { pending, .. } => (
                "request body not received in time",
                pending.exchange.head_request,
                pending.label,
            ),
            _ => {
                // No head was read: the service is told of no label, the
                // observer of what there was of it.
                self.noted();
                (
                    "request head not received in time",
                    begins_head_request(input),
                    None,
                )
            }
        };
        let reject = Reject {
            status: Status::REQUEST_TIMEOUT,
            reason,
        };
        self.state = self.reject(queue, service, reject, head_request, about);
        if self.unheard {
            self.hear(input, service);
        }
        self.app.turn_ended(service);
    }
}
