//! Payload schemas, captured as a function of the payload's type when it is declared.

use std::any::TypeId;
use std::fmt;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value};

/// A payload type and how to make its JSON schema.
#[derive(Clone, Copy)]
pub(crate) struct PayloadSchema {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
    make: fn(&mut SchemaGenerator) -> Schema,
}

impl PayloadSchema {
    pub(crate) fn of<T: JsonSchema + 'static>() -> Self {
        Self {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
            make: |generator| generator.subschema_for::<T>(),
        }
    }
}

impl fmt::Debug for PayloadSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// Makes the schemas of a document's payloads: each payload's schema is a `$ref` into
/// `components.schemas` (or the schema itself, for a type schemars inlines), in JSON
/// Schema draft 07, which AsyncAPI's default schema format extends.
pub(crate) struct Schemas {
    generator: SchemaGenerator,
}

impl Schemas {
    pub(crate) fn new() -> Self {
        let settings = SchemaSettings::draft07().with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        });
        Self {
            generator: settings.into_generator(),
        }
    }

    /// The schema of one payload.
    pub(crate) fn payload(&mut self, payload: &PayloadSchema) -> Value {
        let mut schema = (payload.make)(&mut self.generator);
        let transforms: Vec<_> = self.generator.transforms_mut().collect();
        for transform in transforms {
            transform.transform(&mut schema);
        }
        schema.to_value()
    }

    /// Every named schema referred to, by name.
    pub(crate) fn into_definitions(mut self) -> Map<String, Value> {
        self.generator.take_definitions(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Order {
        id: u64,
        note: Option<String>,
    }

    #[test]
    fn structs_are_referred_to_and_defined_once() {
        let mut schemas = Schemas::new();
        let order = PayloadSchema::of::<Order>();
        assert_eq!(
            schemas.payload(&order),
            serde_json::json!({"$ref": "#/components/schemas/Order"})
        );
        schemas.payload(&order);
        assert_eq!(
            schemas.payload(&PayloadSchema::of::<String>()),
            serde_json::json!({"type": "string"})
        );
        let definitions = schemas.into_definitions();
        assert_eq!(definitions.len(), 1);
        assert_eq!(definitions["Order"]["required"], serde_json::json!(["id"]));
    }
}
