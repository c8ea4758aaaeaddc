//! The JSON Schemas of an event's id and envelope, written by hand where
//! their serde forms are: an id is text (`seq` or `seq.sub`), and an
//! envelope's `type` and `data` are those [`EventData`] describes.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::event_data::EventData;
use crate::events::{EventId, SessionEvent};

impl JsonSchema for EventId {
    fn schema_name() -> Cow<'static, str> {
        "EventId".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "An event's id: its entry's seq, and `.sub` for an entry's later events.",
            "type": "string",
            "pattern": "^[0-9]+(\\.[0-9]+)?$",
        })
    }
}

impl JsonSchema for SessionEvent {
    fn schema_name() -> Cow<'static, str> {
        "SessionEvent".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let id = generator.subschema_for::<EventId>();
        let payload = generator.subschema_for::<EventData>();
        json_schema!({
            "description": "One event, in the spec's envelope; its `type` and `data` are one of EventData's.",
            "type": "object",
            "properties": {
                "id": id,
                "ts": {"type": "string", "description": "When its entry was written (RFC 3339, UTC, milliseconds)."},
                "session_id": {"type": "string"},
                "turn_id": {"type": ["string", "null"]},
                "type": {"type": "string"},
                "data": true,
            },
            "required": ["id", "ts", "session_id", "turn_id", "type", "data"],
            "allOf": [payload],
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_envelope_s_schema_refers_to_the_payload_s() {
        let schema = serde_json::to_value(schemars::schema_for!(SessionEvent)).unwrap();
        assert_eq!(schema["required"][0], "id");
        assert!(
            schema["allOf"][0]["$ref"]
                .as_str()
                .unwrap()
                .ends_with("EventData")
        );
        assert!(schema["$defs"]["EventData"]["oneOf"].is_array(), "{schema}");
    }
}
