//! AsyncAPI 3.0: the service's channels and operations, generated from what is mounted
//! and declared (feature `asyncapi`).
//!
//! [`App::asyncapi`] describes one channel per subscription address, retry address,
//! dead letter, reply address and declared publish target ([`App::publishes`]); a
//! `receive` operation per mount and a `send` operation for each address the service
//! publishes to; each message's payload schema (from [`Mount::payload`] and
//! [`PublishTarget::payload`], by schemars), content type, the headers the framework
//! uses and its correlation id; the broker as a server (from its URL, the password left
//! out); and, as `x-ruststream-*` extensions, each mount's declaration, settings and
//! form. The same service always gives the same document. The extensions are listed in
//! `docs/operating.md`.
//!
//! ```
//! use ruststream::asyncapi::{AsyncApiInfo, Format};
//! use ruststream::{App, Mount, memory::MemoryBroker};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Order { id: u64 }
//!
//! async fn place(order: Order) {
//!     let _ = order.id;
//! }
//!
//! let app = App::new(MemoryBroker::new())
//!     .name("orders")
//!     .mount(Mount::new("orders").payload::<Order>().max_attempts(3).dead_letter("orders.dead"), place);
//! let info = AsyncApiInfo { version: "1.2.0".into(), ..AsyncApiInfo::default() };
//! let document = app.asyncapi(&info).unwrap();
//! assert_eq!(document["asyncapi"], "3.0.0");
//! assert_eq!(document["info"]["title"], "orders");
//! assert_eq!(document["channels"]["orders.dead"]["address"], "orders.dead");
//! let yaml = app.asyncapi_string(&info, Format::Yaml).unwrap();
//! assert!(yaml.starts_with("\"asyncapi\": \"3.0.0\"\n"));
//! ```
//!
//! [`Mount::payload`]: crate::Mount::payload
//! [`PublishTarget::payload`]: crate::publisher::PublishTarget::payload
//! [`App::publishes`]: crate::App::publishes

mod bindings;
mod build;
mod headers;
mod server;
mod yaml;

use std::str::FromStr;

use serde_json::Value;

use crate::App;

pub use yaml::to_yaml;

/// What the document says about the service beyond its mounts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AsyncApiInfo {
    /// The title (default: the service's name, [`App::name`]).
    pub title: Option<String>,
    /// The service's version (default `0.0.0`): a service passes its own,
    /// `env!("CARGO_PKG_VERSION")`.
    pub version: String,
    /// A description of the service (CommonMark).
    pub description: Option<String>,
    /// The broker's server, as its adapter describes it from a URL
    /// (`ruststream::broker::server(url)`, or [`Connector::server`](ruststream_core::Connector::server));
    /// the password is left out.
    pub server: Option<ruststream_core::Server>,
}

/// The document's format, as text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// JSON, indented.
    #[default]
    Json,
    /// YAML.
    Yaml,
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "json" => Ok(Self::Json),
            "yaml" | "yml" => Ok(Self::Yaml),
            _ => Err(format!("unknown format {s:?}: use json or yaml")),
        }
    }
}

/// Why a document was not made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AsyncApiError {
    /// A mount documents another payload type than its handler takes.
    #[error("mount {address}: payload documented as {documented}, the handler takes {handled}")]
    Payload {
        /// The mount's address.
        address: String,
        /// The type given to `Mount::payload`.
        documented: &'static str,
        /// The handler's payload type (`no payload` for a handler without one).
        handled: &'static str,
    },
    /// A mount documents another reply type than its handler replies with.
    #[error(
        "mount {address}: reply documented as {documented}, the handler replies with {handled}"
    )]
    Reply {
        /// The mount's address.
        address: String,
        /// The type given to `Mount::reply`.
        documented: &'static str,
        /// The handler's reply type (`no reply` for a handler that returns no `Reply<T>`).
        handled: &'static str,
    },
}

impl App {
    /// The service's AsyncAPI 3.0 document (see [`asyncapi`](crate::asyncapi)).
    pub fn asyncapi(&self, info: &AsyncApiInfo) -> Result<Value, AsyncApiError> {
        build::document(self, info)
    }

    /// The service's AsyncAPI 3.0 document as text in `format`, ending with a newline;
    /// its top-level keys in the specification's order (`asyncapi`, `info`, `servers`,
    /// …), those below sorted.
    pub fn asyncapi_string(
        &self,
        info: &AsyncApiInfo,
        format: Format,
    ) -> Result<String, AsyncApiError> {
        let document = self.asyncapi(info)?;
        let Value::Object(mut top) = document else {
            return Ok(to_yaml(&document));
        };
        let mut keys: Vec<String> = ORDER.iter().map(|k| (*k).to_owned()).collect();
        keys.extend(top.keys().filter(|k| !ORDER.contains(&k.as_str())).cloned());
        let entries: Vec<(String, Value)> = keys
            .into_iter()
            .filter_map(|k| top.remove(&k).map(|v| (k, v)))
            .collect();
        let mut text = String::new();
        match format {
            Format::Json => {
                text.push_str("{\n");
                for (i, (key, value)) in entries.iter().enumerate() {
                    let value = format!("{value:#}").replace('\n', "\n  ");
                    let comma = if i + 1 < entries.len() { "," } else { "" };
                    text.push_str(&format!(
                        "  {}: {value}{comma}\n",
                        Value::from(key.as_str())
                    ));
                }
                text.push_str("}\n");
            }
            Format::Yaml => {
                for (key, value) in entries {
                    let mut one = serde_json::Map::new();
                    one.insert(key, value);
                    text.push_str(&to_yaml(&Value::Object(one)));
                }
            }
        }
        Ok(text)
    }
}

/// The top-level keys of a document in the order the specification lists them.
const ORDER: [&str; 7] = [
    "asyncapi",
    "id",
    "info",
    "servers",
    "defaultContentType",
    "channels",
    "operations",
];
