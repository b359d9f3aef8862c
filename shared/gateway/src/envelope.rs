//! What `/mcp`'s guard reads of a JSON-RPC message — whether it is one object, its method,
//! whether its params are an object, and a `tools/call`'s tool name — in one pass over
//! the bytes, without building the message as a JSON tree (which the hot path paid for
//! on every call).

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The outline of a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Message {
    /// A JSON object: its `method` when that is a string, and its `params`.
    Object { method: Option<String>, params: Params },
    /// A JSON array (a batch).
    Array,
    /// Any other JSON value.
    Other,
}

/// A message's `params`.
#[derive(Debug, PartialEq, Eq)]
pub enum Params {
    /// Absent or `null`.
    None,
    /// An object, with its `name` when that is a string.
    Object { name: Option<String> },
    /// Anything else (by-position arrays, scalars).
    NotObject,
}

/// Reads the outline of one JSON document; the whole document must be valid JSON.
///
/// # Errors
/// serde_json's error for bytes that are not one JSON value.
pub fn read(bytes: &[u8]) -> Result<Message, serde_json::Error> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        // Members read past are not checked for UTF-8 on their own: bytes that are not
        // UTF-8 get the JSON tree's own error (which always fails on them).
        Err(_) => serde_json::from_slice::<serde_json::Value>(bytes).map(|_| Message::Other),
    }
}

impl<'de> de::Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MessageVisitor)
    }
}

impl<'de> de::Deserialize<'de> for Params {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ParamsVisitor)
    }
}

/// A value kept when it is a string; any other value is read past.
struct MaybeStr(Option<String>);

impl<'de> de::Deserialize<'de> for MaybeStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MaybeStrVisitor)
    }
}

/// Reads past every element or entry, so the document is still checked to its end.
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// The visitor methods for numbers and booleans, which every outline reads as `$other`.
macro_rules! numbers_and_booleans {
    ($other:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
    };
}

struct MessageVisitor;

impl<'de> Visitor<'de> for MessageVisitor {
    type Value = Message;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Message, A::Error> {
        // A repeated member counts once, the last time (as a JSON tree would keep it).
        let (mut method, mut params) = (None, Params::None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "method" => method = map.next_value::<MaybeStr>()?.0,
                "params" => params = map.next_value::<Params>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Message::Object { method, params })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Message, A::Error> {
        skip_seq(seq)?;
        Ok(Message::Array)
    }
    numbers_and_booleans!(Message::Other);
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Message, E> {
        Ok(Message::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Message, E> {
        Ok(Message::Other)
    }
}

struct ParamsVisitor;

impl<'de> Visitor<'de> for ParamsVisitor {
    type Value = Params;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
        let mut name = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "name" {
                name = map.next_value::<MaybeStr>()?.0;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Params::Object { name })
    }
    fn visit_none<E: de::Error>(self) -> Result<Params, E> {
        Ok(Params::None)
    }
    numbers_and_booleans!(Params::NotObject);
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Params, E> {
        Ok(Params::NotObject)
    }
    // `null`: serde_json calls `visit_unit` from `deserialize_any`.
    fn visit_unit<E: de::Error>(self) -> Result<Params, E> {
        Ok(Params::None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Params, A::Error> {
        skip_seq(seq)?;
        Ok(Params::NotObject)
    }
}

struct MaybeStrVisitor;

impl<'de> Visitor<'de> for MaybeStrVisitor {
    type Value = MaybeStr;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    numbers_and_booleans!(MaybeStr(None));
    fn visit_unit<E: de::Error>(self) -> Result<MaybeStr, E> {
        Ok(MaybeStr(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<MaybeStr, A::Error> {
        skip_seq(seq)?;
        Ok(MaybeStr(None))
    }
    // serde_json calls this for every string, borrowed or unescaped into its scratch.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<MaybeStr, E> {
        Ok(MaybeStr(Some(v.to_owned())))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MaybeStr, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(MaybeStr(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The outline as the JSON tree gives it: what the guard read before.
    fn from_tree(v: &Value) -> Message {
        match v {
            Value::Array(_) => Message::Array,
            Value::Object(m) => Message::Object {
                method: m.get("method").and_then(Value::as_str).map(str::to_owned),
                params: match m.get("params") {
                    None | Some(Value::Null) => Params::None,
                    Some(Value::Object(p)) => Params::Object { name: p.get("name").and_then(Value::as_str).map(str::to_owned) },
                    Some(_) => Params::NotObject,
                },
            },
            _ => Message::Other,
        }
    }

    #[test]
    fn reads_what_the_json_tree_reads() {
        let cases = [
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spine.entity.get","arguments":{"type":"a","id":"b","name":7}}}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}),
            json!({"jsonrpc":"2.0","id":1,"method":5,"params":{"name":{"deep":[1,{"a":2}]}}}),
            json!({"method":["a"],"params":{"name":"x\"y\\u00e9"}}),
            json!([{"jsonrpc":"2.0","id":1,"method":"ping"}]),
            json!("a string"),
            json!(42),
            json!(null),
            json!(true),
            json!({}),
        ];
        for v in cases {
            let bytes = serde_json::to_vec(&v).unwrap();
            assert_eq!(read(&bytes).unwrap(), from_tree(&v), "{v}");
        }
    }

    #[test]
    fn a_repeated_member_counts_the_last_time() {
        let got = read(br#"{"method":"ping","params":[],"method":"tools/call","params":{"name":"a"}}"#).unwrap();
        assert_eq!(got, Message::Object { method: Some("tools/call".into()), params: Params::Object { name: Some("a".into()) } });
    }

    #[test]
    fn invalid_json_is_refused_as_the_tree_refuses_it() {
        let not_utf8 = b"{\"method\":\"ping\",\"x\":\"\xff\xfe\"}";
        for bad in [&b"{"[..], b"{\"method\":}", b"[1,", b"{} trailing", b"", b"{\"a\":1,}", b"\"\\x\"", not_utf8] {
            let ours = read(bad).unwrap_err();
            let tree = serde_json::from_slice::<Value>(bad).unwrap_err();
            assert_eq!(ours.to_string(), tree.to_string(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
