//! A headless Chromium driven over the W3C WebDriver HTTP protocol (Debian's `chromium`
//! and `chromedriver`, which `tests/run.sh` installs), for the console and dashboard
//! browser tests; and where their screenshots are kept (`$CONTINUITY_TEST_ARTIFACTS`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Keeps a screenshot (a PNG) under `$CONTINUITY_TEST_ARTIFACTS` (default: the temp folder).
pub fn keep(name: &str, png: &[u8]) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let artifacts = std::env::var("CONTINUITY_TEST_ARTIFACTS").map_or_else(|_| std::env::temp_dir(), std::path::PathBuf::from);
    std::fs::create_dir_all(&artifacts).unwrap();
    let path = artifacts.join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

pub struct Driver {
    child: Child,
    url: String,
    session: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    /// Stops chromedriver and the Chromium it started: they share a process group of
    /// their own (killing chromedriver alone left Chromium running after the test).
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Driver {
    pub async fn start() -> Self {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian package chromium-driver; tests/run.sh installs it)");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{url}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-extensions", "--no-first-run", "--window-size=1280,1800"]
        }}}});
        let v: Value = http.post(format!("{url}/session")).json(&caps).send().await.unwrap().json().await.unwrap();
        let session = v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no WebDriver session: {v}")).to_owned();
        Self { child, url, session, http }
    }

    pub async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}/session/{}{path}", self.url, self.session));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        assert!(v["value"].get("error").is_none(), "WebDriver {path}: {v}");
        v["value"].clone()
    }

    pub async fn go(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url}))).await;
    }

    pub async fn find(&self, css: &str) -> String {
        let v = self.call(reqwest::Method::POST, "/element", Some(json!({"using": "css selector", "value": css}))).await;
        v.as_object().unwrap().values().next().unwrap().as_str().unwrap().to_owned()
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.call(reqwest::Method::POST, &format!("/element/{e}/value"), Some(json!({"text": text}))).await;
    }

    pub async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.call(reqwest::Method::POST, &format!("/element/{e}/click"), Some(json!({}))).await;
    }

    pub async fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None).await.as_str().unwrap().to_owned()
    }

    /// The page once it contains every one of `needles` (a click that submits a form
    /// returns before the next page has loaded), or fails after 60 s showing the page.
    pub async fn wait_for(&self, needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let page = self.source().await;
            if needles.iter().all(|n| page.contains(n)) {
                return page;
            }
            assert!(Instant::now() < deadline, "the page never showed {needles:?}: {page}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Resizes the window (its inner width follows).
    pub async fn resize(&self, width: u32, height: u32) {
        self.call(reqwest::Method::POST, "/window/rect", Some(json!({"width": width, "height": height}))).await;
    }

    /// Runs `script` in the page (WebDriver's own injection; the pages allow no script of
    /// their own) and returns its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.call(reqwest::Method::POST, "/execute/sync", Some(json!({"script": script, "args": []}))).await
    }

    pub async fn screenshot(&self) -> Vec<u8> {
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64.as_str().unwrap()).unwrap()
    }
}
