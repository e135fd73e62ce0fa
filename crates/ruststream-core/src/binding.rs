//! Protocol bindings: what a subscription or a publish is in a broker's own terms, for
//! descriptions of a service (AsyncAPI's bindings).

/// One protocol's binding object: its fields as that protocol's AsyncAPI binding names
/// them.
///
/// ```
/// use ruststream_core::{Binding, BindingValue};
///
/// let receive = Binding::new("mqtt", "0.2.0").field("qos", BindingValue::Number(1));
/// assert_eq!(receive.fields, [("qos", BindingValue::Number(1))]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The protocol (`kafka`, `mqtt`, …): the binding's key.
    pub protocol: &'static str,
    /// The version of the protocol's binding schema (`bindingVersion`).
    pub version: &'static str,
    /// The fields, in order.
    pub fields: Vec<(&'static str, BindingValue)>,
}

impl Binding {
    /// A binding of `protocol`, schema `version`, with no field yet.
    pub fn new(protocol: &'static str, version: &'static str) -> Self {
        Self {
            protocol,
            version,
            fields: Vec::new(),
        }
    }

    /// The binding with `name` set to `value`.
    pub fn field(mut self, name: &'static str, value: BindingValue) -> Self {
        self.fields.push((name, value));
        self
    }
}

/// A binding field's value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BindingValue {
    /// A string.
    Text(String),
    /// An integer.
    Number(i64),
    /// A flag.
    Flag(bool),
    /// A field the binding defines as a schema, holding this one string (Kafka's
    /// `groupId`: `{"type": "string", "enum": [value]}`).
    Constant(String),
}

/// The bindings of a mount's subscription: of its channel and of its receive operation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bindings {
    /// The channel's (Kafka: the topic).
    pub channel: Option<Binding>,
    /// The receive operation's (Kafka: the consumer group; MQTT: the QoS).
    pub operation: Option<Binding>,
}
