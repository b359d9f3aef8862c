//! Editing one server entry in a client's configuration file and nothing else: JSON (with
//! the comments, trailing commas and layout the file has, through `jsonc-parser`'s CST)
//! and TOML (through `toml_edit`). Every other key, comment and blank line stays.

use anyhow::{Context as _, anyhow, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::Value;

use super::clients::{ENTRY_NAME, Entry, Format};

/// The entry of ours `text` holds under `container`, if any.
///
/// # Errors
/// When the file is not valid in its format.
pub fn read_entry(format: Format, text: &str, container: &str) -> anyhow::Result<Option<Value>> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let doc = match format {
        Format::Json => {
            jsonc_parser::parse_to_serde_value::<Value>(text, &ParseOptions::default()).map_err(|e| anyhow!("{e}"))?
        }
        Format::Toml => {
            let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| anyhow!("{}", e.message()))?;
            item_json(doc.as_item())
        }
    };
    if !doc.is_object() {
        bail!("its top level is not an object");
    }
    Ok(doc.get(container).and_then(|c| c.get(ENTRY_NAME)).cloned())
}

/// `text` (or a new file when `None`) with our entry under `container` set to `entry`.
/// Returns the new text and whether the container was created.
///
/// # Errors
/// When the file is not valid, or `container` holds something other than a table.
pub fn upsert(format: Format, text: Option<&str>, container: &str, entry: &Entry) -> anyhow::Result<(String, bool)> {
    match format {
        Format::Json => upsert_json(text, container, entry),
        Format::Toml => upsert_toml(text, container, entry),
    }
}

/// `text` without our entry; the container goes too when it is left empty and
/// `drop_empty` (setup created it).
///
/// # Errors
/// When the file is not valid.
pub fn remove(format: Format, text: &str, container: &str, drop_empty: bool) -> anyhow::Result<String> {
    match format {
        Format::Json => {
            let root = parse_json(text)?;
            let Some(obj) = root.object_value() else { return Ok(text.to_owned()) };
            if let Some(servers) = obj.object_value(container) {
                if let Some(p) = servers.get(ENTRY_NAME) {
                    p.remove();
                }
                if drop_empty
                    && servers.properties().is_empty()
                    && let Some(p) = obj.get(container)
                {
                    p.remove();
                }
            }
            Ok(root.to_string())
        }
        Format::Toml => {
            let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| anyhow!("{}", e.message()))?;
            let empty = match doc.get_mut(container).and_then(toml_edit::Item::as_table_like_mut) {
                Some(t) => {
                    t.remove(ENTRY_NAME);
                    t.is_empty()
                }
                None => false,
            };
            if drop_empty && empty {
                doc.remove(container);
            }
            Ok(doc.to_string())
        }
    }
}

/// Whether a file holds nothing but an empty top level (`{}`), so a file setup created
/// can be deleted again.
pub fn is_empty_document(format: Format, text: &str) -> bool {
    match format {
        Format::Json => jsonc_parser::parse_to_serde_value::<Value>(text, &ParseOptions::default())
            .is_ok_and(|v| v.as_object().is_some_and(serde_json::Map::is_empty)),
        Format::Toml => text.parse::<toml_edit::DocumentMut>().is_ok_and(|d| d.is_empty()) && text.trim().is_empty(),
    }
}

fn parse_json(text: &str) -> anyhow::Result<CstRootNode> {
    CstRootNode::parse(text, &ParseOptions::default()).map_err(|e| anyhow!("{e}"))
}

fn upsert_json(text: Option<&str>, container: &str, entry: &Entry) -> anyhow::Result<(String, bool)> {
    let blank = text.is_none_or(|t| t.trim().is_empty());
    let root = parse_json(if blank { "{}\n" } else { text.unwrap_or_default() })?;
    let obj = root.object_value().context("its top level is not an object")?;
    let created = obj.get(container).is_none();
    if let Some(existing) = obj.get(container)
        && existing.object_value().is_none()
    {
        bail!("\"{container}\" is not an object");
    }
    let servers = obj.object_value_or_set(container);
    let value = CstInputValue::Object(entry.iter().map(|(k, v)| (k.clone(), cst_value(v))).collect());
    match servers.get(ENTRY_NAME) {
        Some(p) => p.set_value(value),
        None => {
            servers.append(ENTRY_NAME, value);
        }
    }
    servers.ensure_multiline();
    Ok((root.to_string(), created))
}

fn cst_value(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(cst_value).collect()),
        Value::Object(o) => CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), cst_value(v))).collect()),
    }
}

fn upsert_toml(text: Option<&str>, container: &str, entry: &Entry) -> anyhow::Result<(String, bool)> {
    let mut doc: toml_edit::DocumentMut =
        text.unwrap_or_default().parse().map_err(|e: toml_edit::TomlError| anyhow!("{}", e.message()))?;
    let created = !doc.contains_key(container);
    if created {
        let mut t = toml_edit::Table::new();
        // `[mcp_servers.continuity]` alone, without an empty `[mcp_servers]` above it.
        t.set_implicit(true);
        doc.insert(container, toml_edit::Item::Table(t));
    }
    let servers = doc
        .get_mut(container)
        .and_then(toml_edit::Item::as_table_like_mut)
        .ok_or_else(|| anyhow!("\"{container}\" is not a table"))?;
    let mut table = toml_edit::Table::new();
    for (k, v) in entry {
        table.insert(k, toml_edit::Item::Value(toml_value(v)));
    }
    servers.insert(ENTRY_NAME, toml_edit::Item::Table(table));
    Ok((doc.to_string(), created))
}

fn toml_value(v: &Value) -> toml_edit::Value {
    match v {
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n.as_i64().map_or_else(|| n.as_f64().unwrap_or_default().into(), Into::into),
        Value::Array(a) => a.iter().map(toml_value).collect::<toml_edit::Array>().into(),
        Value::Object(o) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in o {
                t.insert(k, toml_value(v));
            }
            toml_edit::Value::InlineTable(t)
        }
        Value::String(s) => s.as_str().into(),
        Value::Null => "".into(),
    }
}

fn item_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::None => Value::Null,
        toml_edit::Item::Value(v) => value_json(v),
        toml_edit::Item::Table(t) => Value::Object(t.iter().map(|(k, v)| (k.to_owned(), item_json(v))).collect()),
        toml_edit::Item::ArrayOfTables(a) => {
            Value::Array(a.iter().map(|t| Value::Object(t.iter().map(|(k, v)| (k.to_owned(), item_json(v))).collect())).collect())
        }
    }
}

fn value_json(v: &toml_edit::Value) -> Value {
    match v {
        toml_edit::Value::String(s) => Value::String(s.value().clone()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => Value::from(*f.value()),
        toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => Value::String(d.value().to_string()),
        toml_edit::Value::Array(a) => Value::Array(a.iter().map(value_json).collect()),
        toml_edit::Value::InlineTable(t) => Value::Object(t.iter().map(|(k, v)| (k.to_owned(), value_json(v))).collect()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry() -> Entry {
        vec![("url".into(), json!("http://127.0.0.1:8787/mcp")), ("headers".into(), json!({"Authorization": "Bearer k"}))]
    }

    #[test]
    fn json_with_comments_keeps_everything_else_and_removes_cleanly() {
        let original = "{\n  // my theme\n  \"theme\": \"One Dark\",\n  \"context_servers\": {\n    \"other\": {\"command\": \"x\"},\n  },\n}\n";
        let (with, created) = upsert(Format::Json, Some(original), "context_servers", &entry()).unwrap();
        assert!(!created);
        assert!(with.contains("// my theme") && with.contains("\"other\""), "{with}");
        assert_eq!(read_entry(Format::Json, &with, "context_servers").unwrap().unwrap()["url"], "http://127.0.0.1:8787/mcp");
        // Setting it again is a no-op.
        assert_eq!(upsert(Format::Json, Some(&with), "context_servers", &entry()).unwrap().0, with);
        assert_eq!(remove(Format::Json, &with, "context_servers", false).unwrap(), original);
    }

    #[test]
    fn a_new_container_goes_again_on_remove() {
        let original = "{\n  \"preferences\": {\n    \"x\": 1\n  }\n}\n";
        let (with, created) = upsert(Format::Json, Some(original), "mcpServers", &entry()).unwrap();
        assert!(created);
        assert_eq!(remove(Format::Json, &with, "mcpServers", true).unwrap(), original);
        let (new, _) = upsert(Format::Json, None, "mcpServers", &entry()).unwrap();
        assert!(is_empty_document(Format::Json, &remove(Format::Json, &new, "mcpServers", true).unwrap()));
    }

    #[test]
    fn bad_files_are_refused_not_overwritten() {
        assert!(upsert(Format::Json, Some("{ \"a\": "), "mcpServers", &entry()).is_err());
        assert!(upsert(Format::Json, Some("[1]"), "mcpServers", &entry()).is_err());
        assert!(upsert(Format::Json, Some("{\"mcpServers\": 3}"), "mcpServers", &entry()).is_err());
        assert!(upsert(Format::Toml, Some("mcp_servers = 3\n"), "mcp_servers", &entry()).is_err());
        assert!(upsert(Format::Toml, Some("a = = 1"), "mcp_servers", &entry()).is_err());
    }

    #[test]
    fn toml_keeps_the_rest_and_round_trips() {
        let original = "# Codex\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
        let (with, created) = upsert(Format::Toml, Some(original), "mcp_servers", &entry()).unwrap();
        assert!(!created);
        assert!(with.contains("[mcp_servers.continuity]"), "{with}");
        let read = read_entry(Format::Toml, &with, "mcp_servers").unwrap().unwrap();
        assert_eq!(read, json!({"url": "http://127.0.0.1:8787/mcp", "headers": {"Authorization": "Bearer k"}}));
        assert_eq!(upsert(Format::Toml, Some(&with), "mcp_servers", &entry()).unwrap().0, with);
        assert_eq!(remove(Format::Toml, &with, "mcp_servers", false).unwrap(), original);
        let (new, created) = upsert(Format::Toml, None, "mcp_servers", &entry()).unwrap();
        assert!(created && new.starts_with("[mcp_servers.continuity]"), "{new}");
        assert!(is_empty_document(Format::Toml, &remove(Format::Toml, &new, "mcp_servers", true).unwrap()));
    }
}
