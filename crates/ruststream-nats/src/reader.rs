//! A subscription's reader: hands out the deliveries (from the JetStream pump, or the
//! core subscription), follows the connection (readiness, a report when it is lost),
//! ends when the broker closes.

use std::sync::Arc;

use futures_core::Stream;
use futures_util::StreamExt;
use ruststream_core::{Acker, Address, Attached, ConsumeError, Delivery, Tag};
use tokio::sync::{mpsc, watch};

use crate::acker::JsAcker;
use crate::connection::Connection;
use crate::link::{self, Link};
use crate::pump::Item;
use crate::{core::NoAck, headers, names};

/// Where the deliveries come from.
enum Source {
    JetStream(mpsc::UnboundedReceiver<Item>, Arc<JsAcker>),
    Core(async_nats::Subscriber),
}

pub(crate) struct Reader {
    address: Address,
    wildcard: bool,
    /// `None` once ended.
    source: Option<Source>,
    /// The acker of core deliveries.
    acker: Arc<dyn Acker>,
    link: watch::Receiver<Link>,
    attached: Attached,
}

/// What woke the reader.
enum Step {
    Link(Link),
    Jet(Option<Item>),
    Core(Option<async_nats::Message>),
}

impl Reader {
    pub(crate) fn jetstream(
        inner: &Arc<Connection>,
        address: Address,
        deliveries: mpsc::UnboundedReceiver<Item>,
        acker: Arc<JsAcker>,
        attached: Attached,
    ) -> Self {
        Self::new(
            inner,
            address,
            Source::JetStream(deliveries, acker),
            attached,
        )
    }

    pub(crate) fn core(
        inner: &Arc<Connection>,
        address: Address,
        subscriber: async_nats::Subscriber,
        attached: Attached,
    ) -> Self {
        Self::new(inner, address, Source::Core(subscriber), attached)
    }

    fn new(inner: &Arc<Connection>, address: Address, source: Source, attached: Attached) -> Self {
        Self {
            wildcard: names::is_wildcard(address.as_str()),
            address,
            source: Some(source),
            acker: Arc::new(NoAck),
            link: inner.link.subscribe(),
            attached,
        }
    }

    pub(crate) fn into_stream(self) -> impl Stream<Item = Item> + Send + 'static {
        futures_util::stream::unfold(self, |mut reader| async move {
            let item = reader.next().await?;
            Some((item, reader))
        })
    }

    async fn next(&mut self) -> Option<Item> {
        loop {
            let step = {
                let source = self.source.as_mut()?;
                let link = &mut self.link;
                tokio::select! {
                    biased;
                    changed = link.changed() => Step::Link(if changed.is_err() {
                        Link::Closed
                    } else {
                        *link.borrow_and_update()
                    }),
                    step = next_of(source) => step,
                }
            };
            match step {
                Step::Link(Link::Closed) => {
                    self.end();
                    return None;
                }
                Step::Link(state) => {
                    if let Some(report) = link::follow(state, &self.attached, self.address.as_str())
                    {
                        return Some(Err(ConsumeError(report)));
                    }
                }
                Step::Jet(None) | Step::Core(None) => {
                    self.end();
                    return None;
                }
                Step::Jet(Some(item)) => return Some(item),
                Step::Core(Some(message)) => return Some(Ok(self.core_delivery(message))),
            }
        }
    }

    /// Ends the reader: what is still queued goes back through the pump.
    fn end(&mut self) {
        if let Some(Source::JetStream(_, acker)) = &self.source {
            acker.park();
        }
        self.source = None;
    }

    fn core_delivery(&self, message: async_nats::Message) -> Delivery {
        let address = if self.wildcard {
            Address::new(message.subject.as_str())
        } else {
            self.address.clone()
        };
        Delivery::new(
            message.payload,
            headers::from_nats(message.headers.as_ref()),
            address,
            Tag::Seq(0),
            self.acker.clone(),
        )
    }
}

async fn next_of(source: &mut Source) -> Step {
    match source {
        Source::JetStream(deliveries, _) => Step::Jet(deliveries.recv().await),
        Source::Core(subscriber) => Step::Core(subscriber.next().await),
    }
}

impl Drop for Reader {
    /// The deliveries still queued are given back by the pump, after its pull
    /// subscription is gone.
    fn drop(&mut self) {
        self.end();
    }
}
