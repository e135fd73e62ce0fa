//! A service: a broker, a router, shared state and hooks; started, run, stopped.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ruststream_core::{Broker, SubscribeError, SubscribeSpec};
use tokio::task::JoinSet;

use crate::deferred::Deferred;
use crate::extract::{AppContext, ExtractError};
use crate::mount::{DelayedLimit, Mount};
use crate::publisher::Publisher;
use crate::router::Router;
use crate::runtime::{AfterSettle, Runtime};
use crate::settled::Settled;
use crate::shutdown::Shutdown;
use crate::target::PublishTarget;

/// Why a service did not run to a clean stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A handler cannot be called as mounted (its shared state is missing).
    #[error("mount {address}: {source}")]
    Mount {
        /// The mount's address.
        address: String,
        /// What is wrong.
        source: ExtractError,
    },
    /// The broker refused a subscription.
    #[error("subscribe to {address}: {source}")]
    Subscribe {
        /// The mount's address.
        address: String,
        /// The broker's refusal.
        source: SubscribeError,
    },
    /// A per-mount setting in the environment is malformed or names no mount.
    #[error("{variable}: {reason}")]
    Setting {
        /// The variable's name.
        variable: String,
        /// What is wrong.
        reason: String,
    },
    /// A failure policy of `fail_fast` stopped the service.
    #[error("stopped by fail_fast: {0}")]
    FailFast(String),
    /// The HTTP endpoint (`App::http`, feature `http`) could not listen.
    #[error("http endpoint: {0}")]
    Http(std::io::Error),
    /// A third SIGINT or SIGTERM during a stop ended it at once ([`App::run`]).
    #[error("stop forced with {in_flight} deliveries in flight (left unsettled)")]
    Forced {
        /// The deliveries still being handled, left unsettled for the broker.
        in_flight: usize,
    },
}

type StartHook = Box<dyn FnOnce() + Send>;

/// A service: handlers mounted on a broker's subscriptions.
///
/// ```no_run
/// use ruststream::{App, Router, memory::MemoryBroker};
///
/// async fn greet(name: String) {
///     println!("hello, {name}");
/// }
///
/// # async fn run() -> Result<(), ruststream::RunError> {
/// App::new(MemoryBroker::new())
///     .router(Router::new().mount("greetings", greet))
///     .run() // until SIGINT or SIGTERM
///     .await
/// # }
/// ```
pub struct App {
    pub(crate) broker: Arc<dyn Broker>,
    pub(crate) router: Router,
    pub(crate) targets: Vec<PublishTarget>,
    pub(crate) app: AppContext,
    after_settle: Vec<AfterSettle>,
    on_start: Vec<StartHook>,
    on_stop: Vec<StartHook>,
    grace: Duration,
    delayed: DelayedLimit,
    pub(crate) name: String,
    pub(crate) observe: crate::observe::Observe,
    /// Per-mount settings' variables; `None`: the process environment's.
    mount_env: Option<Vec<(String, String)>>,
}

impl App {
    /// A service on `broker` with no routes.
    pub fn new(broker: impl Broker) -> Self {
        Self::with_broker(Arc::new(broker))
    }

    /// A service on a broker chosen at run time (by URL, say).
    ///
    /// A stopping service closes its broker ([`Running::stop`]): give each service its own
    /// connection (for the memory broker, a clone) rather than one shared by several.
    pub fn with_broker(broker: Arc<dyn Broker>) -> Self {
        let publisher = Publisher::for_broker(broker.clone());
        Self {
            broker,
            router: Router::new(),
            targets: Vec::new(),
            app: AppContext::new(publisher),
            after_settle: Vec::new(),
            on_start: Vec::new(),
            on_stop: Vec::new(),
            grace: Duration::from_secs(30),
            delayed: DelayedLimit::default(),
            name: default_name(),
            observe: crate::observe::Observe::default(),
            mount_env: None,
        }
    }

    /// The broker the service runs on.
    pub fn broker(&self) -> &Arc<dyn Broker> {
        &self.broker
    }

    /// The service's name (default: the executable's file name), on its logs and on the
    /// dead letters it publishes (`x-ruststream-dead-letter-service`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds the routes of `router`.
    pub fn router(mut self, router: Router) -> Self {
        self.router = self.router.merge(router);
        self
    }

    /// Mounts one handler.
    pub fn mount<H, M>(mut self, mount: impl Into<Mount>, handler: H) -> Self
    where
        H: crate::handler::Handler<M>,
        M: 'static,
    {
        self.router = self.router.mount(mount, handler);
        self
    }

    /// Declares an address the service publishes to (an address or a
    /// [`PublishTarget`] with its payload), for descriptions of the service: its AsyncAPI
    /// document has a channel and a `send` operation for each. Nothing changes at run
    /// time.
    pub fn publishes(mut self, target: impl Into<PublishTarget>) -> Self {
        self.targets.push(target.into());
        self
    }

    /// The service's name (see [`App::name`]).
    pub fn service_name(&self) -> &str {
        &self.name
    }

    /// Adds shared state, taken by handlers as [`State<S>`](crate::State).
    pub fn state<S: Clone + Send + Sync + 'static>(mut self, state: S) -> Self {
        self.app.insert_state(state);
        self
    }

    /// Runs `hook` when the service has subscribed and starts handling.
    pub fn on_start(mut self, hook: impl FnOnce() + Send + 'static) -> Self {
        self.on_start.push(Box::new(hook));
        self
    }

    /// Runs `hook` when the service has stopped handling, before the broker closes.
    pub fn on_stop(mut self, hook: impl FnOnce() + Send + 'static) -> Self {
        self.on_stop.push(Box::new(hook));
        self
    }

    /// Runs `hook` after each settlement (keep it quick: it runs on the delivery path).
    pub fn after_settle(mut self, hook: impl Fn(&Settled) + Send + Sync + 'static) -> Self {
        self.after_settle.push(Arc::new(hook));
        self
    }

    /// Bounds the retry copies waiting in the process for their delay (default 10,000
    /// copies, 64 MiB): at the bound the service takes no more deliveries until one is
    /// out. A copy whose publish fails is tried again with back-off, so an outage
    /// fills this up rather than losing copies.
    pub fn delayed_limit(mut self, limit: DelayedLimit) -> Self {
        self.delayed = limit;
        self
    }

    /// How long in-flight handlers may run on after a stop is asked (default 30 s);
    /// what has not finished then stays unsettled for the broker to redeliver.
    pub fn shutdown_timeout(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Reads per-mount settings from `vars` instead of the process environment.
    ///
    /// At [`start`](Self::start) every variable named
    /// `RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>` becomes a setting of the mounts whose
    /// address is `<ADDRESS>` once upper-cased with every character other than an ASCII
    /// letter or digit as `_` ([`mount_env_name`](crate::mount::mount_env_name)); `<KEY>` is one
    /// of the broker's keys (`FORM`, `MIN_IDLE`, `CREDIT`…), read in lower case. A
    /// variable that names no mount stops the start with [`RunError::Setting`]; a key the
    /// broker does not know, or a value it cannot read, with [`RunError::Subscribe`]
    /// naming the variable. The mount's typed options win over these settings, which
    /// win over the broker URL's query. See the running guide, "Settings from
    /// configuration".
    ///
    /// An empty table (`mount_settings(Vec::<(String, String)>::new())`) turns the
    /// environment's table off: the start then does not read the environment, which
    /// std can only list by copying every variable (most of what a start costs).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use ruststream::{App, RunError, memory::MemoryBroker};
    ///
    /// let app = App::new(MemoryBroker::new())
    ///     .mount("orders", |_: u32| async {})
    ///     .mount_settings([("RUSTSTREAM_MOUNT__ORDRES__FORM", "list")]);
    /// let error = app.start().await.err().expect("a typo");
    /// assert!(matches!(error, RunError::Setting { .. }));
    /// assert_eq!(
    ///     error.to_string(),
    ///     "RUSTSTREAM_MOUNT__ORDRES__FORM: names no mount (mounted: ORDERS)"
    /// );
    /// # }
    /// ```
    pub fn mount_settings<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let vars = vars.into_iter().map(|(k, v)| (k.into(), v.into()));
        self.mount_env = Some(vars.collect());
        self
    }

    /// Adds the per-mount settings of the environment (or of
    /// [`mount_settings`](Self::mount_settings)) to the mounts' options.
    fn configure_mounts(&mut self) -> Result<(), RunError> {
        let vars = self.mount_env.take().unwrap_or_else(|| {
            // Only the variables of the table are copied: a process's environment is
            // large, and copying all of it was most of a service's start-up cost.
            std::env::vars_os()
                .filter(|(k, _)| {
                    k.as_encoded_bytes()
                        .starts_with(crate::mount_settings::MOUNT_ENV_PREFIX.as_bytes())
                })
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect()
        });
        let table = crate::mount_settings::table(vars).map_err(|bad| RunError::Setting {
            variable: bad.0,
            reason: "expected RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>".into(),
        })?;
        for entry in table {
            let mut used = false;
            for (mount, _) in &mut self.router.routes {
                if crate::mount_settings::mount_env_name(mount.address.as_str()) == entry.address {
                    mount.options.configure(entry.setting.clone());
                    used = true;
                }
            }
            if !used {
                let mut mounted: Vec<String> = self
                    .router
                    .routes
                    .iter()
                    .map(|(m, _)| crate::mount_settings::mount_env_name(m.address.as_str()))
                    .collect();
                mounted.sort();
                mounted.dedup();
                return Err(RunError::Setting {
                    variable: entry.setting.origin,
                    reason: format!("names no mount (mounted: {})", mounted.join(", ")),
                });
            }
        }
        Ok(())
    }

    /// A publisher for use outside handlers.
    pub fn publisher(&self) -> Publisher {
        self.app.publisher().clone()
    }

    /// Runs until SIGINT or SIGTERM (or a `fail_fast`), then stops gracefully. A second
    /// signal during the stop logs how many deliveries are still in flight; a third ends
    /// the stop at once, leaving them unsettled ([`RunError::Forced`]).
    pub async fn run(self) -> Result<(), RunError> {
        crate::signals::run_on(self, crate::signals::signals()).await
    }

    /// Runs until `signal` completes (or a `fail_fast`), then stops gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<(), RunError> {
        let running = self.start().await?;
        tokio::select! {
            () = signal => {}
            () = running.runtime.shutdown.wait() => {}
        }
        running.stop().await
    }

    /// Subscribes every mount and starts handling; the service runs until
    /// [`Running::stop`].
    pub async fn start(mut self) -> Result<Running, RunError> {
        self.configure_mounts()?;
        for (mount, _) in &mut self.router.routes {
            self.observe.apply(mount);
        }
        for (mount, endpoint) in &self.router.routes {
            mount
                .options
                .check(self.broker.name())
                .map_err(|source| RunError::Subscribe {
                    address: mount.address.to_string(),
                    source,
                })?;
            endpoint
                .check(&self.app)
                .map_err(|source| RunError::Mount {
                    address: mount.address.to_string(),
                    source,
                })?;
        }
        let runtime = Arc::new(Runtime {
            app: self.app,
            service: self.name,
            system: self.broker.name(),
            publish: self.broker.publisher(),
            after_settle: self.after_settle,
            shutdown: Shutdown::default(),
            deferred: Arc::new(Deferred::new(self.delayed)),
            refused: Default::default(),
            in_flight: AtomicUsize::new(0),
            trailing: self.broker.trailing(),
        });
        let mut subscriptions = Vec::with_capacity(self.router.routes.len());
        let mut drains = Vec::new();
        for (mut mount, endpoint) in self.router.routes {
            let drain = ruststream_core::Drain::new();
            let spec = SubscribeSpec {
                address: mount.address.clone(),
                declaration: mount.declaration.clone(),
                in_flight: mount.concurrency.in_flight_with(runtime.trailing),
                options: mount.options.clone(),
                drain: drain.clone(),
            };
            let subscription =
                self.broker
                    .subscribe(spec)
                    .await
                    .map_err(|source| RunError::Subscribe {
                        address: mount.address.to_string(),
                        source,
                    })?;
            mount.drains = drain.is_accepted();
            if mount.drains {
                drains.push(drain);
            }
            subscriptions.push((mount, endpoint, subscription));
        }
        let readiness = crate::observe::Readiness {
            runtime: runtime.clone(),
            subscriptions: subscriptions
                .iter()
                .map(|(mount, _, s)| (mount.address.clone(), s.attached.clone()))
                .collect(),
        };
        let server = self
            .observe
            .start(&readiness)
            .await
            .map_err(RunError::Http)?;
        for hook in self.on_start {
            hook();
        }
        let mut tasks = JoinSet::new();
        for (mount, endpoint, subscription) in subscriptions {
            let caps = subscription.capabilities;
            let decl = &mount.declaration;
            tracing::info!(
                address = %mount.address,
                broker = self.broker.name(),
                settles = caps.settles,
                requeues = caps.requeues,
                counts = caps.counts,
                delays = caps.delays.is_some(),
                max_delay = ?caps.max_delay(),
                dead_letters_itself = caps.dead_letters,
                max_attempts = decl.max_attempts.map(|n| n.get()),
                dead_letter = decl.dead_letter.as_ref().map(|a| a.as_str()),
                retry_to = decl.retry_to.as_ref().map(|a| a.as_str()),
                concurrency = ?mount.concurrency,
                timeout = ?mount.timeout,
                drains_at_stop = mount.drains,
                "mounted"
            );
            if keeps_delays_in_process(&caps) {
                tracing::warn!(
                    address = %mount.address,
                    broker = self.broker.name(),
                    durable = self.broker.durable_delays().unwrap_or("none on this broker"),
                    "retry_after copies of this mount wait in this process: a crash or a kill \
                     before their delay is over loses them (a graceful stop publishes them early)"
                );
            }
            endpoint.serve(mount, subscription, runtime.clone(), &mut tasks);
        }
        Ok(Running {
            broker: self.broker,
            runtime,
            tasks,
            on_stop: self.on_stop,
            grace: self.grace,
            readiness,
            server,
            drains,
        })
    }
}

/// A started service.
pub struct Running {
    broker: Arc<dyn Broker>,
    runtime: Arc<Runtime>,
    tasks: JoinSet<()>,
    on_stop: Vec<StartHook>,
    grace: Duration,
    readiness: crate::observe::Readiness,
    server: Option<crate::observe::Server>,
    // The subscriptions that drain at a graceful stop.
    drains: Vec<ruststream_core::Drain>,
}

impl Running {
    /// Whether the service is ready (every subscription attached, no stop asked for).
    pub fn readiness(&self) -> crate::observe::Readiness {
        self.readiness.clone()
    }

    /// Where the HTTP endpoint (`App::http`, feature `http`) listens, if the service has one.
    pub fn http_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().map(|server| server.addr)
    }

    /// Deliveries being handled right now.
    pub fn in_flight(&self) -> usize {
        self.runtime.in_flight.load(Ordering::Acquire)
    }

    /// Retry copies and held deliveries waiting for their delay in this process.
    pub fn deferred(&self) -> usize {
        self.runtime.deferred.pending()
    }

    /// Whether a stop was asked for (or a `fail_fast` happened).
    pub fn is_stopping(&self) -> bool {
        self.runtime.shutdown.is_triggered()
    }

    /// Completes when a stop is asked for (or a `fail_fast` happens).
    pub async fn stopping(&self) {
        self.runtime.shutdown.wait().await;
    }

    /// The runtime, for what watches a stop under way (its in-flight count).
    pub(crate) fn runtime_handle(&self) -> Arc<Runtime> {
        self.runtime.clone()
    }

    /// A publisher sharing the service's broker.
    pub fn publisher(&self) -> Publisher {
        self.runtime.app.publisher().clone()
    }

    /// Stops gracefully: takes no more deliveries, lets in-flight handlers finish
    /// within the grace period and settles them, publishes waiting retry copies, closes
    /// the broker. What did not finish in time stays unsettled.
    ///
    /// A subscription that drains (its adapter accepted the [`Drain`] of its spec) stops
    /// taking messages from the broker, and the deliveries the broker had already
    /// handed over (prefetched) are handled and settled within the grace period instead
    /// of being given back, so a clean stop spends no attempt of a broker that counts
    /// deliveries. After a `fail_fast` nothing drains.
    ///
    /// [`Drain`]: ruststream_core::Drain
    pub async fn stop(mut self) -> Result<(), RunError> {
        let graceful = self.runtime.shutdown.failure().is_none();
        if graceful {
            for drain in &self.drains {
                drain.request();
            }
        }
        self.runtime.shutdown.stop_gracefully();
        tracing::info!(
            in_flight = self.in_flight(),
            grace = ?self.grace,
            draining = if graceful { self.drains.len() } else { 0 },
            "stopping: taking no more deliveries, letting in-flight handlers finish"
        );
        let drained = tokio::time::timeout(self.grace, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                in_flight = self.in_flight(),
                "grace period over: unfinished deliveries stay unsettled"
            );
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
        }
        let deferred = self.runtime.deferred.pending();
        if deferred > 0 {
            tracing::info!(
                deferred,
                "stopping: publishing waiting retry copies early, settling held deliveries"
            );
        }
        self.runtime.deferred.flush(self.grace).await;
        for hook in self.on_stop {
            hook();
        }
        tracing::info!(broker = self.broker.name(), "stopping: closing the broker");
        self.broker.close().await;
        if let Some(server) = self.server.take() {
            server.task.abort();
        }
        tracing::info!("stopped");
        match self.runtime.shutdown.failure() {
            Some(reason) => Err(RunError::FailFast(reason)),
            None => Ok(()),
        }
    }
}

/// Whether a form's `retry_after` copies wait in the process: it has no delayed
/// redelivery of its own, and does not dead-letter itself (such a form holds the
/// delivery unsettled at the broker instead, see `Original::Hold`).
fn keeps_delays_in_process(caps: &ruststream_core::Capabilities) -> bool {
    !(caps.delays.is_some() || (caps.dead_letters && caps.requeues))
}

/// The executable's file name, or `ruststream` where it cannot be told.
fn default_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|path| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "ruststream".to_owned())
}
