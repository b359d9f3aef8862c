//! Engineering records (seed 002 §6, issue #18): a project's working state that
//! survives sessions and agents — tasks, sticky notes, session summaries and handoff
//! memos, ADRs, snippets, error fixes, tech debt, PR checklists, the change log, pinned
//! files, environments, milestones and context workspaces. Each record belongs to one
//! project, is typed by its [`Body`], and carries who made and last changed it, and when.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Id, TenantId, Timestamp};
use crate::tenant::string_enum;

string_enum! {
    /// The kinds of engineering record.
    RecordKind, "record kind" {
        Task = "task",
        Note = "note",
        Summary = "summary",
        Handoff = "handoff",
        Adr = "adr",
        Snippet = "snippet",
        ErrorFix = "error_fix",
        TechDebt = "tech_debt",
        Checklist = "checklist",
        Change = "change",
        PinnedFile = "pinned_file",
        Environment = "environment",
        Milestone = "milestone",
        Workspace = "workspace",
    }
}

string_enum! {
    /// Where a task stands.
    TaskStatus, "task status" { Todo = "todo", InProgress = "in_progress", Blocked = "blocked", Done = "done" }
}

string_enum! {
    /// How urgent a task is, how bad a piece of tech debt is.
    Priority, "priority" { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
}

string_enum! {
    /// An architecture decision record's status.
    AdrStatus, "ADR status" { Proposed = "proposed", Accepted = "accepted", Superseded = "superseded", Deprecated = "deprecated" }
}

string_enum! {
    /// Where a piece of tech debt stands.
    DebtStatus, "debt status" { Open = "open", InProgress = "in_progress", Resolved = "resolved" }
}

string_enum! {
    /// How big a piece of work is.
    Effort, "effort" { Small = "small", Medium = "medium", Large = "large" }
}

string_enum! {
    /// Where a milestone stands.
    MilestoneStatus, "milestone status" { Planned = "planned", Active = "active", Done = "done", Missed = "missed" }
}

/// One item of a PR checklist. Stored as `{"text", "checked"}`; read from that or from a
/// line of text (`"[x] tests pass"`, `"[ ] docs"`, `"docs"`), which is how a tool call
/// writes it: clients that reduce schemas to a subset (Codex) keep an array of strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ChecklistItemInput")]
pub struct ChecklistItem {
    pub text: String,
    #[serde(default)]
    pub checked: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ChecklistItemInput {
    Line(String),
    Item {
        text: String,
        #[serde(default)]
        checked: bool,
    },
}

impl From<ChecklistItemInput> for ChecklistItem {
    fn from(input: ChecklistItemInput) -> Self {
        match input {
            ChecklistItemInput::Item { text, checked } => Self { text, checked },
            ChecklistItemInput::Line(line) => {
                let (checked, text) = match line.get(..4) {
                    Some("[x] " | "[X] ") => (true, &line[4..]),
                    Some("[ ] ") => (false, &line[4..]),
                    _ => (false, line.as_str()),
                };
                Self { text: text.to_owned(), checked }
            }
        }
    }
}

/// Read as a line of text (`"[x] tests pass"`); written as an object.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for ChecklistItem {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ChecklistItem".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        if generator.contract().is_deserialize() {
            schemars::json_schema!({
                "type": "string",
                "minLength": 1,
                "description": "One checklist item as a line: \"[x] tests pass\" (done), \"[ ] docs updated\" or \"docs updated\" (not yet)."
            })
        } else {
            schemars::json_schema!({
                "type": "object",
                "properties": {"text": {"type": "string"}, "checked": {"type": "boolean"}},
                "required": ["text", "checked"]
            })
        }
    }
}

/// What a record says, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Body {
    Task {
        title: String,
        status: TaskStatus,
        priority: Priority,
        assignee: Option<String>,
        details: Option<String>,
    },
    /// A sticky note: gone 24 h after its last update unless pinned.
    Note {
        text: String,
        #[serde(default)]
        pinned: bool,
    },
    /// What a session did.
    Summary {
        text: String,
    },
    /// What the next person or agent must know.
    Handoff {
        text: String,
        to: Option<String>,
    },
    Adr {
        title: String,
        status: AdrStatus,
        context: String,
        decision: String,
        consequences: String,
        /// The ADR this one replaces (accepted: that one is superseded).
        supersedes: Option<Id>,
        /// The ADR that replaced this one.
        superseded_by: Option<Id>,
        /// The org decision governance wrote when it accepted this ADR (set by governance).
        accepted_as: Option<Id>,
    },
    Snippet {
        title: String,
        language: String,
        code: String,
        description: Option<String>,
    },
    ErrorFix {
        signature: String,
        cause: String,
        fix: String,
        #[serde(default)]
        files: Vec<String>,
    },
    TechDebt {
        area: String,
        description: String,
        severity: Priority,
        effort: Effort,
        status: DebtStatus,
    },
    Checklist {
        pr: String,
        #[serde(default)]
        items: Vec<ChecklistItem>,
    },
    /// One entry of the code-change log.
    Change {
        summary: String,
        #[serde(default)]
        files: Vec<String>,
        commit: Option<String>,
    },
    PinnedFile {
        path: String,
        why: String,
    },
    /// An environment and the fingerprint of its OS, toolchain and versions.
    Environment {
        name: String,
        #[serde(default)]
        fingerprint: BTreeMap<String, String>,
        notes: Option<String>,
    },
    Milestone {
        title: String,
        /// RFC 3339 or a date (`2026-12-31`).
        due: Option<String>,
        status: MilestoneStatus,
        #[serde(default)]
        tasks: Vec<Id>,
    },
    /// A named set of records to restore in one call.
    Workspace {
        name: String,
        description: Option<String>,
        #[serde(default)]
        items: Vec<Id>,
    },
}

/// Longest text field, in bytes (a snippet's code, an ADR's parts).
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Longest short field (a title, a path, a name), in characters.
pub const MAX_SHORT: usize = 300;
/// Most items in a list field (files, checklist items, linked records).
pub const MAX_ITEMS: usize = 200;

fn short(field: &str, v: &str) -> Result<(), Error> {
    if v.trim().is_empty() || v.chars().count() > MAX_SHORT || v.chars().any(char::is_control) {
        return Err(Error::invalid_field(field, format!("1 to {MAX_SHORT} characters on one line")));
    }
    Ok(())
}

fn text(field: &str, v: &str) -> Result<(), Error> {
    if v.trim().is_empty() || v.len() > MAX_TEXT_BYTES {
        return Err(Error::invalid_field(field, format!("1 to {MAX_TEXT_BYTES} bytes")));
    }
    Ok(())
}

fn opt_short(field: &str, v: Option<&String>) -> Result<(), Error> {
    v.map_or(Ok(()), |v| short(field, v))
}

fn opt_text(field: &str, v: Option<&String>) -> Result<(), Error> {
    v.map_or(Ok(()), |v| text(field, v))
}

fn items<T>(field: &str, v: &[T]) -> Result<(), Error> {
    if v.len() > MAX_ITEMS {
        return Err(Error::invalid_field(field, format!("at most {MAX_ITEMS} items")));
    }
    Ok(())
}

impl Body {
    pub fn kind(&self) -> RecordKind {
        match self {
            Self::Task { .. } => RecordKind::Task,
            Self::Note { .. } => RecordKind::Note,
            Self::Summary { .. } => RecordKind::Summary,
            Self::Handoff { .. } => RecordKind::Handoff,
            Self::Adr { .. } => RecordKind::Adr,
            Self::Snippet { .. } => RecordKind::Snippet,
            Self::ErrorFix { .. } => RecordKind::ErrorFix,
            Self::TechDebt { .. } => RecordKind::TechDebt,
            Self::Checklist { .. } => RecordKind::Checklist,
            Self::Change { .. } => RecordKind::Change,
            Self::PinnedFile { .. } => RecordKind::PinnedFile,
            Self::Environment { .. } => RecordKind::Environment,
            Self::Milestone { .. } => RecordKind::Milestone,
            Self::Workspace { .. } => RecordKind::Workspace,
        }
    }

    /// Checks every field's length and shape.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the first bad field.
    pub fn check(&self) -> Result<(), Error> {
        match self {
            Self::Task { title, assignee, details, .. } => {
                short("title", title)?;
                opt_short("assignee", assignee.as_ref())?;
                opt_text("details", details.as_ref())
            }
            Self::Note { text: t, .. } | Self::Summary { text: t } => text("text", t),
            Self::Handoff { text: t, to } => {
                text("text", t)?;
                opt_short("to", to.as_ref())
            }
            Self::Adr { title, context, decision, consequences, .. } => {
                short("title", title)?;
                text("context", context)?;
                text("decision", decision)?;
                text("consequences", consequences)
            }
            Self::Snippet { title, language, code, description } => {
                short("title", title)?;
                short("language", language)?;
                text("code", code)?;
                opt_text("description", description.as_ref())
            }
            Self::ErrorFix { signature, cause, fix, files } => {
                text("signature", signature)?;
                text("cause", cause)?;
                text("fix", fix)?;
                items("files", files)?;
                files.iter().try_for_each(|f| short("files", f))
            }
            Self::TechDebt { area, description, .. } => {
                short("area", area)?;
                text("description", description)
            }
            Self::Checklist { pr, items: list } => {
                short("pr", pr)?;
                items("items", list)?;
                list.iter().try_for_each(|i| short("items", &i.text))
            }
            Self::Change { summary, files, commit } => {
                text("summary", summary)?;
                items("files", files)?;
                files.iter().try_for_each(|f| short("files", f))?;
                opt_short("commit", commit.as_ref())
            }
            Self::PinnedFile { path, why } => {
                short("path", path)?;
                text("why", why)
            }
            Self::Environment { name, fingerprint, notes } => {
                short("name", name)?;
                if fingerprint.len() > 50 {
                    return Err(Error::invalid_field("fingerprint", "at most 50 entries"));
                }
                fingerprint.iter().try_for_each(|(k, v)| short("fingerprint", k).and_then(|()| short("fingerprint", v)))?;
                opt_text("notes", notes.as_ref())
            }
            Self::Milestone { title, due, tasks, .. } => {
                short("title", title)?;
                if let Some(d) = due {
                    Timestamp::parse("due", d)?;
                }
                items("tasks", tasks)
            }
            Self::Workspace { name, description, items: list } => {
                short("name", name)?;
                opt_text("description", description.as_ref())?;
                items("items", list)
            }
        }
    }

    /// A one-line title for lists and search.
    pub fn title(&self) -> String {
        let first_line = |s: &str| s.lines().next().unwrap_or_default().chars().take(120).collect::<String>();
        match self {
            Self::Task { title, .. } | Self::Adr { title, .. } | Self::Snippet { title, .. } | Self::Milestone { title, .. } => {
                title.clone()
            }
            Self::Note { text, .. } | Self::Summary { text } | Self::Handoff { text, .. } => first_line(text),
            Self::ErrorFix { signature, .. } => first_line(signature),
            Self::TechDebt { area, description, .. } => format!("{area}: {}", first_line(description)),
            Self::Checklist { pr, .. } => format!("PR {pr} checklist"),
            Self::Change { summary, .. } => first_line(summary),
            Self::PinnedFile { path, .. } => path.clone(),
            Self::Environment { name, .. } | Self::Workspace { name, .. } => name.clone(),
        }
    }

    /// Everything searchable, as text (indexed with the title).
    pub fn text(&self) -> String {
        match self {
            Self::Task { title, status, priority, assignee, details } => format!(
                "{title}\nstatus {} · priority {}{}\n{}",
                status.as_str(),
                priority.as_str(),
                assignee.as_ref().map(|a| format!(" · assignee {a}")).unwrap_or_default(),
                details.clone().unwrap_or_default()
            ),
            Self::Note { text, .. } | Self::Summary { text } => text.clone(),
            Self::Handoff { text, to } => format!("{}{text}", to.as_ref().map(|t| format!("to {t}: ")).unwrap_or_default()),
            Self::Adr { title, status, context, decision, consequences, .. } => {
                format!("{title} ({})\nContext: {context}\nDecision: {decision}\nConsequences: {consequences}", status.as_str())
            }
            Self::Snippet { title, language, code, description } => {
                format!("{title} ({language})\n{}\n{code}", description.clone().unwrap_or_default())
            }
            Self::ErrorFix { signature, cause, fix, files } => {
                format!("Error: {signature}\nCause: {cause}\nFix: {fix}\nFiles: {}", files.join(", "))
            }
            Self::TechDebt { area, description, severity, effort, status } => format!(
                "{area}: {description}\nseverity {} · effort {} · {}",
                severity.as_str(),
                effort.as_str(),
                status.as_str()
            ),
            Self::Checklist { pr, items } => format!(
                "PR {pr}\n{}",
                items
                    .iter()
                    .map(|i| format!("[{}] {}", if i.checked { "x" } else { " " }, i.text))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            Self::Change { summary, files, commit } => {
                format!(
                    "{summary}\nFiles: {}{}",
                    files.join(", "),
                    commit.as_ref().map(|c| format!("\nCommit {c}")).unwrap_or_default()
                )
            }
            Self::PinnedFile { path, why } => format!("{path}\n{why}"),
            Self::Environment { name, fingerprint, notes } => format!(
                "{name}\n{}\n{}",
                fingerprint.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
                notes.clone().unwrap_or_default()
            ),
            Self::Milestone { title, due, status, .. } => {
                format!("{title} ({}){}", status.as_str(), due.as_ref().map(|d| format!(" due {d}")).unwrap_or_default())
            }
            Self::Workspace { name, description, .. } => format!("{name}\n{}", description.clone().unwrap_or_default()),
        }
    }
}

/// One engineering record of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngRecord {
    pub tenant: TenantId,
    pub project: String,
    /// `{kind}.{random}`: the kind can be read from the id.
    pub id: Id,
    pub body: Body,
    pub created_by: Id,
    pub created_at: Timestamp,
    pub updated_by: Id,
    pub updated_at: Timestamp,
    /// A sticky note's end (24 h after its last update unless pinned).
    pub expires_at: Option<Timestamp>,
    #[serde(default)]
    pub version: u64,
}

impl EngRecord {
    pub fn kind(&self) -> RecordKind {
        self.body.kind()
    }

    /// Whether it has run out at `now` (an unpinned sticky note after 24 h).
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|e| now.0 >= e.0)
    }
}

/// The kind an engineering record id names (`task.…` → task).
///
/// # Errors
/// `INVALID_REQUEST` for an id that names no kind.
pub fn kind_of(id: &str) -> Result<RecordKind, Error> {
    let (kind, rest) = id.split_once('.').unwrap_or((id, ""));
    if rest.is_empty() {
        return Err(Error::invalid_field("id", "an engineering record id (kind.xxxx, e.g. task.01j…)"));
    }
    RecordKind::parse(kind).map_err(|_| Error::invalid_field("id", "an engineering record id (kind.xxxx, e.g. task.01j…)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_checked_and_their_kind_read_from_json_and_ids() {
        let b: Body = serde_json::from_str(
            r#"{"kind":"task","title":"Fix login","status":"todo","priority":"high","assignee":null,"details":null}"#,
        )
        .unwrap();
        assert_eq!(b.kind(), RecordKind::Task);
        assert!(b.check().is_ok());
        assert!(serde_json::from_str::<Body>(r#"{"kind":"task","title":"x","status":"later","priority":"high"}"#).is_err());
        assert!(serde_json::from_str::<Body>(r#"{"kind":"note","text":"x","pinned":false,"extra":1}"#).is_err());
        let empty = Body::Note { text: "  ".into(), pinned: false };
        assert_eq!(empty.check().unwrap_err().code, crate::ErrorCode::InvalidRequest);
        let many = Body::Change { summary: "s".into(), files: vec!["a".into(); MAX_ITEMS + 1], commit: None };
        assert!(many.check().is_err());
        let bad_due =
            Body::Milestone { title: "M1".into(), due: Some("soon".into()), status: MilestoneStatus::Planned, tasks: vec![] };
        assert!(bad_due.check().is_err());
        assert_eq!(kind_of("error_fix.01abc").unwrap(), RecordKind::ErrorFix);
        assert!(kind_of("task").is_err() && kind_of("bogus.1").is_err());
    }

    #[test]
    fn checklist_items_are_read_from_lines_or_objects_and_written_as_objects() {
        let b: Body = serde_json::from_str(
            r#"{"kind":"checklist","pr":"42","items":["[x] tests pass","[ ] docs","lint",{"text":"review","checked":true}]}"#,
        )
        .unwrap();
        let Body::Checklist { items, .. } = &b else { panic!("{b:?}") };
        let read: Vec<(&str, bool)> = items.iter().map(|i| (i.text.as_str(), i.checked)).collect();
        assert_eq!(read, [("tests pass", true), ("docs", false), ("lint", false), ("review", true)]);
        let stored = serde_json::to_value(&b).unwrap();
        assert_eq!(stored["items"][0], serde_json::json!({"text": "tests pass", "checked": true}));
        assert_eq!(serde_json::from_value::<Body>(stored).unwrap(), b);
    }
}
