//! Embedded-backend fixtures: each call opens a fresh home in a temp folder that lives
//! as long as the test process (so files survive the test body).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use contract::queue::{MAX_RECEIVES, QueueFixture};
use contract::signer::SignerFixture;
use ports::items::ItemStore;
use ports::ratelimit::RateLimiter;
use ports::{BlobStore, Cache, Queue, Records, SystemClock};
use store_embedded::{Db, FileBlobs, FileSigner, MemoryCache, MemoryLimiter, SqliteItems, SqliteQueue};

fn root() -> &'static PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| tempfile::tempdir().map(tempfile::TempDir::keep).unwrap_or_else(|e| panic!("tempdir: {e}")))
}

fn fresh_db() -> Db {
    let n: u64 = rand::random();
    // Batching, as `serve` opens its database.
    Db::open(&root().join(format!("db-{n:016x}.sqlite"))).and_then(Db::batching).unwrap_or_else(|e| panic!("open db: {e}"))
}

/// One database shared by every items/records check, as in production.
fn shared_db() -> Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(fresh_db).clone()
}

pub async fn items() -> Arc<dyn ItemStore> {
    Arc::new(SqliteItems::new(shared_db()))
}

pub async fn records() -> Records {
    Records::new(items().await)
}

pub async fn cache() -> Arc<dyn Cache> {
    Arc::new(MemoryCache::new(10_000))
}

pub async fn blobs() -> Arc<dyn BlobStore> {
    Arc::new(FileBlobs::new(root().join("blobs")).unwrap_or_else(|e| panic!("blobs: {e}")))
}

pub async fn queue() -> QueueFixture {
    let db = shared_db();
    let n: u64 = rand::random();
    let queue: Arc<dyn Queue> = Arc::new(SqliteQueue::new(db, &format!("q{n:x}"), MAX_RECEIVES, Arc::new(SystemClock)));
    QueueFixture { queue, records: records().await }
}

pub async fn signer() -> SignerFixture {
    let n: u64 = rand::random();
    let dir = root().join(format!("keys-{n:016x}"));
    let before = Arc::new(FileSigner::open(&dir, domain::Timestamp(1_000)).unwrap_or_else(|e| panic!("keys: {e}")));
    let after = FileSigner::open(&dir, domain::Timestamp(2_000)).unwrap_or_else(|e| panic!("keys: {e}"));
    after.rotate(domain::Timestamp(3_000)).unwrap_or_else(|e| panic!("rotate: {e}"));
    SignerFixture { before, after: Arc::new(after) }
}

pub async fn limiter() -> Arc<dyn RateLimiter> {
    Arc::new(MemoryLimiter::new())
}

/// The vault's key store (a master key file in a fresh folder) over the shared database.
pub async fn vault() -> contract::vault::VaultFixture {
    let n: u64 = rand::random();
    let wrapper =
        store_embedded::FileKeyWrapper::open(&root().join(format!("keys-{n:016x}"))).unwrap_or_else(|e| panic!("vault key: {e}"));
    contract::vault::VaultFixture { wrapper: Arc::new(wrapper), items: items().await }
}

/// Services on a fresh embedded home in `dir` with the sample events' tenant `demo`
/// (enterprise, customer success × SaaS).
pub async fn demo_services(dir: &std::path::Path) -> services::Services {
    let s = services::Services::new(store_embedded::open_backend(dir, Arc::new(SystemClock)).unwrap());
    let demo = domain::TenantId::new("demo").unwrap();
    s.admin
        .create_tenant(
            demo,
            domain::tenant::PlanTier::Enterprise,
            domain::tenant::Department::CustomerSuccess,
            domain::tenant::Industry::Saas,
        )
        .await
        .unwrap();
    s
}

/// The mail port over SMTP with STARTTLS and a password, to an SMTP server this test
/// runs (trusting its CA); it refuses recipients named `reject…`.
pub async fn mail() -> contract::mail::MailFixture {
    let server = Arc::new(crate::smtp::SmtpServer::start().await);
    let from = "notify@continuity.example";
    let mailer: Arc<dyn ports::mail::Mailer> = Arc::new(
        store_embedded::SmtpMailer::new(&server.url("continuity", "s3cret"), from, Some(server.ca_pem.as_bytes())).unwrap(),
    );
    let s = server.clone();
    let inbox: contract::mail::Inbox = Arc::new(move || {
        let s = s.clone();
        Box::pin(async move {
            let arrived = s.arrived();
            // Every message went over TLS, signed in.
            for r in s.take() {
                assert!(r.encrypted, "sent before STARTTLS");
                assert_eq!((r.user.as_deref(), r.password.as_deref()), (Some("continuity"), Some("s3cret")));
            }
            arrived
        })
    });
    let refused = ports::mail::Mail::new("reject-me@example.com", "x", "y").unwrap();
    contract::mail::MailFixture { mailer: mailer.clone(), from: from.into(), inbox, refused: (mailer, refused) }
}
