//! The signals a server on its own runtime answers: SIGINT and SIGTERM
//! stop it (a second one while it drains closes what is left), SIGHUP
//! reloads its TLS certificate and key, as nginx does.

use tokio::sync::mpsc::UnboundedSender;
use tracing::{info, warn};

use super::Control;

/// The handlers, installed.
pub(super) struct Signals {
    #[cfg(unix)]
    streams: [(Option<tokio::signal::unix::Signal>, &'static str, Control); 3],
}

impl Signals {
    /// Installs the handlers (on the runtime of the caller).
    pub(super) fn listen() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen = |kind: SignalKind, name: &'static str, control| {
                let stream = signal(kind)
                    .map_err(|e| warn!("cannot listen for {name}: {e}"))
                    .ok();
                (stream, name, control)
            };
            Signals {
                streams: [
                    listen(SignalKind::interrupt(), "SIGINT", Control::Stop),
                    listen(SignalKind::terminate(), "SIGTERM", Control::Stop),
                    listen(SignalKind::hangup(), "SIGHUP", Control::Reload),
                ],
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// Sends what each signal asks to `controls` until the server no longer
    /// listens.
    pub(super) async fn forward(mut self, controls: UnboundedSender<Control>) {
        loop {
            let (name, control) = self.next().await;
            info!(signal = name, "signal received");
            if controls.send(control).is_err() {
                return;
            }
        }
    }

    /// The next signal: its name and what it asks.
    #[cfg(unix)]
    async fn next(&mut self) -> (&'static str, Control) {
        std::future::poll_fn(|cx| {
            for (stream, name, control) in &mut self.streams {
                if let Some(stream) = stream {
                    if stream.poll_recv(cx).is_ready() {
                        return std::task::Poll::Ready((*name, *control));
                    }
                }
            }
            std::task::Poll::Pending
        })
        .await
    }

    /// The next signal: its name and what it asks.
    #[cfg(not(unix))]
    async fn next(&mut self) -> (&'static str, Control) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        ("Ctrl-C", Control::Stop)
    }
}
