//! JSON Web Tokens: `eyJ…` followed by two more base64url segments (JWS) or four (JWE).
//!
//! Many strings start with `eyJ` (any base64 of a JSON object does), so the first segment
//! must decode to a JSON object that names its `"alg"`; that is what makes it a token header.

use crate::Finding;
use crate::checks::base64_decode;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::rules::JWT;

static CANDIDATE: Lazy = Lazy::new(|| Re::new(r"eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){2,4}"));

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    let b = text.as_bytes();
    for m in CANDIDATE.find_iter(text) {
        if m.start() > 0 && (token_char(b[m.start() - 1]) || b[m.start() - 1] == b'.') {
            continue;
        }
        // More segments than a JWE has: not a token.
        if b.get(m.end()) == Some(&b'.') && b.get(m.end() + 1).copied().is_some_and(token_char) {
            continue;
        }
        let token = m.as_str().trim_end_matches('.');
        if is_jwt(token) {
            out.push(JWT.at(m.start(), m.start() + token.len()));
        }
    }
}

/// Three non-empty segments (or five, the second of which may be empty) whose header is a
/// JSON object with an `"alg"`.
fn is_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    let shape_ok = match parts.len() {
        3 => parts.iter().all(|p| !p.is_empty()),
        5 => parts.iter().enumerate().all(|(i, p)| i == 1 || !p.is_empty()),
        _ => false,
    };
    shape_ok && parts.first().is_some_and(|h| header_ok(h))
}

fn header_ok(segment: &str) -> bool {
    let Some(bytes) = base64_decode(segment, true) else { return false };
    let Ok(json) = std::str::from_utf8(&bytes) else { return false };
    let json = json.trim();
    json.starts_with('{') && json.ends_with('}') && json.contains("\"alg\"")
}
