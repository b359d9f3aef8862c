//! Triage scoring (SPEC §6.2): five factors in [0, 1], deterministic (no model), each
//! with a reason a person can read.
//!
//! - **confidence** — evidence: a source session, concrete details (numbers, dates,
//!   identifiers), no hedging words ("maybe", "I think").
//! - **relevance** — overlap with the tenant's schema vocabulary and its existing org
//!   memory.
//! - **risk** — hazard, 0 = none: secrets (always rejected), personal data, destructive
//!   intent.
//! - **conflict** — 0 = none: a near-duplicate of an active entry (0.5) or a
//!   contradiction of one (1.0: a person decides, with a supersede suggestion).
//! - **quality** — specificity and length.
//!
//! `total = w_c·confidence + w_rel·relevance + w_risk·(1 − risk) + w_con·(1 − conflict) +
//! w_q·quality`, with per-tenant weights ([`Policy`]).

use std::collections::BTreeSet;

use domain::memory::MemoryEntry;
use domain::proposal::TriageScore;
use serde::{Deserialize, Serialize};

/// Per-tenant weights and thresholds (defaults: SPEC §6.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub weights: [f64; 5],
    /// At or above: approved without a person.
    pub auto_approve: f64,
    /// Below: rejected with the reason.
    pub reject_below: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Self::from(&domain::tenant::TriagePolicy::default())
    }
}

impl From<&domain::tenant::TriagePolicy> for Policy {
    fn from(p: &domain::tenant::TriagePolicy) -> Self {
        Self { weights: p.weights, auto_approve: p.auto_approve, reject_below: p.reject_below }
    }
}

/// Where the score sends a proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    AutoApprove,
    /// A person decides; `supersede` names the active entry a contradiction would replace.
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
    pub has_source_session: bool,
    /// The entry the proposer says it supersedes.
    pub supersedes: Option<&'a domain::Id>,
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

fn numbers(s: &str) -> BTreeSet<String> {
    words(s).into_iter().filter(|w| w.chars().any(|c| c.is_ascii_digit())).collect()
}

/// A secret in the text, named by kind (never echoing it).
pub fn find_secret(s: &str) -> Option<&'static str> {
    let lower = s.to_lowercase();
    if s.contains("-----BEGIN") && s.contains("PRIVATE KEY") {
        return Some("a private key");
    }
    let tokens: Vec<&str> = s.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '(' | ')')).collect();
    for t in &tokens {
        let t = t.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        if (t.starts_with("AKIA") || t.starts_with("ASIA"))
            && t.len() == 20
            && t.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            return Some("an AWS access key");
        }
        if ["sk_live_", "rk_live_", "ghp_", "gho_", "xoxb-", "xoxp-", "ctn_", "glpat-"].iter().any(|p| t.starts_with(p))
            && t.len() >= 20
        {
            return Some("an API token");
        }
        if t.starts_with("eyJ") && t.matches('.').count() == 2 && t.len() > 40 {
            return Some("a bearer token (JWT)");
        }
    }
    for key in ["password=", "password:", "passwd=", "secret=", "api_key=", "apikey=", "client_secret="] {
        if let Some(i) = lower.find(key) {
            let rest = lower[i + key.len()..].trim_start();
            if rest.chars().take_while(|c| !c.is_whitespace()).count() >= 6 {
                return Some("a password or secret value");
            }
        }
    }
    None
}

fn luhn(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { *d })
        .sum();
    sum.is_multiple_of(10)
}

/// Personal data in the text, by kind.
pub fn find_pii(s: &str) -> Option<&'static str> {
    for t in s.split_whitespace() {
        let t = t.trim_matches(|c: char| !(c.is_alphanumeric() || c == '@' || c == '.' || c == '-' || c == '_' || c == '+'));
        if let Some((local, domain)) = t.split_once('@')
            && !local.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
        {
            return Some("an e-mail address");
        }
    }
    // Digit runs, allowing single spaces or dashes between groups (card formatting).
    let chars: Vec<char> = s.chars().collect();
    let mut run: Vec<u32> = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        if let Some(d) = c.to_digit(10) {
            run.push(d);
            continue;
        }
        let joins = matches!(c, ' ' | '-')
            && !run.is_empty()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit)
            && chars.get(i.wrapping_sub(1)).is_some_and(char::is_ascii_digit);
        if !joins {
            if (13..=19).contains(&run.len()) && luhn(&run) {
                return Some("a payment card number");
            }
            run.clear();
        }
    }
    if (13..=19).contains(&run.len()) && luhn(&run) {
        return Some("a payment card number");
    }
    let lower = s.to_lowercase();
    if ["ssn", "social security", "passport number", "date of birth"].iter().any(|k| lower.contains(k)) {
        return Some("a personal identifier");
    }
    None
}

fn clamp(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// Scores a proposal and routes it.
pub fn score(input: &Input<'_>, policy: &Policy) -> (TriageScore, Route) {
    let text = format!("{}\n{}", input.title, input.body);
    let lower = text.to_lowercase();
    let mut reasons = Vec::new();

    // Confidence.
    let mut confidence: f64 = 0.55;
    if input.has_source_session {
        confidence += 0.25;
        reasons.push("confidence: grounded in a recorded session".to_owned());
    } else {
        reasons.push("confidence: no source session cited".to_owned());
    }
    let concrete = !numbers(&text).is_empty();
    if concrete {
        confidence += 0.2;
    }
    let hedged: Vec<&str> = HEDGES.iter().copied().filter(|h| lower.contains(h)).collect();
    if !hedged.is_empty() {
        confidence -= 0.45;
        reasons.push(format!("confidence: hedged (\"{}\")", hedged.join("\", \"")));
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
    reasons.push(format!("relevance: {vocab_hits} terms of the workspace's schema, {memory_hits} shared with its memory"));

    // Risk.
    let secret = find_secret(&text);
    let pii = find_pii(&text);
    let destructive: Vec<&str> = DESTRUCTIVE.iter().copied().filter(|d| lower.contains(d)).collect();
    let mut risk: f64 = 0.0;
    if let Some(kind) = secret {
        risk = 1.0;
        reasons.push(format!("risk: contains {kind}; secrets never become organisational memory"));
    }
    if let Some(kind) = pii {
        risk = risk.max(0.6);
        reasons.push(format!("risk: contains {kind} (personal data)"));
    }
    if !destructive.is_empty() {
        risk = risk.max(0.8);
        reasons.push(format!("risk: destructive intent (\"{}\")", destructive.join("\", \"")));
    }
    if risk == 0.0 {
        reasons.push("risk: no secret, personal data or destructive intent found".to_owned());
    }

    // Conflict: near-duplicates and contradictions of active entries.
    let mut conflict: f64 = 0.0;
    let mut supersede = None;
    for m in input.active {
        let other = format!("{} {}", m.title, m.body);
        let sim = jaccard(&cw, &content_words(&other));
        let declared = input.supersedes == Some(&m.id);
        if declared {
            conflict = conflict.max(0.2);
            reasons.push(format!("conflict: replaces {} as declared (its lineage will link both ways)", m.id));
            continue;
        }
        if sim >= 0.5 && (negated(&text) != negated(&other) || (numbers(&text) != numbers(&other) && !numbers(&other).is_empty()))
        {
            conflict = 1.0;
            supersede = Some(m.id.clone());
            reasons.push(format!(
                "conflict: contradicts active entry {} (\"{}\"); a person decides whether it supersedes it",
                m.id, m.title
            ));
        } else if sim >= 0.8 {
            conflict = conflict.max(0.5);
            reasons.push(format!("conflict: near-duplicate of active entry {} (\"{}\")", m.id, m.title));
        }
    }
    if conflict == 0.0 {
        reasons.push("conflict: no overlapping active entry".to_owned());
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
    reasons.push(format!("quality: {len} characters{}", if concrete { ", with concrete details" } else { "" }));

    let w = policy.weights;
    let sum: f64 = w.iter().sum::<f64>().max(f64::EPSILON);
    let total =
        clamp((w[0] * confidence + w[1] * relevance + w[2] * (1.0 - risk) + w[3] * (1.0 - conflict) + w[4] * quality) / sum);
    let total = (total * 1000.0).round() / 1000.0;
    let score = TriageScore { confidence, relevance, risk, conflict, quality, total, reasons };

    let route = if let Some(kind) = secret {
        Route::Reject { reason: format!("contains {kind}; secrets are always rejected") }
    } else if supersede.is_some() {
        Route::Human { supersede }
    } else if total >= policy.auto_approve {
        Route::AutoApprove
    } else if total < policy.reject_below {
        Route::Reject {
            reason: format!(
                "score {total:.2} is below {:.2}: {}",
                policy.reject_below,
                score
                    .reasons
                    .iter()
                    .filter(|r| r.starts_with("risk: contains")
                        || r.contains("hedged")
                        || r.starts_with("risk: destructive")
                        || r.starts_with("conflict: near"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }
    } else {
        Route::Human { supersede: None }
    };
    (score, route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_pii_are_found_by_kind() {
        assert_eq!(find_secret("use AKIAABCDEFGHIJKLMNOP for the bucket"), Some("an AWS access key"));
        assert_eq!(find_secret("the token is sk_live_51Habcdefghijklmnop"), Some("an API token"));
        assert_eq!(find_secret("db password= hunter22 for prod"), Some("a password or secret value"));
        assert_eq!(find_secret("-----BEGIN RSA PRIVATE KEY-----\nMII"), Some("a private key"));
        assert_eq!(find_secret("we rotate passwords quarterly"), None);
        assert_eq!(find_pii("mail ada@acme.example about it"), Some("an e-mail address"));
        assert_eq!(find_pii("card 4111 1111 1111 1111 on file"), Some("a payment card number"));
        assert_eq!(find_pii("renewals are due 30 days before 2026-12-01"), None);
    }
}
