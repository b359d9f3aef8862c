//! `continuity import` and `continuity export` (SPEC §8, migration): the command line of
//! [`services::migrate`] — reading the source (a file or a folder of notes), a dry run's
//! report, progress, and the source kept as a compressed archive in the home.

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use domain::principal::CallerContext;
use domain::{Id, TenantId};
use services::migrate::{self, Format, Source};

use crate::progress::Progress;

#[derive(Args)]
pub struct ImportArgs {
    /// A file — the reference memory server's memory.jsonl, a mem0 export, JSONL of
    /// {text, metadata, created_at}, a bundle from `continuity export` — or a folder of
    /// Markdown notes.
    path: PathBuf,
    /// `auto` (from the folder or the first line), `memory-jsonl`, `mem0`, `jsonl`,
    /// `markdown` or `bundle`.
    #[arg(long, default_value = "auto")]
    format: String,
    /// The knowledge graph a memory.jsonl goes into: `personal` or `project:<id>`.
    #[arg(long, default_value = "personal")]
    scope: String,
    /// Check the whole source and say what would be imported; write nothing.
    #[arg(long)]
    dry_run: bool,
    #[arg(long, default_value = "local")]
    tenant: TenantId,
    /// Whose memory it becomes.
    #[arg(long, default_value = "owner")]
    principal: Id,
}

#[derive(Args)]
pub struct ExportArgs {
    /// `bundle` (personal memories and knowledge graphs, each item with its SHA-256) or
    /// `memory-jsonl` (one graph in the reference memory server's format).
    #[arg(long, default_value = "bundle")]
    format: String,
    /// With memory-jsonl: the graph, `personal` or `project:<id>`.
    #[arg(long, default_value = "personal")]
    scope: String,
    /// The file to write (default: stdout).
    #[arg(long, short)]
    out: Option<PathBuf>,
    #[arg(long, default_value = "local")]
    tenant: TenantId,
    #[arg(long, default_value = "owner")]
    principal: Id,
}

async fn caller(s: &services::Services, tenant: &TenantId, principal: &Id) -> anyhow::Result<CallerContext> {
    migrate::principal_caller(s, tenant, principal).await.map_err(super::domain_err)
}

/// The notes of a folder: every `.md`/`.markdown` file under it (hidden folders
/// skipped), by relative path. Symbolic links are not followed — one could lead out of
/// the folder (or round in a loop) — and are said to be skipped.
fn read_notes(dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut links = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                links += 1;
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md" || x == "markdown") {
                let text = std::fs::read_to_string(&p).with_context(|| format!("{} is not UTF-8 text", p.display()))?;
                out.push((p.strip_prefix(dir).unwrap_or(&p).display().to_string(), text));
            }
        }
    }
    if links > 0 {
        eprintln!("skipped {links} symbolic link(s) under {}: only the folder's own files are imported", dir.display());
    }
    out.sort();
    Ok(out)
}

/// Items written per batch of a line-based source: what an import holds in memory
/// besides the graph itself.
const BATCH: usize = 10_000;

/// A source, checked.
enum Read {
    /// Parsed whole (a folder of notes, a JSON array).
    Whole(Source),
    /// Read line by line: checked through here, read again to write and to verify.
    Lines(migrate::Checked),
}

impl Read {
    fn counts(&self) -> (usize, usize, usize) {
        match self {
            Self::Whole(s) => s.counts(),
            Self::Lines(c) => (c.memories, c.entities, c.relations),
        }
    }
}

fn open(path: &Path) -> std::io::Result<BufReader<File>> {
    File::open(path).map(|f| BufReader::with_capacity(1 << 20, f))
}

/// The first non-blank line of a file (within its first thousand lines).
fn first_line(path: &Path) -> anyhow::Result<String> {
    let mut lines = open(path).with_context(|| format!("reading {}", path.display()))?.lines();
    for line in lines.by_ref().take(1_000) {
        let line = line.with_context(|| format!("reading {} (UTF-8 text expected)", path.display()))?;
        if !line.trim().is_empty() {
            return Ok(line);
        }
    }
    Ok(String::new())
}

fn problems_error(path: &Path, format: Format, problems: &[migrate::Problem]) -> anyhow::Error {
    let mut msg = format!("{} was not imported — nothing was written. Problems ({:?}):", path.display(), format);
    for p in problems {
        msg.push_str(&format!("\n  {p}"));
    }
    msg.push_str("\nFix them (or remove those lines) and run the import again; --dry-run checks without writing.");
    anyhow!(msg)
}

/// Checks a whole source: a folder or a JSON document parsed whole, a line-based file
/// read through once without holding it.
fn check(path: &Path, format: &str, scope: &str) -> anyhow::Result<(Format, Read)> {
    if path.is_dir() {
        if !matches!(format, "auto" | "markdown") {
            bail!("{} is a folder: only Markdown notes are imported from a folder", path.display());
        }
        let notes = read_notes(path)?;
        if notes.is_empty() {
            bail!("{} holds no .md note", path.display());
        }
        let source = migrate::parse_markdown(&notes).map_err(|p| problems_error(path, Format::Markdown, &p))?;
        return Ok((Format::Markdown, Read::Whole(source)));
    }
    let markdown = path.extension().is_some_and(|x| x == "md" || x == "markdown");
    let first = first_line(path)?;
    let format = match format {
        "auto" if markdown => Format::Markdown,
        "auto" => Format::sniff(&first),
        f => Format::parse(f)
            .ok_or_else(|| anyhow!("unknown format {f:?}: auto, memory-jsonl, mem0, jsonl, markdown or bundle"))?,
    };
    if !migrate::by_lines(format, &first) {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {} (UTF-8 text expected)", path.display()))?;
        let parsed = match format {
            Format::Markdown => migrate::parse_markdown(&[(path.display().to_string(), text)]),
            _ => migrate::parse_memories(&text),
        };
        return Ok((format, Read::Whole(parsed.map_err(|p| problems_error(path, format, &p))?)));
    }
    let input = open(path).with_context(|| format!("reading {}", path.display()))?;
    let checked = migrate::check_lines(input, format, scope).map_err(|p| problems_error(path, format, &p))?;
    Ok((format, Read::Lines(checked)))
}

/// Keeps the source as a zip in `home/imports/`.
fn archive(home: &Path, path: &Path) -> anyhow::Result<PathBuf> {
    let dir = home.join("imports");
    crate::home::create_folder(&dir)?;
    let now = time::OffsetDateTime::now_utc();
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("source");
    let zip_path = dir.join(format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z-{name}.zip",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    ));
    let file = std::fs::File::create(&zip_path).with_context(|| format!("creating {}", zip_path.display()))?;
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let files: Vec<(String, PathBuf)> = if path.is_dir() {
        read_notes(path)?.into_iter().map(|(rel, _)| (rel.clone(), path.join(rel))).collect()
    } else {
        vec![(name.to_owned(), path.to_path_buf())]
    };
    for (rel, p) in files {
        zip.start_file(rel, options)?;
        let mut f = std::fs::File::open(&p).with_context(|| format!("reading {}", p.display()))?;
        std::io::copy(&mut f, &mut zip)?;
    }
    zip.finish()?;
    Ok(zip_path)
}

pub(super) async fn import(s: &services::Services, home: Option<&Path>, a: ImportArgs) -> anyhow::Result<()> {
    let (format, checked) = check(&a.path, &a.format, &a.scope)?;
    let (memories, entities, relations) = checked.counts();
    let kind = serde_json::to_value(format).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    if a.dry_run {
        println!(
            "{}: {kind}, checked whole: {memories} memories, {entities} entities, {relations} relations — nothing written (dry run)",
            a.path.display()
        );
        return Ok(());
    }
    let caller = caller(s, &a.tenant, &a.principal).await?;
    let total = memories + entities + relations;
    // Until it finishes, the home says an import is under way: one cut short (killed, a
    // lost disk) is reported by the next command, and running it again completes it
    // (every item's id comes from its content, so nothing is written twice).
    let marker = home.map(|h| h.join("imports").join(UNFINISHED));
    if let Some(m) = &marker {
        if let Some(before) = unfinished(m.parent().and_then(Path::parent).unwrap_or(Path::new("."))) {
            eprintln!("{before}; this run continues");
        }
        crate::home::create_folder(m.parent().unwrap_or(Path::new(".")))?;
        let note = serde_json::json!({"source": std::path::absolute(&a.path).unwrap_or_else(|_| a.path.clone()), "tenant": a.tenant.as_str(),
            "principal": a.principal.as_str(), "items": total, "started_at": time::OffsetDateTime::now_utc().unix_timestamp()});
        std::fs::write(m, note.to_string()).with_context(|| format!("writing {}", m.display()))?;
    }
    let progress = Progress::new("import", Some(total as u64));
    let report = match &checked {
        Read::Whole(source) => migrate::import(s, &caller, source, &|n| progress.set(n as u64)).await,
        Read::Lines(_) => {
            migrate::import_lines(s, &caller, || open(&a.path), format, &a.scope, BATCH, &|n| progress.set(n as u64)).await
        }
    }
    .map_err(super::domain_err);
    progress.finish();
    let r = report?;
    if let Some(m) = &marker {
        let _ = std::fs::remove_file(m);
    }
    println!(
        "imported {} ({kind}) into {} of {}: memories {} new, {} already there; entities {} new, {} extended; relations {} new; {} items read back and verified",
        a.path.display(),
        a.principal,
        a.tenant,
        r.memories_created,
        r.memories_already_there,
        r.entities_created,
        r.entities_extended,
        r.relations_created,
        r.verified
    );
    if let Some(home) = home {
        match archive(home, &a.path) {
            Ok(zip) => println!("the source is kept in {}", zip.display()),
            Err(e) => eprintln!("warning: the source could not be kept in the home: {e:#}"),
        }
    }
    Ok(())
}

/// The file in the home's `imports/` that says an import was started and has not finished.
pub const UNFINISHED: &str = "unfinished.json";

/// What to say when an import of this home was cut short: which source, and the command
/// that completes it.
pub fn unfinished(home: &Path) -> Option<String> {
    let text = std::fs::read_to_string(home.join("imports").join(UNFINISHED)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let source = v["source"].as_str().unwrap_or("?");
    let when = v["started_at"].as_i64().and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok());
    let when = when
        .map(|t| format!("{:04}-{:02}-{:02} {:02}:{:02} UTC", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute()))
        .unwrap_or_default();
    Some(format!(
        "an import of {source} (started {when}) did not finish: part of it may be in the home; `continuity import {source} --tenant {} --principal {}` completes it (nothing is written twice)",
        v["tenant"].as_str().unwrap_or("local"),
        v["principal"].as_str().unwrap_or("owner")
    ))
}

pub(super) async fn export(s: &services::Services, a: ExportArgs) -> anyhow::Result<()> {
    let caller = caller(s, &a.tenant, &a.principal).await?;
    let mut out: Box<dyn std::io::Write + Send> = match &a.out {
        Some(p) => {
            Box::new(std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?))
        }
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let progress = Progress::new("export", None);
    let report = match a.format.as_str() {
        "bundle" => migrate::export_bundle(s, &caller, &mut *out, &|n| progress.set(n as u64)).await,
        "memory-jsonl" => migrate::export_memory_jsonl(s, &caller, &a.scope, &mut *out).await,
        f => bail!("unknown export format {f:?}: bundle or memory-jsonl"),
    }
    .map_err(super::domain_err)?;
    out.flush().context("writing the export")?;
    progress.finish();
    eprintln!(
        "exported {} memories, {} entities, {} relations ({}) — digest {}",
        report.memories,
        report.entities,
        report.relations,
        a.out.as_ref().map_or_else(|| "stdout".to_owned(), |p| p.display().to_string()),
        report.digest
    );
    Ok(())
}
