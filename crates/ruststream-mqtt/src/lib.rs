//! MQTT 5 adapter for ruststream (rumqttc; tested on Mosquitto 2): a mount is a QoS 1
//! subscription on a persistent session of its own, shared in a group by default;
//! publishing is QoS 1, done once the broker's PUBACK is read.
//!
//! [`MqttBroker::connect`] opens `mqtt://[user:password@]host[:port][?key=value…]`, and
//! with the `tls` feature `mqtts://` (port 8883; the webpki roots, and the URL's
//! `tls_ca_file`). Each
//! mount's subscription has its own connection and session: a stable client id (the
//! mount's `client_id` setting, else the URL's `client_id` or `ruststream-<host name>`
//! with a hash of the group and filter), clean start off, a session expiry of one hour
//! (`session_expiry`, or [`SessionExpiry`]). It subscribes `$share/<group>/<filter>`
//! (group `ruststream`, or `group`, or [`Group`]; `shared=false` or [`Group::none`]
//! subscribes the filter itself), so services in one group compete for the messages.
//! Addresses are topic filters: `+` and `#` are accepted. The session's receive maximum
//! is the mount's `in_flight`.
//!
//! Acknowledgements are manual. MQTT requires PUBACKs in the order the messages arrived,
//! so a settlement of a later message is held until every earlier one is settled, then
//! all are written in order; a `Settling` resolves once its PUBACK is written. What a
//! stopped or killed service did not acknowledge is sent again when its session comes
//! back (the same client id), or lost when the session expires first.
//!
//! MQTT has neither a negative acknowledgement nor a delivery count, so subscriptions
//! declare [`Capabilities::SETTLES`](ruststream_core::Capabilities::SETTLES): `retry`,
//! `retry_after` and dead letters are copies the runtime publishes (QoS 1, acknowledged)
//! before the original's PUBACK, carrying the attempt in the `x-ruststream-retry-count`
//! user property. Headers are user properties, except `content-type` (the content type),
//! `correlation-id` (the correlation data) and `reply-to` (the response topic). A publish
//! that no subscription matches fails (the broker would drop it) unless the URL says
//! `unrouted=accept`.
//!
//! ```no_run
//! use ruststream::{App, Mount, Outcome, ack};
//! use ruststream_mqtt::{Group, MqttBroker};
//!
//! async fn handle(reading: String) -> Outcome {
//!     println!("{reading}");
//!     ack()
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = MqttBroker::connect("mqtt://127.0.0.1:1883?client_id=meter-1").await?;
//! App::new(broker)
//!     .mount(Mount::new("meters/+/reading").max_attempts(5).dead_letter("meters/dead"), handle)
//!     .mount(Mount::new("audit/#").option(Group::new("auditor")), handle)
//!     .run()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! See `docs/mqtt.md` for what each outcome does and what is not done yet.

mod acker;
mod bindings;
mod broker;
mod connection;
mod connector;
mod dropped;
mod error;
mod headers;
mod keeper;
mod ledger;
mod options;
mod outbox;
mod publisher;
mod reader;
mod sequencer;
mod settings;
#[cfg(feature = "tls")]
mod tls;
mod topic;
mod writer;

pub use broker::{MqttBroker, default_url};
pub use connector::MqttConnector;
pub use error::ConnectError;
pub use options::{Group, SessionExpiry};
pub use publisher::MAX_PAYLOAD;
pub use settings::session_id;
