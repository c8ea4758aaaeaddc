//! Reading enums tagged inside their object (content blocks by `type`,
//! messages by `role`) without buffering them.
//!
//! serde's derive for an internally tagged enum reads every object into an
//! intermediate tree before it knows which variant it is, and copies each
//! string twice on the way. Roundtable (and pi-ai) write the tag first, so
//! the object is read straight into its variant once the tag is known; an
//! object whose tag comes later is buffered as before, so any key order
//! still reads.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::wire::JsonStr;

/// An enum read from an object tagged by `type`.
pub(crate) trait Tagged: Sized {
    /// The tag's key.
    const TAG: &'static str;
    /// What the enum is, for error messages.
    const EXPECTING: &'static str;
    /// The variant named `tag`, read from the object's other fields.
    fn variant<'de, D: Deserializer<'de>>(tag: &str, fields: D) -> Result<Self, D::Error>;
}

/// Reads a [`Tagged`] enum from an object.
pub(crate) fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_map(TaggedVisitor(PhantomData))
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<JsonStr<'de>>()? else {
            return Err(de::Error::missing_field(T::TAG));
        };
        if *first == *T::TAG {
            let tag = map.next_value::<JsonStr<'de>>()?;
            return T::variant(&tag, de::value::MapAccessDeserializer::new(map));
        }
        // The tag comes later: buffer the fields.
        let mut fields = serde_json::Map::new();
        fields.insert(first.into_owned(), map.next_value()?);
        while let Some(key) = map.next_key::<JsonStr<'de>>()? {
            let value: serde_json::Value = map.next_value()?;
            if fields.insert(key.into_owned(), value).is_some() {
                return Err(de::Error::custom("duplicate field"));
            }
        }
        let tag = match fields.remove(T::TAG) {
            Some(serde_json::Value::String(tag)) => tag,
            Some(_) => {
                return Err(de::Error::custom(format_args!(
                    "`{}` is not a string",
                    T::TAG
                )));
            }
            None => return Err(de::Error::missing_field(T::TAG)),
        };
        T::variant(&tag, serde_json::Value::Object(fields)).map_err(de::Error::custom)
    }
}
