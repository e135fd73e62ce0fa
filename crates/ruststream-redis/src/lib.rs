//! Redis adapter for ruststream: streams, claiming, reliable lists, plain lists and
//! Pub/Sub (channel and pattern) behind [`ruststream_core::Broker`].
//!
//! [`RedisBroker::connect`] takes `redis://[user:password@]host[:port][/db]` (`rediss://`
//! with the `tls` feature, see [TLS](#tls); `redis-cluster://host:port?node=host:port`
//! for a cluster; `redis-sentinel://host:port,host:port/master[/db]` for the master that
//! Redis Sentinel names, found again through the sentinels after a failover). A
//! subscription's form comes from its options ([`Form`] or one of [`Stream`],
//! [`Claiming`], [`ReliableList`], [`List`], [`PubSub`], [`Pattern`]); without one it is a
//! [`Stream`] read with the consumer group `ruststream`.
//!
//! # Forms and settlement
//!
//! | form | capabilities | ack, drop, remove | requeue | requeue after `d` | attempts counted by |
//! |---|---|---|---|---|---|
//! | [`Stream`] | settles | `XACK` | — | — | `x-ruststream-retry-count` |
//! | [`Stream`] + [`DelayedRetry::DurableZset`] | settles, delays | `XACK` | — | `ZADD` copy (count + 1), then `XACK` | `x-ruststream-retry-count` |
//! | [`Claiming`] | settles, requeues, counts, delays (up to `min_idle`) | `XACK` | stays in the PEL | stays in the PEL (`min_idle`); longer: `XACK`, the runtime's copy | the PEL delivery counter + a copy's `x-ruststream-retry-count` |
//! | [`ReliableList`] | settles | `LREM` of its own element from the processing list | — | — | `x-ruststream-retry-count` |
//! | [`List`], [`PubSub`], [`Pattern`] | none | `AckError::Unsupported` | — | — | `x-ruststream-retry-count` |
//!
//! "—" is `AckError::Unsupported`; the runtime never asks for it, since it decides from the
//! capabilities. Retries on the other forms are copies the runtime publishes through
//! [`RedisBroker::publisher`](ruststream_core::Broker::publisher) before it removes the
//! original: a stream copy is an `XADD` then `XACK`, a reliable list copy an `LPUSH` then
//! `LREM` — a crash in between leaves a duplicate, never a loss. Settlement goes through
//! a connection pool, never through a subscription's reading connection.
//!
//! Each read of a `DurableZset` stream first moves at most 128 due copies back into the
//! stream with one Lua script, so two consumers never move a copy twice and a crash never
//! loses one. A [`ReliableList`] consumer keeps a heartbeat key; a live consumer hands the
//! processing list of one whose heartbeat expired back to the list, atomically in Lua.
//!
//! # Nothing stranded in a consumer group
//!
//! A [`Stream`] or [`Claiming`] subscription hands back what it cannot settle, with the
//! default options:
//!
//! * **A consumer that stops or dies.** Each consumer holds an alive key
//!   (`{stream}:group:<group>:alive:<consumer>`, expiring after the `heartbeat`, 10 s by
//!   default, refreshed every third of it), deleted when its subscription is dropped or the
//!   broker closes. Every `heartbeat / 2`, and when it starts, a subscription takes over the
//!   pending entries of the group's consumers without one (`XCLAIM`, atomically in Lua) and
//!   removes those with nothing pending (`XGROUP DELCONSUMER`). The default consumer name
//!   is unique per subscription, process and host (`host-pid-n`); a restarted process is a
//!   new consumer and takes over what the killed one held within about 15 s (what a
//!   stopped one left at once when it starts). A stable name (`consumer`) is re-read at
//!   once by the restarted process (`XREADGROUP … 0`).
//! * **A lost answer, a failed settlement, an abandoned delivery.** A subscription knows
//!   the entries it has in hand; after its reading connection reconnects, a read fails, a
//!   settlement fails or a delivery is dropped unsettled, its next read takes back the
//!   entries of its own pending list that are not in hand (`XPENDING`, `XCLAIM`). That
//!   covers an `XREADGROUP … >` whose answer was lost with the connection and that the
//!   client replayed.
//! * **A long handler on [`Claiming`].** The entries in hand are claimed again by their
//!   own consumer every `min_idle / 3` (`XCLAIM … JUSTID`: the idle time restarts, the
//!   delivery counter does not move), so no one claims an entry still being handled.
//!
//! Every consumer of a group must be a ruststream consumer of this version or later: one
//! without an alive key counts as dead.
//!
//! # Lists: nothing stranded
//!
//! A [`ReliableList`] take is one Lua script that moves up to the batch size into the
//! consumer's processing list, each element wrapped with an id of its own (a marker,
//! the take id and index, a NUL, the element as it was). Two byte-identical messages in
//! flight are two different elements: settling one (`LREM` of its wrapped element), or
//! the client replaying that `LREM` after a reconnect, never removes the other. A take
//! is recorded with its id: the client replaying it after a lost answer, or the reader
//! sending it again after a read error, gets the elements the first one moved and moves
//! nothing more, so nothing sits in the processing list unseen while the consumer runs.
//! An empty list is waited on with `BLMOVE list list RIGHT RIGHT`, which moves nothing.
//! A delivery dropped unsettled (`Acker::abandon`: `fail_fast`, a handler cut off at
//! shutdown, a copy that could not be published) goes back to the right end of the list,
//! where it is read next, and leaves the processing list in the same script, at once.
//! Elements handed back are unwrapped; the list itself only ever holds frames. An
//! element left unwrapped in a processing list by an older version is handed back as it
//! is; the other way round, an older version recovering this version's processing list
//! would hand back wrapped elements (delivered as defects): upgrade every consumer of a
//! list before any of them goes back.
//!
//! When a list subscription is dropped (a graceful stop), what it read but did not hand
//! out goes back to the right end of the list, oldest rightmost: the rest of the last
//! batch, and what a take or pop still in flight returns. For a [`List`] that is entries
//! popped and not handled (up to the prefetch) that would otherwise be lost.
//! [`Broker::close`](ruststream_core::Broker::close) waits (up to 10 s) for these
//! hand-backs before it closes the connections. [`PubSub`] and [`Pattern`] are at most
//! once by nature: messages received and not handled when the subscription is dropped
//! are lost, whether the reader had taken them from the client's queue or not.
//!
//! # Publishing
//!
//! What an address is gets resolved once per address and cached: a declared kind (an
//! explicit [`RedisBroker::route`], which wins, or the form of a subscription opened on
//! it on this broker), checked once against the key's real type; else the key's real
//! type (`TYPE`: a stream or a list); else the kind marker `{key}:kind` (`list` or
//! `channel`) that every list and Pub/Sub subscription leaves when it starts (best
//! effort: one whose user may not write it goes on, and its producers then need a
//! route), so a producer-only service reaches a list or channel whose consumers run
//! elsewhere, even while the list is empty; else — a key that does not exist and nobody declared — a
//! stream, looked up again on the next publish. A declared kind the key contradicts, a
//! key of another type (a string, a hash), and a `WRONGTYPE` answer (the key changed
//! kind; the cached kind is forgotten) are `PublishErrorKind::BadAddress` naming the key
//! and both kinds. [`RedisPublisher::publish_as`] picks the target for one message. A
//! pattern cannot be published to: its mount must declare a retry address (`retry_to`,
//! else subscribing fails with `SubscribeError::BadOption`), which is published to as a
//! channel. Any failure to publish (a reply included) is returned as a `PublishError`,
//! never swallowed.
//!
//! # Settings from configuration
//!
//! A subscription's form and its options can also come from configuration, as text:
//! the broker URL's query (`redis://host:6379/0?form=list&block=2s`: every
//! subscription of the broker) and the mount's settings (the runtime's per-mount table,
//! `RUSTSTREAM_MOUNT__<ADDRESS>__<KEY>`), read in that order (a later key wins). A
//! typed form on the mount wins over all of them. The keys:
//!
//! | key | values | forms |
//! |---|---|---|
//! | `form` | `stream`, `claiming`, `reliable_list`, `list`, `pubsub`, `pattern` | — |
//! | `group` | a group name | stream, claiming |
//! | `consumer` | a consumer name | stream, claiming, reliable list |
//! | `start` | `beginning`, `end`, an entry id | stream, claiming |
//! | `block` | a duration (`500ms`, `1s`) | stream, claiming, reliable list, list |
//! | `count` | a whole number | stream, claiming |
//! | `heartbeat` | a duration | stream, claiming, reliable list |
//! | `min_idle` | a duration above zero | claiming |
//! | `delayed_retry` | `in_process`, `durable_zset` | stream |
//!
//! Values are read in lower case with `-` as `_`. A key not in the table, a value that
//! does not read, or a key the chosen form has no use for is an error naming the
//! setting and where it came from: at [`RedisBroker::connect`] for the URL
//! ([`ConnectError::BadUrl`]), at subscribe for a mount's (`SubscribeError::BadOption`).
//! The cluster's `node` keys stay the client's.
//!
//! # Requests
//!
//! A request client's replies ([`Broker::replies`](ruststream_core::Broker::replies))
//! come on a [`List`] of its own: replies wait in it before the client reads, and its
//! kind marker tells servers in other processes to push to a list. The list's kind
//! marker stays after the client is gone (a few bytes per client).
//!
//! # Browsing (the dead-letter tools)
//!
//! [`RedisBroker`] offers [`ruststream_core::Inspect`] through `Broker::inspect`: a
//! stream is browsed with `XRANGE` (ids are entry ids; removing is `XDEL`), a list with a
//! Lua script reading its oldest elements (ids are 16 hex digits of each element's
//! SHA-1; removing is a Lua script that `LREM`s exactly one element per id). A key of
//! another type, a channel or a pattern cannot be browsed.
//!
//! # Wire format (compatible with ruststream 0.7)
//!
//! * **Stream entry**: the body in field `_payload`, each header in a field `h:<name>`;
//!   other fields are ignored.
//! * **List element, Pub/Sub message**: a frame — a big-endian `u32` header count, then
//!   per header a big-endian `u32` name length, the name, a big-endian `u32` value length,
//!   the value; then the payload to the end. Producers `LPUSH`, consumers take from the
//!   right (FIFO).
//!
//! An entry without `_payload`, a truncated frame or a header name that is not UTF-8 is
//! delivered with [`Delivery::defect`](ruststream_core::Delivery::defect) set, and the
//! runtime's decode-failure policy applies.
//!
//! # Keys
//!
//! Every key is the address after [`Settings::key_prefix`]. Keys derived from it share its
//! hash slot (`{key}:delayed`, `{key}:processing:<consumer>`, `{key}:alive:<consumer>`,
//! `{key}:take:<consumer>`, `{key}:consumers`, `{key}:kind`,
//! `{key}:group:<group>:alive:<consumer>`), so one subscription's keys live on one
//! cluster node.
//!
//! # A master lost (Redis Cluster with replicas)
//!
//! When the master serving a subscription's slot dies, its replica takes over once the
//! cluster marks it failed (`cluster-node-timeout`, then an election); until then the
//! subscription's reads wait and are retried, publishes to that slot wait up to the
//! command timeout (10 s) and then fail with the message handed back, and the reader
//! takes back its own pending entries once it reads again. The test
//! `tests/cluster_failover.rs` kills such a master mid-run (SIGKILL) with producers and
//! consumers on default options: nothing lost, deliveries resumed with the new master
//! (figures in RELIABILITY.md).
//!
//! **Redis Sentinel** (`redis-sentinel://host:26379,host:26380/master[/db]`; over TLS
//! `rediss-sentinel://`, with the `tls` feature): the client asks the sentinels which
//! node is the master named in the path, connects to it, and asks again after it loses
//! the connection, so every form works unchanged through a failover. The sentinels'
//! own credentials, if they have any, go in the query (`?sentinel_username=…&
//! sentinel_password=…`); the URL's user and password are the Redis nodes'. The test
//! `tests/sentinel_failover.rs` kills the master mid-run (SIGKILL) under producers and
//! consumers on default options: nothing lost, deliveries back within about 3.5 s of
//! the kill with `down-after-milliseconds 2000` (figures in RELIABILITY.md). The TLS
//! form is not tested here (no TLS sentinel deployment on the test machine).
//!
//! Redis replicates asynchronously: a master answers `XADD` (and `XACK`) before its
//! replica has it. A write acknowledged in the moment before a master fails can be
//! missing from the replica that replaces it: lost by the server, not by the adapter (an
//! `XACK` lost that way is a duplicate). A killed process on a working machine rarely
//! shows it (what the master had written to its replica's socket is still delivered); a
//! machine or network failure can. [`Settings::wait_for_replicas`] narrows that window:
//! a publish to a stream or a list (the runtime's retry copies and dead letters too) is
//! done only once that many replicas have it (`WAIT`, one round trip more per publish),
//! and fewer within the timeout is a publish error with the message handed back.
//!
//! # Client
//!
//! The client is [fred](https://docs.rs/fred) 10: a connection pool for completion
//! commands (automatic pipelining), reconnection with exponential back-off (100 ms to
//! 2 s, for ever) that replays commands in flight, RESP3 and cluster support, and
//! dedicated clients for blocking reads (`XREADGROUP BLOCK`, `BLMOVE`, `BRPOP`) plus a
//! subscriber client that subscribes again after each reconnection. redis-rs offers the
//! same commands but leaves pooling and re-subscription to the caller.
//!
//! # TLS
//!
//! With the `tls` feature, `rediss://` (and `rediss-cluster://`) connect over TLS with
//! rustls (ring), every connection of the broker: the pool, each subscription's reader,
//! the Pub/Sub subscriber. The server certificate must name the URL's host (DNS name or
//! IP address, in its subjectAltName).
//!
//! By default the system's roots are trusted, as fred does (the platform's store, or
//! the files named by `SSL_CERT_FILE` / `SSL_CERT_DIR`). For a server whose certificate
//! a private CA signed (a company CA, a test CA), add it with `Settings::tls_ca_file`
//! (PEM, may hold several certificates; the system's roots stay trusted unless
//! `tls_system_roots(false)`), or hand over a whole rustls configuration with
//! `Settings::tls_client_config` (a client certificate for mutual TLS, other versions or
//! providers); `ruststream_redis::rustls` is the rustls version to build it with. A CA
//! file that cannot be read or holds no PEM certificate is [`ConnectError::Tls`]; a
//! handshake that fails (a server certificate not trusted) is [`ConnectError::Connect`],
//! both from [`RedisBroker::connect_with`].
//!
//! ```no_run
//! # #[cfg(feature = "tls")]
//! # async fn tls() -> Result<(), Box<dyn std::error::Error>> {
//! use ruststream_redis::{RedisBroker, Settings};
//!
//! let settings = Settings::default().tls_ca_file("/etc/ssl/company-ca.pem");
//! let broker = RedisBroker::connect_with("rediss://:secret@redis.internal:6380", settings).await?;
//! # let _ = broker;
//! # Ok(()) }
//! ```
//!
//! The crate's own TLS tests run against the TLS-only Redis of `scripts/redis-tls.sh`
//! (127.0.0.1:6390, with a throwaway CA made by `scripts/tls-certs.sh`):
//! `cargo test -p ruststream-redis --features tls --test tls`.
//!
//! # Example
//!
//! ```no_run
//! use ruststream_core::{Broker, Options, Settlement, SubscribeSpec};
//! use ruststream_redis::{Claiming, RedisBroker};
//! use futures_util::StreamExt;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = RedisBroker::connect("redis://127.0.0.1:6379").await?;
//! let mut spec = SubscribeSpec::new("orders");
//! spec.options.insert(Claiming::new(Duration::from_secs(30)).group("billing"));
//! let mut subscription = broker.subscribe(spec).await?;
//! while let Some(Ok(delivery)) = subscription.deliveries.next().await {
//!     println!("{:?}", delivery.payload());
//!     delivery.settle(Settlement::Accept).await?;
//! }
//! # Ok(())
//! # }
//! ```
mod acker;
mod batch;
mod broker;
mod client;
mod connector;
mod delayed;
mod entry;
mod error;
mod failure;
mod form;
mod frame;
mod inflight;
mod inspect;
mod keys;
mod options;
mod publisher;
mod replicas;
mod reply;
mod routes;
mod settings;
#[cfg(feature = "tls")]
mod tls;
mod url;

#[cfg(fuzzing)]
#[doc(hidden)]
pub mod __fuzz;

pub use broker::{AHEAD, RedisBroker, Settings, TRAILING};
pub use connector::RedisConnector;
pub use entry::STREAM_FIELDS;
pub use error::ConnectError;
/// The rustls the client uses (feature `tls`), for
/// [`Settings::tls_client_config`].
#[cfg(feature = "tls")]
pub use fred::rustls;
pub use options::{
    Claiming, DelayedRetry, Form, GroupStart, List, Pattern, PubSub, ReliableList, Stream, Trim,
};
pub use publisher::RedisPublisher;
pub use routes::Target;
