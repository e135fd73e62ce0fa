//! The one NATS connection a broker's subscriptions and publisher share, with what they
//! keep together: the subjects published with core NATS, the tasks close waits on.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use async_nats::jetstream;
use ruststream_core::{Address, Setting};
use tokio::task::JoinHandle;

use crate::link::LinkState;

/// The connection and the state its users share.
pub(crate) struct Connection {
    pub(crate) client: async_nats::Client,
    pub(crate) js: jetstream::Context,
    pub(crate) link: LinkState,
    /// Subjects published with core NATS (no stream, no acknowledgement).
    core: Mutex<HashSet<Address>>,
    /// Tasks giving back what ended subscriptions had received and not handed out.
    drains: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    replies: AtomicU64,
    /// The settings of the URL's query (`settings.rs`).
    url_settings: Vec<Setting>,
    /// The server's `max_payload` as its INFO said at connect.
    max_payload: AtomicUsize,
}

impl Connection {
    pub(crate) fn new(
        client: async_nats::Client,
        js: jetstream::Context,
        link: LinkState,
        url_settings: Vec<Setting>,
    ) -> Self {
        let max_payload = AtomicUsize::new(client.server_info().max_payload);
        Self {
            client,
            js,
            link,
            core: Mutex::new(HashSet::new()),
            drains: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            replies: AtomicU64::new(0),
            url_settings,
            max_payload,
        }
    }

    /// The largest message (header block and payload) the server takes: its `max_payload`
    /// (1 MiB by default). Read again from the server's latest INFO for a message of
    /// `size` over 64 KiB or over the limit known, so a limit changed across a reconnect
    /// is seen where it matters.
    pub(crate) fn max_payload(&self, size: usize) -> usize {
        let known = self.max_payload.load(Ordering::Relaxed);
        if size <= known && size <= 64 * 1024 {
            return known;
        }
        let current = self.client.server_info().max_payload;
        self.max_payload.store(current, Ordering::Relaxed);
        current
    }

    /// Marks it closed; whether it already was.
    pub(crate) fn close(&self) -> bool {
        self.closed.swap(true, Ordering::AcqRel)
    }

    /// The tasks close waits on, taken.
    pub(crate) fn owed(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.drains.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The settings of the URL's query.
    pub(crate) fn url_settings(&self) -> &[Setting] {
        &self.url_settings
    }

    /// A number for the next reply subject, unique on this connection.
    pub(crate) fn next_reply(&self) -> u64 {
        self.replies.fetch_add(1, Ordering::Relaxed)
    }
    pub(crate) fn route_core(&self, subject: Address) {
        self.core
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(subject);
    }

    /// Whether `subject` is published with core NATS.
    pub(crate) fn is_core(&self, subject: &Address) -> bool {
        subject.as_str().starts_with("_INBOX.")
            || self
                .core
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(subject)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Keeps `task` for `close` to wait on.
    pub(crate) fn owe(&self, task: JoinHandle<()>) {
        let mut drains = self.drains.lock().unwrap_or_else(PoisonError::into_inner);
        drains.retain(|task| !task.is_finished());
        drains.push(task);
    }
}
