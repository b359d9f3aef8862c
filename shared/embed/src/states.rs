//! The token states late interaction reads, kept so that a search does not run the
//! model over its candidates.
//!
//! A written text's states come from the same model run as its sentence vector (the
//! write queue's), and are kept in [`Written`] under a keyed hash of the text — vectors
//! only, one signed byte per dimension with a scale per token (about 400 bytes a token,
//! so 7 to 8 KB a short memory with its title), never its words. The cache is bounded in bytes and
//! drops the least recently used first; a text it no longer holds (or that was written
//! before the process started) is run through the model when a search needs it, and
//! kept then. Every candidate's states go through the same rounding, cached or not, so
//! an answer does not depend on what the cache held.
//!
//! A question's states (with its word pieces: late interaction leaves out its stop
//! words) come from the run that gives its vector ([`super::SentenceModel`]'s
//! `embed_query`), kept for the next few searches in [`Asked`].

use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ports::search::TokenStates;

/// Default bound of the written texts' token states, in bytes (256 MiB: about 32 000
/// turns); `CONTINUITY_TOKEN_CACHE_MB` changes it.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Questions whose states are kept for the search that embedded them.
const ASKED: usize = 64;

/// A text's token vectors rounded to one signed byte per dimension, each token with its
/// own scale.
pub(crate) struct Packed {
    scales: Vec<f32>,
    data: Vec<i8>,
}

impl Packed {
    pub(crate) fn pack(vectors: &[Vec<f32>]) -> Self {
        let mut scales = Vec::with_capacity(vectors.len());
        let mut data = Vec::with_capacity(vectors.iter().map(Vec::len).sum());
        for v in vectors {
            let max = v.iter().fold(0.0_f32, |m, x| m.max(x.abs()));
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            scales.push(scale);
            // Within ±127 by construction: the cast cannot wrap.
            #[allow(clippy::cast_possible_truncation)]
            data.extend(v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8));
        }
        Self { scales, data }
    }

    /// The vectors again, each scaled back to unit length.
    pub(crate) fn unpack(&self) -> Vec<Vec<f32>> {
        if self.scales.is_empty() {
            return Vec::new();
        }
        let dim = self.data.len() / self.scales.len();
        self.data
            .chunks(dim.max(1))
            .zip(&self.scales)
            .map(|(row, scale)| {
                let mut v: Vec<f32> = row.iter().map(|&x| f32::from(x) * scale).collect();
                ports::search::normalize(&mut v);
                v
            })
            .collect()
    }

    /// As stored on [`Disk`]: the token count, the scales, the bytes (little-endian).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let n = u32::try_from(self.scales.len()).unwrap_or(u32::MAX);
        let mut out = Vec::with_capacity(4 + 4 * self.scales.len() + self.data.len());
        out.extend_from_slice(&n.to_le_bytes());
        for s in &self.scales {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out.extend(self.data.iter().map(|&x| x.to_le_bytes()[0]));
        out
    }

    /// [`Packed::to_bytes`] read back; `None` when it does not add up.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (n, rest) = bytes.split_first_chunk::<4>()?;
        let n = usize::try_from(u32::from_le_bytes(*n)).ok()?;
        let (scales, data) = rest.split_at_checked(n.checked_mul(4)?)?;
        if n == 0 && !data.is_empty() || n > 0 && data.len() % n != 0 {
            return None;
        }
        let scales = scales.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        Some(Self { scales, data: data.iter().map(|&b| i8::from_le_bytes([b])).collect() })
    }

    /// What it takes in memory, with the cache's own bookkeeping.
    fn bytes(&self) -> usize {
        self.data.len() + 4 * self.scales.len() + 96
    }
}

/// The written texts' token states, by keyed hash of the text, bounded in bytes.
pub(crate) struct Written {
    map: lru::LruCache<Key, Arc<Packed>>,
    bytes: usize,
    budget: usize,
}

impl Written {
    pub(crate) fn new(budget: usize) -> Self {
        Self { map: lru::LruCache::unbounded(), bytes: 0, budget }
    }

    pub(crate) fn get(&mut self, key: Key) -> Option<Arc<Packed>> {
        self.map.get(&key).cloned()
    }

    /// Keeps `packed` for `key`, dropping the least recently used beyond the budget
    /// (nothing is kept with a budget of 0, or when one text is over it).
    pub(crate) fn put(&mut self, key: Key, packed: Arc<Packed>) {
        let size = packed.bytes();
        if size > self.budget {
            return;
        }
        if let Some(old) = self.map.put(key, packed) {
            self.bytes -= old.bytes();
        }
        self.bytes += size;
        while self.bytes > self.budget {
            let Some((_, old)) = self.map.pop_lru() else { break };
            self.bytes -= old.bytes();
        }
    }

    pub(crate) fn remove(&mut self, key: Key) {
        if let Some(old) = self.map.pop(&key) {
            self.bytes -= old.bytes();
        }
    }

    pub(crate) fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        while self.bytes > self.budget {
            let Some((_, old)) = self.map.pop_lru() else { break };
            self.bytes -= old.bytes();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The last few questions' states, with their word pieces.
pub(crate) struct Asked(lru::LruCache<Key, TokenStates>);

impl Default for Asked {
    fn default() -> Self {
        Self(lru::LruCache::new(NonZeroUsize::new(ASKED).unwrap_or(NonZeroUsize::MIN)))
    }
}

impl Asked {
    pub(crate) fn put(&mut self, key: Key, states: TokenStates) {
        self.0.put(key, states);
    }
    pub(crate) fn get(&mut self, key: Key) -> Option<TokenStates> {
        self.0.get(&key).cloned()
    }
}

/// A text's key: the first 128 bits of its SHA-256, so that no text can be made to
/// collide with another's, and the same in every process (the states on [`Disk`]).
pub(crate) type Key = u128;

/// How texts are keyed ([`Key`]).
pub(crate) struct Keys;

impl Keys {
    pub(crate) fn of(&self, text: &str) -> Key {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(text.as_bytes());
        let mut first = [0_u8; 16];
        first.copy_from_slice(&digest[..16]);
        u128::from_be_bytes(first)
    }
}

/// The written texts' token states in a SQLite file (beside the home's data): what a
/// restart keeps and the memory bound pushes out, so only a text never written through
/// this file's processes is run again. A forgotten text's row is deleted (and zeroed:
/// `secure_delete`); a file made with another model is emptied when opened. Bounded in
/// bytes of states ([`DEFAULT_DISK_BYTES`]; `CONTINUITY_TOKEN_STATES_MB`): past it the
/// oldest written go first, down to nine tenths of it, and their pages are reused. A
/// cache: a write that fails costs a later model run, never a write or a search.
pub(crate) struct Disk(Mutex<OnDisk>);

pub(crate) struct OnDisk {
    c: rusqlite::Connection,
    /// The states' bytes in the file (its `size` row, read after each change).
    bytes: u64,
    budget: u64,
}

/// Default bound of the token states' file, in bytes of states (2 GiB: about 230 000
/// short memories; the file adds a few percent); `CONTINUITY_TOKEN_STATES_MB` changes it.
pub const DEFAULT_DISK_BYTES: u64 = 2 << 30;

impl Disk {
    /// Opens (or creates) the file at `path` for `model`'s states, at most `budget`
    /// bytes of them (the oldest written are let go of first, now if it holds more).
    pub(crate) fn open(path: &Path, model: &str, budget: u64) -> rusqlite::Result<Self> {
        use rusqlite::OptionalExtension;
        let c = rusqlite::Connection::open(path)?;
        c.busy_timeout(std::time::Duration::from_secs(5))?;
        // `states` was the layout before the bound (no write order): dropped, as a cache.
        // `size` holds the bytes of `data` in `token_states`, kept by triggers in the
        // transaction of each change (a `REPLACE` deletes through the delete trigger:
        // `recursive_triggers`), so an open reads one row instead of summing every one;
        // a file from before it is summed once, when `size` is made.
        c.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; PRAGMA secure_delete = ON;
             PRAGMA recursive_triggers = ON;
             CREATE TABLE IF NOT EXISTS model (name TEXT NOT NULL);
             DROP TABLE IF EXISTS states;
             CREATE TABLE IF NOT EXISTS token_states (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, data BLOB NOT NULL);
             BEGIN IMMEDIATE;
             CREATE TABLE IF NOT EXISTS size (bytes INTEGER NOT NULL);
             INSERT INTO size (bytes) SELECT coalesce(sum(length(data)), 0) FROM token_states WHERE NOT EXISTS (SELECT 1 FROM size);
             CREATE TRIGGER IF NOT EXISTS size_put AFTER INSERT ON token_states
                 BEGIN UPDATE size SET bytes = bytes + length(NEW.data); END;
             CREATE TRIGGER IF NOT EXISTS size_remove AFTER DELETE ON token_states
                 BEGIN UPDATE size SET bytes = bytes - length(OLD.data); END;
             COMMIT;",
        )?;
        let made_by: Option<String> = c.query_row("SELECT name FROM model", [], |r| r.get(0)).optional()?;
        if made_by.as_deref() != Some(model) {
            c.execute_batch("BEGIN; DELETE FROM token_states; DELETE FROM model; COMMIT;")?;
            c.execute("INSERT INTO model (name) VALUES (?1)", [model])?;
        }
        let mut d = OnDisk { c, bytes: 0, budget };
        d.count()?;
        d.trim()?;
        Ok(Self(Mutex::new(d)))
    }

    pub(crate) fn put(&self, rows: &[(Key, Arc<Packed>)]) -> rusqlite::Result<()> {
        let mut d = super::lock(&self.0);
        {
            let tx = d.c.transaction()?;
            {
                // A text written again moves to the end of the write order.
                let mut put = tx.prepare_cached("INSERT OR REPLACE INTO token_states (key, data) VALUES (?1, ?2)")?;
                for (key, p) in rows {
                    put.execute(rusqlite::params![key.to_be_bytes().as_slice(), p.to_bytes()])?;
                }
            }
            tx.commit()?;
        }
        d.count()?;
        d.trim()
    }

    /// Each key's states, when the file has them (and they read back whole).
    pub(crate) fn get(&self, keys: &[Key]) -> rusqlite::Result<Vec<Option<Packed>>> {
        use rusqlite::OptionalExtension;
        let d = super::lock(&self.0);
        let mut get = d.c.prepare_cached("SELECT data FROM token_states WHERE key = ?1")?;
        keys.iter()
            .map(|key| {
                let data: Option<Vec<u8>> = get.query_row([key.to_be_bytes().as_slice()], |r| r.get(0)).optional()?;
                Ok(data.and_then(|d| Packed::from_bytes(&d)))
            })
            .collect()
    }

    pub(crate) fn remove(&self, keys: &[Key]) -> rusqlite::Result<()> {
        let mut d = super::lock(&self.0);
        {
            let tx = d.c.transaction()?;
            {
                let mut remove = tx.prepare_cached("DELETE FROM token_states WHERE key = ?1")?;
                for key in keys {
                    remove.execute([key.to_be_bytes().as_slice()])?;
                }
            }
            tx.commit()?;
        }
        d.count()
    }

    /// The states' bytes in the file and its bound.
    #[cfg(test)]
    pub(crate) fn size(&self) -> (u64, u64) {
        let d = super::lock(&self.0);
        (d.bytes, d.budget)
    }
}

impl OnDisk {
    /// Reads the states' bytes from the `size` row the triggers keep.
    fn count(&mut self) -> rusqlite::Result<()> {
        let n: i64 = self.c.query_row("SELECT bytes FROM size", [], |r| r.get(0))?;
        self.bytes = n.unsigned_abs();
        Ok(())
    }

    /// Past the bound, lets go of the oldest written down to nine tenths of it.
    fn trim(&mut self) -> rusqlite::Result<()> {
        if self.bytes <= self.budget {
            return Ok(());
        }
        let target = self.budget / 10 * 9;
        while self.bytes > target {
            // As many of the oldest as the average row says are over.
            let rows: i64 = self.c.query_row("SELECT count(*) FROM token_states", [], |r| r.get(0))?;
            let average = (self.bytes / rows.unsigned_abs().max(1)).max(1);
            let over = (self.bytes - target).div_ceil(average);
            let mut oldest = self
                .c
                .prepare_cached("DELETE FROM token_states WHERE id IN (SELECT id FROM token_states ORDER BY id LIMIT ?1)")?;
            let freed = oldest.execute([i64::try_from(over).unwrap_or(i64::MAX)])?;
            drop(oldest);
            self.count()?;
            if freed == 0 {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ports::search::dot;

    fn unit(seed: u32, dim: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim).map(|i| (((i as u32 + 1) * (seed + 7)) % 97) as f32 / 97.0 - 0.5).collect();
        ports::search::normalize(&mut v);
        v
    }

    /// Rounding to a byte per dimension keeps each token's direction (cosine with the
    /// original above 0.999) and its unit length.
    #[test]
    fn packing_keeps_each_vector_within_rounding() {
        let vectors: Vec<Vec<f32>> = (0..5).map(|s| unit(s, 384)).collect();
        let back = Packed::pack(&vectors).unpack();
        assert_eq!(back.len(), 5);
        for (a, b) in vectors.iter().zip(&back) {
            assert!(dot(a, b) > 0.999, "{}", dot(a, b));
            assert!((dot(b, b) - 1.0).abs() < 1e-4);
        }
        assert!(Packed::pack(&[]).unpack().is_empty());
        let zero = Packed::pack(&[vec![0.0; 4]]).unpack();
        assert_eq!(zero, [vec![0.0; 4]]);
    }

    /// The cache holds at most its budget, drops the least recently used first, keeps
    /// nothing over budget and forgets what a smaller budget cannot hold.
    #[test]
    fn the_written_cache_stays_within_its_budget() {
        let one = Arc::new(Packed::pack(&[unit(1, 384), unit(2, 384)]));
        let size = one.bytes();
        let mut c = Written::new(3 * size);
        for key in 0..3 {
            c.put(key, one.clone());
        }
        assert_eq!((c.len(), c.bytes()), (3, 3 * size));
        assert!(c.get(0).is_some()); // 0 is now the most recently used
        c.put(3, one.clone());
        assert_eq!(c.len(), 3);
        assert!(c.get(1).is_none(), "the least recently used goes first");
        assert!(c.get(0).is_some() && c.get(3).is_some());
        c.put(3, one.clone());
        assert_eq!(c.bytes(), 3 * size, "a text kept again is counted once");
        c.remove(3);
        c.remove(3);
        assert_eq!((c.len(), c.bytes()), (2, 2 * size));
        assert!(c.get(3).is_none());
        c.put(3, one.clone());
        c.set_budget(size);
        assert_eq!((c.len(), c.bytes()), (1, size));
        c.put(9, Arc::new(Packed::pack(&vec![unit(3, 384); 3])));
        assert!(c.get(9).is_none(), "a text over the whole budget is not kept");
        c.set_budget(0);
        assert_eq!((c.len(), c.bytes()), (0, 0));
    }

    /// The file gives back what was put (through a reopening), forgets what was
    /// removed, and is emptied when opened for another model; a row that does not add
    /// up reads as missing.
    #[test]
    fn the_disk_keeps_states_for_its_model_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("states.sqlite");
        let a = Arc::new(Packed::pack(&[unit(1, 384), unit(2, 384)]));
        let disk = Disk::open(&path, "model-a", DEFAULT_DISK_BYTES).unwrap();
        disk.put(&[(1, a.clone()), (2, a.clone())]).unwrap();
        drop(disk);
        let disk = Disk::open(&path, "model-a", DEFAULT_DISK_BYTES).unwrap();
        let got = disk.get(&[1, 2, 3]).unwrap();
        assert_eq!(got[0].as_ref().map(Packed::unpack), Some(a.unpack()));
        assert!(got[1].is_some() && got[2].is_none());
        disk.remove(&[1]).unwrap();
        assert!(disk.get(&[1]).unwrap()[0].is_none());
        drop(disk);
        let disk = Disk::open(&path, "model-b", DEFAULT_DISK_BYTES).unwrap();
        assert!(disk.get(&[2]).unwrap()[0].is_none(), "states of another model were kept");
        assert!(Packed::from_bytes(&[2, 0, 0, 0, 0, 0, 128, 63]).is_none());
        assert!(Packed::from_bytes(&[1, 0]).is_none());
        let empty = Packed::pack(&[]);
        assert!(Packed::from_bytes(&empty.to_bytes()).is_some_and(|p| p.unpack().is_empty()));
    }

    /// Past its bound the file lets go of the oldest written first, down to nine tenths
    /// of it; a text written again counts once and is the newest; reopened with a
    /// smaller bound it trims at once; a removal frees what the row held.
    #[test]
    fn the_disk_stays_within_its_bound_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("states.sqlite");
        let p = Arc::new(Packed::pack(&[unit(1, 384), unit(2, 384)]));
        let row = p.to_bytes().len() as u64;
        let disk = Disk::open(&path, "m", 10 * row).unwrap();
        for key in 0..10u128 {
            disk.put(&[(key, p.clone())]).unwrap();
        }
        assert_eq!(disk.size(), (10 * row, 10 * row));
        disk.put(&[(0, p.clone())]).unwrap(); // 0 written again: now the newest, counted once.
        assert_eq!(disk.size().0, 10 * row);
        // 11 rows, past the bound: the two oldest (1 and 2) go, down to nine tenths.
        disk.put(&[(10, p.clone())]).unwrap();
        let kept: Vec<bool> = disk.get(&(0..=10).collect::<Vec<_>>()).unwrap().iter().map(Option::is_some).collect();
        assert_eq!(kept, [true, false, false, true, true, true, true, true, true, true, true], "{kept:?}");
        assert_eq!(disk.size().0, 9 * row);
        disk.remove(&[0, 99]).unwrap();
        assert_eq!(disk.size().0, 8 * row);
        drop(disk);
        let disk = Disk::open(&path, "m", 4 * row).unwrap();
        let kept = disk.get(&(0..=10).collect::<Vec<_>>()).unwrap().iter().filter(|x| x.is_some()).count();
        assert_eq!((kept, disk.size().0), (3, 3 * row), "reopened under a smaller bound, the file was not trimmed");
        assert!(disk.get(&[10]).unwrap()[0].is_some(), "the newest was let go of");
    }

    /// The file's byte count (its `size` row) is what its rows hold after every kind of
    /// change, a file from before the count is summed once when opened, and another
    /// model's states leave it at zero.
    #[test]
    fn the_disk_counts_its_bytes_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("states.sqlite");
        let summed = || -> u64 {
            let c = rusqlite::Connection::open(&path).unwrap();
            let n: i64 = c.query_row("SELECT coalesce(sum(length(data)), 0) FROM token_states", [], |r| r.get(0)).unwrap();
            n.unsigned_abs()
        };
        let small = Arc::new(Packed::pack(&[unit(1, 384)]));
        let large = Arc::new(Packed::pack(&[unit(1, 384), unit(2, 384), unit(3, 384)]));
        let disk = Disk::open(&path, "m", DEFAULT_DISK_BYTES).unwrap();
        disk.put(&[(1, small.clone()), (2, large.clone()), (3, small.clone())]).unwrap();
        disk.put(&[(1, large.clone())]).unwrap(); // written again, larger
        disk.remove(&[3, 42]).unwrap();
        assert_eq!(disk.size().0, 2 * large.to_bytes().len() as u64);
        assert_eq!(disk.size().0, summed());
        drop(disk);
        // As a file made before the count: no `size` table, no triggers.
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("DROP TRIGGER size_put; DROP TRIGGER size_remove; DROP TABLE size;").unwrap();
        drop(c);
        let disk = Disk::open(&path, "m", DEFAULT_DISK_BYTES).unwrap();
        assert_eq!(disk.size().0, summed());
        disk.put(&[(4, small.clone())]).unwrap();
        assert_eq!(disk.size().0, summed());
        drop(disk);
        let disk = Disk::open(&path, "other", DEFAULT_DISK_BYTES).unwrap();
        assert_eq!((disk.size().0, summed()), (0, 0));
    }

    #[test]
    fn keys_tell_texts_apart() {
        let k = Keys;
        assert_eq!(k.of("Kate took up pottery."), k.of("Kate took up pottery."));
        assert_ne!(k.of("Kate took up pottery."), k.of("Kate took up pottery"));
        // The first 128 bits of SHA-256("abc"): the same key in every process.
        assert_eq!(k.of("abc"), 0xba78_16bf_8f01_cfea_4141_40de_5dae_2223);
    }
}
