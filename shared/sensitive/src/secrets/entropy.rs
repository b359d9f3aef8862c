//! Unknown secrets: a high-entropy token right after a credential word ("the deploy token is
//! Zx81kQ9vLm2pR7sTq4", "signing key: 9f8e…").
//!
//! The scan is driven by the credential words: only the [`WINDOW`] bytes after each of them
//! are read for tokens, so ordinary text costs one literal search. A token (16+ characters
//! of `[A-Za-z0-9+/_.~-]`, optional `=` padding) is reported when:
//! - a credential word (`token`, `secret`, `key`, `api key`, `credential`, `auth`, `bearer`,
//!   `access`, `private`, `signing`, `password`…) stands within [`WINDOW`] bytes before it on
//!   its line, as a label rather than a name in code (`key.verify(…)`), with no word that
//!   names a non-secret value between them (`key id`, `commit`, `sha256`, `digest`,
//!   `request`, `trace`, `order`, `version`…), and no pagination word (`next_page_token`);
//! - it has letters and digits, is not made of words (identifiers, paths, versions), not
//!   code (`0x…` literals, `self.…`, `Name::`, `Name(`), not a UUID (a record id) and not a
//!   key that is public by design (`pk_live_…`);
//! - its Shannon entropy is at least [`MIN_ENTROPY`] bits per character. Hex-only tokens
//!   (digests, UUIDs) have at most 4 bits, so they need [`MIN_HEX_ENTROPY`] and a strong
//!   credential word (`secret`, `key`, `token`, `password`, `credential`), not a weak one
//!   (`access`, `auth`, `private`).

use crate::Finding;
use crate::checks::shannon;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::placeholder::is_placeholder;
use crate::rules::HIGH_ENTROPY_SECRET;
use crate::text::{Shape, before, line_end_within, word_like};

/// Credential words, strong and weak, in the lower-cased text.
static CREDENTIAL_WORD: Lazy =
    Lazy::new(|| Re::new("secret|key|token|passw|pwd|passphrase|cred|auth|bearer|access|private|signing"));

const WINDOW: usize = 32;
/// Room for a whole credential word that ends inside the window.
const LONGEST_WORD: usize = 12;
const MAX_LEN: usize = 512;
/// Bits per character; random base64 of 16+ characters is above 3.6, English words below 3.3.
const MIN_ENTROPY: f64 = 3.5;
const MIN_HEX_ENTROPY: f64 = 3.0;

const STRONG_WORDS: &[&str] = &[
    "secret",
    "secrets",
    "key",
    "keys",
    "apikey",
    "token",
    "tokens",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "credential",
    "credentials",
    "creds",
];
const WEAK_WORDS: &[&str] = &["auth", "bearer", "access", "private", "signing"];
/// Compound words ending in a credential word (`accesstoken`, `stripeapikey`).
const STRONG_SUFFIXES: &[&str] = &["secret", "token", "apikey", "password", "passwd"];
/// The word right before a token that says it is not a secret.
const NON_SECRET_WORDS: &[&str] = &[
    "commit",
    "sha",
    "sha1",
    "sha256",
    "sha512",
    "md5",
    "digest",
    "hash",
    "checksum",
    "id",
    "ids",
    "uuid",
    "guid",
    "request",
    "trace",
    "span",
    "order",
    "version",
    "build",
    "revision",
    "rev",
    "etag",
    "fingerprint",
    "thumbprint",
    "nonce",
    "salt",
    "iv",
    "kid",
    "arn",
    "path",
    "file",
    "url",
];
/// Words right before a credential word that make it name something else (`Postman-Token`,
/// `primary key`, `max tokens`).
const NON_SECRET_QUALIFIERS: &[&str] = &[
    "postman",
    "request",
    "idempotency",
    "correlation",
    "primary",
    "sort",
    "partition",
    "foreign",
    "public",
    "cache",
    "max",
    "input",
    "output",
    "prompt",
    "completion",
];
/// Words anywhere before a token that make it a pagination cursor (`next_page_token`).
const PAGINATION_WORDS: &[&str] = &["page", "cursor", "pagination", "continuation"];
/// Prefixes of keys that are public by design (Stripe publishable keys).
const PUBLIC_PREFIXES: &[&str] = &["pk_live_", "pk_test_"];

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let b = ctx.text.as_bytes();
    // Everything before `read` has been looked at: each token is judged once.
    let mut read = 0;
    for m in CREDENTIAL_WORD.find_iter(&ctx.lower) {
        // `key.verify(…)`, `token(…)`, `keys[…]`: a name in code, not a label.
        if matches!(b.get(m.end()), Some(b'.' | b'(' | b'[')) && b.get(m.end() + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
            continue;
        }
        let mut i = m.end().max(read);
        // Inside a token that started before the word's end: that token holds the word.
        while i > 0 && b.get(i).copied().is_some_and(token_byte) && token_byte(b[i - 1]) {
            i += 1;
        }
        let until = line_end_within(ctx.text, m.end(), WINDOW);
        while i < until {
            if !token_byte(b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while b.get(i).copied().is_some_and(token_byte) {
                i += 1;
            }
            let padding = b[i..].iter().take(2).take_while(|&&c| c == b'=').count();
            judge(ctx, start, i + padding, out);
            i += padding;
        }
        read = read.max(i);
    }
}

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'.' | b'~' | b'-')
}

fn judge(ctx: &Ctx<'_>, start: usize, end: usize, out: &mut Vec<Finding>) {
    let Some(raw) = ctx.text.get(start..end) else { return };
    // `Name::`, `Name(`, `::Name`: a path or a call in code, not a value.
    let rest = ctx.text.get(end..).unwrap_or_default();
    if rest.starts_with("::") || rest.starts_with('(') || ctx.text.get(..start).is_some_and(|b| b.ends_with("::")) {
        return;
    }
    let token = raw.trim_end_matches(['.', '-']);
    if candidate(token) && context_ok(before(&ctx.lower, start, WINDOW + LONGEST_WORD), hex_only(token)) && enough_entropy(token)
    {
        out.push(HIGH_ENTROPY_SECRET.at(start, start + token.len()));
    }
}

fn candidate(token: &str) -> bool {
    let shape = Shape::of(token);
    // `//host/path` is the rest of a URL; `key-id/2021/us-east-1/s3/aws4_request` a path.
    let segments: Vec<&str> = token.split('/').filter(|s| !s.is_empty()).collect();
    let path = segments.len() >= 3 && segments.iter().filter(|s| word_like(s)).count() * 2 > segments.len();
    !token.starts_with("//")
        && !path
        && !token.starts_with("0x")
        && !token.starts_with("self.")
        && !token.starts_with("this.")
        && !segments.iter().all(|s| uuid(s))
        && token.len() >= 16
        && token.len() <= MAX_LEN
        && shape.letters() > 0
        && shape.digit > 0
        && !word_like(token)
        && !is_placeholder(token)
        && !PUBLIC_PREFIXES.iter().any(|p| token.starts_with(p))
}

/// `8-4-4-4-12` hex: a record id. UUIDs used as secrets (Heroku keys) are caught by the
/// rules that know their context.
fn uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]) && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn hex_only(token: &str) -> bool {
    token.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

fn enough_entropy(token: &str) -> bool {
    shannon(token) >= if hex_only(token) { MIN_HEX_ENTROPY } else { MIN_ENTROPY }
}

/// A credential word before the token (not qualified as something else: `primary key`),
/// labelling it: no non-secret word between them
/// (`key id`, `commit`), nothing that ends an assignment (`;`, `,`, `&`, `|`: `…-token,
/// Signature=…` lists a header, it does not give its value), and no pagination word at all.
fn context_ok(window: &str, hex: bool) -> bool {
    let words = word_spans(window);
    if words.iter().any(|(_, w)| PAGINATION_WORDS.contains(w)) {
        return false;
    }
    let credential = |i: usize| {
        let w = words[i].1;
        let named = STRONG_WORDS.contains(&w)
            || STRONG_SUFFIXES.iter().any(|s| w.len() > s.len() && w.ends_with(s))
            || (!hex && WEAK_WORDS.contains(&w));
        named && !i.checked_sub(1).is_some_and(|p| NON_SECRET_QUALIFIERS.contains(&words[p].1))
    };
    let Some(at) = (0..words.len()).rev().find(|&i| credential(i)) else { return false };
    let (start, word) = words[at];
    let gap = window.get(start + word.len()..).unwrap_or_default();
    !words[at + 1..].iter().any(|(_, w)| NON_SECRET_WORDS.contains(w)) && !gap.contains([';', ',', '&', '|'])
}

/// The runs of ASCII letters and digits of `s`, with their byte offsets.
fn word_spans(s: &str) -> Vec<(usize, &str)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices().chain(std::iter::once((s.len(), ' '))) {
        match (c.is_ascii_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(from)) => {
                spans.extend(s.get(from..i).map(|w| (from, w)));
                start = None;
            }
            _ => {}
        }
    }
    spans
}
