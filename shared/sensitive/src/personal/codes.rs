//! Personal codes made of letters and digits, each with its own check: IBANs (country length
//! and mod 97), UK National Insurance numbers (valid prefix letters), Spanish DNI/NIE (check
//! letter) and Italian codici fiscali (check character).
//!
//! They are matched in upper case only, as they are printed; each must stand alone (no letter
//! or digit glued on either side). The formats have no fixed literal to search for, so
//! instead of four regexes over the whole text, one pass over the bytes tries each parser at
//! every word start that could begin a code.

use crate::Finding;
use crate::checks::{codice_fiscale_ok, dni_letter, iban_valid};
use crate::engine::{Ctx, Detector};
use crate::rules::{ES_DNI, IBAN, IT_CODICE_FISCALE, Rule, UK_NINO};
use crate::text::{alnum_at, alnum_before, byte_before};

/// Two-letter prefixes never allocated to a National Insurance number.
const NINO_NEVER: &[&[u8]] = &[b"BG", b"GB", b"NK", b"KN", b"TN", b"NT", b"ZZ"];

/// IBAN length by country (ISO 13616 registry).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BI", 27),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DJ", 27),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FK", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HN", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("LY", 25),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MN", 20),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NI", 28),
    ("NL", 18),
    ("NO", 15),
    ("OM", 23),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("RU", 33),
    ("SA", 24),
    ("SC", 31),
    ("SD", 18),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("SO", 23),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
    ("YE", 30),
];

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

type Parser = fn(&[u8], usize) -> Option<usize>;

/// Each parser returns the end of a valid code starting at the given position.
const PARSERS: [(Parser, &Rule); 4] = [(iban, &IBAN), (nino, &UK_NINO), (dni, &ES_DNI), (codice_fiscale, &IT_CODICE_FISCALE)];

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text;
    let b = text.as_bytes();
    for i in 0..b.len() {
        // After a `.` the code would continue something else (`05.12345678Z` in a timestamp).
        if !(b[i].is_ascii_uppercase() || b[i].is_ascii_digit()) || alnum_before(text, i) || byte_before(text, i) == Some(b'.') {
            continue;
        }
        for (parse, rule) in PARSERS {
            if let Some(end) = parse(b, i).filter(|&end| !alnum_at(text, end)) {
                out.push(rule.at(i, end));
            }
        }
    }
}

fn upper(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_uppercase)
}

fn digit(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

/// Country code, check digits, then the country's BBAN length of upper-case letters and
/// digits, compact or in groups of four separated by single spaces.
fn iban(b: &[u8], i: usize) -> Option<usize> {
    if !(upper(b, i) && upper(b, i + 1) && digit(b, i + 2) && digit(b, i + 3)) {
        return None;
    }
    let &(_, len) = IBAN_LENGTHS.iter().find(|(c, _)| c.as_bytes() == &b[i..i + 2])?;
    let mut compact = Vec::with_capacity(len);
    compact.extend_from_slice(&b[i..i + 4]);
    let mut j = i + 4;
    while compact.len() < len {
        match b.get(j) {
            Some(&c) if c.is_ascii_digit() || c.is_ascii_uppercase() => compact.push(c),
            Some(b' ') if b.get(j + 1).is_some_and(u8::is_ascii_alphanumeric) && b[j - 1] != b' ' => {}
            _ => return None,
        }
        j += 1;
    }
    let printed = std::str::from_utf8(&b[i..j]).ok()?;
    let compact = std::str::from_utf8(&compact).ok()?;
    (grouped_by_four(printed) && iban_valid(compact)).then_some(j)
}

/// No spaces, or groups of four with a shorter last group.
fn grouped_by_four(printed: &str) -> bool {
    let groups: Vec<&str> = printed.split(' ').collect();
    match groups.split_last() {
        Some((last, head)) if !head.is_empty() => head.iter().all(|g| g.len() == 4) && (1..=4).contains(&last.len()),
        _ => true,
    }
}

/// `AB 12 34 56 C` or `AB123456C`: first letter not D F I Q U V, second not D F I Q U V O,
/// not a never-allocated pair, six digits in pairs, suffix A–D.
fn nino(b: &[u8], i: usize) -> Option<usize> {
    let letter_ok = |j: usize, also: &[u8]| upper(b, j) && !b"DFIQUV".contains(&b[j]) && !also.contains(&b[j]);
    if !(letter_ok(i, b"") && letter_ok(i + 1, b"O")) || NINO_NEVER.contains(&&b[i..i + 2]) {
        return None;
    }
    let mut j = i + 2;
    for _ in 0..3 {
        j += usize::from(b.get(j) == Some(&b' '));
        if !(digit(b, j) && digit(b, j + 1)) {
            return None;
        }
        j += 2;
    }
    j += usize::from(b.get(j) == Some(&b' '));
    b.get(j).is_some_and(|c| (b'A'..=b'D').contains(c)).then_some(j + 1)
}

/// DNI `12345678Z` (or `12345678-Z`), NIE `X1234567L`: the letter is the number (X, Y, Z read
/// as 0, 1, 2) modulo 23.
fn dni(b: &[u8], i: usize) -> Option<usize> {
    let (mut number, mut j, digits) = match b.get(i)? {
        c @ (b'X' | b'Y' | b'Z') => (u32::from(c - b'X'), i + 1 + usize::from(b.get(i + 1) == Some(&b'-')), 7),
        c if c.is_ascii_digit() => (0, i, 8),
        _ => return None,
    };
    for _ in 0..digits {
        let d = b.get(j).filter(|c| c.is_ascii_digit())?;
        number = number * 10 + u32::from(d - b'0');
        j += 1;
    }
    j += usize::from(b.get(j) == Some(&b'-'));
    (b.get(j) == Some(&dni_letter(number))).then_some(j + 1)
}

/// Six letters (surname, name), year, month letter, day, town (a letter and three digits),
/// check letter; digits of the date and town may be replaced by the letters L–V (omocodia).
fn codice_fiscale(b: &[u8], i: usize) -> Option<usize> {
    const SHAPE: &[u8; 16] = b"AAAAAANNMNNANNNA";
    let code = b.get(i..i + 16)?;
    let fits = |(&c, &kind): (&u8, &u8)| match kind {
        b'A' => c.is_ascii_uppercase(),
        b'N' => c.is_ascii_digit() || b"LMNPQRSTUV".contains(&c),
        _ => b"ABCDEHLMPRST".contains(&c),
    };
    let ok = code.iter().zip(SHAPE).all(fits) && std::str::from_utf8(code).is_ok_and(codice_fiscale_ok);
    ok.then_some(i + 16)
}
