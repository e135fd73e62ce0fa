//! Protocol bindings, as the adapters give them, in AsyncAPI's shape.

use ruststream_core::{Binding, BindingValue};
use serde_json::{Map, Value, json};

/// `{"<protocol>": {<fields>…, "bindingVersion": "<version>"}}`.
pub(super) fn binding(binding: &Binding) -> Value {
    let mut fields = Map::new();
    for (name, value) in &binding.fields {
        fields.insert((*name).to_owned(), field(value));
    }
    fields.insert("bindingVersion".to_owned(), json!(binding.version));
    json!({ binding.protocol: fields })
}

fn field(value: &BindingValue) -> Value {
    match value {
        BindingValue::Text(text) => json!(text),
        BindingValue::Number(n) => json!(n),
        BindingValue::Flag(flag) => json!(flag),
        BindingValue::Constant(text) => json!({"type": "string", "enum": [text]}),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use ruststream_core::{Binding, BindingValue};
    use serde_json::json;

    #[test]
    fn a_binding_is_keyed_by_its_protocol_with_its_version() {
        let b = Binding::new("kafka", "0.5.0")
            .field("groupId", BindingValue::Constant("billing".into()))
            .field("clientId", BindingValue::Text("a".into()))
            .field("qos", BindingValue::Number(1))
            .field("retain", BindingValue::Flag(false));
        assert_eq!(
            super::binding(&b),
            json!({"kafka": {
                "groupId": {"type": "string", "enum": ["billing"]},
                "clientId": "a",
                "qos": 1,
                "retain": false,
                "bindingVersion": "0.5.0",
            }})
        );
    }
}
