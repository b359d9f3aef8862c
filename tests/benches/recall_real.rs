//! Recall on a real set (docs/benchmarks.md, "Recall on real conversations"): REALTALK's
//! ten conversations between real people, indexed and asked as
//! `continuity_tests::recall` does for the generated set, with one embedder — `hashing`
//! or `minilm` (the first argument; `minilm` by default) — printing R@5, R@10 and
//! MRR@10 per split, question category and system; with `s3vectors`, on the AWS
//! `small` profile's index instead of the embedded one (a moto at
//! `CONTINUITY_TEST_MOTO_URL`; `benches/recall_real.sh s3vectors` starts one); with
//! `friendsqa`, on the second real set (FriendsQA: questions people wrote about scenes
//! of *Friends*) instead of REALTALK.
//!
//! The data is not in the repository (REALTALK's own has no licence; FriendsQA is
//! Apache-2.0, but the scripts it quotes are not ours to copy): `benches/recall_real.sh`
//! fetches both and runs this for both embedders. By hand:
//! `CONTINUITY_REALTALK_DIR=DIR CONTINUITY_TEST_MODEL_DIR=MODEL cargo bench -p continuity-tests --profile dev --bench recall_real -- minilm`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `generated`: the generated set (`tests/corpus/conversations.json`) instead of
    // REALTALK — for the `small` profile's index, whose generated-set figures the
    // search tests do not measure; `friendsqa`: the second real set (FriendsQA, at
    // CONTINUITY_FRIENDSQA_DIR).
    let corpus = if args.iter().any(|a| a == "generated") {
        let corpus = continuity_tests::recall::corpus();
        println!("generated set: {} turns, {} questions", corpus.turns.len(), corpus.questions.len());
        corpus
    } else if args.iter().any(|a| a == "friendsqa") {
        real_set(
            "FriendsQA",
            "CONTINUITY_FRIENDSQA_DIR",
            continuity_tests::recall::friendsqa,
            "answered only in stage directions",
        )
    } else {
        real_set("REALTALK", "CONTINUITY_REALTALK_DIR", continuity_tests::recall::realtalk, "without a usable evidence id")
    };
    // `cargo bench` passes `--bench`; the embedder is the first other argument.
    let choice = args
        .iter()
        .find(|a| !a.starts_with("--") && !["s3vectors", "generated", "friendsqa"].contains(&a.as_str()))
        .cloned()
        .unwrap_or_else(|| "minilm".to_owned());
    let embedder: Arc<dyn ports::Embedder> = match choice.as_str() {
        "hashing" => Arc::new(ports::search::HashingEmbedder::new(384)),
        "minilm" => {
            let model = embed::test_model_dir().expect("CONTINUITY_TEST_MODEL_DIR is not set: run benches/recall_real.sh");
            Arc::new(embed::SentenceModel::load(&model).unwrap())
        }
        other => panic!("unknown embedder {other}: hashing or minilm"),
    };
    // `s3vectors` as another argument: the `small` profile's index (keywords in DynamoDB
    // on the moto at CONTINUITY_TEST_MOTO_URL, vectors in the in-process S3 Vectors
    // stand-in) instead of the embedded one.
    let index = if args.iter().any(|a| a == "s3vectors") {
        let index: Arc<dyn ports::SearchIndex> =
            Arc::new(continuity_tests::aws::PerTenantS3Vectors::start(embedder.clone()).await);
        Some(index)
    } else {
        None
    };
    continuity_tests::recall::recall_with_index(embedder, &corpus, index).await;
}

/// A real set read from the folder `var` names (`benches/recall_real.sh` fetches it
/// there), with what `read` left out and why.
fn real_set(
    name: &str,
    var: &str,
    read: fn(&std::path::Path) -> (continuity_tests::recall::Corpus, usize),
    skipped_because: &str,
) -> continuity_tests::recall::Corpus {
    let dir =
        std::env::var_os(var).unwrap_or_else(|| panic!("{var} is not set: run benches/recall_real.sh, which fetches {name}"));
    let (corpus, skipped) = read(std::path::Path::new(&dir));
    println!("{name}: {} turns, {} questions asked ({skipped} {skipped_because})", corpus.turns.len(), corpus.questions.len());
    corpus
}
