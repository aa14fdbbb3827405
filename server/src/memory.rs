//! The memory account: everything a client can make the server hold, in
//! [`Part`]s, against `--memory-limit`; connections' bases are counted
//! beside it and never refused, so a small request is always served
//! (docs/robustness.md, "Memory: one account").
//!
//! **Charge first, allocate after**: a charge that would pass a limit fails
//! ([`Full`]) before anything grows, after asking the [`Reclaim`] (the
//! cache) to free what no response uses. Racing charges near the limit may
//! both fail; neither ever passes it. A connection's [`Lease`] moves in
//! [`GRANULE`]s with a granule of slack, so a steady keep-alive connection
//! touches the shared counters once, not per request.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// The unit a connection's lease grows and shrinks by.
pub const GRANULE: usize = 4 * 1024;

/// A part of the account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Built bodies alive: cached, or referenced by responses in flight.
    Bodies,
    /// Bodies being built.
    Building,
    /// Connections' own buffers beyond their bases.
    Connections,
    /// Open connections' bases: counted, outside the limit.
    Bases,
}

impl Part {
    /// Every part, in index order.
    pub const ALL: [Part; 4] = [Part::Bodies, Part::Building, Part::Connections, Part::Bases];

    fn index(self) -> usize {
        self as usize
    }

    /// The part as a metric label.
    pub fn label(self) -> &'static str {
        match self {
            Part::Bodies => "bodies",
            Part::Building => "building",
            Part::Connections => "connections",
            Part::Bases => "connection_bases",
        }
    }
}

/// What frees memory on demand when the account is full: cached bodies
/// that no response uses.
pub trait Reclaim: Send + Sync + std::fmt::Debug {
    /// Frees about `bytes` of what nobody uses (less when there is not so
    /// much); the bytes freed, given back to the account before it returns.
    fn reclaim(&self, bytes: usize) -> usize;
}

/// The limit of everything together, as [`Full::limit`] names it.
const MEMORY_LIMIT: &str = "--memory-limit";

/// A charge was refused: it would have passed a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full {
    /// The limit it would have passed: `--memory-limit` or
    /// `--connection-memory`.
    pub limit: &'static str,
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the server's memory is at its limit ({})", self.limit)
    }
}

/// The account: what every part holds, against the limits.
#[derive(Debug)]
pub struct Memory {
    limit: usize,
    connections_limit: usize,
    /// The parts within the limit, summed.
    total: AtomicUsize,
    parts: [AtomicUsize; 4],
    refusals: AtomicU64,
    reclaim: OnceLock<Weak<dyn Reclaim>>,
}

impl Memory {
    /// An account of `limit` bytes in all, of which connections' buffers may
    /// take `connections_limit`.
    pub fn new(limit: usize, connections_limit: usize) -> Memory {
        Memory {
            limit,
            connections_limit: connections_limit.min(limit),
            total: AtomicUsize::new(0),
            parts: Default::default(),
            refusals: AtomicU64::new(0),
            reclaim: OnceLock::new(),
        }
    }

    /// Makes `reclaim` give way to charges that would pass the limit (once;
    /// held weakly, so that the account keeps nothing alive).
    pub fn give_way_with(&self, reclaim: Weak<dyn Reclaim>) {
        let _ = self.reclaim.set(reclaim);
    }

    /// The limit of everything together.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The limit of connections' buffers together.
    pub fn connections_limit(&self) -> usize {
        self.connections_limit
    }

    /// Bytes charged to the parts within the limit.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Bytes charged to `part`.
    pub fn used(&self, part: Part) -> usize {
        self.parts[part.index()].load(Ordering::Relaxed)
    }

    /// Requests and connections refused so far for want of memory.
    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Counts a refusal (a 503, or a connection closed at once).
    pub fn refused(&self) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
    }

    /// Charges `n` bytes to `part`, or fails without charging anything; a
    /// charge that would pass `--memory-limit` first asks the [`Reclaim`]
    /// to free what nobody uses.
    fn take(&self, part: Part, n: usize) -> Result<(), Full> {
        match self.try_take(part, n) {
            Err(Full {
                limit: MEMORY_LIMIT,
            }) if self.reclaimed(n) => self.try_take(part, n),
            taken => taken,
        }
    }

    /// Whether asking the [`Reclaim`] for room for `n` more bytes freed any.
    #[cold]
    fn reclaimed(&self, n: usize) -> bool {
        let Some(reclaim) = self.reclaim.get().and_then(Weak::upgrade) else {
            return false;
        };
        let short = (self.total() + n).saturating_sub(self.limit);
        reclaim.reclaim(short.max(1)) > 0
    }

    /// [`Memory::take`] without asking anyone to give way.
    fn try_take(&self, part: Part, n: usize) -> Result<(), Full> {
        if n == 0 {
            return Ok(());
        }
        let slot = &self.parts[part.index()];
        if part == Part::Bases {
            slot.fetch_add(n, Ordering::Relaxed);
            return Ok(());
        }
        if part == Part::Connections {
            let was = slot.fetch_add(n, Ordering::Relaxed);
            if was + n > self.connections_limit {
                slot.fetch_sub(n, Ordering::Relaxed);
                return Err(Full {
                    limit: "--connection-memory",
                });
            }
        }
        let was = self.total.fetch_add(n, Ordering::Relaxed);
        if was + n > self.limit {
            self.total.fetch_sub(n, Ordering::Relaxed);
            if part == Part::Connections {
                slot.fetch_sub(n, Ordering::Relaxed);
            }
            return Err(Full {
                limit: MEMORY_LIMIT,
            });
        }
        if part != Part::Connections {
            slot.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Gives back `n` bytes charged to `part`.
    fn give(&self, part: Part, n: usize) {
        if n == 0 {
            return;
        }
        self.parts[part.index()].fetch_sub(n, Ordering::Relaxed);
        if part != Part::Bases {
            self.total.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// A charge of `n` bytes to `part`, given back when dropped.
    pub fn charge(self: &Arc<Self>, part: Part, n: usize) -> Result<Charge, Full> {
        self.take(part, n)?;
        Ok(Charge {
            memory: self.clone(),
            part,
            bytes: n,
        })
    }
}

/// Bytes charged to one part of the account, given back when dropped: a
/// body carries its own, so that it is counted for exactly as long as it is
/// alive.
#[derive(Debug)]
pub struct Charge {
    memory: Arc<Memory>,
    part: Part,
    bytes: usize,
}

impl Charge {
    /// Bytes charged.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Moves the charge to another part (a body built: from building to
    /// bodies), keeping at most `bytes` of it (what the build really took).
    pub fn settle(&mut self, part: Part, bytes: usize) {
        // Moved without a check: the total only shrinks, and the parts of
        // connections are never the destination.
        debug_assert!(
            matches!(part, Part::Bodies | Part::Building) && self.part != Part::Bases,
            "a body is never a connection's"
        );
        let keep = bytes.min(self.bytes);
        let m = &self.memory;
        m.parts[part.index()].fetch_add(keep, Ordering::Relaxed);
        m.parts[self.part.index()].fetch_sub(self.bytes, Ordering::Relaxed);
        m.total.fetch_sub(self.bytes - keep, Ordering::Relaxed);
        self.part = part;
        self.bytes = keep;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.memory.give(self.part, self.bytes);
    }
}

/// One connection's reservation: its base, never refused, and what its
/// buffers need beyond it, grown before they grow, in granules, with a
/// granule of slack. All given back when dropped.
#[derive(Debug)]
pub struct Lease {
    memory: Arc<Memory>,
    base: usize,
    /// Beyond the base.
    held: usize,
}

impl Lease {
    /// A lease of `base` bytes (what a connection needs before it reads
    /// anything).
    pub fn open(memory: &Arc<Memory>, base: usize) -> Lease {
        memory
            .take(Part::Bases, base)
            .expect("a base is never refused");
        Lease {
            memory: memory.clone(),
            base,
            held: 0,
        }
    }

    /// Bytes reserved, the base included.
    pub fn held(&self) -> usize {
        self.base + self.held
    }

    /// Makes the reservation at least `need` bytes, or fails leaving it as
    /// it was. Costs nothing when it already is.
    #[inline]
    pub fn cover(&mut self, need: usize) -> Result<(), Full> {
        if need <= self.base + self.held {
            return Ok(());
        }
        self.grow(need - self.base)
    }

    #[cold]
    fn grow(&mut self, beyond: usize) -> Result<(), Full> {
        let want = round_up(beyond);
        self.memory.take(Part::Connections, want - self.held)?;
        self.held = want;
        Ok(())
    }

    /// Gives back what the buffers no longer need when they occupy `used`
    /// bytes, keeping a granule of slack (so that a connection whose
    /// buffers stay the same size never touches the shared counters).
    #[inline]
    pub fn trim(&mut self, used: usize) {
        let keep = round_up(used.saturating_sub(self.base)) + GRANULE;
        if self.held > keep + GRANULE {
            self.memory.give(Part::Connections, self.held - keep);
            self.held = keep;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.memory.give(Part::Connections, self.held);
        self.memory.give(Part::Bases, self.base);
    }
}

/// One connection's budget and its one owner: the lease, and every buffer
/// it covers besides the write queue, whose bytes the caller passes in.
/// Every cover and trim of a connection's memory passes here.
#[derive(Debug)]
pub struct Budget {
    lease: Lease,
    read_buffer: usize,
    /// The socket's own buffers, always (TLS records being read).
    socket: usize,
    /// What the socket may hold of the write in progress (TLS records).
    sending: usize,
    /// What the service keeps for the connection, at most.
    conn: usize,
    /// What the request being answered holds: its body so far, and what
    /// its reply made. Zero between requests.
    held: usize,
}

impl Budget {
    /// A budget on `lease` for a read buffer of `read_buffer` bytes, the
    /// socket's own `socket` and the service's `conn`.
    pub fn new(lease: Lease, read_buffer: usize, socket: usize, conn: usize) -> Budget {
        Budget {
            lease,
            read_buffer,
            socket,
            sending: 0,
            conn,
            held: 0,
        }
    }

    /// Bytes it counts outside the queue.
    #[inline]
    fn outside(&self) -> usize {
        self.read_buffer + self.socket + self.sending + self.conn + self.held
    }

    /// Makes the lease cover `beyond` bytes (the queue as it will be, and
    /// any transient copy) besides everything outside the queue, or fails
    /// leaving it as it was.
    #[inline]
    pub fn cover(&mut self, beyond: usize) -> Result<(), Full> {
        self.lease.cover(self.outside() + beyond)
    }

    /// Makes the lease cover the request being answered holding `held`
    /// bytes, beside a queue of `queue`; on failure nothing changes.
    pub fn hold(&mut self, held: usize, queue: usize) -> Result<(), Full> {
        self.resize(|b| &mut b.held, held, queue)
    }

    /// Notes what the request being answered holds now, without covering
    /// it: for a request whose cover follows at once, or that let go.
    #[inline]
    pub fn note_held(&mut self, held: usize) {
        self.held = held;
    }

    /// Makes the lease cover the read buffer grown to `bytes`, beside a
    /// queue of `queue`, or fails (the buffer must then not grow).
    pub fn grow_read_buffer(&mut self, bytes: usize, queue: usize) -> Result<(), Full> {
        self.resize(|b| &mut b.read_buffer, bytes, queue)
    }

    /// Makes the lease cover `bytes` the socket may hold of the write about
    /// to begin, beside a queue of `queue`, or fails (the socket must then
    /// hold no more than its own buffers allow); [`Budget::settle`] gives
    /// it back.
    pub fn cover_sending(&mut self, bytes: usize, queue: usize) -> Result<(), Full> {
        self.resize(|b| &mut b.sending, bytes, queue)
    }

    /// Makes the lease cover the buffer `part` names at `bytes`, beside a
    /// queue of `queue`, then records it; on failure nothing changes.
    fn resize(
        &mut self,
        part: fn(&mut Budget) -> &mut usize,
        bytes: usize,
        queue: usize,
    ) -> Result<(), Full> {
        let now = *part(self);
        self.lease.cover(self.outside() - now + bytes + queue)?;
        *part(self) = bytes;
        Ok(())
    }

    /// After a write: the write in progress is over; gives back what the
    /// buffers no longer occupy beside a queue of `queue`.
    #[inline]
    pub fn settle(&mut self, queue: usize) {
        self.sending = 0;
        self.trim(queue);
    }

    /// Gives back what the buffers no longer occupy beside a queue of
    /// `queue`.
    #[inline]
    pub fn trim(&mut self, queue: usize) {
        self.lease.trim(self.outside() + queue);
    }

    /// Bytes the lease covers.
    pub fn leased(&self) -> usize {
        self.lease.held()
    }
}

/// `n` rounded up to a whole number of granules.
fn round_up(n: usize) -> usize {
    n.div_ceil(GRANULE).saturating_mul(GRANULE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fail_past_either_limit_and_leave_nothing_behind() {
        let memory = Arc::new(Memory::new(100 * GRANULE, 10 * GRANULE));
        let body = memory.charge(Part::Bodies, 80 * GRANULE).unwrap();
        assert_eq!(
            memory
                .charge(Part::Building, 21 * GRANULE)
                .unwrap_err()
                .limit,
            "--memory-limit"
        );
        // A base is counted beside the limit, never refused.
        let mut lease = Lease::open(&memory, 200 * GRANULE);
        lease.cover(200 * GRANULE + 1).unwrap();
        assert_eq!(lease.held(), 201 * GRANULE, "beyond the base, in granules");
        assert_eq!(
            lease.cover(211 * GRANULE).unwrap_err().limit,
            "--connection-memory"
        );
        assert_eq!(lease.held(), 201 * GRANULE, "unchanged by a refusal");
        assert_eq!(memory.used(Part::Connections), GRANULE);
        assert_eq!(memory.used(Part::Bases), 200 * GRANULE);
        assert_eq!(memory.total(), 81 * GRANULE);
        drop(body);
        drop(lease);
        assert_eq!(memory.total(), 0);
        assert!(Part::ALL.iter().all(|&p| memory.used(p) == 0));
    }

    #[test]
    fn a_lease_keeps_a_granule_of_slack() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 30));
        let mut lease = Lease::open(&memory, GRANULE);
        lease.cover(11 * GRANULE).unwrap();
        lease.trim(10 * GRANULE);
        assert_eq!(lease.held(), 11 * GRANULE, "within the slack");
        lease.trim(GRANULE);
        assert_eq!(lease.held(), 2 * GRANULE, "the base and the slack");
        assert_eq!(memory.used(Part::Connections), GRANULE);
    }

    /// Frees what it holds, whatever is asked.
    #[derive(Debug)]
    struct Holder(std::sync::Mutex<Vec<Charge>>);

    impl Reclaim for Holder {
        fn reclaim(&self, _bytes: usize) -> usize {
            let freed: Vec<Charge> = std::mem::take(&mut *self.0.lock().unwrap());
            freed.iter().map(Charge::bytes).sum()
        }
    }

    #[test]
    fn a_full_account_asks_its_reclaim_to_give_way() {
        let memory = Arc::new(Memory::new(10_000, GRANULE));
        let holder = Arc::new(Holder(Default::default()));
        memory.give_way_with(Arc::downgrade(&holder) as Weak<dyn Reclaim>);
        let held = memory.charge(Part::Bodies, 7000).unwrap();
        holder.0.lock().unwrap().push(held);
        // 5000 more fit once the 7000 nobody uses are given back.
        let build = memory.charge(Part::Building, 5000).unwrap();
        assert_eq!((memory.total(), memory.used(Part::Bodies)), (5000, 0));
        // Nothing left to give: refused, and nothing charged.
        let refused = memory.charge(Part::Bodies, 5001).unwrap_err();
        assert_eq!((refused.limit, memory.total()), ("--memory-limit", 5000));
        // A connection past its own limit is not the cache's to relieve.
        let held = memory.charge(Part::Bodies, 1000).unwrap();
        holder.0.lock().unwrap().push(held);
        let mut lease = Lease::open(&memory, 0);
        assert_eq!(
            lease.cover(2 * GRANULE).unwrap_err().limit,
            "--connection-memory"
        );
        assert_eq!(memory.used(Part::Bodies), 1000, "kept");
        drop(build);
    }

    #[test]
    fn a_settled_charge_moves_and_never_grows() {
        let memory = Arc::new(Memory::new(1000, 1000));
        let mut c = memory.charge(Part::Building, 600).unwrap();
        c.settle(Part::Bodies, 700);
        assert_eq!((c.bytes(), memory.used(Part::Bodies)), (600, 600));
        c.settle(Part::Bodies, 500);
        assert_eq!((memory.used(Part::Building), memory.total()), (0, 500));
        drop(c);
        assert_eq!(memory.total(), 0);
    }
}
