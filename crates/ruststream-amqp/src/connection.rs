//! The shared connection, and reconnection with back-off.
//!
//! Every subscription and the publisher begin their sessions here. When a session
//! cannot begin on the current connection (the broker restarted, the socket dropped, the
//! peer went silent past the idle timeout), the connection is opened again, retrying
//! with a back-off that doubles from `backoff_min` to `backoff_max` (with jitter), until
//! it succeeds or the broker is closed. Concurrent callers wait for the same
//! reconnection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::{Connection, Session};
use ruststream_adapter::Backoff;
use tokio::sync::{Mutex, watch};

use crate::error::ConnectError;
use crate::options::ConnectOptions;
use crate::transport::Pair;
use crate::transport::{Patched, connect_tcp};
use crate::url::BrokerUrl;

const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
const BEGIN_TIMEOUT: Duration = Duration::from_secs(10);

static CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// A container id unique to this process and connector.
fn container_id() -> String {
    let n = CONNECTIONS.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000)
        .unwrap_or(0);
    format!("ruststream-{}-{t:09}-{n}", std::process::id())
}

/// Opens connections and sessions; reconnects when asked to.
#[derive(Debug)]
pub(crate) struct Connector {
    url: BrokerUrl,
    pub(crate) options: ConnectOptions,
    /// The handshake of `amqps://` connections.
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::Tls>,
    container_id: String,
    state: Mutex<State>,
    closed: watch::Sender<bool>,
    links: AtomicU64,
    /// The largest message the broker's links announced last (`max-message-size` of an
    /// attach; RabbitMQ's `max_message_size`, one for the node), or 0 while none has.
    max_message: AtomicU64,
    /// The version the broker announced (`open` frame's properties).
    announced: crate::transport::Announced,
}

#[derive(Debug)]
struct State {
    connection: Option<ConnectionHandle<()>>,
}

impl Connector {
    /// Opens the first connection; fails at once if the broker cannot be reached.
    pub(crate) async fn connect(
        url: BrokerUrl,
        options: ConnectOptions,
    ) -> Result<Self, ConnectError> {
        let container_id = options.container_id.clone().unwrap_or_else(container_id);
        #[cfg(feature = "tls")]
        let tls = match url.scheme {
            "amqps" => Some(crate::tls::Tls::new(&options.tls, &url.host)?),
            _ => None,
        };
        let connector = Self {
            url,
            options,
            #[cfg(feature = "tls")]
            tls,
            container_id,
            state: Mutex::new(State { connection: None }),
            closed: watch::Sender::new(false),
            links: AtomicU64::new(0),
            max_message: AtomicU64::new(0),
            announced: crate::transport::Announced::default(),
        };
        let connection = connector.open().await?;
        connector.state.lock().await.connection = Some(connection);
        Ok(connector)
    }

    /// The broker's major version from its `open` frame, if it said one.
    pub(crate) fn broker_major(&self) -> Option<u32> {
        self.announced
            .get()
            .and_then(|v| crate::transport::major(v))
    }

    /// The container id announced in the open frame.
    pub(crate) fn container_id(&self) -> &str {
        &self.container_id
    }

    /// Notes the largest message a link's attach announced (`None`: no limit said).
    pub(crate) fn announced_max_message(&self, size: Option<u64>) {
        if let Some(size) = size {
            self.max_message.store(size, Ordering::Relaxed);
        }
    }

    /// The largest message the broker announced, or 0 while it has not.
    pub(crate) fn max_message(&self) -> u64 {
        self.max_message.load(Ordering::Relaxed)
    }

    /// A link name unique on this connector: `<container>-<kind>-<n>`.
    pub(crate) fn link_name(&self, kind: &str) -> String {
        let n = self.links.fetch_add(1, Ordering::Relaxed);
        format!("{}-{kind}-{n}", self.container_id)
    }

    /// Watches for [`close`](Self::close).
    pub(crate) fn closed(&self) -> watch::Receiver<bool> {
        self.closed.subscribe()
    }

    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// A new session. With `retry`, reconnects with back-off until it has one or the
    /// broker is closed; without, one reconnection attempt.
    pub(crate) async fn session(&self, retry: bool) -> Result<SessionHandle<()>, ConnectError> {
        let mut state = self.state.lock().await;
        let mut backoff = self.backoff();
        let mut closed = self.closed();
        loop {
            if self.is_closed() {
                return Err(ConnectError::Closed);
            }
            if let Some(connection) = state.connection.as_mut() {
                match tokio::time::timeout(BEGIN_TIMEOUT, Session::begin(connection)).await {
                    Ok(Ok(session)) => return Ok(session),
                    Ok(Err(e)) => tracing::info!(error = %e, "amqp: session refused; reconnecting"),
                    Err(_) => tracing::info!("amqp: session begin timed out; reconnecting"),
                }
                if let Some(mut old) = state.connection.take() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), old.close()).await;
                }
            }
            match self.open().await {
                Ok(connection) => {
                    tracing::info!(host = %self.url.host, port = self.url.port, container = %self.container_id, "amqp: connected");
                    state.connection = Some(connection);
                    backoff.reset();
                    continue;
                }
                Err(e) if !retry => return Err(e),
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(host = %self.url.host, port = self.url.port, error = %e, retry_in = ?delay, "amqp: reconnect failed");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = closed.wait_for(|c| *c) => return Err(ConnectError::Closed),
                    }
                }
            }
        }
    }

    /// A back-off for reconnecting, re-attaching or publishing again, as the options say.
    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(self.options.backoff_min, self.options.backoff_max)
    }

    async fn open(&self) -> Result<ConnectionHandle<()>, ConnectError> {
        self.open_with(None).await
    }

    /// A connection of its own for a management link pair (see [`crate::management`]).
    pub(crate) async fn open_management(
        &self,
        pair: Pair,
    ) -> Result<ConnectionHandle<()>, ConnectError> {
        if self.is_closed() {
            return Err(ConnectError::Closed);
        }
        self.open_with(Some(pair)).await
    }

    async fn open_with(&self, pair: Option<Pair>) -> Result<ConnectionHandle<()>, ConnectError> {
        let open = async {
            let tcp = connect_tcp(&self.url.host, self.url.port).await?;
            let hostname = self.url.vhost.as_ref().map(|v| format!("vhost:{v}"));
            let sasl = match &self.url.credentials {
                Some((user, pass)) => SaslProfile::Plain {
                    username: user.clone(),
                    password: pass.clone(),
                },
                None => SaslProfile::Anonymous,
            };
            let idle = u32::try_from(self.options.idle_timeout.as_millis()).unwrap_or(u32::MAX);
            // "amqp" for fe2o3 in any case: under `amqps://` the crate has done the TLS
            // handshake itself (see `crate::tls`).
            let builder = Connection::builder()
                .container_id(self.container_id.clone())
                .scheme("amqp")
                .hostname(hostname.as_deref())
                .idle_time_out(idle)
                .sasl_profile(sasl);
            #[cfg(feature = "tls")]
            if let Some(tls) = &self.tls {
                let addr = format!("{}:{}", self.url.host, self.url.port);
                let stream = tls.handshake(tcp, &addr).await?;
                return builder
                    .open_with_stream(wrap(stream, pair).announced(self.announced.clone()))
                    .await
                    .map_err(|e| ConnectError::Open(e.to_string()));
            }
            builder
                .open_with_stream(wrap(tcp, pair).announced(self.announced.clone()))
                .await
                .map_err(|e| ConnectError::Open(e.to_string()))
        };
        tokio::time::timeout(OPEN_TIMEOUT, open)
            .await
            .map_err(|_| ConnectError::Open("timed out".into()))?
    }

    /// Marks the broker closed (sessions are refused from now on) and closes the
    /// connection. Links should be closed first.
    pub(crate) async fn close(&self) {
        self.closed.send_replace(true);
        let mut state = self.state.lock().await;
        if let Some(mut connection) = state.connection.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), connection.close()).await;
        }
    }

    /// Signals closing without waiting for the connection.
    pub(crate) fn begin_close(&self) {
        self.closed.send_replace(true);
    }
}

/// The stream a connection speaks over: `pair` renamed on the wire when given.
fn wrap<S>(stream: S, pair: Option<Pair>) -> Patched<S> {
    match pair {
        Some(pair) => Patched::paired(stream, pair),
        None => Patched::new(stream),
    }
}
