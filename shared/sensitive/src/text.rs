//! Small, panic-free helpers over byte positions shared by all detectors: token boundaries,
//! the line around a position, keyword context before a value, and the "shape" of a token
//! (random-looking or made of words).
//!
//! Positions always come from regex matches or from ASCII bytes, so they sit on char
//! boundaries; every slice here still goes through `get` so a wrong position can only
//! produce an empty answer, never a panic.

/// The byte before `i` is an ASCII letter or digit (so a token starting at `i` is glued to it).
pub(crate) fn alnum_before(s: &str, i: usize) -> bool {
    i.checked_sub(1).and_then(|j| s.as_bytes().get(j)).is_some_and(u8::is_ascii_alphanumeric)
}

/// The byte at `i` is an ASCII letter or digit.
pub(crate) fn alnum_at(s: &str, i: usize) -> bool {
    s.as_bytes().get(i).is_some_and(u8::is_ascii_alphanumeric)
}

/// The byte before `i` is not an ASCII letter, digit or `_`: a word starts at `i`.
pub(crate) fn word_starts(s: &str, i: usize) -> bool {
    !byte_before(s, i).is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The byte at `i` is not an ASCII letter, digit or `_`: a word ends before `i`.
pub(crate) fn word_ends(s: &str, i: usize) -> bool {
    !s.as_bytes().get(i).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The byte before `i`, if any.
pub(crate) fn byte_before(s: &str, i: usize) -> Option<u8> {
    i.checked_sub(1).and_then(|j| s.as_bytes().get(j)).copied()
}

/// Context never reaches further than this from a position: a longer line (minified code,
/// a base64 blob) is read as if it were cut there, which keeps every scan linear.
pub(crate) const LINE_LIMIT: usize = 1024;

/// Start of the line holding byte `i` (at most [`LINE_LIMIT`] bytes back).
pub(crate) fn line_start(s: &str, i: usize) -> usize {
    line_start_within(s, i, LINE_LIMIT)
}

/// End (exclusive, before the `\n`) of the line holding byte `i` (at most [`LINE_LIMIT`]
/// bytes forward).
pub(crate) fn line_end(s: &str, i: usize) -> usize {
    line_end_within(s, i, LINE_LIMIT)
}

/// Start of the line holding byte `i`, or `i - max` if the line starts earlier.
fn line_start_within(s: &str, i: usize, max: usize) -> usize {
    let i = i.min(s.len());
    let mut floor = i.saturating_sub(max);
    while !s.is_char_boundary(floor) {
        floor += 1;
    }
    let back = s.as_bytes().get(floor..i).unwrap_or_default();
    back.iter().rposition(|&b| b == b'\n').map_or(floor, |p| floor + p + 1)
}

/// End of the line holding byte `i`, or `i + max` if the line ends later.
pub(crate) fn line_end_within(s: &str, i: usize, max: usize) -> usize {
    let i = i.min(s.len());
    let mut ceil = i.saturating_add(max).min(s.len());
    while ceil > i && !s.is_char_boundary(ceil) {
        ceil -= 1;
    }
    let ahead = s.as_bytes().get(i..ceil).unwrap_or_default();
    ahead.iter().position(|&b| b == b'\n').map_or(ceil, |p| i + p)
}

/// The line holding byte `i`.
pub(crate) fn line(s: &str, i: usize) -> &str {
    s.get(line_start(s, i)..line_end(s, i)).unwrap_or_default()
}

/// Up to `max` bytes before `i` on the same line: where a value's context word stands.
pub(crate) fn before(s: &str, i: usize, max: usize) -> &str {
    s.get(line_start_within(s, i, max)..i.min(s.len())).unwrap_or_default()
}

/// `hay` contains one of `words`. Words of four letters or fewer (`ssn`, `sin`, `bot`) must
/// stand alone, not inside a longer word (`since`, `robot`); longer ones are specific enough
/// to match anywhere (`secretaccesskey` inside `awssecretaccesskey`).
pub(crate) fn has_keyword(hay: &str, words: &[&str]) -> bool {
    last_keyword_end(hay, words).is_some()
}

/// Where the last occurrence in `hay` of one of `words` ends (same rule as [`has_keyword`]).
pub(crate) fn last_keyword_end(hay: &str, words: &[&str]) -> Option<usize> {
    let standalone = |i: usize, w: &str| w.len() > 4 || (!letter_at(hay, i.wrapping_sub(1)) && !letter_at(hay, i + w.len()));
    words.iter().filter_map(|w| hay.rmatch_indices(w).find(|&(i, _)| standalone(i, w)).map(|(i, _)| i + w.len())).max()
}

fn letter_at(s: &str, i: usize) -> bool {
    s.as_bytes().get(i).is_some_and(u8::is_ascii_alphabetic)
}

/// Counts of character classes in a token.
#[derive(Default, Clone, Copy)]
pub(crate) struct Shape {
    pub lower: usize,
    pub upper: usize,
    pub digit: usize,
    /// Anything else: punctuation, symbols, non-ASCII.
    pub other: usize,
}

impl Shape {
    pub(crate) fn of(s: &str) -> Self {
        let mut shape = Self::default();
        for c in s.chars() {
            match c {
                'a'..='z' => shape.lower += 1,
                'A'..='Z' => shape.upper += 1,
                '0'..='9' => shape.digit += 1,
                _ => shape.other += 1,
            }
        }
        shape
    }

    pub(crate) fn letters(self) -> usize {
        self.lower + self.upper
    }
}

/// Upper- and lower-case letters with an upper-case one after the first character
/// (`wJalrXUtn`, not `Monday`).
pub(crate) fn mixed_case(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_lowercase()) && s.bytes().skip(1).any(|b| b.is_ascii_uppercase())
}

/// Looks generated rather than written: letters with digits, or mixed case.
pub(crate) fn random_looking(s: &str) -> bool {
    let shape = Shape::of(s);
    (shape.letters() > 0 && shape.digit > 0) || mixed_case(s)
}

/// Made of dictionary-like pieces — identifiers (`get_user_by_id`, `getUserById`,
/// `SigV4OperationSigningConfig`, `nl80211_auth_type`), paths, host names, versions
/// (`v1.2.3`, `x86_64`) — rather than generated characters.
pub(crate) fn word_like(s: &str) -> bool {
    s.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()).all(|p| camel_parts(p).into_iter().all(wordish_part))
}

/// One camel-case part that reads as written by a person: a word with a vowel (`get`,
/// `User`, `By`), a capital or an acronym of up to five capitals (`X`, `HTTP`), a number of
/// up to four digits, or letters and digits in one transition (`V4`, `nl80211`, `Rfc5915`).
/// A random token splits into parts that mostly fail this (`w`, `Jalr`, `Zx81k`): about 5%
/// of random 16-character tokens pass as words, under 1% of 32-character ones.
fn wordish_part(p: &str) -> bool {
    let b = p.as_bytes();
    let vowel = |s: &[u8]| s.iter().any(|c| b"aeiouyAEIOUY".contains(c));
    let letters: Vec<u8> = b.iter().copied().filter(u8::is_ascii_alphabetic).collect();
    let capitals = !letters.is_empty() && letters.iter().all(u8::is_ascii_uppercase);
    if letters.len() == b.len() {
        return match b.len() {
            0 => true,
            1 => capitals,
            n => vowel(b) || (capitals && n <= 5),
        };
    }
    if letters.is_empty() {
        return b.len() <= 4;
    }
    let transitions = b.windows(2).filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit()).count();
    transitions == 1 && b.len() <= 10 && (letters.len() <= 4 || vowel(&letters) || capitals)
}

/// Splits `getUserByID` into `get`, `User`, `By`, `ID`, `HTTPServer` into `HTTP`, `Server`
/// and `SigV4Operation` into `Sig`, `V4`, `Operation`.
pub(crate) fn camel_parts(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut parts = Vec::new();
    let mut from = 0;
    for i in 1..b.len() {
        let to_upper = (b[i - 1].is_ascii_lowercase() || b[i - 1].is_ascii_digit()) && b[i].is_ascii_uppercase();
        let acronym_end =
            b[i - 1].is_ascii_uppercase() && b[i].is_ascii_uppercase() && b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
        if to_upper || acronym_end {
            parts.extend(s.get(from..i));
            from = i;
        }
    }
    parts.extend(s.get(from..));
    parts
}

/// A bare value that is code: a variable or dotted path (letters, `_`, `.`), a type
/// name (`Base64Data`, `SafeString`), a pointer or reference type, a macro call (`write!`).
pub(crate) fn code_like(value: &str) -> bool {
    let identifier = |s: &str| s.chars().all(|c| c.is_ascii_alphabetic() || c == '_' || c == '.');
    let parts = camel_parts(value);
    let type_name = parts.len() >= 2
        && value.bytes().all(|b| b.is_ascii_alphanumeric())
        && parts.iter().all(|p| p.starts_with(|c: char| c.is_ascii_uppercase()) && wordish_part(p));
    identifier(value)
        || type_name
        || value.starts_with(['*', '&'])
        || value.strip_suffix('!').is_some_and(|m| identifier(m) && !m.bytes().any(|b| b.is_ascii_uppercase()))
}

/// `domain` is one of `parents` or a subdomain of one.
pub(crate) fn under(domain: &str, parents: &[&str]) -> bool {
    parents.iter().any(|p| domain == *p || domain.strip_suffix(p).is_some_and(|rest| rest.ends_with('.')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_windows() {
        let s = "one\ntwo words\nthree";
        assert_eq!(line(s, 6), "two words");
        assert_eq!(line(s, 0), "one");
        assert_eq!(line(s, s.len()), "three");
        assert_eq!(before(s, 13, 5), "words");
        assert_eq!(before(s, 13, 50), "two words");
        assert_eq!(before("ééé", 6, 3), "é");
        let long = format!("{}x{}", "é".repeat(LINE_LIMIT), "é".repeat(LINE_LIMIT));
        let x = LINE_LIMIT * 2;
        assert!(x - line_start(&long, x) <= LINE_LIMIT && line_end(&long, x) - x <= LINE_LIMIT);
        assert!(long.is_char_boundary(line_start(&long, x)) && long.is_char_boundary(line_end(&long, x)));
    }

    #[test]
    fn keywords_short_ones_are_whole_words() {
        assert!(has_keyword("my ssn: ", &["ssn"]));
        assert!(!has_keyword("since then", &["sin"]));
        assert!(has_keyword("discord_bot_token=", &["bot"]));
        assert!(has_keyword("awssecretaccesskey", &["secretaccesskey"]));
    }

    #[test]
    fn shapes() {
        assert!(random_looking("wJalrXUtnFEMI"));
        assert!(random_looking("hunter22"));
        assert!(!random_looking("Monday"));
        assert!(word_like("get_user_by_id_and_tenant"));
        assert!(word_like("getUserByIdAndTenant"));
        assert!(word_like("/var/lib/postgres/data"));
        assert!(word_like("v1.2.3-beta.4"));
        assert!(word_like("HTTPServer"));
        assert!(word_like("SigV4OperationSigningConfig"));
        assert!(word_like("__NL80211_AUTHTYPE_NUM"));
        assert!(word_like("ChaCha20Poly1305"));
        assert!(word_like("EcPrivateKeyRfc5915Der"));
        assert!(!word_like("qrKwBmDr7M2GjmUa5SOZ"));
        assert!(word_like("S3ExpressAuthScheme"));
        assert!(!word_like("wJalrXUtnFEMIK7MDENG"));
        assert!(!word_like("Zx81kQ9vLm2pR7sT"));
        assert_eq!(camel_parts("getUserByID"), vec!["get", "User", "By", "ID"]);
        assert_eq!(camel_parts("SigV4Op"), vec!["Sig", "V4", "Op"]);
    }
}
