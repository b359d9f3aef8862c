//! The operator's journey on a deployed stack, against moto (which runs CloudFormation,
//! DynamoDB, SQS, S3, KMS and Step Functions): a stack whose outputs name real moto
//! resources; `continuity --backend aws --stack NAME bootstrap` makes the operator's
//! tenant and an owner key that the stack's own services then accept; a second
//! bootstrap is refused; the admin commands (tenant, key, user) run with `--stack` from
//! outside the VPC (no cache, no search); `doctor` checks each dependency and reports the
//! API it cannot reach, a dead-lettered message and an alarm topic nobody subscribed to,
//! with what to do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};

use continuity_tests::aws;

const BIN: &str = env!("CARGO_BIN_EXE_continuity");

fn run(stack: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(["--backend", "aws", "--stack", stack])
        .args(args)
        .env("RUST_LOG", "warn")
        .env("AWS_REGION", aws::REGION)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("CONTINUITY_AWS_ENDPOINT_URL", aws::env("CONTINUITY_TEST_MOTO_URL"))
        // Nothing of a Lambda's environment: the stack's outputs say it all.
        .env_remove("CONTINUITY_TABLE")
        .env_remove("CONTINUITY_REDIS_URLS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_admin_commands_and_doctor_on_a_stack() {
    use store_aws::settings::{kms_client, s3_client, sqs_client};
    let moto = aws::env("CONTINUITY_TEST_MOTO_URL");
    let sdk = store_aws::aws_config_for(Some(&moto), aws::REGION).await;
    // The stack's resources, as sam deploy would have made them.
    let (table, _) = aws::fresh_table("stack").await;
    store_aws::S3Blobs::new(s3_client(&sdk), aws::BUCKET).create_bucket_if_missing().await.unwrap();
    let name = contract::fresh_tenant("stack");
    let q = store_aws::SqsQueue::create_with_dlq(sqs_client(&sdk), name.as_str(), 5).await.unwrap();
    let vault = aws::vault_key().await;
    let signing = store_aws::KmsSigner::create_key(&kms_client(&sdk), "stack signing").await.unwrap();
    let stack = format!("cty-{}", name.as_str().replace('_', "-"));
    let sns = aws_sdk_sns::Client::new(&sdk);
    let topic = sns.create_topic().name(format!("{stack}-alarms")).send().await.unwrap().topic_arn().unwrap().to_owned();
    // The small profile's search stores (moto has S3 Vectors' bucket calls).
    let (keywords, _) = aws::fresh_table("stack-kw").await;
    let vectors = format!("{stack}-vectors");
    let s3v = store_aws::SignedHttp::new(&sdk, &moto, "s3vectors").unwrap();
    let made = serde_json::json!({"vectorBucketName": vectors}).to_string().into_bytes();
    s3v.send("POST", "/CreateVectorBucket", "application/json", made, &[]).await.unwrap();
    let outputs: BTreeMap<String, String> = [
        ("TableName", table.clone()),
        ("QueueUrl", q.queue_url().to_owned()),
        ("DeadLetterQueueUrl", q.dead_letter_queue_url().to_owned()),
        ("BucketName", aws::BUCKET.to_owned()),
        ("VaultKeyId", vault.clone()),
        ("TokenSigningKeyId", signing.clone()),
        ("Embedder", "hashing".to_owned()),
        ("AlarmTopicArn", topic.clone()),
        ("VectorBucketName", vectors.clone()),
        ("SearchTableName", keywords.clone()),
        // Nothing listens here: doctor must say so.
        ("ApiUrl", "http://127.0.0.1:9/prod".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    store_aws::stack::create_for_test(&sdk, &stack, &outputs).await.unwrap();

    // 1. Bootstrap: the key alone on stdout, what to do next on stderr.
    let out = run(&stack, &["bootstrap"], None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let key = stdout.trim().to_owned();
    assert!(key.starts_with("ctn_operator."), "{stdout}");
    assert!(stderr.contains("http://127.0.0.1:9/prod/mcp") && stderr.contains("/v1/admin/tenants"), "{stderr}");
    // The stack's own services (as its functions build them) accept the key: admin and
    // the operator's powers.
    let records = aws::sealed_records(&table, &vault).await;
    let backend = ports::Backend { records, fortress: None, fortress_writer: None, ..aws::backend().await };
    let s = services::Services::new(backend);
    let caller = s.auth.authenticate_header(Some(&format!("Bearer {key}")), "https://mcp.example.com").await.unwrap();
    assert!(caller.scopes.contains(domain::principal::Scope::Admin));
    assert!(s.admin.for_caller(&caller).await.unwrap().is_operator());
    let ledger = ports::records::AuditLog::list_audit(&s.backend.records, &caller.tenant, &domain::PageRequest::first(50))
        .await
        .unwrap()
        .items;
    assert!(ledger.iter().any(|r| r.action == "admin:tenant.create" && r.actor.starts_with("cli:")), "audited with who ran it");

    // 2. A second bootstrap is refused and changes nothing.
    let out = run(&stack, &["bootstrap"], None);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success() && stdout.trim().is_empty(), "{stdout}");
    assert!(stderr.contains("bootstrapped already") && stderr.contains("key create"), "{stderr}");
    assert_eq!(s.admin.list_keys(&caller.tenant).await.unwrap().len(), 1);

    // 3. The admin commands, from outside the VPC.
    let out =
        run(&stack, &["tenant", "create", "globex", "--plan", "pro", "--department", "finance", "--industry", "retail"], None);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = run(&stack, &["key", "create", "--tenant", "globex", "--scopes", "mcp:tools tenant:read"], None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let reader = stdout.trim().to_owned();
    let c = s.auth.authenticate_header(Some(&format!("Bearer {reader}")), "https://mcp.example.com").await.unwrap();
    assert_eq!(c.tenant.as_str(), "globex");
    let out = run(
        &stack,
        &["user", "add", "--tenant", "globex", "--email", "ada@globex.example", "--role", "approver"],
        Some("a long enough password\n"),
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let out = run(&stack, &["user", "set", "--tenant", "globex", "--email", "ada@globex.example", "--disabled", "true"], None);
    assert!(out.status.success(), "{:?}", text(&out));
    let globex = domain::TenantId::new("globex").unwrap();
    let login = ports::oauth::OAuthStore::get_login(&s.backend.records, &globex, "ada@globex.example").await.unwrap().unwrap();
    assert!(login.disabled);
    let (stdout, _) = text(&run(&stack, &["tenant", "list"], None));
    assert!(stdout.contains("globex") && stdout.contains("operator"), "{stdout}");
    let out = run(&stack, &["entity", "put", "--tenant", "globex", "--type", "account", "--id", "a-1"], None);
    let (_, stderr) = text(&out);
    assert!(!out.status.success() && stderr.contains("/v1/admin/entities"), "entity writes go through the admin API: {stderr}");

    // 4. Doctor: every reachable dependency checked; a dead letter and the unreachable
    // API reported with what to do; a non-zero exit.
    let dlq = store_aws::SqsQueue::new(sqs_client(&sdk), q.dead_letter_queue_url(), q.dead_letter_queue_url());
    ports::Queue::send(
        &dlq,
        &ports::QueueMessage {
            tenant: globex.clone(),
            kind: "ingest.batch".into(),
            idempotency_key: "k1".into(),
            body: b"{}".to_vec(),
        },
    )
    .await
    .unwrap();
    let out = run(&stack, &["doctor"], None);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    // The test's table was made without deletion protection: a warning saying how to fix it.
    assert!(stdout.contains(&format!("WARNING table {table}: deletion protection is off")), "{stdout}");
    assert!(stdout.contains(&format!("ok      bucket {}", aws::BUCKET)), "{stdout}");
    assert!(stdout.contains(&format!("ok      KMS key {vault}: enabled, the Spine vault")), "{stdout}");
    assert!(stdout.contains(&format!("ok      KMS key {signing}: enabled, access-token signing")), "{stdout}");
    assert!(
        stdout.contains("WARNING") && stdout.contains("1 dead-lettered message(s)") && stdout.contains("redrive"),
        "{stdout}"
    );
    assert!(stdout.contains("FAILED  API http://127.0.0.1:9/prod/healthz: unreachable"), "{stdout}");
    assert!(stdout.contains("embedder: hashing (no Bedrock)"), "{stdout}");
    assert!(
        stdout.contains(&format!("ok      search: vector bucket {vectors}, keyword table {keywords}: both reachable")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "WARNING alarm topic {topic}: no subscription: alarms reach nobody; subscribe, e.g. aws sns subscribe"
        )),
        "{stdout}"
    );
    assert!(stderr.contains("check(s) failed"), "{stderr}");
    // Subscribed (moto confirms at once): the topic reaches someone.
    sns.subscribe().topic_arn(&topic).protocol("email").endpoint("oncall@example.com").send().await.unwrap();
    let (stdout, _) = text(&run(&stack, &["doctor"], None));
    assert!(stdout.contains(&format!("ok      alarm topic {topic}: 1 confirmed subscription(s)")), "{stdout}");
    // An unknown stack: said plainly.
    let out = run("no-such-stack", &["doctor"], None);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stdout.contains("FAILED  stack no-such-stack") && stderr.contains("sam deploy"), "{stdout}{stderr}");
}
