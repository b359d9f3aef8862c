//! `continuity import` and `continuity export` on real homes: the reference server's
//! memory.jsonl of 10 000 entities with relations read back exactly through `read_graph`;
//! a corrupt line named by its number with nothing imported; a dry run that writes
//! nothing; re-importing changes nothing; mem0, generic JSONL and Markdown sources; and
//! export → import into an empty home → export gives the same items (by SHA-256).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

use common::run;

/// The reference server's file: `n` entities (1–3 observations each) and about 1.5 `n` relations.
fn memory_jsonl(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let obs: Vec<String> = (0..=(i % 3)).map(|k| format!("observation {k} of entity {i}: \"quoted\", ünïcode")).collect();
        let kind = ["person", "project", "service"][i % 3];
        let e = json!({"type": "entity", "name": format!("entity-{i}"), "entityType": kind, "observations": obs});
        out.push_str(&e.to_string());
        out.push('\n');
    }
    for i in 0..n {
        let r = json!({"type": "relation", "from": format!("entity-{i}"), "to": format!("entity-{}", (i * 7 + 1) % n), "relationType": "depends_on"});
        out.push_str(&r.to_string());
        out.push('\n');
        if i % 2 == 0 {
            let r = json!({"type": "relation", "from": format!("entity-{i}"), "to": format!("entity-{}", (i + 3) % n), "relationType": "works_with"});
            out.push_str(&r.to_string());
            out.push('\n');
        }
    }
    out
}

/// The source graph as sets of canonical lines.
fn source_sets(text: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut e = BTreeSet::new();
    let mut r = BTreeSet::new();
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        let kind = v.as_object_mut().unwrap().remove("type").unwrap();
        if kind == "entity" {
            e.insert(v.to_string())
        } else {
            r.insert(v.to_string())
        };
    }
    (e, r)
}

/// `read_graph` over a stdio session with the graph toolset.
fn read_graph(home: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(home)
        .args(["--embedder", "hashing", "stdio", "--toolsets", "graph"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    lines.next().unwrap().unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}})
    )
    .unwrap();
    let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    drop(stdin);
    child.wait().unwrap();
    let g = &v["result"]["structuredContent"];
    let e = g["entities"].as_array().unwrap_or_else(|| panic!("{v}")).iter().map(Value::to_string).collect();
    let r = g["relations"].as_array().unwrap().iter().map(Value::to_string).collect();
    (e, r)
}

#[test]
fn ten_thousand_entities_round_trip_exactly_and_a_corrupt_line_imports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = memory_jsonl(10_000);
    let file = dir.path().join("memory.jsonl");
    std::fs::write(&file, &src).unwrap();
    let (want_e, want_r) = source_sets(&src);
    assert_eq!((want_e.len(), want_r.len()), (10_000, 15_000));

    // A corrupt line: named by its number, and nothing of the file is written.
    let mut lines: Vec<&str> = src.lines().collect();
    lines[4_999] = "{\"type\":\"entity\",\"name\":";
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let home = dir.path().join("home");
    assert!(run(&home, &["init"]).0);
    let (ok, _, err) = run(&home, &["import", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("line 5000: not JSON") && err.contains("nothing was written"), "{err}");
    assert_eq!(read_graph(&home).0.len(), 0, "nothing half-imported");

    // A dry run checks and counts, and writes nothing.
    let (ok, out, _) = run(&home, &["import", file.to_str().unwrap(), "--dry-run"]);
    assert!(ok && out.contains("0 memories, 10000 entities, 15000 relations"), "{out}");
    assert_eq!(read_graph(&home).0.len(), 0);

    let (ok, out, err) = run(&home, &["import", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        out.contains("entities 10000 new") && out.contains("relations 15000 new") && out.contains("25000 items read back"),
        "{out}"
    );
    assert!(!err.contains('\r'), "no progress drawn into a pipe");
    let (got_e, got_r) = read_graph(&home);
    assert_eq!(got_e, want_e, "read_graph gives exactly the source's entities");
    assert_eq!(got_r, want_r, "and its relations");
    // The source is kept, compressed, in the home.
    let kept: Vec<_> = std::fs::read_dir(home.join("imports")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(kept.len(), 1);
    assert!(std::fs::metadata(&kept[0]).unwrap().len() < src.len() as u64 / 3, "compressed");

    // Again: nothing changes.
    let (ok, out, _) = run(&home, &["import", file.to_str().unwrap()]);
    assert!(ok && out.contains("entities 0 new, 0 extended; relations 0 new"), "{out}");
    assert_eq!(read_graph(&home), (want_e, want_r));

    // memory.jsonl out again: the same lines as a set.
    let out_file = dir.path().join("out.jsonl");
    let (ok, _, err) = run(&home, &["export", "--format", "memory-jsonl", "--out", out_file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(source_sets(&std::fs::read_to_string(&out_file).unwrap()), source_sets(&src));
}

#[test]
fn other_products_and_notes_come_in_and_a_bundle_round_trips_by_hash() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let mem0 = dir.path().join("mem0.json");
    std::fs::write(
        &mem0,
        r#"{"results":[{"id":"0b5a","memory":"Prefers tea over coffee","user_id":"ada","hash":"x1","metadata":{"source":"chat"},"categories":["food"],"created_at":"2025-06-01T08:00:00-07:00","updated_at":null},
{"id":"0b5b","memory":"Works from Lisbon","user_id":"ada","created_at":"2025-07-01T08:00:00Z"}]}"#,
    )
    .unwrap();
    let generic = dir.path().join("notes.jsonl");
    std::fs::write(
        &generic,
        "{\"text\":\"Deploys happen on Tuesdays\",\"metadata\":{\"team\":\"web\"},\"created_at\":\"2026-01-05\"}\n",
    )
    .unwrap();
    let notes = dir.path().join("vault");
    std::fs::create_dir_all(notes.join("sub")).unwrap();
    std::fs::create_dir_all(notes.join(".obsidian")).unwrap();
    std::fs::write(notes.join("one.md"), "---\ntitle: Standup\ndate: 2026-02-01\n---\nStandup is at 9:30.\n").unwrap();
    std::fs::write(notes.join("sub/two.md"), "The staging password rotates monthly.\n").unwrap();
    std::fs::write(notes.join(".obsidian/ignored.md"), "not a note\n").unwrap();
    let graph = dir.path().join("memory.jsonl");
    std::fs::write(&graph, memory_jsonl(30)).unwrap();
    assert!(run(&a, &["init"]).0);

    for (src, fragment) in
        [(&mem0, "memories 2 new"), (&generic, "memories 1 new"), (&notes, "memories 2 new"), (&graph, "entities 30 new")]
    {
        let (ok, out, err) = run(&a, &["import", src.to_str().unwrap()]);
        assert!(ok && out.contains(fragment), "{src:?}: {out}{err}");
        let (ok, out, _) = run(&a, &["import", src.to_str().unwrap()]);
        assert!(ok && !out.contains(" 1 new") && !out.contains(" 2 new") && !out.contains("30 new"), "idempotent {src:?}: {out}");
    }

    // One note on its own is a Markdown source too; another principal importing the
    // same export gets memories of their own (no collision with ada's).
    let note = dir.path().join("single.md");
    std::fs::write(&note, "---\ntitle: One\n---\nA single note.\n").unwrap();
    let (ok, out, err) = run(&a, &["import", note.to_str().unwrap()]);
    assert!(ok && out.contains("memories 1 new"), "{out}{err}");
    let (ok, out, err) = run(&a, &["user", "list", "--tenant", "local"]);
    assert!(ok, "{out}{err}");
    let key = run(&a, &["key", "create", "--tenant", "local", "--scopes", "memory:read"]).1;
    assert!(key.starts_with("ctn_"), "{key}");
    let svc = format!("svc-{}", key.split('.').nth(1).unwrap());
    let (ok, out, err) = run(&a, &["import", mem0.to_str().unwrap(), "--principal", &svc]);
    assert!(ok && out.contains("memories 2 new"), "{out}{err}");

    // The memories are searchable personal memories, metadata kept.
    let bundle_a = dir.path().join("a.bundle");
    let (ok, _, err) = run(&a, &["export", "--out", bundle_a.to_str().unwrap()]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&bundle_a).unwrap();
    assert!(
        text.contains("\"categories\":[\"food\"]")
            && text.contains("\"front_matter\":{\"date\":\"2026-02-01\",\"title\":\"Standup\"}"),
        "{text}"
    );
    let digest_a = err.split("digest ").nth(1).unwrap().trim().to_owned();
    assert!(err.contains("exported 6 memories, 30 entities, 45 relations"), "{err}");

    // Into an empty home and out again: the same items, by hash.
    let b = dir.path().join("b");
    assert!(run(&b, &["init"]).0);
    let (ok, out, err) = run(&b, &["import", bundle_a.to_str().unwrap()]);
    assert!(ok && out.contains("memories 6 new") && out.contains("entities 30 new"), "{out}{err}");
    let bundle_b = dir.path().join("b.bundle");
    let (ok, _, err) = run(&b, &["export", "--out", bundle_b.to_str().unwrap()]);
    assert!(ok);
    assert_eq!(err.split("digest ").nth(1).unwrap().trim(), digest_a, "export → import → export gives the same data");
    let hashes = |t: &str| {
        t.lines()
            .skip(1)
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["sha256"].as_str().unwrap().to_owned())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(hashes(&std::fs::read_to_string(&bundle_b).unwrap()), hashes(&text));

    // An altered bundle line is refused whole.
    let altered = text.replacen("Prefers tea over coffee", "Prefers coffee over tea", 1);
    let bad = dir.path().join("bad.bundle");
    std::fs::write(&bad, altered).unwrap();
    let c = dir.path().join("c");
    assert!(run(&c, &["init"]).0);
    let (ok, _, err) = run(&c, &["import", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("SHA-256 does not match"), "{err}");
}

#[test]
fn every_error_says_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // A missing home, not found, a bad value, a missing file: each error is followed by a next step.
    let (ok, _, err) = run(&home, &["tenant", "list"]);
    assert!(!ok && err.contains("no Continuity home") && err.contains("next:"), "{err}");
    assert!(run(&home, &["init"]).0);
    let (ok, _, err) = run(&home, &["key", "revoke", "--tenant", "local", "no-such-key"]);
    assert!(!ok && err.contains("next:  check the name"), "{err}");
    let (ok, _, err) = run(&home, &["export", "--format", "csv"]);
    assert!(!ok && err.contains("unknown export format") && err.contains("next:"), "{err}");
    let (ok, _, err) = run(&home, &["import", dir.path().join("missing.jsonl").to_str().unwrap()]);
    assert!(!ok && err.contains("reading") && err.contains("next:"), "{err}");
    // A file read by lines names the line that is not text, and writes nothing.
    let bad = dir.path().join("notes.jsonl");
    std::fs::write(&bad, b"{\"text\":\"first\"}\n\n{\"text\":\"caf\xe9\"}\n").unwrap();
    let (ok, _, err) = run(&home, &["import", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("line 3: not UTF-8 text") && err.contains("nothing was written"), "{err}");
    let (ok, out, _) = run(&home, &["export", "--format", "bundle"]);
    assert!(ok && !out.contains("first"), "{out}");
}

/// A CLI import into a home whose `serve` is running (and has its search partition in
/// memory already) is found by the server's very next search: the serve reads what
/// another process indexed before it searches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_while_serve_runs_is_found_by_the_next_search() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let server = common::spawn(&home);
    let search = |q: &'static str| {
        let (base, key) = (server.base.clone(), server.key.clone());
        async move {
            let r = common::call_tool(&base, &key, "memory_search", json!({"query": q})).await;
            r["structuredContent"]["results"].as_array().cloned().unwrap_or_default()
        }
    };
    assert!(search("Lisbon").await.is_empty(), "nothing yet (and the partition is now loaded in the server)");
    let mem0 = dir.path().join("mem0.json");
    std::fs::write(&mem0, r#"{"results":[{"id":"0b5b","memory":"Works from Lisbon on Fridays","user_id":"ada","created_at":"2025-07-01T08:00:00Z"}]}"#)
        .unwrap();
    let h = home.clone();
    let (ok, out, err) = tokio::task::spawn_blocking(move || run(&h, &["import", mem0.to_str().unwrap()])).await.unwrap();
    assert!(ok && out.contains("memories 1 new"), "{out}{err}");
    let hits = search("Lisbon").await;
    assert!(hits.iter().any(|h| h.to_string().contains("Works from Lisbon")), "{hits:?}");
}

/// A folder of notes is read without following links: a link out of the folder is not
/// imported (nor kept in the home's archive), and a link loop is not an error.
#[test]
fn markdown_import_stays_in_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    assert!(run(&home, &["init"]).0);
    let outside = dir.path().join("private.md");
    std::fs::write(&outside, "OUTSIDE-THE-FOLDER secret plans\n").unwrap();
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(notes.join("sub")).unwrap();
    std::fs::write(notes.join("one.md"), "Standup is at 9:30.\n").unwrap();
    std::os::unix::fs::symlink(&outside, notes.join("leak.md")).unwrap();
    std::os::unix::fs::symlink(&notes, notes.join("sub").join("loop")).unwrap();
    let (ok, out, err) = run(&home, &["import", notes.to_str().unwrap()]);
    assert!(ok && out.contains("memories 1 new"), "{out}{err}");
    assert!(err.contains("skipped 2 symbolic link(s)"), "{err}");
    let (ok, out, _) = run(&home, &["export", "--out", dir.path().join("b.bundle").to_str().unwrap()]);
    assert!(ok, "{out}");
    let bundle = std::fs::read_to_string(dir.path().join("b.bundle")).unwrap();
    assert!(!bundle.contains("OUTSIDE-THE-FOLDER"));
    for zip in std::fs::read_dir(home.join("imports")).unwrap() {
        let bytes = std::fs::read(zip.unwrap().path()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("private.md"), "the archive holds only the folder's own files");
    }
}

/// An import killed part way leaves a note in the home: every later command says which
/// import did not finish and the command that completes it; running it again completes
/// it, exactly (nothing twice), and the note goes.
#[test]
fn an_import_cut_short_is_reported_and_completed_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    assert!(run(&home, &["init"]).0);
    let src = memory_jsonl(20_000);
    let file = dir.path().join("big.jsonl");
    std::fs::write(&file, &src).unwrap();
    let mut child = Command::new(BIN)
        .arg("--home")
        .arg(&home)
        .args(["--embedder", "hashing", "import"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let marker = home.join("imports").join("unfinished.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = child.kill();
    let status = child.wait().unwrap();
    assert!(marker.exists(), "the import said it had started ({status})");
    let (ok, _, err) = run(&home, &["tenant", "list"]);
    assert!(ok && err.contains("did not finish") && err.contains("continuity import"), "{err}");
    let (ok, out, err) = run(&home, &["import", file.to_str().unwrap()]);
    assert!(ok && out.contains("verified"), "{out}{err}");
    assert!(!marker.exists(), "completed: the note is gone");
    assert_eq!(read_graph(&home), source_sets(&src), "exactly the file, nothing twice");
    let (_, _, err) = run(&home, &["tenant", "list"]);
    assert!(!err.contains("did not finish"), "{err}");
}
