//! `continuity serve` run in process, like mini-redis's server: a listener on port 0 and
//! a shutdown future of the test's choosing. It answers, then stops when told, finishing
//! what is in flight.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_on_a_listener_until_its_shutdown_future_completes() {
    let dir = tempfile::tempdir().unwrap();
    let home = continuity::home::open(dir.path().join("home"), "hashing").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let settings = continuity::serve::ServeSettings {
        public_url: None,
        limits: gateway::server::Limits::default(),
        allowed_origins: Vec::new(),
        embedder_note: None,
    };
    let server = tokio::spawn(continuity::serve::run(home, listener, settings, async move {
        let _ = stopped.await;
    }));
    let health = reqwest::get(format!("http://{addr}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let body: serde_json::Value = health.json().await.unwrap();
    assert_eq!(body["status"], "ok", "{body}");
    stop.send(()).unwrap();
    let ran = tokio::time::timeout(Duration::from_secs(60), server).await.expect("serve stops when told (it hung)");
    ran.unwrap().unwrap();
    assert!(reqwest::get(format!("http://{addr}/healthz")).await.is_err(), "the listener is closed");
}
