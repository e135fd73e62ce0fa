//! Publishing: how an address maps to a stream, a list or a channel.
//!
//! An address is published to as what it was last declared as on this broker: by a
//! subscription opened on it (stream forms → stream, list forms → list, Pub/Sub →
//! channel), or explicitly with [`RedisBroker::route`](crate::RedisBroker::route), which
//! wins over subscriptions. An address never declared is a stream. A pattern cannot be
//! published to.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use fred::clients::Pool;
use fred::interfaces::{ClientLike, ListInterface, PubsubInterface};
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::delayed::now_ms;
use crate::keys::Keys;
use crate::options::Trim;
use crate::{entry, failure, frame};

/// What an address is when publishing to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// A stream: `XADD` with fields `_payload` and `h:<name>`, trimmed if asked.
    Stream(Option<Trim>),
    /// A list: `LPUSH` of a frame (consumers take from the right).
    List,
    /// A Pub/Sub channel: `PUBLISH` of a frame.
    Channel,
    /// A pattern subscription's address: publishing to it is refused.
    Pattern,
}

/// How addresses map to targets: explicit routes win over subscriptions' forms.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    explicit: RwLock<HashMap<Address, Target>>,
    subscribed: RwLock<HashMap<Address, Target>>,
}

impl Routes {
    pub(crate) fn route(&self, address: Address, target: Target) {
        if let Ok(mut map) = self.explicit.write() {
            map.insert(address, target);
        }
    }

    pub(crate) fn subscribed(&self, address: Address, target: Target) {
        if let Ok(mut map) = self.subscribed.write() {
            map.insert(address, target);
        }
    }

    pub(crate) fn target(&self, address: &Address) -> Target {
        let lookup = |map: &RwLock<HashMap<Address, Target>>| {
            map.read().ok().and_then(|m| m.get(address).copied())
        };
        lookup(&self.explicit)
            .or_else(|| lookup(&self.subscribed))
            .unwrap_or(Target::Stream(None))
    }
}

/// The broker's publisher: shares the broker's pool.
#[derive(Clone)]
pub struct RedisPublisher {
    pub(crate) pool: Pool,
    pub(crate) prefix: Arc<str>,
    pub(crate) routes: Arc<Routes>,
}

impl std::fmt::Debug for RedisPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPublisher")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisPublisher {
    /// Publishes `message` to `to` as `target`, whatever the address is declared as.
    pub async fn publish_as(
        &self,
        to: Address,
        target: Target,
        message: Message,
    ) -> Result<(), PublishError> {
        let keys = Keys::new(&self.prefix, to.as_str());
        let result = match target {
            Target::Stream(trim) => self.xadd(keys.main(), trim, &message).await,
            Target::List => self
                .pool
                .lpush::<Value, _, _>(keys.main(), Value::Bytes(frame::encode(&message)))
                .await
                .map(drop),
            Target::Channel => self
                .pool
                .next()
                .publish::<Value, _, _>(keys.main(), Value::Bytes(frame::encode(&message)))
                .await
                .map(drop),
            Target::Pattern => {
                return Err(PublishError {
                    address: to.to_string(),
                    kind: PublishErrorKind::BadAddress(
                        "a pattern cannot be published to: declare a retry address".into(),
                    ),
                    message,
                });
            }
        };
        result.map_err(|e| PublishError {
            address: to.to_string(),
            kind: failure::publish(&e),
            message,
        })
    }

    async fn xadd(
        &self,
        key: &str,
        trim: Option<Trim>,
        message: &Message,
    ) -> Result<(), fred::error::Error> {
        let fields = entry::fields(message);
        let mut args = Vec::with_capacity(5 + fields.len());
        args.push(Value::from(key));
        match trim {
            Some(Trim::MaxLen(n)) => {
                args.extend([
                    Value::from_static_str("MAXLEN"),
                    Value::from_static_str("~"),
                ]);
                args.push(Value::from(n.to_string()));
            }
            Some(Trim::MaxAge(age)) => {
                let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
                args.extend([Value::from_static_str("MINID"), Value::from_static_str("~")]);
                args.push(Value::from(now_ms().saturating_sub(age).to_string()));
            }
            None => {}
        }
        args.push(Value::from_static_str("*"));
        args.extend(fields);
        let cmd = CustomCommand::new_static("XADD", ClusterHash::FirstKey, false);
        self.pool.custom::<Value, Value>(cmd, args).await.map(drop)
    }
}

impl Publish for RedisPublisher {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        let target = self.routes.target(&to);
        Box::pin(self.publish_as(to, target, message))
    }
}
