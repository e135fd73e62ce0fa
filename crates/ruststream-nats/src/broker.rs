//! The broker: one NATS connection shared by every subscription and the publisher.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use ruststream_core::{
    Address, BoxFuture, Broker, Capabilities, Inspect, Publish, Replies, SubscribeError,
    SubscribeSpec, Subscription, split_query,
};

use crate::connection::Connection;
use crate::link::{self, Link};
use crate::publisher::NatsPublisher;
use crate::{ConnectError, Core, JetStream, url};

/// The URL tests and examples connect to: `RUSTSTREAM_NATS_URL`, default
/// `nats://127.0.0.1:4222`.
pub fn default_url() -> String {
    std::env::var("RUSTSTREAM_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned())
}

/// How long `close` waits for what it still owes the server.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A NATS connection, with JetStream: durable pull consumers ([`JetStream`], the
/// default form) and core subjects ([`Core`]).
///
/// Cloning shares the connection.
#[derive(Clone)]
pub struct NatsBroker {
    pub(crate) inner: Arc<Connection>,
}

impl NatsBroker {
    /// Connects to `url` (`nats://host:port`, `tls://…`, several separated by commas;
    /// a query holds settings, `?confirm_acks=true`).
    ///
    /// The client reconnects by itself, without end, once connected; the first
    /// connection is tried once (an unreachable server is an error).
    pub async fn connect(url: &str) -> Result<Self, ConnectError> {
        let (url, url_settings) = split_query(url, |_| false);
        let url = url.as_str();
        crate::settings::read(&url_settings, &ruststream_core::Options::default()).map_err(
            |error| ConnectError::BadUrl {
                url: url::redact(url),
                reason: error.to_string(),
            },
        )?;
        let servers = url::servers(url)?;
        let link = link::new();
        let events = link.clone();
        let client = async_nats::ConnectOptions::new()
            .event_callback(move |event| {
                let events = events.clone();
                async move { link::event(&events, &event) }
            })
            .connection_timeout(Duration::from_secs(5))
            .connect(servers)
            .await
            .map_err(|error| ConnectError::Unreachable {
                url: url::redact(url),
                reason: error.to_string(),
            })?;
        let js = jetstream::new(client.clone());
        Ok(Self {
            inner: Arc::new(Connection::new(client, js, link, url_settings)),
        })
    }

    /// Publishes to `subject` with core NATS rather than JetStream, from now on: for a
    /// subject no stream holds, consumed with [`Core`] by another service. Subscribing
    /// with [`Core`] does it for the subject; `_INBOX.` subjects always are.
    pub fn core(&self, subject: impl Into<Address>) {
        self.inner.route_core(subject.into());
    }

    /// The underlying client (for what the adapter does not do).
    pub fn client(&self) -> &async_nats::Client {
        &self.inner.client
    }
}

impl Broker for NatsBroker {
    fn name(&self) -> &'static str {
        "nats"
    }

    fn subscribe(
        &self,
        spec: SubscribeSpec,
    ) -> BoxFuture<'_, Result<Subscription, SubscribeError>> {
        Box::pin(async move {
            if self.inner.is_closed() {
                return Err(SubscribeError::Closed);
            }
            spec.options.check(self.name())?;
            let configured = crate::settings::read(self.inner.url_settings(), &spec.options)?;
            match (spec.options.get::<Core>(), spec.options.get::<JetStream>()) {
                (Some(_), Some(_)) => Err(SubscribeError::BadOption(
                    "a mount takes either Core or JetStream, not both".into(),
                )),
                (Some(core), None) => {
                    let core = core.clone();
                    crate::core::subscribe(&self.inner, spec, core).await
                }
                (None, js) => {
                    let js = js.cloned().unwrap_or_default();
                    let confirm = crate::settings::confirm_acks(&js, configured);
                    crate::jetstream::subscribe(&self.inner, spec, js, confirm).await
                }
            }
        })
    }

    fn publisher(&self) -> Arc<dyn Publish> {
        Arc::new(NatsPublisher::new(self.inner.clone()))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.inner.close() {
                return;
            }
            self.inner.link.send_replace(Link::Closed);
            let drains = self.inner.owed();
            let owed = async {
                for task in drains {
                    let _ = task.await;
                }
                let _ = self.inner.client.flush().await;
            };
            if tokio::time::timeout(CLOSE_WAIT, owed).await.is_err() {
                tracing::warn!("nats: close went on without what it still owed the server");
            }
            let _ = tokio::time::timeout(CLOSE_WAIT, self.inner.client.drain()).await;
        })
    }

    /// Subjects a JetStream stream holds, read by stream sequence (see the crate docs).
    fn inspect(&self) -> Option<&dyn Inspect> {
        Some(self)
    }

    fn facts(&self, spec: &SubscribeSpec) -> Option<Capabilities> {
        Some(if spec.options.get::<Core>().is_some() {
            Capabilities::NONE
        } else {
            crate::jetstream::CAPABILITIES
        })
    }

    /// Replies come on a core inbox subject of this connection (`_INBOX.…`), which every
    /// publisher sends with core NATS.
    fn replies(&self, address: Address) -> BoxFuture<'_, Result<Replies, SubscribeError>> {
        Box::pin(async move {
            let n = self.inner.next_reply();
            let inbox = Address::new(format!(
                "{}.{}.{n}",
                self.inner.client.new_inbox(),
                crate::names::from_subject(address.as_str())
            ));
            let mut spec = SubscribeSpec::new(inbox.clone());
            spec.in_flight = 256;
            let subscription = crate::core::subscribe(&self.inner, spec, Core::new()).await?;
            Ok(Replies {
                address: inbox,
                subscription,
            })
        })
    }
}

impl std::fmt::Debug for NatsBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBroker")
            .field("link", &*self.inner.link.borrow())
            .finish_non_exhaustive()
    }
}
