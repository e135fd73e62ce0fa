//! Browsing a classic queue and taking single messages out of it (the dead-letter
//! tools), on RabbitMQ 3.x and 4.x.
//!
//! AMQP 0-9-1 has no browse, so browsing **gets and returns**: on a channel of its own,
//! `basic.get` without auto-ack, one message at a time, holding each unacknowledged
//! (a message held is not got again), until the queue has none left or `max` are held;
//! then one `basic.nack` (`multiple`, `requeue`) gives them all back and the channel
//! closes. A classic queue puts a returned message back where it was and counts
//! nothing (it only marks it `redelivered`), so the queue is as it was: same order,
//! same attempts (`tests/inspect.rs` checks both, on RabbitMQ 3.10 and 4). At most as
//! many are got as the queue held at the first `basic.get`: messages published
//! meanwhile are left alone. While a browse holds them, the messages are not given to
//! the queue's consumers.
//!
//! Removing does the same and acknowledges (`basic.ack`) the messages whose ids were
//! asked, returning the rest; it stops as soon as every id asked for is found. A
//! message has no id on the wire that the broker keeps for it, so its id is a digest
//! (FNV-1a, 64 bits, as 16 hex digits) of its payload and headers: stable while it
//! waits, shared by byte-identical messages.
//!
//! Only **classic** queues are browsed. A quorum queue counts every returned message
//! as a delivery (`x-delivery-count`, up to RabbitMQ 4.2: AMQP 0-9-1 has no uncounted
//! return), so a browse would spend its messages' attempts and, at the queue's delivery
//! limit (20 by default on RabbitMQ 4), drop or dead-letter them: it is
//! [`InspectError::Unsupported`], naming the AMQP 1.0 adapter (`ruststream-amqp`, on
//! RabbitMQ 4), which browses quorum queues without counting. A stream (read from an
//! offset, never consumed), an exchange address, a missing queue and a queue whose
//! type cannot be found out (no configure permission: see the crate docs, "Queues")
//! are [`InspectError::Unsupported`] too.

use lapin::options::{BasicAckOptions, BasicGetOptions, BasicNackOptions};
use lapin::{Channel, Connection};
use ruststream_core::{Address, BoxFuture, InspectError, Message, Waiting, content_id};
use ruststream_rabbitmq::inspect::{Pass, Sweep, failed, unsupported};

use crate::LapinBroker;
use crate::probe::{self, Found, ProbeError};

impl LapinBroker {
    /// The queue `address` names, checked to be a classic queue that exists.
    async fn browsable(
        &self,
        connection: &Connection,
        address: &Address,
    ) -> Result<String, InspectError> {
        let unsupported = |reason: String| unsupported(address, reason);
        let queue = crate::address::queue(address.as_str())
            .map_err(|e| unsupported(format!("only queues can be browsed ({e})")))?;
        let found = probe::describe(connection, &queue, &[], None)
            .await
            .map_err(|e| match e {
                ProbeError::Connection(why) | ProbeError::Refused(why) => {
                    failed(format!("queue {queue}: {why}"))
                }
            })?;
        match found {
            Found::Queue(info) if info.kind == "classic" => Ok(queue),
            Found::Queue(info) if info.kind == "quorum" => Err(unsupported(format!(
                "{queue} is a quorum queue: over AMQP 0-9-1 every message browsed would count \
                 as a delivery (x-delivery-count, its delivery limit); browse it with the \
                 AMQP 1.0 adapter (amqp://) on RabbitMQ 4"
            ))),
            Found::Queue(info) => Err(unsupported(format!(
                "{queue} is a {} queue: only classic queues are browsed over AMQP 0-9-1",
                info.kind
            ))),
            Found::Missing => Err(unsupported(format!("queue {queue} does not exist"))),
            Found::Unreadable(why) | Found::Denied(why) => Err(unsupported(format!(
                "cannot tell what queue {queue} is ({why}): only classic queues are browsed"
            ))),
        }
    }

    /// Gets the queue's messages one by one (at most as many as it held at the first
    /// get), hands each to `keep` (which says whether to acknowledge it), and stops
    /// once `done` says so or the queue has no more; then returns every message held.
    async fn get_and_return(
        &self,
        address: &Address,
        mut keep: impl FnMut(Waiting) -> bool + Send,
        done: impl Fn() -> bool + Send,
    ) -> Result<(), InspectError> {
        let connection = self.connector.connection().await.map_err(failed)?;
        let queue = self.browsable(&connection, address).await?;
        if done() {
            return Ok(());
        }
        let channel = connection.create_channel().await.map_err(failed)?;
        let result = get_all(&channel, &queue, &mut keep, &done).await;
        // Every message still held goes back where it was, at once; closing the channel
        // would return them too, should the nack not get there.
        let returned = match result {
            Ok(Some(last)) => channel
                .basic_nack(
                    last,
                    BasicNackOptions {
                        multiple: true,
                        requeue: true,
                    },
                )
                .await
                .map_err(failed),
            Ok(None) | Err(_) => Ok(()),
        };
        let closed = channel.close(200, "inspected".into()).await.map_err(failed);
        result.and(returned).and(closed).map(drop)
    }
}

/// The `basic.get` loop of [`LapinBroker::get_and_return`]: the tag of the last message got and
/// held (to return all held at once), if any.
async fn get_all(
    channel: &Channel,
    queue: &str,
    keep: &mut (impl FnMut(Waiting) -> bool + Send),
    done: &(impl Fn() -> bool + Send),
) -> Result<Option<u64>, InspectError> {
    let mut last_held = None;
    let mut left: Option<u64> = None;
    while left != Some(0) && !done() {
        let got = channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: false })
            .await
            .map_err(|e| failed(format!("basic.get from {queue}: {e}")))?;
        let Some(got) = got else { break };
        // The count the first get saw bounds the sweep: what comes after is new.
        let remaining = u64::from(got.message_count);
        left = Some(left.map_or(remaining, |n| n.saturating_sub(1)));
        let delivery = got.delivery;
        let (headers, _) = crate::message::headers(&delivery.properties);
        let message = Message {
            payload: delivery.data.into(),
            headers,
        };
        let tag = delivery.delivery_tag;
        // The id is the message's as stored; what is shown reads RabbitMQ's own
        // dead-lettering headers as the runtime's.
        let id = content_id(&message);
        let message = crate::deaths::described(message, delivery.properties.headers().as_ref());
        if keep(Waiting::new(id, message)) {
            channel
                .basic_ack(tag, BasicAckOptions { multiple: false })
                .await
                .map_err(|e| failed(format!("basic.ack on {queue}: {e}")))?;
        } else {
            last_held = Some(tag);
        }
    }
    Ok(last_held)
}

impl Sweep for LapinBroker {
    fn sweep<'a>(&'a self, pass: Pass<'a>) -> BoxFuture<'a, Result<(), InspectError>> {
        Box::pin(self.get_and_return(pass.address, pass.keep, pass.done))
    }
}

ruststream_rabbitmq::inspect_by_sweep!(LapinBroker);
