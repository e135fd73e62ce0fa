//! Subscriptions: one receiving link per subscription, driven by a task of its own.
//!
//! The task owns the fe2o3 `Receiver`. It waits on three things at once, in this order
//! of priority: the broker closing, settlements from the [`AmqpAcker`], and new
//! transfers. Settlements never wait for a transfer to arrive (`recv` is cancel-safe),
//! and those that are queued together go out as ranged dispositions, one per outcome;
//! once fe2o3's session has taken a disposition, the settlements' waiters are told
//! (dropped untold, they hear `AckError::Disconnected`). Released (abandoned) deliveries
//! count as settled for the credit window. When the link or the connection is lost, the
//! task re-attaches (reconnecting with back-off) and the stream goes on; deliveries of
//! the lost link come back from the broker: settling one already taken fails with
//! `AckError::Disconnected`, and those not yet taken from the stream are skipped.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::link::receiver::TerminalDeliveryState;
use fe2o3_amqp::link::{Receiver, RecvError};
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp_types::definitions::{ReceiverSettleMode, SenderSettleMode};
use fe2o3_amqp_types::messaging::{Accepted, Body, Modified, Rejected, Released};
use fe2o3_amqp_types::primitives::Value;
use futures_core::Stream;
use ruststream_core::{
    Address, Capabilities, ConsumeError, Delivery, RETRY_COUNT, Subscription, Tag,
};
use tokio::sync::{mpsc, watch};

use crate::acker::{AmqpAcker, Command, Outcome, Unsettled, Written};
use crate::connection::Connector;
use crate::credit::Credit;
use crate::draining::Draining;
use crate::message::decode;
use crate::options::Settle;

/// At most this many queued settlements are handled before looking at transfers again.
const SETTLE_BATCH: usize = 1024;
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

type Item = Result<Delivery, ConsumeError>;

/// An item with the attachment it came on.
type Sent = (u64, Item);

/// The attachment number that ends the stream: the drain is over.
const DRAINED: u64 = u64::MAX - 1;

/// What a subscription needs to (re)attach its link.
#[derive(Debug, Clone)]
pub(crate) struct LinkSpec {
    /// The ruststream address, given to deliveries.
    pub(crate) address: Address,
    /// The AMQP source address.
    pub(crate) source: String,
    pub(crate) settle: Settle,
    pub(crate) credit: u32,
    /// Whether deliveries with a header section carry the broker's count.
    pub(crate) counts: bool,
    /// A graceful stop's drain, where the subscription accepted it (at least once).
    pub(crate) drain: Option<ruststream_core::Drain>,
}

/// Attaches the link and starts its task.
pub(crate) async fn subscribe(
    connector: Arc<Connector>,
    spec: LinkSpec,
    capabilities: Capabilities,
) -> Result<(Subscription, tokio::task::JoinHandle<()>), ruststream_core::SubscribeError> {
    use ruststream_core::SubscribeError;
    let mut session = connector.session(false).await.map_err(|e| match e {
        crate::ConnectError::Closed => SubscribeError::Closed,
        other => SubscribeError::Disconnected(other.to_string()),
    })?;
    let name = connector.link_name("sub");
    let receiver = attach(&mut session, &name, &spec)
        .await
        .map_err(SubscribeError::Refused)?;
    let (commands_tx, commands) = mpsc::unbounded_channel();
    let (out, deliveries) = mpsc::unbounded_channel();
    let link = Arc::new(AtomicU64::new(0));
    let attached = ruststream_core::Attached::new();
    let acker = Arc::new(AmqpAcker::new(
        commands_tx.clone(),
        link.clone(),
        spec.settle == Settle::AtLeastOnce,
    ));
    let task = LinkTask {
        closed: connector.closed(),
        connector,
        name,
        credit: Credit::new(spec.credit),
        spec: spec.clone(),
        commands,
        out,
        acker,
        link,
        attached: attached.clone(),
        draining: Draining::Idle,
    };
    let task_link = task.link.clone();
    let handle = tokio::spawn(task.run(session, receiver));
    let stream = DeliveryStream {
        deliveries,
        link: (spec.settle == Settle::AtLeastOnce).then(|| task_link.clone()),
        taken: (spec.settle == Settle::AtMostOnce).then(|| TakenCounter {
            commands: commands_tx,
            pending: 0,
            every: (spec.credit / 2).max(1),
        }),
    };
    Ok((
        Subscription {
            deliveries: Box::pin(stream),
            capabilities,
            attached,
        },
        handle,
    ))
}

async fn attach(
    session: &mut SessionHandle<()>,
    name: &str,
    spec: &LinkSpec,
) -> Result<Receiver, String> {
    let sender_mode = match spec.settle {
        Settle::AtLeastOnce => SenderSettleMode::Unsettled,
        Settle::AtMostOnce => SenderSettleMode::Settled,
    };
    let mut receiver = Receiver::builder()
        .name(name)
        .source(spec.source.as_str())
        .sender_settle_mode(sender_mode)
        .receiver_settle_mode(ReceiverSettleMode::First)
        .credit_mode(CreditMode::Manual)
        .auto_accept(false)
        .attach(session)
        .await
        .map_err(|e| format!("attach to {} refused: {e}", spec.source))?;
    receiver
        .set_credit(spec.credit.max(1))
        .await
        .map_err(|e| format!("initial flow failed: {e}"))?;
    Ok(receiver)
}

/// Why a link stopped.
enum Stop {
    /// The broker is closing: the link was closed cleanly.
    Closed,
    /// Nobody reads the stream any more.
    Abandoned,
    /// The link or its connection failed.
    Lost(String),
}

enum Event {
    Closing,
    Abandoned,
    /// A graceful stop asked the link to drain.
    Drain,
    /// A drained link was quiet long enough: the stream ends.
    Quiet,
    Command(Option<Command>),
    Received(Box<Result<fe2o3_amqp::link::delivery::Delivery<Body<Value>>, RecvError>>),
}

struct LinkTask {
    connector: Arc<Connector>,
    closed: watch::Receiver<bool>,
    name: String,
    spec: LinkSpec,
    credit: Credit,
    commands: mpsc::UnboundedReceiver<Command>,
    out: mpsc::UnboundedSender<Sent>,
    acker: Arc<AmqpAcker>,
    /// The current attachment; bumped when the link is lost.
    link: Arc<AtomicU64>,
    /// Detached while the link is lost, attached once it is again.
    attached: ruststream_core::Attached,
    draining: Draining,
}

impl LinkTask {
    async fn run(mut self, mut session: SessionHandle<()>, mut receiver: Receiver) {
        loop {
            let stop = self.pump(&mut receiver).await;
            match stop {
                Stop::Closed | Stop::Abandoned => {
                    // Closing is best effort: unsettled deliveries go back to the queue.
                    let _ = tokio::time::timeout(CLOSE_TIMEOUT, receiver.close()).await;
                    let _ = tokio::time::timeout(CLOSE_TIMEOUT, session.end()).await;
                    return;
                }
                Stop::Lost(reason) => {
                    self.link.fetch_add(1, Ordering::AcqRel);
                    self.attached.detach();
                    tracing::warn!(address = %self.spec.address, link = %self.name, %reason, "amqp: link lost; re-attaching");
                    let _ = self.out.send((
                        u64::MAX,
                        Err(ConsumeError(format!(
                            "link to {} lost ({reason}); re-attaching",
                            self.spec.source
                        ))),
                    ));
                    drop(receiver);
                    let _ = tokio::time::timeout(Duration::from_secs(1), session.end()).await;
                    match self.reattach().await {
                        Some((s, r)) => {
                            session = s;
                            receiver = r;
                            self.credit = Credit::new(self.spec.credit);
                            self.attached.attach();
                            if !self.draining.grants() {
                                // Drained meanwhile: the new link is drained too, and
                                // the stream ends now (its transfers are not handed out:
                                // they go back when the link closes).
                                let _ = receiver.drain().await;
                                self.end_drain();
                            }
                            tracing::info!(address = %self.spec.address, link = %self.name, "amqp: link re-attached");
                        }
                        None => return,
                    }
                }
            }
        }
    }

    /// Re-attaches with back-off; `None` when the broker closed or nobody listens.
    async fn reattach(&mut self) -> Option<(SessionHandle<()>, Receiver)> {
        let mut backoff = self.connector.backoff();
        loop {
            if self.out.is_closed() {
                return None;
            }
            let mut session = self.connector.session(true).await.ok()?;
            // Settlements of the lost link can no longer be sent: drop them.
            while self.commands.try_recv().is_ok() {}
            match attach(&mut session, &self.name, &self.spec).await {
                Ok(receiver) => return Some((session, receiver)),
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(address = %self.spec.address, link = %self.name, error = %e, retry_in = ?delay, "amqp: re-attach failed");
                    let _ = tokio::time::timeout(Duration::from_secs(1), session.end()).await;
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.closed.wait_for(|c| *c) => return None,
                    }
                }
            }
        }
    }

    async fn pump(&mut self, receiver: &mut Receiver) -> Stop {
        let mut batch = Vec::new();
        // Made once: the loop polls it again on every event without a new future.
        let mut asked = self
            .spec
            .drain
            .as_ref()
            .map(ruststream_core::Drain::requested);
        let quiet = tokio::time::sleep(std::time::Duration::ZERO);
        tokio::pin!(quiet);
        loop {
            let idle = asked.is_some() && self.draining == Draining::Idle;
            let quieting = match self.draining.ends_at() {
                Some(at) => {
                    if quiet.deadline() != at {
                        quiet.as_mut().reset(at);
                    }
                    true
                }
                None => false,
            };
            let event = tokio::select! {
                biased;
                _ = self.closed.wait_for(|c| *c) => Event::Closing,
                command = self.commands.recv() => Event::Command(command),
                received = receiver.recv::<Body<Value>>() => Event::Received(Box::new(received)),
                () = async { if let Some(asked) = asked.as_mut() { asked.await } }, if idle => Event::Drain,
                () = &mut quiet, if quieting => Event::Quiet,
                // A drained stream is dropped while its deliveries are still handled:
                // their settlements come until the broker closes.
                _ = self.out.closed(), if self.draining != Draining::Done => Event::Abandoned,
            };
            match event {
                Event::Closing => {
                    // Send what was settled before the close, then stop.
                    while let Ok(c) = self.commands.try_recv() {
                        batch.push(c);
                    }
                    let _ = self.apply(receiver, &mut batch).await;
                    return Stop::Closed;
                }
                Event::Abandoned | Event::Command(None) => return Stop::Abandoned,
                Event::Command(Some(command)) => {
                    batch.push(command);
                    while batch.len() < SETTLE_BATCH {
                        match self.commands.try_recv() {
                            Ok(c) => batch.push(c),
                            Err(_) => break,
                        }
                    }
                    if let Err(reason) = self.apply(receiver, &mut batch).await {
                        return Stop::Lost(reason);
                    }
                }
                Event::Received(received) => {
                    self.draining.on_received(tokio::time::Instant::now());
                    if let Err(stop) = self.on_received(*received) {
                        return stop;
                    }
                }
                Event::Drain => {
                    self.draining = Draining::start(tokio::time::Instant::now());
                    // A flow with `drain` set: the broker sends what the credit left
                    // allows (no more than the window) and then uses the rest up. A
                    // flow with credit 0 instead would make the transfers already on
                    // their way a protocol error to fe2o3, which loses the link.
                    if let Err(e) = receiver.drain().await {
                        return Stop::Lost(format!("flow failed: {e}"));
                    }
                }
                Event::Quiet => self.end_drain(),
            }
        }
    }

    /// Ends the stream after what it holds: the drain is over. Settlements still come.
    fn end_drain(&mut self) {
        if self.draining != Draining::Done {
            self.draining = Draining::Done;
            let _ = self
                .out
                .send((DRAINED, Err(ConsumeError("drained".to_owned()))));
        }
    }

    fn on_received(
        &mut self,
        received: Result<fe2o3_amqp::link::delivery::Delivery<Body<Value>>, RecvError>,
    ) -> Result<(), Stop> {
        match received {
            Ok(delivery) => {
                self.credit.on_received();
                let (info, message) = delivery.into_parts();
                let d = self.delivery(info, Some(message), None);
                // After a drain the stream may be gone: a late transfer is released (its
                // delivery dropped) and the task goes on settling.
                if self
                    .out
                    .send((self.link.load(Ordering::Acquire), Ok(d)))
                    .is_err()
                    && self.draining != Draining::Done
                {
                    return Err(Stop::Abandoned);
                }
            }
            Err(RecvError::MessageDecode(e)) => {
                // The transfer counted against credit before decoding failed.
                self.credit.on_received();
                let reason = format!("undecodable amqp message: {}", e.source);
                let d = self.delivery(e.info, None, Some(reason));
                // After a drain the stream may be gone: a late transfer is released (its
                // delivery dropped) and the task goes on settling.
                if self
                    .out
                    .send((self.link.load(Ordering::Acquire), Ok(d)))
                    .is_err()
                    && self.draining != Draining::Done
                {
                    return Err(Stop::Abandoned);
                }
            }
            Err(e) => return Err(Stop::Lost(e.to_string())),
        }
        Ok(())
    }

    fn delivery(
        &self,
        info: DeliveryInfo,
        message: Option<fe2o3_amqp_types::messaging::Message<Body<Value>>>,
        defect: Option<String>,
    ) -> Delivery {
        let tag = match self.spec.settle {
            Settle::AtLeastOnce => Tag::Other(Box::new(Unsettled {
                link: self.link.load(Ordering::Acquire),
                info,
            })),
            Settle::AtMostOnce => Tag::Seq(u64::from(info.delivery_id())),
        };
        let acker: Arc<dyn ruststream_core::Acker> = self.acker.clone();
        let Some(message) = message else {
            let d = Delivery::new(
                bytes::Bytes::new(),
                ruststream_core::Headers::new(),
                self.spec.address.clone(),
                tag,
                acker,
            );
            return d.with_defect(defect.unwrap_or_default());
        };
        let decoded = decode(message);
        // A copy the runtime published counts its attempts in its retry-count header;
        // the broker's delivery-count of the copy is not read as well (one counter per
        // delivery, SPEC §2).
        let copy = decoded.headers.get(RETRY_COUNT).is_some();
        let mut d = Delivery::new(
            decoded.payload,
            decoded.headers,
            self.spec.address.clone(),
            tag,
            acker,
        );
        if self.spec.counts
            && self.spec.settle == Settle::AtLeastOnce
            && !copy
            && let Some(count) = decoded.delivery_count
        {
            d = d.with_broker_attempt(count.saturating_add(1));
        }
        if let Some(reason) = decoded.defect {
            d = d.with_defect(reason);
        }
        d
    }

    /// Sends the dispositions for `batch` (emptied) and the flow they make due.
    async fn apply(
        &mut self,
        receiver: &mut Receiver,
        batch: &mut Vec<Command>,
    ) -> Result<(), String> {
        let current = self.link.load(Ordering::Acquire);
        let mut groups: [Group; 4] = [
            Group::new(Outcome::Accepted),
            Group::new(Outcome::Rejected),
            Group::new(Outcome::Modified),
            Group::new(Outcome::Released),
        ];
        let mut done = 0u32;
        for command in batch.drain(..) {
            match command {
                Command::Settle {
                    link,
                    info,
                    outcome,
                    written,
                } => {
                    if link != current {
                        // A delivery of a lost link: the broker has it back; its waiter
                        // (dropped here) hears `Disconnected`.
                        continue;
                    }
                    if let Some(group) = groups.iter_mut().find(|g| g.outcome == outcome) {
                        group.infos.push(info);
                        group.written.extend(written);
                    }
                    // Released (abandoned) deliveries count too: their credit comes back.
                    done += 1;
                }
                Command::Taken(n) => done += n,
            }
        }
        for Group {
            outcome,
            infos,
            written,
        } in groups
        {
            if infos.is_empty() {
                continue;
            }
            let state = match outcome {
                Outcome::Accepted => TerminalDeliveryState::Accepted(Accepted {}),
                Outcome::Rejected => TerminalDeliveryState::Rejected(Rejected { error: None }),
                Outcome::Modified => TerminalDeliveryState::Modified(Modified {
                    delivery_failed: Some(true),
                    undeliverable_here: Some(false),
                    message_annotations: None,
                }),
                Outcome::Released => TerminalDeliveryState::Released(Released {}),
            };
            let result = match <[DeliveryInfo; 1]>::try_from(infos) {
                Ok([info]) => receiver.dispose(info, state).await,
                Err(infos) => receiver.dispose_all(infos, state).await,
            };
            // On failure the waiters (dropped with the batch) hear `Disconnected`.
            result.map_err(|e| format!("disposition failed: {e}"))?;
            // Handed to the session: settled as far as this side can tell.
            for w in written {
                let _ = w.send(());
            }
        }
        if done > 0
            && let Some(grant) = self.credit.on_settled(done)
            && self.draining.grants()
        {
            receiver
                .set_credit(grant)
                .await
                .map_err(|e| format!("flow failed: {e}"))?;
        }
        Ok(())
    }
}

/// The settlements of one batch with one outcome, and who waits for them.
struct Group {
    outcome: Outcome,
    infos: Vec<DeliveryInfo>,
    written: Vec<Written>,
}

impl Group {
    fn new(outcome: Outcome) -> Self {
        Self {
            outcome,
            infos: Vec::new(),
            written: Vec::new(),
        }
    }
}

/// The stream handed to the runtime.
struct DeliveryStream {
    deliveries: mpsc::UnboundedReceiver<Sent>,
    /// At least once: the current attachment. Deliveries of an earlier one are skipped:
    /// the broker took them back when their link was lost and sends them again, so
    /// handling them would only make duplicates whose settlements fail.
    link: Option<Arc<AtomicU64>>,
    /// At-most-once: tells the link task how many deliveries were taken, for credit.
    taken: Option<TakenCounter>,
}

struct TakenCounter {
    commands: mpsc::UnboundedSender<Command>,
    pending: u32,
    every: u32,
}

impl Stream for DeliveryStream {
    type Item = Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let this = self.get_mut();
        let item = loop {
            match this.deliveries.poll_recv(cx) {
                Poll::Ready(Some((DRAINED, _))) => return Poll::Ready(None),
                Poll::Ready(Some((link, Ok(delivery))))
                    if this
                        .link
                        .as_ref()
                        .is_some_and(|current| current.load(Ordering::Acquire) != link) =>
                {
                    tracing::debug!(address = %delivery.address(), "amqp: skipped a delivery of a lost link");
                }
                other => break other.map(|sent| sent.map(|(_, item)| item)),
            }
        };
        if let (Poll::Ready(Some(Ok(_))), Some(t)) = (&item, this.taken.as_mut()) {
            t.pending += 1;
            if t.pending >= t.every {
                let _ = t.commands.send(Command::Taken(t.pending));
                t.pending = 0;
            }
        }
        item
    }
}
