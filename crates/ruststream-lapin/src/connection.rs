//! The connection a broker's subscriptions and publisher share, opened again when it
//! is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use lapin::tcp::OwnedTLSConfig;
use lapin::{Connection, ConnectionProperties, DefaultConnectionBuilder};
use ruststream_adapter::Backoff;
use tokio::sync::{Mutex, watch};

use crate::error::ConnectError;
use crate::options::ConnectOptions;
use crate::url::BrokerUrl;

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the connection and opens it again, one attempt at a time, when it is gone:
/// to the broker it last reached first, then to each other address in turn.
#[derive(Debug)]
pub(crate) struct Connector {
    /// The URL's broker first, then the failover addresses.
    urls: Vec<BrokerUrl>,
    /// Where the next attempt starts.
    last: AtomicUsize,
    options: ConnectOptions,
    /// What `amqps://` connections trust besides the default roots.
    tls: OwnedTLSConfig,
    current: Mutex<Option<Arc<Connection>>>,
    closed: AtomicBool,
    closing: watch::Sender<bool>,
}

impl Connector {
    /// Connects once; an unreachable broker or refused credentials are an error.
    pub(crate) async fn connect(
        urls: Vec<BrokerUrl>,
        options: ConnectOptions,
    ) -> Result<Self, ConnectError> {
        let connector = Self {
            urls,
            last: AtomicUsize::new(0),
            tls: tls_config(&options)?,
            options,
            current: Mutex::new(None),
            closed: AtomicBool::new(false),
            closing: watch::channel(false).0,
        };
        let first = connector
            .open()
            .await
            .map_err(|reason| ConnectError::Connect {
                addr: connector
                    .urls
                    .iter()
                    .map(BrokerUrl::display)
                    .collect::<Vec<_>>()
                    .join(", "),
                reason,
            })?;
        *connector.current.lock().await = Some(Arc::new(first));
        Ok(connector)
    }

    /// Connects to the first address that answers, starting with the last one reached.
    async fn open(&self) -> Result<Connection, String> {
        let start = self.last.load(Ordering::Relaxed);
        let mut failures = Vec::new();
        for k in 0..self.urls.len() {
            let i = (start + k) % self.urls.len();
            match self.open_one(&self.urls[i]).await {
                Ok(connection) => {
                    self.last.store(i, Ordering::Relaxed);
                    if i != 0 {
                        tracing::info!(broker = %self.urls[i].display(), "lapin: connected to a failover address");
                    }
                    return Ok(connection);
                }
                Err(e) if self.urls.len() == 1 => return Err(e),
                Err(e) => failures.push(format!("{}: {e}", self.urls[i].display())),
            }
        }
        Err(failures.join("; "))
    }

    async fn open_one(&self, url: &BrokerUrl) -> Result<Connection, String> {
        let mut properties = ConnectionProperties::default();
        if let Some(name) = &self.options.name {
            properties = properties.with_connection_name(name.clone().into());
        }
        let builder = DefaultConnectionBuilder::new()
            .map_err(|e| e.to_string())?
            .with_uri(url.uri.clone())
            .with_properties(properties)
            .with_tls_config(self.tls.clone());
        match tokio::time::timeout(CONNECT_TIMEOUT, builder.connect()).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {CONNECT_TIMEOUT:?}")),
        }
    }

    /// The connection, opened again (one attempt) if the last one is gone.
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>, String> {
        if self.is_closed() {
            return Err("broker closed".into());
        }
        let mut current = self.current.lock().await;
        if let Some(connection) = current.as_ref()
            && connection.status().connected()
        {
            return Ok(connection.clone());
        }
        let connection = Arc::new(self.open().await?);
        let at = &self.urls[self.last.load(Ordering::Relaxed)];
        tracing::info!(broker = %at.display(), "lapin: connected");
        *current = Some(connection.clone());
        Ok(connection)
    }

    /// A back-off for reconnection attempts, as the options say.
    pub(crate) fn backoff(&self) -> Backoff {
        Backoff::new(self.options.backoff_min, self.options.backoff_max)
    }

    pub(crate) fn options(&self) -> &ConnectOptions {
        &self.options
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Waits until [`Connector::begin_close`] is called.
    pub(crate) async fn closing(&self) {
        let mut rx = self.closing.subscribe();
        let _ = rx.wait_for(|closed| *closed).await;
    }

    /// Stops new work: subscriptions end, publishes fail with `Closed`.
    pub(crate) fn begin_close(&self) {
        self.closed.store(true, Ordering::Release);
        self.closing.send_replace(true);
    }

    /// Closes the connection.
    pub(crate) async fn close(&self) {
        self.begin_close();
        if let Some(connection) = self.current.lock().await.take()
            && connection.status().connected()
        {
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                connection.close(200, "closing".into()),
            )
            .await;
        }
    }
}

/// The CA certificates of the options' `tls_ca_file`s, as one PEM chain.
#[cfg(feature = "tls")]
fn tls_config(options: &ConnectOptions) -> Result<OwnedTLSConfig, ConnectError> {
    let mut chain = String::new();
    for path in &options.tls_ca_files {
        let ca = ruststream_adapter::tls::CaFile::read(path)
            .map_err(|e| ConnectError::Tls(e.to_string()))?;
        // lapin takes the chain as PEM text: the file as it is (PEM is ASCII).
        chain.push_str(&String::from_utf8_lossy(ca.pem()));
        chain.push('\n');
    }
    Ok(OwnedTLSConfig {
        identity: None,
        cert_chain: (!chain.is_empty()).then_some(chain),
    })
}

#[cfg(not(feature = "tls"))]
#[allow(clippy::unnecessary_wraps)]
fn tls_config(_: &ConnectOptions) -> Result<OwnedTLSConfig, ConnectError> {
    Ok(OwnedTLSConfig::default())
}
