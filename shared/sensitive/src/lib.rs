//! Finds secrets (credentials, keys, tokens) and personal data (card numbers, national ids,
//! IBANs, e-mail addresses) in free text, by rule and byte position. Pure: no I/O, no state.
//!
//! Governance of the organisation's memory must reject any proposal that carries a secret
//! and must never auto-approve one that carries personal data. A detector that only matches
//! token prefixes is easy to step around (`aws_access_key_id=AKIA…`, a private-key body
//! without its `BEGIN` line, a password in a sentence or a connection string, a card number
//! written with dots), so this crate combines four kinds of evidence:
//!
//! - **shape**: provider tokens with a fixed prefix and length (`ghp_…`, `sk_live_…`);
//! - **checksums**: Luhn, ISO 7064 mod 97, Verhoeff, 11-proof and national check letters,
//!   so that a number is reported only when it could really be a card or an id;
//! - **context**: a value counts when a credential word stands just before it
//!   (`aws_secret_access_key`, `password is`, `SSN`), on the same line;
//! - **randomness**: Shannon entropy and a "made of words" test separate generated
//!   tokens from identifiers, paths, versions and hashes.
//!
//! A finding locates only the sensitive *value* (for `password=hunter22`, the bytes of
//! `hunter22`), so a caller can redact it and keep the rest of the text.
//!
//! Scanning is fast and linear: every regular expression is compiled once and, with few
//! exceptions, starts with a literal that the regex crate finds with SIMD; the detectors
//! that have no such literal run only when a keyword search over the text wakes them.
//! Context is never looked for further than a bounded window, so even adversarial inputs
//! (64 KiB of one repeated token) stay in milliseconds.
//!
//! Layout: `rules` lists every rule (id, kind, class: [`RULES`]), `secrets` and `personal` hold the detectors, `engine` runs them and resolves
//! overlaps, `checks` holds the check-digit algorithms, `placeholder` says which values are
//! stand-ins rather than secrets, `text` has the shared position and shape helpers, and
//! `deep` reads a text again in disguise (normalised, rejoined, reversed, decoded) for
//! [`scan_deep`].
//!
//! ```
//! let text = "export aws_access_key_id=AKIAIOSFODNN7EXAMPLE";
//! let found = sensitive::scan(text);
//! assert_eq!(found[0].rule, "aws-access-key-id");
//! assert_eq!(&text[found[0].start..found[0].end], "AKIAIOSFODNN7EXAMPLE");
//! let clean = sensitive::redact(text, &found, |f, _| format!("[{}]", f.rule));
//! assert_eq!(clean, "export aws_access_key_id=[aws-access-key-id]");
//! ```

mod checks;
mod deep;
mod engine;
mod personal;
mod placeholder;
mod rules;
mod secrets;
mod text;

pub use rules::RULES;

/// What harm a finding does when it leaks, which decides what governance does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// A credential: whoever reads it can act as its owner. Governance rejects the proposal.
    Secret,
    /// Data about a person. Governance never auto-approves the proposal.
    Personal,
    /// Random-looking text that may be a credential, found with no other evidence
    /// ([`scan_deep`] only). Governance redacts it and lets a person decide.
    Suspect,
}

/// One sensitive value found in a scanned text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Stable rule id, kebab-case, e.g. "aws-access-key-id", "aws-secret-access-key", "private-key", "payment-card", "iban", "us-ssn".
    pub rule: &'static str,
    /// What it is, for a person, with an article: "an AWS secret access key", "a payment card number".
    pub kind: &'static str,
    /// Whether the value is a secret or personal data.
    pub class: Class,
    /// Start of the byte range of the sensitive VALUE in the scanned text (only the value: for
    /// `password=hunter22` the range covers `hunter22`, not the key name); always on a char boundary.
    pub start: usize,
    /// End (exclusive) of the byte range of the value; always on a char boundary.
    pub end: usize,
}

/// All findings in `text`, sorted by start and non-overlapping: where two findings overlap,
/// a secret wins over personal data, then the longer one, then the more specific rule.
///
/// Never panics, whatever the input (any UTF-8, control characters, tens of kilobytes).
pub fn scan(text: &str) -> Vec<Finding> {
    engine::scan(text)
}

/// What governance reads before anything becomes organisational memory: every finding of
/// [`scan`], the secrets the other readings of the text show — Unicode-normalised (NFKC,
/// zero-width and bidi characters removed), split tokens rejoined, reversed, and base64,
/// hex or percent-encoded segments decoded (recursively, bounded) — and random-looking
/// tokens anywhere as [`Class::Suspect`]. Sorted, without overlaps; ranges are on `text`.
pub fn scan_deep(text: &str) -> Vec<Finding> {
    deep::scan(text)
}

/// The secrets and suspects of [`scan_deep`]: what must be redacted before a text is kept.
pub fn hidden(text: &str) -> Vec<Finding> {
    scan_deep(text).into_iter().filter(|f| f.class != Class::Personal).collect()
}

/// The secrets in `text`: [`scan`] filtered to [`Class::Secret`].
pub fn secrets(text: &str) -> Vec<Finding> {
    of_class(text, Class::Secret)
}

/// The personal data in `text`: [`scan`] filtered to [`Class::Personal`].
pub fn personal(text: &str) -> Vec<Finding> {
    of_class(text, Class::Personal)
}

fn of_class(text: &str, class: Class) -> Vec<Finding> {
    scan(text).into_iter().filter(|f| f.class == class).collect()
}

/// `text` with each finding's range replaced by `replacement(finding, value)`; the other text
/// is unchanged. Findings may come in any order; one that overlaps an earlier replaced one,
/// or whose range is not a valid range of `text`, is skipped.
pub fn redact(text: &str, findings: &[Finding], replacement: impl Fn(&Finding, &str) -> String) -> String {
    let mut ordered: Vec<&Finding> = findings.iter().collect();
    ordered.sort_by_key(|f| (f.start, f.end));
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for f in ordered {
        if f.start < copied {
            continue;
        }
        let (Some(before), Some(value)) = (text.get(copied..f.start), text.get(f.start..f.end)) else {
            continue;
        };
        out.push_str(before);
        out.push_str(&replacement(f, value));
        copied = f.end;
    }
    out.push_str(text.get(copied..).unwrap_or_default());
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn redact_replaces_only_the_values() {
        let text = "password=hunter22 and card 4111 1111 1111 1111.";
        let found = scan(text);
        assert_eq!(found.len(), 2, "{found:?}");
        let out = redact(text, &found, |f, v| format!("<{}:{}>", f.rule, v.len()));
        assert_eq!(out, "password=<password-assignment:8> and card <payment-card:19>.");
    }

    #[test]
    fn redact_skips_overlaps_and_bad_ranges() {
        let f = |start, end| Finding { rule: "x", kind: "an x", class: Class::Secret, start, end };
        let text = "héllo world";
        // 'é' is bytes 1..3: (0,2) cuts it and is skipped, (2,3) overlaps (1,3), (40,50) is out of range.
        let out = redact(text, &[f(7, 12), f(0, 2), f(1, 3), f(2, 3), f(40, 50)], |_, _| "#".into());
        assert_eq!(out, "h#llo #");
    }

    #[test]
    fn classes_filter() {
        let text = "ghp_0123456789abcdefghijABCDEFGHIJ012345 mail jane.doe@gmail.com";
        assert_eq!(secrets(text).len(), 1);
        assert_eq!(personal(text).len(), 1);
        assert_eq!(personal(text)[0].rule, "private-email-address");
    }
}
