//! The MCP clients `continuity setup` knows: where each keeps its user-level MCP
//! configuration on Linux, macOS and Windows, how it is found installed, and the entry
//! it expects for a server (each client's own keys: `mcpServers`/`servers`/
//! `context_servers`/`[mcp_servers]`, `url`/`serverUrl`/`httpUrl`, `type`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// The operating system whose folder layout is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Os {
    Linux,
    Macos,
    Windows,
}

impl Os {
    /// The system this binary runs on.
    pub const fn current() -> Self {
        if cfg!(target_os = "macos") {
            Self::Macos
        } else if cfg!(windows) {
            Self::Windows
        } else {
            Self::Linux
        }
    }
}

/// The folders client configurations live under, for one user.
#[derive(Clone, Debug)]
pub struct Platform {
    pub os: Os,
    /// `$HOME` (`%USERPROFILE%` on Windows).
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub xdg_config: PathBuf,
    /// `%APPDATA%`, else `~\AppData\Roaming`.
    pub appdata: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: PathBuf,
    /// `$PATH`'s folders, where a client's command may be found.
    pub path: Vec<PathBuf>,
}

impl Platform {
    /// The folders for `os`, from the environment `var` reads (relative values ignored).
    pub fn from_env(os: Os, var: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let abs = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from).filter(|p| p.is_absolute());
        let home = match os {
            Os::Windows => abs("USERPROFILE").or_else(|| abs("HOME")),
            _ => abs("HOME"),
        }?;
        Some(Self {
            os,
            xdg_config: abs("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            appdata: abs("APPDATA").unwrap_or_else(|| home.join("AppData").join("Roaming")),
            codex_home: abs("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
            path: var("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default(),
            home,
        })
    }

    /// The folder desktop applications keep their settings in: `~/.config` (Linux),
    /// `~/Library/Application Support` (macOS), `%APPDATA%` (Windows).
    fn app_config(&self) -> PathBuf {
        match self.os {
            Os::Linux => self.xdg_config.clone(),
            Os::Macos => self.home.join("Library").join("Application Support"),
            Os::Windows => self.appdata.clone(),
        }
    }

    fn on_path(&self, command: &str) -> bool {
        let names: Vec<String> = match self.os {
            Os::Windows => vec![format!("{command}.exe"), format!("{command}.cmd")],
            _ => vec![command.to_owned()],
        };
        self.path.iter().any(|dir| names.iter().any(|n| dir.join(n).is_file()))
    }
}

/// A configuration file's syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON; comments and trailing commas kept where the client allows them.
    Json,
    /// TOML (Codex).
    Toml,
}

/// How a client reaches the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Connection {
    /// Streamable HTTP, with `Authorization: Bearer …` when a key is given (else the
    /// client signs in with OAuth).
    Http { url: String, bearer: Option<String> },
    /// A local command speaking MCP on stdin/stdout.
    Stdio { command: String, args: Vec<String>, env: Vec<(String, String)> },
}

/// One MCP client.
#[derive(Debug)]
pub struct Client {
    /// The id on the command line and in key names (`claude-code`).
    pub id: &'static str,
    pub name: &'static str,
    pub format: Format,
    /// The top-level key holding the servers.
    pub container: &'static str,
    /// Whether its configuration file can name a remote HTTP server (else stdio only).
    pub http: bool,
    /// Whether it signs in to a remote server with OAuth by itself.
    pub oauth: bool,
    /// The toolsets its key is offered by default.
    pub toolsets: &'static str,
    /// Commands whose presence on `PATH` means it is installed.
    commands: &'static [&'static str],
}

/// Every client `setup` configures, in the order it lists them.
pub const CLIENTS: &[Client] = &[
    Client {
        id: "claude-desktop",
        name: "Claude Desktop",
        format: Format::Json,
        container: "mcpServers",
        http: false,
        oauth: false,
        toolsets: "canonical,graph",
        commands: &[],
    },
    Client {
        id: "claude-code",
        name: "Claude Code",
        format: Format::Json,
        container: "mcpServers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["claude"],
    },
    Client {
        id: "cursor",
        name: "Cursor",
        format: Format::Json,
        container: "mcpServers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["cursor"],
    },
    Client {
        id: "vscode",
        name: "VS Code",
        format: Format::Json,
        container: "servers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["code"],
    },
    Client {
        id: "vscode-insiders",
        name: "VS Code Insiders",
        format: Format::Json,
        container: "servers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["code-insiders"],
    },
    Client {
        id: "windsurf",
        name: "Windsurf",
        format: Format::Json,
        container: "mcpServers",
        http: true,
        oauth: false,
        toolsets: "canonical,engineering",
        commands: &["windsurf"],
    },
    Client {
        id: "codex",
        name: "Codex CLI",
        format: Format::Toml,
        container: "mcp_servers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["codex"],
    },
    Client {
        id: "gemini",
        name: "Gemini CLI",
        format: Format::Json,
        container: "mcpServers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["gemini"],
    },
    Client {
        id: "zed",
        name: "Zed",
        format: Format::Json,
        container: "context_servers",
        http: true,
        oauth: true,
        toolsets: "canonical,engineering",
        commands: &["zed", "zeditor"],
    },
];

/// The name of our entry in every client's configuration.
pub const ENTRY_NAME: &str = "continuity";

/// The client with this id.
pub fn find(id: &str) -> Option<&'static Client> {
    CLIENTS.iter().find(|c| c.id == id)
}

impl Client {
    /// The user-level configuration file.
    pub fn config_path(&self, p: &Platform) -> PathBuf {
        match self.id {
            "claude-desktop" => p.app_config().join("Claude").join("claude_desktop_config.json"),
            "claude-code" => p.home.join(".claude.json"),
            "cursor" => p.home.join(".cursor").join("mcp.json"),
            "vscode" => p.app_config().join("Code").join("User").join("mcp.json"),
            "vscode-insiders" => p.app_config().join("Code - Insiders").join("User").join("mcp.json"),
            "windsurf" => p.home.join(".codeium").join("windsurf").join("mcp_config.json"),
            "codex" => p.codex_home.join("config.toml"),
            "gemini" => p.home.join(".gemini").join("settings.json"),
            // Zed reads ~/.config/zed on macOS too.
            "zed" => match p.os {
                Os::Windows => p.appdata.join("Zed").join("settings.json"),
                _ => p.xdg_config.join("zed").join("settings.json"),
            },
            other => p.home.join(format!(".{other}.json")),
        }
    }

    /// Its project-level configuration file, relative to the project's folder, for the
    /// clients that read one (`--scope project`).
    pub fn project_file(&self) -> Option<&'static str> {
        match self.id {
            "claude-code" => Some(".mcp.json"),
            "cursor" => Some(".cursor/mcp.json"),
            "vscode" | "vscode-insiders" => Some(".vscode/mcp.json"),
            _ => None,
        }
    }

    /// Whether its default toolsets are those of a coding agent (the engineering records
    /// of a project).
    pub fn codes(&self) -> bool {
        self.toolsets.contains("engineering")
    }

    /// Whether the client is installed for this user: its configuration (or the folder
    /// it keeps it in) exists, or its command is on `PATH`.
    pub fn detected(&self, p: &Platform) -> bool {
        let file = self.config_path(p);
        let marker: Option<PathBuf> = match self.id {
            // ~/.claude/ exists once Claude Code ran, even before ~/.claude.json.
            "claude-code" => Some(p.home.join(".claude")),
            _ => file.parent().map(Path::to_path_buf),
        };
        file.exists() || marker.is_some_and(|m| m.is_dir()) || self.commands.iter().any(|c| p.on_path(c))
    }

    /// The entry for `connection`, in this client's own shape (keys in the order written).
    pub fn entry(&self, connection: &Connection) -> Entry {
        let typed = matches!(self.id, "claude-code" | "vscode" | "vscode-insiders");
        let mut e: Entry = Vec::new();
        match connection {
            Connection::Http { url, bearer } => {
                let url_key = match self.id {
                    "windsurf" => "serverUrl",
                    "gemini" => "httpUrl",
                    _ => "url",
                };
                if typed {
                    e.push(("type".into(), json!("http")));
                }
                e.push((url_key.into(), json!(url)));
                if let Some(token) = bearer {
                    let headers = json!({ "Authorization": format!("Bearer {token}") });
                    e.push((if self.id == "codex" { "http_headers" } else { "headers" }.into(), headers));
                }
            }
            Connection::Stdio { command, args, env } => {
                if typed {
                    e.push(("type".into(), json!("stdio")));
                }
                e.push(("command".into(), json!(command)));
                e.push(("args".into(), json!(args)));
                if !env.is_empty() {
                    e.push(("env".into(), Value::Object(env.iter().map(|(k, v)| (k.clone(), json!(v))).collect())));
                }
            }
        }
        e
    }
}

/// A server entry: its keys in the order they are written.
pub type Entry = Vec<(String, Value)>;

/// An entry as one JSON object (to compare with what a file holds).
pub fn entry_value(entry: &Entry) -> Value {
    Value::Object(entry.iter().cloned().collect::<Map<String, Value>>())
}

/// The bearer token an entry of ours carries (a header, or `CONTINUITY_KEY` of a stdio
/// entry), to keep a key that still works on a re-run.
pub fn entry_token(entry: &Value) -> Option<&str> {
    let header = ["headers", "http_headers"]
        .iter()
        .find_map(|h| entry.get(h)?.get("Authorization")?.as_str())
        .and_then(|v| v.strip_prefix("Bearer "));
    header.or_else(|| entry.get("env")?.get("CONTINUITY_KEY")?.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn platform(os: Os, vars: &[(&str, &str)]) -> Platform {
        Platform::from_env(os, |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())).unwrap()
    }

    #[test]
    fn every_client_has_its_file_on_every_system() {
        let linux = platform(Os::Linux, &[("HOME", "/home/a")]);
        let mac = platform(Os::Macos, &[("HOME", "/Users/a")]);
        let win = platform(Os::Windows, &[("USERPROFILE", "/c/Users/a"), ("APPDATA", "/c/Users/a/AppData/Roaming")]);
        let path = |id: &str, p: &Platform| find(id).unwrap().config_path(p).display().to_string();
        assert_eq!(path("claude-desktop", &linux), "/home/a/.config/Claude/claude_desktop_config.json");
        assert_eq!(path("claude-desktop", &mac), "/Users/a/Library/Application Support/Claude/claude_desktop_config.json");
        assert_eq!(path("claude-desktop", &win), "/c/Users/a/AppData/Roaming/Claude/claude_desktop_config.json");
        assert_eq!(path("vscode-insiders", &mac), "/Users/a/Library/Application Support/Code - Insiders/User/mcp.json");
        assert_eq!(path("zed", &mac), "/Users/a/.config/zed/settings.json");
        assert_eq!(path("zed", &win), "/c/Users/a/AppData/Roaming/Zed/settings.json");
        assert_eq!(path("codex", &platform(Os::Linux, &[("HOME", "/h"), ("CODEX_HOME", "/x/codex")])), "/x/codex/config.toml");
        // A relative variable is ignored, never joined to the working directory.
        assert_eq!(
            path("zed", &platform(Os::Linux, &[("HOME", "/h"), ("XDG_CONFIG_HOME", "rel")])),
            "/h/.config/zed/settings.json"
        );
        assert!(Platform::from_env(Os::Linux, |_| None).is_none(), "no home, no set-up");
    }

    #[test]
    fn each_client_gets_its_own_keys() {
        let http = Connection::Http { url: "http://127.0.0.1:8787/mcp".into(), bearer: Some("ctn_k".into()) };
        let e = |id: &str| entry_value(&find(id).unwrap().entry(&http));
        assert_eq!(e("windsurf")["serverUrl"], "http://127.0.0.1:8787/mcp");
        assert_eq!(e("gemini")["httpUrl"], "http://127.0.0.1:8787/mcp");
        assert_eq!(e("vscode")["type"], "http");
        assert_eq!(e("codex")["http_headers"]["Authorization"], "Bearer ctn_k");
        assert_eq!(e("cursor").get("type"), None);
        for c in CLIENTS {
            assert_eq!(entry_token(&entry_value(&c.entry(&http))), Some("ctn_k"), "{}", c.id);
        }
        let oauth = Connection::Http { url: "https://x/mcp".into(), bearer: None };
        assert_eq!(entry_value(&find("cursor").unwrap().entry(&oauth)), json!({"url": "https://x/mcp"}));
        let stdio = Connection::Stdio {
            command: "/bin/c".into(),
            args: vec!["stdio".into()],
            env: vec![("CONTINUITY_KEY".into(), "k".into())],
        };
        let desktop = entry_value(&find("claude-desktop").unwrap().entry(&stdio));
        assert_eq!(desktop, json!({"command": "/bin/c", "args": ["stdio"], "env": {"CONTINUITY_KEY": "k"}}));
        assert_eq!(entry_token(&desktop), Some("k"));
    }
}
