//! Numbers that identify a person or spend their money: payment cards and the national ids
//! that are pure digits (US SSN, Canadian SIN, Dutch BSN, Indian Aadhaar, French NIR,
//! German tax id).
//!
//! People write these numbers with any separators ("4111.1111.1111.1111", "4111 1111-1111
//! 1111", "4 1 1 1 …", en dashes), so the text is first cut into *runs*: groups of ASCII
//! digits joined by exactly one separator character. A candidate is a window of whole groups
//! of a run — a contiguous digit group is never split, so a number inside a longer digit run
//! (an order id, a timestamp) is never a candidate. Each rule then checks:
//! - the grouping (a card is 15 or 16 bare digits, single digits, 4-4-4-4…, 4-6-5 or
//!   4-6-4; an SSN is 3-2-4 with one kind of separator);
//! - the check digits (Luhn, 11-proof, Verhoeff, mod 97, MOD 11,10) and prefixes (card
//!   issuers, SSN areas);
//! - for ids that are too easy to hit by chance, a context word before them on the line
//!   ("SSN", "SIN", "BSN", "Aadhaar", "NIR", "Steuer-ID").
//!
//! Ids other than cards must stand alone: the window is its whole run, or is joined to its
//! neighbours only by spaces while using another separator itself.

use crate::Finding;
use crate::checks::{de_tax_id_ok, eleven_proof, luhn, nir_key_ok, verhoeff};
use crate::engine::{Ctx, Detector};
use crate::rules::{CA_SIN, DE_TAX_ID, FR_NIR, IN_AADHAAR, NL_BSN, PAYMENT_CARD, Rule, US_SSN};
use crate::text::{before, has_keyword};

/// Characters that may join two digit groups.
const SEPARATORS: &[char] = &[
    ' ', '-', '.', '/', '_', '\u{2010}', '\u{2011}', '\u{2012}', '\u{2013}', '\u{2014}', '\u{2212}', '\u{00a0}', '\u{2009}',
    '\u{202f}',
];

/// How far before a number its context word may stand.
const CONTEXT_WINDOW: usize = 40;
/// The shortest and longest numbers any rule here wants.
const MIN_DIGITS: usize = 9;
const MAX_DIGITS: usize = 19;

const SSN_WORDS: &[&str] = &["ssn", "social security", "ss#", "soc sec", "ssn#"];
const SIN_WORDS: &[&str] = &["sin", "social insurance", "nas", "sin#"];
const BSN_WORDS: &[&str] = &["bsn", "burgerservicenummer", "sofinummer", "sofi-nummer", "citizen service number"];
const AADHAAR_WORDS: &[&str] = &["aadhaar", "aadhar", "uidai", "uid"];
const NIR_WORDS: &[&str] = &["nir", "insee", "sécurité sociale", "securite sociale", "sécu", "secu", "social security"];
const DE_TAX_WORDS: &[&str] = &[
    "steuer-id",
    "steuerid",
    "steuer-identifikationsnummer",
    "steueridentifikationsnummer",
    "identifikationsnummer",
    "idnr",
    "tax id",
    "tax-id",
    "tin",
];

pub(crate) fn detectors() -> Vec<Detector> {
    vec![Detector::always(run)]
}

/// Digit groups joined by single separators.
#[derive(Default)]
struct Run {
    /// Byte ranges of the digit groups.
    groups: Vec<(usize, usize)>,
    /// `seps[k]` joins `groups[k]` and `groups[k + 1]`.
    seps: Vec<char>,
}

/// The runs of `text` holding at least [`MIN_DIGITS`] digits.
fn runs(text: &str) -> Vec<Run> {
    let b = text.as_bytes();
    let mut runs = Vec::new();
    let mut run = Run::default();
    let mut i = 0;
    while let Some(skip) = b.get(i..).and_then(|rest| rest.iter().position(u8::is_ascii_digit)) {
        let start = i + skip;
        let end = start + b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        run.groups.push((start, end));
        i = end;
        match separator_at(text, end) {
            Some((sep, len)) if b.get(end + len).is_some_and(u8::is_ascii_digit) => {
                run.seps.push(sep);
                i += len;
            }
            _ => flush(&mut run, &mut runs),
        }
    }
    flush(&mut run, &mut runs);
    runs
}

/// The separator character at byte `i`, with its length.
fn separator_at(text: &str, i: usize) -> Option<(char, usize)> {
    let c = text.get(i..)?.chars().next()?;
    SEPARATORS.contains(&c).then(|| (c, c.len_utf8()))
}

/// Ends the current run, keeping it if it is long enough to hold a number of interest.
fn flush(run: &mut Run, runs: &mut Vec<Run>) {
    if run.groups.iter().map(|(s, e)| e - s).sum::<usize>() >= MIN_DIGITS {
        runs.push(std::mem::take(run));
    } else {
        run.groups.clear();
        run.seps.clear();
    }
}

/// A window of whole groups `i..=j` of a run, with its group lengths and digit values.
struct Window<'a> {
    run: &'a Run,
    i: usize,
    j: usize,
    lens: &'a [usize],
    digits: &'a [u8],
}

impl Window<'_> {
    fn start(&self) -> usize {
        self.run.groups[self.i].0
    }

    fn inner_seps(&self) -> &[char] {
        &self.run.seps[self.i..self.j]
    }

    /// Grouped exactly as `lens`, all joins one of `seps` and the same one.
    fn grouped(&self, lens: &[usize], seps: &[char]) -> bool {
        let inner = self.inner_seps();
        self.lens == lens && inner.iter().all(|s| seps.contains(s) && Some(s) == inner.first())
    }

    /// The whole run, or joined to its neighbours only by spaces while using another
    /// separator itself (or none).
    fn isolated(&self) -> bool {
        let neighbours = [self.i.checked_sub(1).map(|k| self.run.seps[k]), self.run.seps.get(self.j).copied()];
        neighbours.iter().flatten().all(|&s| s == ' ' && !self.inner_seps().contains(&' '))
    }

    fn after(&self, ctx: &Ctx<'_>, words: &[&str]) -> bool {
        has_keyword(before(&ctx.lower, self.start(), CONTEXT_WINDOW), words)
    }
}

fn run(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    let text = ctx.text.as_bytes();
    for run in runs(ctx.text) {
        let lens: Vec<usize> = run.groups.iter().map(|(s, e)| e - s).collect();
        let digits: Vec<u8> = run.groups.iter().flat_map(|&(s, e)| text[s..e].iter().map(|b| b - b'0')).collect();
        let mut first_digit = 0;
        for i in 0..run.groups.len() {
            let mut total = 0;
            for j in i..run.groups.len() {
                total += lens[j];
                if total > MAX_DIGITS {
                    break;
                }
                let (start, end) = (run.groups[i].0, run.groups[j].1);
                if total < MIN_DIGITS || glued_to_word(text, start, end) {
                    continue;
                }
                let window = Window { run: &run, i, j, lens: &lens[i..=j], digits: &digits[first_digit..first_digit + total] };
                if let Some(rule) = classify(ctx, &window) {
                    out.push(rule.at(start, end));
                }
            }
            first_digit += lens[i];
        }
    }
}

/// A letter or `_` touches the number: it is part of a code or identifier.
fn glued_to_word(b: &[u8], start: usize, end: usize) -> bool {
    let word = |b: &u8| b.is_ascii_alphabetic() || *b == b'_';
    start.checked_sub(1).and_then(|k| b.get(k)).is_some_and(word) || b.get(end).is_some_and(word)
}

fn classify(ctx: &Ctx<'_>, w: &Window<'_>) -> Option<&'static Rule> {
    let d = w.digits;
    let rules: [(&'static Rule, bool); 7] = [
        (&PAYMENT_CARD, card_grouping(w) && card_issuer(d) && luhn(d)),
        (&US_SSN, w.isolated() && ssn(ctx, w)),
        (&CA_SIN, w.isolated() && sin(ctx, w)),
        (&NL_BSN, w.isolated() && bsn(ctx, w)),
        (&IN_AADHAAR, w.isolated() && aadhaar(ctx, w)),
        (&FR_NIR, w.isolated() && nir(ctx, w)),
        (&DE_TAX_ID, w.isolated() && de_tax_id(ctx, w)),
    ];
    rules.into_iter().find(|(_, ok)| *ok).map(|(rule, _)| rule)
}

/// Grouped like a card: 4-4-4(-4)(-n), 4-6-5, 4-6-4, 4-4-5 or single digits, with any
/// separators; or one group of 15 or 16 digits (other lengths written without separators are
/// far more often ids and timestamps) joined to its neighbours by spaces only (not the
/// fraction of `-6.666666666666667`).
fn card_grouping(w: &Window<'_>) -> bool {
    let lens = w.lens;
    let total: usize = lens.iter().sum();
    if !(13..=19).contains(&total) {
        return false;
    }
    match lens {
        [n] => matches!(n, 15 | 16) && w.isolated(),
        [4, 6, 5] | [4, 6, 4] | [4, 4, 5] => true,
        _ if lens.iter().all(|&n| n == 1) => true,
        [head @ .., last] => head.len() >= 3 && head.iter().all(|&n| n == 4) && (1..=4).contains(last),
        [] => false,
    }
}

/// A real issuer prefix with a length that issuer uses.
fn card_issuer(d: &[u8]) -> bool {
    let n = d.len();
    let prefix = |k: usize| d.iter().take(k).fold(0u32, |acc, &x| acc * 10 + u32::from(x));
    let (p1, p2, p3, p4, p6) = (prefix(1), prefix(2), prefix(3), prefix(4), prefix(6));
    let visa = p1 == 4 && matches!(n, 13 | 16 | 19);
    let mastercard = ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && n == 16;
    let amex = matches!(p2, 34 | 37) && n == 15;
    let long = (16..=19).contains(&n);
    let discover = (p4 == 6011 || (644..=649).contains(&p3) || p2 == 65 || (622_126..=622_925).contains(&p6)) && long;
    let jcb = (3528..=3589).contains(&p4) && long;
    let diners = ((300..=305).contains(&p3) || matches!(p2, 36 | 38 | 39)) && (14..=19).contains(&n);
    let unionpay = p2 == 62 && long;
    let maestro = (p2 == 50 || (56..=69).contains(&p2)) && (13..=19).contains(&n);
    visa || mastercard || amex || discover || jcb || diners || unionpay || maestro
}

/// `ddd-dd-dddd` / `ddd dd dddd` anywhere, nine bare digits after "SSN"; never area 000,
/// 666 or 900–999, group 00 or serial 0000.
fn ssn(ctx: &Ctx<'_>, w: &Window<'_>) -> bool {
    let d = w.digits;
    let shaped = w.grouped(&[3, 2, 4], &['-', ' ']) || (w.lens == [9] && w.after(ctx, SSN_WORDS));
    shaped && {
        let area = u32::from(d[0]) * 100 + u32::from(d[1]) * 10 + u32::from(d[2]);
        area != 0 && area != 666 && area < 900 && d[3..5] != [0, 0] && d[5..9] != [0, 0, 0, 0]
    }
}

/// Nine digits (3-3-3 or bare) after "SIN", Luhn-valid, not starting with 0 or 8.
fn sin(ctx: &Ctx<'_>, w: &Window<'_>) -> bool {
    (w.grouped(&[3, 3, 3], &[' ', '-']) || w.lens == [9])
        && !matches!(w.digits[0], 0 | 8)
        && luhn(w.digits)
        && w.after(ctx, SIN_WORDS)
}

/// Nine digits (bare or 4.2.3) after "BSN", passing the 11-proof.
fn bsn(ctx: &Ctx<'_>, w: &Window<'_>) -> bool {
    (w.lens == [9] || w.grouped(&[4, 2, 3], &['.'])) && eleven_proof(w.digits) && w.after(ctx, BSN_WORDS)
}

/// Twelve digits starting 2–9 with a Verhoeff check digit: 4-4-4 anywhere, bare after "Aadhaar".
fn aadhaar(ctx: &Ctx<'_>, w: &Window<'_>) -> bool {
    let shaped = w.grouped(&[4, 4, 4], &[' ', '-']) || (w.lens == [12] && w.after(ctx, AADHAAR_WORDS));
    shaped && w.digits[0] >= 2 && verhoeff(w.digits)
}

/// Fifteen digits with the mod-97 key: `1 84 12 76 451 089 46` anywhere, bare after "NIR".
/// The sex digit is 1–4, 7 or 8 and the month 01–12 or 20–42 or 50–99 (INSEE's codes).
fn nir(ctx: &Ctx<'_>, w: &Window<'_>) -> bool {
    let d = w.digits;
    let shaped =
        w.grouped(&[1, 2, 2, 2, 3, 3, 2], &[' ']) || ((w.lens == [15] || w.grouped(&[13, 2], &[' '])) && w.after(ctx, NIR_WORDS));
    shaped && {
        let month = d[3] * 10 + d[4];
        matches!(d[0], 1..=4 | 7 | 8) && matches!(month, 1..=12 | 20..=42 | 50..=99) && nir_key_ok(d)
    }
}

/// Eleven digits (bare or 2-3-3-3) after "Steuer-ID", passing the Steuer-IdNr rules.
fn de_tax_id(ctx: &Ctx<'_>, w: &Window<'_>) -> bool {
    (w.lens == [11] || w.grouped(&[2, 3, 3, 3], &[' '])) && de_tax_id_ok(w.digits) && w.after(ctx, DE_TAX_WORDS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_join_single_separators_only() {
        let rs = runs("a 4111 1111-1111.1111 b 123456  789012345 6–7 1234");
        assert_eq!(rs.len(), 2, "runs of fewer than nine digits are dropped");
        assert_eq!(rs[0].seps, vec![' ', '-', '.']);
        assert_eq!(rs[1].groups, vec![(32, 41), (42, 43), (46, 47), (48, 52)], "two spaces break a run, an en dash joins");
        assert_eq!(rs[1].seps, vec![' ', '–', ' ']);
    }

    #[test]
    fn card_groupings() {
        let grouped = |lens: &[usize]| {
            let groups = lens
                .iter()
                .scan(0, |at, n| {
                    let g = (*at, *at + n);
                    *at += n + 1;
                    Some(g)
                })
                .collect();
            let run = Run { groups, seps: vec![' '; lens.len() - 1] };
            let digits = vec![0; lens.iter().sum()];
            card_grouping(&Window { run: &run, i: 0, j: lens.len() - 1, lens, digits: &digits })
        };
        assert!(grouped(&[4, 4, 4, 4]));
        assert!(grouped(&[16]));
        assert!(grouped(&[1; 16]));
        assert!(grouped(&[4, 6, 5]));
        assert!(grouped(&[4, 4, 4, 4, 3]));
        assert!(!grouped(&[19]), "19 bare digits are an id");
        assert!(!grouped(&[4, 4, 4, 4, 4]));
        assert!(!grouped(&[3, 3, 4, 4]));
        assert!(!grouped(&[12]));
    }

    #[test]
    fn issuers() {
        let d = |s: &str| s.bytes().map(|b| b - b'0').collect::<Vec<u8>>();
        assert!(card_issuer(&d("4111111111111111")));
        assert!(card_issuer(&d("378282246310005")));
        assert!(card_issuer(&d("2221000000000009")));
        assert!(!card_issuer(&d("1234567812345670")));
        assert!(!card_issuer(&d("37828224631000")), "amex is 15 digits");
    }
}
