//! The plain list form: `RPOP`/`BRPOP`, at most once.
//!
//! What was popped but not handed out when the subscription is dropped (the rest of the
//! last batch, and what a pop in flight returns) is pushed back to the right end of the
//! list, oldest rightmost, so a graceful stop loses nothing that no handler took.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::{Client, Pool};
use fred::interfaces::ClientLike;
use fred::interfaces::ListInterface;
use fred::types::config::Options as CommandOptions;
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::{Acker, Address, BoxFuture, ConsumeError, Delivery, Tag};

use super::handback::{Tracker, push_back, spawn_tracked};
use super::no_acker::NoAcker;
use super::{Reader, consume_error};
use crate::frame;
use crate::keys::Keys;
use crate::routes::mark;

type Pop = BoxFuture<'static, Result<Vec<Bytes>, fred::error::Error>>;

/// Pops a list from the right (producers push on the left).
pub(crate) struct ListReader {
    /// The reading connection's client.
    pub(crate) client: Client,
    /// Closes that connection when dropped: kept until a pop in flight is answered.
    pub(crate) connection: Option<crate::client::Reader>,
    pub(crate) pool: Pool,
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) address: Address,
    pub(crate) key: String,
    pub(crate) block: Duration,
    pub(crate) count: usize,
    pub(crate) acker: Arc<dyn Acker>,
    /// The elements of the last batch, oldest first (its buffer is reused).
    pub(crate) last: Vec<Bytes>,
    /// The pop sent and not answered yet (kept when a read is cancelled).
    pub(crate) in_flight: Option<Pop>,
    pub(crate) seq: u64,
}

impl ListReader {
    /// Opens the reader of list `keys`, leaving the list's kind marker.
    pub(crate) async fn open(
        pool: Pool,
        connection: crate::client::Reader,
        keys: Keys,
        address: Address,
        block: Duration,
        count: usize,
        tracker: Arc<Tracker>,
    ) -> Self {
        mark(&pool, &keys, "list").await;
        Self {
            client: (*connection).clone(),
            connection: Some(connection),
            pool,
            tracker,
            address,
            key: keys.main().to_owned(),
            block,
            count,
            acker: Arc::new(NoAcker),
            last: Vec::new(),
            in_flight: None,
            seq: 0,
        }
    }

    fn pop(&self) -> Pop {
        let client = self.client.clone();
        let key = self.key.clone();
        let (count, block) = (self.count, self.block);
        Box::pin(async move {
            let popped: Value = client.rpop(key.as_str(), Some(count)).await?;
            let elements = elements(popped);
            if !elements.is_empty() {
                return Ok(elements);
            }
            let options = CommandOptions {
                timeout: Some(block + Duration::from_secs(5)),
                ..CommandOptions::default()
            };
            // A custom command: the client's `brpop` turns the nil reply of a block that
            // timed out into an error.
            let brpop = CustomCommand::new_static("BRPOP", ClusterHash::FirstKey, true);
            let args = vec![
                Value::from(key),
                Value::from(format!("{:.3}", block.as_secs_f64().max(0.01))),
            ];
            let popped: Value = client.with_options(&options).custom(brpop, args).await?;
            // BRPOP answers [key, element].
            Ok(elements_of_pair(popped))
        })
    }

    async fn read_once(&mut self) -> Result<Vec<Delivery>, fred::error::Error> {
        if self.in_flight.is_none() {
            self.in_flight = Some(self.pop());
        }
        let popped = match self.in_flight.as_mut() {
            Some(pop) => pop.await,
            None => return Ok(Vec::new()),
        };
        self.in_flight = None;
        let popped = popped?;
        self.last.clear();
        self.last.extend(popped.iter().cloned());
        Ok(popped
            .into_iter()
            .map(|element| {
                self.seq += 1;
                from_frame(
                    element,
                    &self.address,
                    Tag::Seq(self.seq),
                    self.acker.clone(),
                )
            })
            .collect())
    }
}

impl Reader for ListReader {
    async fn read(&mut self) -> Result<Vec<Delivery>, ConsumeError> {
        self.read_once()
            .await
            .map_err(|e| consume_error("reading the list", &e))
    }

    /// Pushes back what a pop in flight returns, then the `unread` rest of the last
    /// batch: the oldest ends rightmost, read first.
    fn stop(&mut self, unread: &mut VecDeque<Delivery>) {
        let rest = self.last.len().saturating_sub(unread.len());
        let mut newest_first: Vec<Bytes> = self.last.drain(rest..).rev().collect();
        unread.clear();
        let pop = self.in_flight.take();
        if pop.is_none() && newest_first.is_empty() {
            return;
        }
        let (pool, key) = (self.pool.clone(), self.key.clone());
        let connection = self.connection.take();
        let spawned = spawn_tracked(&self.tracker, async move {
            if let Some(pop) = pop {
                match pop.await {
                    Ok(popped) => {
                        let mut all: Vec<Bytes> = popped.into_iter().rev().collect();
                        all.append(&mut newest_first);
                        newest_first = all;
                    }
                    Err(error) => tracing::warn!(%error, "redis pop in flight at stop failed"),
                }
            }
            drop(connection);
            push_back(&pool, &key, newest_first).await;
        });
        if !spawned {
            tracing::error!(key = %self.key, "no runtime to push popped list entries back: lost");
        }
    }
}

/// The elements of an array reply (or of a single bulk string).
pub(crate) fn elements(value: Value) -> Vec<Bytes> {
    match value {
        Value::Null => Vec::new(),
        Value::Array(items) => items.into_iter().filter_map(Value::into_bytes).collect(),
        other => other.into_bytes().into_iter().collect(),
    }
}

fn elements_of_pair(value: Value) -> Vec<Bytes> {
    match value {
        Value::Array(mut pair) if pair.len() == 2 => {
            pair.pop().and_then(Value::into_bytes).into_iter().collect()
        }
        _ => Vec::new(),
    }
}

/// A delivery read from a frame; a frame that cannot be read is delivered whole as the
/// payload, with its defect.
pub(crate) fn from_frame(
    element: Bytes,
    address: &Address,
    tag: Tag,
    acker: Arc<dyn Acker>,
) -> Delivery {
    match frame::decode(&element) {
        Ok(message) => Delivery::new(
            message.payload,
            message.headers,
            address.clone(),
            tag,
            acker,
        ),
        Err(error) => Delivery::new(element, Default::default(), address.clone(), tag, acker)
            .with_defect(error.to_string()),
    }
}
