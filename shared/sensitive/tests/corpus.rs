//! The detection corpus (`corpus.jsonl`): one case per line, `{"rule", "text", "expect",
//! "value"}`. A positive must be found as exactly `value` under `rule`; a negative must
//! produce no finding at all (except the rules listed in its optional `allow`). Negatives
//! under the pseudo-rule `prose` are ordinary business sentences.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    rule: String,
    text: String,
    expect: bool,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
}

fn corpus() -> Vec<Case> {
    include_str!("corpus.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad corpus line {l}: {e}")))
        .collect()
}

fn show(text: &str, found: &[sensitive::Finding]) -> String {
    found.iter().map(|f| format!("{}={:?}", f.rule, &text[f.start..f.end])).collect::<Vec<_>>().join(", ")
}

/// What is wrong with one case, if anything.
fn failure(case: &Case) -> Option<String> {
    let found = sensitive::scan(&case.text);
    if case.expect {
        let value = case.value.as_deref().unwrap_or_default();
        let hit = found.iter().any(|f| f.rule == case.rule && &case.text[f.start..f.end] == value);
        (!hit).then(|| format!("MISSED {} {:?} in {:?}; found [{}]", case.rule, value, case.text, show(&case.text, &found)))
    } else {
        let unexpected: Vec<_> = found.into_iter().filter(|f| !case.allow.iter().any(|a| a == f.rule)).collect();
        (!unexpected.is_empty())
            .then(|| format!("FALSE POSITIVE ({}) in {:?}: [{}]", case.rule, case.text, show(&case.text, &unexpected)))
    }
}

#[test]
fn corpus_cases_hold() {
    let cases = corpus();
    let mut counts: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &cases {
        let entry = counts.entry(case.rule.as_str()).or_default();
        if case.expect {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
        if let Some(f) = failure(case) {
            entry.2 += 1;
            failures.push(f);
        }
    }
    println!("{:<28} {:>9} {:>9} {:>7}", "rule", "positives", "negatives", "failed");
    for (rule, (p, n, failed)) in &counts {
        println!("{rule:<28} {p:>9} {n:>9} {failed:>7}");
    }
    let (p, n): (Vec<_>, Vec<_>) = cases.iter().partition(|c| c.expect);
    println!("total: {} cases, {} positives, {} negatives", cases.len(), p.len(), n.len());
    assert!(failures.is_empty(), "{} failing cases:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_rule_has_three_positives_and_two_negatives() {
    let cases = corpus();
    let mut missing = Vec::new();
    for (rule, _, _) in sensitive::RULES {
        let pos = cases.iter().filter(|c| c.rule == *rule && c.expect).count();
        let neg = cases.iter().filter(|c| c.rule == *rule && !c.expect).count();
        if pos < 3 || neg < 2 {
            missing.push(format!("{rule}: {pos} positives, {neg} negatives"));
        }
    }
    assert!(missing.is_empty(), "under-covered rules:\n{}", missing.join("\n"));
    for case in &cases {
        let known = case.rule == "prose" || sensitive::RULES.iter().any(|(r, _, _)| *r == case.rule);
        assert!(known, "corpus names an unknown rule {}", case.rule);
        assert!(!case.expect || case.value.as_deref().is_some_and(|v| case.text.contains(v)), "bad positive {:?}", case.text);
    }
}

#[test]
fn at_least_forty_ordinary_sentences() {
    let prose = corpus().into_iter().filter(|c| c.rule == "prose" && !c.expect).count();
    assert!(prose >= 40, "{prose} prose negatives");
}
