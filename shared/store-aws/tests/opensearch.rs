//! The OpenSearch adapter and the Bedrock embedder against an in-process HTTP server.
//!
//! There is no local OpenSearch (or Bedrock): this server records every request and
//! answers with responses shaped like OpenSearch's own (recorded from the service's
//! documented examples). The tests assert the exact requests — mapping, bulk lines,
//! the BM25 and k-NN queries with the caller's partition filter inside, the SigV4
//! signature — and how answers and failures are mapped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use domain::memory::MemoryScope;
use domain::{ErrorCode, Id, TenantId, Timestamp};
use ports::Embedder;
use ports::search::{DocKind, SearchDoc, SearchIndex, SearchMode, SearchQuery};
use serde_json::{Value, json};
use store_aws::{BedrockEmbedder, OpenSearchIndex, SignedHttp};

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: HeaderMap,
    body: String,
}

#[derive(Default)]
struct Server {
    seen: Mutex<Vec<Seen>>,
    /// Answers for `_search`, in order; then an empty hit list.
    searches: Mutex<Vec<Value>>,
    /// Status to answer everything with, when set.
    fail: Mutex<Option<(u16, Value)>>,
    /// Statuses to answer the next requests with, one each, before answering normally.
    fail_next: Mutex<std::collections::VecDeque<u16>>,
    /// The index exists already (made by an earlier version); and its mapping has `day`
    /// as another type, so adding the field conflicts.
    exists: Mutex<bool>,
    day_conflicts: Mutex<bool>,
}

async fn handle(State(s): State<Arc<Server>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let path = uri.path().to_owned();
    s.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: path.clone(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    if let Some(status) = s.fail_next.lock().unwrap().pop_front() {
        let body = json!({"message": "Too many requests, please wait before trying again."});
        return (StatusCode::from_u16(status).unwrap(), body.to_string());
    }
    if let Some((status, body)) = s.fail.lock().unwrap().clone() {
        return (StatusCode::from_u16(status).unwrap(), body.to_string());
    }
    if method == Method::PUT && *s.exists.lock().unwrap() {
        if !path.ends_with("/_mapping") {
            let body = json!({"error": {"type": "resource_already_exists_exception", "reason": "index [continuity/x] already exists"}, "status": 400});
            return (StatusCode::BAD_REQUEST, body.to_string());
        }
        if *s.day_conflicts.lock().unwrap() {
            let body = json!({"error": {"type": "illegal_argument_exception", "reason": "mapper [day] cannot be changed from type [date] to [keyword]"}, "status": 400});
            return (StatusCode::BAD_REQUEST, body.to_string());
        }
    }
    let answer = if method == Method::PUT {
        json!({"acknowledged": true, "shards_acknowledged": true, "index": path.trim_start_matches('/')})
    } else if path == "/_bulk" {
        let items: Vec<Value> = String::from_utf8_lossy(&body)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l.get("index").is_some() || l.get("delete").is_some())
            .map(|l| {
                let (op, meta) = l.as_object().unwrap().iter().next().unwrap();
                // Like Serverless: an index action gets an id the collection assigns.
                let id = meta.get("_id").cloned().unwrap_or_else(|| json!("1%3A0%3AgAVk6JEB"));
                json!({op.clone(): {"_index": meta["_index"], "_id": id, "_version": 1, "result": "created", "status": 201}})
            })
            .collect();
        json!({"took": 12, "errors": false, "items": items})
    } else if path.ends_with("/_search") {
        let mut q = s.searches.lock().unwrap();
        let hits = if q.is_empty() { json!([]) } else { q.remove(0) };
        json!({"took": 3, "timed_out": false, "_shards": {"total": 2, "successful": 2, "skipped": 0, "failed": 0},
               "hits": {"total": {"value": hits.as_array().unwrap().len(), "relation": "eq"}, "hits": hits}})
    } else if path.starts_with("/model/") {
        let dims = serde_json::from_slice::<Value>(&body).unwrap()["dimensions"].as_u64().unwrap();
        let v: Vec<f64> = (0..dims)
            .map(|i| {
                if i == 0 {
                    3.0
                } else if i == 1 {
                    4.0
                } else {
                    0.0
                }
            })
            .collect();
        json!({"embedding": v, "inputTextTokenCount": 5})
    } else {
        return (StatusCode::NOT_FOUND, json!({"error": "no route"}).to_string());
    };
    (StatusCode::OK, answer.to_string())
}

async fn server() -> (Arc<Server>, String) {
    let state = Arc::new(Server::default());
    let app = Router::new().fallback(handle).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (state, url)
}

async fn http(url: &str, service: &'static str) -> SignedHttp {
    let sdk = store_aws::aws_config_for(Some(url), "eu-west-1").await;
    SignedHttp::new(&sdk, url, service).unwrap()
}

fn t(name: &str) -> TenantId {
    TenantId::new(name).unwrap()
}

fn doc(tenant: &str, scope: MemoryScope, id: &str, text: &str) -> SearchDoc {
    SearchDoc {
        tenant: t(tenant),
        scope,
        id: Id::new(format!("{id}~0")).unwrap(),
        doc: Id::new(id).unwrap(),
        kind: DocKind::Kb,
        title: "Runbook".into(),
        text: text.into(),
        vector: vec![0.6, 0.8, 0.0, 0.0],
        embedder: "hashing-4 (lexical)".into(),
        updated_at: Timestamp(1_700_000_000_000),
        occurred_at: None,
    }
}

fn hit(part: &str, chunk: &str, doc: &str, score: f64, text: &str) -> Value {
    json!({"_index": "continuity", "_id": "x", "_score": score,
           "_source": {"partition": part, "chunk": chunk, "doc": doc, "kind": "kb", "title": "Runbook", "text": text}})
}

#[tokio::test]
async fn mapping_bulk_and_hybrid_queries_are_exactly_as_designed() {
    let (srv, url) = server().await;
    let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "hashing-4 (lexical)", 4);
    index
        .upsert(&[
            doc("acme", MemoryScope::Org, "kb-1", "Restart with drain_ingest()."),
            doc("acme", MemoryScope::Project("apollo".into()), "kb-2", "Apollo notes"),
        ])
        .await
        .unwrap();
    {
        let seen = srv.seen.lock().unwrap();
        assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("PUT", "/continuity"));
        let mapping: Value = serde_json::from_str(&seen[0].body).unwrap();
        assert_eq!(mapping, index.mapping());
        assert_eq!(mapping["settings"]["index"]["knn"], true);
        assert_eq!(
            mapping["mappings"]["properties"]["vector"],
            json!({"type": "knn_vector", "dimension": 4, "method": {"name": "hnsw", "engine": "faiss", "space_type": "cosinesimil", "parameters": {"m": 16, "ef_construction": 64}}})
        );
        assert_eq!(mapping["mappings"]["properties"]["partition"], json!({"type": "keyword"}));
        // Stemmed text fields, as the embedded index's keyword side.
        assert_eq!(mapping["mappings"]["properties"]["text"], json!({"type": "text", "analyzer": "english"}));
        // The day each chunk happened on, matched exactly by a query naming a date.
        assert_eq!(mapping["mappings"]["properties"]["day"], json!({"type": "keyword"}));
        assert_eq!((seen[1].method.as_str(), seen[1].path.as_str()), ("POST", "/_bulk"));
        assert_eq!(seen[1].headers["content-type"], "application/x-ndjson");
        let lines: Vec<Value> = seen[1].body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 4);
        assert!(seen[1].body.ends_with('\n'), "bulk bodies end with a newline");
        // Serverless vector collections refuse a client-supplied `_id` on index.
        assert_eq!(lines[0], json!({"index": {"_index": "continuity"}}), "no _id in index actions");
        assert_eq!(lines[2], json!({"index": {"_index": "continuity"}}), "no _id in index actions");
        assert_eq!(
            lines[1],
            json!({"partition": "acme/org", "chunk": "kb-1~0", "doc": "kb-1", "kind": "kb", "embedder": "hashing-4 (lexical)",
                   "title": "Runbook", "text": "Restart with drain_ingest().", "updated_at": 1_700_000_000_000_i64,
                   "occurred_at": 1_700_000_000_000_i64, "day": ["2023-11-14", "11-14"],
                   "vector": [0.6, 0.8, 0.0, 0.0]})
        );
        assert_eq!(lines[3]["partition"], "acme/project:apollo");
        // SigV4 for OpenSearch Serverless, with the payload hash it requires.
        for s in seen.iter() {
            let auth = s.headers["authorization"].to_str().unwrap();
            assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=test/"), "{auth}");
            assert!(auth.contains("/eu-west-1/aoss/aws4_request"), "{auth}");
            assert!(auth.contains("x-amz-content-sha256"), "the payload hash is signed: {auth}");
            assert!(s.headers.contains_key("x-amz-date"));
        }
    }
    srv.seen.lock().unwrap().clear();
    // Keyword answer: a foreign partition's chunk (which a correct service never
    // returns) is dropped; the vector answer ranks kb-2 first.
    *srv.searches.lock().unwrap() = vec![
        json!([
            hit("acme/org", "kb-1~0", "kb-1", 7.5, "Restart with drain_ingest()."),
            hit("other/org", "kb-9~0", "kb-9", 9.0, "not yours")
        ]),
        json!([
            hit("acme/project:apollo", "kb-2~0", "kb-2", 0.95, "Apollo notes"),
            hit("acme/org", "kb-1~0", "kb-1", 0.80, "Restart with drain_ingest().")
        ]),
    ];
    let q = SearchQuery {
        tenant: t("acme"),
        scopes: vec![MemoryScope::Org, MemoryScope::Project("apollo".into())],
        kind: Some(DocKind::Kb),
        text: "how to restart drain_ingest".into(),
        vector: Some(vec![0.6, 0.8, 0.0, 0.0]),
        embedder: "hashing-4 (lexical)".into(),
        mode: SearchMode::Hybrid,
        k: 5,
        since: None,
        until: None,
    };
    let hits = index.search(&q).await.unwrap();
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let filter = json!([{"terms": {"partition": ["acme/org", "acme/project:apollo"]}}, {"term": {"kind": "kb"}}]);
    assert_eq!(seen[0].path, "/continuity/_search");
    assert_eq!(
        serde_json::from_str::<Value>(&seen[0].body).unwrap(),
        json!({"size": 50, "_source": ["partition", "chunk", "doc", "kind", "title", "text", "updated_at", "occurred_at"],
               "query": {"bool": {"filter": filter, "must": [{"multi_match": {"query": "restart drain_ingest", "fields": ["title^2", "text"]}}]}}})
    );
    let mut knn_filter = filter.as_array().unwrap().clone();
    knn_filter.push(json!({"term": {"embedder": "hashing-4 (lexical)"}}));
    assert_eq!(
        serde_json::from_str::<Value>(&seen[1].body).unwrap(),
        json!({"size": 50, "_source": ["partition", "chunk", "doc", "kind", "title", "text", "updated_at", "occurred_at"],
               "query": {"knn": {"vector": {"vector": [0.6, 0.8, 0.0, 0.0], "k": 50, "filter": {"bool": {"filter": knn_filter}}}}}})
    );
    let ids: Vec<&str> = hits.iter().map(|h| h.doc.as_str()).collect();
    assert_eq!(ids, ["kb-1", "kb-2"], "the identifier drain_ingest puts kb-1 first; kb-9 is dropped");
    assert!(hits[0].exact);
    assert_eq!(hits[1].scope, MemoryScope::Project("apollo".into()));
    assert!((hits[1].similarity.unwrap() - 0.9).abs() < 1e-6, "cosinesimil score (1 + cos) / 2 maps back to cos");

    // A date the query names is its day's term beside the words, either matching; the
    // words are sent without the date, and a question that is a date and stop words
    // alone asks for the day only.
    let words = |w: &str| json!({"multi_match": {"query": w, "fields": ["title^2", "text"]}});
    let day = json!({"term": {"day": "2024-01-07"}});
    for (text, should) in [
        ("what did Elise buy on 7 Jan 2024?", json!([words("Elise buy"), day])),
        ("What happened on 7 Jan 2024?", json!([words("happened"), day])),
        ("what was on 7 Jan 2024?", json!([day])),
    ] {
        srv.seen.lock().unwrap().clear();
        let dated = SearchQuery { text: text.into(), mode: SearchMode::Keyword, ..q.clone() };
        index.search(&dated).await.unwrap();
        let seen = srv.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "a keyword search is one request");
        assert_eq!(
            serde_json::from_str::<Value>(&seen[0].body).unwrap()["query"],
            json!({"bool": {"filter": filter, "minimum_should_match": 1, "should": should}}),
            "{text}"
        );
    }

    // A time window filters on `occurred_at` in both requests (since inclusive, until
    // exclusive), and a hit carries its time back.
    srv.seen.lock().unwrap().clear();
    let mut at = hit("acme/org", "t-1~0", "t-1", 1.0, "Book the Lisbon flight");
    at["_source"]["occurred_at"] = json!(1_767_312_000_000_i64);
    *srv.searches.lock().unwrap() = vec![json!([at.clone()]), json!([at])];
    let windowed = SearchQuery {
        scopes: vec![MemoryScope::Org],
        kind: None,
        since: Some(Timestamp(1_767_225_600_000)),
        until: Some(Timestamp(1_767_398_400_000)),
        ..q
    };
    let hits = index.search(&windowed).await.unwrap();
    assert_eq!(hits[0].occurred_at, Some(Timestamp(1_767_312_000_000)));
    let seen = srv.seen.lock().unwrap().clone();
    let range = json!({"range": {"occurred_at": {"gte": 1_767_225_600_000_i64, "lt": 1_767_398_400_000_i64}}});
    let keyword: Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(keyword["query"]["bool"]["filter"], json!([{"terms": {"partition": ["acme/org"]}}, range]));
    let knn: Value = serde_json::from_str(&seen[1].body).unwrap();
    assert_eq!(
        knn["query"]["knn"]["vector"]["filter"]["bool"]["filter"],
        json!([{"terms": {"partition": ["acme/org"]}}, range, {"term": {"embedder": "hashing-4 (lexical)"}}])
    );

    // Fusion's closeness is on the cosine's absolute scale, as on embedded: a hit only
    // the vectors found, at OpenSearch score 0.8 (cosine 0.6), scores (0.6 − 0.3) / 0.5
    // with this (lexical) embedder's scale — not what the score 0.8 itself would give.
    *srv.searches.lock().unwrap() = vec![json!([]), json!([hit("acme/org", "m-1~0", "m-1", 0.8, "Lives near the sea")])];
    let plain = SearchQuery { since: None, until: None, ..windowed };
    let hits = index.search(&plain).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert!((hits[0].score - 0.6).abs() < 1e-6, "{}", hits[0].score);
}

/// An index made by an earlier version exists: the `day` field is added to its mapping
/// before the first write; where the index maps `day` otherwise, every call refuses,
/// saying what to do, instead of writing chunks the index cannot take.
#[tokio::test]
async fn an_older_index_gets_the_day_field_or_says_it_must_be_recreated() {
    for conflict in [false, true] {
        let (srv, url) = server().await;
        *srv.exists.lock().unwrap() = true;
        *srv.day_conflicts.lock().unwrap() = conflict;
        let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "hashing-4 (lexical)", 4);
        let written = index.upsert(&[doc("acme", MemoryScope::Org, "kb-1", "Restart with drain_ingest().")]).await;
        let seen = srv.seen.lock().unwrap().clone();
        let calls: Vec<(&str, &str)> = seen.iter().map(|s| (s.method.as_str(), s.path.as_str())).collect();
        assert_eq!(serde_json::from_str::<Value>(&seen[1].body).unwrap(), json!({"properties": {"day": {"type": "keyword"}}}));
        if conflict {
            let e = written.unwrap_err();
            // Internal for the caller; the operator's log says what to do.
            let said = e.internal.clone().unwrap_or_default();
            assert!(said.contains("maps `day` otherwise") && said.contains("reindex --full"), "{e:?}");
            assert_eq!(calls, [("PUT", "/continuity"), ("PUT", "/continuity/_mapping")], "nothing written");
        } else {
            written.unwrap();
            assert_eq!(calls, [("PUT", "/continuity"), ("PUT", "/continuity/_mapping"), ("POST", "/_bulk")]);
        }
    }
}

#[tokio::test]
async fn remove_deletes_the_chunks_by_the_ids_the_collection_assigned() {
    let (srv, url) = server().await;
    let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "e", 4);
    let mut a = hit("acme/org", "kb-1~0", "kb-1", 0.0, "");
    a["_id"] = json!("1%3A0%3AgAVk6JEB");
    let mut b = hit("acme/org", "kb-1~1", "kb-1", 0.0, "");
    b["_id"] = json!("1%3A0%3AhBVk6JEB");
    *srv.searches.lock().unwrap() = vec![json!([a, b])];
    index.remove(&t("acme"), &MemoryScope::Org, &Id::new("kb-1").unwrap()).await.unwrap();
    let seen = srv.seen.lock().unwrap();
    let find = seen.iter().find(|s| s.path == "/continuity/_search").unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&find.body).unwrap(),
        json!({"size": 1000, "_source": ["chunk"],
               "query": {"bool": {"filter": [{"term": {"partition": "acme/org"}}, {"term": {"doc": "kb-1"}}]}}})
    );
    let bulk = seen.iter().find(|s| s.path == "/_bulk").unwrap();
    let lines: Vec<Value> = bulk.body.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        lines,
        [
            json!({"delete": {"_index": "continuity", "_id": "1%3A0%3AgAVk6JEB"}}),
            json!({"delete": {"_index": "continuity", "_id": "1%3A0%3AhBVk6JEB"}})
        ]
    );
}

#[tokio::test]
async fn every_query_carries_exactly_the_callers_partitions() {
    let (srv, url) = server().await;
    let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "e", 4);
    let all = [
        MemoryScope::Global,
        MemoryScope::Org,
        MemoryScope::Team("core".into()),
        MemoryScope::Project("apollo".into()),
        MemoryScope::Project("cassini".into()),
        MemoryScope::Personal("u1".into()),
    ];
    for i in 0..1_000u32 {
        let scopes: Vec<MemoryScope> =
            all.iter().enumerate().filter(|(b, _)| i & (1 << b) != 0).map(|(_, s)| s.clone()).collect();
        let tenant = if i % 2 == 0 { "acme" } else { "globex" };
        srv.seen.lock().unwrap().clear();
        let q = SearchQuery {
            tenant: t(tenant),
            scopes: scopes.clone(),
            kind: None,
            text: format!("query {i}"),
            vector: Some(vec![1.0, 0.0, 0.0, 0.0]),
            embedder: "e".into(),
            mode: SearchMode::Hybrid,
            k: 10,
            since: None,
            until: None,
        };
        index.search(&q).await.unwrap();
        let seen = srv.seen.lock().unwrap();
        let searches: Vec<&Seen> = seen.iter().filter(|s| s.path.ends_with("/_search")).collect();
        if scopes.is_empty() {
            assert!(searches.is_empty(), "no scope, no query");
            continue;
        }
        let want: Vec<String> = scopes.iter().map(|s| store_aws::search::partition(&t(tenant), s)).collect();
        assert_eq!(searches.len(), 2);
        for s in searches {
            let body: Value = serde_json::from_str(&s.body).unwrap();
            let filters =
                body.pointer("/query/bool/filter").or_else(|| body.pointer("/query/knn/vector/filter/bool/filter")).unwrap();
            assert_eq!(filters[0], json!({"terms": {"partition": want}}), "query {i}");
            for p in want.iter().filter(|p| !p.starts_with('/')) {
                assert!(p.starts_with(&format!("{tenant}/")), "{p}");
            }
        }
    }
}

#[tokio::test]
async fn failures_map_to_the_taxonomy() {
    let (srv, url) = server().await;
    let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "e", 4);
    // An index that already exists is fine.
    *srv.fail.lock().unwrap() =
        Some((400, json!({"error": {"type": "resource_already_exists_exception", "reason": "index exists"}, "status": 400})));
    let q = SearchQuery {
        tenant: t("acme"),
        scopes: vec![MemoryScope::Org],
        kind: None,
        text: "x".into(),
        vector: None,
        embedder: "e".into(),
        mode: SearchMode::Keyword,
        k: 3,
        since: None,
        until: None,
    };
    let e = index.search(&q).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal, "a 400 on the search itself is our bug, not the caller's");
    for status in [429, 503] {
        *srv.fail.lock().unwrap() = Some((status, json!({"message": "slow down"})));
        assert_eq!(index.search(&q).await.unwrap_err().code, ErrorCode::Unavailable, "{status}");
    }
    *srv.fail.lock().unwrap() = None;
    assert!(
        index.search(&SearchQuery { text: "\u{7}".into(), ..q.clone() }).await.unwrap_err().code == ErrorCode::InvalidRequest
    );
    // A refused bulk item fails the write (the caller's record goes to review).
    *srv.fail.lock().unwrap() = Some((
        200,
        json!({"took": 1, "errors": true, "items": [{"index": {"status": 400, "error": {"type": "mapper_parsing_exception"}}}]}),
    ));
    let e = index.upsert(&[doc("acme", MemoryScope::Org, "kb-1", "x")]).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Unavailable);
    // Nothing listens: unavailable, not a hang.
    let gone = OpenSearchIndex::new(http("http://127.0.0.1:9", "aoss").await, "continuity", "e", 4);
    assert_eq!(gone.search(&q).await.unwrap_err().code, ErrorCode::Unavailable);
}

#[tokio::test]
async fn bedrock_titan_requests_and_answers() {
    let (srv, url) = server().await;
    let e = BedrockEmbedder::new(http(&url, "bedrock").await, "amazon.titan-embed-text-v2:0", 256).unwrap();
    assert_eq!(e.name(), "bedrock:amazon.titan-embed-text-v2:0:256");
    let v = e.embed(&["first text".into(), "second".into()]).await.unwrap();
    assert_eq!((v.len(), v[0].len()), (2, 256));
    assert!((v[0][0] - 0.6).abs() < 1e-6 && (v[0][1] - 0.8).abs() < 1e-6, "answers are scaled to unit length");
    let seen = srv.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.method == "POST" && s.path == "/model/amazon.titan-embed-text-v2%3A0/invoke"));
    let bodies: Vec<Value> = seen.iter().map(|s| serde_json::from_str(&s.body).unwrap()).collect();
    assert!(bodies.contains(&json!({"inputText": "first text", "dimensions": 256, "normalize": true})));
    let auth = seen[0].headers["authorization"].to_str().unwrap();
    assert!(auth.contains("/eu-west-1/bedrock/aws4_request"), "{auth}");
    assert!(BedrockEmbedder::new(http(&url, "bedrock").await, "m", 384).is_err(), "Titan V2 has no 384-dimension output");
}

#[tokio::test]
async fn bedrock_throttling_is_retried_with_backoff_then_reported() {
    let (srv, url) = server().await;
    let e = BedrockEmbedder::new(http(&url, "bedrock").await, "amazon.titan-embed-text-v2:0", 256).unwrap();
    srv.fail_next.lock().unwrap().extend([429, 503]);
    let v = e.embed(&["after a throttle".into()]).await.unwrap();
    assert_eq!(v[0].len(), 256, "the third try answered");
    assert_eq!(srv.seen.lock().unwrap().len(), 3, "429, 503, then 200");

    srv.seen.lock().unwrap().clear();
    srv.fail_next.lock().unwrap().extend([429, 429, 429, 429]);
    let err = e.embed(&["still throttled".into()]).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Unavailable, "{err}");
    let why = err.internal.clone().unwrap_or_default();
    assert!(why.contains("429 4 times (throttled)") && why.contains("quota"), "{why}");
    assert_eq!(srv.seen.lock().unwrap().len(), 4, "four tries, then the failure");
    let bad = srv.seen.lock().unwrap().iter().filter(|s| s.path.contains("/invoke")).count();
    assert_eq!(bad, 4);
}

#[tokio::test]
async fn a_partitions_documents_are_listed_past_any_result_window() {
    let (srv, url) = server().await;
    let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "e", 4);
    // 1,000 chunks (500 documents of two chunks), then a last page of three.
    let chunk = |d: usize, c: usize| hit("p", &format!("d{d:04}~{c}"), &format!("d{d:04}"), 0.0, "");
    let first: Vec<Value> = (0..500).flat_map(|d| [chunk(d, 0), chunk(d, 1)]).collect();
    let last = vec![chunk(500, 0), chunk(500, 1), chunk(501, 0)];
    srv.searches.lock().unwrap().extend([Value::Array(first), Value::Array(last)]);
    let ids = index.doc_ids(&t("acme"), &MemoryScope::Org, usize::MAX).await.unwrap();
    assert_eq!(ids.len(), 502, "every document once");
    assert_eq!((ids[0].as_str(), ids[501].as_str()), ("d0000", "d0501"));
    let searches: Vec<Value> = srv
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.ends_with("/_search"))
        .map(|s| serde_json::from_str(&s.body).unwrap())
        .collect();
    assert_eq!(searches.len(), 2, "a full page asks for the next");
    assert_eq!(searches[0]["size"], 1000);
    assert_eq!(searches[0]["sort"], json!([{"doc": "asc"}, {"chunk": "asc"}]), "a total order, so pages neither skip nor repeat");
    assert!(searches[0].get("search_after").is_none());
    assert_eq!(searches[1]["search_after"], json!(["d0499", "d0499~1"]), "continued after the page's last chunk");
    assert_eq!(searches[1]["query"], searches[0]["query"], "the same partition filter on every page");

    // At most `max` documents: a full page is not followed when it already has them.
    srv.seen.lock().unwrap().clear();
    let first: Vec<Value> = (0..500).flat_map(|d| [chunk(d, 0), chunk(d, 1)]).collect();
    srv.searches.lock().unwrap().push(Value::Array(first));
    assert_eq!(index.doc_ids(&t("acme"), &MemoryScope::Org, 10).await.unwrap().len(), 10);
    assert_eq!(srv.seen.lock().unwrap().iter().filter(|s| s.path.ends_with("/_search")).count(), 1);
}

#[tokio::test]
async fn inside_the_refresh_window_twins_are_not_shown_and_older_versions_are_swept() {
    let (srv, url) = server().await;
    let index = OpenSearchIndex::new(http(&url, "aoss").await, "continuity", "e", 4)
        .with_visible_after(std::time::Duration::from_secs(3));
    assert_eq!(index.visible_after(), std::time::Duration::from_secs(3));
    // A record re-indexed inside the window: the removal before the second write could
    // not see the first, so both versions are stored, and an older chunk ~1 the new
    // version no longer has.
    let versioned = |chunk: &str, at: i64, text: &str, score: f64| {
        let mut h = hit("acme/org", chunk, "kb-1", score, text);
        h["_source"]["updated_at"] = json!(at);
        h
    };
    *srv.searches.lock().unwrap() = vec![json!([
        versioned("kb-1~0", 1, "old refund text", 3.0),
        versioned("kb-1~0", 2, "new refund text", 2.0),
        versioned("kb-1~0", 2, "new refund text", 2.0),
        versioned("kb-1~1", 1, "old second chunk", 1.5),
        hit("acme/org", "kb-2~0", "kb-2", 1.0, "refund elsewhere"),
    ])];
    let q = SearchQuery {
        tenant: t("acme"),
        scopes: vec![MemoryScope::Org],
        kind: None,
        text: "refund".into(),
        vector: None,
        embedder: "e".into(),
        mode: SearchMode::Keyword,
        k: 10,
        since: None,
        until: None,
    };
    let hits = index.search(&q).await.unwrap();
    let shown: Vec<(&str, &str)> = hits.iter().map(|h| (h.id.as_str(), h.text.as_str())).collect();
    assert_eq!(shown, [("kb-1~0", "new refund text"), ("kb-2~0", "refund elsewhere")], "the newest version once");
    let search_body = |n: usize| serde_json::from_str::<Value>(&srv.seen.lock().unwrap()[n].body).unwrap();
    assert_eq!(
        search_body(1)["_source"],
        json!(["partition", "chunk", "doc", "kind", "title", "text", "updated_at", "occurred_at"])
    );

    // The stored chunks of a record, by key, with their vectors.
    let mut stored = hit("acme/org", "kb-1~0", "kb-1", 0.0, "new refund text");
    stored["_source"]["updated_at"] = json!(2);
    stored["_source"]["occurred_at"] = json!(2);
    stored["_source"]["embedder"] = json!("e");
    stored["_source"]["vector"] = json!([0.6, 0.8, 0.0, 0.0]);
    *srv.searches.lock().unwrap() = vec![json!([stored])];
    let chunks = index.chunks(&t("acme"), &MemoryScope::Org, &Id::new("kb-1").unwrap()).await.unwrap();
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        (chunks[0].id.as_str(), chunks[0].text.as_str(), chunks[0].updated_at),
        ("kb-1~0", "new refund text", Timestamp(2))
    );
    assert_eq!(chunks[0].vector, [0.6, 0.8, 0.0, 0.0]);
    let n = srv.seen.lock().unwrap().len();
    assert_eq!(
        search_body(n - 1),
        json!({"size": 1000, "sort": [{"chunk": "asc"}],
               "_source": ["chunk", "doc", "kind", "embedder", "title", "text", "updated_at", "occurred_at", "vector"],
               "query": {"bool": {"filter": [{"term": {"partition": "acme/org"}}, {"term": {"doc": "kb-1"}}]}}})
    );

    // The sweep: what was written before the version kept, by the ids assigned.
    let mut old = hit("acme/org", "kb-1~0", "kb-1", 0.0, "");
    old["_id"] = json!("1%3A0%3AoldOne");
    *srv.searches.lock().unwrap() = vec![json!([old])];
    let removed = index.remove_older(&t("acme"), &MemoryScope::Org, &Id::new("kb-1").unwrap(), Timestamp(2)).await.unwrap();
    assert_eq!(removed, 1);
    let seen = srv.seen.lock().unwrap();
    let (find, bulk) = (&seen[seen.len() - 2], &seen[seen.len() - 1]);
    assert_eq!(
        serde_json::from_str::<Value>(&find.body).unwrap(),
        json!({"size": 1000, "_source": ["chunk"], "query": {"bool": {"filter": [
            {"term": {"partition": "acme/org"}}, {"term": {"doc": "kb-1"}}, {"range": {"updated_at": {"lt": 2}}}]}}})
    );
    assert_eq!(bulk.path, "/_bulk");
    assert_eq!(
        serde_json::from_str::<Value>(bulk.body.trim()).unwrap(),
        json!({"delete": {"_index": "continuity", "_id": "1%3A0%3AoldOne"}})
    );
}
