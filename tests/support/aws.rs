//! AWS-backend fixtures on the local stand-ins `tests/run.sh` starts (moto, Redis).

use std::sync::{Arc, OnceLock};

use ports::{Backend, SystemClock};
use store_aws::settings::{dynamo_client, kms_client, s3_client, sqs_client};
use store_aws::{AwsSettings, DynamoItems, RedisSettings, S3Blobs, SqsQueue, aws_config_for};

pub const REGION: &str = "eu-west-1";
pub const TABLE: &str = "continuity-it";
pub const FORTRESS_TABLE: &str = "continuity-it-fortress";
pub const BUCKET: &str = "continuity-it";

/// A variable `tests/run.sh` exports; missing means the runner is broken, so fail.
pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run tests/run.sh, or start moto and Redis and export the CONTINUITY_TEST_* variables")
    })
}

static OWN_MOTO: OnceLock<String> = OnceLock::new();

/// The moto this test process talks to: the one `tests/run.sh` started for every test,
/// or this process's own after [`own_moto`].
pub fn moto_url() -> String {
    OWN_MOTO.get().cloned().unwrap_or_else(|| env("CONTINUITY_TEST_MOTO_URL"))
}

/// Gives this test process a moto of its own, started now and stopped when the process
/// ends (`tests/moto_server.py --exit-with-parent`): for a test that makes thousands of
/// calls, so they neither queue behind the other tests' calls on the shared moto (one
/// Python process: one core at most) nor slow those down. Call it first, before any
/// fixture of this module; nextest runs each test in a process of its own.
///
/// # Panics
/// When the server does not start within a minute (its log is named).
pub fn own_moto() {
    OWN_MOTO.get_or_init(|| {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap();
        let log_path = std::env::temp_dir().join(format!("own-moto-{port}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        // Never waited for: it outlives every fixture and stops itself once this process
        // has ended (`--exit-with-parent`).
        #[allow(clippy::zombie_processes)]
        let mut child = std::process::Command::new(env("CONTINUITY_TEST_MOTO_PYTHON"))
            .arg(crate::workspace_root().join("tests").join("moto_server.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .arg("--exit-with-parent")
            // Its Step Functions call back into this server, not the shared one.
            .env("MOTO_PORT", port.to_string())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting moto: {e}"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let exited = child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && std::time::Instant::now() < deadline,
                "moto did not start ({exited:?}); see {}",
                log_path.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        format!("http://127.0.0.1:{port}")
    });
}

/// One KMS signing key for every backend of this test process.
pub async fn signing_key() -> String {
    static KEY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    KEY.get_or_init(|| async {
        let sdk = aws_config_for(Some(&moto_url()), REGION).await;
        store_aws::KmsSigner::create_key(&kms_client(&sdk), "continuity tests").await.unwrap_or_else(|e| panic!("kms key: {e}"))
    })
    .await
    .clone()
}

/// A new symmetric KMS key (another vault key than [`vault_key`]).
pub async fn new_vault_key(label: &str) -> String {
    let sdk = aws_config_for(Some(&moto_url()), REGION).await;
    store_aws::kms::KmsKeyWrapper::create_key(&kms_client(&sdk), label).await.unwrap_or_else(|e| panic!("kms key: {e}"))
}

/// One symmetric KMS key wrapping the vault's data keys, for this test process.
pub async fn vault_key() -> String {
    static KEY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    KEY.get_or_init(|| async {
        let sdk = aws_config_for(Some(&moto_url()), REGION).await;
        store_aws::kms::KmsKeyWrapper::create_key(&kms_client(&sdk), "continuity vault tests")
            .await
            .unwrap_or_else(|e| panic!("kms key: {e}"))
    })
    .await
    .clone()
}

/// A whole AWS backend (table, fortress table, a fresh queue + DLQ, bucket, Redis).
pub async fn backend() -> Backend {
    backend_with_vault_key(vault_key().await).await
}

/// [`backend`] whose record store is a table of its own: for tests that write a lot, so
/// they do not slow every other test's queries on the shared table (moto answers a
/// DynamoDB query by scanning the whole table).
pub async fn backend_in_own_table(label: &str) -> Backend {
    let (table, _) = fresh_table(label).await;
    let records = sealed_records(&table, &vault_key().await).await;
    Backend { records, fortress: None, fortress_writer: None, ..backend().await }
}

/// [`backend`] whose vault wraps data keys with the KMS key `vault_key`.
pub async fn backend_with_vault_key(vault_key: String) -> Backend {
    backend_with(vault_key, store_aws::SearchSettings::default()).await
}

/// The vector bucket the S3 Vectors stand-in's tests use.
pub const VECTOR_BUCKET: &str = "continuity-it-vectors";

/// [`backend_in_own_table`] with the `small` profile's search index, as the functions
/// wire it from their environment: a keyword table of its own on moto, and vectors in
/// the S3 Vectors stand-in (`crate::s3vectors`, returned beside it). The embedder is
/// the stack's `hashing` one, or `embedder` (a local model, for recall measurements).
pub async fn backend_with_s3vectors(
    label: &str,
    embedder: Option<Arc<dyn ports::Embedder>>,
) -> (Backend, Arc<crate::s3vectors::S3Vectors>) {
    let (standin, url) = crate::s3vectors::S3Vectors::start().await;
    let (keywords, _) = fresh_table(&format!("{label}-kw")).await;
    let search = store_aws::SearchSettings {
        vector_bucket: Some(VECTOR_BUCKET.into()),
        keyword_table: Some(keywords.clone()),
        s3vectors_endpoint: Some(url.clone()),
        ..store_aws::SearchSettings::default()
    };
    let (table, _) = fresh_table(label).await;
    let records = sealed_records(&table, &vault_key().await).await;
    let b = backend_with(vault_key().await, search).await;
    assert_eq!(b.search.name(), "s3vectors", "the vector bucket setting selects the S3 Vectors index");
    let b = match embedder {
        None => b,
        Some(e) => Backend { search: s3vectors_index(&keywords, &url, e.as_ref()).await, embedder: e, ..b },
    };
    (Backend { records, fortress: None, fortress_writer: None, ..b }, standin)
}

/// The `small` profile's index over the keyword table `table` (on moto) and the S3
/// Vectors stand-in at `url`, for vectors of `embedder`.
pub async fn s3vectors_index(table: &str, url: &str, embedder: &dyn ports::Embedder) -> Arc<dyn ports::SearchIndex> {
    let sdk = aws_config_for(Some(&moto_url()), REGION).await;
    Arc::new(store_aws::S3VectorsIndex::new(
        store_aws::s3vectors::Keywords::new(dynamo_client(&sdk), table),
        store_aws::s3vectors::VectorStore::new(
            store_aws::SignedHttp::new(&sdk, url, "s3vectors").unwrap(),
            VECTOR_BUCKET,
            embedder.dim(),
        ),
        embedder.name(),
    ))
}

/// [`backend`] with `vault_key` and these search settings.
pub async fn backend_with(vault_key: String, search: store_aws::SearchSettings) -> Backend {
    let moto = moto_url();
    let sdk = aws_config_for(Some(&moto), REGION).await;
    for t in [TABLE, FORTRESS_TABLE] {
        DynamoItems::new(dynamo_client(&sdk), t).create_table_if_missing().await.unwrap_or_else(|e| panic!("table {t}: {e}"));
    }
    S3Blobs::new(s3_client(&sdk), BUCKET).create_bucket_if_missing().await.unwrap_or_else(|e| panic!("bucket: {e}"));
    let name = contract::fresh_tenant("itq");
    let q = SqsQueue::create_with_dlq(sqs_client(&sdk), name.as_str(), 5).await.unwrap_or_else(|e| panic!("queue: {e}"));
    let settings = AwsSettings {
        region: REGION.into(),
        endpoint_url: Some(moto),
        table: TABLE.into(),
        fortress_table: Some(FORTRESS_TABLE.into()),
        queue_url: q.queue_url().into(),
        dead_letter_queue_url: q.dead_letter_queue_url().into(),
        bucket: BUCKET.into(),
        redis: RedisSettings::single(env("CONTINUITY_TEST_REDIS_URL")),
        jwt_kms_keys: vec![signing_key().await],
        vault_kms_key: Some(vault_key),
        search,
        triage_state_machine: None,
        mail_from: None,
    };
    // The functions' SDK configuration, so the Lambdas' own is what runs against moto.
    store_aws::backend(&settings, &settings.function_sdk_config(), Arc::new(SystemClock))
        .unwrap_or_else(|e| panic!("backend: {e}"))
}

/// A record store over a table of its own (for checks that must not see, or touch,
/// what concurrent tests keep in the shared table).
pub async fn fresh_records(label: &str) -> ports::Records {
    fresh_table(label).await.1
}

/// [`fresh_records`] and the name of its table.
pub async fn fresh_table(label: &str) -> (String, ports::Records) {
    let sdk = aws_config_for(Some(&moto_url()), REGION).await;
    let table = format!("continuity-{label}-{}", contract::fresh_tenant("t"));
    let items = DynamoItems::new(dynamo_client(&sdk), &table);
    items.create_table_if_missing().await.unwrap_or_else(|e| panic!("table {table}: {e}"));
    (table, ports::Records::new(Arc::new(items)))
}

/// The record store over `table` (made by [`fresh_table`]), its entities sealed by the
/// vault with the KMS key `vault_key`.
pub async fn sealed_records(table: &str, vault_key: &str) -> ports::Records {
    let sdk = aws_config_for(Some(&moto_url()), REGION).await;
    let wrapper = store_aws::kms::KmsKeyWrapper::new(kms_client(&sdk), vault_key.to_owned());
    ports::Records::new(Arc::new(DynamoItems::new(dynamo_client(&sdk), table)))
        .with_vault(Arc::new(ports::vault::Vault::new(Arc::new(wrapper))))
}

/// [`backend`] over a main table and a fortress table of their own (both sealed), the
/// main one mirroring promoted tenants' writes into the fortress as the deployed
/// functions do: for promotion tests, whose scans read whole tables. Timed by `clock`.
pub async fn backend_with_own_fortress(label: &str, clock: Arc<dyn ports::Clock>) -> Backend {
    let sdk = aws_config_for(Some(&moto_url()), REGION).await;
    let vault_key = vault_key().await;
    let vault =
        || Arc::new(ports::vault::Vault::new(Arc::new(store_aws::kms::KmsKeyWrapper::new(kms_client(&sdk), vault_key.clone()))));
    let (main, _) = fresh_table(&format!("{label}-main")).await;
    let (fortress, _) = fresh_table(&format!("{label}-fortress")).await;
    let main: Arc<dyn ports::ItemStore> = Arc::new(DynamoItems::new(dynamo_client(&sdk), &main));
    let fortress: Arc<dyn ports::ItemStore> = Arc::new(DynamoItems::new(dynamo_client(&sdk), &fortress));
    let records =
        ports::Records::new(Arc::new(ports::fortress::Mirrored::new(main, fortress.clone(), clock.clone()))).with_vault(vault());
    Backend {
        records,
        fortress: Some(ports::Records::new(Arc::new(ports::fortress::ReadOnly::new(fortress.clone()))).with_vault(vault())),
        fortress_writer: Some(fortress),
        clock,
        ..backend().await
    }
}

/// Makes `domain` a verified SES identity on moto (`CreateEmailIdentity`): what a
/// deployment does once for its `MailFrom` address.
pub async fn verify_mail_domain(domain: &str) {
    let moto = moto_url();
    let sdk = aws_config_for(Some(&moto), REGION).await;
    let http = store_aws::signed::SignedHttp::new(&sdk, &moto, "ses").unwrap();
    let body = serde_json::to_vec(&serde_json::json!({"EmailIdentity": domain})).unwrap();
    http.send("POST", "/v2/email/identities", "application/json", body, &[]).await.unwrap_or_else(|e| panic!("identity: {e}"));
}

/// What moto's SES sent so far (its record of sent messages, `/moto-api/data.json`,
/// limited to SES by `tests/moto_server.py`).
pub async fn sent_mail() -> Vec<contract::mail::Arrived> {
    let url = format!("{}/moto-api/data.json?service=ses", moto_url());
    // The client every binary uses (no workspace member's code enables a crypto provider of
    // reqwest's own, or the Lambdas, built with the workspace's features, would link it).
    let http = reqwest::Client::builder().use_preconfigured_tls(tls::client_config()).build().unwrap();
    let data: serde_json::Value = http.get(&url).send().await.unwrap().json().await.unwrap();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    data.pointer("/ses/Message")
        .and_then(serde_json::Value::as_array)
        .map(|all| {
            all.iter()
                .map(|m| contract::mail::Arrived {
                    from: text(&m["source"]),
                    to: m
                        .pointer("/destinations/ToAddresses")
                        .and_then(|t| t.as_array())
                        .map_or_else(Vec::new, |t| t.iter().map(text).collect()),
                    subject: text(&m["subject"]),
                    text: text(&m["body"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An SES mailer on moto sending as `from`.
pub async fn ses_mailer(from: &str) -> Arc<dyn ports::mail::Mailer> {
    let moto = moto_url();
    let sdk = aws_config_for(Some(&moto), REGION).await;
    Arc::new(store_aws::SesMailer::new(store_aws::signed::SignedHttp::new(&sdk, &moto, "ses").unwrap(), from))
}

/// The mail port over SES (moto): a sender in a freshly verified domain; refused for
/// good: a sender whose domain was never verified.
pub async fn mail() -> contract::mail::MailFixture {
    let n: u64 = rand::random();
    let domain = format!("n{n:016x}.continuity.example");
    verify_mail_domain(&domain).await;
    let from = format!("notify@{domain}");
    let refused = ports::mail::Mail::new(&format!("ops-{n:016x}@example.com"), "x", "y").unwrap();
    contract::mail::MailFixture {
        mailer: ses_mailer(&from).await,
        from,
        inbox: Arc::new(|| Box::pin(sent_mail())),
        refused: (ses_mailer(&format!("notify@unverified-{n:016x}.example")).await, refused),
    }
}

/// The `small` profile's index with a keyword table of its own per tenant, for the recall
/// benchmark: moto answers a DynamoDB query by scanning the whole table, so REALTALK's
/// 130 000 postings in one table make each posting query take seconds there (on
/// DynamoDB a query reads its partition only). Each tenant's items are its own either
/// way; only the table they sit in differs. Vectors share one S3 Vectors stand-in.
pub struct PerTenantS3Vectors {
    url: String,
    embedder: Arc<dyn ports::Embedder>,
    indexes: tokio::sync::Mutex<std::collections::HashMap<String, Arc<dyn ports::SearchIndex>>>,
}

impl PerTenantS3Vectors {
    pub async fn start(embedder: Arc<dyn ports::Embedder>) -> Self {
        let (_standin, url) = crate::s3vectors::S3Vectors::start().await;
        Self { url, embedder, indexes: tokio::sync::Mutex::default() }
    }

    async fn of(&self, tenant: &domain::TenantId) -> Arc<dyn ports::SearchIndex> {
        let mut map = self.indexes.lock().await;
        if let Some(i) = map.get(tenant.as_str()) {
            return i.clone();
        }
        let (table, _) = fresh_table("recall").await;
        let index = s3vectors_index(&table, &self.url, self.embedder.as_ref()).await;
        map.insert(tenant.as_str().to_owned(), index.clone());
        index
    }
}

#[async_trait::async_trait]
impl ports::SearchIndex for PerTenantS3Vectors {
    fn name(&self) -> &'static str {
        "s3vectors"
    }
    async fn upsert(&self, docs: &[ports::search::SearchDoc]) -> domain::Result<()> {
        let mut by: std::collections::BTreeMap<String, Vec<ports::search::SearchDoc>> = std::collections::BTreeMap::new();
        for d in docs {
            by.entry(d.tenant.as_str().to_owned()).or_default().push(d.clone());
        }
        for group in by.into_values() {
            self.of(&group[0].tenant).await.upsert(&group).await?;
        }
        Ok(())
    }
    async fn remove(&self, t: &domain::TenantId, s: &domain::memory::MemoryScope, d: &domain::Id) -> domain::Result<()> {
        self.of(t).await.remove(t, s, d).await
    }
    async fn search(&self, q: &ports::search::SearchQuery) -> domain::Result<Vec<ports::search::SearchHit>> {
        self.of(&q.tenant).await.search(q).await
    }
    async fn doc_ids(
        &self,
        t: &domain::TenantId,
        s: &domain::memory::MemoryScope,
        max: usize,
    ) -> domain::Result<Vec<domain::Id>> {
        self.of(t).await.doc_ids(t, s, max).await
    }
    fn visible_after(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    async fn chunks(
        &self,
        t: &domain::TenantId,
        s: &domain::memory::MemoryScope,
        d: &domain::Id,
    ) -> domain::Result<Vec<ports::search::SearchDoc>> {
        self.of(t).await.chunks(t, s, d).await
    }
    async fn remove_older(
        &self,
        t: &domain::TenantId,
        s: &domain::memory::MemoryScope,
        d: &domain::Id,
        than: domain::Timestamp,
    ) -> domain::Result<usize> {
        self.of(t).await.remove_older(t, s, d, than).await
    }
    async fn warm_up(&self) -> domain::Result<usize> {
        Ok(0)
    }
}
