//! The text side of indexing: chunking and rule-based POLE+O extraction.

use std::collections::BTreeSet;

use domain::memory::Extracted;
use ports::search::identifiers;

use super::{CHUNK_CHARS, MAX_CHUNKS};

/// Cuts `body` into chunks of at most [`CHUNK_CHARS`] characters: paragraphs merged
/// while they fit, long paragraphs split at sentence ends, long sentences at spaces.
pub fn chunks(body: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    for para in body.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
        if para.chars().count() <= CHUNK_CHARS {
            pieces.push(para.to_owned());
            continue;
        }
        let mut current = String::new();
        for word in para.split_inclusive(char::is_whitespace) {
            if current.chars().count() + word.chars().count() > CHUNK_CHARS && !current.is_empty() {
                pieces.push(current.trim().to_owned());
                current.clear();
            }
            current.push_str(word);
            let ends = current.trim_end().ends_with(['.', '!', '?']);
            if ends && current.chars().count() > CHUNK_CHARS * 3 / 4 {
                pieces.push(current.trim().to_owned());
                current.clear();
            }
        }
        if !current.trim().is_empty() {
            pieces.push(current.trim().to_owned());
        }
    }
    let mut out: Vec<String> = Vec::new();
    for p in pieces {
        match out.last_mut() {
            Some(last) if last.chars().count() + p.chars().count() + 2 <= CHUNK_CHARS => {
                last.push_str("\n\n");
                last.push_str(&p);
            }
            _ => out.push(p),
        }
    }
    if out.is_empty() {
        out.push(body.trim().to_owned());
    }
    out.truncate(MAX_CHUNKS);
    out
}

const ORG_SUFFIXES: [&str; 12] =
    ["Inc", "Corp", "Corporation", "Ltd", "LLC", "GmbH", "AG", "SA", "Group", "Labs", "Bank", "University"];
const EVENT_WORDS: [&str; 10] =
    ["meeting", "launch", "incident", "outage", "release", "conference", "review", "kickoff", "migration", "renewal"];
const PLACE_WORDS: [&str; 4] = ["in", "at", "from", "near"];

/// Rule-based POLE+O extraction: organisations (capitalised names ending in Inc, Ltd,
/// GmbH…), people (e-mail addresses; Mr/Ms/Dr + name), locations (a capitalised name
/// after in/at/from/near), events (ISO dates; a capitalised name before meeting,
/// launch, incident…), objects (identifiers: ticket keys, function names, versions).
pub fn extract(text: &str) -> Vec<Extracted> {
    let mut found: BTreeSet<(String, String)> = BTreeSet::new();
    let words: Vec<&str> = text.split_whitespace().collect();
    let clean = |w: &str| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '@' && c != '.' && c != '-').to_owned();
    let capital = |w: &str| w.chars().next().is_some_and(char::is_uppercase) && w.chars().skip(1).any(char::is_lowercase);
    for (i, raw) in words.iter().enumerate() {
        let w = clean(raw);
        let bare = w.trim_end_matches('.');
        if w.contains('@') && w.contains('.') && w.len() <= 100 {
            found.insert(("person".into(), w.trim_end_matches('.').to_lowercase()));
        }
        if matches!(bare, "Mr" | "Ms" | "Mrs" | "Dr") && i + 1 < words.len() {
            let name: Vec<String> = words[i + 1..].iter().take(2).map(|x| clean(x)).take_while(|x| capital(x)).collect();
            if !name.is_empty() {
                found.insert(("person".into(), name.join(" ")));
            }
        }
        if ORG_SUFFIXES.contains(&bare) && i > 0 {
            let mut name: Vec<String> = Vec::new();
            for x in words[..i].iter().rev().take(3) {
                let c = clean(x);
                if !capital(&c) {
                    break;
                }
                name.insert(0, c);
            }
            if !name.is_empty() {
                found.insert(("organization".into(), format!("{} {bare}", name.join(" "))));
            }
        }
        if PLACE_WORDS.contains(&w.to_lowercase().as_str()) && i + 1 < words.len() {
            let next = clean(words[i + 1]);
            if capital(&next) && !ORG_SUFFIXES.contains(&next.as_str()) {
                found.insert(("location".into(), next.trim_end_matches('.').to_owned()));
            }
        }
        if EVENT_WORDS.contains(&w.to_lowercase().as_str()) && i > 0 {
            let prev = clean(words[i - 1]);
            if capital(&prev) {
                found.insert(("event".into(), format!("{prev} {}", w.to_lowercase())));
            }
        }
        let b = bare.as_bytes();
        if b.len() == 10 && b[4] == b'-' && b[7] == b'-' && bare.chars().filter(char::is_ascii_digit).count() == 8 {
            found.insert(("event".into(), bare.to_owned()));
        }
    }
    for id in identifiers(text) {
        let date = id.len() == 10 && id.as_bytes()[4] == b'-';
        if !(id.contains('@') || date) {
            found.insert(("object".into(), id));
        }
    }
    found.into_iter().take(64).map(|(class, text)| Extracted { class, text }).collect()
}
