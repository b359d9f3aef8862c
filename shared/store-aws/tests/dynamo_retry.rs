//! A conditional put whose first attempt committed at DynamoDB but whose answer was lost
//! (a timeout, a 500 on the way back) is retried by the SDK, and the retry meets its own
//! item: the adapter recognises it (the item carries the write's own id) and answers
//! success, where it used to answer "already exists" to a create that had succeeded. A
//! second, real create of the same key is still a conflict.
//!
//! Against moto, through an in-process proxy that loses the answer of the first PutItem.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use domain::ErrorCode;
use ports::items::{Condition, Item, ItemStore, Write};
use store_aws::DynamoItems;
use store_aws::settings::{aws_config_for, dynamo_client};

struct Proxy {
    moto: String,
    http: reqwest::Client,
    puts: AtomicUsize,
}

async fn forward(State(p): State<Arc<Proxy>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let target = headers.get("x-amz-target").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let url = format!("{}{}", p.moto, uri.path_and_query().map_or("/", |x| x.as_str()));
    let mut req = p.http.request(method, url).body(body.to_vec());
    for (k, v) in &headers {
        if k != "host" && k != "content-length" {
            req = req.header(k, v);
        }
    }
    let res = req.send().await.unwrap();
    let (status, kept) = (res.status().as_u16(), res.headers().clone());
    let bytes = res.bytes().await.unwrap();
    if target.ends_with(".PutItem") && p.puts.fetch_add(1, Ordering::SeqCst) == 0 {
        // Committed at moto; the answer is lost on its way back.
        let lost = r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"the answer was lost"}"#;
        return (StatusCode::INTERNAL_SERVER_ERROR, [("content-type", "application/x-amz-json-1.0")], lost).into_response();
    }
    let mut out = (StatusCode::from_u16(status).unwrap(), bytes.to_vec()).into_response();
    for (k, v) in &kept {
        if k != "content-length" && k != "transfer-encoding" {
            out.headers_mut().insert(k, v.clone());
        }
    }
    out
}

#[tokio::test]
async fn a_create_whose_answer_was_lost_succeeds_on_retry_and_a_second_create_conflicts() {
    let moto = std::env::var("CONTINUITY_TEST_MOTO_URL").expect("CONTINUITY_TEST_MOTO_URL: run tests/run.sh");
    let table = format!("continuity-retry-{:016x}", rand::random::<u64>());
    let direct = DynamoItems::new(dynamo_client(&aws_config_for(Some(&moto), "eu-west-1").await), &table);
    direct.create_table_if_missing().await.unwrap();

    let proxy = Arc::new(Proxy { moto, http: reqwest::Client::new(), puts: AtomicUsize::new(0) });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().fallback(forward).with_state(proxy.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let items = DynamoItems::new(dynamo_client(&aws_config_for(Some(&url), "eu-west-1").await), &table);

    let item = Item {
        tenant: "acme".into(),
        part: "tenant".into(),
        sk: "acme".into(),
        version: 1,
        body: b"{\"plan\":\"pro\"}".to_vec(),
    };
    let create = || vec![Write::Put { item: item.clone(), condition: Condition::Absent }];
    items.write(create()).await.expect("its own earlier commit is not a conflict");
    assert_eq!(proxy.puts.load(Ordering::SeqCst), 2, "the lost answer was retried once");
    assert_eq!(direct.get("acme", "tenant", "acme").await.unwrap(), Some(item.clone()), "written once, readable as written");

    // Another create of the same key, with the same content: a conflict, as before.
    let e = items.write(create()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict, "{e}");
}
