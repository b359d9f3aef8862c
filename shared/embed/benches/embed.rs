//! Sentence-model throughput on conversation turns: `cargo bench -p embed --bench embed`
//! with `CONTINUITY_TEST_MODEL_DIR` set (tests/run.sh installs the model).
//!
//! Embeds the 2 494 turns of `tests/corpus/conversations.json` (each prefixed with its
//! speaker, as the recall harness indexes them) in bursts of 64, and single short queries
//! one at a time; prints texts/s and the single-query p50/p95.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::cast_precision_loss)]

use std::time::Instant;

fn main() {
    let dir = embed::test_model_dir().expect("set CONTINUITY_TEST_MODEL_DIR to the model folder");
    let model = embed::SentenceModel::load(&dir).unwrap();
    let raw = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/corpus/conversations.json")).unwrap();
    let corpus: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let mut turns = Vec::new();
    for c in corpus["conversations"].as_array().unwrap() {
        for s in c["sessions"].as_array().unwrap() {
            for t in s["turns"].as_array().unwrap() {
                turns.push(format!("{}: {}", t["speaker"].as_str().unwrap(), t["text"].as_str().unwrap()));
            }
        }
    }
    let burst: usize = std::env::var("BURST").ok().and_then(|b| b.parse().ok()).unwrap_or(64);
    model.embed_sync(&turns[..32]).unwrap(); // warm-up
    for round in 0..2 {
        let start = Instant::now();
        for chunk in turns.chunks(burst) {
            model.embed_sync(chunk).unwrap();
        }
        let s = start.elapsed().as_secs_f64();
        println!("round {round}: {} turns in bursts of {burst}: {:.2} s, {:.0} texts/s", turns.len(), s, turns.len() as f64 / s);
    }
    let queries: Vec<String> =
        corpus["questions"].as_array().unwrap().iter().take(200).map(|q| q["question"].as_str().unwrap().to_owned()).collect();
    let mut times: Vec<f64> = queries
        .iter()
        .map(|q| {
            let start = Instant::now();
            model.embed_sync(std::slice::from_ref(q)).unwrap();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "single query ({} questions): p50 {:.2} ms, p95 {:.2} ms",
        times.len(),
        times[times.len() / 2],
        times[times.len() * 95 / 100]
    );
}
