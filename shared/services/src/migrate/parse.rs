//! Reading sources: a line-based one ([`LineReader`]: `memory.jsonl`, bundles, JSON
//! Lines of memories) one line at a time, the others (a JSON array, Markdown notes) whole.

use std::io::BufRead;

use domain::Timestamp;
use domain::graph::{GraphEntity, GraphRelation};
use domain::memory::MemoryEntry;
use serde_json::{Map, Value, json};

use super::{
    BUNDLE_FORMAT, BUNDLE_VERSION, Format, Incoming, Item, MAX_PROBLEMS, MAX_TEXT_BYTES, Problem, Source, finish, hash,
    memory_canonical, problem,
};

/// Reads a line-based source one line at a time: `memory.jsonl`, a bundle, or JSON Lines
/// of memories (mem0's or `{text, metadata, created_at}`). Give it every line, blank ones
/// included, so the line numbers it reports are the file's.
#[derive(Debug)]
pub struct LineReader {
    format: Format,
    scope: String,
    line: usize,
    header: Header,
}

#[derive(Debug, PartialEq, Eq)]
enum Header {
    Awaited,
    Read,
    Missing,
}

impl LineReader {
    /// `scope` is the graph a `memory.jsonl` goes into. `None` for Markdown, which has no
    /// lines to read one by one.
    pub fn new(format: Format, scope: &str) -> Option<Self> {
        let header = if format == Format::Bundle { Header::Awaited } else { Header::Read };
        (format != Format::Markdown).then(|| Self { format, scope: scope.to_owned(), line: 0, header })
    }

    /// The item on the next line (none for a blank line or a bundle's header).
    ///
    /// # Errors
    /// What is wrong with the line, with its number.
    pub fn line(&mut self, line: &str) -> std::result::Result<Option<Item>, Problem> {
        self.line += 1;
        if line.trim().is_empty() {
            return Ok(None);
        }
        let at = format!("line {}", self.line);
        match self.format {
            Format::MemoryJsonl => graph_line(at, line, &self.scope).map(Some),
            Format::Bundle if self.header == Header::Awaited => {
                let h = serde_json::from_str::<Value>(line).unwrap_or(Value::Null);
                if h.get("format").and_then(Value::as_str) != Some(BUNDLE_FORMAT) {
                    self.header = Header::Missing;
                    return Err(problem(at, format!("not a {BUNDLE_FORMAT} header")));
                }
                self.header = Header::Read;
                if h.get("version").and_then(Value::as_u64) != Some(BUNDLE_VERSION) {
                    return Err(problem(at, format!("bundle version {} is not {BUNDLE_VERSION}", h["version"])));
                }
                Ok(None)
            }
            Format::Bundle => bundle_line(at, line).map(Some),
            Format::Mem0 | Format::Jsonl => match serde_json::from_str::<Value>(line) {
                Ok(v) => memory_from_value(at, v).map(|m| Some(Item::Memory(Box::new(m)))),
                Err(e) => Err(problem(at, format!("not JSON ({e})"))),
            },
            Format::Markdown => Err(problem(at, "Markdown notes are not read by lines")),
        }
    }

    /// A line that could not be read: its problem, the line counted.
    fn skip(&mut self, message: &str) -> Problem {
        self.line += 1;
        problem(format!("line {}", self.line), message)
    }

    /// Whether the source cannot be this format at all (a bundle without its header): no
    /// use reading on.
    pub fn hopeless(&self) -> bool {
        self.header == Header::Missing
    }

    /// At the end of the source: what is missing (a bundle's header in an empty file).
    pub fn end(&self) -> Option<Problem> {
        (self.header == Header::Awaited).then(|| problem("line 1", format!("not a {BUNDLE_FORMAT} header")))
    }
}

/// Whether a file whose first non-blank line is `first` is read line by line in
/// `format`: always for `memory.jsonl` and bundles; for memories, when that line is a
/// whole JSON object of its own (JSON Lines), not the start of an array or of
/// `{"results": […]}`.
pub fn by_lines(format: Format, first: &str) -> bool {
    match format {
        Format::MemoryJsonl | Format::Bundle => true,
        Format::Mem0 | Format::Jsonl => serde_json::from_str::<Value>(first)
            .ok()
            .and_then(|v| v.as_object().map(|o| !o.contains_key("results") && !o.contains_key("memories")))
            .unwrap_or(false),
        Format::Markdown => false,
    }
}

/// The items of a line-based source read from `input`, each line's problem in its place
/// (a line that is not UTF-8 is one); blank lines and a bundle's header give nothing. It
/// ends after a problem that makes reading on useless (a bundle without its header, a
/// failed read).
pub(super) struct Items<R> {
    input: R,
    reader: LineReader,
    buf: String,
    done: bool,
}

impl<R: BufRead> Items<R> {
    pub(super) fn new(input: R, reader: LineReader) -> Self {
        Self { input, reader, buf: String::new(), done: false }
    }
}

impl<R: BufRead> Iterator for Items<R> {
    type Item = std::result::Result<Item, Problem>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.buf.clear();
            let read = match self.input.read_line(&mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return self.reader.end().map(Err);
                }
                Ok(_) => self.reader.line(self.buf.trim_end_matches(['\n', '\r'])),
                // The line was consumed: the next one is read as usual.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Err(self.reader.skip("not UTF-8 text")),
                Err(e) => {
                    self.done = true;
                    Err(self.reader.skip(&format!("could not be read ({e})")))
                }
            };
            match read {
                Ok(None) => {}
                Ok(Some(item)) => return Some(Ok(item)),
                Err(p) => {
                    self.done |= self.reader.hopeless();
                    return Some(Err(p));
                }
            }
        }
        None
    }
}

/// Gives every item to `keep`; the problems found, up to [`MAX_PROBLEMS`].
pub(super) fn read_all<R: BufRead>(items: Items<R>, mut keep: impl FnMut(Item)) -> Vec<Problem> {
    let mut problems = Vec::new();
    for item in items {
        match item {
            Ok(item) => keep(item),
            Err(p) => {
                problems.push(p);
                if problems.len() >= MAX_PROBLEMS {
                    break;
                }
            }
        }
    }
    problems
}

/// Reads a whole line-based text.
fn parse_lines(text: &str, format: Format, scope: &str) -> std::result::Result<Source, Vec<Problem>> {
    let Some(reader) = LineReader::new(format, scope) else {
        return Err(vec![problem("file", "Markdown notes are not read by lines")]);
    };
    let mut source = Source::default();
    let problems = read_all(Items::new(text.as_bytes(), reader), |item| source.push(item));
    finish(source, problems)
}

/// Parses the reference server's `memory.jsonl` into the graph of `scope`.
///
/// # Errors
/// Every problem found (up to 20), each with its line number.
pub fn parse_memory_jsonl(text: &str, scope: &str) -> std::result::Result<Source, Vec<Problem>> {
    parse_lines(text, Format::MemoryJsonl, scope)
}

/// One line of a `memory.jsonl`: an entity or a relation of `scope`.
fn graph_line(at: String, line: &str, scope: &str) -> std::result::Result<Item, Problem> {
    let v: Value = serde_json::from_str(line).map_err(|e| problem(at.clone(), format!("not JSON ({e})")))?;
    let mut o = v.as_object().cloned().unwrap_or_default();
    let kind = o.remove("type");
    let scope = scope.to_owned();
    match kind.as_ref().and_then(Value::as_str) {
        Some("entity") => match serde_json::from_value::<GraphEntity>(Value::Object(o)) {
            Ok(entity) => match entity.validate() {
                Ok(()) => Ok(Item::Entity { scope, entity }),
                Err(err) => Err(problem(at, err.message)),
            },
            Err(e) => Err(problem(at, format!("not an entity ({e})"))),
        },
        Some("relation") => match serde_json::from_value::<GraphRelation>(Value::Object(o)) {
            Ok(relation) => match relation.validate() {
                Ok(()) => Ok(Item::Relation { scope, relation }),
                Err(err) => Err(problem(at, err.message)),
            },
            Err(e) => Err(problem(at, format!("not a relation ({e})"))),
        },
        _ => Err(problem(at, "\"type\" must be \"entity\" or \"relation\"")),
    }
}

/// Parses memories exported by another product: a JSON array, an object holding one
/// (`results`, `memories`), or one JSON object per line. The text is `memory`, `text` or
/// `content`; `created_at` (or `createdAt`, `timestamp`) is kept as when it happened;
/// everything else is kept as metadata.
///
/// # Errors
/// Every problem found (up to 20), with its line (JSONL) or item number (JSON).
pub fn parse_memories(text: &str) -> std::result::Result<Source, Vec<Problem>> {
    let trimmed = text.trim_start();
    let mut items: Vec<(String, Value)> = Vec::new();
    let mut problems = Vec::new();
    let whole: Option<Value> = if trimmed.starts_with('[') || (trimmed.starts_with('{') && !text.trim().contains('\n')) {
        serde_json::from_str(text).ok()
    } else if trimmed.starts_with('{') {
        // One object over several lines, or JSON Lines.
        serde_json::from_str::<Value>(text).ok().filter(|v| v.get("results").is_some() || v.get("memories").is_some())
    } else {
        None
    };
    match whole {
        Some(Value::Array(a)) => items.extend(a.into_iter().enumerate().map(|(i, v)| (format!("item {}", i + 1), v))),
        Some(Value::Object(mut o)) if o.contains_key("results") || o.contains_key("memories") => {
            let list = o.remove("results").or_else(|| o.remove("memories")).unwrap_or(Value::Null);
            match list {
                Value::Array(a) => items.extend(a.into_iter().enumerate().map(|(i, v)| (format!("item {}", i + 1), v))),
                _ => problems.push(problem("file", "\"results\" is not a list")),
            }
        }
        Some(v @ Value::Object(_)) => items.push(("line 1".into(), v)),
        _ => return parse_lines(text, Format::Jsonl, ""),
    }
    let mut source = Source::default();
    for (at, v) in items {
        if problems.len() >= MAX_PROBLEMS {
            break;
        }
        match memory_from_value(at, v) {
            Ok(m) => source.memories.push(m),
            Err(p) => problems.push(p),
        }
    }
    finish(source, problems)
}

/// One memory exported by another product (see [`parse_memories`]).
fn memory_from_value(at: String, v: Value) -> std::result::Result<Incoming, Problem> {
    let Value::Object(mut o) = v else {
        return Err(problem(at, "not an object"));
    };
    let body = ["memory", "text", "content"].iter().find_map(|k| o.remove(*k)).and_then(|v| v.as_str().map(str::to_owned));
    let Some(body) = body.map(|b| b.trim().to_owned()).filter(|b| !b.is_empty()) else {
        return Err(problem(at, "no text (\"memory\", \"text\" or \"content\")"));
    };
    if body.len() > MAX_TEXT_BYTES || body.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(problem(at, format!("the text must be at most {MAX_TEXT_BYTES} bytes without control characters")));
    }
    let created = ["created_at", "createdAt", "timestamp"].iter().find_map(|k| o.get(*k).cloned());
    let created_at = match created {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match Timestamp::parse("created_at", &s) {
            Ok(t) => Some(t),
            Err(_) => return Err(problem(at, format!("created_at {s:?} is not a date or RFC 3339 time"))),
        },
        Some(Value::Number(n)) => n.as_i64().map(|secs| Timestamp(if secs > 100_000_000_000 { secs } else { secs * 1000 })),
        Some(_) => return Err(problem(at, "created_at is not a time")),
    };
    let metadata = (!o.is_empty()).then_some(Value::Object(o));
    Ok(Incoming { id: None, kind: "context".into(), body, created_at, metadata, entry: None })
}

/// Parses a folder of Markdown notes (`(relative path, text)`): one memory per note, its
/// body the note without the front matter; the front matter (`key: value` lines between
/// `---` lines) kept as metadata with the note's path.
///
/// # Errors
/// Every problem found (up to 20), by file.
pub fn parse_markdown(notes: &[(String, String)]) -> std::result::Result<Source, Vec<Problem>> {
    let mut source = Source::default();
    let mut problems = Vec::new();
    for (path, text) in notes {
        if problems.len() >= MAX_PROBLEMS {
            break;
        }
        let (front, body) = split_front_matter(text);
        let body = body.trim().to_owned();
        if body.is_empty() {
            problems.push(problem(path.clone(), "the note has no text"));
            continue;
        }
        if body.len() > MAX_TEXT_BYTES {
            problems.push(problem(path.clone(), format!("longer than {MAX_TEXT_BYTES} bytes")));
            continue;
        }
        let mut meta = Map::new();
        meta.insert("path".into(), json!(path));
        let mut created_at = None;
        if let Some(front) = front {
            let mut fields = Map::new();
            for line in front.lines() {
                if let Some((k, v)) = line.split_once(':')
                    && !k.trim().is_empty()
                    && !k.starts_with(char::is_whitespace)
                {
                    let v = v.trim().trim_matches('"').trim_matches('\'').to_owned();
                    if matches!(k.trim(), "date" | "created" | "created_at") {
                        created_at = Timestamp::parse("date", &v).ok();
                    }
                    fields.insert(k.trim().to_owned(), json!(v));
                }
            }
            meta.insert("front_matter".into(), Value::Object(fields));
            meta.insert("front_matter_text".into(), json!(front));
        }
        source.memories.push(Incoming {
            id: None,
            kind: "context".into(),
            body,
            created_at,
            metadata: Some(Value::Object(meta)),
            entry: None,
        });
    }
    finish(source, problems)
}

fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = t.strip_prefix("---\n").or_else(|| t.strip_prefix("---\r\n")) else { return (None, t) };
    for end in ["\n---\n", "\n---\r\n"] {
        if let Some(i) = rest.find(end) {
            return (Some(&rest[..i]), &rest[i + end.len()..]);
        }
    }
    if let Some(front) = rest.strip_suffix("\n---") {
        return (Some(front), "");
    }
    (None, t)
}

/// Parses our bundle, checking every line's SHA-256.
///
/// # Errors
/// Every problem found (up to 20), with its line number.
pub fn parse_bundle(text: &str) -> std::result::Result<Source, Vec<Problem>> {
    parse_lines(text, Format::Bundle, "")
}

/// One line of a bundle after its header, its SHA-256 checked.
fn bundle_line(at: String, line: &str) -> std::result::Result<Item, Problem> {
    let v: Value = serde_json::from_str(line).map_err(|e| problem(at.clone(), format!("not JSON ({e})")))?;
    let altered = || "its SHA-256 does not match: the line was altered".to_owned();
    let item = v.get("item").cloned().unwrap_or(Value::Null);
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let scope = v.get("scope").and_then(Value::as_str).unwrap_or("personal").to_owned();
    let claimed = v.get("sha256").and_then(Value::as_str).unwrap_or_default();
    let parsed = match kind {
        "memory" => serde_json::from_value::<MemoryEntry>(item).map_err(|e| e.to_string()).and_then(|m| {
            if hash(&memory_canonical(&m)) != claimed {
                return Err(altered());
            }
            Ok(Item::Memory(Box::new(Incoming {
                id: Some(m.id.clone()),
                kind: m.kind.clone(),
                body: m.body.clone(),
                created_at: Some(m.created_at),
                metadata: m.metadata.clone(),
                entry: Some(m),
            })))
        }),
        "entity" => serde_json::from_value::<GraphEntity>(item.clone()).map_err(|e| e.to_string()).and_then(|entity| {
            entity.validate().map_err(|e| e.message)?;
            if hash(&item) != claimed {
                return Err(altered());
            }
            Ok(Item::Entity { scope, entity })
        }),
        "relation" => serde_json::from_value::<GraphRelation>(item.clone()).map_err(|e| e.to_string()).and_then(|relation| {
            relation.validate().map_err(|e| e.message)?;
            if hash(&item) != claimed {
                return Err(altered());
            }
            Ok(Item::Relation { scope, relation })
        }),
        other => Err(format!("unknown kind {other:?}")),
    };
    parsed.map_err(|m| problem(at, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corrupt_line_is_named_and_nothing_is_returned() {
        let text = "{\"type\":\"entity\",\"name\":\"a\",\"entityType\":\"t\",\"observations\":[\"x\"]}\n{\"type\":\"entity\",\"name\":\n{\"type\":\"relation\",\"from\":\"a\",\"to\":\"b\",\"relationType\":\"r\"}\n{\"type\":\"thing\"}\n";
        let problems = parse_memory_jsonl(text, "personal").unwrap_err();
        assert_eq!(problems.iter().map(|p| p.at.as_str()).collect::<Vec<_>>(), ["line 2", "line 4"]);
        let ok = parse_memory_jsonl("{\"type\":\"relation\",\"from\":\"a\",\"to\":\"b\",\"relationType\":\"r\"}\n", "personal")
            .unwrap();
        assert_eq!(ok.counts(), (0, 0, 1));
    }

    #[test]
    fn lines_are_read_one_by_one_with_the_files_numbers() {
        let mut r = LineReader::new(Format::MemoryJsonl, "project:apollo").unwrap();
        assert_eq!(r.line("").unwrap(), None);
        let item = r.line("{\"type\":\"relation\",\"from\":\"a\",\"to\":\"b\",\"relationType\":\"r\"}").unwrap();
        assert!(matches!(item, Some(Item::Relation { ref scope, .. }) if scope == "project:apollo"));
        assert_eq!(r.line("{\"type\":\"thing\"}").unwrap_err().at, "line 3");
        assert!(LineReader::new(Format::Markdown, "personal").is_none());

        // A bundle: its header first, or nothing more is worth reading.
        let mut b = LineReader::new(Format::Bundle, "").unwrap();
        assert_eq!(b.end().unwrap().at, "line 1", "an empty file has no header");
        assert_eq!(b.line("{\"text\":\"x\"}").unwrap_err().message, "not a continuity-bundle header");
        assert!(b.hopeless());
        let p = parse_bundle("\n{\"text\":\"x\"}\n{\"also\":1}\n").unwrap_err();
        assert_eq!(p, vec![problem("line 2", "not a continuity-bundle header")], "only the header is reported");
        assert_eq!(parse_bundle("").unwrap_err()[0].at, "line 1");

        // Memories are read by lines only when the first line is a whole object of its own.
        assert!(by_lines(Format::Jsonl, "{\"text\":\"a\"}"));
        assert!(!by_lines(Format::Mem0, "{\"results\":[{\"memory\":\"a\"}]}"));
        assert!(!by_lines(Format::Mem0, "["));
        assert!(!by_lines(Format::Mem0, "{"));
        assert!(by_lines(Format::MemoryJsonl, "anything"));
        assert!(!by_lines(Format::Markdown, "# notes"));
    }

    #[test]
    fn mem0_and_generic_shapes() {
        let mem0 = r#"{"results":[{"id":"m1","memory":"Likes tea","user_id":"ada","created_at":"2025-01-02T03:04:05Z","metadata":{"src":"chat"},"categories":["food"]}]}"#;
        let s = parse_memories(mem0).unwrap();
        assert_eq!(s.memories[0].body, "Likes tea");
        assert_eq!(s.memories[0].metadata.as_ref().unwrap()["categories"][0], "food");
        assert!(s.memories[0].created_at.is_some());
        assert_eq!(Format::sniff(mem0), Format::Mem0);
        let generic =
            "{\"text\":\"Ships on Fridays\",\"metadata\":{\"team\":\"web\"},\"created_at\":\"2026-03-01\"}\n{\"text\":\"\"}\n";
        assert_eq!(Format::sniff(generic), Format::Jsonl);
        let p = parse_memories(generic).unwrap_err();
        assert_eq!(p[0].at, "line 2");
        let array = r#"[{"memory":"a"},{"memory":"b","created_at":1700000000}]"#;
        assert_eq!(parse_memories(array).unwrap().memories[1].created_at, Some(Timestamp(1_700_000_000_000)));
    }

    #[test]
    fn markdown_notes_keep_their_front_matter() {
        let notes = vec![
            ("a.md".to_owned(), "---\ntitle: Deploys\ndate: 2026-02-03\ntags: [ops]\n---\nWe deploy on Tuesdays.\n".to_owned()),
            ("b.md".to_owned(), "Plain note.".to_owned()),
            ("c.md".to_owned(), "---\ntitle: empty\n---\n".to_owned()),
        ];
        let p = parse_markdown(&notes).unwrap_err();
        assert_eq!(p, vec![problem("c.md", "the note has no text")]);
        let s = parse_markdown(&notes[..2]).unwrap();
        assert_eq!(s.memories[0].body, "We deploy on Tuesdays.");
        let meta = s.memories[0].metadata.as_ref().unwrap();
        assert_eq!(meta["front_matter"]["title"], "Deploys");
        assert_eq!(meta["front_matter"]["tags"], "[ops]");
        assert!(s.memories[0].created_at.is_some());
        assert_eq!(s.memories[1].metadata.as_ref().unwrap()["path"], "b.md");
    }
}
