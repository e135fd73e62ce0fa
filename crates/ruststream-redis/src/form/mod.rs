//! The subscription forms: each reads batches of deliveries from Redis; this module turns
//! a reader into the runtime's delivery stream.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use ruststream_adapter::Backoff;
use ruststream_core::{Attached, ConsumeError, Delivery, DeliveryStream, Drain};
use tokio::sync::watch;

/// A Lua function `unwrap(w)`, for the scripts that hand reliable-list elements back: a
/// processing-list element without its wrapping (`\xffRS<take-id>:<i>\0` before the
/// message), or the element itself where it has none.
macro_rules! lua_unwrap {
    () => {
        r"
local function unwrap(w)
  if string.sub(w, 1, 3) == '\255RS' then
    local z = string.find(w, '\0', 4, true)
    if z then return string.sub(w, z + 1) end
  end
  return w
end
"
    };
}

pub(crate) mod claiming;
pub(crate) mod group_recovery;
pub(crate) mod handback;
pub(crate) mod held;
pub(crate) mod lease;
pub(crate) mod list;
pub(crate) mod no_acker;
pub(crate) mod pubsub;
pub(crate) mod reliable;
pub(crate) mod reliable_acker;
pub(crate) mod reliable_recovery;
pub(crate) mod stream;
pub(crate) mod wrap;

/// A form's reader: the next batch of deliveries, waiting at most about one `block`.
pub(crate) trait Reader: Send + 'static {
    /// Reads the next batch; an empty batch is fine (the block timed out).
    fn read(&mut self) -> impl Future<Output = Result<Vec<Delivery>, ConsumeError>> + Send;

    /// The subscription is dropped with `unread` (oldest first) read but not handed out:
    /// a form that can gives them back. What it leaves in `unread` is dropped newest
    /// first, each abandoned ([`Acker::abandon`](ruststream_core::Acker::abandon)).
    fn stop(&mut self, unread: &mut VecDeque<Delivery>) {
        let _ = unread;
    }
}

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

struct State<R: Reader> {
    reader: R,
    buffer: VecDeque<Delivery>,
    closed: watch::Receiver<bool>,
    _open: Arc<watch::Sender<bool>>,
    backoff: Backoff,
    /// How long to wait before the next read: set by a failed read, `None` after one that
    /// succeeded.
    retry_in: Option<Duration>,
    attached: Attached,
    /// A graceful stop's drain, where the form accepted it.
    drain: Option<Drain>,
}

impl<R: Reader> Drop for State<R> {
    fn drop(&mut self) {
        self.reader.stop(&mut self.buffer);
        // Newest first: handed back one after the other, the oldest ends up read first.
        while let Some(delivery) = self.buffer.pop_back() {
            drop(delivery);
        }
    }
}

/// The deliveries of `reader` until the broker closes, or, with a `drain` the form
/// accepted, until a drain is requested and what was read is handed out (a read already
/// under way finishes: cut off, its entries would be counted and never handed out). A
/// failed read is reported as an error item (and `attached` detached); the next one is
/// tried after a back-off (100 ms doubling to 5 s, with jitter); a read that succeeds
/// attaches it again.
pub(crate) fn deliveries<R: Reader>(
    reader: R,
    closed: Arc<watch::Sender<bool>>,
    attached: Attached,
    drain: Option<Drain>,
) -> DeliveryStream {
    let state = State {
        reader,
        buffer: VecDeque::new(),
        closed: closed.subscribe(),
        _open: closed,
        backoff: Backoff::new(FIRST_BACKOFF, MAX_BACKOFF),
        retry_in: None,
        attached,
        drain,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(delivery) = state.buffer.pop_front() {
                return Some((Ok(delivery), state));
            }
            if *state.closed.borrow() || state.drain.as_ref().is_some_and(Drain::is_requested) {
                return None;
            }
            if let Some(delay) = state.retry_in.take() {
                tokio::select! {
                    _ = state.closed.changed() => return None,
                    () = tokio::time::sleep(delay) => {}
                }
                // A drain asked during the back-off ends the stream before the next read.
                continue;
            }
            let result = tokio::select! {
                _ = state.closed.changed() => return None,
                result = state.reader.read() => result,
            };
            match result {
                Ok(batch) => {
                    state.attached.attach();
                    state.backoff.reset();
                    state.retry_in = None;
                    state.buffer.extend(batch);
                }
                Err(error) => {
                    state.attached.detach();
                    state.retry_in = Some(state.backoff.next_delay());
                    tracing::warn!(%error, "redis subscription read failed");
                    return Some((Err(error), state));
                }
            }
        }
    })
    .boxed()
}

/// A read error from the client.
pub(crate) fn consume_error(context: &str, error: &fred::error::Error) -> ConsumeError {
    ConsumeError(format!("{context}: {error}"))
}
