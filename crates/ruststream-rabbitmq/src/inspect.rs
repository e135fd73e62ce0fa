//! The dead-letter tools' browse and remove, written once over an adapter's pass
//! through a queue ([`Sweep`]): each protocol takes messages out and puts them back its
//! own way (AMQP 0-9-1 `basic.get` and `basic.nack`, AMQP 1.0 credit and `released`).

use std::sync::{Mutex, PoisonError};

use ruststream_core::{Address, BoxFuture, InspectError, Waiting, Wanted};

/// One pass through a queue's messages, as [`Sweep::sweep`] is asked for it.
pub struct Pass<'a> {
    /// The queue.
    pub address: &'a Address,
    /// At most this many messages are wanted (all of them: `u64::MAX`).
    pub max: u64,
    /// Handed each message; says whether to take it out (the rest go back as they were).
    pub keep: &'a mut (dyn FnMut(Waiting) -> bool + Send),
    /// Says whether the pass may stop early.
    pub done: &'a (dyn Fn() -> bool + Sync),
}

/// A broker that passes through a queue's messages.
pub trait Sweep: Sync {
    /// Makes `pass` through its queue: hands each message to `pass.keep`, takes out those
    /// it keeps and puts the others back where they were.
    fn sweep<'a>(&'a self, pass: Pass<'a>) -> BoxFuture<'a, Result<(), InspectError>>;
}

/// `Inspect::browse` by `broker`'s sweep: up to `max` messages, none taken out.
pub fn browse<'a, S: Sweep>(
    broker: &'a S,
    address: &Address,
    max: usize,
) -> BoxFuture<'a, Result<Vec<Waiting>, InspectError>> {
    let address = address.clone();
    Box::pin(async move {
        let seen = Mutex::new(Vec::new());
        let lock = || seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut keep = |waiting| {
            let mut seen = lock();
            if seen.len() < max {
                seen.push(waiting);
            }
            false
        };
        let pass = Pass {
            address: &address,
            max: u64::try_from(max).unwrap_or(u64::MAX),
            keep: &mut keep,
            done: &|| lock().len() >= max,
        };
        broker.sweep(pass).await?;
        Ok(seen.into_inner().unwrap_or_else(PoisonError::into_inner))
    })
}

/// `Inspect::remove` by `broker`'s sweep: the messages of `ids` taken out, as many as
/// asked of each id; how many were.
pub fn remove<'a, S: Sweep>(
    broker: &'a S,
    address: &'a Address,
    ids: &'a [String],
) -> BoxFuture<'a, Result<usize, InspectError>> {
    Box::pin(async move {
        let wanted = Wanted::new(ids);
        let pass = Pass {
            address,
            max: u64::MAX,
            keep: &mut |waiting: Waiting| wanted.take(&waiting.id),
            done: &|| wanted.is_done(),
        };
        broker.sweep(pass).await?;
        Ok(wanted.taken())
    })
}

/// Implements `ruststream_core::Inspect` for a broker type that implements [`Sweep`]:
/// browse and remove by [`browse`] and [`remove`], as both RabbitMQ adapters do.
///
/// ```
/// use ruststream_core::{BoxFuture, InspectError};
/// use ruststream_rabbitmq::inspect::{Pass, Sweep};
///
/// /// A broker whose queues are always empty.
/// struct Empty;
///
/// impl Sweep for Empty {
///     fn sweep<'a>(&'a self, _: Pass<'a>) -> BoxFuture<'a, Result<(), InspectError>> {
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// ruststream_rabbitmq::inspect_by_sweep!(Empty);
/// ```
#[macro_export]
macro_rules! inspect_by_sweep {
    ($broker:ty) => {
        impl ::ruststream_core::Inspect for $broker {
            fn browse(
                &self,
                address: &::ruststream_core::Address,
                max: usize,
            ) -> ::ruststream_core::BoxFuture<
                '_,
                Result<Vec<::ruststream_core::Waiting>, ::ruststream_core::InspectError>,
            > {
                $crate::inspect::browse(self, address, max)
            }

            fn remove<'a>(
                &'a self,
                address: &'a ::ruststream_core::Address,
                ids: &'a [String],
            ) -> ::ruststream_core::BoxFuture<'a, Result<usize, ::ruststream_core::InspectError>>
            {
                $crate::inspect::remove(self, address, ids)
            }
        }
    };
}

/// A broker's failure while inspecting, as the tools show it.
pub fn failed(what: impl std::fmt::Display) -> InspectError {
    InspectError::Broker(what.to_string())
}

/// `address` cannot be inspected, for `reason`.
pub fn unsupported(address: &Address, reason: impl Into<String>) -> InspectError {
    InspectError::Unsupported {
        address: address.to_string(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruststream_core::{Message, content_id};

    /// A queue of three messages: a sweep hands them over in order, takes out those kept.
    struct Queue(Mutex<Vec<Message>>);

    impl Sweep for Queue {
        fn sweep<'a>(&'a self, pass: Pass<'a>) -> BoxFuture<'a, Result<(), InspectError>> {
            Box::pin(async move {
                let mut queue = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                let mut left = Vec::new();
                for (i, message) in queue.drain(..).enumerate() {
                    let stop = (pass.done)() || i as u64 >= pass.max;
                    if stop || !(pass.keep)(Waiting::new(content_id(&message), message.clone())) {
                        left.push(message);
                    }
                }
                *queue = left;
                Ok(())
            })
        }
    }

    fn queue() -> Queue {
        Queue(Mutex::new(vec![
            Message::new("a"),
            Message::new("b"),
            Message::new("c"),
        ]))
    }

    fn block_on<T>(future: BoxFuture<'_, T>) -> T {
        // The sweeps here never wait: one poll finishes them.
        let mut future = future;
        let waker = std::task::Waker::noop();
        match future
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
        {
            std::task::Poll::Ready(value) => value,
            std::task::Poll::Pending => panic!("a sweep waited"),
        }
    }

    #[test]
    fn browsing_takes_nothing_and_removing_takes_the_ids() {
        let q = queue();
        let address = Address::from("q");
        let seen = block_on(browse(&q, &address, 2)).expect("browsed");
        assert_eq!(seen.len(), 2);
        assert_eq!(block_on(browse(&q, &address, 10)).map(|s| s.len()), Ok(3));
        let ids = vec![seen[1].id.clone(), "nothing".to_owned()];
        assert_eq!(block_on(remove(&q, &address, &ids)), Ok(1));
        let left = block_on(browse(&q, &address, 10)).expect("browsed");
        assert_eq!(left.len(), 2);
        assert!(left.iter().all(|w| w.id != seen[1].id));
    }

    #[test]
    fn errors_name_the_address() {
        let e = unsupported(&Address::from("/exchanges/x"), "not a queue");
        assert!(e.to_string().contains("/exchanges/x"), "{e}");
        assert!(matches!(failed("gone"), InspectError::Broker(why) if why == "gone"));
    }
}
