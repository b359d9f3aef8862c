//! Days in keyword search: every document is indexed with the day it happened on
//! ([`day_terms`]: `2024-01-05` and `01-05`, from [`SearchDoc::happened_at`] in UTC), and
//! a date a query names — "on 5 January 2024", "Jan 7", "January 1st, 2024",
//! "21.01.2024", "2024-01-05" — is searched as that day's term instead of its words
//! ([`query_dates`]); a date written in a document counts as a day of it too
//! ([`text_days`]). So "what did Elise buy on 7 Jan 2024?" finds the messages of that
//! day, where the words "7", "jan" and "2024" matched nothing (a turn's time is in its
//! metadata, not its text) and only lowered the query's coverage.
//!
//! English month names and their three-letter forms; a day-first number (`21.01.2024`,
//! `21/01/2024`) is read day first, as most of the world writes it (a first number over
//! 12 can only be a day; `01/05/2024` is the 1st of May). A date without a year matches
//! that day of any year. Chosen on the `tune` split of REALTALK (docs/benchmarks.md).
//!
//! [`SearchDoc::happened_at`]: super::SearchDoc::happened_at

use domain::Timestamp;

const MONTHS: [&str; 12] =
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

/// The keyword terms of a document that happened at `at`: its day (`2024-01-05`, UTC)
/// and the same day of any year (`01-05`).
pub fn day_terms(at: Timestamp) -> [String; 2] {
    let (y, m, d) = civil(at.0.div_euclid(86_400_000));
    [format!("{y:04}-{m:02}-{d:02}"), format!("{m:02}-{d:02}")]
}

/// The date `days` days after 1970-01-01 as (year, month, day) (Howard Hinnant's
/// `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (era * 400 + yoe + i64::from(m <= 2), m, d)
}

/// Whether a month's name is also an everyday word (`may`, `march`, `mar`).
fn ambiguous(word: &str) -> bool {
    ["may", "march", "mar"].iter().any(|m| word.trim_end_matches('.').eq_ignore_ascii_case(m))
}

/// A month's number from its English name or its first three letters (`sept` too),
/// with or without a final dot. Not a word in capitals alone (`APR`, `SEP`, `DEC` are
/// more often acronyms), and the ones that are also everyday words ([`ambiguous`]) only
/// written with a capital.
fn month(word: &str) -> Option<u32> {
    let bare = word.trim_end_matches('.');
    if !(3..=9).contains(&bare.len())
        || !bare.bytes().all(|b| b.is_ascii_alphabetic())
        || bare.bytes().all(|b| b.is_ascii_uppercase())
        || (ambiguous(bare) && !bare.starts_with(|c: char| c.is_ascii_uppercase()))
    {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| {
            let prefix = m.get(..bare.len()).is_some_and(|p| p.eq_ignore_ascii_case(bare));
            prefix && (bare.len() == m.len() || bare.len() == 3 || bare.eq_ignore_ascii_case("sept"))
        })
        .and_then(|i| u32::try_from(i + 1).ok())
}

/// A day of the month: `5`, `05`, `5th`, `1st`, `22nd`, `3rd`.
fn day(word: &str) -> Option<u32> {
    if !word.starts_with(|c: char| c.is_ascii_digit()) || word.len() > 4 {
        return None;
    }
    let digits = ["st", "nd", "rd", "th"]
        .iter()
        .find_map(|s| {
            word.len()
                .checked_sub(2)
                .filter(|&at| word.get(at..).is_some_and(|e| e.eq_ignore_ascii_case(s)))
                .map(|at| &word[..at])
        })
        .unwrap_or(word);
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

fn year(word: &str) -> Option<i64> {
    (word.len() == 4 && word.bytes().all(|b| b.is_ascii_digit())).then(|| word.parse().ok()).flatten()
}

/// `21.01.2024`, `21/01/2024` (day first), `2024-01-05`.
fn numeric(word: &str) -> Option<(Option<i64>, u32, u32)> {
    if !word.starts_with(|c: char| c.is_ascii_digit()) || !(8..=10).contains(&word.len()) {
        return None;
    }
    let mut parts = word.split(['.', '/', '-']);
    let (Some(a), Some(b), Some(c), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else { return None };
    let num = |s: &str| {
        (!s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<u32>().ok()).flatten()
    };
    let (y, m, d) = if word.contains('-') { (year(a)?, num(b)?, num(c)?) } else { (year(c)?, num(b)?, num(a)?) };
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some((Some(y), m, d))
}

fn term((y, m, d): (Option<i64>, u32, u32)) -> String {
    match y {
        Some(y) => format!("{y:04}-{m:02}-{d:02}"),
        None => format!("{m:02}-{d:02}"),
    }
}

/// A word without the sentence punctuation around it ("2024?" → "2024", "(Dec." →
/// "Dec"); any other mark stays, so `24%` or `$5` is no day.
fn clean(word: &str) -> &str {
    word.trim_start_matches(['(', '[', '"', '\'', '“', '‘'])
        .trim_end_matches([')', ']', '"', '\'', '”', '’', '?', '!', ',', ';', ':'])
        .trim_end_matches('.')
}

/// The days a document's own words name ([`query_dates`]), for its keyword terms: a note
/// saying "exam on 21.01.2024" is found by a question about that day. Only a text with a
/// digit is read (every date has one).
pub fn text_days(text: &str) -> Vec<String> {
    if text.bytes().any(|b| b.is_ascii_digit()) { dates_in(&text.split_whitespace().collect::<Vec<_>>()).0 } else { Vec::new() }
}

/// The days a query names, as [`day_terms`] terms, and the query with those dates' words
/// left out (the rest is searched as words).
pub fn query_dates(text: &str) -> (Vec<String>, String) {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (terms, used) = dates_in(&words);
    let rest: Vec<&str> = words.iter().zip(&used).filter(|(_, u)| !**u).map(|(w, _)| *w).collect();
    (terms, rest.join(" "))
}

/// The days `words` name, and which words name them.
fn dates_in(words: &[&str]) -> (Vec<String>, Vec<bool>) {
    // Each word without the sentence punctuation around it ("2024?" → "2024"), so a
    // comma inside a date is allowed ("January 5, 2024").
    let mut terms = Vec::new();
    let mut used = vec![false; words.len()];
    let mut i = 0;
    while i < words.len() {
        let w = clean(words[i]);
        let next = |k: usize| words.get(i + k).map(|w| clean(w));
        // "of" between a day and its month: "5th of January".
        let skip_of = usize::from(next(1).is_some_and(|n| n.eq_ignore_ascii_case("of")));
        let found = if let Some(date) = numeric(w) {
            Some((date, 1))
        } else if let Some((d, m)) = day(w).and_then(|d| Some((d, next(1 + skip_of).and_then(month)?))) {
            let y = next(2 + skip_of).and_then(year);
            Some(((y, m, d), 2 + skip_of + usize::from(y.is_some())))
        } else if let Some((m, d)) = next(1).and_then(day).and_then(|d| Some((month(w)?, d))) {
            let y = next(2).and_then(year);
            // "May 3 of us come?": a sentence's first word is capitalised anyway, so an
            // everyday month word opening one is a date only with its year.
            let opens = i == 0 || words[i - 1].ends_with(['.', '?', '!']);
            (!(opens && ambiguous(w) && y.is_none())).then_some(((y, m, d), 2 + usize::from(y.is_some())))
        } else {
            None
        };
        match found {
            Some((date, len)) => {
                terms.push(term(date));
                used[i..i + len].iter_mut().for_each(|u| *u = true);
                i += len;
            }
            None => i += 1,
        }
    }
    (terms, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dates(text: &str) -> (Vec<String>, String) {
        query_dates(text)
    }

    #[test]
    fn days_are_read_as_people_write_them() {
        assert_eq!(dates("What did Elise buy on 7 Jan 2024?"), (vec!["2024-01-07".into()], "What did Elise buy on".into()));
        assert_eq!(dates("What happened on 5 January 2024 in the library").0, ["2024-01-05"]);
        assert_eq!(dates("before  January 1st, 2024?").0, ["2024-01-01"]);
        assert_eq!(dates("on the 5th of March").0, ["03-05"]);
        assert_eq!(dates("class on 21.01.2024?").0, ["2024-01-21"]);
        assert_eq!(dates("due 01/05/2024").0, ["2024-05-01"]);
        assert_eq!(dates("logged 2024-01-05, then").0, ["2024-01-05"]);
        assert_eq!(dates("Sept 3 and Dec. 24 2023").0, ["09-03", "2023-12-24"]);
    }

    #[test]
    fn words_that_only_look_like_dates_stay_words() {
        for text in [
            "May I have 2 apples",
            "march 40 miles",
            "the 2024 plan",
            "version 1.2.3",
            "proj-142",
            "13.13.2024",
            "5 may be enough",
            "3 march on",
        ] {
            assert_eq!(dates(text), (Vec::new(), text.to_owned()), "{text}");
        }
        // Written with a capital, they are months; the words around the date stay.
        assert_eq!(dates("a 5 May deadline"), (vec!["05-05".into()], "a deadline".into()));
        // Marks that are not sentence punctuation, capitals alone, a sentence opened by
        // "May" without a year: no dates.
        for text in ["a 24% APR", "25% SEP contribution", "DEC 24 meeting", "May 3 of us join?", "ok. March 4 times", "$5 Jan"] {
            assert_eq!(dates(text), (Vec::new(), text.to_owned()), "{text}");
        }
        assert_eq!(dates("May 3 2024 was fun").0, ["2024-05-03"]);
        assert_eq!(dates("(Jan. 7)").0, ["01-07"]);
    }

    #[test]
    fn a_text_is_about_the_days_it_names() {
        assert_eq!(text_days("Elise: my exam is on 21.01.2024, then a trip on March 3"), ["2024-01-21", "03-03"]);
        assert!(text_days("no digit, so no day: May June July").is_empty());
        assert!(text_days("version 1.2.3 shipped to 40 users").is_empty());
    }

    #[test]
    fn a_documents_day_is_its_utc_date() {
        assert_eq!(day_terms(Timestamp(0)), ["1970-01-01", "01-01"]);
        // 2024-02-29T23:59:59.999Z, a leap day, and the millisecond after it.
        assert_eq!(day_terms(Timestamp(1_709_251_199_999)), ["2024-02-29", "02-29"]);
        assert_eq!(day_terms(Timestamp(1_709_251_200_000)), ["2024-03-01", "03-01"]);
        assert_eq!(day_terms(Timestamp(-1)), ["1969-12-31", "12-31"]);
        for (days, want) in [(19_727, "2024-01-05"), (11_016, "2000-02-29"), (-719_468, "0000-03-01")] {
            assert_eq!(day_terms(Timestamp(days * 86_400_000))[0], want);
        }
    }
}
