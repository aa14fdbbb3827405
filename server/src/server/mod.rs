//! The listener: accepts connections, bounds how many are served at once,
//! runs them on a tokio runtime of `--workers` threads (work-stealing; with
//! one, tokio's current-thread scheduler), and
//! shuts down gracefully. (Thread-per-core was measured and won nowhere:
//! docs/results/instructions-and-profiles.md, "Runtime".) The layers it
//! serves are made in `stack.rs`, connections accepted in `accept.rs`;
//! `running.rs` runs one on a thread of its own.

mod accept;
mod admin;
mod notify;
mod running;
mod signals;
mod stack;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::{JoinError, JoinHandle};
use tracing::{error, info};

pub use admin::{Admin, AdminReply};
pub use running::Running;
pub use stack::{Making, Stack};

use accept::{accept_loop, listen};
use admin::AdminPort;

use crate::config::Config;
use crate::net::tls::{self, Tls};
use crate::net::{self, shutdown};
use crate::service::{Observe, Service};

/// A bound server, not yet accepting.
pub struct Server<S: Service> {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    stack: Arc<Stack<S>>,
    tls: Option<Tls>,
    /// `--admin-addr`'s listener, bound beside the public one.
    admin: Option<AdminPort<S>>,
    /// Whether [`Server::run`]'s runtime has tokio's time driver.
    time_driver: bool,
}

impl<S: Service> std::fmt::Debug for Server<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl<S: Service> Server<S> {
    /// Binds `config.addr` to serve what `make` makes. Fails on a
    /// configuration that cannot work ([`Config::validate`]), or a TLS
    /// certificate or key that cannot be used, before binding anything;
    /// and, once `make` has made the service, when `--access-log` is asked of a service whose
    /// observer writes none ([`Observe::writes_access_log`]): the listener
    /// is then closed without having accepted. With `--admin-addr`, binds
    /// that too ([`Admin`]'s routes).
    pub fn bind_with(config: Config, make: impl FnOnce(Making<'_>) -> S) -> io::Result<Server<S>> {
        let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
        config.validate().map_err(invalid)?;
        // Every server logs as its flags ask, and its requests' panics
        // never block a worker on stderr.
        crate::events::install(&config);
        let tls = config
            .tls()
            .map(|source| tls::load(&source, config.tls_provider))
            .transpose()
            .map_err(invalid)?;
        let listener = listen(config.addr, config.reuse_port).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.addr))
        })?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stack = Stack::with_service(config, addr, tls.as_ref(), make);
        let protocol = stack.protocol();
        if stack.config().access_log && !protocol.observer.writes_access_log() {
            return Err(invalid(
                "--access-log: this application's observer writes no access log \
                 (the core's `observe::Standard` does)"
                    .into(),
            ));
        }
        stack
            .connections()
            .transport
            .certificate_expires(tls.as_ref().and_then(Tls::not_after));
        let stack = Arc::new(stack);
        let admin = match stack.config().admin_addr {
            Some(at) => Some(AdminPort::bind(at, &stack)?),
            None => None,
        };
        Ok(Server {
            listener,
            addr,
            stack,
            tls,
            admin,
            time_driver: true,
        })
    }

    /// The runtime [`Server::run`] builds without tokio's time driver,
    /// which it has by default so that a service's job may await
    /// `tokio::time` (a sleep, a client's timeout). The connections' own
    /// timers need none, and the driver costs every worker's park
    /// (docs/results/history.md, "Timers"): a service whose jobs await no
    /// tokio timer (the demo binary's) may go without it. [`Server::serve`] runs on
    /// the caller's runtime, with the caller's drivers.
    pub fn without_time_driver(mut self) -> Server<S> {
        self.time_driver = false;
        self
    }

    /// The address it listens on (the port chosen when binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin address it listens on (`--admin-addr`), if any.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|a| a.stack.config().addr)
    }

    /// Its layers.
    pub fn stack(&self) -> &Arc<Stack<S>> {
        &self.stack
    }

    /// Serves until `stop` completes, then lets connections finish their
    /// responses within the grace period. Blocks; builds its own runtime
    /// (`--workers` threads, IO and time drivers). Inside an async
    /// application, [`Server::serve`] runs on the caller's runtime instead.
    pub fn run(self, stop: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        self.run_controlled(|controls| stop_on(stop, controls))
    }

    /// Serves as [`Server::run`] does until SIGINT or SIGTERM (a second one
    /// while it drains closes what is left), reloading its certificate on
    /// SIGHUP; `started` is called once the signal handlers are in place
    /// (a signal sent as soon as a program says it listens must find
    /// them), then the address is logged.
    pub fn run_on_signals(self, started: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let config = self.stack.config();
        let workers = config.worker_threads();
        let tls = config.tls().map(|_| config.tls_provider);
        let addr = self.local_addr();
        let admin = self.admin_addr().map(tracing::field::display);
        self.run_controlled(move |controls| async move {
            let signals = signals::Signals::listen();
            started();
            notify::state("READY=1");
            match tls {
                Some(provider) => info!(%addr, workers, tls = provider.name(), admin, "listening"),
                None => info!(%addr, workers, admin, "listening"),
            }
            signals.forward(controls).await;
        })
    }

    /// Serves on the runtime this is awaited on (inside `#[tokio::main]`,
    /// say) until `stop` completes, then lets connections finish their
    /// responses within the grace period, as [`Server::run`] does on a
    /// runtime of its own. With `--workers N` and a caller's runtime that
    /// has not N worker threads (a current-thread runtime has one), the
    /// server runs on a runtime of its own of N, as [`Server::run`] builds
    /// it, awaited from the caller's (which
    /// its jobs may still use: a tokio resource keeps its runtime's
    /// drivers). Must be awaited on a tokio runtime with IO enabled.
    pub async fn serve(self, stop: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
        if let Some(workers) = self.stack.config().workers {
            let here = tokio::runtime::Handle::current();
            if here.metrics().num_workers() != usize::from(workers) {
                let ran = tokio::task::spawn_blocking(move || self.run(stop)).await;
                return ran.map_err(io::Error::other)?;
            }
        }
        self.serve_controlled(|controls| stop_on(stop, controls))
            .await
    }

    /// Serves as [`Server::run`] does, driven by the [`Control`]s that
    /// `controls` sends from the server's runtime; its end is a `Stop`.
    pub fn run_controlled<F>(
        self,
        controls: impl FnOnce(mpsc::UnboundedSender<Control>) -> F,
    ) -> io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        // One worker has no one to steal work from: tokio's current-thread
        // scheduler runs the same tasks without the work-stealing one's
        // bookkeeping on every wake (docs/results/instructions-and-profiles.md).
        let config = self.stack.config();
        let workers = config.worker_threads();
        let mut runtime = match workers {
            1 => tokio::runtime::Builder::new_current_thread(),
            workers => {
                let mut runtime = tokio::runtime::Builder::new_multi_thread();
                runtime.worker_threads(workers);
                runtime
            }
        };
        // The connections' timers are the server's own (`net/timers.rs`);
        // the time driver is the services' (`Server::without_time_driver`).
        runtime.enable_io();
        let _slack = net::nap::install(
            &mut runtime,
            config.nap,
            workers,
            self.stack.connections().transport.clone(),
        );
        if self.time_driver {
            runtime.enable_time();
        }
        let runtime = runtime.build()?;
        let served = runtime.block_on(self.serve_controlled(controls));
        // A body still being built for a connection that was closed is
        // nobody's: not waited for past a second.
        runtime.shutdown_timeout(Duration::from_secs(1));
        served
    }

    /// [`Server::serve`] driven by the [`Control`]s that `controls` sends;
    /// its end is a `Stop`. Once stopped, it says so in the log and waits
    /// (a moment at most) for the log's last lines to reach stderr, so that
    /// an application that exits next loses none of them.
    pub async fn serve_controlled<F>(
        self,
        controls: impl FnOnce(mpsc::UnboundedSender<Control>) -> F,
    ) -> io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let served = self.serve_until_stopped(controls).await;
        if served.is_ok() {
            info!("stopped");
        }
        let _ = tokio::task::spawn_blocking(|| crate::log::flush(crate::log::AT_EXIT)).await;
        served
    }

    /// [`Server::serve_controlled`]'s serving.
    async fn serve_until_stopped<F>(
        self,
        controls: impl FnOnce(mpsc::UnboundedSender<Control>) -> F,
    ) -> io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (trigger, shutdown) = shutdown::channel();
        let permits = Arc::new(Semaphore::new(self.stack.config().max_connections));
        let (source, provider) = (self.stack.config().tls(), self.stack.config().tls_provider);
        let tls = Arc::new(RwLock::new(self.tls.map(Arc::new)));
        let cut = Arc::new(Notify::new());
        let transport = self.stack.connections().transport.clone();
        let reload_now = || reload(&tls, source.as_ref(), provider, &transport);
        {
            let (tx, mut rx) = mpsc::unbounded_channel();
            tokio::spawn(controls(tx));
            let listener = TcpListener::from_std(self.listener)?;
            let admin = self.admin.map(serve_admin).transpose()?;
            let stack = self.stack.clone();
            let mut accept = tokio::spawn(accept_loop(
                listener,
                self.stack,
                tls.clone(),
                shutdown,
                permits,
                cut.clone(),
            ));
            while let Some(Control::Reload) = rx.recv().await {
                reload_now();
            }
            // /healthz answers 503 from now on, and responses close their
            // connections; new ones are still served for the delay.
            stack.protocol().draining.begin();
            notify::state("STOPPING=1");
            let delay = stack.config().shutdown_delay;
            if !delay.is_zero() {
                info!(delay = ?delay, "shutting down: still accepting for --shutdown-delay");
                let timer = net::timers::Timer::new();
                let until = crate::clock::Moment::in_(delay);
                timer.arm(until);
                let delayed = timer.passed(until);
                tokio::pin!(delayed);
                loop {
                    tokio::select! {
                        () = &mut delayed => break,
                        control = rx.recv() => match control {
                            Some(Control::Reload) => reload_now(),
                            // A second Stop: the drain begins now.
                            Some(Control::Stop) | None => break,
                        },
                    }
                }
            }
            trigger.trigger();
            let drained = drain(&mut accept, &mut rx, &cut, reload_now).await;
            // The admin address answers until the public port has drained;
            // its own drain is cut short by a Stop as the public one's is.
            if let Some((trigger, cut, mut accept)) = admin {
                trigger.trigger();
                let _ = drain(&mut accept, &mut rx, &cut, reload_now).await;
            }
            drained.map_err(io::Error::other)
        }
    }
}

/// Awaits `accept`, the accept loop of a listener whose trigger has
/// fired, while the controls still act: a reload reloads, a Stop cuts the
/// drain short (`cut`); with the controls gone, it just awaits.
async fn drain<T>(
    accept: &mut JoinHandle<T>,
    rx: &mut mpsc::UnboundedReceiver<Control>,
    cut: &Notify,
    reload: impl Fn(),
) -> Result<T, JoinError> {
    loop {
        tokio::select! {
            drained = &mut *accept => return drained,
            control = rx.recv() => match control {
                Some(Control::Reload) => reload(),
                Some(Control::Stop) => cut.notify_one(),
                None => return accept.await,
            },
        }
    }
}

/// Accepts on the admin address until its trigger; returns the trigger,
/// what cuts its drain short, and the accept loop, which ends once its
/// connections have (within `--grace`).
fn serve_admin<S: Service>(
    admin: AdminPort<S>,
) -> io::Result<(shutdown::Trigger, Arc<Notify>, JoinHandle<()>)> {
    let (trigger, shutdown) = shutdown::channel();
    let listener = TcpListener::from_std(admin.listener)?;
    let permits = Arc::new(Semaphore::new(admin.stack.config().max_connections));
    let cut = Arc::new(Notify::new());
    let accept = tokio::spawn(accept_loop(
        listener,
        admin.stack,
        Arc::new(RwLock::new(None)),
        shutdown,
        permits,
        cut.clone(),
    ));
    Ok((trigger, cut, accept))
}

/// Sends `Stop` once `stop` completes.
async fn stop_on(stop: impl Future<Output = ()>, controls: mpsc::UnboundedSender<Control>) {
    stop.await;
    let _ = controls.send(Control::Stop);
}

/// What the operator asks of a running server ([`Server::run_controlled`];
/// the command line turns signals into these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Stop accepting and let the connections finish within `--grace`; a
    /// second `Stop` while they do closes those left at once.
    Stop,
    /// Load the TLS certificate and key again from their files, for the
    /// connections accepted from then on (those open keep theirs).
    Reload,
}

/// Loads the certificate and key of `source` again into `tls`; on failure
/// the one in use stays, and the log says why.
fn reload(
    tls: &RwLock<Option<Arc<Tls>>>,
    source: Option<&tls::CertSource>,
    provider: tls::Provider,
    transport: &net::Transport,
) {
    match source {
        None => info!("reload: not serving HTTPS, nothing to reload"),
        Some(tls::CertSource::SelfSigned) => {
            info!("reload: the certificate is self-signed for this run; kept")
        }
        Some(source @ tls::CertSource::Files { cert, key }) => match tls::load(source, provider) {
            Ok(loaded) => {
                transport.certificate_expires(loaded.not_after());
                *tls.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(loaded));
                transport.reloaded(true);
                info!(cert = %cert.display(), key = %key.display(), "reload: certificate and key loaded; new connections use them");
            }
            // An error: the operator's new certificate is not in use.
            Err(e) => {
                transport.reloaded(false);
                error!("reload failed, the certificate in use is kept: {e}");
            }
        },
    }
}
