//! Passwords written in sentences: "the admin password is Tr0ub4dor&3", "password for prod
//! db: s3cr3t!Pass", "use passphrase correct-horse-battery-staple", "pw: hunter22",
//! "log in as bob / Summer2024!".
//!
//! Most sentences about passwords hold none ("we rotate passwords quarterly", "the password
//! was changed yesterday", "password must contain a digit"), so the word after a password
//! noun is reported only when it looks like a credential:
//! - after an explicit connector (`is`, `was`, `:`, `=`, `set to`, `for … is`), it must have
//!   letters with digits or symbols, or be all digits, or be a passphrase (mixed case alone
//!   is not enough: `password: SafeString` is a type);
//! - right after the noun (`use password X`), it must have letters with digits or symbols,
//!   or be a passphrase;
//! - in every case it must be six or more characters, not a placeholder, not a stop word
//!   (`required`, `argon2id`…) and not code (`&'static`, `sys.argv[1]`, `get_password()`);
//!   a passphrase is three or more hyphen-joined words (or, in quotes, space-separated ones).

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::placeholder::is_placeholder;
use crate::rules::PASSWORD_IN_PROSE;
use crate::text::{Shape, code_like, line_end_within, mixed_case, word_ends, word_like, word_starts};

/// A password noun, in the lower-cased text; it must be a whole word (so not `passwords`).
static NOUN: Lazy = Lazy::new(|| Re::new("password|passphrase|passcode|passwd|pwd|pw"));

/// Explicit connectors between the noun and the value, anchored at the noun's end.
/// `=` glued to the noun (`password=x`) is configuration syntax, left to the assignment
/// and connection-string detectors, which know where such a value ends.
static CONNECTOR: Lazy = Lazy::new(|| {
    Re::new(concat!(
        r"^(?:[ \t]*:[ \t]*|[ \t]+=[ \t]*",
        r"|[ \t]+(?:(?:is|was|has been|have been)[ \t]+)?(?:set|reset|changed|updated)[ \t]+to[ \t]+",
        r"|[ \t]+(?:is|was|=|will be|would be|should be|remains)(?:[ \t]+(?:now|still|currently))?[ \t]*:?[ \t]+",
        r"|[ \t]+for[ \t]+[^\n:=.!?]{1,40}?(?:[ \t]*[:=]|[ \t]+is|[ \t]+was)[ \t]+)",
    ))
});

/// "log in with bob / Summer2024!": a login verb, a user name, a slash; in the lower-cased text.
static LOGIN: Lazy = Lazy::new(|| {
    Re::new(r"(?:log ?in|sign ?in|credentials?|creds)(?:[ \t]+(?:with|as|are|is))?[ \t]*:?[ \t]+[a-z0-9._@+-]{2,64}[ \t]*/[ \t]*")
});

/// Words that follow a password noun in sentences without being a password.
const STOP_WORDS: &[&str] = &[
    "required",
    "changed",
    "expired",
    "expires",
    "reset",
    "stored",
    "policy",
    "policies",
    "hashed",
    "salted",
    "empty",
    "missing",
    "incorrect",
    "wrong",
    "invalid",
    "correct",
    "updated",
    "rotated",
    "mandatory",
    "optional",
    "blank",
    "unknown",
    "forgotten",
    "protected",
    "encrypted",
    "unchanged",
    "provided",
    "needed",
    "shared",
    "emailed",
    "generated",
    "random",
    "temporary",
    "unique",
    "managed",
    "complex",
    "sensitive",
    "case-sensitive",
    "argon2",
    "argon2id",
    "bcrypt",
    "scrypt",
    "pbkdf2",
    "sha256",
    "sha-256",
    "sha512",
    "sha-512",
    "oauth2",
    "base64",
    "utf-8",
    "aes256",
    "aes-256",
    "rsa2048",
    "ed25519",
];

/// How far after a password noun its connector is looked for.
const LOOKAHEAD: usize = 96;
const MIN_LEN: usize = 6;
const MAX_LEN: usize = 128;
const MIN_LOGIN_PASSWORD: usize = 8;

/// The password noun in other languages (French, Spanish, Portuguese, German, Dutch, the
/// Nordic languages, Polish, Czech, Hungarian, Italian, Russian), then up to five words,
/// then a connector (`est`, `es`, `é`, `ist`, `is`, `är`, `er`, `on`, `jest`, `je`, `è`,
/// `:`, `=`), in the lower-cased text. The value is read after it as in English.
static FOREIGN: Lazy = Lazy::new(|| {
    Re::new(concat!(
        r"(?:mot de passe|mdp|contraseña|contrasena|clave de acceso|palavra-passe|senha|passwort|kennwort|wachtwoord",
        r"|lösenord|losenord|adgangskode|passord|salasana|hasło|haslo|heslo|jelszó|jelszo|parola d'accesso|пароль)",
        r"(?:[ 	]+[^ 	
:=]{1,24}){0,5}?",
        r"(?:[ 	]*[:=][ 	]*|[ 	]+(?:est|es|é|e|ist|lautet|is|är|er|on|jest|je|è|это)[ 	]*:?[ 	]+)",
    ))
});

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(nouns), Detector::always(logins), Detector::always(foreign)]
}

fn foreign(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for m in FOREIGN.find_iter(&ctx.lower) {
        if !word_starts(&ctx.lower, m.start()) {
            continue;
        }
        if let Some((start, end)) = word_at(ctx.text, m.end())
            && ctx.text.get(start..end).is_some_and(|w| credential_like(w, true))
        {
            out.push(PASSWORD_IN_PROSE.at(start, end));
        }
    }
}

fn nouns(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for m in NOUN.find_iter(&ctx.lower) {
        let noun_end = m.end();
        if !word_starts(&ctx.lower, m.start()) || !word_ends(&ctx.lower, noun_end) {
            continue;
        }
        let rest = ctx.lower.get(noun_end..line_end_within(&ctx.lower, noun_end, LOOKAHEAD)).unwrap_or_default();
        let (value_start, strong) = match CONNECTOR.find(rest) {
            Some((_, end)) => (noun_end + end, true),
            None if rest.starts_with([' ', '\t']) => (noun_end + rest.len() - rest.trim_start().len(), false),
            None => continue,
        };
        if let Some((start, end)) = word_at(ctx.text, value_start)
            && ctx.text.get(start..end).is_some_and(|w| credential_like(w, strong))
        {
            out.push(PASSWORD_IN_PROSE.at(start, end));
        }
    }
}

fn logins(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for m in LOGIN.find_iter(&ctx.lower) {
        if !word_starts(&ctx.lower, m.start()) {
            continue;
        }
        let Some((start, end)) = word_at(ctx.text, m.end()) else { continue };
        let Some(word) = ctx.text.get(start..end) else { continue };
        let shape = Shape::of(word);
        let strong = shape.letters() > 0 && shape.digit > 0 && (shape.other > 0 || mixed_case(word));
        if word.len() >= MIN_LOGIN_PASSWORD && strong && !word.starts_with('/') && !is_placeholder(word) {
            out.push(PASSWORD_IN_PROSE.at(start, end));
        }
    }
}

/// The word at `i`: a quoted phrase on one line (quotes excluded), or the run of
/// non-whitespace minus opening and closing punctuation (`(`, `.,;:)` and quotes).
fn word_at(text: &str, i: usize) -> Option<(usize, usize)> {
    quoted_at(text, i).or_else(|| bare_word(text, i))
}

fn quoted_at(text: &str, i: usize) -> Option<(usize, usize)> {
    let rest = text.get(i..line_end_within(text, i, MAX_LEN + 2))?;
    let quote = rest.chars().next().filter(|c| matches!(c, '"' | '\'' | '`' | '“' | '‘'))?;
    let close = match quote {
        '“' => '”',
        '‘' => '’',
        q => q,
    };
    let inner = &rest[quote.len_utf8()..];
    let len = inner.find([close, '\n'])?;
    (inner[len..].starts_with(close)).then_some((i + quote.len_utf8(), i + quote.len_utf8() + len))
}

fn bare_word(text: &str, i: usize) -> Option<(usize, usize)> {
    let rest = text.get(i..line_end_within(text, i, MAX_LEN + 2))?;
    let len = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let word = rest[..len].trim_end_matches(['.', ',', ';', ':', ')', '"', '\'', '`', '”', '’']);
    let trimmed = word.trim_start_matches(['(', '"', '\'', '`', '“', '‘']);
    let start = i + word.len() - trimmed.len();
    (!trimmed.is_empty()).then_some((start, start + trimmed.len()))
}

/// Looks like a credential rather than an ordinary word (see the module documentation).
fn credential_like(word: &str, strong: bool) -> bool {
    let n = word.chars().count();
    let lower = word.to_ascii_lowercase();
    let code = word.contains(['(', ')', '{', '}', '<', '>', '[', ']', '\'', '"', '`', '\\'])
        || code_like(word)
        || word.contains("::")
        || word.contains("://");
    if !(MIN_LEN..=MAX_LEN).contains(&n) || code || is_placeholder(word) || STOP_WORDS.contains(&lower.as_str()) {
        return false;
    }
    if passphrase(word) {
        return true;
    }
    let shape = Shape::of(word);
    let letters = shape.letters() > 0;
    let symbols = word.chars().any(|c| !c.is_ascii_alphanumeric() && !matches!(c, '-' | '_' | '.' | '\'' | '@'));
    let mixed = letters && (shape.digit > 0 || symbols);
    if strong { mixed || shape.digit == n } else { mixed && !word_like(word) }
}

/// Three or more alphabetic words joined by `-` or (inside quotes) spaces.
fn passphrase(word: &str) -> bool {
    let parts: Vec<&str> = word.split(['-', ' ']).collect();
    parts.len() >= 3 && parts.iter().all(|p| p.len() >= 2 && p.chars().all(|c| c.is_ascii_alphabetic()))
}
