//! Triage scoring throughput (SPEC §6.2) against a tenant with 10 000 active org
//! entries, on the embedded backend: the `Score` task (read the proposal and the
//! tenant, find the closest active entries through the search index, score the five
//! factors with secrets/PII/destructive-intent, near-duplicate and contradiction checks,
//! store the scored proposal with its audit record in one durable commit) over 2 000
//! pending proposals one after another and 2 000 more eight at a time, and the pure
//! scoring function alone. Then, for contrast, the `Score` task on the same tenant
//! without a search index (the store scan an AWS stack without OpenSearch falls back to,
//! capped at 5 000 entries). Run: `cargo bench -p services --bench triage`
//! (`TRIAGE_ENTRIES=2000 TRIAGE_PROPOSALS=500` for a shorter run).
//!
//! The entries and proposals are synthetic, and say so: sentences built from a small
//! business vocabulary with numbers, so proposals overlap existing entries the way real
//! ones do — a fifth are near-duplicates or contradictions of an existing entry.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::Instant;

use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::proposal::{Proposal, ProposalState};
use domain::tenant::{Department, Industry, PlanTier};
use domain::{Id, TenantId};
use ports::records::{Expect, MemoryStore, ProposalStore};
use services::Services;

const TEAMS: [&str; 8] = ["Support", "Customer success", "Finance", "Sales", "Onboarding", "Security", "Billing", "Legal"];
const VERBS: [&str; 6] = ["reviews", "escalates", "approves", "audits", "renews", "refunds"];
const OBJECTS: [&str; 10] = [
    "enterprise renewals",
    "health scores",
    "refund requests",
    "discount requests",
    "onboarding plans",
    "invoices",
    "access reviews",
    "QBR decks",
    "churn risks",
    "support tickets",
];
const CADENCE: [&str; 5] = ["weekly", "monthly", "every quarter", "within 2 days", "before each renewal"];

fn sentence(i: usize) -> (String, String) {
    let team = TEAMS[i % TEAMS.len()];
    let verb = VERBS[(i / 8) % VERBS.len()];
    let object = OBJECTS[(i / 48) % OBJECTS.len()];
    let cadence = CADENCE[(i / 480) % CADENCE.len()];
    (
        format!("{team} {verb} {object} (rule {i})"),
        format!("{team} {verb} {object} {cadence} for accounts above {} seats; owner team {}.", 10 + i % 490, i % 97),
    )
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    let entries: usize = std::env::var("TRIAGE_ENTRIES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let proposals: usize = std::env::var("TRIAGE_PROPOSALS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let backend = store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).expect("backend");
        let s = Services::new(backend.clone());
        let t = TenantId::new("bench").unwrap();
        s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();

        // 10 000 active org entries, stored and indexed (as the writer leaves them).
        let t0 = Instant::now();
        let now = backend.clock.now();
        for i in 0..entries {
            let (title, body) = sentence(i);
            let m = MemoryEntry {
                tenant: t.clone(),
                id: Id::new(format!("m{i:06}")).unwrap(),
                memory_type: MemoryType::Org,
                scope: MemoryScope::Org,
                kind: "decision".into(),
                title,
                body,
                state: GovernanceState::Active,
                lineage: Lineage::default(),
                created_by: Id::new("seed").unwrap(),
                created_at: now,
                updated_at: now,
                version: 0,
                occurred_at: None,
                expires_at: None,
                metadata: None,
            };
            backend.records.put_memory(&m, Expect::Absent).await.unwrap();
            s.search
                .index(services::search::IndexRequest {
                    tenant: &t,
                    scope: &m.scope,
                    kind: ports::search::DocKind::Memory,
                    doc: &m.id,
                    title: &m.title,
                    body: &m.body,
                    at: now,
                    occurred: None,
                })
                .await
                .unwrap();
        }
        println!("seeded {entries} active org entries (stored, indexed, verified) in {:.1} s", t0.elapsed().as_secs_f64());

        // Pending proposals: a fifth restate or contradict an existing entry.
        let make = |n: usize, offset: usize| -> Vec<Proposal> {
            (0..n)
                .map(|k| {
                    let i = (k * 7919 + offset) % entries;
                    let (title, body) = match k % 5 {
                        0 => sentence(i),
                        1 => {
                            let (t, b) = sentence(i);
                            (t, b.replace(" seats", " seats; no longer").replace("for accounts", "never for accounts"))
                        }
                        2 => ("Maybe a new rota".into(), format!("Perhaps support could answer on weekends, from a rota of {k} people.")),
                        3 => ("Refund limit".into(), format!("Refunds above {} EUR need a second approver from finance.", 100 + k)),
                        _ => (format!("Escalation path {k}"), format!("P1 tickets page the on-call engineer within {} minutes.", 5 + k % 30)),
                    };
                    Proposal {
                        tenant: t.clone(),
                        id: Id::new(format!("p{offset}-{k:06}")).unwrap(),
                        kind: "memory:decision".into(),
                        title,
                        body,
                        supersedes: None,
                        suggested_supersede: None,
                        state: ProposalState::Pending,
                        score: None,
                        decision_reason: None,
                        proposed_by: Id::new("agent").unwrap(),
                        proposed_via: None,
                        source_session: (k % 2 == 0).then(|| "s1".to_owned()),
                        origin: None,
                        wait: None,
                        action: None,
                        entity: None,
                        detected: Vec::new(),
                        created_at: now,
                        updated_at: now,
                        version: 1,
                    }
                })
                .collect()
        };
        let batch = make(proposals, 1);
        for p in &batch {
            backend.records.create_proposal(p).await.unwrap();
        }

        // The Score task, one proposal after another.
        let tasks = s.governance.tasks();
        let mut lat = Vec::with_capacity(batch.len());
        let mut routes = std::collections::BTreeMap::<String, usize>::new();
        let t0 = Instant::now();
        for p in &batch {
            let t1 = Instant::now();
            let out = tasks.score(&t, &p.id).await.unwrap();
            lat.push(t1.elapsed().as_secs_f64() * 1000.0);
            *routes.entry(out.route).or_default() += 1;
        }
        let total = t0.elapsed().as_secs_f64();
        lat.sort_by(f64::total_cmp);
        println!(
            "Score task (index candidates): {} proposals in {total:.2} s = {:.0} proposals/s; p50 {:.2} ms, p95 {:.2} ms; routes {routes:?}",
            batch.len(),
            batch.len() as f64 / total,
            pct(&lat, 0.50),
            pct(&lat, 0.95)
        );
        // Proposals arrive concurrently (one per MCP call, one Lambda each): 8 at a time.
        let more = make(proposals, 3);
        for p in &more {
            backend.records.create_proposal(p).await.unwrap();
        }
        let t0 = Instant::now();
        let mut workers = tokio::task::JoinSet::new();
        for chunk in more.chunks(more.len().div_ceil(8)) {
            let (tasks, t, ids) = (tasks.clone(), t.clone(), chunk.iter().map(|p| p.id.clone()).collect::<Vec<_>>());
            workers.spawn(async move {
                for id in ids {
                    tasks.score(&t, &id).await.unwrap();
                }
            });
        }
        while let Some(r) = workers.join_next().await {
            r.unwrap();
        }
        let total = t0.elapsed().as_secs_f64();
        println!(
            "Score task, 8 concurrent: {} proposals in {total:.2} s = {:.0} proposals/s",
            more.len(),
            more.len() as f64 / total
        );
        let conflicts = {
            let mut n = 0;
            for p in &batch {
                let stored = backend.records.get_proposal(&t, &p.id).await.unwrap().unwrap();
                if stored.score.is_some_and(|s| s.conflict > 0.0) {
                    n += 1;
                }
            }
            n
        };
        println!("  {conflicts} of {} proposals found conflicting (near-duplicate or contradiction) entries", batch.len());

        // The scoring function alone, over the same candidates (no store).
        let mut inputs = Vec::new();
        let (mut search_s, mut gets_s, mut gets) = (0.0, 0.0, 0usize);
        for p in batch.iter().take(500) {
            let t1 = Instant::now();
            let hits = backend
                .search
                .search(&ports::search::SearchQuery {
                    tenant: t.clone(),
                    scopes: vec![MemoryScope::Org],
                    kind: Some(ports::search::DocKind::Memory),
                    text: format!("{} {}", p.title, p.body),
                    vector: None,
                    embedder: backend.embedder.name().to_owned(),
                    mode: ports::search::SearchMode::Keyword,
                    k: 12,
                    since: None,
                    until: None,
                })
                .await
                .unwrap();
            search_s += t1.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let mut active = Vec::new();
            for h in hits {
                active.push(backend.records.get_memory(&t, &h.doc).await.unwrap().unwrap());
                gets += 1;
            }
            gets_s += t1.elapsed().as_secs_f64();
            inputs.push((p.clone(), active));
        }
        println!(
            "  of which: the index query {:.3} ms, reading the {} candidates {:.3} ms (per proposal)",
            search_s * 1000.0 / inputs.len() as f64,
            gets / inputs.len(),
            gets_s * 1000.0 / inputs.len() as f64
        );
        let vocabulary = std::collections::BTreeSet::new();
        let policy = services::governance::triage::Policy::default();
        let rounds = 20;
        let t0 = Instant::now();
        for _ in 0..rounds {
            for (p, active) in &inputs {
                let input = services::governance::triage::Input {
                    title: &p.title,
                    body: &p.body,
                    has_source_session: p.source_session.is_some(),
                    supersedes: None,
                    detected: &p.detected,
                    active,
                    vocabulary: &vocabulary,
                };
                std::hint::black_box(services::governance::triage::score(&input, &policy));
            }
        }
        let n = rounds * inputs.len();
        println!("scoring function alone: {:.0} proposals/s ({n} scorings)", n as f64 / t0.elapsed().as_secs_f64());

        // Contrast: the same tenant without a search index (a store scan, capped).
        let scan = Services::new(ports::Backend { search: Arc::new(ports::search::NoIndex), ..backend.clone() });
        let few = make(proposals.min(200), 2);
        for p in &few {
            backend.records.create_proposal(p).await.unwrap();
        }
        let t0 = Instant::now();
        for p in &few {
            scan.governance.tasks().score(&t, &p.id).await.unwrap();
        }
        let total = t0.elapsed().as_secs_f64();
        println!(
            "Score task without an index (scan of up to 5 000 entries): {} proposals in {total:.2} s = {:.0} proposals/s",
            few.len(),
            few.len() as f64 / total
        );
    });
}
