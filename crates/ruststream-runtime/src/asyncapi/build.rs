//! The document, built from an app's mounts and declared publish targets.

use std::any::TypeId;

use ruststream_core::{Bindings, Capabilities, SubscribeSpec};
use serde_json::{Map, Value, json};

use super::{AsyncApiError, AsyncApiInfo, headers, server};
use crate::App;
use crate::mount::{Concurrency, Mount};
use crate::policy::Policy;
use crate::schema::{PayloadSchema, Schemas};
use crate::target::PublishTarget;

pub(super) fn document(app: &App, info: &AsyncApiInfo) -> Result<Value, AsyncApiError> {
    let mut builder = Builder::new(app);
    for (mount, endpoint) in &app.router.routes {
        builder.mount(mount, endpoint.payload_type(), endpoint.reply_type())?;
    }
    for target in &app.targets {
        builder.target(target);
    }
    let version = if info.version.is_empty() {
        "0.0.0"
    } else {
        &info.version
    };
    let mut info_object = json!({
        "title": info.title.as_deref().unwrap_or(&app.name),
        "version": version,
        "x-ruststream-service": app.name,
        "x-ruststream-broker": app.broker.name(),
    });
    if let Some(description) = &info.description {
        info_object["description"] = json!(description);
    }
    let mut document = json!({
        "asyncapi": "3.0.0",
        "info": info_object,
        "defaultContentType": crate::codec::Codec::default().content_type(),
    });
    if let Some(described) = &info.server {
        document["servers"] = json!({ "broker": server::server(described) });
    }
    document["channels"] = Value::Object(builder.channels);
    document["operations"] = Value::Object(builder.operations);
    let mut components = json!({ "messages": builder.messages });
    let schemas = builder.schemas.into_definitions();
    if !schemas.is_empty() {
        components["schemas"] = Value::Object(schemas);
    }
    document["components"] = components;
    Ok(document)
}

struct Builder<'a> {
    app: &'a App,
    schemas: Schemas,
    channels: Map<String, Value>,
    messages: Map<String, Value>,
    operations: Map<String, Value>,
}

impl<'a> Builder<'a> {
    fn new(app: &'a App) -> Self {
        Self {
            app,
            schemas: Schemas::new(),
            channels: Map::new(),
            messages: Map::new(),
            operations: Map::new(),
        }
    }

    fn mount(
        &mut self,
        mount: &Mount,
        handled: Option<(TypeId, &'static str)>,
        replied: Option<(TypeId, &'static str)>,
    ) -> Result<(), AsyncApiError> {
        let address = mount.address.as_str();
        let payload = match (&mount.payload, handled) {
            (Some(documented), Some((id, _))) if documented.id == id => Some(*documented),
            (Some(documented), handled) => {
                return Err(AsyncApiError::Payload {
                    address: address.to_owned(),
                    documented: documented.name,
                    handled: handled.map_or("no payload", |(_, name)| name),
                });
            }
            (None, _) => None,
        };
        let reply = match (&mount.reply, replied) {
            (Some(documented), Some((id, _))) if documented.id == id => Some(*documented),
            (Some(documented), replied) => {
                return Err(AsyncApiError::Reply {
                    address: address.to_owned(),
                    documented: documented.name,
                    handled: replied.map_or("no reply", |(_, name)| name),
                });
            }
            (None, _) => None,
        };
        let content_type = mount.codec.content_type();
        let payload_type = handled.map(|(_, name)| name);
        let channel = self.channel(address, "subscription");

        let received = self.message(
            &channel,
            Message {
                summary: format!("A message on {address}, as the mount handles it."),
                payload: payload.as_ref(),
                payload_type,
                content_type,
                headers: headers::message(),
            },
        );
        let received_ref = self.attach(&channel, &received);
        let mut receive = json!({
            "action": "receive",
            "channel": channel_ref(&channel),
            "messages": [received_ref],
            "summary": format!("Handles the messages on {address}."),
            "x-ruststream-declaration": declaration(mount),
            "x-ruststream-mount": settings(mount, payload_type),
            "x-ruststream-form": self.form(mount),
        });
        if payload.is_none() && payload_type.is_some() {
            receive["description"] = json!(
                "The payload's schema is not documented: declare it with `Mount::payload::<T>()`."
            );
        }
        let bindings = self.app.broker.bindings(&spec(mount));
        self.bind(&channel, &mut receive, bindings);
        let receive_id = self.operation(&format!("receive.{channel}"), receive);

        // Retry copies: the delivery as it arrived, its retry count one higher.
        let retry_address = mount.retry_address().as_str();
        let retry_channel = self.channel(retry_address, "retry");
        let retry_ref = self.attach(&retry_channel, &received);
        self.send(
            retry_address,
            &retry_channel,
            &format!("retry.{channel}"),
            json!({
                "action": "send",
                "channel": channel_ref(&retry_channel),
                "messages": [retry_ref],
                "summary": format!("Retry copies of the messages handled on {address}."),
                "description": "Made by the runtime where the broker does not redeliver by itself \
                    (see the facts in `x-ruststream-form` of the receive operation): the message as \
                    it arrived, `x-ruststream-retry-count` one higher, published before the original \
                    is removed.",
            }),
        );

        if let Some(dead) = &mount.declaration.dead_letter {
            let dead_channel = self.channel(dead.as_str(), "dead-letter");
            let spent = self.message(
                &format!("{channel}.dead-letter"),
                Message {
                    summary: format!(
                        "A message spent on {address}, as it arrived, with the dead-letter headers."
                    ),
                    payload: payload.as_ref(),
                    payload_type,
                    content_type,
                    headers: headers::dead_letter(),
                },
            );
            let spent_ref = self.attach(&dead_channel, &spent);
            self.send(
                dead.as_str(),
                &dead_channel,
                &format!("dead-letter.{channel}"),
                json!({
                    "action": "send",
                    "channel": channel_ref(&dead_channel),
                    "messages": [spent_ref],
                    "summary": format!("The dead letter of {address}."),
                    "description": "Reached by a retry at the cap (`max_attempts`), or by any retry when \
                        no cap is declared; not by `drop`. Where the broker dead-letters by itself, the \
                        broker moves the message, not the service.",
                }),
            );
        }

        if replied.is_some() || mount.reply_to.is_some() {
            let reply_channel = match &mount.reply_to {
                Some(reply_to) => self.channel(reply_to.as_str(), "reply"),
                None => self.dynamic_channel(&format!("{channel}.replies"), "reply"),
            };
            let reply_message = self.message(
                &format!("{channel}.reply"),
                Message {
                    summary: format!("A reply to a request on {address}."),
                    payload: reply.as_ref(),
                    payload_type: replied.map(|(_, name)| name),
                    content_type,
                    headers: headers::message(),
                },
            );
            let reply_ref = self.attach(&reply_channel, &reply_message);
            if let Some(receive) = self.operations.get_mut(&receive_id) {
                receive["reply"] = json!({
                    "address": {
                        "location": format!("$message.header#/{}", ruststream_core::REPLY_TO),
                        "description": match &mount.reply_to {
                            Some(to) => format!("The request's reply-to header, else {}.", to.as_str()),
                            None => "The request's reply-to header.".to_owned(),
                        },
                    },
                    "channel": channel_ref(&reply_channel),
                    "messages": [reply_ref.clone()],
                });
                if reply.is_none() && replied.is_some() {
                    receive["x-ruststream-reply"] = json!(
                        "The reply's schema is not documented: declare it with `Mount::reply::<T>()`."
                    );
                }
            }
            if let Some(reply_to) = &mount.reply_to {
                self.send(
                    reply_to.as_str(),
                    &reply_channel,
                    &format!("reply.{channel}"),
                    json!({
                        "action": "send",
                        "channel": channel_ref(&reply_channel),
                        "messages": [reply_ref],
                        "summary": format!(
                            "Replies to requests on {address} that carry no reply-to, sent to {}.",
                            reply_to.as_str()
                        ),
                    }),
                );
            }
        }
        Ok(())
    }

    fn target(&mut self, target: &PublishTarget) {
        let address = target.address.as_str();
        let channel = self.channel(address, "publish");
        let message = self.message(
            &format!("{channel}.published"),
            Message {
                summary: format!("A message the service publishes to {address}."),
                payload: target.payload.as_ref(),
                payload_type: target.payload.as_ref().map(|p| p.name),
                content_type: crate::codec::Codec::default().content_type(),
                headers: headers::message(),
            },
        );
        let message_ref = self.attach(&channel, &message);
        let mut operation = json!({
            "action": "send",
            "channel": channel_ref(&channel),
            "messages": [message_ref],
            "summary": format!("Publishes to {address}."),
        });
        if let Some(description) = &target.description {
            operation["description"] = json!(description);
        }
        self.send(address, &channel, &format!("send.{channel}"), operation);
    }

    /// Adds the send operation `name` to `address`'s channel, with the broker's
    /// bindings of a publish there.
    fn send(&mut self, address: &str, channel: &str, name: &str, mut operation: Value) {
        let bindings = self
            .app
            .broker
            .publish_bindings(&ruststream_core::Address::new(address));
        self.bind(channel, &mut operation, bindings);
        self.operation(name, operation);
    }

    /// Puts `bindings` on `operation` and on the channel `channel` (once per channel).
    fn bind(&mut self, channel: &str, operation: &mut Value, bindings: Bindings) {
        if let Some(binding) = &bindings.operation {
            operation["bindings"] = super::bindings::binding(binding);
        }
        if let (Some(binding), Some(object)) = (&bindings.channel, self.channels.get_mut(channel))
            && object.get("bindings").is_none()
        {
            object["bindings"] = super::bindings::binding(binding);
        }
    }

    /// The id of the channel of `address`, made on first use; `role` is added to its
    /// `x-ruststream-roles`.
    fn channel(&mut self, address: &str, role: &str) -> String {
        let found = self
            .channels
            .iter_mut()
            .find(|(_, channel)| channel["address"] == address);
        if let Some((id, channel)) = found {
            if let Some(roles) = channel["x-ruststream-roles"].as_array_mut()
                && !roles.iter().any(|r| r == role)
            {
                roles.push(json!(role));
            }
            return id.clone();
        }
        let id = unique(&self.channels, &identifier(address));
        self.channels.insert(
            id.clone(),
            json!({
                "address": address,
                "messages": {},
                "x-ruststream-roles": [role],
            }),
        );
        id
    }

    /// The id of a channel whose address each message names at run time (a request's
    /// reply-to): its `address` is null, as AsyncAPI has it for such channels.
    fn dynamic_channel(&mut self, name: &str, role: &str) -> String {
        let id = unique(&self.channels, &identifier(name));
        self.channels.insert(
            id.clone(),
            json!({
                "address": null,
                "description": "The address each request names in its reply-to header.",
                "messages": {},
                "x-ruststream-roles": [role],
            }),
        );
        id
    }

    /// Adds a message to the components under a name made from `name`; its id.
    fn message(&mut self, name: &str, message: Message<'_>) -> String {
        let id = unique(&self.messages, &identifier(name));
        let mut object = json!({
            "name": id,
            "summary": message.summary,
            "contentType": message.content_type,
            "headers": message.headers,
            "correlationId": headers::correlation_id(),
        });
        if let Some(payload) = message.payload {
            object["payload"] = self.schemas.payload(payload);
        }
        if let Some(name) = message.payload_type {
            object["x-ruststream-payload-type"] = json!(name);
        }
        self.messages.insert(id.clone(), object);
        id
    }

    /// Lists component message `id` in channel `channel`; the reference to it there.
    fn attach(&mut self, channel: &str, id: &str) -> Value {
        if let Some(messages) = self.channels[channel]["messages"].as_object_mut() {
            messages.insert(
                id.to_owned(),
                json!({ "$ref": format!("#/components/messages/{id}") }),
            );
        }
        json!({ "$ref": format!("#/channels/{channel}/messages/{id}") })
    }

    /// Adds an operation under a name made from `name`; its id.
    fn operation(&mut self, name: &str, operation: Value) -> String {
        let id = unique(&self.operations, &identifier(name));
        self.operations.insert(id.clone(), operation);
        id
    }

    /// The broker, the mount's adapter options and the form's facts where the adapter
    /// can tell them without subscribing.
    fn form(&self, mount: &Mount) -> Value {
        let spec = spec(mount);
        let mut form = json!({
            "broker": self.app.broker.name(),
            "options": mount.options.names().collect::<Vec<_>>(),
        });
        match self.app.broker.facts(&spec) {
            Some(facts) => form["facts"] = capabilities(&facts),
            None => {
                form["factsFoundOut"] = json!("at subscribe, from the broker");
            }
        }
        form
    }
}

struct Message<'a> {
    summary: String,
    payload: Option<&'a PayloadSchema>,
    payload_type: Option<&'static str>,
    content_type: &'static str,
    headers: Value,
}

/// What a subscription of `mount` would ask of the broker.
fn spec(mount: &Mount) -> SubscribeSpec {
    SubscribeSpec {
        address: mount.address.clone(),
        declaration: mount.declaration.clone(),
        in_flight: mount.concurrency.in_flight(),
        options: mount.options.clone(),
        drain: Default::default(),
    }
}

fn channel_ref(id: &str) -> Value {
    json!({ "$ref": format!("#/channels/{id}") })
}

fn declaration(mount: &Mount) -> Value {
    let declared = &mount.declaration;
    let mut value = json!({ "retryTo": mount.retry_address().as_str() });
    if let Some(n) = declared.max_attempts {
        value["maxAttempts"] = json!(n.get());
    }
    if let Some(dead) = &declared.dead_letter {
        value["deadLetter"] = json!(dead.as_str());
    }
    value
}

fn settings(mount: &Mount, payload_type: Option<&str>) -> Value {
    let concurrency = match &mount.concurrency {
        Concurrency::Sequential => json!("sequential"),
        Concurrency::Workers(n) => json!({ "workers": n }),
        Concurrency::Lanes { lanes, .. } => json!({ "lanes": lanes }),
    };
    let mut value = json!({
        "codec": mount.codec.content_type(),
        "concurrency": concurrency,
        "onDecodeError": policy(mount.on_decode_error),
        "onPanic": policy(mount.on_panic),
        "onTimeout": policy(mount.on_timeout),
    });
    if let Some(limit) = mount.timeout {
        value["timeoutMs"] = json!(millis(limit));
    }
    if let Some(reply_to) = &mount.reply_to {
        value["replyTo"] = json!(reply_to.as_str());
    }
    if mount.allow_reply_to.is_some() {
        value["replyToFiltered"] = json!(true);
    }
    if let Some(name) = payload_type {
        value["payloadType"] = json!(name);
    }
    value
}

fn policy(policy: Policy) -> Value {
    match policy {
        Policy::FailFast => json!("fail_fast"),
        Policy::Skip => json!("skip"),
        Policy::Drop => json!("drop"),
        Policy::Retry => json!("retry"),
        Policy::RetryAfter(delay) => json!({ "retry_after_ms": millis(delay) }),
    }
}

fn capabilities(facts: &Capabilities) -> Value {
    let mut value = json!({
        "settles": facts.settles,
        "requeues": facts.requeues,
        "counts": facts.counts,
        "delays": facts.delays.is_some(),
        "deadLettersItself": facts.dead_letters,
    });
    if let Some(max) = facts.max_delay() {
        value["maxDelayMs"] = json!(millis(max));
    }
    value
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `text` with every character AsyncAPI does not allow in a key (`[A-Za-z0-9_.-]`)
/// replaced by `_`, leading and trailing ones trimmed.
fn identifier(text: &str) -> String {
    let replaced: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = replaced.trim_matches('_');
    if trimmed.is_empty() {
        "channel".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `name`, or `name-2`, `name-3`… where it is taken.
fn unique(taken: &Map<String, Value>, name: &str) -> String {
    if !taken.contains_key(name) {
        return name.to_owned();
    }
    (2..)
        .map(|n| format!("{name}-{n}"))
        .find(|candidate| !taken.contains_key(candidate))
        .unwrap_or_else(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::{identifier, unique};
    use serde_json::{Map, json};

    #[test]
    fn identifiers_keep_only_what_asyncapi_allows() {
        assert_eq!(identifier("/queues/orders"), "queues_orders");
        assert_eq!(identifier("orders.dead"), "orders.dead");
        assert_eq!(identifier("a b*"), "a_b");
        assert_eq!(identifier("///"), "channel");
        let mut taken = Map::new();
        taken.insert("a".into(), json!(1));
        taken.insert("a-2".into(), json!(1));
        assert_eq!(unique(&taken, "a"), "a-3");
        assert_eq!(unique(&taken, "b"), "b");
    }
}
