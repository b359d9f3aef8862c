//! Passwords carried inside locators: the `user:password@` of a URL of any scheme, and the
//! `Password=` of a database connection string or a database client's command line.
//!
//! Only the password is reported, and only when it is not a placeholder (`${DB_PASSWORD}`,
//! `<password>`, `***`…, see [`crate::placeholder`]) and the host is not one reserved for
//! documentation (`ftp://rms:secret123@example.com`). A `user:pass` after the host — in the
//! path — is not userinfo and is ignored.

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::placeholder::is_placeholder;
use crate::rules::{COMMAND_LINE_CREDENTIAL, CONNECTION_STRING_PASSWORD, URL_CREDENTIALS};
use crate::text::{byte_before, line, line_end, line_end_within, word_starts};

static SCHEME: Lazy = Lazy::new(|| Re::new(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://"));

/// `password=` or `pwd=` (to be checked for a word start) in the lower-cased text.
static CONN_PASSWORD: Lazy = Lazy::new(|| Re::new(r"(?:password|pwd)[ \t]*=[ \t]*"));

/// Redis configuration with a password argument, in the lower-cased text.
static CONFIG_PASSWORD: Lazy = Lazy::new(|| Re::new(r"(?:requirepass|masterauth)[ \t]+"));

/// A database client whose command line may carry an inline password (`redis-cli -a pw`,
/// `mysql -ppw`), in the lower-cased text.
static CLIENT: Lazy = Lazy::new(|| Re::new(r"(redis-cli|mysqldump|mysqladmin|mysql)(?:[ \t]|$)"));

/// Command-line programs that take a credential as an argument: `curl -u user:pass`,
/// `wget --password pw`, `sshpass -p pw`, `htpasswd -b file user pw`, in the lower-cased text.
static CREDENTIAL_PROGRAM: Lazy = Lazy::new(|| Re::new(r"(curl|wget|http|https|sshpass|htpasswd|smbclient|ftp|lftp)(?:[ \t]|$)"));

/// What a line must contain, besides `;` or `&`, to be a connection string.
const CONNECTION_MARKERS: &[&str] = &[
    "server=",
    "data source=",
    "host=",
    "jdbc:",
    "odbc",
    "driver=",
    "uid=",
    "user id=",
    "userid=",
    "user=",
    "database=",
    "initial catalog=",
    "dsn=",
];

/// Longest URL authority (`user:password@host:port`) read.
const MAX_AUTHORITY: usize = 512;

/// Shortest password reported outside a URL.
const MIN_PASSWORD: usize = 6;

pub(crate) fn detectors() -> Vec<Detector> {
    vec![
        Detector::always(url_credentials),
        Detector::always(connection_string),
        Detector::always(command_line),
        Detector::woken_by(&["curl", "wget", "http", "sshpass", "htpasswd", "smbclient", "ftp"], credential_flags),
    ]
}

fn url_credentials(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    for m in SCHEME.find_iter(text) {
        let from = m.end();
        let rest = text.get(from..line_end_within(text, from, MAX_AUTHORITY)).unwrap_or_default();
        let authority = rest.split(|c: char| c.is_whitespace() || "/?#\"'<>`)".contains(c)).next().unwrap_or_default();
        let Some((userinfo, host)) = authority.rsplit_once('@') else { continue };
        let Some((_, password)) = userinfo.split_once(':') else { continue };
        // Documentation hosts (`db.example.com`) count too: a password is a password.
        let real_host = host_ok(host);
        if real_host && password.chars().count() >= 3 && !is_placeholder(password) {
            let start = from + userinfo.len() - password.len();
            out.push(URL_CREDENTIALS.at(start, start + password.len()));
        }
    }
}

/// A host (or comma-separated hosts, with ports): letters or digits with `.-_:[],%~`.
fn host_ok(host: &str) -> bool {
    host.bytes().any(|b| b.is_ascii_alphanumeric())
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:[],%~".contains(&b))
}

fn connection_string(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for m in CONN_PASSWORD.find_iter(&ctx.lower) {
        if !word_starts(&ctx.lower, m.start()) {
            continue;
        }
        let l = line(&ctx.lower, m.start());
        let is_connection = (l.contains(';') || l.contains('&')) && CONNECTION_MARKERS.iter().any(|k| l.contains(k));
        if is_connection && let Some((start, end)) = connection_value(ctx.text, m.end()) {
            push_password(ctx.text, start, end, out);
        }
    }
}

/// The value at `i` of a connection-string pair: `{…}` (ODBC), quoted, or up to `;`, `&`,
/// whitespace or a quote.
fn connection_value(text: &str, i: usize) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let close = match b.get(i)? {
        b'{' => Some(b'}'),
        b'"' => Some(b'"'),
        b'\'' => Some(b'\''),
        _ => None,
    };
    if let Some(close) = close {
        let len = b.get(i + 1..line_end(text, i))?.iter().position(|&c| c == close)?;
        return (b.get(i + 1 + len) == Some(&close)).then_some((i + 1, i + 1 + len));
    }
    let rest = b.get(i..line_end(text, i))?;
    let len = rest.iter().position(|&c| c.is_ascii_whitespace() || b";&\"'".contains(&c)).unwrap_or(rest.len());
    Some((i, i + len))
}

fn command_line(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    for m in CONFIG_PASSWORD.find_iter(&ctx.lower).filter(|m| word_starts(&ctx.lower, m.start())) {
        if let Some(&(at, word)) = words(text, m.end()).first() {
            push_unquoted(text, at, word, out);
        }
    }
    for caps in CLIENT.captures_iter(&ctx.lower) {
        let (Some(all), Some(program)) = (caps.get(0), caps.get(1)) else { continue };
        if !word_starts(&ctx.lower, all.start()) || byte_before(&ctx.lower, all.start()) == Some(b'-') {
            continue;
        }
        let args = words(text, all.end());
        for (i, &(at, word)) in args.iter().enumerate() {
            if program.as_str() == "redis-cli" && word == "-a" {
                if let Some(&(at, word)) = args.get(i + 1) {
                    push_unquoted(text, at, word, out);
                }
            } else if program.as_str() != "redis-cli" && word.len() > 2 && word.starts_with("-p") {
                // `-P3306` is a port: the password flag is a lower-case `p`.
                push_unquoted(text, at + 2, &word[2..], out);
            }
        }
    }
}

/// `curl -u user:pass` (`--user`, `-uuser:pass`, `--user=…`), `wget --password pw`,
/// `sshpass -p pw`, `smbclient -U user%pass`, `htpasswd -b file user pw`: the password.
fn credential_flags(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    for caps in CREDENTIAL_PROGRAM.captures_iter(&ctx.lower) {
        let (Some(all), Some(program)) = (caps.get(0), caps.get(1)) else { continue };
        if !word_starts(&ctx.lower, all.start()) {
            continue;
        }
        let args = words(text, all.end());
        let next = |i: usize| args.get(i + 1).copied();
        for (i, &(at, word)) in args.iter().enumerate() {
            let (value_at, value) = match (program.as_str(), word) {
                ("curl" | "http" | "https", "-u" | "--user" | "-a" | "--auth") | ("smbclient", "-U" | "--user") => {
                    match next(i) {
                        Some(v) => v,
                        None => continue,
                    }
                }
                ("curl", w) if w.starts_with("--user=") => (at + 7, &w[7..]),
                ("curl", w) if w.len() > 2 && w.starts_with("-u") => (at + 2, &w[2..]),
                ("sshpass", "-p") | ("wget" | "lftp" | "ftp", "--password" | "--http-password" | "--ftp-password") => {
                    if let Some((a, w)) = next(i) {
                        push_command(text, a, w, out);
                    }
                    continue;
                }
                ("sshpass", w) if w.len() > 2 && w.starts_with("-p") => {
                    push_command(text, at + 2, &w[2..], out);
                    continue;
                }
                ("wget" | "lftp" | "ftp", w) if w.starts_with("--password=") || w.starts_with("--http-password=") => {
                    let eq = w.find('=').unwrap_or(0) + 1;
                    push_command(text, at + eq, &w[eq..], out);
                    continue;
                }
                ("htpasswd", "-b") | ("htpasswd", "-bc") | ("htpasswd", "-cb") => {
                    // htpasswd -b FILE USER PASSWORD
                    if let Some(&(a, w)) = args.get(i + 3) {
                        push_command(text, a, w, out);
                    }
                    continue;
                }
                _ => continue,
            };
            // `user:pass` (or smbclient's `user%pass`): the part after the separator.
            let trimmed = value.trim_matches(|c| c == '"' || c == '\'');
            let offset = value.find(trimmed).unwrap_or(0);
            if let Some(sep) = trimmed.find([':', '%']) {
                push_command(text, value_at + offset + sep + 1, &trimmed[sep + 1..], out);
            }
        }
    }
}

fn push_command(text: &str, at: usize, word: &str, out: &mut Vec<Finding>) {
    let value = word.trim_matches(|c| c == '"' || c == '\'');
    let start = at + word.find(value).unwrap_or(0);
    if value.chars().count() >= MIN_PASSWORD && !is_placeholder(value) && text.get(start..start + value.len()).is_some() {
        out.push(COMMAND_LINE_CREDENTIAL.at(start, start + value.len()));
    }
}

/// The whitespace-separated words from `from` to the end of its line, with their positions.
fn words(text: &str, from: usize) -> Vec<(usize, &str)> {
    let rest = text.get(from..line_end(text, from)).unwrap_or_default();
    let mut out = Vec::new();
    let mut at = 0;
    for word in rest.split([' ', '\t']) {
        if !word.is_empty() {
            out.push((from + at, word));
        }
        at += word.len() + 1;
    }
    out
}

fn push_unquoted(text: &str, at: usize, word: &str, out: &mut Vec<Finding>) {
    let value = word.trim_matches(|c| c == '"' || c == '\'');
    let start = at + word.find(value).unwrap_or(0);
    push_password(text, start, start + value.len(), out);
}

fn push_password(text: &str, start: usize, end: usize, out: &mut Vec<Finding>) {
    let Some(value) = text.get(start..end) else { return };
    if value.chars().count() >= MIN_PASSWORD && !is_placeholder(value) {
        out.push(CONNECTION_STRING_PASSWORD.at(start, end));
    }
}
