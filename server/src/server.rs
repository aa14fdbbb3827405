//! The listener: accepts connections, bounds how many are served at once,
//! runs them on a work-stealing tokio runtime of `--workers` threads, and
//! shuts down gracefully. (Thread-per-core was measured and won nowhere:
//! docs/results/instructions-and-profiles.md, "Runtime".)

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use crate::config::Config;
use crate::log;
use crate::memory::Memory;
use crate::net::shutdown::{self, Shutdown};
use crate::net::tls::{self, Tls};
use crate::net::{self, Connections, IdleConnections, Transport};
use crate::response::Writer;
use crate::service::Service;
use crate::session::{Draining, Protocol};
use crate::site::Site;

/// A server's layers, made from its [`Config`]: the connections' shared
/// part, which holds the protocol, which holds the service. Each layer
/// sees only its own part.
#[derive(Debug)]
pub struct Stack<S: Service = Site> {
    config: Config,
    connections: Connections<S>,
}

/// What a service is made with ([`Server::bind_with`]).
#[derive(Debug)]
pub struct Making<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// The address it listens on.
    pub address: SocketAddr,
    /// Its certificate, over HTTPS.
    pub tls: Option<&'a Tls>,
    /// The memory account.
    pub memory: &'a Arc<Memory>,
    /// Set once shutdown has begun.
    pub draining: &'a Draining,
    /// Connections open, bytes written, send timeouts.
    pub transport: &'a Arc<Transport>,
}

/// The demo site, as the server makes it.
fn demo(m: Making<'_>) -> Site {
    let trust = m.tls.and_then(Tls::self_signed_pem);
    let provider = m.tls.map(|t| t.provider);
    let settings = m.config.site(m.address, provider, trust);
    Site::new(settings, m.memory, m.draining.clone(), m.transport.clone())
}

impl Stack<Site> {
    /// The layers of the demo server with `config` listening on `address`,
    /// over `tls` when there is one.
    pub fn new(config: Config, address: SocketAddr, tls: Option<&Tls>) -> Stack<Site> {
        Stack::with_service(config, address, tls, demo)
    }

    /// The demo site: routes, bodies, metrics, the help text.
    pub fn site(&self) -> &Site {
        &self.connections.protocol.service
    }
}

impl<S: Service> Stack<S> {
    /// The layers of a server with `config` listening on `address`, over
    /// `tls` when there is one, serving what `make` makes.
    pub fn with_service(
        config: Config,
        address: SocketAddr,
        tls: Option<&Tls>,
        make: impl FnOnce(Making<'_>) -> S,
    ) -> Stack<S> {
        let memory = Arc::new(Memory::new(config.memory_limit, config.connection_memory()));
        let draining = Draining::default();
        let transport = Arc::new(Transport::default());
        let service = make(Making {
            config: &config,
            address,
            tls,
            memory: &memory,
            draining: &draining,
            transport: &transport,
        });
        let writer = Writer::new(
            config.strategy,
            config.idle_timeout.as_secs(),
            memory.clone(),
        );
        let protocol = Protocol {
            observer: service.observer(),
            service,
            writer,
            memory,
            limits: config.session(),
            draining,
        };
        Stack {
            connections: Connections {
                protocol,
                timeouts: config.timeouts(),
                policy: config.policy(),
                idle: IdleConnections::default(),
                transport,
            },
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What every connection shares.
    pub fn connections(&self) -> &Connections<S> {
        &self.connections
    }

    /// What every session shares.
    pub fn protocol(&self) -> &Protocol<S> {
        &self.connections.protocol
    }

    /// The service served.
    pub fn service(&self) -> &S {
        &self.connections.protocol.service
    }

    /// The memory account.
    pub fn memory(&self) -> &Memory {
        &self.connections.protocol.memory
    }
}

/// A bound server, not yet accepting.
pub struct Server<S: Service = Site> {
    listener: std::net::TcpListener,
    addr: SocketAddr,
    stack: Arc<Stack<S>>,
    tls: Option<Tls>,
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

impl Server<Site> {
    /// Binds `config.addr` and prepares the demo's routes. Fails on a
    /// configuration that cannot work ([`Config::validate`]), or a TLS
    /// certificate or key that cannot be used, before binding anything.
    pub fn bind(config: Config) -> io::Result<Server<Site>> {
        // The demo's jobs build bodies on the blocking pool and await no
        // tokio timer: its runtime goes without the time driver.
        Ok(Server::bind_with(config, demo)?.without_time_driver())
    }
}

impl<S: Service> Server<S> {
    /// Binds `config.addr` to serve what `make` makes, as [`Server::bind`]
    /// does the demo.
    pub fn bind_with(config: Config, make: impl FnOnce(Making<'_>) -> S) -> io::Result<Server<S>> {
        let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
        config.validate().map_err(invalid)?;
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
        Ok(Server {
            listener,
            addr,
            stack: Arc::new(Stack::with_service(config, addr, tls.as_ref(), make)),
            tls,
            time_driver: true,
        })
    }

    /// The runtime [`Server::run`] builds without tokio's time driver,
    /// which it has by default so that a service's job may await
    /// `tokio::time` (a sleep, a client's timeout). The connections' own
    /// timers need none, and the driver costs every worker's park
    /// (docs/measurements.md, "Timers"): a service whose jobs await no
    /// tokio timer (the demo's) may go without it. [`Server::serve`] runs on
    /// the caller's runtime, with the caller's drivers.
    pub fn without_time_driver(mut self) -> Server<S> {
        self.time_driver = false;
        self
    }

    /// The address it listens on (the port chosen when binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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

    /// Serves on the runtime this is awaited on (inside `#[tokio::main]`,
    /// say) until `stop` completes, then lets connections finish their
    /// responses within the grace period, as [`Server::run`] does on a
    /// runtime of its own. `--workers` is the caller's runtime's to set.
    /// Must be awaited on a tokio runtime with IO enabled.
    pub async fn serve(self, stop: impl Future<Output = ()> + Send + 'static) -> io::Result<()> {
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
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        runtime.worker_threads(self.stack.config.worker_threads());
        // The connections' timers are the server's own (`net/timers.rs`);
        // the time driver is the services' (`Server::without_time_driver`).
        runtime.enable_io();
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
    /// its end is a `Stop`.
    pub async fn serve_controlled<F>(
        self,
        controls: impl FnOnce(mpsc::UnboundedSender<Control>) -> F,
    ) -> io::Result<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (trigger, shutdown) = shutdown::channel();
        let permits = Arc::new(Semaphore::new(self.stack.config.max_connections));
        let (source, provider) = (self.stack.config.tls(), self.stack.config.tls_provider);
        let tls = Arc::new(RwLock::new(self.tls));
        let cut = Arc::new(Notify::new());
        {
            let (tx, mut rx) = mpsc::unbounded_channel();
            tokio::spawn(controls(tx));
            let listener = TcpListener::from_std(self.listener)?;
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
                reload(&tls, source.as_ref(), provider);
            }
            // /healthz answers 503 from now on, and responses close their
            // connections; new ones are still served for the delay.
            stack.protocol().draining.begin();
            let delay = stack.config.shutdown_delay;
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
                            Some(Control::Reload) => reload(&tls, source.as_ref(), provider),
                            // A second Stop: the drain begins now.
                            Some(Control::Stop) | None => break,
                        },
                    }
                }
            }
            trigger.trigger();
            loop {
                tokio::select! {
                    drained = &mut accept => return drained.map_err(io::Error::other),
                    control = rx.recv() => match control {
                        Some(Control::Reload) => reload(&tls, source.as_ref(), provider),
                        Some(Control::Stop) => cut.notify_one(),
                        None => {
                            let drained = accept.await;
                            return drained.map_err(io::Error::other);
                        }
                    },
                }
            }
        }
    }
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
fn reload(tls: &RwLock<Option<Tls>>, source: Option<&tls::CertSource>, provider: tls::Provider) {
    match source {
        None => info!("reload: not serving HTTPS, nothing to reload"),
        Some(tls::CertSource::SelfSigned) => {
            info!("reload: the certificate is self-signed for this run; kept")
        }
        Some(source @ tls::CertSource::Files { cert, key }) => match tls::load(source, provider) {
            Ok(loaded) => {
                *tls.write().unwrap_or_else(|e| e.into_inner()) = Some(loaded);
                info!(cert = %cert.display(), key = %key.display(), "reload: certificate and key loaded; new connections use them");
            }
            // An error: the operator's new certificate is not in use.
            Err(e) => error!("reload failed, the certificate in use is kept: {e}"),
        },
    }
}

/// How often the listener, at `--max-connections`, asks again for an idle
/// connection to give way.
const ASK_AGAIN: Duration = Duration::from_millis(100);

/// Connections the kernel queues for `accept` (tokio's default): a burst of
/// new connections past std's 128 is not refused.
const BACKLOG: i32 = 1024;

/// A listening socket on `addr` with a [`BACKLOG`] of its own, and
/// SO_REUSEPORT with `reuse_port`.
fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    if reuse_port {
        set_reuse_port(&socket)?;
    }
    // Inherited by every accepted connection.
    net::limit_unsent(&socket)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

#[cfg(all(
    unix,
    not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
))]
fn set_reuse_port(socket: &socket2::Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

#[cfg(not(all(
    unix,
    not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
)))]
fn set_reuse_port(_: &socket2::Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "SO_REUSEPORT (--reuse-port) is not available on this system",
    ))
}

/// Accepts connections until shutdown, each over the TLS current when it
/// is accepted; then waits for them up to the grace period, or until `cut`.
async fn accept_loop<S: Service>(
    listener: TcpListener,
    stack: Arc<Stack<S>>,
    tls: Arc<RwLock<Option<Tls>>>,
    shutdown: Shutdown,
    permits: Arc<Semaphore>,
    cut: Arc<Notify>,
) {
    let mut connections = JoinSet::new();
    // Out of file descriptors, accept fails every 50 ms: logged once a
    // second, with a count.
    let mut failing = log::Repeated::default();
    {
        let stopped = shutdown.stopped();
        tokio::pin!(stopped);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => {
                        if let Some(more) = failing.passed() {
                            warn!("accept failed{more}; accepting again");
                        }
                        a
                    }
                    Err(e) => {
                        if let Some(more) = failing.occurred() {
                            warn!("accept failed: {e}{more}");
                        }
                        net::timers::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = stopped.as_mut() => break,
            };
            // At the limit, the connection idle longest gives way; with none
            // idle, this one waits and the ask is repeated.
            let permit = loop {
                if let Ok(p) = permits.clone().try_acquire_owned() {
                    break Some(p);
                }
                stack.connections.idle.ask_longest_idle();
                tokio::select! {
                    p = permits.clone().acquire_owned() => break p.ok(),
                    () = net::timers::sleep(ASK_AGAIN) => {}
                    () = stopped.as_mut() => break None,
                }
            };
            let Some(permit) = permit else { break };
            let _ = stream.set_nodelay(true);
            let tls = tls.read().unwrap_or_else(|e| e.into_inner()).clone();
            let (stack, shutdown) = (stack.clone(), shutdown.clone());
            connections.spawn(async move {
                net::handle(stream, peer, tls.as_ref(), &stack.connections, &shutdown).await;
                drop(permit);
            });
            // Reap finished connections so the set does not grow.
            while connections.try_join_next().is_some() {}
        }
    }
    drop(listener);
    // Reaped, the set holds the open connections.
    while connections.try_join_next().is_some() {}
    info!(
        open = connections.len(),
        "shutting down: finishing responses in progress (a second Ctrl-C or SIGTERM closes them now)"
    );
    let grace = stack.config.grace;
    let drained = tokio::select! {
        drained = net::timers::timeout(grace, async {
            while connections.join_next().await.is_some() {}
        }) => drained.is_ok(),
        () = cut.notified() => {
            while connections.try_join_next().is_some() {}
            warn!(cut = connections.len(), "second signal: closing the connections left now, their responses unfinished");
            connections.abort_all();
            return;
        }
    };
    if !drained {
        warn!(
            left = connections.len(),
            "grace period over; closing the rest"
        );
        connections.abort_all();
    }
}

/// A server running on its own thread, for tests and benchmark harnesses:
/// bound to `config.addr` (use port 0), stopped on drop.
#[derive(Debug)]
pub struct Running<S: Service = Site> {
    addr: SocketAddr,
    stack: Arc<Stack<S>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Running<Site> {
    /// Binds and starts the demo server with `config` on a new thread.
    pub fn start(config: Config) -> io::Result<Running<Site>> {
        Running::start_with(config, demo)
    }
}

impl<S: Service> Running<S> {
    /// Binds and starts a server of what `make` makes, with `config`, on a
    /// new thread.
    pub fn start_with(
        config: Config,
        make: impl FnOnce(Making<'_>) -> S,
    ) -> io::Result<Running<S>> {
        let server = Server::bind_with(config, make)?;
        let (addr, stack) = (server.local_addr(), server.stack().clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("unflat-server".into())
            .spawn(move || {
                server.run(async {
                    let _ = rx.await;
                })
            })?;
        Ok(Running {
            addr,
            stack,
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl<S: Service> Running<S> {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its layers.
    pub fn stack(&self) -> &Arc<Stack<S>> {
        &self.stack
    }

    /// Shuts the server down gracefully and waits for it.
    pub fn stop(mut self) -> io::Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> io::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("server thread panicked"))),
            None => Ok(()),
        }
    }
}

impl<S: Service> Drop for Running<S> {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}
