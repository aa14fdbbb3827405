//! The shutdown signal every connection listens to.

use tokio::sync::watch;

/// Triggers a shutdown: connections finish the responses they are writing,
/// idle ones close at once.
#[derive(Debug)]
pub struct Trigger(watch::Sender<bool>);

/// One connection's view of the shutdown signal.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new, untriggered signal.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger(tx), Shutdown(rx))
}

impl Trigger {
    /// Tells every connection to finish.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }
}

impl Shutdown {
    /// True once shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once shutdown has begun (at once if it already has).
    pub async fn triggered(&mut self) {
        // An error means the trigger is gone, which only happens once the
        // server itself has stopped: treat it as a shutdown too.
        let _ = self.0.wait_for(|&down| down).await;
    }
}
