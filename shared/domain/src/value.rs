//! Attribute values of Spine records: the domain's own dynamic value, so the domain
//! does not depend on a JSON library. It serialises to the obvious JSON shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

/// An entity's or signal's attributes, ordered for stable output.
pub type Attributes = BTreeMap<String, Value>;

impl Value {
    /// The text a keyword search matches against.
    pub fn search_text(&self, out: &mut String) {
        match self {
            Self::Null => {}
            Self::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Self::Int(i) => out.push_str(&i.to_string()),
            Self::Float(f) => out.push_str(&f.to_string()),
            Self::Text(s) => out.push_str(s),
            Self::List(items) => {
                for v in items {
                    v.search_text(out);
                    out.push(' ');
                }
            }
            Self::Map(map) => {
                for (k, v) in map {
                    out.push_str(k);
                    out.push(' ');
                    v.search_text(out);
                    out.push(' ');
                }
            }
        }
    }

    /// Nesting depth, used to refuse hostile deeply nested input.
    pub fn depth(&self) -> usize {
        match self {
            Self::List(items) => 1 + items.iter().map(Self::depth).max().unwrap_or(0),
            Self::Map(map) => 1 + map.values().map(Self::depth).max().unwrap_or(0),
            _ => 0,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Self::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}
