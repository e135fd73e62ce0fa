//! How addresses map to targets when publishing: declared routes, what was resolved,
//! and the key's real kind (see [`publisher`](crate::publisher) for the order).

use std::collections::HashMap;
use std::sync::RwLock;

use fred::clients::Pool;
use fred::interfaces::{KeysInterface, LuaInterface};
use fred::types::{Key, Value};
use ruststream_core::Address;

use crate::keys::Keys;
use crate::options::Trim;

/// What an address is when publishing to it: declared with
/// [`RedisBroker::route`](crate::RedisBroker::route) or picked for one message with
/// [`RedisPublisher::publish_as`](crate::RedisPublisher::publish_as); otherwise resolved from subscriptions, the key's type
/// and its kind marker (see the crate docs, "Publishing").
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use ruststream_redis::{RedisBroker, Target};
///
/// let broker = RedisBroker::connect("redis://127.0.0.1:6379").await?;
/// // Dead letters go to a list a reliable-list service reads later.
/// broker.route("orders.dead", Target::List);
/// # Ok(()) }
/// ```
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

/// How addresses map to targets: explicit routes win over subscriptions' forms; what was
/// resolved is cached.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    explicit: RwLock<HashMap<Address, Target>>,
    subscribed: RwLock<HashMap<Address, Target>>,
    resolved: RwLock<HashMap<Address, Target>>,
}

impl Routes {
    pub(crate) fn route(&self, address: Address, target: Target) {
        self.forget(&address);
        if let Ok(mut map) = self.explicit.write() {
            map.insert(address, target);
        }
    }

    pub(crate) fn subscribed(&self, address: Address, target: Target) {
        self.forget(&address);
        if let Ok(mut map) = self.subscribed.write() {
            map.insert(address, target);
        }
    }

    pub(crate) fn declared(&self, address: &Address) -> Option<Target> {
        let lookup = |map: &RwLock<HashMap<Address, Target>>| {
            map.read().ok().and_then(|m| m.get(address).copied())
        };
        lookup(&self.explicit).or_else(|| lookup(&self.subscribed))
    }

    pub(crate) fn resolved(&self, address: &Address) -> Option<Target> {
        self.resolved
            .read()
            .ok()
            .and_then(|m| m.get(address).copied())
    }

    pub(crate) fn remember(&self, address: &Address, target: Target) {
        if let Ok(mut map) = self.resolved.write() {
            map.insert(address.clone(), target);
        }
    }

    pub(crate) fn forget(&self, address: &Address) {
        if let Ok(mut map) = self.resolved.write() {
            map.remove(address);
        }
    }
}

/// A key's kind: its `TYPE`, else `marker:<kind>` from `{key}:kind`, else `none`.
const RESOLVE: &str = r"
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t['ok'] end
if t ~= 'none' then return t end
local m = redis.call('GET', KEYS[2])
if m then return 'marker:' .. m end
return 'none'
";

/// Leaves the kind marker of a list or channel subscription's address. Best effort: a
/// server that refuses the write (an ACL user without write access to the marker key)
/// is logged and the subscription goes on; publishers then need a declared route.
pub(crate) async fn mark(pool: &Pool, keys: &Keys, kind: &'static str) {
    let key = keys.kind();
    if let Err(error) = pool
        .set::<Value, _, _>(key.as_str(), kind, None, None, false)
        .await
    {
        tracing::warn!(%error, key, "redis kind marker not written");
    }
}

/// What a target is called in errors.
pub(crate) fn kind_of(target: Target) -> &'static str {
    match target {
        Target::Stream(_) => "stream",
        Target::List => "list",
        Target::Channel => "channel",
        Target::Pattern => "pattern",
    }
}

/// The kind of the key of `keys`, as [`RESOLVE`] says.
pub(crate) async fn real_kind(pool: &Pool, keys: &Keys) -> Result<String, fred::error::Error> {
    let script_keys = vec![Key::from(keys.main()), Key::from(keys.kind())];
    let kind: Value = pool
        .next()
        .eval(RESOLVE, script_keys, Vec::<Value>::new())
        .await?;
    Ok(kind.as_string().unwrap_or_else(|| "none".into()))
}
