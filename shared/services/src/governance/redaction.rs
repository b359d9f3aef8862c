//! Secrets and personal data in proposals (SPEC §6.2, §10), found by the `sensitive`
//! detector.
//!
//! - A **secret** is redacted before a proposal is stored or echoed: the value is
//!   replaced by `[redacted: {kind} #{fingerprint}]` and only its kind, place and
//!   fingerprint are kept ([`Detected`]). Triage then always rejects the proposal, saying
//!   what kind and where — never the value.
//! - **Personal data** stays in the stored proposal while it waits (a person may approve
//!   it into org memory), but every view of a proposal masks it ([`mask_personal`]) —
//!   the approver's too — and a rejected or expired proposal is stored masked.
//! - [`needs_a_person`] is the governance invariant the writer checks last: a proposal
//!   holding a secret or personal data, or replacing an entry, is never written unless a
//!   person approved it.

use domain::TenantId;
use domain::proposal::{Detected, Proposal, ProposalState};
use sha2::{Digest as _, Sha256};

/// The first 12 hex digits of SHA-256 of `{tenant}\n{value}`: recognises a known
/// credential (an operator can compute it for a key they hold) without revealing it.
pub fn fingerprint(tenant: &TenantId, value: &str) -> String {
    let digest = Sha256::digest(format!("{tenant}\n{value}").as_bytes());
    hex::encode(&digest[..6])
}

/// Replaces every secret — and every token that may be one — in `text` with its marker,
/// recording each in `found`. The text is read as written and in disguise
/// ([`sensitive::hidden`]: normalised, rejoined, reversed, decoded), so a credential
/// wrapped in base64 or hidden with zero-width characters is redacted too.
pub(crate) fn redact_field(tenant: &TenantId, field: &str, text: &str, found: &mut Vec<Detected>) -> String {
    let secrets = sensitive::hidden(text);
    if secrets.is_empty() {
        return text.to_owned();
    }
    for f in &secrets {
        found.push(Detected {
            kind: f.kind.to_owned(),
            rule: f.rule.to_owned(),
            field: field.to_owned(),
            at: text[..f.start].chars().count(),
            fingerprint: fingerprint(tenant, &text[f.start..f.end]),
            suspected: f.class == sensitive::Class::Suspect,
        });
    }
    sensitive::redact(text, &secrets, |f, value| format!("[redacted: {} #{}]", f.kind, fingerprint(tenant, value)))
}

/// `text` with every secret and suspect replaced by its marker (for fields that are kept
/// but not part of a proposal's record of what was found).
pub fn redacted(tenant: &TenantId, text: &str) -> String {
    redact_field(tenant, "", text, &mut Vec::new())
}

/// Every text a proposal carries besides its title and body — an action's target and
/// parameters, a proposed entity's attributes (at any depth) — with its field name.
fn action_texts(p: &mut Proposal) -> Vec<(String, &mut String)> {
    fn walk<'a>(name: String, v: &'a mut domain::value::Value, out: &mut Vec<(String, &'a mut String)>) {
        use domain::value::Value;
        match v {
            Value::Text(s) => out.push((name, s)),
            Value::List(items) => items.iter_mut().enumerate().for_each(|(i, x)| walk(format!("{name}.{i}"), x, out)),
            Value::Map(m) => m.iter_mut().for_each(|(k, x)| walk(format!("{name}.{k}"), x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(a) = &mut p.action {
        out.push(("action.target".to_owned(), &mut a.request.target));
        for (k, v) in &mut a.request.params {
            walk(format!("action.params.{k}"), v, &mut out);
        }
    }
    if let Some(e) = &mut p.entity {
        for (k, v) in &mut e.attributes {
            walk(format!("entity.attributes.{k}"), v, &mut out);
        }
    }
    out
}

/// Redacts every secret in a new proposal's title, body, action target and parameters and
/// proposed entity's attributes (before it is stored), and records what was found.
/// Idempotent: a marker is not a secret.
pub fn redact_secrets(p: &mut Proposal) {
    let mut found = Vec::new();
    let tenant = p.tenant.clone();
    p.title = redact_field(&tenant, "title", &p.title, &mut found);
    p.body = redact_field(&tenant, "body", &p.body, &mut found);
    for (field, text) in action_texts(p) {
        *text = redact_field(&tenant, &field, text, &mut found);
    }
    p.detected.extend(found);
}

/// `text` with each piece of personal data replaced by `[personal data: {kind}]`.
pub fn mask_personal(text: &str) -> String {
    let found = sensitive::personal(text);
    if found.is_empty() {
        return text.to_owned();
    }
    sensitive::redact(text, &found, |f, _| format!("[personal data: {}]", f.kind))
}

/// Whether the proposal's text holds personal data.
pub fn has_personal(p: &Proposal) -> bool {
    let mut q = p.clone();
    !sensitive::personal(&p.title).is_empty()
        || !sensitive::personal(&p.body).is_empty()
        || action_texts(&mut q).into_iter().any(|(_, t)| !sensitive::personal(t).is_empty())
}

/// The proposal as any person or client sees it: the wait's token removed and personal
/// data masked.
#[must_use]
pub fn view(mut p: Proposal) -> Proposal {
    mask_for_keeping(&mut p);
    p.redacted()
}

/// The proposal as it is kept once it can no longer be written (rejected, expired,
/// failed): personal data masked for good.
pub fn mask_for_keeping(p: &mut Proposal) {
    p.title = mask_personal(&p.title);
    p.body = mask_personal(&p.body);
    for (_, text) in action_texts(p) {
        *text = mask_personal(text);
    }
}

/// Why `p` may not be written without a person's decision, if it may not: it holds a
/// secret, personal data, or replaces an active entry. Only an `approved` proposal (a
/// person decided) passes with those.
pub fn needs_a_person(p: &Proposal) -> Option<&'static str> {
    if p.state == ProposalState::Approved {
        return None;
    }
    if p.detected.iter().any(|d| !d.suspected)
        || !sensitive::secrets(&p.title).is_empty()
        || !sensitive::secrets(&p.body).is_empty()
    {
        return Some("it holds a secret");
    }
    if !p.detected.is_empty() {
        return Some("it may hold a secret");
    }
    if p.supersedes.is_some() || p.suggested_supersede.is_some() {
        return Some("it replaces an active entry");
    }
    if has_personal(p) {
        return Some("it holds personal data");
    }
    always_a_person(p)
}

/// Why `p` always needs a person, whatever its score: it acts in another system, or
/// creates a Spine entity (agents never write the Spine by themselves).
pub fn always_a_person(p: &Proposal) -> Option<&'static str> {
    if p.action.is_some() {
        return Some("it acts in a connected system");
    }
    if p.kind.starts_with("entity:") {
        return Some("it creates a Spine entity");
    }
    if p.kind.starts_with("book:") {
        return Some("it writes the book of projects");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proposal(title: &str, body: &str) -> Proposal {
        let now = domain::Timestamp(0);
        Proposal {
            tenant: TenantId::new("acme").unwrap(),
            id: domain::Id::new("p1").unwrap(),
            kind: "memory:decision".into(),
            title: title.into(),
            body: body.into(),
            supersedes: None,
            suggested_supersede: None,
            state: ProposalState::Pending,
            score: None,
            decision_reason: None,
            proposed_by: domain::Id::new("u1").unwrap(),
            proposed_via: None,
            source_session: None,
            origin: None,
            wait: None,
            action: None,
            entity: None,
            detected: Vec::new(),
            created_at: now,
            updated_at: now,
            version: 1,
        }
    }

    #[test]
    fn secrets_are_replaced_by_kind_and_fingerprint_and_redaction_is_idempotent() {
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let mut p = proposal("Deploy notes", &format!("set aws_secret_access_key={secret} before deploying"));
        redact_secrets(&mut p);
        assert!(!p.body.contains(secret), "{}", p.body);
        assert!(p.body.contains("[redacted: "), "{}", p.body);
        assert_eq!(p.detected.len(), 1, "{:?}", p.detected);
        let d = &p.detected[0];
        assert_eq!((d.field.as_str(), d.at), ("body", "set aws_secret_access_key=".len()));
        assert_eq!(d.fingerprint, fingerprint(&p.tenant, secret));
        let before = p.clone();
        redact_secrets(&mut p);
        assert_eq!(p, before, "a marker is not a secret");
        assert_eq!(needs_a_person(&p), Some("it holds a secret"));
    }

    #[test]
    fn personal_data_is_masked_in_views_and_needs_a_person() {
        let p = proposal("Billing contact", "Refund to card 4111-1111-1111-1111 as agreed.");
        let shown = view(p.clone());
        assert!(!shown.body.contains("4111"), "{}", shown.body);
        assert!(shown.body.contains("[personal data: "), "{}", shown.body);
        assert_eq!(needs_a_person(&p), Some("it holds personal data"));
        let mut approved = p;
        approved.state = ProposalState::Approved;
        assert_eq!(needs_a_person(&approved), None, "a person decided");
    }

    #[test]
    fn a_supersession_needs_a_person() {
        let mut p = proposal("Renewal lead time", "Renewals start 90 days out.");
        assert_eq!(needs_a_person(&p), None);
        p.suggested_supersede = Some(domain::Id::new("m1").unwrap());
        assert_eq!(needs_a_person(&p), Some("it replaces an active entry"));
    }
}
