//! What the bridge keeps on disk, per remote and key: the offline archive of recent read
//! results and the write buffer, in one SQLite file (WAL, `synchronous=FULL`: a write is
//! acknowledged to the client only once it is on disk).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context as _, anyhow};
use rusqlite::{Connection, OptionalExtension as _, params};
use serde_json::Value;

/// Read results kept; the oldest go first.
pub const ARCHIVE_LIMIT: i64 = 5_000;

/// A buffered write.
#[derive(Debug, Clone, PartialEq)]
pub struct Buffered {
    pub seq: i64,
    pub idempotency_key: String,
    /// The `tools/call` params as the client sent them.
    pub params: Value,
    pub queued_at_ms: i64,
    /// `queued`, `sent` or `refused`.
    pub state: String,
    /// The server's answer once replayed (a result, or the error it refused with).
    pub answer: Option<Value>,
}

impl Buffered {
    pub fn tool(&self) -> &str {
        self.params.get("name").and_then(Value::as_str).unwrap_or("?")
    }
}

pub struct Store {
    conn: Mutex<Connection>,
    pub path: PathBuf,
}

/// The file for `url` and `key` under `home`: one per pair, so one person's archive is
/// never answered to another key.
pub fn path_for(home: &Path, url: &str, key: &str) -> PathBuf {
    let digest = services::sha256_hex(&format!("{url}\n{key}"));
    home.join("bridge").join(format!("{}.db", &digest[..16]))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Store {
    /// Opens (or creates) the store, readable by the user alone.
    ///
    /// # Errors
    /// When the file cannot be created or is not a bridge store.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            crate::home::create_folder(dir)?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA busy_timeout=5000;
             CREATE TABLE IF NOT EXISTS archive (key TEXT PRIMARY KEY, result TEXT NOT NULL, stored_at INTEGER NOT NULL);
             CREATE INDEX IF NOT EXISTS archive_age ON archive (stored_at);
             CREATE TABLE IF NOT EXISTS buffer (seq INTEGER PRIMARY KEY AUTOINCREMENT, idem TEXT NOT NULL UNIQUE,
                 params TEXT NOT NULL, queued_at INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'queued',
                 answer TEXT, done_at INTEGER);
             CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);",
        )
        .with_context(|| format!("{} is not a bridge store: move it away", path.display()))?;
        let _ = store_embedded::private::set_mode(path, 0o600);
        Ok(Self { conn: Mutex::new(conn), path: path.to_path_buf() })
    }

    fn conn(&self) -> anyhow::Result<std::sync::MutexGuard<'_, Connection>> {
        self.conn.lock().map_err(|_| anyhow!("bridge store lock poisoned"))
    }

    /// Keeps a read's result (replacing an older one), dropping the oldest beyond the limit.
    pub fn archive(&self, key: &str, result: &Value) -> anyhow::Result<()> {
        let c = self.conn()?;
        c.execute(
            "INSERT INTO archive (key, result, stored_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET result = excluded.result, stored_at = excluded.stored_at",
            params![key, result.to_string(), now_ms()],
        )?;
        c.execute(
            "DELETE FROM archive WHERE stored_at < (SELECT stored_at FROM archive ORDER BY stored_at DESC LIMIT 1 OFFSET ?1)",
            params![ARCHIVE_LIMIT - 1],
        )?;
        Ok(())
    }

    /// An archived result and when it was stored (ms since the epoch).
    pub fn archived(&self, key: &str) -> anyhow::Result<Option<(Value, i64)>> {
        let c = self.conn()?;
        let row: Option<(String, i64)> = c
            .query_row("SELECT result, stored_at FROM archive WHERE key = ?1", params![key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(row.and_then(|(t, at)| serde_json::from_str(&t).ok().map(|v| (v, at))))
    }

    pub fn set_meta(&self, k: &str, v: &Value) -> anyhow::Result<()> {
        self.conn()?.execute(
            "INSERT INTO meta (k, v) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
            params![k, v.to_string()],
        )?;
        Ok(())
    }

    pub fn meta(&self, k: &str) -> anyhow::Result<Option<Value>> {
        let v: Option<String> = self.conn()?.query_row("SELECT v FROM meta WHERE k = ?1", params![k], |r| r.get(0)).optional()?;
        Ok(v.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Appends a write to the buffer; returns its place. On disk when this returns.
    pub fn enqueue(&self, idempotency_key: &str, params: &Value) -> anyhow::Result<i64> {
        let c = self.conn()?;
        c.execute(
            "INSERT INTO buffer (idem, params, queued_at) VALUES (?1, ?2, ?3) ON CONFLICT (idem) DO NOTHING",
            params![idempotency_key, params.to_string(), now_ms()],
        )?;
        Ok(c.query_row("SELECT seq FROM buffer WHERE idem = ?1", params![idempotency_key], |r| r.get(0))?)
    }

    /// The writes still to send, oldest first.
    pub fn queued(&self) -> anyhow::Result<Vec<Buffered>> {
        self.select("WHERE state = 'queued' ORDER BY seq")
    }

    /// Every buffered write, oldest first (for `--status`).
    pub fn all(&self) -> anyhow::Result<Vec<Buffered>> {
        self.select("ORDER BY seq")
    }

    fn select(&self, tail: &str) -> anyhow::Result<Vec<Buffered>> {
        let c = self.conn()?;
        let mut st = c.prepare(&format!("SELECT seq, idem, params, queued_at, state, answer FROM buffer {tail}"))?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, idem, params, queued_at_ms, state, answer) = row?;
            out.push(Buffered {
                seq,
                idempotency_key: idem,
                params: serde_json::from_str(&params).unwrap_or(Value::Null),
                queued_at_ms,
                state,
                answer: answer.and_then(|a| serde_json::from_str(&a).ok()),
            });
        }
        Ok(out)
    }

    /// After `memory.forget` of `id` succeeded: drops every archived read whose answer
    /// holds the id (a search or a list that showed the memory), and blanks the buffered
    /// writes already sent whose answer holds it (the `memory.remember` that made it:
    /// its text is in the write's arguments). Returns (archived reads dropped, writes
    /// blanked).
    ///
    /// # Errors
    /// When the store cannot be written.
    pub fn forget(&self, id: &str) -> anyhow::Result<(usize, usize)> {
        let needle = serde_json::to_string(id)?;
        let c = self.conn()?;
        let reads = c.execute("DELETE FROM archive WHERE instr(result, ?1) > 0", params![needle])?;
        let writes = c.execute(
            "UPDATE buffer SET params = json_object('name', json_extract(params, '$.name')), answer = NULL
             WHERE state != 'queued' AND instr(answer, ?1) > 0",
            params![needle],
        )?;
        Ok((reads, writes))
    }

    /// Records how a replayed write ended: `sent` or `refused`, with the server's answer.
    pub fn settle(&self, seq: i64, state: &str, answer: &Value) -> anyhow::Result<()> {
        self.conn()?.execute(
            "UPDATE buffer SET state = ?2, answer = ?3, done_at = ?4 WHERE seq = ?1",
            params![seq, state, answer.to_string(), now_ms()],
        )?;
        Ok(())
    }
}

pub fn age_ms(at_ms: i64) -> i64 {
    (now_ms() - at_ms).max(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn forgetting_drops_the_reads_and_blanks_the_writes_that_show_the_memory() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("b.db")).unwrap();
        s.archive("search-a", &json!({"results": [{"id": "m-1", "text": "my secret marker"}]})).unwrap();
        s.archive("search-b", &json!({"results": [{"id": "m-10", "text": "another"}]})).unwrap();
        let seq = s.enqueue("k1", &json!({"name": "memory_remember", "arguments": {"text": "my secret marker"}})).unwrap();
        s.settle(seq, "sent", &json!({"structuredContent": {"memory": {"id": "m-1"}}})).unwrap();
        let waiting = s.enqueue("k2", &json!({"name": "memory_remember", "arguments": {"text": "queued, not sent"}})).unwrap();
        assert_eq!(s.forget("m-1").unwrap(), (1, 1));
        assert!(s.archived("search-a").unwrap().is_none());
        assert!(s.archived("search-b").unwrap().is_some(), "m-10 is another memory");
        let all = s.all().unwrap();
        let sent = all.iter().find(|b| b.seq == seq).unwrap();
        assert_eq!((sent.params.clone(), sent.answer.clone()), (json!({"name": "memory_remember"}), None));
        assert!(!format!("{all:?}").contains("secret marker"));
        assert_eq!(all.iter().find(|b| b.seq == waiting).unwrap().state, "queued", "a write still to send is kept");
    }

    #[test]
    fn buffer_keeps_order_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let s = Store::open(&path).unwrap();
        assert_eq!(s.enqueue("k1", &json!({"name": "a"})).unwrap(), 1);
        assert_eq!(s.enqueue("k2", &json!({"name": "b"})).unwrap(), 2);
        assert_eq!(s.enqueue("k1", &json!({"name": "a"})).unwrap(), 1, "the same key is queued once");
        s.settle(1, "sent", &json!({"ok": true})).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let q = s.queued().unwrap();
        assert_eq!(q.iter().map(|b| b.tool().to_owned()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(s.all().unwrap()[0].answer, Some(json!({"ok": true})));
        s.archive("r1", &json!({"x": 1})).unwrap();
        s.archive("r1", &json!({"x": 2})).unwrap();
        assert_eq!(s.archived("r1").unwrap().unwrap().0, json!({"x": 2}));
        assert_eq!(s.archived("r2").unwrap(), None);
    }
}
