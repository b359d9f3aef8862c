//! Passwords and secrets assigned to a credential-named key, in whatever syntax configuration
//! comes in: `key=value`, `key: value`, `key => value`, `key := value`, `"key": "value"`,
//! `export KEY=value`, `set -x KEY value`, `--key value`, `x-api-key: value` headers.
//!
//! The key decides the rule. It is split into words (`DB_PASSWORD`, `stripeApiKey`,
//! `x-api-key`) and its last word must name a credential: a password word reports a
//! `password-assignment`, a secret word (`secret`, `token`, `api key`, `client secret`…) a
//! `secret-assignment`. Look-alike keys do not count: `passport`, `password_hash`,
//! `max_tokens`, `next_page_token`, `primary_key`, `keyboard`.
//!
//! The value must be a plausible secret: at least six characters, no whitespace, not a
//! placeholder, not a literal (`null`, `true`, `required`), not a code reference (an
//! unquoted bare identifier like `user_password`, a call, `process.env.X`). Secrets other
//! than passwords must also look generated (letters with digits, or mixed case, and not
//! made of words), so `auth: oauth2` and `token: my-app-token` pass unreported.

use std::ops::Range;

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::placeholder::is_placeholder;
use crate::rules::{PASSWORD_ASSIGNMENT, Rule, SECRET_ASSIGNMENT};
use crate::text::{before, camel_parts, code_like, random_looking, word_like};

/// The credential words one of which a key must contain, in the lower-cased text. The key
/// around each hit is then read by hand ([`key_around`], [`separator_end`]): a regex that
/// starts with the key's character class has no literal to search for and is ten times slower.
static KEY_WORD: Lazy = Lazy::new(|| Re::new("pass|pwd|secret|token|key|auth|credential|creds"));

/// Last words of a key that name a password.
const PASSWORD_WORDS: &[&str] = &["password", "passwd", "passwort", "pwd", "pass", "passphrase", "passcode", "pswd", "pword"];
/// Last words of a key that name a secret. (`credential` alone is left out: in AWS SigV4
/// headers it names a key id and a scope, not a secret.)
const SECRET_WORDS: &[&str] = &[
    "secret",
    "token",
    "apikey",
    "auth",
    "credentials",
    "creds",
    "authtoken",
    "accesstoken",
    "refreshtoken",
    "secretkey",
    "privatekey",
    "accesskey",
    "clientsecret",
    "apisecret",
    "secretaccesskey",
];
/// Words that make `… key` a secret key (`api key`, `signing key`), unlike `sort key`.
const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "access",
    "secret",
    "private",
    "auth",
    "signing",
    "encryption",
    "encrypt",
    "master",
    "client",
    "storage",
    "account",
    "app",
    "application",
    "shared",
    "webhook",
    "license",
    "subscription",
    "service",
    "ingest",
    "admin",
    "sas",
    "hmac",
    "jwt",
    "session",
];
/// Words before `token` that make it a non-secret (pagination, model limits, request nonces).
const TOKEN_NON_SECRETS: &[&str] = &[
    "page",
    "next",
    "continuation",
    "pagination",
    "cursor",
    "sync",
    "max",
    "min",
    "input",
    "output",
    "prompt",
    "completion",
    "total",
    "num",
    "postman",
    "request",
    "idempotency",
    "correlation",
];
/// Suffixes that make a one-word key (`dbpassword`, `xapikey`) a credential key.
const COMPOUND_SUFFIXES: &[(&str, bool)] = &[
    ("password", true),
    ("passwd", true),
    ("passphrase", true),
    ("pwd", true),
    ("secret", false),
    ("token", false),
    ("apikey", false),
    ("accesskey", false),
    ("secretkey", false),
    ("privatekey", false),
];

/// Longest key name read.
const MAX_KEY: usize = 128;
const MIN_LEN: usize = 6;
const MIN_SECRET_LEN: usize = 8;
const MAX_LEN: usize = 1024;

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let mut last_key = None;
    for m in KEY_WORD.find_iter(&ctx.lower) {
        let Some((key_start, key_end)) = key_around(&ctx.lower, m.start(), m.end()) else { continue };
        if last_key.replace(key_start) == Some(key_start) {
            continue;
        }
        let Some(value_start) = separator_end(&ctx.lower, key_start, key_end) else { continue };
        let Some(rule) = ctx.text.get(key_start..key_end).and_then(key_rule) else { continue };
        let Some((range, quoted)) = value_at(ctx.text, value_start) else { continue };
        let Some(value) = ctx.text.get(range.clone()) else { continue };
        let plausible =
            if rule.id == PASSWORD_ASSIGNMENT.id { plausible_password(value, quoted) } else { plausible_secret(value, quoted) };
        if plausible {
            out.push(rule.at(range.start, range.end));
        }
    }
}

fn key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// The key (a run of letters, digits, `_.-`) holding the credential word at `start..end`,
/// if not longer than [`MAX_KEY`].
fn key_around(lower: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let b = lower.as_bytes();
    let back = b[start.saturating_sub(MAX_KEY)..start].iter().rev().take_while(|&&c| key_byte(c)).count();
    let ahead = b[end..(end + MAX_KEY).min(b.len())].iter().take_while(|&&c| key_byte(c)).count();
    (back + (end - start) + ahead <= MAX_KEY).then_some((start - back, end + ahead))
}

/// Where the value starts after `key`: past an optional closing quote and a separator
/// (`=>`, `:=`, `=`, `:`) with spaces around it, or past spaces alone in the shell forms
/// `--key value`, `set -x KEY value` and `setenv KEY value`.
fn separator_end(lower: &str, key_start: usize, key_end: usize) -> Option<usize> {
    let b = lower.as_bytes();
    let spaces = |mut i: usize| {
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        i
    };
    let mut i = key_end;
    if matches!(b.get(i), Some(b'"' | b'\'' | b'`')) {
        i += 1;
    }
    let after_spaces = spaces(i);
    let separator = match (b.get(after_spaces), b.get(after_spaces + 1)) {
        (Some(b'='), Some(b'>')) | (Some(b':'), Some(b'=')) => 2,
        // `password::verify` is a path in code, `password == x` a comparison.
        (Some(b':'), Some(b':')) | (Some(b'='), Some(b'=')) => return None,
        (Some(b'=' | b':'), _) => 1,
        _ => 0,
    };
    if separator > 0 {
        return Some(spaces(after_spaces + separator));
    }
    let shell = lower.get(key_start..key_end).is_some_and(|k| k.starts_with("--")) || shell_setter(lower, key_start);
    (after_spaces > i && shell).then_some(after_spaces)
}

/// `set -x KEY` (fish, any flags with `x`) or `setenv KEY` (csh) right before the key.
fn shell_setter(lower: &str, key_start: usize) -> bool {
    let words: Vec<&str> = before(lower, key_start, 24).split_whitespace().collect();
    match words.as_slice() {
        [.., "set", flags] => flags.starts_with('-') && flags.contains('x'),
        [.., "setenv"] => true,
        _ => false,
    }
}

/// The rule a key name calls for, if it names a credential.
fn key_rule(key: &str) -> Option<&'static Rule> {
    let words: Vec<String> = key
        .split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(camel_parts)
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let last = words.last()?.as_str();
    let previous = words.len().checked_sub(2).and_then(|i| words.get(i)).map(String::as_str);
    if PASSWORD_WORDS.contains(&last) {
        return Some(&PASSWORD_ASSIGNMENT);
    }
    let secret = match last {
        "key" => previous.is_some_and(|p| KEY_QUALIFIERS.contains(&p)),
        "token" => !previous.is_some_and(|p| TOKEN_NON_SECRETS.contains(&p)),
        w if SECRET_WORDS.contains(&w) => true,
        w if words.len() == 1 => {
            return COMPOUND_SUFFIXES
                .iter()
                .find(|(suffix, _)| w.ends_with(suffix))
                .map(|&(_, password)| if password { &PASSWORD_ASSIGNMENT } else { &SECRET_ASSIGNMENT });
        }
        _ => false,
    };
    secret.then_some(&SECRET_ASSIGNMENT)
}

/// The value starting at byte `i`: a quoted string on one line, or a bare word up to
/// whitespace or punctuation that ends values in code and queries. Returns the range and
/// whether it was quoted.
fn value_at(text: &str, i: usize) -> Option<(Range<usize>, bool)> {
    let b = text.as_bytes();
    let first = *b.get(i)?;
    if matches!(first, b'"' | b'\'' | b'`') {
        let mut j = i + 1;
        while let Some(&c) = b.get(j).filter(|_| j <= i + MAX_LEN + 1) {
            match c {
                b'\\' => j += 2,
                b'\n' => return None,
                c if c == first => return Some((i + 1..j, true)),
                _ => j += 1,
            }
        }
        return None;
    }
    // A value longer than MAX_LEN is not one: stop looking there, so scans stay linear.
    let limit = b.len().min(i + MAX_LEN + 1);
    let mut j = i;
    while j < limit && !ends_bare_value(b, j) {
        j += 1;
    }
    while j > i && matches!(b[j - 1], b'.' | b',' | b';' | b':') {
        j -= 1;
    }
    Some((i..j, false))
}

/// Whitespace, quotes, brackets, `,` `;` `<` `>` `|` and `\` (an escape in a string
/// literal: `true\r\n…`) end a bare value; so does `&` when a query parameter follows
/// (`&sslmode=…`).
fn ends_bare_value(b: &[u8], j: usize) -> bool {
    match b[j] {
        c if c.is_ascii_whitespace() => true,
        b'"' | b'\'' | b'`' | b',' | b';' | b'<' | b'>' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'|' | b'\\' => true,
        b'&' => {
            let name = b[j + 1..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'_').count();
            name > 0 && b.get(j + 1 + name) == Some(&b'=')
        }
        _ => false,
    }
}

/// Could be a password: long enough, one word, not a placeholder or an armoured key (the
/// key detectors report those), and if unquoted not code: a bare identifier (a variable), a
/// path (`url::quirks::password`), a pointer or reference type, a macro call (`write!`).
fn plausible_password(value: &str, quoted: bool) -> bool {
    let n = value.chars().count();
    (MIN_LEN..=MAX_LEN).contains(&n)
        && !value.chars().any(char::is_whitespace)
        && !is_placeholder(value)
        && !value.starts_with("-----")
        && !value.contains("://")
        && !value.contains("::")
        && (quoted || !code_like(value))
}

/// Could be a generated secret: a plausible password that looks random and is not made of
/// words, and not a number.
fn plausible_secret(value: &str, quoted: bool) -> bool {
    plausible_password(value, quoted) && value.len() >= MIN_SECRET_LEN && random_looking(value) && !word_like(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        let rule = |k| key_rule(k).map(|r| r.id);
        for k in ["password", "DB_PASSWORD", "db.password", "dbPassword", "pgpassword", "--password", "PASSWD"] {
            assert_eq!(rule(k), Some("password-assignment"), "{k}");
        }
        for k in
            ["api_key", "apikey", "stripeApiKey", "x-api-key", "client_secret", "GITHUB_TOKEN", "auth", "AWS_SECRET_ACCESS_KEY"]
        {
            assert_eq!(rule(k), Some("secret-assignment"), "{k}");
        }
        for k in ["passport", "password_hash", "max_tokens", "next_page_token", "primary_key", "keyboard", "token_type", "key"] {
            assert_eq!(rule(k), None, "{k}");
        }
    }

    #[test]
    fn separators() {
        fn value(s: &str) -> Option<&str> {
            let lower = s.to_ascii_lowercase();
            let m = lower.find("pass")?;
            let (ks, ke) = key_around(&lower, m, m + 4)?;
            separator_end(&lower, ks, ke).map(|i| &s[i..])
        }
        assert_eq!(value("db_password = x"), Some("x"));
        assert_eq!(value("\"Password\": \"x\""), Some("\"x\""));
        assert_eq!(value("'pass' => 'x'"), Some("'x'"));
        assert_eq!(value("PASS := x"), Some("x"));
        assert_eq!(value("--password x"), Some("x"));
        assert_eq!(value("set -gx DB_PASS x"), Some("x"));
        assert_eq!(value("setenv DB_PASS x"), Some("x"));
        assert_eq!(value("the password x"), None);
        assert_eq!(value("rpassword::prompt_password(p)"), None);
        assert_eq!(value("if password == x"), None);
        assert_eq!(value(&format!("{}password=x", "a".repeat(200))), None);
    }

    #[test]
    fn values() {
        fn v(s: &str) -> Option<(&str, bool)> {
            value_at(s, 0).map(|(r, q)| (&s[r], q))
        }
        assert_eq!(v("\"a b\" rest"), Some(("a b", true)));
        assert_eq!(v("hunter22; next"), Some(("hunter22", false)));
        assert_eq!(v("abc123&user=x"), Some(("abc123", false)));
        assert_eq!(v("Tr0ub4dor&3 x"), Some(("Tr0ub4dor&3", false)));
        assert_eq!(v("hunter22."), Some(("hunter22", false)));
        assert_eq!(v("\"unterminated"), None);
    }
}
