//! `SignalData`: a signal's free JSON, shared: every store, reader and
//! subscriber clones the entries it hands out, and a clone of the data is a
//! count increment, not a deep copy.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A signal's data: free JSON, shared by every clone of the entry. Reads
/// as a [`serde_json::Value`] (it derefs to one), and is written and read
/// in an entry exactly as that value.
///
/// ```
/// use roundtable_thread_stream::SignalData;
/// use serde_json::json;
///
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct Typing { on: bool }
///
/// let data = SignalData::encode(&Typing { on: true }).unwrap();
/// assert_eq!(data["on"], true);
/// assert_eq!(data, json!({"on": true}));
/// assert_eq!(data.decode::<Typing>().unwrap(), Typing { on: true });
/// assert_eq!(serde_json::to_string(&data).unwrap(), r#"{"on":true}"#);
/// ```
#[derive(Clone, PartialEq, Default)]
pub struct SignalData(Arc<Value>);

impl SignalData {
    /// The data of `record`. Fails only when `record` cannot be written as
    /// JSON (a map with non-string keys, a failing `Serialize` impl).
    pub fn encode(record: &(impl Serialize + ?Sized)) -> Result<Self, serde_json::Error> {
        serde_json::to_value(record).map(Self::from)
    }

    /// Reads the data as a `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&*self.0)
    }

    /// The data as a tree.
    pub fn value(&self) -> &Value {
        &self.0
    }

    /// The data as an owned tree.
    pub fn into_value(self) -> Value {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

impl From<Value> for SignalData {
    fn from(value: Value) -> Self {
        Self(Arc::new(value))
    }
}

impl Deref for SignalData {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0
    }
}

impl PartialEq<Value> for SignalData {
    fn eq(&self, other: &Value) -> bool {
        *self.0 == *other
    }
}

impl fmt::Debug for SignalData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for SignalData {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for SignalData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Record {
        turn: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        tools: Vec<(String, u64)>,
        cost: f64,
        missing: Option<u32>,
    }

    fn record() -> Record {
        Record {
            turn: "turn-1".into(),
            reason: None,
            tools: vec![("read_file".into(), 3), ("grep \"x\"\n".into(), u64::MAX)],
            cost: 0.125,
            missing: None,
        }
    }

    #[test]
    fn an_encoded_record_writes_what_its_value_wrote() {
        let encoded = SignalData::encode(&record()).unwrap();
        let value = serde_json::to_value(record()).unwrap();
        assert_eq!(
            serde_json::to_string(&encoded).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
        assert_eq!(
            serde_json::to_value(&encoded).unwrap(),
            value,
            "a `Value` serialiser reads the text as JSON"
        );
        // Read as a record from the text, and as a tree once asked.
        assert_eq!(encoded.decode::<Record>().unwrap(), record());
        assert_eq!(encoded, value);
        assert_eq!(encoded.decode::<Record>().unwrap(), record());
        assert_eq!(encoded["tools"][1][1], u64::MAX);
        assert_eq!(format!("{encoded:?}"), format!("{value:?}"));
    }

    #[test]
    fn data_from_a_value_or_a_store_stays_that_value() {
        let value = json!({"b": 1, "a": [true, null, "x"]});
        let data = SignalData::from(value.clone());
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            r#"{"b":1,"a":[true,null,"x"]}"#
        );
        let read: SignalData = serde_json::from_str(r#"{ "b" : 1.0e0 , "a":[]}"#).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), r#"{"b":1.0,"a":[]}"#);
        assert_eq!(data.clone().into_value(), value);
        assert_eq!(SignalData::default(), Value::Null);
        assert!(data.decode::<Record>().is_err());
    }

    #[test]
    fn equal_data_is_equal_whatever_it_was_made_from() {
        let encoded = SignalData::encode(&record()).unwrap();
        let again = SignalData::encode(&record()).unwrap();
        let tree = SignalData::from(serde_json::to_value(record()).unwrap());
        assert_eq!(encoded, again);
        assert_eq!(encoded, tree);
        assert_eq!(tree, encoded);
        assert_ne!(encoded, SignalData::from(json!({"turn": "turn-2"})));
        assert_eq!(encoded.clone().into_value(), *tree);
    }
}
