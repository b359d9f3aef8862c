//! Secrets in disguise: what [`crate::scan`] finds in the text as written, and also in the
//! other ways the same text can be read.
//!
//! A pattern list always trails whoever hides a credential, so before governance lets a
//! text through, it is read again:
//!
//! - **normalised**: Unicode NFKC (fullwidth `ＡＫＩＡ…` becomes `AKIA…`) with zero-width,
//!   bidi-control and soft-hyphen characters removed (`gh\u{200b}p_…`);
//! - **rejoined**: runs of short chunks split by spaces (`AKIA IOSF ODNN 7EXA MPLE`) read as
//!   one token;
//! - **reversed** (`ELPMAXE7NNDOFSOIAIKA`);
//! - **decoded**: base64, hex and percent-encoded segments decoded (recursively, bounded)
//!   and read again — a credential wrapped in base64 is still a credential.
//!
//! What a reading finds is reported on the original text (the bytes that produced it), as a
//! secret. Last, a random-looking token anywhere — no credential word needed — is reported
//! as [`Class::Suspect`]: it may be a credential, so a person decides, the value redacted.

use unicode_normalization::UnicodeNormalization as _;

use crate::checks::shannon;
use crate::text::word_like;
use crate::{Class, Finding};

/// How deep decoding goes (base64 of hex of base64…).
const MAX_DEPTH: usize = 3;
/// The most bytes decoded, across every segment and level, per text.
const MAX_DECODED: usize = 256 * 1024;
/// Shortest segment decoded.
const MIN_BASE64: usize = 20;
const MIN_HEX: usize = 32;
/// A run of chunks is rejoined when it has at least this many, each this short.
const MIN_CHUNKS: usize = 4;
const MAX_CHUNK: usize = 10;
/// A token anywhere is suspect from this length and entropy (bits per character): random
/// base64 of 24+ characters is above 4.2; hex (at most 4) and words never reach it.
const SUSPECT_LEN: usize = 24;
const SUSPECT_ENTROPY: f64 = 4.2;

/// A rule id for what a decoded segment hides.
pub const ENCODED_SECRET: &str = "encoded-secret";
/// A rule id for a random-looking token found with no other evidence.
pub const RANDOM_TOKEN: &str = "random-token";

/// A reading of a text: its characters, each with the byte range of the original it came
/// from (several view bytes may share one original character, and one original character
/// may vanish).
struct View {
    text: String,
    /// For each byte of `text`: the original byte range it came from.
    origin: Vec<(usize, usize)>,
}

impl View {
    fn push(&mut self, s: &str, from: (usize, usize)) {
        self.text.push_str(s);
        self.origin.extend(std::iter::repeat_n(from, s.len()));
    }

    /// The original byte range behind `start..end` of the view.
    fn original(&self, start: usize, end: usize) -> Option<(usize, usize)> {
        let first = self.origin.get(start)?;
        let last = self.origin.get(end.checked_sub(1)?)?;
        Some((first.0.min(last.0), first.1.max(last.1)))
    }
}

/// Zero-width, bidi-control and other invisible characters that only hide what is between.
fn invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{3164}' | '\u{FEFF}' | '\u{FFA0}')
}

/// NFKC with invisible characters removed; `None` when that changes nothing.
fn normalised(text: &str) -> Option<View> {
    let mut v = View { text: String::with_capacity(text.len()), origin: Vec::with_capacity(text.len()) };
    let mut changed = false;
    let mut buf = [0u8; 4];
    for (i, c) in text.char_indices() {
        let from = (i, i + c.len_utf8());
        if invisible(c) {
            changed = true;
            continue;
        }
        if c.is_ascii() {
            v.push(c.encode_utf8(&mut buf), from);
            continue;
        }
        let folded: String = std::iter::once(c).nfkc().collect();
        changed |= folded.len() != c.len_utf8() || !folded.starts_with(c);
        v.push(&folded, from);
    }
    changed.then_some(v)
}

/// The identity view of `text`.
fn identity(text: &str) -> View {
    let mut v = View { text: String::with_capacity(text.len()), origin: Vec::with_capacity(text.len()) };
    for (i, c) in text.char_indices() {
        let mut buf = [0u8; 4];
        v.push(c.encode_utf8(&mut buf), (i, i + c.len_utf8()));
    }
    v
}

fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'_' | b'-')
}

/// Whether a chunk looks like a piece of a token rather than a word: short, and with a
/// digit, a symbol, or a capital after its first letter (`AKIA`, `7EXA`, `bPxR`; not
/// `the`, `Key`).
fn tokenish(chunk: &[u8]) -> bool {
    chunk.len() <= MAX_CHUNK
        && (chunk.iter().any(|b| b.is_ascii_digit() || matches!(b, b'+' | b'/' | b'=' | b'_'))
            || chunk.iter().skip(1).any(u8::is_ascii_uppercase))
}

/// `view` with runs of at least [`MIN_CHUNKS`] short token chunks separated by single
/// spaces read as one token (the separators dropped); `None` when there is no such run.
fn rejoined(view: &View) -> Option<View> {
    let bytes = view.text.as_bytes();
    // The chunks: (start, end) of maximal token runs.
    let mut chunks = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if token_byte(bytes[i]) {
            let s = i;
            while i < bytes.len() && token_byte(bytes[i]) {
                i += 1;
            }
            chunks.push((s, i));
        } else {
            i += 1;
        }
    }
    // Which separators (between consecutive chunks) are dropped.
    let mut drop = vec![false; bytes.len()];
    let mut any = false;
    let mut run_start = 0;
    for k in 0..=chunks.len() {
        let joined_to_prev = k > 0
            && k < chunks.len()
            && chunks[k].0 == chunks[k - 1].1 + 1
            && matches!(bytes[chunks[k - 1].1], b' ' | b'\t')
            && tokenish(&bytes[chunks[k].0..chunks[k].1])
            && tokenish(&bytes[chunks[k - 1].0..chunks[k - 1].1]);
        if !joined_to_prev {
            let run = &chunks[run_start..k];
            let letters_and_digits = run.iter().any(|c| bytes[c.0..c.1].iter().any(u8::is_ascii_digit))
                && run.iter().any(|c| bytes[c.0..c.1].iter().any(u8::is_ascii_alphabetic));
            if run.len() >= MIN_CHUNKS && letters_and_digits {
                for w in run.windows(2) {
                    drop[w[0].1] = true;
                }
                any = true;
            }
            run_start = k;
        }
    }
    if !any {
        return None;
    }
    let mut v = View { text: String::with_capacity(bytes.len()), origin: Vec::with_capacity(bytes.len()) };
    for (i, c) in view.text.char_indices() {
        if drop.get(i).copied().unwrap_or(false) {
            continue;
        }
        let mut buf = [0u8; 4];
        let from = view.origin.get(i).copied().unwrap_or((0, 0));
        v.push(c.encode_utf8(&mut buf), from);
    }
    Some(v)
}

/// `view` read backwards, character by character.
fn reversed(view: &View) -> View {
    let mut v = View { text: String::with_capacity(view.text.len()), origin: Vec::with_capacity(view.text.len()) };
    for (i, c) in view.text.char_indices().rev() {
        let mut buf = [0u8; 4];
        v.push(c.encode_utf8(&mut buf), view.origin.get(i).copied().unwrap_or((0, 0)));
    }
    v
}

/// Findings of the plain scan on a reading, carried back to the original text.
fn scan_view(view: &View, out: &mut Vec<Finding>) {
    for f in crate::engine::scan(&view.text) {
        if f.class != Class::Secret {
            continue;
        }
        if let Some((start, end)) = view.original(f.start, f.end) {
            out.push(Finding { start, end, ..f });
        }
    }
}

/// The segments of `text` that may be encoded, with their decoded bytes.
fn encoded_segments(text: &str) -> Vec<(usize, usize, Vec<u8>)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // A run of base64 / hex characters.
        if bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'+' | b'/' | b'_' | b'-') {
            let s = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'+' | b'/' | b'_' | b'-' | b'=')) {
                i += 1;
            }
            let seg = &text[s..i];
            let hex = seg.len() >= MIN_HEX && seg.len().is_multiple_of(2) && seg.bytes().all(|b| b.is_ascii_hexdigit());
            if hex {
                if let Some(d) = decode_hex(seg) {
                    out.push((s, i, d));
                }
            } else if seg.len() >= MIN_BASE64 {
                let url = seg.contains(['-', '_']);
                if let Some(d) = crate::checks::base64_decode(seg.trim_end_matches('='), url) {
                    out.push((s, i, d));
                }
            }
            continue;
        }
        i += 1;
    }
    // Words holding percent-escapes, decoded whole (`ghp%5F…`).
    let mut start = None;
    for (j, b) in bytes.iter().copied().chain(std::iter::once(b' ')).enumerate() {
        match (b.is_ascii_whitespace(), start) {
            (false, None) => start = Some(j),
            (true, Some(s)) => {
                let word = &text[s..j];
                let escaped =
                    word.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
                if escaped && word.len() >= 8 {
                    out.push((s, j, decode_percent(word)));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn decode_percent(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// Decoded bytes that read as text (UTF-8, mostly printable).
fn as_text(bytes: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(bytes).ok()?;
    let printable = s.chars().filter(|c| !c.is_control() || c.is_whitespace()).count();
    (s.chars().count() >= 8 && printable * 10 >= s.chars().count() * 9).then_some(s)
}

/// Whether a decoded text holds a secret, in any reading, down to `depth` levels.
fn decoded_holds_secret(text: &str, depth: usize, budget: &mut usize) -> bool {
    let mut found = Vec::new();
    readings(text, depth, budget, &mut found);
    !found.is_empty()
}

/// Every secret any reading of `text` shows, on `text`'s own bytes.
fn readings(text: &str, depth: usize, budget: &mut usize, out: &mut Vec<Finding>) {
    let plain = identity(text);
    scan_view(&plain, out);
    let base = normalised(text).unwrap_or(plain);
    if base.text != text {
        scan_view(&base, out);
    }
    if let Some(j) = rejoined(&base) {
        scan_view(&j, out);
    }
    scan_view(&reversed(&base), out);
    if depth >= MAX_DEPTH {
        return;
    }
    for (s, e, decoded) in encoded_segments(&base.text) {
        if *budget < decoded.len() {
            break;
        }
        *budget -= decoded.len();
        let Some(inner) = as_text(&decoded) else { continue };
        if decoded_holds_secret(inner, depth + 1, budget)
            && let Some((start, end)) = base.original(s, e)
        {
            out.push(Finding { rule: ENCODED_SECRET, kind: "an encoded secret", class: Class::Secret, start, end });
        }
    }
}

/// Public by design: certificate and public-key bodies (PEM blocks, DER, `ssh-rsa AAAA…`)
/// and publishable keys.
const PUBLIC_PREFIXES: &[&str] = &["pk_live_", "pk_test_", "AAAAB3NzaC1", "AAAAC3NzaC1", "AAAAE2VjZHNh", "AAAAB3Nza"];

/// Byte ranges of PEM blocks that hold public material (certificates, public keys).
fn public_blocks(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(b) = text[from..].find("-----BEGIN ") {
        let start = from + b;
        let label_end = text[start..].find("-----\n").map_or(text.len(), |e| start + e);
        let label = &text[start..label_end];
        let end = text[start..].find("-----END ").map_or(text.len(), |e| start + e);
        if !label.contains("PRIVATE") {
            out.push((start, end));
        }
        from = end.max(start + 1).min(text.len());
        if from >= text.len() {
            break;
        }
    }
    out
}

/// Random-looking tokens of `text` that no other finding covers.
fn suspects(text: &str, taken: &[Finding], out: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let public = public_blocks(text);
    // `=` separates a name from a value (`Signature=…`), and ends base64 as padding.
    let part = |b: u8| token_byte(b) && b != b'=';
    let mut i = 0;
    while i < bytes.len() {
        if !part(bytes[i]) {
            i += 1;
            continue;
        }
        let s = i;
        while i < bytes.len() && part(bytes[i]) {
            i += 1;
        }
        let token = &text[s..i];
        if token.len() < SUSPECT_LEN || taken.iter().any(|f| f.start < i && s < f.end) {
            continue;
        }
        let before = text[..s].trim_end();
        let public_body = public.iter().any(|&(a, b)| a <= s && s < b)
            || PUBLIC_PREFIXES.iter().any(|p| token.starts_with(p))
            // A certificate or public key in DER without its armour.
            || (token.starts_with("MII") && (token.get(6..9) == Some("CCA") || token.contains("BAQEFAAOC")));
        // An id after a short prefix (`AC` + hex), a mail's Message-ID, a page cursor.
        let hex_after_prefix = token
            .char_indices()
            .take(5)
            .any(|(k, _)| token[k..].len() >= 16 && token[k..].bytes().all(|b| b.is_ascii_hexdigit()));
        let message_id = bytes.get(i) == Some(&b'@');
        let cursor = ["page_token:", "page_token", "cursor", "cursor:", "next_token:", "pagetoken"]
            .iter()
            .any(|w| before.to_ascii_lowercase().ends_with(w));
        if public_body || hex_after_prefix || message_id || cursor {
            continue;
        }
        let digits = token.bytes().any(|b| b.is_ascii_digit());
        let upper = token.bytes().any(|b| b.is_ascii_uppercase());
        let lower = token.bytes().any(|b| b.is_ascii_lowercase());
        if digits && upper && lower && shannon(token) >= SUSPECT_ENTROPY && !word_like(token) {
            out.push(Finding {
                rule: RANDOM_TOKEN,
                kind: "a random-looking token (a credential?)",
                class: Class::Suspect,
                start: s,
                end: s + token.len(),
            });
        }
    }
}

/// Every finding of [`crate::scan`], and the secrets the other readings of the text show
/// (normalised, rejoined, reversed, decoded), and random-looking tokens as suspects —
/// sorted and without overlaps (a secret wins over a suspect, then over personal data).
pub fn scan(text: &str) -> Vec<Finding> {
    let mut found = crate::engine::scan(text);
    let mut budget = MAX_DECODED;
    readings(text, 0, &mut budget, &mut found);
    // A reading may see one secret twice (plain and reversed); keep a secret once.
    let mut secrets: Vec<Finding> = found.iter().filter(|f| f.class == Class::Secret).cloned().collect();
    suspects(text, &secrets, &mut found);
    secrets.clear();
    crate::engine::resolve(text, found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn secret_covering(text: &str, value: &str) -> bool {
        let at = text.find(value).unwrap();
        // The finding covers the value (up to a hidden character at either end).
        scan(text).iter().any(|f| f.class == Class::Secret && f.start <= at + 3 && at + value.len() <= f.end + 3 && f.end > at)
    }

    #[test]
    fn disguises_are_seen_through() {
        let key = "ghp_HgaKwVJ7faC9qEwjky40UVsWmflzdE1F8Res";
        let zw: String = key.chars().flat_map(|c| [c, '\u{200b}']).collect();
        assert!(secret_covering(&format!("token {zw} ok"), &zw));
        let full: String = "AKIAIOSFODNN7EXAMPLE".chars().map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap()).collect();
        assert!(secret_covering(&format!("aws_access_key_id={full}"), &full));
        assert!(secret_covering("the key is AKIA IOSF ODNN 7EXA MPLE now", "AKIA IOSF ODNN 7EXA MPLE"));
        let reversed: String = key.chars().rev().collect();
        assert!(secret_covering(&format!("backwards: {reversed}"), &reversed));
        let hex: String =
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".bytes().map(|b| format!("{b:02x}")).collect();
        assert!(secret_covering(&format!("blob {hex}"), &hex));
        let pct = "ghp%5FHgaKwVJ7faC9qEwjky40UVsWmflzdE1F8Res";
        assert!(secret_covering(&format!("see {pct}"), pct));
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        for text in [
            "Acme renewed on the gold support tier for 2027; the CFO signs above 50k.",
            "Commit 3f2a9c1d4e5b6a7980f1e2d3c4b5a6978e0f1a2b fixed the login redirect.",
            "Record 0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b was merged into acct-7.",
            "The deploy runs on Tuesdays at 10:00 UTC from the main branch.",
            "Use the v2 endpoint /api/v2/accounts/acme-1/contacts?page=2 for paging.",
        ] {
            assert!(scan(text).is_empty(), "{text}: {:?}", scan(text));
        }
    }

    #[test]
    fn a_random_token_anywhere_is_a_suspect() {
        let text = "the new value is Zq8XkL2mVb7RtY4pWn9sHc3JdF6g and it lives in the vault";
        let f = scan(text);
        assert!(f.iter().any(|f| f.class == Class::Suspect), "{f:?}");
    }

    #[test]
    fn adversarial_inputs_are_read_within_the_decoding_budget() {
        // 80 KB of base64 of "ABC…" (decodes to text) and a deep percent-encoding: the
        // budget (MAX_DECODED) and the depth (MAX_DEPTH) bound the work; neither is a secret.
        assert!(scan(&"QUJD".repeat(20_000)).iter().all(|f| f.class != Class::Secret));
        assert!(scan(&"%41".repeat(10_000)).iter().all(|f| f.class != Class::Secret));
        let mut budget = MAX_DECODED;
        let mut out = Vec::new();
        readings(&"QUJDREVGR0hJSktMTU5PUFFSU1RVVldY ".repeat(20_000), 0, &mut budget, &mut out);
        assert!(budget < MAX_DECODED && out.is_empty());
    }
}
