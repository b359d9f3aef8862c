//! Private keys, with or without their armour.
//!
//! - PEM blocks `-----BEGIN … PRIVATE KEY[ BLOCK]-----`: the finding covers the whole block up
//!   to its `END` line, or to the end of the text when the block was cut short. An armour
//!   line not followed by key material (a mention in prose, a pattern in code) is not reported.
//! - A base64 DER body pasted without its `BEGIN` line is still a key: private keys start
//!   with well-known bytes (version 0 or 1, then an algorithm or a modulus length), hence
//!   well-known base64 prefixes. Certificates (`MII…CCA…`) and public keys
//!   (`MII…BAQEFAAOC…`, `ssh-rsa AAAAB3…`) start differently and are not reported.
//! - PuTTY `.ppk` files: from `PuTTY-User-Key-File-` through the `Private-Lines` and MAC.
//! - A Google Cloud service-account JSON: the `private_key` string value, reported under its
//!   own rule (it wins over the PEM block it contains).

use std::collections::HashMap;

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::rules::{GCP_SERVICE_ACCOUNT, PRIVATE_KEY};
use crate::text::byte_before;

static PEM_BEGIN: Lazy = Lazy::new(|| Re::new(r"-----BEGIN ((?:[A-Z0-9]+ ){0,2}PRIVATE KEY(?: BLOCK)?)-----"));

/// Base64 prefixes of private-key DER bodies: PKCS#8 RSA, PKCS#1 RSA (1024–4096 bits),
/// encrypted PKCS#8 (PBES2), SEC1 EC (P-256, P-384, P-521), PKCS#8 EC, PKCS#8 Ed25519/X25519,
/// and the OpenSSH `openssh-key-v1` magic.
static DER_PREFIX: Lazy = Lazy::new(|| {
    Re::new(concat!(
        r"MII[A-Za-z0-9+/]{3}IBADANBgkqhkiG9w0BAQEFAAS",
        r"|MII[A-Za-z0-9+/]{3}IBAAK(?:CA[QgY]EA|BgQ)",
        r"|MII[A-Za-z0-9+/]{3}B[A-Za-z0-9+/]BgkqhkiG9w0BBQ0w",
        r"|MHcCAQEE|MIGkAgEBBD|MIHcAgEBBEI",
        r"|MI[A-Za-z0-9+/]{2}AgEAMB[A-Za-z0-9+/]GByqGSM49AgEG",
        r"|MC4CAQAwBQYDK2V[wu]BCIEI",
        r"|b3BlbnNzaC1rZXktdjE",
    ))
});

static PUTTY: Lazy = Lazy::new(|| Re::new(r"PuTTY-User-Key-File-[0-9]+:"));

static SERVICE_ACCOUNT_KEY: Lazy = Lazy::new(|| Re::new(r#""private_key"\s*:\s*"(-----BEGIN[^"]*)""#));

/// A PEM body or a DER body must carry at least this much base64 to be a key.
const MIN_PEM_BODY: usize = 40;
const MIN_DER_BODY: usize = 60;

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(pem), Detector::always(der), Detector::always(putty), Detector::always(service_account)]
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

fn pem(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    let mut covered = 0;
    // Where the next END marker of each label is (None: there is none further on), so that
    // many BEGIN lines do not search the same text again.
    let mut next_end: HashMap<String, Option<usize>> = HashMap::new();
    for caps in PEM_BEGIN.captures_iter(text) {
        let (Some(begin), Some(label)) = (caps.get(0), caps.get(1)) else { continue };
        if begin.start() < covered {
            continue;
        }
        let end_marker = format!("-----END {}-----", label.as_str());
        let cached = next_end.get(label.as_str()).copied().filter(|e| e.is_none_or(|e| e >= begin.end()));
        let found = cached.unwrap_or_else(|| text.get(begin.end()..)?.find(&end_marker).map(|i| begin.end() + i));
        next_end.insert(label.as_str().to_owned(), found);
        let (body_end, end) = match found {
            Some(i) => (i, i + end_marker.len()),
            None => (text.len(), text.trim_end().len().max(begin.end())),
        };
        if pem_body(text, begin.end(), body_end) >= MIN_PEM_BODY {
            out.push(PRIVATE_KEY.at(begin.start(), end));
            covered = end;
        }
    }
}

fn der(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    let mut covered = 0;
    for m in DER_PREFIX.find_iter(text) {
        if m.start() < covered || byte_before(text, m.start()).is_some_and(is_base64) {
            continue;
        }
        let (end, count) = base64_body(text, m.start());
        covered = end;
        if count >= MIN_DER_BODY {
            out.push(PRIVATE_KEY.at(m.start(), end));
        }
    }
}

/// How many base64 characters the body of a PEM block starting at `from` carries: after
/// optional header lines (`Proc-Type: …`, `Version: …`), lines of base64 must follow at
/// once — `-----BEGIN PRIVATE KEY-----"` inside a regex in code is not a key.
fn pem_body(text: &str, from: usize, to: usize) -> usize {
    let b = text.as_bytes();
    let mut i = from;
    loop {
        while i < to && (b[i].is_ascii_whitespace() || (b[i] == b'\\' && matches!(b.get(i + 1), Some(b'n' | b'r')))) {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        let name = b[i.min(to)..to].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'-').count();
        if name == 0 || b.get(i + name) != Some(&b':') {
            break;
        }
        // A header line: skip to its end (a real or an escaped line break).
        while i < to && b[i] != b'\n' && !(b[i] == b'\\' && b.get(i + 1) == Some(&b'n')) {
            i += 1;
        }
    }
    if i >= to {
        return 0;
    }
    let (end, count) = base64_body(text, i);
    if end > to { count.saturating_sub(end - to) } else { count }
}

/// From `start`, the end of a base64 body that may be broken over lines (real line breaks
/// with indentation, or `\n` escapes inside a JSON string), and its count of base64
/// characters. Armoured bodies are cut into full lines of [`MIN_LINE`] or more characters
/// (64 for PEM, 76 for MIME): a shorter line is the last one.
fn base64_body(text: &str, start: usize) -> (usize, usize) {
    let b = text.as_bytes();
    let (mut i, mut end, mut count, mut line) = (start, start, 0, 0);
    while i < b.len() {
        if is_base64(b[i]) {
            count += 1;
            line += 1;
            i += 1;
            end = i;
            continue;
        }
        let mut j = i;
        loop {
            match (b.get(j), b.get(j + 1)) {
                (Some(b'\r' | b'\n' | b' ' | b'\t'), _) => j += 1,
                (Some(b'\\'), Some(b'n' | b'r')) => j += 2,
                _ => break,
            }
        }
        let broke_line = b[i..j].iter().any(|&c| c == b'\n' || c == b'\\');
        if !broke_line || line < MIN_LINE || !b.get(j).copied().is_some_and(is_base64) {
            break;
        }
        line = 0;
        i = j;
    }
    (end, count)
}

/// The shortest full line of an armoured body.
const MIN_LINE: usize = 60;

fn putty(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    for m in PUTTY.find_iter(text) {
        let rest = text.get(m.start()..).unwrap_or_default();
        let mut lines = rest.split_inclusive('\n');
        let mut len = 0;
        let mut private_lines = None;
        for l in lines.by_ref() {
            len += l.len();
            if let Some(n) = l.trim().strip_prefix("Private-Lines:") {
                private_lines = n.trim().parse::<usize>().ok();
                break;
            }
        }
        let Some(n) = private_lines else { continue };
        for l in lines.by_ref().take(n) {
            len += l.len();
        }
        if let Some(mac) = lines.next().filter(|l| l.starts_with("Private-MAC:")) {
            len += mac.len();
        }
        let block = rest.get(..len).unwrap_or_default().trim_end();
        out.push(PRIVATE_KEY.at(m.start(), m.start() + block.len()));
    }
}

/// The `private_key` of a JSON document that is a service-account key file.
fn service_account(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let lower = &ctx.lower;
    if !["service_account", "private_key_id", "gserviceaccount.com"].iter().any(|w| lower.contains(w)) {
        return;
    }
    for caps in SERVICE_ACCOUNT_KEY.captures_iter(ctx.text) {
        if let Some(key) = caps.get(1) {
            out.push(GCP_SERVICE_ACCOUNT.at(key.start(), key.end()));
        }
    }
}
