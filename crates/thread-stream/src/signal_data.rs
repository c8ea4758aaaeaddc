//! `SignalData`: a signal's free JSON, shared and written once.
//!
//! Every store, reader and subscriber of a thread clones the entries it
//! hands out, and a signal's data used to be a `serde_json::Value`: a deep
//! copy, one allocation per key and per string, at every clone. The data is
//! now behind an `Arc`, so a clone is a count increment. A record written by
//! its host ([`SignalData::encode`]) is kept as the JSON text it serialises
//! to, made in one pass without a `Value` per key; the tree a reader sees
//! through `Deref` is parsed from that text the first time one asks for it,
//! and [`SignalData::decode`] reads a record straight from the text. Data
//! read from a store, or made from a `Value`, keeps that `Value`.
//!
//! The entry's JSON does not change: the text of an encoded record is what
//! writing the record's `Value` gave (`serde_json` writes a struct's fields
//! in the order its `Value` keeps them), and data read back is a `Value`
//! written as before.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use roundtable_providers::Usage;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

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
#[derive(Clone)]
pub struct SignalData(Arc<Shared>);

struct Shared {
    /// The JSON text of a record encoded by its host, when it was.
    text: Option<Box<RawValue>>,
    /// The data as a tree: given (made from a `Value`, read from a store),
    /// or parsed from `text` when first asked for.
    value: OnceLock<Value>,
}

impl SignalData {
    /// The data of `record`, written as JSON once. Fails only when `record`
    /// cannot be written as JSON (a map with non-string keys, a failing
    /// `Serialize` impl).
    pub fn encode(record: &(impl Serialize + ?Sized)) -> Result<Self, serde_json::Error> {
        Ok(Self(Arc::new(Shared {
            text: Some(serde_json::value::to_raw_value(record)?),
            value: OnceLock::new(),
        })))
    }

    /// [`encode`](Self::encode) for a record that holds a [`Usage`]. Its
    /// costs are written as JavaScript writes numbers (raw JSON text), and
    /// a signal's data used to go through a `Value`, where `serde_json`
    /// wrote them again: the same numbers, a few spelled otherwise
    /// (`0.000001` as `1e-6`, an integer past `u64` with an exponent). A
    /// record with such a cost is written through a
    /// `Value`, so that its entry's JSON stays what it was; any other is
    /// written once, as text.
    pub fn encode_with_usage(
        record: &(impl Serialize + ?Sized),
        usage: &Usage,
    ) -> Result<Self, serde_json::Error> {
        let cost = &usage.cost;
        let costs = [
            cost.input,
            cost.output,
            cost.cache_read,
            cost.cache_write,
            cost.total,
        ];
        if costs.into_iter().all(written_alike) {
            Self::encode(record)
        } else {
            serde_json::to_value(record).map(Self::from)
        }
    }

    /// Reads the data as a `T`: from the encoded text when there is one (no
    /// tree is built), else from the tree.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match (&self.0.text, self.0.value.get()) {
            (_, Some(value)) => T::deserialize(value),
            (Some(text), None) => serde_json::from_str(text.get()),
            (None, None) => T::deserialize(&Value::Null),
        }
    }

    /// The data as a tree, parsed from the encoded text if no reader asked
    /// for it before.
    pub fn value(&self) -> &Value {
        self.0.value.get_or_init(|| match &self.0.text {
            // The text was written by `serde_json` from a value that it
            // could write, so it parses; `Null` is never reached.
            Some(text) => serde_json::from_str(text.get()).unwrap_or(Value::Null),
            None => Value::Null,
        })
    }

    /// The data as an owned tree.
    pub fn into_value(self) -> Value {
        match Arc::try_unwrap(self.0) {
            Ok(Shared { text, value }) => match (value.into_inner(), text) {
                (Some(value), _) => value,
                (None, Some(text)) => serde_json::from_str(text.get()).unwrap_or(Value::Null),
                (None, None) => Value::Null,
            },
            Err(shared) => Self(shared).value().clone(),
        }
    }
}

/// Whether a cost is spelled the same written as JavaScript writes it and
/// written again by `serde_json` from the `Value` it parses to. They differ
/// where JavaScript writes a decimal and `serde_json` an exponent (from
/// `1e-6` up to `1e-5`), and for integers too large for a `u64` (which
/// `serde_json` reads as floats, up to `1e21`, where JavaScript too writes
/// an exponent); `1e16` and more is left to the `Value`, with room to
/// spare. Zero, the common case, is spelled the same.
fn written_alike(cost: f64) -> bool {
    let size = cost.abs();
    !(1e-6..1e-5).contains(&size) && size < 1e16
}

impl From<Value> for SignalData {
    fn from(value: Value) -> Self {
        Self(Arc::new(Shared {
            text: None,
            value: OnceLock::from(value),
        }))
    }
}

impl Default for SignalData {
    fn default() -> Self {
        Value::Null.into()
    }
}

impl Deref for SignalData {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for SignalData {
    fn eq(&self, other: &Self) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        if let (Some(a), Some(b)) = (&self.0.text, &other.0.text)
            && a.get() == b.get()
        {
            return true;
        }
        self.value() == other.value()
    }
}

impl PartialEq<Value> for SignalData {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl fmt::Debug for SignalData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.value(), f)
    }
}

impl Serialize for SignalData {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (&self.0.text, self.0.value.get()) {
            (Some(text), _) => text.serialize(s),
            (None, Some(value)) => value.serialize(s),
            (None, None) => Value::Null.serialize(s),
        }
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
    fn a_record_with_a_usage_writes_what_its_value_wrote() {
        #[derive(Serialize)]
        struct Run {
            run: &'static str,
            usage: Usage,
        }
        let costs = [
            0.0,
            -0.0,
            0.5,
            3.0,
            0.1 + 0.2,
            1.5e-7,
            9.99e-7,
            1e-6,
            5e-6,
            9.999_999_999_999_999e-6,
            1e-5,
            0.000_015,
            123_456.789,
            9_007_199_254_740_993.0,
            1e15 + 0.5,
            1e16,
            2e19,
            1e21,
            1.5e300,
            f64::NAN,
            f64::INFINITY,
        ];
        for cost in costs {
            let mut usage = Usage::default();
            usage.cost.input = cost;
            usage.cost.total = cost;
            let run = Run { run: "r", usage };
            let old = serde_json::to_string(&serde_json::to_value(&run).unwrap()).unwrap();
            let data = SignalData::encode_with_usage(&run, &run.usage).unwrap();
            assert_eq!(serde_json::to_string(&data).unwrap(), old, "{cost}");
            // Where the text is kept, it is exactly the old JSON.
            let text = serde_json::to_string(&SignalData::encode(&run).unwrap()).unwrap();
            if written_alike(cost) {
                assert_eq!(text, old, "{cost}");
            } else if [5e-6, 2e19].contains(&cost) {
                // Why the check: these are spelled otherwise as text.
                assert_ne!(text, old, "{cost}");
            }
        }
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
