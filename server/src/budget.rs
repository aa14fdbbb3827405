//! The bound on queued output across all connections (`--max-queued-total`).
//!
//! Each connection bounds its own queue (`--max-queued-bytes`,
//! `--max-queued-responses`), but a thousand connections that pipeline and
//! never read would each hold their bound. The [`Budget`] is the sum of
//! what every connection's queue holds of its own ([`WriteQueue::held`]:
//! copied and encoded bytes not yet written, and its frame); past the
//! limit, a connection queues one response at a time — it parses no further
//! pipelined request while its queue is not empty — so that the sum stays
//! within the limit plus one response per connection, and every connection
//! still makes progress (one whose queue is empty holds nothing and may
//! always answer its next request).
//!
//! **Cost per request.** Each connection reports its share rounded down to
//! a [`GRANULE`], and only when the rounded value changes: a response of a
//! few kilobytes, written at once, never touches the shared counter; a
//! batch of large responses touches it once per granule. What goes
//! unreported is less than a granule per connection.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use unflat::queue::WriteQueue;

/// The unit in which connections report what they hold.
pub const GRANULE: usize = 16 * 1024;

/// What all connections' queues hold, against the limit.
#[derive(Debug)]
pub struct Budget {
    held: AtomicUsize,
    limit: usize,
}

impl Budget {
    /// A budget of `limit` bytes, none of it held.
    pub fn new(limit: usize) -> Budget {
        Budget {
            held: AtomicUsize::new(0),
            limit,
        }
    }

    /// Bytes held by all connections, as last reported.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// True when the connections hold more than the limit.
    pub fn exceeded(&self) -> bool {
        self.held() > self.limit
    }
}

/// One connection's share of the [`Budget`]; given back when dropped, so
/// that a connection that ends in any way (closed, reset, panicked,
/// aborted at shutdown) holds nothing.
#[derive(Debug)]
pub struct Account {
    budget: Arc<Budget>,
    reported: usize,
}

impl Account {
    /// A share of `budget`, holding nothing yet.
    pub fn new(budget: Arc<Budget>) -> Account {
        Account {
            budget,
            reported: 0,
        }
    }

    /// Reports what `queue` holds now.
    pub fn settle(&mut self, queue: &WriteQueue) {
        self.report(queue.held());
    }

    fn report(&mut self, held: usize) {
        let rounded = held - held % GRANULE;
        if rounded > self.reported {
            self.budget
                .held
                .fetch_add(rounded - self.reported, Ordering::Relaxed);
        } else if rounded < self.reported {
            self.budget
                .held
                .fetch_sub(self.reported - rounded, Ordering::Relaxed);
        }
        self.reported = rounded;
    }

    /// True when the budget is exceeded.
    pub fn exceeded(&self) -> bool {
        self.budget.exceeded()
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        self.report(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_reported_in_granules_and_given_back_on_drop() {
        let budget = Arc::new(Budget::new(3 * GRANULE));
        let mut a = Account::new(budget.clone());
        let mut b = Account::new(budget.clone());
        a.report(GRANULE - 1);
        assert_eq!(budget.held(), 0, "less than a granule goes unreported");
        a.report(2 * GRANULE + 5);
        b.report(GRANULE);
        assert_eq!(budget.held(), 3 * GRANULE);
        assert!(!budget.exceeded());
        b.report(2 * GRANULE);
        assert!(a.exceeded() && b.exceeded());
        a.report(0);
        assert_eq!(budget.held(), 2 * GRANULE);
        drop(b);
        assert_eq!(budget.held(), 0);
    }
}
