//! Publishing: how an address maps to a stream, a list or a channel.
//!
//! The kind of an address is resolved explicitly, once per address, and cached:
//!
//! 1. Declared: an explicit [`RedisBroker::route`](crate::RedisBroker::route), else the
//!    form of a subscription opened on it on this broker (stream forms → stream, list
//!    forms → list, Pub/Sub → channel). A declared stream or list is checked against the
//!    key's real type once: a key of the other kind is a
//!    [`PublishErrorKind::BadAddress`] naming the key and both kinds.
//! 2. Else the key's real type (`TYPE`): a stream or a list is published to as such;
//!    a key of another type (a string, a hash) is `BadAddress`.
//! 3. Else the kind marker `{key}:kind` that list and Pub/Sub subscriptions leave when
//!    they start (`list` or `channel`), so that a producer-only service publishes to a
//!    list or channel whose consumers run elsewhere, even while the list is empty.
//! 4. Else a stream (the default): not cached, so the next publish looks again.
//!
//! A `WRONGTYPE` answer (the key changed kind since) forgets the cached kind and is
//! `BadAddress` naming the key and both kinds. A pattern cannot be published to.

use std::sync::Arc;

use fred::clients::Pool;
use fred::interfaces::{ClientLike, ListInterface, PubsubInterface};
use fred::types::{ClusterHash, CustomCommand, Value};
use ruststream_core::{Address, BoxFuture, Message, Publish, PublishError, PublishErrorKind};

use crate::delayed::now_ms;
use crate::keys::Keys;
use crate::options::Trim;
use crate::replicas::{Replicas, Unconfirmed};
use crate::routes::{Routes, Target, kind_of, real_kind};
use crate::{entry, failure, frame};

/// The broker's publisher: shares the broker's pool.
#[derive(Clone)]
pub struct RedisPublisher {
    pub(crate) pool: Pool,
    pub(crate) prefix: Arc<str>,
    pub(crate) routes: Arc<Routes>,
    /// `WAIT` after each stream or list write, if asked.
    pub(crate) replicas: Option<Replicas>,
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
        // With `WAIT`, the write and the wait on one connection: it counts that
        // connection's writes.
        let client = self.pool.next();
        let result = match target {
            Target::Stream(trim) => self.xadd(client, keys.main(), trim, &message).await,
            Target::List => client
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
        let result = match (result, self.replicas, target) {
            (Ok(()), Some(replicas), Target::Stream(_) | Target::List) => {
                match replicas.wait(client, keys.main()).await {
                    Ok(()) => Ok(()),
                    Err(Unconfirmed::Failed(e)) => Err(e),
                    Err(short) => {
                        return Err(PublishError {
                            address: to.to_string(),
                            kind: PublishErrorKind::Refused(short.to_string()),
                            message,
                        });
                    }
                }
            }
            (result, _, _) => result,
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.details().starts_with("WRONGTYPE") => {
                self.routes.forget(&to);
                let real = real_kind(&self.pool, &keys)
                    .await
                    .unwrap_or_else(|_| "another kind".into());
                Err(bad_address(
                    to,
                    message,
                    format!("key {} is a {real}, not a {}", keys.main(), kind_of(target)),
                ))
            }
            Err(e) => Err(PublishError {
                address: to.to_string(),
                kind: failure::publish(&e),
                message,
            }),
        }
    }

    async fn xadd(
        &self,
        client: &fred::clients::Client,
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
        client.custom::<Value, Value>(cmd, args).await.map(drop)
    }

    /// Resolves the target of `to` (see the module docs) and publishes.
    async fn publish_resolved(&self, to: Address, message: Message) -> Result<(), PublishError> {
        let declared = self.routes.declared(&to);
        if let Some(target @ (Target::Channel | Target::Pattern)) = declared {
            if target == Target::Channel {
                self.routes.remember(&to, target);
            }
            return self.publish_as(to, target, message).await;
        }
        let keys = Keys::new(&self.prefix, to.as_str());
        let real = match real_kind(&self.pool, &keys).await {
            Ok(real) => real,
            Err(e) => {
                return Err(PublishError {
                    address: to.to_string(),
                    kind: failure::publish(&e),
                    message,
                });
            }
        };
        let real = real.strip_prefix("marker:").unwrap_or(&real);
        let found = match real {
            "stream" => Some(Target::Stream(None)),
            "list" => Some(Target::List),
            "channel" => Some(Target::Channel),
            "none" => None,
            other => {
                let why = format!(
                    "key {} is a {other}: publishing needs a stream, a list or a channel",
                    keys.main()
                );
                return Err(bad_address(to, message, why));
            }
        };
        // Whether the target is known for good once this publish succeeds.
        let (target, known) = match (declared, found) {
            (Some(target), None) => (target, true),
            (Some(target), Some(found)) if kind_of(target) == kind_of(found) => (target, true),
            (Some(target), Some(found)) => {
                let why = format!(
                    "key {} is a {}, but {to} is routed as a {}",
                    keys.main(),
                    kind_of(found),
                    kind_of(target)
                );
                return Err(bad_address(to, message, why));
            }
            (None, Some(found)) => (found, true),
            // A key that does not exist yet, nobody declared: the default.
            (None, None) => (Target::Stream(None), false),
        };
        let address = known.then(|| to.clone());
        self.publish_as(to, target, message).await?;
        if let Some(address) = address {
            self.routes.remember(&address, target);
        }
        Ok(())
    }
}

fn bad_address(to: Address, message: Message, why: String) -> PublishError {
    PublishError {
        address: to.to_string(),
        kind: PublishErrorKind::BadAddress(why),
        message,
    }
}

impl Publish for RedisPublisher {
    fn publish(&self, to: Address, message: Message) -> BoxFuture<'_, Result<(), PublishError>> {
        match self.routes.resolved(&to) {
            Some(target) => Box::pin(self.publish_as(to, target, message)),
            None => Box::pin(self.publish_resolved(to, message)),
        }
    }
}
