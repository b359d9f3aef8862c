//! Newest fact wins (issue #35 §3) in `memory.search`: the caller's own personal memory
//! and turns among the top hits that a newer one replaces
//! ([`crate::search::facts::replaces`]) are marked `superseded_by_time`, and the newer
//! one goes first — looked for among the caller's newest facts and by the hits' words,
//! so it comes back even when the question shares no word with it — unless the question
//! names a day, which asks about that day.

use std::collections::HashMap;

use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::{PageRequest, Result, Timestamp};
use ports::records::MemoryStore;
use ports::search::{DocKind, SearchMode};

use super::{RecallHitView, hit_of, indexed_hit, turn_hit};
use crate::search::Window;
use crate::search::facts::Fact;
use crate::tools::{Tools, WhyView};

/// How many of a search's own hits (personal memory, turns) are checked for newer facts.
pub const NEWER_LOOKUPS: usize = 3;
/// The most candidates for newer facts a keyword scan keeps.
pub const NEWER_POOL: usize = 200;
/// The newest personal memories, and the last turns of each recent session, looked at
/// for newer facts.
pub const RECENT_FACTS: u32 = 50;
/// The caller's most recent sessions whose last turns are looked at.
pub const RECENT_SESSIONS: usize = 3;

fn own_fact(h: &RecallHitView) -> bool {
    matches!(h.memory_type.as_deref(), Some("personal" | "conversational"))
}

/// The explanation of a hit brought in as a newer fact rather than found by the query.
pub(super) fn newer_why() -> WhyView {
    WhyView {
        found_by: vec!["newer_fact".to_owned()],
        keyword_rank: None,
        vector_rank: None,
        score: None,
        similarity: None,
        matched_terms: Vec::new(),
    }
}

/// Newest fact wins: each of the caller's own personal memories and turns among the top
/// [`NEWER_LOOKUPS`] of `results` that a newer one (in `results` or `pool`) replaces is
/// marked `superseded_by_time` with the newest such, which goes just before it (brought
/// in from `pool` when the query did not find it). A hit that leans on a fact a newer one
/// replaces (`I send my report to my manager` → `my manager is Priya` → `Tom is my new
/// manager`) gets the newest right after it. Both stay: the older is history, not
/// deleted. Governed memory has its own supersession. A question that names a day
/// (`dated`: "what was dinner on 2 January?") asks about that day, not about now: the
/// older is still marked, but the order stays the search's.
pub(super) fn newest_first(results: &mut Vec<RecallHitView>, pool: &[RecallHitView], dated: bool) {
    let at = |h: &RecallHitView| Timestamp::parse("occurred_at", &h.occurred_at).ok();
    let mut facts = Facts::default();
    let checked: Vec<usize> = (0..results.len()).filter(|&i| own_fact(&results[i])).take(NEWER_LOOKUPS).collect();
    // From the last: a hop's fact goes in right after its hit, moving only those after.
    for i in checked.into_iter().rev() {
        let Some(older_at) = at(&results[i]) else { continue };
        let candidates: Vec<RecallHitView> = results
            .iter()
            .chain(pool)
            .filter(|h| own_fact(h) && h.id != results[i].id && at(h).is_some_and(|t| t > older_at))
            .cloned()
            .collect();
        let newest = candidates.into_iter().filter(|h| facts.replaces(h, &results[i])).max_by_key(|h| at(h));
        if let Some(newer) = newest {
            results[i].superseded_by_time = Some(newer.id.clone());
            if !results.iter().any(|h| h.id == newer.id) {
                // Moved before the older below; for a dated question it stays right after
                // it, so it is not cut off with the results past the limit.
                if dated { results.insert(i + 1, newer) } else { results.push(newer) }
            }
            continue;
        }
        let hit = results[i].clone();
        let leaned: Vec<&RecallHitView> =
            pool.iter().filter(|p| p.id != hit.id && facts.related(p, &hit)).take(MAX_LEANED).collect();
        let mut newest: Option<&RecallHitView> = None;
        for old in leaned {
            let Some(old_at) = at(old) else { continue };
            for p in pool.iter().filter(|p| p.id != old.id && at(p).is_some_and(|t| t > old_at)) {
                if newest.is_none_or(|n| at(p) > at(n)) && facts.replaces(p, old) {
                    newest = Some(p);
                }
            }
        }
        if let Some(newer) = newest.filter(|p| !results.iter().any(|h| h.id == p.id)) {
            results.insert(i + 1, newer.clone());
        }
    }
    if dated {
        return;
    }
    // Each newer fact before the first older one it replaces; the times only increase
    // along the marks, so this ends (bounded all the same).
    let n = results.len();
    for _ in 0..n * n {
        let moved = (0..n).find_map(|i| {
            let newer = results[i].superseded_by_time.as_ref()?;
            let j = results.iter().position(|h| &h.id == newer)?;
            (j > i).then_some((i, j))
        });
        let Some((i, j)) = moved else { break };
        let newer = results.remove(j);
        results.insert(i, newer);
    }
}

/// Whether a question naming `days` ([`ports::search::query_dates`]) asks about when
/// one of its top [`NEWER_LOOKUPS`] hits happened: then it asks about that day, not
/// about now. A date no top hit happened on (a context date, a misread one) does not.
pub(super) fn on_the_days(results: &[RecallHitView], days: &[String]) -> bool {
    !days.is_empty()
        && results.iter().take(NEWER_LOOKUPS).any(|h| {
            Timestamp::parse("occurred_at", &h.occurred_at)
                .is_ok_and(|at| ports::search::day_terms(at).iter().any(|d| days.contains(d)))
        })
}

/// The facts a hop looks through: those of the pool that share a word with the hit.
const MAX_LEANED: usize = 8;

/// Each text analysed once (by record id), however many comparisons it takes part in.
#[derive(Default)]
struct Facts(HashMap<String, Fact>);

impl Facts {
    fn of(&mut self, h: &RecallHitView) -> &Fact {
        self.0.entry(h.id.clone()).or_insert_with(|| Fact::of(&h.text))
    }

    fn replaces(&mut self, newer: &RecallHitView, older: &RecallHitView) -> bool {
        self.of(newer);
        self.of(older);
        self.0[&newer.id].replaces(&self.0[&older.id])
    }

    fn related(&mut self, a: &RecallHitView, b: &RecallHitView) -> bool {
        self.of(a);
        self.of(b);
        self.0[&a.id].related(&self.0[&b.id])
    }
}

impl Tools<'_> {
    /// Where newer facts replacing `results` may be: the caller's newest personal
    /// memories and the turns of its most recent sessions (a replacement is usually
    /// recent), and one search of its own personal memory and sessions (`own`, from the
    /// searched scopes, most recent session first) by the words of its top
    /// [`NEWER_LOOKUPS`] own hits — all within the same time window.
    pub(super) async fn newer_candidates(
        &self,
        caller: &CallerContext,
        own: Vec<MemoryScope>,
        results: &[RecallHitView],
        window: Window,
    ) -> Result<Vec<RecallHitView>> {
        let texts: Vec<&str> = results.iter().filter(|h| own_fact(h)).take(NEWER_LOOKUPS).map(|h| h.text.as_str()).collect();
        if own.is_empty() || texts.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let mut pool = Vec::new();
        let records = &self.backend.records;
        for scope in &own {
            if let MemoryScope::Personal(_) = scope {
                let newest = records.list_memory_newest(&caller.tenant, scope, &PageRequest::first(RECENT_FACTS)).await?;
                let live = newest.items.iter().filter(|m| m.live_at(now) && window.contains(m.happened_at()));
                pool.extend(live.map(|m| hit_of(m, None, newer_why())));
            }
        }
        for scope in own.iter().filter(|s| matches!(s, MemoryScope::Session(_))).take(RECENT_SESSIONS) {
            let MemoryScope::Session(session) = scope else { continue };
            let turns = records.list_turns(&caller.tenant, session, &PageRequest::first(500)).await?.items;
            let recent =
                turns.iter().rev().filter(|t| t.live_at(now)).take(RECENT_FACTS as usize).filter(|t| window.contains(t.at));
            pool.extend(recent.map(|t| turn_hit(scope, t, newer_why())));
        }
        let query: String = texts.join(" ").chars().take(crate::tools::MAX_QUERY_LEN).collect();
        // A pool: its order does not matter, so no late interaction.
        let hits = self.search.query(caller, own, None, &query, 20, SearchMode::Hybrid, window, false).await?;
        for h in &hits {
            let found = match h.kind {
                DocKind::Memory => self.recalled_memory(caller, &h.doc, None, now, newer_why()).await?,
                DocKind::Turn => Some(indexed_hit(h, newer_why())),
                DocKind::Kb | DocKind::Engineering => None,
            };
            pool.extend(found);
        }
        Ok(pool)
    }
}
