//! Newest fact wins (issue #35 §3): whether a newer personal memory or conversation turn
//! says something else of what an older one said — `I live in Lisbon`, then `we moved
//! to Berlin in May`; `my manager is Priya`, then `Tom is my new manager` — so that
//! recall answers the newer first and marks the older as superseded by time.
//!
//! Rule-based, no model: the two texts must be about the same holder (the speaker, or
//! the same named person or relative), say something of the same attribute (a content
//! word in common, or two words of one slot such as *live*/*moved*), each hold a value
//! the other lacks, and the newer must mark a change (`now`, `moved`, `switched`, `no
//! longer`, a new …) or restate the same sentence with another value. A text that only
//! adds to the older (nothing of the older's own left out) is not a contradiction.
//! Measured on `tests/corpus/newest_fact.jsonl` (docs/benchmarks.md, "Newest fact
//! wins"); wrong calls cost order, never data: the older stays, after the newer.

use std::collections::BTreeSet;

/// Words that carry no attribute or value.
const STOP: &[&str] = &[
    "i", "im", "i'm", "ive", "i've", "id", "i'd", "ill", "i'll", "me", "my", "mine", "myself", "we", "we're", "we've", "us",
    "our", "ours", "you", "your", "he", "him", "his", "she", "her", "it", "its", "it's", "they", "them", "their", "a", "an",
    "the", "is", "am", "are", "was", "were", "be", "been", "being", "do", "does", "did", "have", "has", "had", "of", "in", "on",
    "at", "to", "for", "with", "from", "by", "as", "and", "or", "but", "so", "that", "this", "these", "those", "there", "here",
    "just", "really", "very", "still", "yes", "yeah", "oh", "ok", "okay", "well", "um", "like", "got", "get", "gets", "go",
    "goes", "going", "into", "out", "up", "about", "what", "which", "who", "where", "when", "how", "all", "some", "any", "one",
    "can", "could", "would", "will", "should", "then", "than", "because", "if", "guess", "think", "know", "mean", "pretty",
    "much", "lot", "bit", "kind", "sort", "thing", "things", "over", "every", "each", "after", "before", "around", "near",
    "across", "behind", "off", "between", "under", "within", "s", "t", "d", "m", "ll", "re", "ve", "big", "news", "turns", "see",
    "called",
];

/// Words of when, relative to the telling: not a value.
const TIME: &[&str] = &[
    "today",
    "yesterday",
    "tomorrow",
    "week",
    "weeks",
    "month",
    "months",
    "year",
    "years",
    "ago",
    "last",
    "next",
    "recently",
    "lately",
    "currently",
    "earlier",
    "soon",
    "already",
    "ever",
    "always",
    "finally",
    "officially",
    "time",
    "times",
];

/// Words (or phrases, matched on word boundaries) by which a newer text says the older
/// state ended: enough even when the newer text repeats the older value (`I dropped
/// Spanish and started Japanese`).
const ENDED: &[&str] = &[
    "no longer",
    "anymore",
    "any more",
    "quit",
    "stopped",
    "left",
    "instead",
    "replaced",
    "took over",
    "gave up",
    "got rid",
    "broke up",
    "split up",
    "fell out",
    "moved out",
    "dropped",
    "finished",
    "sold",
    "traded",
    "swapped",
    "switched",
    "changed",
    "not anymore",
    "divorced",
    "retired",
    "ended",
    "cancelled",
    "canceled",
    "postponed",
    "pushed",
    "rescheduled",
];

/// Words by which a newer text marks a change of state.
const CHANGE: &[&str] = &[
    "now",
    "moved",
    "moving",
    "relocated",
    "switching",
    "new",
    "newly",
    "started",
    "starting",
    "these days",
    "nowadays",
    "became",
    "joined",
    "transferred",
    "promoted",
    "married",
    "engaged",
    "turned",
    "actually",
    "upgraded",
    "went back",
    "back to",
    "raised",
    "lowered",
    "went up",
    "went down",
    "renamed",
    "after all",
];

/// Words by which a newer text adds to the older rather than replacing it.
const ADDS: &[&str] = &["also", "too", "as well", "another", "in addition", "besides"];

/// Words that qualify an attribute without naming one (`my favourite band` and `my
/// favourite food` are not the same attribute).
const MODIFIERS: &[&str] = &[
    "favourite",
    "favorite",
    "fave",
    "best",
    "new",
    "old",
    "current",
    "main",
    "usual",
    "preferred",
    "least",
    "first",
    "little",
    "good",
    "great",
    "whole",
    "own",
    "other",
    "now",
    "actually",
    "anymore",
    "instead",
    "longer",
    "never",
    "not",
    "no",
    "don't",
    "doesn't",
    "didn't",
    "isn't",
    "aren't",
    "wasn't",
    "won't",
    "can't",
    "also",
    "too",
];

/// Slots: words that name one attribute in different ways.
const SLOTS: &[&[&str]] = &[
    &[
        "live",
        "lives",
        "lived",
        "living",
        "moved",
        "move",
        "moving",
        "relocated",
        "relocate",
        "based",
        "reside",
        "resides",
        "home",
        "apartment",
        "flat",
        "house",
        "city",
        "town",
        "address",
        "neighbourhood",
        "neighborhood",
    ],
    &[
        "work", "works", "worked", "working", "job", "employer", "company", "joined", "hired", "employed", "position", "role",
        "startup", "firm",
    ],
    &["vegetarian", "vegan", "meat", "pescatarian", "diet", "eat", "eating"],
    &[
        "single",
        "dating",
        "girlfriend",
        "boyfriend",
        "engaged",
        "married",
        "divorced",
        "relationship",
        "partner",
        "wife",
        "husband",
        "fiance",
        "fiancee",
    ],
    &["car", "drive", "drives", "driving"],
    &["phone", "number", "mobile", "iphone", "android"],
    &["email", "mail", "gmail", "inbox"],
    &["study", "studying", "studies", "major", "degree", "school", "university", "college"],
    &["drink", "drinks", "drinking", "coffee", "tea"],
    &["allergic", "allergy", "allergies"],
    &["bank", "banks", "banking", "account", "accounts"],
    &["sleep", "sleeps", "bed", "asleep", "wake"],
    &["hair", "haircut", "barber", "hairdresser", "salon"],
    &["vote", "votes", "voter", "voting", "voted"],
];

/// Relatives and roles that name whom a fact is about when they act in it (`my sister
/// lives…`, `my sister's number…`), unlike a role named as a value (`my manager is Priya`).
const HOLDERS: &[&str] = &[
    "sister",
    "brother",
    "mom",
    "mum",
    "mother",
    "dad",
    "father",
    "wife",
    "husband",
    "partner",
    "son",
    "daughter",
    "friend",
    "boss",
    "manager",
    "colleague",
    "coworker",
    "neighbour",
    "neighbor",
    "cousin",
    "aunt",
    "uncle",
    "grandma",
    "grandpa",
    "girlfriend",
    "boyfriend",
    "roommate",
    "kid",
    "kids",
    "baby",
    "landlord",
    "doctor",
    "dentist",
    "therapist",
    "teacher",
    "coach",
    "mentor",
    "parents",
    "family",
    "children",
    "child",
];

const FIRST_PERSON: &[&str] = &["i", "i'm", "im", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "us", "our"];
const POSSESSIVES: &[&str] = &["my", "our"];
const COPULAS: &[&str] = &["is", "was", "are", "were", "now", "since"];
const CLAUSE: &[&str] = &["and", "but", "so", "because", "that", "when", "while", "since"];

/// Lower-case words, with `,` standing for each clause break (`,;.!?` followed by a space).
fn words(s: &str) -> Vec<String> {
    let spaced = s.to_lowercase().replace(['’', '‘'], "'").replace([',', ';', '!', '?'], " , ").replace(". ", " , ");
    spaced
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == ':' || c == ','))
        .map(|w| if w == "," { w.to_owned() } else { w.trim_matches(|c| c == '\'' || c == ':' || c == ',').to_owned() })
        .filter(|w| !w.is_empty())
        .collect()
}

/// A word's stem for comparing: `lives`/`lived`/`living` → `liv`, `running` → `run`.
fn stem(w: &str) -> String {
    let w = w.strip_suffix("'s").unwrap_or(w);
    let cut = ["ing", "ed", "es", "s", "d"].iter().find_map(|suffix| w.strip_suffix(suffix).filter(|r| r.len() >= 3));
    let mut w = cut.unwrap_or(w).to_owned();
    let b = w.as_bytes();
    if b.len() >= 4 && b[b.len() - 1] == b[b.len() - 2] && !b[b.len() - 1].is_ascii_digit() && !b"aeiou".contains(&b[b.len() - 1])
    {
        w.pop();
    }
    w.strip_suffix('e').filter(|r| r.len() >= 3).map_or(w.clone(), str::to_owned)
}

fn has_phrase(text: &[String], phrase: &str) -> bool {
    let p: Vec<&str> = phrase.split(' ').collect();
    text.windows(p.len()).any(|w| w.iter().zip(&p).all(|(a, b)| a == b))
}

/// What a text says, for comparing.
struct Said {
    words: Vec<String>,
    /// Content words (not stop, time or modifier words), by stem.
    content: BTreeSet<String>,
    /// The slots its words name.
    slots: BTreeSet<usize>,
    /// Whom it is about, besides the speaker: relatives and roles acting in it.
    holders: BTreeSet<String>,
    /// Its opening name, when it does not speak in the first person (`Maya moved…`).
    named: Option<String>,
    ended: bool,
    /// A change marked by a word other than `new` (checked against the older text).
    change: bool,
    adds: bool,
    negated: bool,
}

fn said(text: &str) -> Said {
    let all = words(text);
    let mut content = BTreeSet::new();
    let mut slots = BTreeSet::new();
    let mut holders = BTreeSet::new();
    for (i, w) in all.iter().enumerate() {
        if let Some(slot) = SLOTS.iter().position(|s| s.contains(&w.as_str())) {
            slots.insert(slot);
        }
        let bare = w.strip_suffix("'s").unwrap_or(w);
        let holder = HOLDERS.contains(&bare) || HOLDERS.iter().any(|h| stem(h) == stem(bare));
        if holder {
            // Acting (`my sister lives…`, `my sister's…`), not named as a value
            // (`my manager is Priya`, `… with my sister`, `Tom is my new manager`).
            let mut back = i;
            while back > 0 && MODIFIERS.contains(&all[back - 1].as_str()) {
                back -= 1;
            }
            let owned = back > 0 && POSSESSIVES.contains(&all[back - 1].as_str());
            // At the start of a clause: `to my mum` is an object, not who acts.
            let opens = back < 2 || CLAUSE.contains(&all[back - 2].as_str());
            let acting = w.ends_with("'s") || opens && all.get(i + 1).is_some_and(|next| !COPULAS.contains(&next.as_str()));
            if owned && acting {
                holders.insert(stem(bare));
            }
        }
        let skip = w == "," || STOP.contains(&w.as_str()) || TIME.contains(&w.as_str()) || MODIFIERS.contains(&w.as_str());
        if !skip && w.chars().count() > 1 || w.chars().all(|c| c.is_ascii_digit()) {
            content.insert(stem(w));
        }
    }
    let first_person = all.iter().any(|w| FIRST_PERSON.contains(&w.as_str()));
    let named = text.split_whitespace().next().and_then(|first| {
        let bare: String = first.chars().filter(|c| c.is_alphanumeric()).collect();
        let capital = bare.chars().next().is_some_and(char::is_uppercase) && bare.chars().skip(1).all(char::is_lowercase);
        let lower = bare.to_lowercase();
        let common = [STOP, TIME, MODIFIERS].iter().any(|l| l.contains(&lower.as_str()));
        (capital && bare.len() > 1 && !first_person && !common).then(|| stem(&lower))
    });
    let any = |list: &[&str]| list.iter().any(|c| has_phrase(&all, c));
    let (ended, change, adds) =
        (any(ENDED), any(CHANGE.iter().copied().filter(|c| *c != "new").collect::<Vec<_>>().as_slice()), any(ADDS));
    let negated = all.iter().any(|w| {
        matches!(
            w.as_str(),
            "not" | "no" | "never" | "don't" | "doesn't" | "didn't" | "isn't" | "aren't" | "wasn't" | "won't" | "can't"
        )
    });
    Said { words: all, content, slots, holders, named, ended, change, adds, negated }
}

/// The longest older fact's own part that still reads as one value (`Lisbon`, `the
/// gold tier`): an older text with more of its own is about more than one thing.
const MAX_OLD_VALUE_WORDS: usize = 3;
/// The same, when the newer text marks its change only weakly (`now`, `a new …`) or not
/// at all: `I send my weekly report to my manager` is no value `Tom is my new manager`
/// replaces.
const MAX_WEAK_OLD_VALUE_WORDS: usize = 2;
/// The longest newer text's own part.
const MAX_NEW_VALUE_WORDS: usize = 8;

/// A text analysed once, to compare with many others.
pub struct Fact(Said);

impl Fact {
    pub fn of(text: &str) -> Self {
        Self(said(text))
    }

    /// Whether this (newer) text replaces what `older` said ([`replaces`]).
    pub fn replaces(&self, older: &Self) -> bool {
        replaces_said(&self.0, &older.0)
    }

    /// Whether the two share a content word ([`related`]).
    pub fn related(&self, other: &Self) -> bool {
        self.0.content.intersection(&other.0.content).next().is_some()
    }
}

/// Whether `newer` replaces what `older` said (see the module docs).
pub fn replaces(newer: &str, older: &str) -> bool {
    replaces_said(&said(newer), &said(older))
}

fn replaces_said(n: &Said, o: &Said) -> bool {
    // About someone else: a relative acting in one text only, or a name the other
    // never mentions opening a text that does not speak for the speaker.
    if n.holders != o.holders {
        return false;
    }
    // A name opening a text that does not speak for the speaker is whom it is about,
    // unless the other text opens with it too (`Standup moved to 10:15` / `Our standup
    // is at 9:30`); `Helena moved to Paris` is not about `my boss is Helena`.
    let stranger =
        |s: &Said, other: &Said| s.named.as_ref().is_some_and(|name| !other.words.iter().take(3).any(|w| stem(w) == *name));
    if stranger(n, o) || stranger(o, n) || n.adds {
        return false;
    }
    let shared: BTreeSet<&String> = n.content.intersection(&o.content).collect();
    let same_slot = n.slots.intersection(&o.slots).next().is_some();
    if shared.is_empty() && !same_slot {
        return false;
    }
    let new_own: BTreeSet<&String> = n.content.difference(&o.content).collect();
    let old_own: BTreeSet<&String> = o.content.difference(&n.content).collect();
    let flipped = n.negated != o.negated && !shared.is_empty();
    if new_own.is_empty() && !flipped {
        return false;
    }
    // The shared slot's own words name the attribute, not its value.
    let slot_words: BTreeSet<String> = n.slots.intersection(&o.slots).flat_map(|i| SLOTS[*i].iter().map(|w| stem(w))).collect();
    let old_value = old_own.iter().filter(|w| !slot_words.contains(**w)).count();
    if old_value > MAX_OLD_VALUE_WORDS || new_own.len() > MAX_NEW_VALUE_WORDS {
        return false;
    }
    if old_own.is_empty() {
        // Everything the older said is said again: replaced only if the newer says it ended.
        return n.ended || flipped;
    }
    if n.ended || flipped {
        return true;
    }
    // A weaker mark (`now`, `a new …`) or none: the older must read as one value.
    if old_value > MAX_WEAK_OLD_VALUE_WORDS {
        return false;
    }
    // `a new manager`, `my new phone number`: the new thing is the shared attribute
    // (`new tennis shoes` are not `tennis`).
    let ends_phrase = |w: &str| w == "," || [STOP, CLAUSE, COPULAS, TIME].iter().any(|l| l.contains(&w));
    let new_attribute = n.words.iter().enumerate().filter(|(_, w)| *w == "new").any(|(i, _)| {
        let phrase: Vec<&String> = n.words[i + 1..].iter().take_while(|w| !ends_phrase(w)).collect();
        phrase.last().is_some_and(|last| {
            let st = stem(last);
            shared.contains(&st) || slot_words.contains(&st)
        })
    });
    // The same sentence with another value (`my gym day is Monday` / `… is Thursday`).
    let parallel = shared.len() >= old_own.len() && new_own.len() <= old_own.len() + 1 && n.words.len() <= o.words.len() + 2;
    n.change || new_attribute || parallel
}

/// Whether two texts share a content word (by stem): `I send my weekly report to my
/// manager` and `my manager is Priya`.
pub fn related(a: &str, b: &str) -> bool {
    Fact::of(a).related(&Fact::of(b))
}

#[cfg(test)]
mod tests {
    use super::replaces;

    #[test]
    fn a_change_of_the_same_attribute_replaces() {
        assert!(replaces("We moved to Berlin in May", "I live in Lisbon"));
        assert!(replaces("Tom is my new manager", "My manager is Priya"));
        assert!(replaces("My gym day is Thursday", "My gym day is Monday"));
        assert!(replaces("I'm not vegetarian anymore", "I'm vegetarian"));
    }

    #[test]
    fn an_addition_another_attribute_or_another_holder_does_not() {
        assert!(!replaces("I live in Lisbon with my sister", "I live in Lisbon"));
        assert!(!replaces("My favourite band is Muse now", "My favourite food is sushi"));
        assert!(!replaces("My sister moved to Rome", "I live in Lisbon"));
        assert!(!replaces("I visited Berlin last week", "I live in Lisbon"));
        assert!(!replaces("I live in Lisbon", "I live in Lisbon"));
    }
}

#[cfg(test)]
mod corpus {
    use super::replaces;

    /// (split, caught, pairs, false alarms, compatible pairs, the misses and false alarms).
    fn classify(split: &str) -> (usize, usize, usize, usize, Vec<String>) {
        let (mut caught, mut pairs, mut alarms, mut compatible, mut wrong) = (0, 0, 0, 0, Vec::new());
        for line in include_str!("../../../../tests/corpus/newest_fact.jsonl").lines() {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            if case["split"] != split {
                continue;
            }
            let (older, newer) = (case["older"].as_str().unwrap(), case["newer"].as_str().unwrap());
            let said = replaces(newer, older);
            if case["replaces"] == true {
                pairs += 1;
                caught += usize::from(said);
                if !said {
                    wrong.push(format!("missed: {older} → {newer}"));
                }
            } else {
                compatible += 1;
                alarms += usize::from(said);
                if said {
                    wrong.push(format!("false alarm: {older} → {newer}"));
                }
            }
        }
        (caught, pairs, alarms, compatible, wrong)
    }

    /// The pairs of `tests/corpus/newest_fact.jsonl`, text only (the end-to-end figures
    /// through `memory.search` are in `tests/recall.rs`).
    #[test]
    fn the_newest_fact_pairs() {
        let (caught, pairs, alarms, compatible, wrong) = classify("tune");
        println!("newest fact (tune): {caught}/{pairs} caught, {alarms}/{compatible} false alarms\n{wrong:#?}");
        let (h_caught, h_pairs, h_alarms, h_compatible, h_wrong) = classify("heldout");
        println!("newest fact (held out): {h_caught}/{h_pairs} caught, {h_alarms}/{h_compatible} false alarms\n{h_wrong:#?}");
        assert!(pairs >= 70 && h_pairs >= 40, "the set holds its pairs");
        // As measured when the rules were last changed (docs/benchmarks.md): a change of
        // the rules that loses pairs or raises false alarms shows here.
        assert!(caught >= 69 && alarms == 0, "tune: {caught}/{pairs}, {alarms} false alarms");
        assert!(h_caught >= 32 && h_alarms == 0, "held out: {h_caught}/{h_pairs}, {h_alarms} false alarms");
    }
}
