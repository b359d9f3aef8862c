//! HTTP `Authorization` credentials: `Bearer <token>`, `Basic <base64 user:password>`, and
//! other schemes after an `Authorization:` header (`token …`, `SSWS …`, or a bare value).
//!
//! `Bearer` and `Basic` are also common English words, so the value decides: a bearer value
//! must look generated (at least 16 characters, random-looking at its end, not made of words),
//! a basic value must decode to printable `user:password` whose password is not a placeholder.

use crate::Finding;
use crate::checks::base64_decode;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::placeholder::is_placeholder;
use crate::rules::AUTHORIZATION_HEADER;
use crate::text::{byte_before, random_looking, word_like, word_starts};

/// `bearer ` or `basic ` (to be checked for a word start), in the lower-cased text. Group 1
/// is the scheme.
static SCHEME: Lazy = Lazy::new(|| Re::new(r"(bearer|basic)[ \t]+"));

/// An `Authorization` header or field and an optional non-bearer scheme word, in the
/// lower-cased text.
static HEADER: Lazy = Lazy::new(|| {
    Re::new(r#"authorization["']?[ \t]*[:=][ \t]*["']?[ \t]*(?:(?:token|ssws|apikey|key|digest|negotiate)[ \t]+)?"#)
});

const MIN_BEARER: usize = 16;
/// The end of a generated token is random (`ctn_acme.k1.000…` is a fixture, not a key).
const TAIL: usize = 20;
/// Longest credential read; a longer run is cut there (and scanning stays linear).
const MAX_CREDENTIAL: usize = 4096;

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for caps in SCHEME.captures_iter(&ctx.lower) {
        let (Some(all), Some(scheme)) = (caps.get(0), caps.get(1)) else { continue };
        if !word_starts(&ctx.lower, all.start()) || byte_before(&ctx.lower, all.start()) == Some(b'-') {
            continue;
        }
        if scheme.as_str() == "basic" {
            basic(ctx.text, all.end(), out);
        } else {
            bearer(ctx.text, all.end(), out);
        }
    }
    for m in HEADER.find_iter(&ctx.lower) {
        // `Authorization: Bearer …` and `Basic …` are the scheme pass's.
        let next = ctx.lower.get(m.end()..).unwrap_or_default();
        if !next.starts_with("bearer") && !next.starts_with("basic") {
            bearer(ctx.text, m.end(), out);
        }
    }
}

/// The run of token characters at `i` (base64, base64url, and `.~`), minus a final `.`.
fn credential_at(text: &str, i: usize) -> (usize, &str) {
    let rest = text.get(i..).unwrap_or_default();
    let len = rest.bytes().take(MAX_CREDENTIAL + 1).take_while(|&b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b)).count();
    (i, rest[..len].trim_end_matches('.'))
}

fn bearer(text: &str, i: usize, out: &mut Vec<Finding>) {
    let (start, value) = credential_at(text, i);
    let tail = value.get(value.len().saturating_sub(TAIL)..).unwrap_or(value);
    if value.len() >= MIN_BEARER && random_looking(tail) && !word_like(value) && !is_placeholder(value) {
        out.push(AUTHORIZATION_HEADER.at(start, start + value.len()));
    }
}

fn basic(text: &str, i: usize, out: &mut Vec<Finding>) {
    let (start, value) = credential_at(text, i);
    let decoded = base64_decode(value, false).unwrap_or_default();
    let printable = decoded.iter().all(|b| (0x20..0x7f).contains(b));
    let pair = std::str::from_utf8(&decoded).ok().and_then(|d| d.split_once(':'));
    let user_and_password = pair.is_some_and(|(user, password)| !user.is_empty() && !is_placeholder(password));
    if value.len() >= 8 && printable && user_and_password {
        out.push(AUTHORIZATION_HEADER.at(start, start + value.len()));
    }
}
