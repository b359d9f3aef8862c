//! Batched durability: one sync to stable storage for all the writes of one use case.
//!
//! A write port returns once its write is durable. On a backend whose durability costs
//! a disk flush per commit (a local database's fsync of its write-ahead log: 0.2–0.6 ms
//! on the 2-core test machine, against 35 µs for the commit itself), a use case that writes
//! three times — a conversation turn, its words in the index, its audit record — pays
//! three flushes. Inside [`batched`], such a backend may leave its commits to the next
//! flush instead: they are committed (visible to every reader, kept by a process crash)
//! but not yet forced to the disk. The use case then makes them durable together,
//! with one [`crate::items::ItemStore::sync`] — or with any durable write made after
//! them, since a flush of the log covers everything before it — before it answers.
//!
//! The capability executor runs each writing capability in a scope and syncs before
//! the caller is answered (`services::capabilities`). Work a scope spawns onto other
//! tasks is outside it and syncs on its own. Backends whose every write is durable by
//! itself (a managed database's) ignore the scope.

use std::future::Future;

tokio::task_local! {
    static BATCHED: ();
}

/// Runs `f` with the writes it makes on this task batched: durable at the next
/// [`crate::items::ItemStore::sync`] (or later durable write), not each on its own.
/// The caller must sync before it reports success to anyone.
pub async fn batched<F: Future>(f: F) -> F::Output {
    BATCHED.scope((), f).await
}

/// Whether the current task is inside [`batched`].
#[must_use]
pub fn is_batched() -> bool {
    BATCHED.try_with(|()| ()).is_ok()
}
