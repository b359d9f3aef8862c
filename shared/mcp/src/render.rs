//! Rendering for models: structured content plus a readable text, and taxonomy errors
//! as `isError` tool results (SPEC §7.3). Internal details never reach the client.

use domain::Error;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// A successful result: `text` for the model to read, `structured` for programs.
pub fn success(structured: Value, text: String) -> CallToolResult {
    // Not `CallToolResult::structured`, which also serializes the whole value into a
    // text block that would be replaced at once (costly on a large graph answer).
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    r
}

/// The client-visible fields of a taxonomy error — code, message and the payload of
/// SPEC §7.3 — identical in MCP results and HTTP bodies. Internal detail is never here.
pub fn error_fields(e: &Error) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("code".into(), json!(e.code.as_str()));
    body.insert("message".into(), json!(e.message));
    let p = &e.payload;
    if let Some(u) = &p.upgrade_url {
        body.insert("upgrade_url".into(), json!(u));
    }
    if let Some(u) = &p.connect_url {
        body.insert("connect_url".into(), json!(u));
    }
    if let Some(pr) = p.progress {
        body.insert("syncing".into(), json!(true));
        body.insert("progress".into(), json!(pr));
        body.insert("data".into(), Value::Null);
    }
    if let Some(s) = p.retry_after_secs {
        body.insert("retry_after".into(), json!(s));
    }
    if !p.field_errors.is_empty() {
        body.insert("field_errors".into(), serde_json::to_value(&p.field_errors).unwrap_or(Value::Null));
    }
    if let Some(s) = &p.required_scope {
        body.insert("required_scope".into(), json!(s));
    }
    body
}

/// The taxonomy error as a tool result with `isError: true` and the code in structured content.
pub fn error(e: &Error) -> CallToolResult {
    services::log_failure(e, "mcp");
    let body = error_fields(e);
    let text = format!("{}: {}", e.code, e.message);
    let mut r = CallToolResult::structured_error(Value::Object(body));
    r.content = vec![ContentBlock::text(text)];
    r
}

/// A result as text for a model: what the structured content says, in a few lines.
pub trait Render {
    fn render(&self) -> String;
}

use services::tools::engineering::{FixesFound, GateList, GateRequested, RecordList, RecordSaved, RecordView, WorkspaceRestored};
use services::tools::graph::{GraphChange, GraphView};
use services::tools::library::{BookListOutput, KbSearchOutput, PlaybookOutput};
use services::tools::memory::{
    ListDecisionsOutput, ProposalOutput, ReadConversationalOutput, ReadOrgOutput, ReadPersonalOutput, SearchOrgOutput,
    WriteConversationalOutput,
};
use services::tools::recall::{ForgetOutput, PersonalOutput, RecallOutput, RememberOutput};
use services::tools::session::{GetContextOutput, ListRecentOutput};
use services::tools::spine::{
    EntityGetOutput, EntityListOutput, EntitySearchOutput, RelationshipListOutput, SignalGetOutput, SignalListOutput,
};
use services::tools::tasks::{TaskListOutput, TaskOutput, TaskView};
use services::tools::{EntityView, MemoryView, ProposalView};

fn task_line(t: &TaskView) -> String {
    let mut line = format!("{} [{}] {} (for {})", t.id, t.status.as_str(), t.title, t.assignee);
    if let Some(n) = &t.note {
        line.push_str(&format!(": {n}"));
    }
    line
}

impl Render for TaskOutput {
    fn render(&self) -> String {
        format!("Task {}", task_line(&self.task))
    }
}

impl Render for TaskListOutput {
    fn render(&self) -> String {
        let mut text = format!("{} tasks", self.tasks.len());
        for t in &self.tasks {
            text.push_str(&format!("\n- {}", task_line(t)));
        }
        if let Some(c) = &self.next_cursor {
            text.push_str(&format!("\nMore: cursor {c}"));
        }
        text
    }
}

/// The first `n` characters.
fn first(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn entity_lines(v: &EntityView) -> String {
    let mut out = format!("{} {}", v.entity_type, v.id);
    for (k, val) in &v.attributes {
        let shown = serde_json::to_string(val).unwrap_or_default();
        out.push_str(&format!("\n  {k}: {shown}"));
    }
    out
}

fn memory_line(m: &MemoryView) -> String {
    format!("\n- [{}] {} ({}): {}", m.id, m.title, m.kind, first(&m.body, 200))
}

impl Render for SearchOrgOutput {
    fn render(&self) -> String {
        let mut text = format!("{} active org memory entries match", self.count);
        if self.search != "hybrid" {
            text.push_str(" (keyword scan: no search index is configured)");
        }
        self.entries.iter().for_each(|m| text.push_str(&memory_line(&m.entry)));
        text
    }
}

impl Render for ReadOrgOutput {
    fn render(&self) -> String {
        let m = &self.entry;
        let state = serde_json::to_value(m.state).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let mut text = format!("[{}] {} ({}, {state})\n{}", m.id, m.title, m.kind, m.body);
        if let Some(by) = &m.superseded_by {
            text.push_str(&format!("\nSuperseded by {by}: read that entry for the current truth."));
        }
        if let Some(v) = &self.verification {
            text.push_str(&format!(
                "\nVerification: {} (confidence {:.2})",
                if v.verified { "retrievable, verified" } else { "awaiting review" },
                v.confidence
            ));
            if !v.related.is_empty() {
                let related: Vec<&str> = v.related.iter().map(domain::Id::as_str).collect();
                text.push_str(&format!("\nRelated entries: {}", related.join(", ")));
            }
        }
        text
    }
}

/// What a proposal's state means for the agent that made or reads it.
fn proposal_text(p: &ProposalView) -> String {
    use domain::proposal::ProposalState;
    let scored = match p.score.as_ref().and_then(|s| s.total) {
        Some(total) => format!(" scored {total:.2} and"),
        None => String::new(),
    };
    let mut text = match p.state {
        ProposalState::Written if p.kind.starts_with("memory:") => {
            format!("Proposal {} \"{}\"{scored} is written: it is now active org memory.", p.id, p.title)
        }
        ProposalState::Written if p.action.as_ref().is_some_and(|a| a.state == Some("done")) => {
            let a = p.action.as_ref().map(|a| format!("{} {} {}", a.connector, a.operation, a.target)).unwrap_or_default();
            format!("Proposal {} \"{}\" was approved and carried out: {a} succeeded.", p.id, p.title)
        }
        ProposalState::Written if p.kind == "action" => format!(
            "Proposal {} \"{}\" was approved and is recorded for people to carry out (it named no connector operation).",
            p.id, p.title
        ),
        ProposalState::Written if p.kind.starts_with("entity:") || p.kind.starts_with("book:") => {
            format!("Proposal {} \"{}\" was approved and written.", p.id, p.title)
        }
        ProposalState::AwaitingApproval => format!(
            "Proposal {} \"{}\"{scored} waits for a person to decide (never in chat). Check it with proposal_status.",
            p.id, p.title
        ),
        ProposalState::Rejected => format!("Proposal {} \"{}\" was rejected", p.id, p.title),
        other => format!("Proposal {} \"{}\" is {}", p.id, p.title, other.as_str()),
    };
    if let Some(r) = &p.decision_reason {
        text.push_str(&format!(": {r}"));
    } else if !text.ends_with('.') {
        text.push('.');
    }
    text
}

impl Render for ProposalOutput {
    fn render(&self) -> String {
        proposal_text(&self.proposal)
    }
}

impl Render for ReadConversationalOutput {
    fn render(&self) -> String {
        let mut text = format!("{} turns of session {}", self.turns.len(), self.session);
        for t in &self.turns {
            text.push_str(&format!("\n#{} {}: {}", t.seq, t.role, t.content));
        }
        text
    }
}

impl Render for WriteConversationalOutput {
    fn render(&self) -> String {
        format!("Appended turn #{} [{}] to session {}.", self.seq, self.id, self.session)
    }
}

impl Render for ReadPersonalOutput {
    fn render(&self) -> String {
        let mut text = format!("{} personal patterns, newest first", self.count);
        for m in &self.patterns {
            text.push_str(&format!("\n- ({}) {}: {}", m.kind, m.title, first(&m.body, 200)));
        }
        if let Some(c) = &self.next_cursor {
            text.push_str(&format!("\nMore: call again with cursor {c}"));
        }
        text
    }
}

impl Render for RecallOutput {
    fn render(&self) -> String {
        let mut text = format!("{} results", self.count);
        if self.search != "hybrid" {
            text.push_str(" (keyword scan: no search index is configured)");
        }
        for r in &self.results {
            text.push_str(&format!("\n- [{}] {} in {}, {}: {}", r.id, r.kind, r.scope, r.occurred_at, first(&r.text, 300)));
            if let Some(by) = &r.superseded_by {
                text.push_str(&format!(" (as it stood then; superseded by {by})"));
            }
        }
        text
    }
}

impl Render for RememberOutput {
    fn render(&self) -> String {
        format!("{} personal memory [{}] ({}): {}", self.action, self.memory.id, self.memory.kind, first(&self.memory.body, 300))
    }
}

impl Render for PersonalOutput {
    fn render(&self) -> String {
        let m = &self.memory;
        if m.body.is_empty() {
            format!("Forgot personal memory [{}]; a tombstone keeps who and when.", m.id)
        } else {
            format!("Personal memory [{}] ({}): {}", m.id, m.kind, first(&m.body, 300))
        }
    }
}

impl Render for ForgetOutput {
    fn render(&self) -> String {
        match (&self.memory, &self.turn) {
            (Some(m), _) => format!("Forgot personal memory [{}]; a tombstone keeps who and when.", m.id),
            (None, Some(t)) => {
                format!("Forgot turn #{} [{}] of session {}; a tombstone keeps who and when.", t.seq, t.id, t.session)
            }
            (None, None) => "Nothing was forgotten.".to_owned(),
        }
    }
}

impl Render for ListDecisionsOutput {
    fn render(&self) -> String {
        let mut text = format!("{} proposals", self.decisions.len());
        for p in &self.decisions {
            text.push_str(&format!("\n- [{}] {} — {}", p.id, p.title, p.state));
            if let Some(r) = &p.decision_reason {
                text.push_str(&format!(" ({r})"));
            }
        }
        text
    }
}

impl Render for GetContextOutput {
    fn render(&self) -> String {
        let mut text = String::new();
        if let Some(e) = &self.entity {
            text.push_str(&format!("Entity {} {} ({})", e.entity_type, e.id, e.label()));
            let (rels, signals) =
                (self.relationships.as_deref().unwrap_or_default(), self.signals.as_deref().unwrap_or_default());
            text.push_str(&format!("\n{} relationships, {} recent signals", rels.len(), signals.len()));
            for s in signals.iter().take(5) {
                text.push_str(&format!("\n- signal {} at {}", s.kind, s.at));
            }
        }
        if let Some(s) = &self.session {
            text.push_str(&format!("\nSession {}: {} turns (showing the last {})", s.session, s.turns, s.recent_turns.len()));
        }
        if let Some(p) = &self.project {
            text.push_str(&format!("\nProject {}:", p.project));
            for (what, r) in [("latest handoff", &p.latest_handoff), ("latest session summary", &p.latest_summary)] {
                match r {
                    Some(r) => text.push_str(&format!("\n{what} ({}, {}):\n{}", r.updated_at, r.updated_by, r.record.text())),
                    None => text.push_str(&format!("\nno {what}")),
                }
            }
            text.push_str(&format!("\n{} open task(s)", p.open_tasks.len()));
            for t in &p.open_tasks {
                text.push_str(&format!("\n- {} [{}]", t.title, t.id));
            }
        }
        match &self.memory {
            Some(memory) if !memory.is_empty() => {
                text.push_str("\nRelevant org memory:");
                for m in memory {
                    text.push_str(&format!("\n- [{}] {}", m.id, m.title));
                }
            }
            Some(_) => {}
            None => text.push_str("\n(Org memory is left out: it needs the memory:read scope.)"),
        }
        text.trim_start().to_owned()
    }
}

impl Render for ListRecentOutput {
    fn render(&self) -> String {
        let mut text = format!("{} recent sessions", self.sessions.len());
        for s in &self.sessions {
            text.push_str(&format!("\n- {} ({} turns, last {})", s.session, s.turns, s.last_at));
            if let Some(t) = &s.title {
                text.push_str(&format!(": {t}"));
            }
        }
        text
    }
}

impl Render for EntityGetOutput {
    fn render(&self) -> String {
        entity_lines(&self.entity)
    }
}

impl Render for EntitySearchOutput {
    fn render(&self) -> String {
        let mut text = format!("{} matching entities", self.count);
        if self.truncated {
            text.push_str(" (the search stopped before the end of the tenant's entities)");
        }
        for v in &self.entities {
            text.push_str(&format!("\n- {} {}: {}", v.entity_type, v.id, v.label()));
        }
        text
    }
}

impl Render for EntityListOutput {
    fn render(&self) -> String {
        format!("{} entities{}", self.count, if self.next_cursor.is_some() { " (more follow)" } else { "" })
    }
}

impl Render for RelationshipListOutput {
    fn render(&self) -> String {
        let mut text = format!("{} relationships of {}", self.relationships.len(), self.of);
        for r in &self.relationships {
            text.push_str(&format!("\n- {}#{} -{}-> {}#{}", r.from.entity_type, r.from.id, r.kind, r.to.entity_type, r.to.id));
        }
        text
    }
}

impl Render for SignalListOutput {
    fn render(&self) -> String {
        let mut text = format!("{} signals, newest first", self.signals.len());
        for s in &self.signals {
            text.push_str(&format!("\n- [{}] {} on {}#{} at {}", s.id, s.kind, s.entity.entity_type, s.entity.id, s.at));
        }
        text
    }
}

impl Render for SignalGetOutput {
    fn render(&self) -> String {
        let s = &self.signal;
        format!("Signal {} on {}#{} at {}", s.kind, s.entity.entity_type, s.entity.id, s.at)
    }
}

impl Render for BookListOutput {
    fn render(&self) -> String {
        let mut text = format!("{} book-of-projects entries", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("\n- [{}] {}: {}", e.project, e.title, first(&e.body, 200)));
        }
        text
    }
}

impl Render for KbSearchOutput {
    fn render(&self) -> String {
        let mut text = format!("{} knowledge-base documents match", self.count);
        if self.search != "hybrid" {
            text.push_str(" (keyword scan: no search index is configured)");
        }
        for d in &self.documents {
            text.push_str(&format!("\n- [{}] {}: {}", d.id, d.title, first(&d.passage, 200)));
        }
        text
    }
}

impl Render for PlaybookOutput {
    fn render(&self) -> String {
        format!("Playbook with {} steps for: {}", self.playbook.steps.len(), self.playbook.goal)
    }
}

/// One engineering record: its kind, title and id, then its searchable text.
fn record_text(r: &RecordView, full: bool) -> String {
    let kind = r.record.kind().as_str();
    let mut t = format!("[{kind}] {} (id {}, v{}, updated {} by {})", r.title, r.id, r.version, r.updated_at, r.updated_by);
    if let Some(e) = &r.expires_at {
        t.push_str(&format!(", expires {e}"));
    }
    if full {
        t.push('\n');
        t.push_str(&r.record.text());
    }
    t
}

impl Render for RecordSaved {
    fn render(&self) -> String {
        record_text(&self.record, true)
    }
}

impl Render for RecordList {
    fn render(&self) -> String {
        if self.records.is_empty() {
            return format!("No matching records in project {}.", self.project);
        }
        let mut text = format!(
            "{} record(s) in project {}, newest first{}:",
            self.count,
            self.project,
            if self.truncated { " (more exist)" } else { "" }
        );
        for r in &self.records {
            text.push_str("\n- ");
            text.push_str(&record_text(r, false));
        }
        text
    }
}

impl Render for FixesFound {
    fn render(&self) -> String {
        if self.fixes.is_empty() {
            return "No recorded fix matches this error. Once you fix it, save it as an error_fix.".to_owned();
        }
        let mut text = format!("{} known fix(es), best first:", self.fixes.len());
        for f in &self.fixes {
            text.push_str("\n\n");
            text.push_str(&record_text(f, true));
        }
        text
    }
}

impl Render for WorkspaceRestored {
    fn render(&self) -> String {
        let mut text = format!("Workspace {} with {} record(s):", self.workspace.title, self.records.len());
        for r in &self.records {
            text.push_str("\n\n");
            text.push_str(&record_text(r, true));
        }
        text
    }
}

impl Render for GateList {
    fn render(&self) -> String {
        if self.gates.is_empty() {
            return "No gate matches. A person sets gates (approvals console or `continuity gate set`); \
                    ask for one with engineering_gate_request."
                .to_owned();
        }
        let mut text = format!("{} gate(s):", self.gates.len());
        for g in &self.gates {
            text.push_str(&format!("\n- {} in {}: {}", g.action, g.namespace, g.status.as_str()));
            if let Some(r) = &g.reason {
                text.push_str(&format!(" — {}", first(r, 200)));
            }
            if let Some(e) = &g.expires_at {
                text.push_str(&format!(" (until {e})"));
            }
            if g.consume_once {
                text.push_str(" (once)");
            }
        }
        text
    }
}

impl Render for GateRequested {
    fn render(&self) -> String {
        format!("Gate {} in {} is {}. {}", self.gate.action, self.gate.namespace, self.gate.status.as_str(), self.note)
    }
}

/// The reference memory server's rendering: the result as pretty JSON.
impl Render for GraphChange {
    fn render(&self) -> String {
        serde_json::to_string_pretty(&self.result).unwrap_or_default()
    }
}

impl Render for GraphView {
    /// Compact JSON: the reference indents its answer, which makes a graph's text about
    /// half as long again (1.47× the bytes on the benchmark's graph) for the same content.
    /// Exactly `serde_json::to_string(self)`, from each entity's JSON written once when
    /// it was stored.
    fn render(&self) -> String {
        let relations = serde_json::to_string(&self.relations).unwrap_or_default();
        let mut out =
            String::with_capacity(40 + relations.len() + self.entities.iter().map(|e| e.json().len() + 1).sum::<usize>());
        out.push_str("{\"entities\":[");
        for (i, e) in self.entities.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(e.json());
        }
        out.push_str("],\"relations\":");
        out.push_str(&relations);
        if let Some(c) = &self.next_cursor {
            out.push_str(",\"nextCursor\":");
            out.push_str(&serde_json::to_string(c).unwrap_or_default());
        }
        out.push('}');
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use domain::graph::{GraphEntity, GraphRelation};
    use services::graph::Node;
    use services::tools::graph::GraphView;

    use super::Render;

    /// The graph answer's text, joined from each entity's stored JSON, is byte for byte
    /// what serializing the answer writes — escapes, empty lists and the cursor included.
    #[test]
    fn a_graph_answer_renders_as_its_json() {
        let node = |name: &str, observations: &[&str]| {
            Arc::new(Node::new(GraphEntity {
                name: name.into(),
                entity_type: "person \"quoted\"".into(),
                observations: observations.iter().map(|o| (*o).to_owned()).collect(),
            }))
        };
        let relation = GraphRelation { from: "Ada".into(), to: "Bo\\b".into(), relation_type: "knows\n".into() };
        for view in [
            GraphView { entities: vec![], relations: vec![], next_cursor: None },
            GraphView {
                entities: vec![node("Ada", &["likes \"tea\"", "é\u{1}"]), node("Bo\\b", &[])],
                relations: vec![relation.clone()],
                next_cursor: None,
            },
            GraphView { entities: vec![node("Ada", &[])], relations: vec![relation], next_cursor: Some("graph:1".into()) },
        ] {
            assert_eq!(view.render(), serde_json::to_string(&view).unwrap());
        }
    }
}
