//! Triage scoring (SPEC §6.2): five factors in [0, 1], deterministic (no model), each
//! with a reason a person can read.
//!
//! - **confidence** — evidence: a source session, concrete details (numbers, dates,
//!   identifiers), no hedging words ("maybe", "I think").
//! - **relevance** — overlap with the tenant's schema vocabulary and its existing org
//!   memory.
//! - **risk** — hazard, 0 = none: secrets (always rejected), personal data, destructive
//!   intent — found by the `sensitive` detector.
//! - **conflict** — 0 = none: a near-duplicate of an active entry (0.5), a declared
//!   supersession (0.2) or a contradiction of an active entry (1.0).
//! - **quality** — specificity and length.
//!
//! `total = w_c·confidence + w_rel·relevance + w_risk·(1 − risk) + w_con·(1 − conflict) +
//! w_q·quality`, with per-tenant weights ([`Policy`]).
//!
//! The score never overrides the rules that keep org truth governed, whatever the
//! weights: a secret is always rejected; personal data, any supersession (declared or
//! found) and any contradiction never auto-approve — a person decides (or, for personal
//! data, the tenant's rule rejects it).
//!
//! Every reason comes in two forms: the full one (naming conflicting entries, counting
//! words shared with org memory) for callers who may read org memory, and a public one
//! without entry ids, titles or counts for callers who may only write, so triage is no
//! oracle for memory they cannot read.

use std::collections::BTreeSet;

use domain::memory::MemoryEntry;
use domain::proposal::{Detected, TriageScore};
use domain::tenant::PersonalDataRule;
use serde::{Deserialize, Serialize};

/// Per-tenant weights and thresholds (defaults: SPEC §6.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub weights: [f64; 5],
    /// At or above: approved without a person.
    pub auto_approve: f64,
    /// Below: rejected with the reason.
    pub reject_below: f64,
    /// Personal data: a person decides, or rejected.
    pub personal_data: PersonalDataRule,
}

impl Default for Policy {
    fn default() -> Self {
        Self::from(&domain::tenant::TriagePolicy::default())
    }
}

impl From<&domain::tenant::TriagePolicy> for Policy {
    fn from(p: &domain::tenant::TriagePolicy) -> Self {
        Self { weights: p.weights, auto_approve: p.auto_approve, reject_below: p.reject_below, personal_data: p.personal_data }
    }
}

/// Where the score sends a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    AutoApprove,
    /// A person decides; `supersede` names the active entry approving it replaces (the
    /// one the proposer named, or the one triage found it contradicts).
    Human {
        supersede: Option<domain::Id>,
    },
    Reject {
        reason: String,
    },
}

/// What triage looks at.
pub struct Input<'a> {
    pub title: &'a str,
    pub body: &'a str,
    /// The proposal cites a session whose turns support it ([`supported_by`]).
    pub has_source_session: bool,
    /// The entry the proposer says it supersedes.
    pub supersedes: Option<&'a domain::Id>,
    /// Secrets found (and redacted) when the proposal was made.
    pub detected: &'a [Detected],
    /// Active org entries of the tenant.
    pub active: &'a [MemoryEntry],
    /// The tenant schema's entity types and field names.
    pub vocabulary: &'a BTreeSet<String>,
}

const HEDGES: [&str; 8] = ["maybe", "perhaps", "i think", "probably", "not sure", "might", "guess", "possibly"];
const DESTRUCTIVE: [&str; 10] = [
    "delete all",
    "drop table",
    "rm -rf",
    "wipe",
    "truncate table",
    "disable backups",
    "disable mfa",
    "turn off logging",
    "bypass approval",
    "grant admin to everyone",
];
const NEGATIONS: [&str; 9] = ["not", "never", "no", "no longer", "don't", "doesn't", "won't", "stop", "cannot"];

fn words(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

fn content_words(s: &str) -> BTreeSet<String> {
    const STOP: [&str; 24] = [
        "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "is", "are", "we", "our", "it", "be", "with", "at", "by",
        "this", "that", "as", "from", "will",
    ];
    words(s).into_iter().filter(|w| w.len() > 1 && !STOP.contains(&w.as_str()) && !NEGATIONS.contains(&w.as_str())).collect()
}

/// Words a sentence often starts with that name nothing.
const SENTENCE_STARTERS: &[&str] = &[
    "the",
    "a",
    "an",
    "and",
    "but",
    "or",
    "so",
    "maybe",
    "perhaps",
    "probably",
    "we",
    "our",
    "us",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "please",
    "note",
    "also",
    "when",
    "if",
    "after",
    "before",
    "from",
    "for",
    "in",
    "on",
    "at",
    "to",
    "my",
    "your",
    "their",
    "they",
    "he",
    "she",
    "you",
    "all",
    "every",
    "each",
    "some",
    "any",
    "no",
    "yes",
    "now",
    "then",
    "today",
    "tomorrow",
    "yesterday",
    "since",
    "until",
    "with",
    "without",
    "as",
    "by",
    "of",
    "new",
    "old",
    "next",
    "last",
    "first",
    "summary",
    "decision",
    "context",
    "consequences",
    "what",
    "who",
    "why",
    "how",
    "where",
    "which",
];

/// What a text is about: identifiers (a letter and a digit, `acct-7`, `INV-2041`, or two
/// words joined by a hyphen, `svc-billing`) and names (a capitalised word that does not
/// start a sentence, `Acme`), lower-cased, without a possessive `'s`.
fn subjects(s: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut sentence_start = true;
    // A line (a title, a list item) starts a sentence too.
    for raw in s.split(' ').flat_map(|chunk| {
        let mut parts = chunk.split('\n').peekable();
        std::iter::from_fn(move || parts.next().map(|p| (p, parts.peek().is_some())))
    }) {
        let (raw, line_ends) = raw;
        if raw.trim().is_empty() {
            if line_ends {
                sentence_start = true;
            }
            continue;
        }
        let token = raw.trim_matches(|c: char| !c.is_alphanumeric());
        let token = token.strip_suffix("'s").or_else(|| token.strip_suffix("’s")).unwrap_or(token);
        let ends_sentence = raw.ends_with(['.', '!', '?', ':', ';']);
        let n = token.chars().count();
        let letters = token.chars().any(char::is_alphabetic);
        let digits = token.chars().any(|c| c.is_ascii_digit());
        let capitalised = token.chars().next().is_some_and(char::is_uppercase) && token.chars().skip(1).any(char::is_lowercase);
        let joined = token.split_once('-').is_some_and(|(a, b)| {
            a.chars().count() >= 3
                && b.chars().count() >= 3
                && a.chars().all(char::is_alphabetic)
                && b.chars().all(char::is_alphanumeric)
        });
        // A sentence's first word is a name unless it is one of the words sentences start with.
        let starter = sentence_start && SENTENCE_STARTERS.contains(&token.to_lowercase().as_str());
        if (letters && digits && n >= 3) || joined || (capitalised && !starter && n >= 3) {
            out.insert(token.to_lowercase());
        }
        sentence_start = ends_sentence || line_ends;
    }
    out
}

/// A word's stem for comparing attributes: `invoiced`/`invoice`, `renews`/`renew`, and a
/// negated form with its plain one (`unpaid`/`paid`).
fn stem(w: &str) -> String {
    let w = ["un", "non"].iter().find_map(|p| w.strip_prefix(p).filter(|r| r.len() >= 4)).unwrap_or(w);
    let cut = ["ing", "ed", "es", "s", "d"].iter().find_map(|suffix| w.strip_suffix(suffix).filter(|r| r.len() >= 4));
    let w = cut.unwrap_or(w);
    w.strip_suffix('e').filter(|r| r.len() >= 4).unwrap_or(w).to_owned()
}

/// A quiet contradiction: both texts are about the same subject, say something of the
/// same attribute (a content word in common besides the subject, compared by stem), and
/// each holds a word the other does not — `acct-7 is on the gold support tier` then
/// `… the silver support tier`, `INV-2041 was paid` then `… is still unpaid`, whatever the
/// wording; or both say what the subject *is* (`X is a reseller`, `X is a direct
/// customer`). A text that only adds to the other (nothing of its own on one side) is not
/// one.
fn differs_in_a_value(new: &str, old: &str) -> bool {
    let shared: BTreeSet<String> = subjects(new).intersection(&subjects(old)).cloned().collect();
    if shared.is_empty() {
        return false;
    }
    let subject_words: BTreeSet<String> = shared.iter().flat_map(|s| words(s)).collect();
    let strip = |t: &str| -> BTreeSet<String> {
        content_words(t)
            .into_iter()
            .filter(|w| {
                let bare = w.trim_end_matches("'s").trim_end_matches("’s");
                !subject_words.contains(bare) && !shared.contains(bare)
            })
            .collect()
    };
    let (a, b) = (strip(new), strip(old));
    let stems_a: BTreeSet<String> = a.iter().map(|w| stem(w)).collect();
    let stems_b: BTreeSet<String> = b.iter().map(|w| stem(w)).collect();
    let common = stems_a.intersection(&stems_b).count();
    if common > 0 && a.difference(&b).next().is_some() && b.difference(&a).next().is_some() {
        return true;
    }
    // "X is a reseller partner" / "X is a direct customer": what X is, said twice.
    let (ln, lo) = (new.to_lowercase(), old.to_lowercase());
    shared.iter().any(|subject| {
        let is_a = |t: &str| {
            ["is a ", "is an ", "are a ", "are an "]
                .iter()
                .find_map(|c| t.split_once(&format!("{subject} {c}")).map(|(_, rest)| rest.trim().to_owned()))
        };
        matches!((is_a(&ln), is_a(&lo)), (Some(x), Some(y)) if x != y)
    })
}

/// Whether a session's turns support a proposal: the session has turns, and at least a
/// third of the proposal's content words (by stem) were said in them. Naming a session is
/// not grounding; what was said there is.
pub(crate) fn supported_by(proposal: &str, turns: &str) -> bool {
    let said: BTreeSet<String> = content_words(turns).iter().map(|w| stem(w)).collect();
    let ours: BTreeSet<String> = content_words(proposal).iter().map(|w| stem(w)).collect();
    if said.is_empty() || ours.is_empty() {
        return false;
    }
    ours.intersection(&said).count() * 3 >= ours.len()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    #[allow(clippy::cast_precision_loss)]
    let r = a.intersection(b).count() as f64 / a.union(b).count() as f64;
    r
}

fn negated(s: &str) -> bool {
    let w = words(s);
    let text = format!(" {} ", w.join(" "));
    NEGATIONS.iter().any(|n| text.contains(&format!(" {n} ")))
}

/// The numbers of a text that are not part of an identifier (`acct-7`'s 7 is not one).
fn figures(s: &str) -> BTreeSet<String> {
    let ids: BTreeSet<String> = subjects(s).iter().flat_map(|id| words(id)).collect();
    numbers(s).into_iter().filter(|n| !ids.contains(n)).collect()
}

fn numbers(s: &str) -> BTreeSet<String> {
    words(s).into_iter().filter(|w| w.chars().any(|c| c.is_ascii_digit())).collect()
}

fn clamp(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// A reason in its two forms (see the module docs).
struct Reasons {
    full: Vec<String>,
    public: Vec<String>,
}

impl Reasons {
    /// A reason that says nothing about org memory: the same for everyone.
    fn both(&mut self, r: String) {
        self.public.push(r.clone());
        self.full.push(r);
    }

    fn split(&mut self, full: String, public: &str) {
        self.full.push(full);
        self.public.push(public.to_owned());
    }
}

/// "an AWS secret access key (body, character 12)", for each secret.
fn secret_list(detected: &[Detected]) -> String {
    detected.iter().map(|d| format!("{} ({}, character {})", d.kind, d.field, d.at + 1)).collect::<Vec<_>>().join("; ")
}

/// Kinds of personal data in the text, each once, in order of appearance.
fn personal_kinds(text: &str) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = Vec::new();
    for f in sensitive::personal(text) {
        if !kinds.contains(&f.kind) {
            kinds.push(f.kind);
        }
    }
    kinds
}

/// Scores a proposal and routes it.
pub fn score(input: &Input<'_>, policy: &Policy) -> (TriageScore, Route) {
    let text = format!("{}\n{}", input.title, input.body);
    let lower = text.to_lowercase();
    let mut reasons = Reasons { full: Vec::new(), public: Vec::new() };

    // Confidence.
    let mut confidence: f64 = 0.55;
    if input.has_source_session {
        confidence += 0.25;
        reasons.both("confidence: grounded in a recorded session (what was said there supports it)".to_owned());
    } else {
        reasons.both("confidence: no source session cited".to_owned());
    }
    let concrete = !numbers(&text).is_empty();
    if concrete {
        confidence += 0.2;
    }
    let hedged: Vec<&str> = HEDGES.iter().copied().filter(|h| lower.contains(h)).collect();
    if !hedged.is_empty() {
        confidence -= 0.45;
        reasons.both(format!("confidence: hedged (\"{}\")", hedged.join("\", \"")));
    }
    let confidence = clamp(confidence);

    // Relevance.
    let cw = content_words(&text);
    let vocab_hits =
        cw.iter().filter(|w| input.vocabulary.contains(*w) || input.vocabulary.contains(w.trim_end_matches('s'))).count();
    let memory_vocab: BTreeSet<String> =
        input.active.iter().flat_map(|m| content_words(&format!("{} {}", m.title, m.body))).collect();
    let memory_hits = cw.iter().filter(|w| memory_vocab.contains(*w)).count();
    #[allow(clippy::cast_precision_loss)]
    let relevance = clamp(0.55 + 0.15 * vocab_hits.min(2) as f64 + 0.075 * memory_hits.min(2) as f64);
    reasons.split(
        format!("relevance: {vocab_hits} terms of the workspace's schema, {memory_hits} shared with its memory"),
        "relevance: compared with the workspace's schema and memory",
    );

    // Risk. Secrets were redacted when the proposal was made (`detected`); the text is
    // scanned again in case one slipped in some other way.
    let (suspected, mut secrets): (Vec<Detected>, Vec<Detected>) = input.detected.iter().cloned().partition(|d| d.suspected);
    for (field, value) in [("title", input.title), ("body", input.body)] {
        for f in sensitive::hidden(value).into_iter().filter(|f| f.class == sensitive::Class::Secret) {
            secrets.push(Detected {
                kind: f.kind.to_owned(),
                rule: f.rule.to_owned(),
                field: field.to_owned(),
                at: value[..f.start].chars().count(),
                fingerprint: String::new(),
                suspected: false,
            });
        }
    }
    let personal = personal_kinds(&text);
    let destructive: Vec<&str> = DESTRUCTIVE.iter().copied().filter(|d| lower.contains(d)).collect();
    let mut risk: f64 = 0.0;
    if !secrets.is_empty() {
        risk = 1.0;
        reasons.both(format!("risk: contains {}; secrets never become organisational memory", secret_list(&secrets)));
    }
    if !suspected.is_empty() {
        risk = risk.max(0.7);
        reasons.both(format!("risk: may hold a secret ({}); redacted, a person decides", secret_list(&suspected)));
    }
    if !personal.is_empty() {
        risk = risk.max(0.6);
        reasons.both(format!("risk: contains personal data ({})", personal.join(", ")));
    }
    if !destructive.is_empty() {
        risk = risk.max(0.8);
        reasons.both(format!("risk: destructive intent (\"{}\")", destructive.join("\", \"")));
    }
    if risk == 0.0 {
        reasons.both("risk: no secret, personal data or destructive intent found".to_owned());
    }

    // Conflict: a declared supersession, near-duplicates and contradictions of active entries.
    let mut conflict: f64 = 0.0;
    let mut contradicts = None;
    let mut near_duplicate = false;
    for m in input.active {
        if input.supersedes == Some(&m.id) {
            conflict = conflict.max(0.2);
            reasons.split(
                format!("conflict: replaces {} as declared (a person decides; its lineage will link both ways)", m.id),
                "conflict: replaces the entry it names; a person decides",
            );
            continue;
        }
        let other = format!("{} {}", m.title, m.body);
        let sim = jaccard(&cw, &content_words(&other));
        // A number of the entry no longer said (not one only added), outside identifiers.
        let (ours, theirs) = (figures(&text), figures(&other));
        let opposite = sim >= 0.5 && (negated(&text) != negated(&other) || (!theirs.is_empty() && !theirs.is_subset(&ours)));
        if opposite || differs_in_a_value(&text, &other) {
            conflict = 1.0;
            contradicts.get_or_insert_with(|| m.id.clone());
            reasons.split(
                format!(
                    "conflict: contradicts active entry {} (\"{}\"); a person decides whether it supersedes it",
                    m.id, m.title
                ),
                "conflict: may contradict active org memory; a person decides",
            );
        } else if sim >= 0.8 {
            conflict = conflict.max(0.5);
            near_duplicate = true;
            reasons.split(
                format!("conflict: near-duplicate of active entry {} (\"{}\")", m.id, m.title),
                "conflict: overlaps active org memory",
            );
        }
    }
    if input.supersedes.is_some() && conflict < 0.2 {
        // Named, but not (or no longer) an active entry triage was shown.
        conflict = 0.2;
        reasons.both("conflict: replaces the entry it names; a person decides".to_owned());
    }
    if conflict == 0.0 {
        reasons.split("conflict: no overlapping active entry".to_owned(), "conflict: compared with active org memory");
    }

    // Quality.
    let len = input.body.chars().count();
    let mut quality: f64 = match len {
        0..20 => 0.2,
        20..60 => 0.6,
        60..=2000 => 0.85,
        _ => 0.65,
    };
    if concrete {
        quality += 0.15;
    }
    if input.title.chars().count() < 8 {
        quality -= 0.2;
    }
    let quality = clamp(quality);
    reasons.both(format!("quality: {len} characters{}", if concrete { ", with concrete details" } else { "" }));

    let w = policy.weights;
    let sum: f64 = w.iter().sum::<f64>().max(f64::EPSILON);
    let total =
        clamp((w[0] * confidence + w[1] * relevance + w[2] * (1.0 - risk) + w[3] * (1.0 - conflict) + w[4] * quality) / sum);
    let total = (total * 1000.0).round() / 1000.0;

    // The rules first, then the score: nothing below decides by weights alone what must
    // be rejected or what a person must see.
    let supersede = input.supersedes.cloned().or(contradicts);
    let route = if !secrets.is_empty() {
        Route::Reject { reason: format!("contains {}; secrets are always rejected", secret_list(&secrets)) }
    } else if !personal.is_empty() && policy.personal_data == PersonalDataRule::Reject {
        Route::Reject {
            reason: format!(
                "contains personal data ({}); this workspace rejects personal data in organisational memory",
                personal.join(", ")
            ),
        }
    } else if !suspected.is_empty() || supersede.is_some() {
        // Maybe a credential, maybe an id (redacted already); or it would replace an active
        // entry, declared or found: a person looks, whatever the score.
        Route::Human { supersede }
    } else if total < policy.reject_below {
        let why: Vec<&str> = reasons
            .public
            .iter()
            .map(String::as_str)
            .filter(|r| r.starts_with("risk: contains") || r.contains("hedged") || r.starts_with("risk: destructive"))
            .chain(near_duplicate.then_some("conflict: overlaps active org memory"))
            .collect();
        Route::Reject { reason: format!("score {total:.2} is below {:.2}: {}", policy.reject_below, why.join("; ")) }
    } else if supersede.is_some() || !personal.is_empty() {
        Route::Human { supersede }
    } else if total >= policy.auto_approve {
        Route::AutoApprove
    } else {
        Route::Human { supersede: None }
    };
    let score = TriageScore {
        confidence,
        relevance,
        risk,
        conflict,
        quality,
        total,
        reasons: reasons.full,
        public_reasons: reasons.public,
    };
    (score, route)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, title: &str, body: &str) -> MemoryEntry {
        let now = domain::Timestamp(0);
        MemoryEntry {
            tenant: domain::TenantId::new("tn").unwrap(),
            id: domain::Id::new(id).unwrap(),
            memory_type: domain::memory::MemoryType::Org,
            scope: domain::memory::MemoryScope::Org,
            kind: "decision".into(),
            title: title.into(),
            body: body.into(),
            state: domain::memory::GovernanceState::Active,
            lineage: domain::memory::Lineage::default(),
            created_by: domain::Id::new("p").unwrap(),
            created_at: now,
            updated_at: now,
            version: 1,
            occurred_at: None,
            expires_at: None,
            metadata: None,
        }
    }

    fn run(
        title: &str,
        body: &str,
        supersedes: Option<&domain::Id>,
        active: &[MemoryEntry],
        policy: &Policy,
    ) -> (TriageScore, Route) {
        let vocabulary = BTreeSet::new();
        score(
            &Input { title, body, has_source_session: true, supersedes, detected: &[], active, vocabulary: &vocabulary },
            policy,
        )
    }

    const GOOD: &str = "Enterprise renewals are negotiated 90 days before the contract end date by the account owner.";

    /// Quiet contradictions (`tests/contradictions.jsonl`): 60 pairs where a proposal says
    /// something else of an active entry's subject and attribute, in varied wordings, none
    /// naming the entry it replaces — each must wait for a person, under a policy that
    /// would approve anything; and 30 compatible pairs (another attribute, an addition, a
    /// neighbouring subject), whose false alarms are counted and printed.
    /// Runs triage on each pair of a contradiction set: (held, pairs, held compatible, compatible, missed, alarms).
    fn contradiction_set(jsonl: &str) -> (usize, usize, usize, usize, Vec<String>, Vec<String>) {
        let lax = Policy { weights: [0.5, 0.5, 0.0, 0.0, 0.0], auto_approve: 0.01, reject_below: 0.0, ..Policy::default() };
        let (mut caught, mut positives, mut alarms, mut negatives) = (0, 0, Vec::new(), 0);
        let mut missed = Vec::new();
        for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            let (active, proposed) = (case["active"].as_str().unwrap(), case["proposed"].as_str().unwrap());
            let entries = [entry("old-1", active, active)];
            let (_, route) = run(proposed, proposed, None, &entries, &lax);
            let held = matches!(route, Route::Human { supersede: Some(_) });
            if case["contradiction"] == true {
                positives += 1;
                if held {
                    caught += 1;
                } else {
                    missed.push(format!("{active:?} → {proposed:?}"));
                }
            } else {
                negatives += 1;
                if held {
                    alarms.push(format!("{active:?} → {proposed:?}"));
                }
            }
        }
        let n = alarms.len();
        (caught, positives, n, negatives, missed, alarms)
    }

    #[test]
    fn quiet_contradictions_wait_for_a_person_whatever_the_wording() {
        let (caught, positives, alarms, negatives, missed, false_alarms) =
            contradiction_set(include_str!("../../tests/contradictions.jsonl"));
        eprintln!(
            "quiet contradictions (tune): {caught}/{positives} held; false alarms {alarms}/{negatives}\n{missed:#?}\n{false_alarms:#?}"
        );
        assert!(positives >= 50 && negatives >= 20);
        assert!(caught * 100 >= positives * 95, "{caught}/{positives}: {missed:#?}");
        assert!(alarms * 4 <= negatives, "{alarms} of {negatives} compatible pairs held: {false_alarms:#?}");
        // Written after the rule was finished and never tuned on: reported, held to a floor.
        let (caught, positives, alarms, negatives, missed, false_alarms) =
            contradiction_set(include_str!("../../tests/contradictions-held.jsonl"));
        eprintln!(
            "quiet contradictions (held out): {caught}/{positives} held; false alarms {alarms}/{negatives}\n{missed:#?}\n{false_alarms:#?}"
        );
        assert!(caught * 100 >= positives * 75, "held out: {caught}/{positives}");
        assert!(alarms * 3 <= negatives, "held out: {alarms} of {negatives} compatible pairs held");
    }

    #[test]
    fn a_clean_specific_proposal_is_auto_approved() {
        let (s, route) = run("Renewal lead time", GOOD, None, &[], &Policy::default());
        assert_eq!(route, Route::AutoApprove, "{s:?}");
    }

    #[test]
    fn a_declared_supersession_always_waits_for_a_person() {
        let old = entry("m1", "Renewal lead time", "Renewals are negotiated 60 days before the end date.");
        // Even with weights that ignore conflict entirely and a bar anyone clears.
        let lax = Policy { weights: [0.5, 0.5, 0.0, 0.0, 0.0], auto_approve: 0.01, reject_below: 0.0, ..Policy::default() };
        let (s, route) = run("Renewal lead time", GOOD, Some(&old.id), std::slice::from_ref(&old), &lax);
        assert_eq!(route, Route::Human { supersede: Some(old.id.clone()) }, "{s:?}");
        // Named but not among the entries compared: still a person.
        let (_, route) = run("Renewal lead time", GOOD, Some(&old.id), &[], &lax);
        assert_eq!(route, Route::Human { supersede: Some(old.id) });
    }

    #[test]
    fn a_contradiction_waits_for_a_person_with_a_supersede_suggestion() {
        let old = entry(
            "m1",
            "Renewal lead time",
            "Enterprise renewals are negotiated 60 days before the contract end date by the account owner.",
        );
        let lax = Policy { auto_approve: 0.01, reject_below: 0.0, ..Policy::default() };
        let (s, route) = run("Renewal lead time", GOOD, None, std::slice::from_ref(&old), &lax);
        assert_eq!(route, Route::Human { supersede: Some(old.id.clone()) });
        assert!(s.reasons.iter().any(|r| r.contains("m1")));
        assert!(s.public_reasons.iter().all(|r| !r.contains("m1") && !r.contains("Renewal lead")), "{:?}", s.public_reasons);
    }

    #[test]
    fn personal_data_never_auto_approves_and_the_tenant_may_reject_it() {
        let body = format!("{GOOD} The customer's card is 4111 1111 1111 1111.");
        let lax = Policy { auto_approve: 0.01, reject_below: 0.0, ..Policy::default() };
        let (_, route) = run("Renewal lead time", &body, None, &[], &lax);
        assert_eq!(route, Route::Human { supersede: None });
        let strict = Policy { personal_data: PersonalDataRule::Reject, ..lax };
        let (_, route) = run("Renewal lead time", &body, None, &[], &strict);
        assert!(matches!(route, Route::Reject { reason } if reason.contains("payment card") && !reason.contains("4111")));
    }

    #[test]
    fn a_secret_is_always_rejected_naming_kind_and_place_only() {
        let body = format!("{GOOD} aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
        let lax = Policy { weights: [1.0, 0.0, 0.0, 0.0, 0.0], auto_approve: 0.01, reject_below: 0.0, ..Policy::default() };
        let (s, route) = run("Renewal lead time", &body, None, &[], &lax);
        let Route::Reject { reason } = route else { panic!("{s:?}") };
        assert!(reason.contains("secret") && reason.contains("body, character"), "{reason}");
        assert!(!reason.contains("wJalr"));
    }

    #[test]
    fn public_reasons_name_no_entry_and_count_nothing() {
        let a = entry("m-alpha", "Churn playbook", "Churn risk accounts get a success plan within 5 days.");
        let b = entry(
            "m-beta",
            "Renewal lead time",
            "Enterprise renewals are negotiated 90 days before the contract end date by the account owner.",
        );
        let (s, _) = run("Renewal lead time", GOOD, None, &[a, b], &Policy::default());
        for r in &s.public_reasons {
            assert!(!r.contains("m-alpha") && !r.contains("m-beta") && !r.contains("Churn"), "{r}");
            // Counts of anything in org memory are digits; only the proposal's own length is.
            assert!(r.starts_with("quality") || !r.chars().any(|c| c.is_ascii_digit()), "{r}");
        }
        assert!(s.reasons.iter().any(|r| r.contains("m-beta")), "{:?}", s.reasons);
    }
}
