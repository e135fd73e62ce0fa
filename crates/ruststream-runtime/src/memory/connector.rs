//! `memory://`: the in-memory broker by URL.

use std::sync::Arc;

use ruststream_core::{BoxFuture, Broker, ConnectFailure, Connector, Scheme, Server};

use super::MemoryBroker;

/// Opens `memory://` as a new [`MemoryBroker`] (it reads no settings: a query key is an
/// error, being meant for another broker).
///
/// ```
/// use ruststream::core::Connector;
/// use ruststream::memory::MemoryConnector;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let broker = MemoryConnector.connect("memory://").await.unwrap();
/// assert_eq!(broker.name(), "memory");
/// assert!(MemoryConnector.connect("memory://?form=list").await.is_err());
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryConnector;

/// The schemes it answers.
const SCHEMES: &[Scheme] = &[Scheme::plain("memory")];

impl Connector for MemoryConnector {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn schemes(&self) -> &'static [Scheme] {
        SCHEMES
    }

    fn tls(&self) -> bool {
        false
    }

    fn connect<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn Broker>, ConnectFailure>> {
        Box::pin(async move {
            let (_, settings) = ruststream_core::split_query(url, |_| false);
            if let Some(setting) = settings.first() {
                return Err(ConnectFailure::of(&setting.unknown("memory", &[])));
            }
            Ok(Arc::new(MemoryBroker::new()) as Arc<dyn Broker>)
        })
    }

    fn server(&self, url: &str) -> Result<Server, String> {
        let _ = url;
        Ok(Server {
            host: "localhost".to_owned(),
            pathname: String::new(),
            protocol: "memory",
            protocol_version: None,
            description: "the in-memory broker (one process)",
            url: "memory://".to_owned(),
            nodes: Vec::new(),
        })
    }
}
