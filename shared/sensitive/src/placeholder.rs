//! Placeholders: values written where a secret would go but that are not secrets —
//! template and environment references, masks, and the stock words of documentation.
//!
//! The generic detectors (URL passwords, connection strings, `key=value` assignments,
//! passwords in prose, Authorization headers, high-entropy tokens) ask [`is_placeholder`]
//! before reporting; provider-token rules do not, since a token of the right shape is a
//! token whatever it spells.
//!
//! A value is a placeholder when (case-insensitively) it
//! - refers to something else: starts with `$` (`$PASSWORD`, `${DB_PASSWORD}`, `$(cat f)`)
//!   or `%` (`%DB_PASSWORD%`), contains `{{`, `}}`, `${` or `#{`, is wholly wrapped in
//!   `<…>`, `{…}`, `[…]` or `(…)`, or names a secret store or environment lookup
//!   ([`REFERENCES`]);
//! - is a mask: only `*`, `x`, `X`, `•`, `·`, `.`, `#`, `?`, `-`, `_` (`***`, `xxxx`, `••••`);
//! - is one of the stock words in [`WORDS`] (`password`, `changeme`, `secret`, `null`…);
//! - contains one of [`MARKERS`] (`example`, `placeholder`, `redacted`, `fake`, `your_`,
//!   `_here`…).

/// Stock words that stand in for a value.
const WORDS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "changeme",
    "changeit",
    "example",
    "sample",
    "dummy",
    "placeholder",
    "redacted",
    "removed",
    "hidden",
    "masked",
    "notset",
    "not_set",
    "unset",
    "none",
    "null",
    "nil",
    "undefined",
    "empty",
    "true",
    "false",
    "yes",
    "no",
    "required",
    "optional",
    "string",
    "str",
    "test",
    "testing",
    "todo",
    "tbd",
    "fixme",
    "foo",
    "bar",
    "foobar",
    "value",
    "default",
    "secure",
];

/// Substrings that mark a made-up value.
const MARKERS: &[&str] = &[
    "example",
    "placeholder",
    "redacted",
    "changeme",
    "change_me",
    "change-me",
    "replace_me",
    "replaceme",
    "replace-me",
    "dummy",
    "your_",
    "your-",
    "yourpass",
    "yoursecret",
    "yourtoken",
    "_here",
    "-here",
    "xxxx",
    "****",
    "notreal",
    "not_real",
    "fake",
    "<password>",
];

/// Substrings of a reference to a secret kept elsewhere.
const REFERENCES: &[&str] = &[
    "process.env",
    "os.environ",
    "getenv",
    "env(",
    "env[",
    "env.",
    "vault:",
    "op://",
    "arn:aws",
    "ref+",
    "!ref",
    "secretkeyref",
    "secretref",
    "valuefrom",
];

/// `value` is a placeholder rather than a secret (see the module documentation).
pub(crate) fn is_placeholder(value: &str) -> bool {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    v.is_empty()
        || refers(v)
        || v.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '•' | '·' | '.' | '#' | '?' | '-' | '_'))
        || WORDS.contains(&lower.as_str())
        || MARKERS.iter().any(|m| lower.contains(m))
        || REFERENCES.iter().any(|r| lower.contains(r))
}

fn refers(v: &str) -> bool {
    let wrapped = |open: char, close: char| v.starts_with(open) && v.ends_with(close);
    v.starts_with('$')
        || v.starts_with('%')
        || ["{{", "}}", "${", "#{"].iter().any(|m| v.contains(m))
        || wrapped('<', '>')
        || wrapped('{', '}')
        || wrapped('[', ']')
        || wrapped('(', ')')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        for p in [
            "${DB_PASSWORD}",
            "$PASSWORD",
            "<password>",
            "{{password}}",
            "***",
            "xxx",
            "XXXX-XXXX",
            "password",
            "changeme",
            "CHANGEME",
            "your_api_key_here",
            "%DB_PASS%",
            "process.env.DB_PASSWORD",
            "[REDACTED]",
            "",
            "••••••",
            "null",
        ] {
            assert!(is_placeholder(p), "{p}");
        }
        for s in ["hunter22", "Tr0ub4dor&3", "s3cr3t!Pass", "correct-horse-battery-staple", "Summer2024!"] {
            assert!(!is_placeholder(s), "{s}");
        }
    }
}
