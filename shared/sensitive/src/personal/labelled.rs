//! Identifiers recognisable only by their label: a passport number, a date of birth, a
//! driver's licence number. Their formats vary by country, so the label carries the
//! evidence and the value only needs a plausible shape right after it ("passport number
//! X1234567", "DOB: 03/02/1984", "driver's licence no. MORGA657054SM9IJ").
//!
//! Labels followed by a word rather than a value ("passport number is required", "date of
//! birth: unknown") report nothing.

use crate::Finding;
use crate::engine::{Ctx, Detector, Lazy, Re};
use crate::rules::{DATE_OF_BIRTH, DRIVERS_LICENCE, PASSPORT_NUMBER, Rule};
use crate::text::{Shape, word_starts};

/// Label endings shared by the number labels: "number", "no.", "#", then "is", ":", "=".
macro_rules! number_label {
    ($label:literal) => {
        concat!($label, r"(?:[ \t]*(?:number|no\.?|num\.?|nr\.?|#|id))?[ \t]*(?:(?:is|:|=|#|-)[ \t]*)?")
    };
}

static PASSPORT: Lazy = Lazy::new(|| Re::new(number_label!("passport")));
static LICENCE: Lazy = Lazy::new(|| Re::new(number_label!(r"(?:driver(?:'|’)?s?|driving)[ \t]+licen[cs]e")));
static BIRTH: Lazy = Lazy::new(|| {
    Re::new(r"(?:date[ \t]+of[ \t]+birth|birth[ \t]?date|d\.?o\.?b\.?|born(?:[ \t]+on)?)[ \t]*(?:(?:is|:|=|-)[ \t]*)?")
});

/// A date right at the start of the (lower-cased) text: ISO, numeric with `/.-`, or with a month name.
static DATE: Lazy = Lazy::new(|| {
    let month = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?";
    Re::new(&format!(
        r"^(?:[0-9]{{4}}-[0-9]{{1,2}}-[0-9]{{1,2}}|[0-9]{{1,2}}[/.-][0-9]{{1,2}}[/.-](?:[0-9]{{4}}|[0-9]{{2}})|[0-9]{{1,2}}(?:st|nd|rd|th)?[ \t]+{month},?[ \t]+[0-9]{{4}}|{month}[ \t]+[0-9]{{1,2}}(?:st|nd|rd|th)?,?[ \t]+[0-9]{{4}})"
    ))
});

pub(crate) fn detectors() -> Vec<Detector> {
    vec![
        Detector::always(|ctx, out| numbers(ctx, &PASSPORT, &PASSPORT_NUMBER, 6..=12, out)),
        Detector::always(|ctx, out| numbers(ctx, &LICENCE, &DRIVERS_LICENCE, 5..=20, out)),
        Detector::always(dates),
    ]
}

/// The code after a number label: upper-case letters, digits and inner dashes, with at
/// least four digits.
fn numbers(ctx: &Ctx<'_>, label: &Re, rule: &Rule, len: std::ops::RangeInclusive<usize>, out: &mut Vec<Finding>) {
    for m in label.find_iter(&ctx.lower).filter(|m| word_starts(&ctx.lower, m.start())) {
        let rest = ctx.text.get(m.end()..).unwrap_or_default();
        let code =
            rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).next().unwrap_or_default().trim_end_matches('-');
        let shape = Shape::of(code);
        if len.contains(&code.len()) && shape.digit >= 4 && shape.lower == 0 {
            out.push(rule.at(m.end(), m.end() + code.len()));
        }
    }
}

fn dates(ctx: &Ctx<'_>, out: &mut Vec<Finding>) {
    for m in BIRTH.find_iter(&ctx.lower).filter(|m| word_starts(&ctx.lower, m.start())) {
        let rest = ctx.lower.get(m.end()..).unwrap_or_default();
        let Some((_, len)) = DATE.find(rest) else { continue };
        let date = &rest[..len];
        if !rest[len..].starts_with(|c: char| c.is_ascii_digit()) && plausible_date(date) {
            out.push(DATE_OF_BIRTH.at(m.end(), m.end() + len));
        }
    }
}

/// The year (the number of three or more digits, else the last one) is 1900–2100 or two
/// digits; the other numbers are days 1–31, one of them a month 1–12 unless the month is named.
fn plausible_date(date: &str) -> bool {
    let mut numbers: Vec<u32> =
        date.split(|c: char| !c.is_ascii_digit()).filter(|n| !n.is_empty()).filter_map(|n| n.parse().ok()).collect();
    let Some(at) = numbers.iter().position(|&n| n >= 100).or(numbers.len().checked_sub(1)) else { return false };
    let year = numbers.remove(at);
    let named_month = date.bytes().any(|b| b.is_ascii_alphabetic());
    (year < 100 || (1900..=2100).contains(&year))
        && numbers.iter().all(|d| (1..=31).contains(d))
        && (named_month || numbers.iter().any(|m| (1..=12).contains(m)))
}
