//! The bodies the routes send (what a body is: `body.rs`), built once on
//! the blocking pool, `--max-builds` at a time, charged before they are
//! allocated; whoever asks for a body being built waits for that one build
//! (a [`Flight`]). Each [`Built`] carries its [`Charge`], given back when the
//! last holder (the cache, a response) lets go. The cache keeps at most
//! `--cache-bytes`, evicting by a clock (an approximate LRU), and gives way
//! to a full account ([`Reclaim`]). A connection's [`Memo`] keeps its last
//! body: asking again takes no lock; a small one is held and lent to each
//! reply (no reference counted per request), a larger one remembered
//! weakly (nothing kept alive that the cache would give up).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::{Notify, Semaphore};

use super::body::{BodyKey, Built, Key};
use unflat_server::clock::Moment;
use unflat_server::memory::{Charge, Full, Memory, Part, Reclaim};
use unflat_server::observe::prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use unflat_server::observe::prometheus_client::metrics::counter::ConstCounter;
use unflat_server::observe::Report;

/// Entries one call of [`Reclaim::reclaim`] looks at, at most: bounded so
/// that a refusal costs little however many small bodies are cached.
const RECLAIM_SCAN: usize = 16 * 1024;

/// Milliseconds a full account is refused without a scan after one that
/// freed nothing: at most a hundred scans a second, whatever the refusals.
const RECLAIM_QUIET_MS: u64 = 10;

/// Why a body cannot be had now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// Building it would pass a memory limit.
    Memory(Full),
    /// Its build failed (it panicked).
    Failed,
}

/// One build in flight, and its result for everyone waiting on it.
#[derive(Debug, Default)]
struct Flight {
    done: OnceLock<Result<Arc<Built>, Unavailable>>,
    finished: Notify,
}

impl Flight {
    /// Waits for the build's result (without holding a thread).
    async fn wait(&self) -> Result<Arc<Built>, Unavailable> {
        loop {
            let finished = self.finished.notified();
            tokio::pin!(finished);
            // Registered before looking, so that a result set between the
            // look and the wait still wakes this waiter.
            finished.as_mut().enable();
            if let Some(result) = self.done.get() {
                return result.clone();
            }
            finished.await;
        }
    }

    fn finish(&self, result: Result<Arc<Built>, Unavailable>) {
        let _ = self.done.set(result);
        self.finished.notify_waiters();
    }
}

/// The bodies: the cache, the builds in flight, the build slots.
#[derive(Debug)]
pub struct Bodies {
    state: Mutex<Shelves>,
    memory: Arc<Memory>,
    cache_bytes: usize,
    /// One permit per build allowed at once (`--max-builds`).
    builders: Arc<Semaphore>,
    /// A copy of `Shelves::bytes`, read by `/metrics` without the lock.
    cached: AtomicUsize,
    builds: AtomicU64,
    shared: AtomicU64,
    /// Until when (ms) a full account is not worth a scan: the last one
    /// freed nothing.
    barren_until: AtomicU64,
}

/// The cache, its clock and the builds in flight, under one lock.
#[derive(Debug, Default)]
struct Shelves {
    cache: HashMap<BodyKey, Arc<Built>>,
    /// The clock: oldest first.
    order: VecDeque<BodyKey>,
    bytes: usize,
    flights: HashMap<BodyKey, Arc<Flight>>,
}

/// One connection's last `/end-string` body. A small one (charged at most
/// [`HELD_MOST`]) is held: lent to the reply that sends it and given back
/// when the core is done with the reply ([`Memo::give_back`]), moved both
/// ways, so that asking for it again takes no lock and counts no
/// reference. A larger one is remembered weakly: the memo keeps nothing
/// alive that the cache would give up.
#[derive(Debug, Default)]
pub struct Memo {
    last: Option<(Key, Kept)>,
}

/// How a [`Memo`] keeps its body.
#[derive(Debug)]
enum Kept {
    /// Held, to lend.
    Held(Arc<Built>),
    /// Lent to a reply: the body's address, to know it when it comes back
    /// (it cannot move or be freed while the reply holds it).
    Lent(usize),
    /// Remembered weakly.
    Weak(Weak<Built>),
}

/// The most a body held by a [`Memo`] may be charged: what memos keep
/// alive beside the cache is at most this per connection, counted in each
/// connection's base (the site's `conn_memory`), so that no client can
/// pin more than its connections are charged for.
pub const HELD_MOST: usize = 2 * 1024;

/// A body at hand ([`Bodies::text`]): lent by the connection's memo, to
/// give back ([`Memo::give_back`]), or shared.
#[derive(Debug)]
pub enum AtHand {
    /// Moved out of the memo.
    Lent(Arc<Built>),
    /// A reference of its own.
    Shared(Arc<Built>),
}

impl Memo {
    /// Remembers `body`, just found for `key` in the cache: held and lent
    /// now if it is small and none is lent for `key` already, else shared
    /// and remembered weakly.
    fn remember(&mut self, key: Key, body: Arc<Built>) -> AtHand {
        if body.charged() > HELD_MOST {
            self.last = Some((key, Kept::Weak(Arc::downgrade(&body))));
            return AtHand::Shared(body);
        }
        if matches!(&self.last, Some((k, Kept::Lent(_))) if *k == key) {
            return AtHand::Shared(body);
        }
        self.last = Some((key, Kept::Lent(address(&body))));
        AtHand::Lent(body)
    }

    /// A body it lent, back from a reply the core is done with: held again
    /// if it is still the memo's, else dropped.
    #[inline(always)]
    pub fn give_back(&mut self, body: Arc<Built>) {
        if let Some((_, kept)) = &mut self.last {
            if matches!(kept, Kept::Lent(at) if *at == address(&body)) {
                *kept = Kept::Held(body);
            }
        }
    }
}

/// Where `body` lies: its identity while a reference to it is alive.
#[inline(always)]
fn address(body: &Arc<Built>) -> usize {
    Arc::as_ptr(body) as usize
}

impl Bodies {
    /// No bodies yet; at most `cache_bytes` of them cached and `builders`
    /// built at once, charged to `memory`, which the cache gives way to.
    pub fn new(memory: Arc<Memory>, cache_bytes: usize, builders: usize) -> Arc<Bodies> {
        let bodies = Arc::new(Bodies {
            state: Mutex::new(Shelves::default()),
            memory,
            cache_bytes,
            builders: Arc::new(Semaphore::new(builders)),
            cached: AtomicUsize::new(0),
            builds: AtomicU64::new(0),
            shared: AtomicU64::new(0),
            barren_until: AtomicU64::new(0),
        });
        let reclaim: Weak<dyn Reclaim> = Arc::downgrade(&bodies) as Weak<dyn Reclaim>;
        bodies.memory.give_way_with(reclaim);
        bodies
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shelves> {
        // Each update is one insert or remove of a whole entry: a poisoned
        // lock is consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `/end-string` body for `key` if it is at hand: lent by `memo`
    /// when it holds it, shared when it remembers it, else from the cache
    /// (which `memo` then remembers).
    #[inline(always)]
    pub fn text(&self, key: Key, memo: &mut Memo) -> Option<AtHand> {
        if let Some((k, kept)) = &mut memo.last {
            if *k == key {
                match kept {
                    Kept::Held(body) => {
                        body.touch();
                        let at = address(body);
                        let Kept::Held(body) = std::mem::replace(kept, Kept::Lent(at)) else {
                            unreachable!("matched above")
                        };
                        return Some(AtHand::Lent(body));
                    }
                    Kept::Weak(weak) => {
                        if let Some(body) = weak.upgrade() {
                            body.touch();
                            return Some(AtHand::Shared(body));
                        }
                    }
                    // Lent to a reply still being written: shared from the
                    // cache meanwhile.
                    Kept::Lent(_) => {}
                }
            }
        }
        self.text_cached(key, memo)
    }

    /// [`Bodies::text`] for a body the memo does not have.
    #[inline(never)]
    fn text_cached(&self, key: Key, memo: &mut Memo) -> Option<AtHand> {
        let body = self.cached(BodyKey::Text(key))?;
        Some(memo.remember(key, body))
    }

    /// The body for `key` if the cache holds it.
    pub fn cached(&self, key: BodyKey) -> Option<Arc<Built>> {
        let body = self.lock().cache.get(&key).cloned()?;
        body.touch();
        Some(body)
    }

    /// Bytes of bodies the cache holds.
    pub fn cached_bytes(&self) -> usize {
        self.cached.load(Ordering::Relaxed)
    }

    /// The most the cache keeps (`--cache-bytes`).
    pub fn cache_limit(&self) -> usize {
        self.cache_bytes
    }

    /// Builds begun, and requests that waited for a build another request
    /// had begun.
    pub fn builds(&self) -> (u64, u64) {
        (
            self.builds.load(Ordering::Relaxed),
            self.shared.load(Ordering::Relaxed),
        )
    }

    /// The body for `key`: from the cache, or built once for everyone who
    /// asks meanwhile; charged before the build begins, or refused.
    pub async fn get(self: Arc<Self>, key: BodyKey) -> Result<Arc<Built>, Unavailable> {
        // The flight is registered before the charge, so that identical
        // requests meanwhile join it rather than each charge the body.
        let (flight, mine) = {
            let mut state = self.lock();
            match self.find_locked(&mut state, key) {
                Some(Found::Cached(body)) => return Ok(body),
                Some(Found::Building(flight)) => (flight, false),
                None => {
                    let flight = Arc::new(Flight::default());
                    state.flights.insert(key, flight.clone());
                    (flight, true)
                }
            }
        };
        if mine {
            // Charged outside the lock: a full account asks the cache,
            // which takes it, to give way.
            match self.memory.charge(Part::Building, key.footprint()) {
                Ok(charge) => {
                    self.builds.fetch_add(1, Ordering::Relaxed);
                    // A task of its own: the build finishes and is cached
                    // even if the connection that asked is gone.
                    tokio::spawn(self.clone().build(key, charge, flight.clone()));
                }
                Err(full) => {
                    self.memory.refused();
                    self.lock().flights.remove(&key);
                    flight.finish(Err(Unavailable::Memory(full)));
                }
            }
        }
        flight.wait().await
    }

    /// The body for `key` if it is cached, or the build of it in flight.
    fn find_locked(&self, state: &mut Shelves, key: BodyKey) -> Option<Found> {
        if let Some(hit) = state.cache.get(&key) {
            hit.touch();
            return Some(Found::Cached(hit.clone()));
        }
        let flight = state.flights.get(&key)?;
        self.shared.fetch_add(1, Ordering::Relaxed);
        Some(Found::Building(flight.clone()))
    }

    /// Builds `key`'s body on the blocking pool once a build slot is free,
    /// caches it, and hands it to the flight's waiters.
    async fn build(self: Arc<Self>, key: BodyKey, mut charge: Charge, flight: Arc<Flight>) {
        let slot = self.builders.clone().acquire_owned().await;
        let built = tokio::task::spawn_blocking(move || {
            let text = key.build();
            drop(slot);
            text
        })
        .await;
        let result = match built {
            Ok(text) => {
                charge.settle(Part::Bodies, key.footprint());
                Ok(Arc::new(Built::new(text, key.len(), charge)))
            }
            Err(_) => Err(Unavailable::Failed),
        };
        {
            let mut state = self.lock();
            state.flights.remove(&key);
            if let Ok(body) = &result {
                self.keep(&mut state, key, body);
            }
        }
        flight.finish(result);
    }

    /// Caches `body`, evicting by the clock to stay within `--cache-bytes`;
    /// a body larger than that is not kept.
    fn keep(&self, state: &mut Shelves, key: BodyKey, body: &Arc<Built>) {
        let size = body.charged();
        if size > self.cache_bytes {
            return;
        }
        // Each entry may be passed over once: the loop ends.
        let mut chances = state.order.len();
        while state.bytes + size > self.cache_bytes {
            let Some(old) = state.order.pop_front() else {
                break;
            };
            let Some(entry) = state.cache.get(&old) else {
                continue;
            };
            if chances > 0 && entry.take_used() {
                chances -= 1;
                state.order.push_back(old);
                continue;
            }
            if let Some(gone) = state.cache.remove(&old) {
                state.bytes -= gone.charged();
            }
        }
        state.bytes += size;
        state.order.push_back(key);
        state.cache.insert(key, body.clone());
        self.cached.store(state.bytes, Ordering::Relaxed);
    }
}

/// What [`Bodies::find_locked`] found.
enum Found {
    Cached(Arc<Built>),
    Building(Arc<Flight>),
}

/// `/metrics` shows the cache's part of the bodies charged, its limit,
/// and the builds.
impl Report for Bodies {
    fn cache(&self) -> Option<(usize, usize)> {
        Some((self.cached_bytes(), self.cache_limit()))
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (builds, shared) = self.builds();
        let mut family = encoder.encode_descriptor(
            "body_builds",
            "Bodies built (shared=false), and requests that waited for a build already in flight instead (shared=true).",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (label, n) in [("false", builds), ("true", shared)] {
            ConstCounter::new(n).encode(family.encode_family(&[("shared", label)])?)?;
        }
        Ok(())
    }
}

impl Reclaim for Bodies {
    /// Evicts cached bodies that no response references, by the clock,
    /// until `bytes` are freed or [`RECLAIM_SCAN`] entries were looked at.
    /// A referenced body stays: evicting it would free nothing.
    fn reclaim(&self, bytes: usize) -> usize {
        // A scan that freed nothing is not repeated for a while: refusals
        // on a full account must stay cheap, and a scan holds the lock.
        let now = Moment::now().millis();
        if now < self.barren_until.load(Ordering::Relaxed) {
            return 0;
        }
        let mut gone = Vec::new();
        {
            let mut state = self.lock();
            let mut evicted = 0;
            // Twice round the clock at most: once to clear the marks.
            let looks = (2 * state.order.len()).min(RECLAIM_SCAN);
            for _ in 0..looks {
                if evicted >= bytes {
                    break;
                }
                let Some(key) = state.order.pop_front() else {
                    break;
                };
                let Some(entry) = state.cache.get(&key) else {
                    continue;
                };
                // The cache's own reference is the only one: no response
                // holds it and no memo holds it (a memo's weak reference
                // does not count).
                let unused = Arc::strong_count(entry) == 1;
                if !unused || entry.take_used() {
                    state.order.push_back(key);
                    continue;
                }
                if let Some(body) = state.cache.remove(&key) {
                    state.bytes -= body.charged();
                    evicted += body.charged();
                    gone.push(body);
                }
            }
            self.cached.store(state.bytes, Ordering::Relaxed);
        }
        // Freed outside the lock, each charge given back as it drops. A
        // memo may have revived a body since it was looked at: only what
        // is really freed counts.
        let freed = gone
            .into_iter()
            .map(|body| {
                let charged = body.charged();
                Arc::into_inner(body).map_or(0, |_| charged)
            })
            .sum();
        if freed == 0 {
            self.barren_until
                .store(now + RECLAIM_QUIET_MS, Ordering::Relaxed);
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::super::body::{large_payload, Form, Kind, Text};
    use super::*;

    fn text(len: usize, kind: Kind) -> BodyKey {
        BodyKey::Text(Key {
            len,
            kind,
            form: Form::Flat,
        })
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn large_payload_is_stamped_at_every_4k() {
        let p = large_payload(4096 * 2 + 2);
        assert_eq!(&p[..5], &[0, 0, 0, 0, 0x61]);
        assert_eq!(&p[4096..4101], &[0, 16, 0, 0, 0x61]);
        assert_eq!(&p[8192..], &[0, 32]);
    }

    #[test]
    fn bodies_are_evicted_oldest_first_and_freed_when_nobody_holds_them() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        // Each body is charged its text and 256 bytes.
        let bodies = Bodies::new(memory.clone(), 2000, 1);
        let rt = runtime();
        let get = |k| rt.block_on(bodies.clone().get(k)).unwrap();
        let held = get(text(600, Kind::Ascii));
        get(text(100, Kind::Latin1));
        get(text(400, Kind::TwoByte)); // evicts the ascii one
        assert!(bodies.cached(text(600, Kind::Ascii)).is_none());
        assert!(bodies.cached(text(100, Kind::Latin1)).is_some());
        let all = memory.used(Part::Bodies);
        assert_eq!(all, held.charged() + bodies.cached_bytes());
        drop(held);
        assert_eq!(memory.used(Part::Bodies), bodies.cached_bytes());
        // Larger than the cache: served, not kept.
        let big = get(BodyKey::Large(5000));
        assert_eq!(big.len, 5000);
        assert!(bodies.cached(BodyKey::Large(5000)).is_none());
        drop(big);
        assert_eq!(memory.used(Part::Bodies), bodies.cached_bytes());
    }

    #[test]
    fn a_full_account_evicts_what_no_response_uses_least_recently_used_first() {
        // Room for three bodies of 1000 bytes (charged 1271 each).
        let memory = Arc::new(Memory::new(3900, 3900));
        let bodies = Bodies::new(memory.clone(), 3900, 1);
        let rt = runtime();
        let get = |k| rt.block_on(bodies.clone().get(k));
        let (a, b, c) = (
            text(1000, Kind::Ascii),
            text(1000, Kind::Latin1),
            text(500, Kind::TwoByte),
        );
        let held = get(a).unwrap(); // referenced by a response
        get(b).unwrap();
        get(c).unwrap();
        // `b` asked for again: `c` is the least recently used of the two.
        bodies.cached(b).unwrap();
        let d = get(BodyKey::Large(1000)).unwrap();
        assert!(bodies.cached(a).is_some(), "referenced: kept");
        assert!(bodies.cached(b).is_some(), "used since: kept");
        assert!(bodies.cached(c).is_none(), "evicted for the new body");
        assert!(memory.total() <= 3900);
        drop(d);
        // What is left is in use: a body that needs more is refused.
        let _b = bodies.cached(b).unwrap();
        let _d = bodies.cached(BodyKey::Large(1000));
        assert!(matches!(
            get(BodyKey::Large(2000)),
            Err(Unavailable::Memory(_))
        ));
        drop(held);
    }

    #[test]
    fn a_scan_that_frees_nothing_is_not_repeated_at_once() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        let bodies = Bodies::new(memory.clone(), 1 << 20, 1);
        let rt = runtime();
        let held = rt.block_on(bodies.clone().get(text(1000, Kind::Ascii)));
        let held = held.unwrap();
        // Referenced by a response: nothing to free.
        assert_eq!(bodies.reclaim(1), 0);
        drop(held);
        // Unreferenced now, but the scan waits out its quiet time.
        let before = memory.used(Part::Bodies);
        if Moment::now().millis() < bodies.barren_until.load(Ordering::Relaxed) {
            assert_eq!(bodies.reclaim(1), 0, "no scan in the quiet time");
        }
        std::thread::sleep(std::time::Duration::from_millis(3 * RECLAIM_QUIET_MS));
        assert_eq!(bodies.reclaim(1), before, "then the body is freed");
        assert_eq!(memory.used(Part::Bodies), 0);
    }

    /// The body behind an answer, lent or shared.
    fn body(at: Option<AtHand>) -> (bool, Arc<Built>) {
        match at.expect("at hand") {
            AtHand::Lent(body) => (true, body),
            AtHand::Shared(body) => (false, body),
        }
    }

    #[test]
    fn a_memo_lends_a_small_body_and_takes_it_back_without_counting() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        let bodies = Bodies::new(memory.clone(), 1 << 20, 1);
        let key = Key {
            len: 600,
            kind: Kind::Ascii,
            form: Form::Flat,
        };
        let mut memo = Memo::default();
        runtime()
            .block_on(bodies.clone().get(BodyKey::Text(key)))
            .unwrap();
        // Found in the cache: lent at once, the memo's from now on.
        let (lent, first) = body(bodies.text(key, &mut memo));
        assert!(lent);
        // Asked again while it is lent: shared, from the cache.
        let (lent, second) = body(bodies.text(key, &mut memo));
        assert!(!lent && Arc::ptr_eq(&first, &second));
        // Given back, held (any reference to the lent body is as good):
        // the cache's, the memo's and the one still out.
        memo.give_back(second);
        assert_eq!(Arc::strong_count(&first), 3);
        // Another, while it holds one: dropped.
        memo.give_back(first);
        let (lent, again) = body(bodies.text(key, &mut memo));
        assert!(lent);
        assert_eq!(Arc::strong_count(&again), 2);
        memo.give_back(again);
        // Held, it is not evicted; the memo gone, it is.
        assert_eq!(bodies.reclaim(usize::MAX), 0);
        drop(memo);
        // Past the quiet time after a scan that freed nothing.
        std::thread::sleep(std::time::Duration::from_millis(2 * RECLAIM_QUIET_MS));
        assert!(bodies.reclaim(usize::MAX) > 0);
        assert_eq!(memory.used(Part::Bodies), 0);
    }

    #[test]
    fn a_memo_keeps_no_larger_body_alive() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        let footprint = BodyKey::Text(Key {
            len: 3000,
            kind: Kind::Ascii,
            form: Form::Flat,
        })
        .footprint();
        assert!(footprint > HELD_MOST);
        // Room for one such body in the cache.
        let bodies = Bodies::new(memory.clone(), footprint + 100, 1);
        let rt = runtime();
        let key = Key {
            len: 3000,
            kind: Kind::Ascii,
            form: Form::Flat,
        };
        let mut memo = Memo::default();
        rt.block_on(bodies.clone().get(BodyKey::Text(key))).unwrap();
        let (lent, first) = body(bodies.text(key, &mut memo));
        let (_, second) = body(bodies.text(key, &mut memo));
        assert!(!lent && Arc::ptr_eq(&first, &second));
        drop((first, second));
        // Another body evicts it: the memo does not keep it.
        rt.block_on(bodies.clone().get(text(3001, Kind::Ascii)))
            .unwrap();
        assert!(bodies.text(key, &mut memo).is_none());
        assert_eq!(memory.used(Part::Bodies), bodies.cached_bytes());
    }

    #[test]
    fn a_build_that_would_pass_the_limit_is_refused_before_it_begins() {
        let memory = Arc::new(Memory::new(1 << 20, 1 << 20));
        let bodies = Bodies::new(memory.clone(), 1 << 20, 1);
        let refused = runtime().block_on(bodies.clone().get(BodyKey::Large(2 << 20)));
        assert_eq!(
            refused.unwrap_err(),
            Unavailable::Memory(Full {
                limit: "--memory-limit"
            })
        );
        assert_eq!((memory.total(), bodies.builds().0), (0, 0));
    }

    #[test]
    fn identical_builds_in_flight_are_one_build() {
        let memory = Arc::new(Memory::new(1 << 30, 1 << 20));
        let bodies = Bodies::new(memory.clone(), 0, 1);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let got: Vec<Arc<Built>> = rt.block_on(async {
            // The one build slot taken: the build waits until all 20 ask.
            let slot = bodies.builders.clone().try_acquire_owned().unwrap();
            let waiters: Vec<_> = (0..20)
                .map(|_| tokio::spawn(bodies.clone().get(BodyKey::Large(8 << 20))))
                .collect();
            while bodies.builds() != (1, 19) {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            drop(slot);
            let mut got = Vec::new();
            for w in waiters {
                got.push(w.await.unwrap().unwrap());
            }
            got
        });
        assert!(got.iter().all(|b| Arc::ptr_eq(b, &got[0])));
        // Not cached (the cache holds nothing): counted once while held.
        assert_eq!(memory.used(Part::Bodies), got[0].charged());
        assert_eq!(memory.used(Part::Building), 0);
        drop(got);
        assert_eq!(memory.total(), 0);
    }

    #[test]
    fn wire_lengths_are_known_without_building() {
        for key in [
            text(7, Kind::Ascii),
            text(7, Kind::Latin1),
            text(7, Kind::TwoByte),
            BodyKey::Text(Key {
                len: 2000,
                kind: Kind::TwoByte,
                form: Form::Rope,
            }),
            BodyKey::Large(12345),
        ] {
            let len = match key.build() {
                Text::Ascii(b) | Text::Payload(b) => b.len(),
                Text::Rope(r) => r.get().len_bytes(),
                Text::Transcoded(t) => unflat::size(&*t, unflat::Encoding::Utf8),
            };
            assert_eq!(len, key.len(), "{key:?}");
        }
    }
}
