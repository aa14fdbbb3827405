//! The way of one request through the session: its head parsed and the
//! service called (the one call per request), its body read, the work its
//! reply awaits prepared, its response written and its observer told.

use super::*;

/// Why a reply's response was not queued whole.
enum NotQueued {
    /// It is a stream: its head, to begin.
    Stream(StreamHead),
    /// Nothing was queued.
    Failed(Unqueued),
}

impl<S: Service> Session<S> {
    /// Parses one head from `input` and answers or begins its request;
    /// false when the head is not complete yet.
    pub(super) fn head(
        &mut self,
        input: &mut Unread<'_>,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
    ) -> bool {
        let limits = service.limits.head;
        // Uninitialised: httparse writes the fields it finds, and an array
        // of 256 empty headers would cost an 8 KiB memset per request.
        let mut fields = [MaybeUninit::uninit(); FIELDS_CAP];
        // The head is read where the parser left it, never moved out of
        // what it returned: a copy of it cost every request ~27
        // instructions.
        let parsed = parse_head(input, &mut fields, limits);
        let head = match &parsed {
            Parsed::Partial => return false,
            &Parsed::Rejected {
                reject,
                head_request,
            } => {
                // No body may follow even a refusal of a HEAD request. The
                // observer hears what its line held as the turn ends.
                self.noted();
                let next = self.reject(queue, service, reject, head_request, None);
                self.go(next);
                return true;
            }
            &Parsed::NewerMinor(at) => {
                // HTTP/1.x, x > 1: processed as HTTP/1.1 (RFC 9112 §2.3),
                // parsed again on the next turn of `process` (a loop, not a
                // recursion, so that this function stays inlined).
                input[at] = b'1';
                return true;
            }
            Parsed::Complete(head) => head,
        };
        // What a 500 in place of its response needs, should the service
        // panic (`Session::panicked`).
        self.head_request = head.is_head();
        self.answering = None;
        let reply = self.app.call(service, head);
        let label = self.app.begun(service, head, &reply);
        self.answering = Some(label);
        self.noted();
        let exchange = self.exchange(
            service,
            head.wants_keep_alive,
            head.is_head(),
            head.version == 1,
        );
        // Nearly every request: no body, and a reply that holds nothing
        // while it would wait for one. Answered where the reply was made:
        // moving it into a `Pending` and on through `begin`, `answer` and
        // `respond` cost every pipelined request ~80 instructions.
        if let (Framing::None, 0) = (head.framing, dispatch::held(&reply)) {
            input.take(head.len);
            let next = self.answer_now(queue, service, reply, exchange, label);
            self.go(next);
            return true;
        }
        let framed = HeadFacts {
            len: head.len,
            framing: head.framing,
            fields: head.fields().len(),
            expect_continue: head.expect_continue,
        };
        let next = self.begin(
            input,
            queue,
            service,
            Pending::new(Outcome::Reply(reply), exchange, Some(label)),
            framed,
        );
        self.go(next);
        true
    }

    /// [`Session::answer`] and [`Session::respond`] for a reply to a
    /// request without a body, which holds nothing: the same steps, with
    /// the reply where it was made; it is moved into a `Pending` only when
    /// it must wait (for its job, for memory) or begins a stream.
    #[inline(always)]
    fn answer_now(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut reply: S::Reply,
        exchange: Exchange,
        label: LabelOf<S>,
    ) -> State<S> {
        let pending = |reply| Pending::new(Outcome::Reply(reply), exchange, Some(label));
        if let Some(job) = dispatch::prepare(&mut reply, &[]) {
            self.job = Some(job);
            return State::Deferred(pending(reply));
        }
        self.budget.note_held(dispatch::held(&reply));
        let written = match self.write_reply(queue, service, &mut reply, &[], exchange) {
            Ok(written) => written,
            Err(not) => return self.not_queued(queue, service, pending(reply), not),
        };
        self.answered(queue, None);
        self.sent(service, queue, Some(label), written, reply)
    }

    /// Moves on to `next` from [`State::Head`], where the session is while
    /// a head is parsed. Staying there is the common case: the head is
    /// forgotten, not dropped (it holds nothing), so that no drop glue and
    /// no copy of the large state run for every request answered.
    #[inline]
    pub(super) fn go(&mut self, next: State<S>) {
        debug_assert!(matches!(self.state, State::Head));
        match next {
            head @ State::Head => std::mem::forget(head),
            next => self.state = next,
        }
    }

    /// Starts on the request `pending` answers, whose head `framed`
    /// describes: consumes the head, and answers at once when there is no
    /// body (or the client waits for `100 Continue` and the reply is a
    /// refusal), or sets out to read it.
    #[inline]
    pub(super) fn begin(
        &mut self,
        input: &mut Unread<'_>,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut pending: Pending<S>,
        framed: HeadFacts,
    ) -> State<S> {
        input.take(framed.len);
        // What the reply made from the head (the echo's JSON so far, an
        // error's reason) is held while the body is read: counted now.
        let held = pending.held();
        if held > 0 {
            if let Err(full) = self.budget.hold(held, queue.footprint()) {
                return self.out_of_memory(queue, service, pending, full);
            }
        }
        // Nearly every request: no body, nothing to limit.
        if let Framing::None = framed.framing {
            return self.answer(queue, service, pending);
        }
        // The trailer section, if any, shares the head's budget.
        let head = service.limits.head;
        // A reply's own limit applies within `--max-body`, refused alike.
        let max_body = service.limits.max_body as u64;
        let data = match &pending.answer {
            Outcome::Reply(reply) => {
                dispatch::body_limit(reply).map_or(max_body, |l| l.min(max_body))
            }
            Outcome::Refusal(_) => max_body,
        };
        let limits = BodyLimits {
            data,
            trailer_bytes: head.head.saturating_sub(framed.len),
            trailer_fields: head.fields.saturating_sub(framed.fields),
        };
        let decoder = match BodyDecoder::new(framed.framing, limits) {
            Ok(Some(decoder)) => decoder,
            Ok(None) => return self.answer(queue, service, pending),
            // Refused before it is sent; the unread body makes the
            // connection unusable, so it is closed.
            Err(reject) => {
                let (head_request, label) = (pending.exchange.head_request, pending.label);
                return self.reject(queue, service, reject, head_request, label);
            }
        };
        if framed.expect_continue {
            // A head already refused is answered now, without 100 Continue,
            // so the client sends no body (RFC 9110 §10.1.1); unread, that
            // body leaves the connection unusable, so it closes.
            if matches!(&pending.answer, Outcome::Reply(reply) if dispatch::refuses(reply)) {
                let (head_request, label) = (pending.exchange.head_request, pending.label);
                return self.refuse(queue, service, pending.answer, head_request, label);
            }
            if let Err(full) = service
                .writer
                .interim(queue, Status::CONTINUE, &mut self.budget)
            {
                return self.out_of_memory(queue, service, pending, full);
            }
        }
        if matches!(&pending.answer, Outcome::Reply(reply)
            if !dispatch::streams_body(reply) && dispatch::wants_body(reply))
        {
            pending.body = Some(Vec::new());
        }
        self.paused = false;
        State::Body {
            decoder,
            pending,
            payload: 0,
        }
    }

    /// Decodes what `input` holds of a request body; the next state, or,
    /// when the body is not complete, what to read for (`None`: nothing
    /// until the reply has room for more, [`Step::Wait`]).
    pub(super) fn body(
        &mut self,
        input: &mut Unread<'_>,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut decoder: BodyDecoder,
        mut pending: Pending<S>,
        payload: u64,
    ) -> Result<State<S>, Option<Waiting>> {
        if let Some(body) = &pending.body {
            // Room first for all this input may add to the kept body: no
            // more than a declared length, so that the capacity charged
            // is the body's own size once it is whole.
            let most = match decoder {
                BodyDecoder::Length(left) => body.len().saturating_add(left as usize),
                BodyDecoder::Chunked(_) => service.limits.max_body,
            };
            let want = body.len() + input.len().min(most.saturating_sub(body.len()));
            if want > body.capacity() {
                let grown = want.max(body.capacity() * 2).min(most.max(want));
                // Counted at its grown size before it grows.
                let held = grown + pending.reply_held();
                if let Err(full) = self.budget.hold(held, queue.footprint()) {
                    return Ok(self.out_of_memory(queue, service, pending, full));
                }
                if let Some(body) = &mut pending.body {
                    body.reserve_exact(grown - body.len());
                }
            }
        }
        let mut got = 0;
        // A reply that streams its body is handed each piece; one that
        // wants it whole gets it kept; others' is read and dropped.
        let mut streamed = match &mut pending.answer {
            Outcome::Reply(reply) if dispatch::streams_body(reply) => Some(reply),
            _ => None,
        };
        let streams = streamed.is_some();
        let kept = &mut pending.body;
        let mut sink = |chunk: &[u8]| {
            got += chunk.len() as u64;
            if let Some(body) = kept {
                debug_assert!(body.capacity() - body.len() >= chunk.len(), "room made");
                body.extend_from_slice(chunk);
            } else if let Some(reply) = &mut streamed {
                dispatch::body_chunk(&mut **reply, chunk);
            }
        };
        let decoded = match decoder.decode(input, &mut sink) {
            Ok(d) => d,
            Err(reject) => {
                let (head_request, label) = (pending.exchange.head_request, pending.label);
                drop(pending);
                return Ok(self.reject(queue, service, reject, head_request, label));
            }
        };
        input.take(decoded.consumed);
        let payload = payload + got;
        let mut paused = false;
        if streams && got > 0 {
            // What a streaming reply keeps of its body, charged as it grows.
            let held = pending.reply_held();
            if held > 0 {
                if let Err(full) = self.budget.hold(held, queue.footprint()) {
                    return Ok(self.out_of_memory(queue, service, pending, full));
                }
            }
            // It may make progress on what it holds; without room, the
            // connection reads no more until it has (`Session::poll_wait`).
            if !decoded.done {
                if let Outcome::Reply(reply) = &mut pending.answer {
                    let mut cx = Context::from_waker(Waker::noop());
                    paused = dispatch::poll_body_room(reply, &mut cx).is_pending();
                }
            }
        }
        if !decoded.done {
            self.paused = paused;
            self.state = State::Body {
                decoder,
                pending,
                payload,
            };
            return Err((!paused).then_some(Waiting::Body { payload }));
        }
        Ok(self.answer(queue, service, pending))
    }

    /// Queues the response to a request whose body has been read, unless its
    /// reply needs a job done first, or the memory to queue it (then it
    /// waits for the queue to drain, or is refused when nothing is queued).
    #[inline(always)]
    pub(super) fn answer(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut p: Pending<S>,
    ) -> State<S> {
        if let Outcome::Reply(reply) = &mut p.answer {
            let body = p.body.as_deref().unwrap_or_default();
            if let Some(job) = dispatch::prepare(reply, body) {
                self.job = Some(job);
                return State::Deferred(p);
            }
        }
        self.respond(queue, service, p)
    }

    /// Queues the response of `p`, whose reply is ready. When the lease
    /// cannot cover it: waits for the queue to drain if anything is queued,
    /// else refuses with 503 — or, for a refusal itself, closes.
    pub(super) fn respond(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        mut p: Pending<S>,
    ) -> State<S> {
        // What the request holds now (its reply may be a job's, made since).
        self.budget.note_held(p.held());
        let wrote = match &mut p.answer {
            Outcome::Reply(reply) => {
                let request_body = p.body.as_deref().unwrap_or_default();
                self.write_reply(queue, service, reply, request_body, p.exchange)
            }
            Outcome::Refusal(r) => {
                let (status, reason) = (r.status, &r.reason);
                let (writer, budget) = (&service.writer, &mut self.budget);
                let (exchange, second) = (p.exchange, self.second);
                writer
                    .refuse(
                        queue,
                        status,
                        reason,
                        r.retry_after,
                        exchange,
                        budget,
                        second,
                    )
                    .map_err(|full| NotQueued::Failed(Unqueued::Full(full)))
            }
        };
        let written = match wrote {
            Ok(written) => written,
            Err(not) => return self.not_queued(queue, service, p, not),
        };
        self.answered(queue, p.body.take());
        match p.answer {
            Outcome::Reply(reply) => self.sent(service, queue, p.label, written, reply),
            Outcome::Refusal(_) => {
                // A refusal without a label: its head was never read.
                self.unheard = p.label.is_none();
                self.record(service, queue, p.label, written);
                State::Closed
            }
        }
    }

    /// Writes the response of `reply` to a request that asked `exchange`
    /// and sent `request_body`: what was queued, or why not (a stream's
    /// head to begin is one reason).
    #[inline(always)]
    fn write_reply(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        reply: &mut S::Reply,
        request_body: &[u8],
        exchange: Exchange,
    ) -> Result<Written, NotQueued> {
        let (writer, budget, second) = (&service.writer, &mut self.budget, self.second);
        // The response's own field lines, on the stack: what they borrow,
        // the reply holds.
        let mut fields = Fields::new();
        let failed = |e| Err(NotQueued::Failed(e));
        match dispatch::respond(reply, request_body, &mut fields) {
            Ok(r) if !fields.is_refused() => {
                match writer.stream_head(&r, &fields, exchange, second) {
                    // `Ok` as it came: what was queued is not moved again.
                    None if fields.is_empty() => {
                        match writer.write(queue, &r, exchange, budget, second) {
                            Ok(written) => Ok(written),
                            Err(e) => failed(e),
                        }
                    }
                    None => match writer.write_with(queue, &r, &fields, exchange, budget, second) {
                        Ok(written) => Ok(written),
                        Err(e) => failed(e),
                    },
                    Some(Ok(head)) => Err(NotQueued::Stream(head)),
                    Some(Err(e)) => failed((*e).into()),
                }
            }
            Ok(_) => {
                let e = fields.error().expect("a field refused");
                failed(Unqueued::Unsendable(Box::new(Unsendable::Field(e))))
            }
            Err(full) => failed(Unqueued::Full(full)),
        }
    }

    /// Where a response of `p` that was not queued leads: its stream
    /// begun; a 500 in place of what cannot be sent; a wait for the queue
    /// to drain, whose output holds memory that writing gives back; or,
    /// with nothing queued, a 503 — or, for a refusal itself, the close.
    #[inline(never)]
    fn not_queued(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        p: Pending<S>,
        not: NotQueued,
    ) -> State<S> {
        match not {
            NotQueued::Stream(head) => self.begin_stream(queue, p, head),
            NotQueued::Failed(Unqueued::Unsendable(e)) => self.unsendable(queue, service, p, *e),
            NotQueued::Failed(_) if queue.has_remaining() => State::Ready(p),
            NotQueued::Failed(_) if p.refusal => State::Closed,
            NotQueued::Failed(Unqueued::Full(full)) => self.out_of_memory(queue, service, p, full),
        }
    }

    /// Tells the observer of the response of `reply`, queued as
    /// `written`, and keeps the reply while the queue shares its memory,
    /// else gives it back to the service; the next state. The reply is
    /// moved only to be kept: nearly every one is given back where it is.
    #[inline(always)]
    fn sent(
        &mut self,
        service: &Protocol<S>,
        queue: &WriteQueue,
        label: Option<LabelOf<S>>,
        written: Written,
        reply: S::Reply,
    ) -> State<S> {
        self.record(service, queue, label, written);
        if written.references_body {
            let end = queue.ledger().written() + queue.remaining() as u64;
            self.referenced.push_back((end, reply));
        } else {
            self.app.recycle(service, reply);
        }
        if written.keep_alive {
            State::Head
        } else {
            State::Closed
        }
    }

    /// Queues `500` in place of the response of `p`, which cannot be sent
    /// (`e`: a field line refused, or a status that ends no exchange;
    /// logged here with the request's label, once per response), and
    /// closes.
    #[cold]
    pub(super) fn unsendable(
        &mut self,
        queue: &mut WriteQueue,
        service: &Protocol<S>,
        p: Pending<S>,
        e: Unsendable,
    ) -> State<S> {
        tracing::error!(label = ?p.label, "a response's {e}: answered 500 instead");
        let (head_request, label) = (p.exchange.head_request, p.label);
        drop(p);
        self.failed(queue, service, head_request, label)
    }

    /// Counts a request answered, its response queued or set out on: what
    /// it held is in the queue now, or let go, and a request `body` it
    /// kept is freed now, not once the response is written, with its part
    /// of the lease.
    #[inline(always)]
    pub(super) fn answered(&mut self, queue: &WriteQueue, body: Option<Vec<u8>>) {
        self.served += 1;
        self.budget.note_held(0);
        if body.is_some() {
            drop(body);
            self.budget.trim(queue.footprint());
        }
    }

    /// Notes that the request about to be answered began now.
    #[inline]
    pub(super) fn noted(&mut self) {
        self.began = self.now;
    }

    /// Tells the observer of a response queued: the one place every
    /// response passes.
    pub(super) fn record(
        &mut self,
        service: &Protocol<S>,
        queue: &WriteQueue,
        label: Option<LabelOf<S>>,
        written: Written,
    ) {
        let answered = Answered {
            label,
            status: written.status,
            body_bytes: written.body_bytes,
            began: self.began,
            queued: self.now,
            ends: queue.ledger().written() + queue.remaining() as u64,
        };
        self.app.answered(service, answered);
    }
}
