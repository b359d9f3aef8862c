//! `continuity setup` against fixture home folders: every listed client, on the Linux,
//! macOS and Windows folder layouts — the exact files written, a re-run that changes
//! nothing, a dry run that shows a diff and writes nothing, and `--remove` giving back
//! the files as they were (byte for byte) with the keys revoked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

struct Fixture {
    _dir: tempfile::TempDir,
    user: PathBuf,
    home: PathBuf,
    os: &'static str,
}

impl Fixture {
    fn new(os: &'static str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let home = dir.path().join("continuity-home");
        Self { user, home, _dir: dir, os }
    }

    fn run(&self, args: &[&str]) -> (bool, String, String) {
        self.run_in(&self.user, args)
    }

    /// [`Self::run`] from the folder `cwd` (a project's repository).
    fn run_in(&self, cwd: &Path, args: &[&str]) -> (bool, String, String) {
        let mut c = Command::new(BIN);
        c.current_dir(cwd);
        c.args(["--home", self.home.to_str().unwrap(), "--embedder", "hashing", "setup", "--os", self.os])
            .args(args)
            .env_clear()
            .env("PATH", "/nonexistent")
            .env("RUST_LOG", "warn");
        match self.os {
            "windows" => c.env("USERPROFILE", &self.user).env("APPDATA", self.user.join("AppData/Roaming")),
            _ => c.env("HOME", &self.user),
        };
        let out = c.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.user.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// Every file under the user's folder, by relative path (backups apart).
    fn files(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(&self.user, &self.user, &mut out);
        out.into_iter().filter(|(k, _)| !k.contains(".continuity-backup-")).collect()
    }

    fn backups(&self) -> usize {
        let mut out = BTreeMap::new();
        walk(&self.user, &self.user, &mut out);
        out.keys().filter(|k| k.contains(".continuity-backup-")).count()
    }

    fn keys(&self) -> String {
        let out = Command::new(BIN)
            .args(["--home", self.home.to_str().unwrap(), "--embedder", "hashing", "key", "list", "--tenant", "local"])
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read_to_string(&p).unwrap());
        }
    }
}

/// Keys replaced by `KEY` so files can be compared exactly.
fn unkeyed(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("ctn_local.") {
        out.push_str(&rest[..i]);
        out.push_str("KEY");
        let end = rest[i..].find(['"', ' ', '\n']).map_or(rest.len(), |e| i + e);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// What each client's file holds before setup on Linux (absent: the folder only).
const CLAUDE_CODE: &str =
    "{\n  \"numStartups\": 12,\n  \"projects\": {\n    \"/work\": {\n      \"allowedTools\": []\n    }\n  }\n}\n";
const ZED: &str = "// Zed settings\n{\n  \"theme\": \"One Dark\", // dark\n  \"context_servers\": {\n    \"docs\": {\n      \"command\": \"docs-mcp\",\n      \"args\": [],\n    },\n  },\n}\n";
const CODEX: &str = "# Codex\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
const VSCODE: &str = "{\n\t\"servers\": {\n\t\t\"github\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.com/mcp/\"\n\t\t}\n\t},\n\t\"inputs\": []\n}\n";

fn linux_fixture() -> Fixture {
    let f = Fixture::new("linux");
    f.write(".claude.json", CLAUDE_CODE);
    f.write(".config/zed/settings.json", ZED);
    f.write(".codex/config.toml", CODEX);
    f.write(".config/Code/User/mcp.json", VSCODE);
    f.write(".config/Claude/claude_desktop_config.json", "{\n  \"preferences\": {\n    \"menuBarEnabled\": false\n  }\n}\n");
    // Installed, never configured: the folder alone.
    for d in [".cursor", ".codeium/windsurf", ".gemini", ".config/Code - Insiders/User"] {
        std::fs::create_dir_all(f.user.join(d)).unwrap();
    }
    f
}

#[test]
fn every_client_is_set_up_exactly_and_removed_byte_for_byte() {
    let f = linux_fixture();
    let before = f.files();

    // A dry run shows the diffs (keys masked) and writes nothing.
    let (ok, out, err) = f.run(&["--dry-run"]);
    assert!(ok, "{out}{err}");
    assert_eq!(f.files(), before, "a dry run writes nothing");
    assert!(out.contains("+    \"continuity\": {") && out.contains("<new key for cursor>"), "{out}");
    assert_eq!(out.matches("would change").count(), 9, "all nine clients were found: {out}");

    let (ok, out, err) = f.run(&[]);
    assert!(ok, "{out}{err}");
    assert_eq!(out.matches("configured").count(), 9, "{out}");
    let after = f.files();
    let home = std::fs::canonicalize(&f.home).unwrap().display().to_string();
    let exe = std::fs::canonicalize(BIN).unwrap().display().to_string();
    let expected: BTreeMap<&str, String> = [
        (
            ".claude.json",
            "{\n  \"numStartups\": 12,\n  \"projects\": {\n    \"/work\": {\n      \"allowedTools\": []\n    }\n  },\n  \"mcpServers\": {\n    \"continuity\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:8787/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer KEY\"\n      }\n    }\n  }\n}\n".to_owned(),
        ),
        (
            ".config/Claude/claude_desktop_config.json",
            format!("{{\n  \"preferences\": {{\n    \"menuBarEnabled\": false\n  }},\n  \"mcpServers\": {{\n    \"continuity\": {{\n      \"command\": \"{exe}\",\n      \"args\": [\"stdio\", \"--home\", \"{home}\"],\n      \"env\": {{\n        \"CONTINUITY_KEY\": \"KEY\"\n      }}\n    }}\n  }}\n}}\n"),
        ),
        (
            ".config/zed/settings.json",
            "// Zed settings\n{\n  \"theme\": \"One Dark\", // dark\n  \"context_servers\": {\n    \"docs\": {\n      \"command\": \"docs-mcp\",\n      \"args\": [],\n    },\n    \"continuity\": {\n      \"url\": \"http://127.0.0.1:8787/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer KEY\",\n      },\n    },\n  },\n}\n".to_owned(),
        ),
        (
            ".codex/config.toml",
            "# Codex\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n\n[mcp_servers.continuity]\nurl = \"http://127.0.0.1:8787/mcp\"\nhttp_headers = { Authorization = \"Bearer KEY\" }\n".to_owned(),
        ),
        (
            ".config/Code/User/mcp.json",
            "{\n\t\"servers\": {\n\t\t\"github\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"https://api.githubcopilot.com/mcp/\"\n\t\t},\n\t\t\"continuity\": {\n\t\t\t\"type\": \"http\",\n\t\t\t\"url\": \"http://127.0.0.1:8787/mcp\",\n\t\t\t\"headers\": {\n\t\t\t\t\"Authorization\": \"Bearer KEY\"\n\t\t\t}\n\t\t}\n\t},\n\t\"inputs\": []\n}\n".to_owned(),
        ),
        (
            ".config/Code - Insiders/User/mcp.json",
            "{\n  \"servers\": {\n    \"continuity\": {\n      \"type\": \"http\",\n      \"url\": \"http://127.0.0.1:8787/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer KEY\"\n      }\n    }\n  }\n}\n".to_owned(),
        ),
        (
            ".cursor/mcp.json",
            "{\n  \"mcpServers\": {\n    \"continuity\": {\n      \"url\": \"http://127.0.0.1:8787/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer KEY\"\n      }\n    }\n  }\n}\n".to_owned(),
        ),
        (
            ".codeium/windsurf/mcp_config.json",
            "{\n  \"mcpServers\": {\n    \"continuity\": {\n      \"serverUrl\": \"http://127.0.0.1:8787/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer KEY\"\n      }\n    }\n  }\n}\n".to_owned(),
        ),
        (
            ".gemini/settings.json",
            "{\n  \"mcpServers\": {\n    \"continuity\": {\n      \"httpUrl\": \"http://127.0.0.1:8787/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer KEY\"\n      }\n    }\n  }\n}\n".to_owned(),
        ),
    ]
    .into_iter()
    .collect();
    for (path, want) in &expected {
        assert_eq!(unkeyed(&after[*path]), *want, "{path}");
    }
    assert_eq!(after.len(), expected.len(), "no other file: {:?}", after.keys());
    assert_eq!(f.backups(), 5, "one backup per file that existed");
    // Each client got its own key, named after it, holding the least scopes.
    let keys = f.keys();
    for id in ["claude-desktop", "claude-code", "cursor", "vscode", "vscode-insiders", "windsurf", "codex", "gemini", "zed"] {
        let line = keys.lines().find(|l| l.contains(&format!("name=\"{id}\""))).unwrap_or_else(|| panic!("{id}: {keys}"));
        assert!(
            line.contains("active") && line.contains("scopes=\"mcp:tools mcp:resources tenant:read memory:read memory:write\""),
            "{line}"
        );
    }
    // The keys written work against the home (a stdio session with Claude Desktop's key).
    let desktop: serde_json::Value = serde_json::from_str(&after[".config/Claude/claude_desktop_config.json"]).unwrap();
    assert!(desktop["mcpServers"]["continuity"]["env"]["CONTINUITY_KEY"].as_str().unwrap().starts_with("ctn_local."));

    // Again: nothing changes, no new key, no new backup.
    let (ok, out, _) = f.run(&[]);
    assert!(ok);
    assert_eq!(out.matches("unchanged").count(), 9, "{out}");
    assert_eq!(f.files(), after);
    assert_eq!(f.backups(), 5);
    assert_eq!(f.keys(), keys);

    // A dry run of the removal changes nothing either.
    let (ok, out, _) = f.run(&["--remove", "--dry-run"]);
    assert!(ok && out.contains("-    \"continuity\": {"), "{out}");
    assert_eq!(f.files(), after);

    // Remove: the files are as they were, those setup created are gone, keys revoked.
    let (ok, out, err) = f.run(&["--remove"]);
    assert!(ok, "{out}{err}");
    assert_eq!(f.files(), before, "{out}");
    let keys = f.keys();
    assert_eq!(keys.lines().filter(|l| l.contains("name=") && l.contains("revoked")).count(), 9, "{keys}");
    // And a second removal has nothing to do.
    let (ok, out, _) = f.run(&["--remove"]);
    assert!(ok && !out.contains("removed"), "{out}");
}

#[test]
fn macos_and_windows_layouts_are_found() {
    for (os, files) in [
        (
            "macos",
            [
                "Library/Application Support/Claude/claude_desktop_config.json",
                "Library/Application Support/Code/User/mcp.json",
                ".config/zed/settings.json",
                ".cursor/mcp.json",
            ],
        ),
        (
            "windows",
            [
                "AppData/Roaming/Claude/claude_desktop_config.json",
                "AppData/Roaming/Code/User/mcp.json",
                "AppData/Roaming/Zed/settings.json",
                ".cursor/mcp.json",
            ],
        ),
    ] {
        let f = Fixture::new(os);
        for file in files {
            f.write(file, "{}\n");
        }
        let (ok, out, err) = f.run(&[]);
        assert!(ok, "{os}: {out}{err}");
        assert_eq!(out.matches("configured").count(), 4, "{os}: only the installed clients: {out}");
        for file in files {
            let text = std::fs::read_to_string(f.user.join(file)).unwrap();
            assert!(text.contains("\"continuity\""), "{os} {file}: {text}");
        }
        let (ok, _, _) = f.run(&["--remove"]);
        assert!(ok);
        for file in files {
            assert_eq!(std::fs::read_to_string(f.user.join(file)).unwrap(), "{}\n", "{os} {file}");
        }
    }
}

#[test]
fn a_remote_deployment_uses_oauth_where_the_client_can_and_a_key_elsewhere() {
    let f = Fixture::new("linux");
    for d in [".cursor", ".codeium/windsurf", ".config/Claude"] {
        std::fs::create_dir_all(f.user.join(d)).unwrap();
    }
    let (ok, out, _) = f.run(&["--url", "https://mcp.example.com"]);
    assert!(ok, "{out}");
    assert!(out.contains("signs in with OAuth"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("Windsurf") && l.contains("skipped")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("Claude Desktop") && l.contains("--key-file")), "{out}");
    assert_eq!(
        f.files()[".cursor/mcp.json"],
        "{\n  \"mcpServers\": {\n    \"continuity\": {\n      \"url\": \"https://mcp.example.com/mcp\"\n    }\n  }\n}\n"
    );
    // With a key: every client, Claude Desktop through the stdio bridge.
    let key_file = f.user.join("remote.key");
    std::fs::write(&key_file, "ctn_acme.k1.secret\n").unwrap();
    let (ok, out, _) = f.run(&["--url", "https://mcp.example.com/mcp", "--key-file", key_file.to_str().unwrap()]);
    assert!(ok, "{out}");
    let files = f.files();
    let desktop: serde_json::Value = serde_json::from_str(&files[".config/Claude/claude_desktop_config.json"]).unwrap();
    let args = &desktop["mcpServers"]["continuity"]["args"];
    assert_eq!(args[0], "stdio");
    assert_eq!(args[1], "--url");
    assert_eq!(args[2], "https://mcp.example.com/mcp");
    assert!(files[".codeium/windsurf/mcp_config.json"].contains("\"Bearer ctn_acme.k1.secret\""));
    assert!(!f.home.join("continuity.db").exists(), "a remote set-up creates no local database");
}

#[test]
fn a_broken_file_is_left_alone_with_a_clear_error() {
    let f = Fixture::new("linux");
    f.write(".cursor/mcp.json", "{ \"mcpServers\": { \"x\": ");
    std::fs::create_dir_all(f.user.join(".gemini")).unwrap();
    let (ok, out, err) = f.run(&[]);
    assert!(!ok);
    assert!(out.contains("not changed") && out.contains("fix it"), "{out}");
    assert!(err.contains("1 client(s) not set up"), "{err}");
    assert_eq!(f.files()[".cursor/mcp.json"], "{ \"mcpServers\": { \"x\": ");
    assert!(f.files().contains_key(".gemini/settings.json"), "the other clients are still set up");
    let (ok, _, err) = f.run(&["--client", "notepad"]);
    assert!(!ok && err.contains("unknown client \"notepad\""), "{err}");
}

#[test]
fn fields_a_person_added_links_and_permissions_are_respected() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::new("linux");
    // Cursor's file is a link into a dotfiles folder, readable by everyone.
    let dotfiles = f.user.join("dotfiles/cursor-mcp.json");
    std::fs::create_dir_all(dotfiles.parent().unwrap()).unwrap();
    std::fs::write(&dotfiles, "{\n  \"mcpServers\": {}\n}\n").unwrap();
    std::fs::set_permissions(&dotfiles, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir_all(f.user.join(".cursor")).unwrap();
    std::os::unix::fs::symlink(&dotfiles, f.user.join(".cursor/mcp.json")).unwrap();
    // Gemini has a hand-written `continuity` entry setup never made.
    f.write(
        ".gemini/settings.json",
        "{\n  \"mcpServers\": {\n    \"continuity\": {\n      \"command\": \"my-own\"\n    }\n  }\n}\n",
    );

    let (ok, out, err) = f.run(&["--client", "cursor"]);
    assert!(ok, "{out}{err}");
    assert!(std::fs::symlink_metadata(f.user.join(".cursor/mcp.json")).unwrap().file_type().is_symlink(), "the link is kept");
    let text = std::fs::read_to_string(&dotfiles).unwrap();
    assert!(text.contains("\"continuity\""), "{text}");
    assert_eq!(std::fs::metadata(&dotfiles).unwrap().permissions().mode() & 0o777, 0o600, "a file holding a key is private");

    // A field a person adds to our entry survives a re-run that has to rewrite it.
    let edited = text.replace(
        "\"url\": \"http://127.0.0.1:8787/mcp\",",
        "\"url\": \"http://127.0.0.1:8787/mcp\",\n      \"disabled\": false,",
    );
    std::fs::write(&dotfiles, &edited).unwrap();
    let (ok, _, _) = f.run(&["--client", "cursor", "--serve-url", "http://127.0.0.1:9999"]);
    assert!(ok);
    let text = std::fs::read_to_string(&dotfiles).unwrap();
    assert!(text.contains("http://127.0.0.1:9999/mcp") && text.contains("\"disabled\": false"), "{text}");

    // --remove leaves the hand-written entry alone.
    let (ok, out, _) = f.run(&["--remove", "--client", "gemini"]);
    assert!(ok && out.contains("left alone"), "{out}");
    assert!(std::fs::read_to_string(f.user.join(".gemini/settings.json")).unwrap().contains("my-own"));
}

/// With `serve` running on a port of its own, `setup` with no flags points the client at
/// that port (and a later run, with serve stopped, keeps it); a coding client's key belongs
/// to the project of the repository setup ran in, so it saves and lists engineering
/// records; `--scope project` writes the project's own file with no secret in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_needs_no_flags_and_a_coding_clients_key_has_its_project() {
    let f = Fixture::new("linux");
    let server = common::spawn(&f.home);
    assert!(!server.base.ends_with(":8787"), "{}", server.base);
    let repo = f.user.join("src").join("WebApp");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("lib")).unwrap();
    let (ok, out, err) = f.run_in(&repo.join("lib"), &["--client", "claude-code"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("for project webapp"), "{out}");
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f.user.join(".claude.json")).unwrap()).unwrap();
    let entry = &file["mcpServers"]["continuity"];
    assert_eq!(entry["url"], format!("{}/mcp", server.base), "{entry}");
    let key = entry["headers"]["Authorization"].as_str().unwrap().strip_prefix("Bearer ").unwrap().to_owned();
    let saved = common::call_tool(
        &server.base,
        &key,
        "engineering_save",
        serde_json::json!({"record": {"kind": "checklist", "pr": "42", "items": ["[x] tests pass", "docs"]}}),
    )
    .await;
    assert_eq!(saved["isError"], false, "{saved}");
    let listed = common::call_tool(&server.base, &key, "engineering_list", serde_json::json!({})).await;
    assert_eq!(listed["structuredContent"]["records"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(
        listed["structuredContent"]["records"][0]["record"]["items"][0],
        serde_json::json!({"text": "tests pass", "checked": true})
    );

    // serve stops; a later setup of another client keeps serve's address.
    drop(server);
    let (ok, out, err) = f.run_in(&repo, &["--client", "cursor"]);
    assert!(ok, "{out}{err}");
    let cursor: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.user.join(".cursor/mcp.json")).unwrap()).unwrap();
    assert_eq!(cursor["mcpServers"]["continuity"]["url"], entry["url"]);

    // The project's own file: `continuity stdio` with a key file in the home, no secret.
    let (ok, out, err) = f.run_in(&repo, &["--client", "claude-code", "--scope", "project"]);
    assert!(ok, "{out}{err}");
    let project = std::fs::read_to_string(repo.join(".mcp.json")).unwrap();
    assert!(!project.contains("ctn_") && project.contains("--key-file"), "{project}");
    let (ok, out, err) = f.run_in(&repo, &["--client", "claude-code", "--scope", "project", "--remove"]);
    assert!(ok && !repo.join(".mcp.json").exists(), "{out}{err}");
}

/// `--remove` gives back files that hold other servers exactly — byte for byte, with their
/// permissions — however setup laid its own entry out (Windsurf's and VS Code's single-line
/// objects were reformatted before); a file changed since is edited, not replaced; and a
/// client's file that links outside the home folder is not written through.
#[test]
fn remove_restores_other_servers_exactly_and_links_out_of_home_are_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::new("linux");
    let windsurf = ".codeium/windsurf/mcp_config.json";
    let vscode = ".config/Code/User/mcp.json";
    let windsurf_text =
        "{\"mcpServers\": {\"github\": {\"serverUrl\": \"https://api.githubcopilot.com/mcp/\", \"headers\": {\"X\": \"1\"}}}}\n";
    let vscode_text = "{\n\t// mine\n\t\"servers\": {\"fs\": {\"type\": \"stdio\", \"command\": \"npx\", \"args\": [\"-y\", \"fs\"]}},\n\t\"inputs\": []\n}\n";
    f.write(windsurf, windsurf_text);
    f.write(vscode, vscode_text);
    for rel in [windsurf, vscode] {
        std::fs::set_permissions(f.user.join(rel), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (ok, out, err) = f.run(&["--client", "windsurf,vscode"]);
    assert!(ok, "{out}{err}");
    for rel in [windsurf, vscode] {
        let mode = std::fs::metadata(f.user.join(rel)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{rel} holds a key: readable by its owner alone");
    }
    let (ok, out, err) = f.run(&["--client", "windsurf,vscode", "--remove"]);
    assert!(ok, "{out}{err}");
    assert_eq!(std::fs::read_to_string(f.user.join(windsurf)).unwrap(), windsurf_text);
    assert_eq!(std::fs::read_to_string(f.user.join(vscode)).unwrap(), vscode_text);
    for rel in [windsurf, vscode] {
        let mode = std::fs::metadata(f.user.join(rel)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "{rel}: its permissions are back");
    }

    // Changed by a person after setup: only our entry goes, their change stays.
    let (ok, _, _) = f.run(&["--client", "windsurf"]);
    assert!(ok);
    let edited = std::fs::read_to_string(f.user.join(windsurf)).unwrap().replace("\"github\"", "\"gh\"");
    f.write(windsurf, &edited);
    let (ok, out, err) = f.run(&["--client", "windsurf", "--remove"]);
    assert!(ok, "{out}{err}");
    let after = std::fs::read_to_string(f.user.join(windsurf)).unwrap();
    assert!(after.contains("\"gh\"") && !after.contains("continuity"), "{after}");

    // A link to a file outside the home folder: refused, the target untouched.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("cursor-mcp.json");
    std::fs::write(&target, "{}\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::create_dir_all(f.user.join(".cursor")).unwrap();
    std::os::unix::fs::symlink(&target, f.user.join(".cursor/mcp.json")).unwrap();
    let (ok, out, _) = f.run(&["--client", "cursor"]);
    assert!(!ok && out.contains("outside your home folder"), "{out}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}\n");
    assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o644);
}
