//! How a scan runs: a keyword prefilter picks the detectors that can fire, each of them adds
//! candidate findings, and the overlaps are resolved into one sorted, disjoint list.
//!
//! Most texts an agent proposes are ordinary prose, so a scan must cost little when there is
//! nothing to find. Most detectors start their search with a literal (`ghp_`, `-----BEGIN`,
//! `password`, `@`), which the regex crate looks for with SIMD: absent, it costs well under a
//! microsecond per 16 KiB; the number and code detectors are plain byte scans. The others — provider secrets recognised by the words before a
//! value of a generic shape — name their keywords (`dd_api_key`, `heroku_api_key`…), and one
//! literal search for all keywords tells which of them to run at all. (A `RegexSet` of the
//! same keywords is an order of magnitude slower: it tracks every keyword at every byte.)

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use regex::Regex;

use crate::rules::rank;
use crate::{Class, Finding, personal, secrets};

/// What a detector sees: the text and its ASCII-lower-cased copy. ASCII lower-casing keeps
/// every byte offset, so a match in `lower` is a range of `text` too.
pub(crate) struct Ctx<'a> {
    pub text: &'a str,
    pub lower: String,
}

type Run = Box<dyn Fn(&Ctx<'_>, &mut Vec<Finding>) + Send + Sync>;

/// One detector: the keywords one of which must occur in the lower-cased text (none: always
/// runs) and the function that adds its findings.
pub(crate) struct Detector {
    needles: Vec<&'static str>,
    run: Run,
}

impl Detector {
    /// A detector that runs on every text: its search starts with a literal, cheap when absent.
    pub(crate) fn always(run: impl Fn(&Ctx<'_>, &mut Vec<Finding>) + Send + Sync + 'static) -> Self {
        Self::woken_by(&[], run)
    }

    /// A detector that runs only on texts holding one of `needles` (lower-case).
    pub(crate) fn woken_by(needles: &[&'static str], run: impl Fn(&Ctx<'_>, &mut Vec<Finding>) + Send + Sync + 'static) -> Self {
        Self { needles: needles.to_vec(), run: Box::new(run) }
    }
}

/// A compiled regular expression. The patterns are constants of this crate; one that failed
/// to compile would be a bug caught by the tests (`debug_assert`), and in release it simply
/// matches nothing rather than panicking.
pub(crate) struct Re(Option<Regex>);

impl Re {
    pub(crate) fn new(pattern: &str) -> Self {
        let compiled = Regex::new(pattern);
        debug_assert!(compiled.is_ok(), "bad pattern {pattern}: {compiled:?}");
        Self(compiled.ok())
    }

    pub(crate) fn find_iter<'h>(&self, hay: &'h str) -> impl Iterator<Item = regex::Match<'h>> {
        self.0.iter().flat_map(move |re| re.find_iter(hay))
    }

    pub(crate) fn captures_iter<'h>(&self, hay: &'h str) -> impl Iterator<Item = regex::Captures<'h>> {
        self.0.iter().flat_map(move |re| re.captures_iter(hay))
    }

    pub(crate) fn find(&self, hay: &str) -> Option<(usize, usize)> {
        self.0.as_ref()?.find(hay).map(|m| (m.start(), m.end()))
    }

    pub(crate) fn is_match(&self, hay: &str) -> bool {
        self.0.as_ref().is_some_and(|re| re.is_match(hay))
    }
}

/// A lazily compiled [`Re`], the way every module declares its patterns.
pub(crate) type Lazy = LazyLock<Re>;

struct Engine {
    detectors: Vec<Detector>,
    prefilter: Prefilter,
}

/// The keyword search: one leftmost-first alternation of every keyword, restarted one
/// character after each hit so that overlapping keywords are all seen. Keywords that match
/// at the same position extend one another, so at each hit every keyword starting with the
/// hit's first byte is compared there.
struct Prefilter {
    /// `None` if it failed to build: then every detector runs.
    search: Option<Regex>,
    /// The keywords by first byte, with the detectors each one wakes.
    by_first_byte: HashMap<u8, Vec<(&'static str, Vec<usize>)>>,
}

impl Prefilter {
    fn new(detectors: &[Detector]) -> Self {
        let mut owners: BTreeMap<&'static str, Vec<usize>> = BTreeMap::new();
        for (i, d) in detectors.iter().enumerate() {
            for &n in &d.needles {
                owners.entry(n).or_default().push(i);
            }
        }
        let pattern = owners.keys().map(|k| regex::escape(k)).collect::<Vec<_>>().join("|");
        let mut by_first_byte: HashMap<u8, Vec<(&'static str, Vec<usize>)>> = HashMap::new();
        for (needle, ds) in owners {
            if let Some(&first) = needle.as_bytes().first() {
                by_first_byte.entry(first).or_default().push((needle, ds));
            }
        }
        Self { search: Regex::new(&pattern).ok(), by_first_byte }
    }

    /// Marks in `wanted` the detectors woken by a keyword of `lower`.
    fn wake(&self, lower: &str, wanted: &mut [bool]) {
        let Some(search) = &self.search else {
            wanted.fill(true);
            return;
        };
        let mut at = 0;
        while let Some(m) = search.find_at(lower, at) {
            let here = &lower[m.start()..];
            let candidates = here.as_bytes().first().and_then(|b| self.by_first_byte.get(b));
            for (needle, ds) in candidates.into_iter().flatten() {
                if here.starts_with(needle) {
                    for &d in ds {
                        if let Some(slot) = wanted.get_mut(d) {
                            *slot = true;
                        }
                    }
                }
            }
            at = m.start() + 1;
            while !lower.is_char_boundary(at) {
                at += 1;
            }
        }
    }
}

static ENGINE: LazyLock<Engine> = LazyLock::new(|| {
    let mut detectors = secrets::detectors();
    detectors.extend(personal::detectors());
    let prefilter = Prefilter::new(&detectors);
    Engine { detectors, prefilter }
});

impl Engine {
    /// Which detectors can fire on a text whose lower-cased copy is `lower`.
    fn wanted(&self, lower: &str) -> Vec<bool> {
        let mut wanted: Vec<bool> = self.detectors.iter().map(|d| d.needles.is_empty()).collect();
        self.prefilter.wake(lower, &mut wanted);
        wanted
    }
}

/// Runs the wanted detectors and resolves their overlaps.
pub(crate) fn scan(text: &str) -> Vec<Finding> {
    let ctx = Ctx { text, lower: text.to_ascii_lowercase() };
    let engine = &*ENGINE;
    let mut found = Vec::new();
    for (detector, wanted) in engine.detectors.iter().zip(engine.wanted(&ctx.lower)) {
        if wanted {
            (detector.run)(&ctx, &mut found);
        }
    }
    resolve(text, found)
}

/// Keeps a disjoint subset of the candidates, preferring secrets over personal data, then
/// longer ranges, then the more specific rule; returns it sorted by start.
pub(crate) fn resolve(text: &str, mut found: Vec<Finding>) -> Vec<Finding> {
    found.retain(|f| f.start < f.end && text.get(f.start..f.end).is_some());
    found.sort_by_key(|f| (f.class != Class::Secret, std::cmp::Reverse(f.end - f.start), rank(f.rule), f.start));
    let mut kept: BTreeMap<usize, Finding> = BTreeMap::new();
    for f in found {
        // Kept ranges are disjoint, so only the last one starting before `f.end` can overlap `f`.
        let overlaps = kept.range(..f.end).next_back().is_some_and(|(_, k)| k.end > f.start);
        if !overlaps {
            kept.insert(f.start, f);
        }
    }
    kept.into_values().collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::rules::{EMAIL_ADDRESS, JWT, PRIVATE_KEY, SECRET_ASSIGNMENT};

    #[test]
    fn every_pattern_compiles_and_the_prefilter_builds() {
        let engine = &*ENGINE;
        assert!(engine.prefilter.search.is_some());
        // Running every detector compiles the patterns built with the detectors; the patterns
        // compiled on first use are exercised by the corpus, which wakes every rule.
        let ctx = Ctx { text: "x", lower: "x".into() };
        let mut out = Vec::new();
        for d in &engine.detectors {
            (d.run)(&ctx, &mut out);
        }
    }

    #[test]
    fn overlaps_prefer_secret_then_longer_then_specific() {
        let text = "0123456789abcdefghij";
        let found = vec![
            EMAIL_ADDRESS.at(0, 20),
            SECRET_ASSIGNMENT.at(5, 10),
            PRIVATE_KEY.at(8, 15),
            JWT.at(8, 15),
            SECRET_ASSIGNMENT.at(15, 18),
        ];
        let kept = resolve(text, found);
        let got: Vec<_> = kept.iter().map(|f| (f.rule, f.start, f.end)).collect();
        assert_eq!(got, vec![("private-key", 8, 15), ("secret-assignment", 15, 18)]);
    }

    #[test]
    fn the_prefilter_sees_overlapping_and_nested_keywords() {
        let engine = &*ENGINE;
        let woken = |text: &str| engine.wanted(text).iter().filter(|w| **w).count();
        let always = woken("");
        // Keywords that overlap ("dd_api_key" ends where "key..." could start) or that extend
        // one another at the same position are all seen.
        assert_eq!(woken("nothing to see"), always);
        assert!(woken("dd_api_key") > always);
        assert!(woken("xdd_api_keyokta_token") > woken("dd_api_key"));
        assert!(woken("heroku_api_key") > always);
    }

    #[test]
    fn invalid_ranges_are_dropped() {
        let kept = resolve("é", vec![JWT.at(0, 1), JWT.at(1, 1), JWT.at(0, 9)]);
        assert!(kept.is_empty());
    }
}
