//! The deployed topology, offline, as one journey (SPEC §2.2, §3, §9, §10).
//!
//! Everything the stack's wiring decides is read from `infra/template.yaml`: the routes
//! (path, method → function, authorizer or none) and the gateway responses, the queue →
//! consumer mappings, the schedules, the queues' settings, each function's binary and
//! environment, and the triage state machine with its substitutions. The pieces:
//!
//! - a moto server of this test's own (DynamoDB, SQS, S3, KMS, IAM, CloudFormation and
//!   Step Functions running `statemachines/triage.asl.json`), whose Step Functions reach
//!   Lambda through a proxy that runs our real triage handler on each `Invoke` (moto
//!   without Docker runs no function code) and forwards everything else to moto;
//! - every function built as its binary's `main` builds it, from the environment the
//!   template gives it ([`lambda`]), on moto, the local TLS Redis cluster (for ElastiCache)
//!   and an OpenSearch request-shape stand-in ([`opensearch`]; no local OpenSearch);
//! - the emulated API Gateway ([`apigw`]) on a local port, as a custom domain mapped to
//!   the stage, running the authorizer, honouring its Allow/Deny, cache and context, and
//!   the template's gateway responses;
//! - SQS event-source pollers with moto's receive/delete/visibility semantics.
//!
//! It runs once per deployment profile (the `Profile` parameter): `production` with the
//! OpenSearch stand-in, and `small` with the S3 Vectors stand-in
//! (`continuity_tests::s3vectors`) and the keyword table on moto.
//!
//! The journey: `continuity --backend aws bootstrap --stack` (on moto's CloudFormation) →
//! tenant, users and an ingest key through the admin API → connector registered and a
//! HubSpot batch ingested → the pipeline consumer → the official MCP Python SDK signs a
//! person in (401 → discovery → dynamic registration → sign-in and consent → PKCE token)
//! and calls `spine.entity.search`, `kb.search`, `memory.propose` → the state machine
//! scores it and waits with a task token (the wait message through the approval-waits
//! consumer) → an approver signs in to the console and approves → `SendTaskSuccess` →
//! the Write task → `memory.search_org` finds it. Then each schedule fires once.
//!
//! What it cannot prove offline: IAM (moto does not enforce policies), VPC reachability,
//! real OpenSearch ranking, Bedrock, API Gateway's own limits (29 s, 10 MB) and
//! ElastiCache's authentication.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod apigw;
mod lambda;
mod opensearch;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sfn::types::{ExecutionStatus, HistoryEventType};
use continuity_tests::template::{ACCOUNT, REGION, Stack, Template};
use domain::TenantId;
use domain::proposal::ProposalState;
use ports::records::{EntityStore as _, ProposalStore as _, ReviewStore as _};
use serde_json::{Value, json};
use store_aws::{SignedHttp, aws_config_for};

use lambda::{Functions, MotoProxy, Physical};

const BIN: &str = env!("CARGO_BIN_EXE_continuity");
const PASSWORD: &str = "a long enough password 42";
const APPROVER_PASSWORD: &str = "another long password 43";

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run tests/run.sh"))
}

/// A moto of this test's own, whose Step Functions call `proxy_port` for Lambda and SQS.
///
/// The port is picked free, then released, then bound by moto: another test's server
/// can take it in between. So moto counts as started only once the port answers with
/// waitress's `Server: moto`; if moto exited (its bind failed) or someone else answers,
/// it is started again on another port.
fn start_moto(proxy_port: u16) -> (Killed, String) {
    for _ in 0..5 {
        let port = free_port();
        let script = &continuity_tests::workspace_root().join("tests/moto_server.py").display().to_string();
        let log = std::fs::File::create(std::env::temp_dir().join(format!("topology-moto-{port}.log"))).unwrap();
        let child = Command::new(env("CONTINUITY_TEST_MOTO_PYTHON"))
            .args([script, "-H", "127.0.0.1", "-p", &port.to_string()])
            .env("MOTO_PORT", proxy_port.to_string())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut child = Killed(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if child.0.try_wait().unwrap().is_some() {
                break; // it exited: most likely the port was taken
            }
            match answers_as_moto(port) {
                Some(true) => return (child, format!("http://127.0.0.1:{port}")),
                Some(false) => break, // someone else has the port
                None => {}
            }
            assert!(Instant::now() < deadline, "moto did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!("moto did not start on any of 5 ports")
}

/// Whether `port` answers HTTP as moto (waitress's `Server: moto`); `None` while
/// nothing answers there.
fn answers_as_moto(port: u16) -> Option<bool> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /moto-api/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = Vec::new();
    s.read_to_end(&mut head).ok()?;
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    Some(head.lines().any(|l| l.trim_end() == "server: moto"))
}

/// Sends one request to the emulated API; (status, headers, body as JSON or text).
async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut r = http.request(method, url);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let text = resp.text().await.unwrap();
    (status, headers, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A browser's cookie jar, reduced to what the console needs.
#[derive(Default)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn take(&mut self, headers: &reqwest::header::HeaderMap) {
        for c in headers.get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let (pair, attributes) = c.split_once(';').unwrap_or((c, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if attributes.contains("Max-Age=0") {
                self.0.remove(name.trim());
            } else {
                self.0.insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
    }

    fn header(&self) -> String {
        self.0.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }
}

fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} field in:\n{html}")) + marker.len();
    html[start..start + html[start..].find('"').unwrap()].to_owned()
}

/// A connection to each node of the local TLS cluster (ElastiCache's stand-in).
async fn cache_nodes(ca: &[u8]) -> Vec<redis::aio::MultiplexedConnection> {
    let mut out = Vec::new();
    for url in env("CONTINUITY_TEST_REDIS_CLUSTER_URLS").split(',') {
        let certs = redis::TlsCertificates { client_tls: None, root_cert: Some(ca.to_vec()) };
        let client = redis::Client::build_with_tls(url, certs).unwrap();
        out.push(client.get_multiplexed_async_connection().await.unwrap());
    }
    out
}

async fn until<F, Fut>(what: &str, seconds: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The stack's deployment profile (its `Profile` parameter): which search index the
/// functions get.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Profile {
    /// OpenSearch Serverless (its stand-in: [`opensearch`], eventually consistent).
    Production,
    /// S3 Vectors (the in-process stand-in) and a DynamoDB keyword table on moto.
    Small,
}

impl Profile {
    fn parameter(self) -> &'static str {
        match self {
            Self::Production => "production",
            Self::Small => "small",
        }
    }

    /// Each journey its own tenant: both run at once on the one Redis cluster.
    fn tenant(self) -> &'static str {
        match self {
            Self::Production => "globex",
            Self::Small => "initech",
        }
    }
}

/// The search service's stand-in, by profile.
enum SearchStandIn {
    OpenSearch(Arc<opensearch::Stand>),
    S3Vectors(Arc<continuity_tests::s3vectors::S3Vectors>),
}

#[test]
fn the_deployed_topology_end_to_end() {
    run(Profile::Production);
}

/// The same journey on the `small` profile: no collection; hybrid search on S3 Vectors
/// and the keyword table, strongly consistent, so each write is verified at once.
#[test]
fn the_small_profile_topology_end_to_end() {
    run(Profile::Small);
}

fn run(profile: Profile) {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap().block_on(journey(profile));
}

async fn journey(profile: Profile) {
    let tenant = profile.tenant();
    // ------------------------------------------------------------ the stack on moto
    let proxy_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_port = proxy_listener.local_addr().unwrap().port();
    let (moto_process, moto) = start_moto(proxy_port);
    let sdk = aws_config_for(Some(&moto), REGION).await;
    // moto runs state machines only when told to.
    let config = json!({"stepfunctions": {"execute_state_machine": true}, "lambda": {"use_docker": false}});
    let r = reqwest::Client::new().post(format!("{moto}/moto-api/config")).json(&config).send().await.unwrap();
    assert!(r.status().is_success(), "moto config: {}", r.status());
    let name = format!("cty-topo-{}", free_port());
    let (search_url, search) = match profile {
        Profile::Production => {
            let (url, stand) = opensearch::start().await;
            (url, SearchStandIn::OpenSearch(stand))
        }
        Profile::Small => {
            let (stand, url) = continuity_tests::s3vectors::S3Vectors::start().await;
            (url, SearchStandIn::S3Vectors(stand))
        }
    };
    let gateway_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", gateway_listener.local_addr().unwrap());
    drop(gateway_listener);
    let template = Template::load();
    // The stand-in shows writes after its refresh (0.8 s); the stack waits 1 s for it.
    let stack = Stack::new(&name, "0a1b2c3d")
        .with_parameter("PublicBaseUrl", base.clone())
        .with_parameter("Profile", profile.parameter())
        .with_parameter("Embedder", "hashing")
        .with_parameter("SearchVisibleSeconds", "1");
    let ev = template.evaluate(&stack).unwrap();

    let mut physical = Physical::new();
    let function_arn = |id: &str| format!("arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}-{id}");
    for id in ev.functions() {
        physical.insert(format!("<GetAtt:{id}.Arn>"), function_arn(&id));
        // AutoPublishAlias: live (the functions deployed gradually, the pinned task).
        physical.insert(format!("<Ref:{id}.Alias>"), format!("{}:live", function_arn(&id)));
        physical.insert(format!("<Ref:{id}>"), format!("{name}-{id}"));
    }
    // The queues, with the template's settings (dead-letter queues first).
    let sqs = store_aws::settings::sqs_client(&sdk);
    let mut queues = ev.resources_of_type("AWS::SQS::Queue");
    queues.sort_by_key(|q| ev.properties(q).unwrap().get("RedrivePolicy").is_some());
    for q in &queues {
        let props = ev.properties(q).unwrap();
        let mut create = sqs.create_queue().queue_name(format!("{name}-{q}"));
        for attribute in ["VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds"] {
            if let Some(v) = props.get(attribute) {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                create = create.attributes(aws_sdk_sqs::types::QueueAttributeName::from(attribute), v);
            }
        }
        if let Some(redrive) = props.get("RedrivePolicy") {
            let target = lambda::resolve(redrive["deadLetterTargetArn"].as_str().unwrap(), &physical, q);
            let policy = json!({"deadLetterTargetArn": target, "maxReceiveCount": redrive["maxReceiveCount"]});
            create = create.attributes(aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy, policy.to_string());
        }
        let url = create.send().await.unwrap().queue_url().unwrap().to_owned();
        physical.insert(format!("<Ref:{q}>"), url);
        physical.insert(format!("<GetAtt:{q}.Arn>"), format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}-{q}"));
        physical.insert(format!("<GetAtt:{q}.QueueName>"), format!("{name}-{q}"));
    }
    let table = format!("{name}-table");
    store_aws::DynamoItems::new(store_aws::settings::dynamo_client(&sdk), &table).create_table_if_missing().await.unwrap();
    physical.insert("<Ref:Table>".into(), table.clone());
    let fortress = format!("{name}-fortress");
    store_aws::DynamoItems::new(store_aws::settings::dynamo_client(&sdk), &fortress).create_table_if_missing().await.unwrap();
    physical.insert("<Ref:FortressTable>".into(), fortress);
    let bucket = format!("{name}-blobs");
    store_aws::S3Blobs::new(store_aws::settings::s3_client(&sdk), &bucket).create_bucket_if_missing().await.unwrap();
    physical.insert("<Ref:BlobBucket>".into(), bucket.clone());
    let kms = store_aws::settings::kms_client(&sdk);
    let vault = store_aws::kms::KmsKeyWrapper::create_key(&kms, "topology vault").await.unwrap();
    let signing = store_aws::KmsSigner::create_key(&kms, "topology signing").await.unwrap();
    physical.insert("<Ref:VaultKey>".into(), vault.clone());
    physical.insert("<Ref:TokenSigningKey>".into(), signing.clone());
    let mut extra = vec![("AWS_REGION", REGION.to_owned()), ("CONTINUITY_AWS_ENDPOINT_URL", moto.clone())];
    let keywords = store_aws::s3vectors::Keywords::new(store_aws::settings::dynamo_client(&sdk), &format!("{name}-search"));
    match profile {
        Profile::Production => {
            physical.insert("<GetAtt:SearchCollection.CollectionEndpoint>".into(), search_url.clone());
        }
        Profile::Small => {
            keywords.create_table_if_missing().await.unwrap();
            physical.insert("<Ref:SearchTable>".into(), format!("{name}-search"));
            // The vector bucket's name comes from the template (the stack id); only its
            // endpoint is the stand-in's.
            extra.push(("CONTINUITY_S3VECTORS_ENDPOINT", search_url.clone()));
        }
    }
    // ElastiCache Serverless is a TLS cluster: the local one, its first node as the endpoint.
    let seed = env("CONTINUITY_TEST_REDIS_CLUSTER_URLS").split(',').next().unwrap().trim_start_matches("rediss://").to_owned();
    let (host, port) = seed.split_once(':').unwrap();
    physical.insert("<GetAtt:Cache.Endpoint.Address>".into(), host.to_owned());
    physical.insert("<GetAtt:Cache.Endpoint.Port>".into(), port.to_owned());
    // ElastiCache IAM authentication: the functions sign in as the template's cache user.
    let cache_user = format!("cty-topology-{proxy_port}");
    physical.insert("<Ref:CacheUser>".into(), cache_user.clone());
    physical.insert("<Ref:Cache>".into(), format!("continuity-{proxy_port}"));

    // The triage state machine: the template's definition file and substitutions.
    let machine_props = ev.properties("TriageStateMachine").unwrap();
    let definition_file =
        continuity_tests::template::path().parent().unwrap().join(machine_props["DefinitionUri"].as_str().unwrap());
    let mut definition = std::fs::read_to_string(&definition_file).unwrap();
    for (k, v) in machine_props["DefinitionSubstitutions"].as_object().unwrap() {
        definition = definition.replace(&format!("${{{k}}}"), &lambda::resolve(v.as_str().unwrap(), &physical, k));
    }
    assert!(!definition.contains("${"), "every substitution filled");
    let iam = SignedHttp::new(&sdk, &moto, "iam").unwrap().with_timeout(Duration::from_secs(120)).unwrap();
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}]});
    let form: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("Action", "CreateRole")
        .append_pair("Version", "2010-05-08")
        .append_pair("RoleName", &format!("{name}-triage"))
        .append_pair("AssumeRolePolicyDocument", &trust.to_string())
        .finish();
    assert_eq!(iam.send("POST", "/", "application/x-www-form-urlencoded", form.into_bytes(), &[]).await.unwrap().0, 200);
    let sfn = store_aws::settings::sfn_client(&sdk);
    let machine = sfn
        .create_state_machine()
        .name(format!("{name}-triage"))
        .definition(definition)
        .role_arn(format!("arn:aws:iam::{ACCOUNT}:role/{name}-triage"))
        .send()
        .await
        .unwrap()
        .state_machine_arn()
        .to_owned();
    physical.insert("<Ref:TriageStateMachine>".into(), machine.clone());

    // Every function, from its template environment.
    let ca = std::fs::read(env("CONTINUITY_TEST_REDIS_CA")).unwrap();
    let functions = Arc::new(Functions::new(&ev, &physical, &extra, &ca).await);
    // The local cluster knows that user with the template's access string; it accepts
    // any token (only ElastiCache can check a SigV4 signature: `tests/cache_iam.rs`
    // checks the token against botocore's).
    let access = ev.properties("CacheUser").unwrap()["AccessString"].as_str().unwrap().to_owned();
    let nodes = cache_nodes(&ca).await;
    for node in &nodes {
        let mut c = node.clone();
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&cache_user)
            .arg("reset")
            .arg("nopass")
            .arg(access.split_whitespace().collect::<Vec<_>>())
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let names = ev.functions().into_iter().map(|id| (format!("{name}-{id}"), id)).collect();
    let proxy = Arc::new(MotoProxy { moto: moto.clone(), functions: functions.clone(), names, http: reqwest::Client::new() });
    tokio::spawn(lambda::serve_proxy(proxy_listener, proxy));
    let gateway = Arc::new(apigw::Gateway::new(&ev, functions.clone()));
    let listener = tokio::net::TcpListener::bind(base.trim_start_matches("http://")).await.unwrap();
    {
        let gateway = gateway.clone();
        tokio::spawn(async move { apigw::serve(listener, gateway).await });
    }
    // The event-source mappings.
    let consumers = ev.queue_consumers().unwrap();
    assert!(!consumers.is_empty());
    let mut pollers = Vec::new();
    for c in consumers {
        let url = lambda::resolve(&format!("<Ref:{}>", c.queue), &physical, &c.function);
        let arn = lambda::resolve(&format!("<GetAtt:{}.Arn>", c.queue), &physical, &c.function);
        pollers.push(tokio::spawn(lambda::poll(sqs.clone(), url, arn, c, functions.clone())));
    }

    // ------------------------------------------------------------ bootstrap (operator's machine)
    let outputs: BTreeMap<String, String> = [
        ("TableName", table.clone()),
        ("QueueUrl", physical["<Ref:WorkQueue>"].clone()),
        ("DeadLetterQueueUrl", physical["<Ref:DeadLetterQueue>"].clone()),
        ("BucketName", bucket.clone()),
        ("VaultKeyId", vault.clone()),
        ("TokenSigningKeyId", signing.clone()),
        ("Embedder", "hashing".to_owned()),
        ("ApiUrl", base.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    store_aws::stack::create_for_test(&sdk, &name, &outputs).await.unwrap();
    let out = Command::new(BIN)
        .args(["--backend", "aws", "--stack", &name, "bootstrap"])
        .env("RUST_LOG", "warn")
        .env("AWS_REGION", REGION)
        .env("CONTINUITY_AWS_ENDPOINT_URL", &moto)
        .env_remove("CONTINUITY_TABLE")
        .output()
        .unwrap();
    assert!(out.status.success(), "bootstrap: {}", String::from_utf8_lossy(&out.stderr));
    let operator = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(operator.starts_with("ctn_"), "{operator}");

    // ------------------------------------------------------------ the gateway's own answers
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let (status, headers, body) = call(&http, reqwest::Method::POST, &format!("{base}/mcp"), None, Some(json!({}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("UNAUTHENTICATED")), "no token: UNAUTHORIZED");
    let challenge = headers["www-authenticate"].to_str().unwrap();
    assert!(challenge.contains(&format!("resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"")), "{challenge}");
    let (status, headers, _) =
        call(&http, reqwest::Method::POST, &format!("{base}/mcp"), Some("ctn_nobody.junk"), Some(json!({}))).await;
    assert_eq!(status, 401, "a bad token: the authorizer's Deny → ACCESS_DENIED as 401");
    assert!(headers["www-authenticate"].to_str().unwrap().contains("resource_metadata="), "the Deny's context header");
    let (status, _, body) = call(&http, reqwest::Method::GET, &format!("{base}/no/such/route"), None, None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")), "{body}");

    // ------------------------------------------------------------ administration (admin API)
    let admin = format!("{base}/v1/admin/tenants");
    let (status, _, body) = call(
        &http,
        reqwest::Method::POST,
        &admin,
        Some(&operator),
        Some(json!({"id": tenant, "plan": "enterprise", "department": "customer_success", "industry": "saas"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    for (email, role, password) in
        [("ada@globex.example", "member", PASSWORD), ("grace@globex.example", "approver", APPROVER_PASSWORD)]
    {
        let (status, _, body) = call(
            &http,
            reqwest::Method::POST,
            &format!("{admin}/{tenant}/users"),
            Some(&operator),
            Some(json!({"email": email, "role": role, "password": password})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, _, body) = call(
        &http,
        reqwest::Method::POST,
        &format!("{admin}/{tenant}/keys"),
        Some(&operator),
        Some(json!({"scopes": "tenant:read tenant:write"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let ingest_key = body["token"].as_str().unwrap().to_owned();

    // ------------------------------------------------------------ connector, ingest, pipeline, KB
    let register = continuity_tests::event("ingest-register-hubspot.json");
    let batch = continuity_tests::event("ingest-hubspot.json");
    let (status, _, body) = call(
        &http,
        reqwest::Method::POST,
        &format!("{base}/v1/connectors/hubspot"),
        Some(&ingest_key),
        register["body"].as_str().map(|b| serde_json::from_str(b).unwrap()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, _, body) = call(
        &http,
        reqwest::Method::POST,
        &format!("{base}/v1/ingest/hubspot"),
        Some(&ingest_key),
        Some(serde_json::from_str(batch["body"].as_str().unwrap()).unwrap()),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    // OpenSearch Serverless (and its stand-in) shows a write only after a refresh. The
    // document is written three times inside that window: each answer comes at once with
    // a pending verification (no readback on the request path), each removal before a
    // write misses the write before it, so the collection holds twins for a moment.
    // S3 Vectors and DynamoDB read their writes at once: each write is verified inline.
    let mut requests_before = 0;
    for (n, tail) in ["", " Exceptions go to the CFO.", " Exceptions go to the CFO; see the ledger."].iter().enumerate() {
        let (status, _, body) = call(
            &http,
            reqwest::Method::POST,
            &format!("{base}/v1/kb/documents"),
            Some(&ingest_key),
            Some(json!({"id": "refund-policy", "scope": "org", "title": "Refund policy", "source": "confluence",
                        "body": format!("Refunds over 5000 EUR need the finance lead's sign-off within two business days.{tail}")})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        let deferred = profile == Profile::Production;
        assert_eq!(
            body["verification"]["pending"].as_bool().unwrap_or(false),
            deferred,
            "write {n}: pending only where the index is eventual: {body}"
        );
        assert_eq!(body["verification"]["verified"], !deferred, "{body}");
        if let SearchStandIn::OpenSearch(stand) = &search {
            requests_before = stand.seen.lock().unwrap().len();
        }
    }
    let tenant_id = TenantId::new(tenant).unwrap();
    let mcp_services = functions.services("McpFunction").clone();
    let refund = domain::Id::new("refund-policy").unwrap();
    match &search {
        SearchStandIn::OpenSearch(stand) => {
            // The pipeline runs each readback once the window has passed: it reads the
            // chunks by key, sweeps the older versions and verifies the newest — one copy
            // is left.
            let newest_only = || {
                let copies: Vec<Value> = stand.stored().into_iter().filter(|d| d["doc"] == "refund-policy").collect();
                copies.len() == 1 && copies[0]["text"].as_str().is_some_and(|t| t.ends_with("see the ledger."))
            };
            until("the pipeline's deferred readback to sweep the twins and verify the newest", 60, || {
                let (s, t, doc) = (mcp_services.clone(), tenant_id.clone(), refund.clone());
                let swept = newest_only();
                async move {
                    swept
                        && s.backend
                            .records
                            .get_verification(&t, "kb", &doc)
                            .await
                            .unwrap()
                            .is_some_and(|v| v.verified && !v.pending)
                }
            })
            .await;
            assert!(
                stand.seen.lock().unwrap()[requests_before..]
                    .iter()
                    .any(|(_, path, body)| path == "/_bulk" && body.contains("\"delete\"")),
                "the sweep deleted by the ids the collection assigned"
            );
        }
        SearchStandIn::S3Vectors(stand) => {
            // One copy, the newest, in the keyword table and in the tenant's own vector
            // index (made on its first write); no readback was queued.
            let chunks = keywords.chunks_of(&tenant_id, &domain::memory::MemoryScope::Org, &refund).await.unwrap();
            assert_eq!(chunks.len(), 1, "{chunks:?}");
            assert!(chunks[0].1.text.ends_with("see the ledger."), "{chunks:?}");
            let mcp = ev.properties("McpFunction").unwrap();
            let bucket = mcp.pointer("/Environment/Variables/CONTINUITY_VECTOR_BUCKET").and_then(Value::as_str).unwrap();
            let dim = ports::Embedder::dim(mcp_services.backend.embedder.as_ref());
            let index = store_aws::s3vectors::client::index_name(Some(&tenant_id), dim);
            assert!(stand.indexes(bucket).contains(&index), "{bucket}: {:?}", stand.indexes(bucket));
            let verification = mcp_services.backend.records.get_verification(&tenant_id, "kb", &refund).await.unwrap();
            assert!(verification.is_some_and(|v| v.verified && !v.pending));
        }
    }
    let review = mcp_services.backend.records.list_review(&tenant_id, &domain::PageRequest::first(10)).await.unwrap();
    assert!(review.items.is_empty(), "no false 'unverified' record: {:?}", review.items);
    until("the pipeline to write the account", 120, || {
        let s = mcp_services.clone();
        let t = tenant_id.clone();
        async move {
            s.backend
                .records
                .list_entities(&t, Some(&domain::EntityType::new("account").unwrap()), &domain::PageRequest::first(5))
                .await
                .is_ok_and(|p| !p.items.is_empty())
        }
    })
    .await;

    // ------------------------------------------------------------ the MCP client (official Python SDK)
    let script = &continuity_tests::workspace_root().join("tests/python/topology_client.py").display().to_string();
    let mut python = Command::new(env("CONTINUITY_TEST_PYTHON"))
        .args([script, &format!("{base}/mcp"), tenant, "ada@globex.example", PASSWORD, "Acme", "refunds finance sign-off"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_python = python.stdin.take().unwrap();
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    let stdout = python.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let stderr = python.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let python = Killed(python);
    let first = tokio::time::timeout(Duration::from_secs(180), lines.recv()).await.ok().flatten();
    let Some(first) = first else {
        drop(python);
        panic!("the SDK client printed nothing:\n{}\n{:?}", stderr.join().unwrap(), gateway.log.lock().unwrap());
    };
    let seen: Value = serde_json::from_str(&first).unwrap();
    let requests: Vec<&str> = seen["requests"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for expected in ["POST /mcp", "GET /.well-known/oauth-protected-resource/mcp", "POST /oauth/register", "POST /oauth/token"] {
        assert!(requests.contains(&expected), "the SDK's OAuth flow: no {expected} in {requests:?}");
    }
    assert!(seen["tools"].as_array().unwrap().iter().any(|t| t == "memory_propose"), "{seen}");
    let entities = seen["entities"].to_string();
    assert!(entities.contains("Acme Corp"), "spine.entity.search found the ingested account: {entities}");
    let kb = seen["kb"].to_string();
    assert!(kb.contains("refund-policy") || kb.contains("Refund policy"), "kb.search found the document: {kb}");
    match &search {
        SearchStandIn::OpenSearch(stand) => {
            let searched = stand.seen.lock().unwrap().iter().any(|(_, path, body)| {
                path.ends_with("/_search")
                    && body.contains("multi_match")
                    && body.contains("\"partition\"")
                    && body.contains(tenant)
            });
            assert!(searched, "kb.search went to OpenSearch with the tenant's partition filter");
        }
        SearchStandIn::S3Vectors(stand) => {
            let own = format!("t-{tenant}-");
            let queries: Vec<String> = stand
                .seen
                .lock()
                .unwrap()
                .iter()
                .filter(|r| r.op == "QueryVectors")
                .map(|r| r.body["indexName"].as_str().unwrap_or_default().to_owned())
                .collect();
            // The tenant's own index, or the global one every tenant reads.
            assert!(queries.iter().any(|i| i.starts_with(&own)), "{queries:?}");
            assert!(queries.iter().all(|i| i.starts_with(&own) || i.starts_with("g-")), "only its own index: {queries:?}");
        }
    }
    // Why the document came back: the keyword leg found it (OpenSearch's stand-in matches
    // words; the keyword table scores BM25), with the query's words it holds.
    let why = &seen["kb"]["documents"][0]["why"];
    assert!(why["found_by"].as_array().unwrap().iter().any(|f| f == "keyword") && why["keyword_rank"] == 1, "{why}");
    assert!(why["matched_terms"].as_array().unwrap().iter().any(|t| t == "refunds"), "{why}");
    let proposal = seen["proposed"]["proposal"]["id"].as_str().unwrap_or_else(|| panic!("{seen}")).to_owned();
    let proposal_id = domain::Id::new(proposal.clone()).unwrap();

    // ------------------------------------------------------------ triage on Step Functions, the wait
    let execution = format!("arn:aws:states:{REGION}:{ACCOUNT}:execution:{name}-triage:{proposal}");
    until("the approval wait to be stored with its task token", 120, || {
        let s = mcp_services.clone();
        let (t, id) = (tenant_id.clone(), proposal_id.clone());
        async move {
            s.backend
                .records
                .get_proposal(&t, &id)
                .await
                .ok()
                .flatten()
                .is_some_and(|p| p.state == ProposalState::AwaitingApproval && p.wait.is_some_and(|w| !w.token.is_empty()))
        }
    })
    .await;
    let running = sfn.describe_execution().execution_arn(&execution).send().await.unwrap();
    assert_eq!(*running.status(), ExecutionStatus::Running, "the execution waits on its task token");

    // ------------------------------------------------------------ the dashboard, on the approvals function
    let page = http.get(format!("{base}/dashboard")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Sign in with the key"), "the dashboard's sign-in page");
    let reader = mcp_services
        .admin
        .create_key(services::admin::KeyRequest {
            tenant: tenant_id.clone(),
            scopes: domain::principal::Scopes::parse("tenant:read").unwrap(),
            principal: None,
            teams: vec![],
            projects: vec![],
        })
        .await
        .unwrap()
        .token;
    let stats: Value = http.get(format!("{base}/api/stats")).bearer_auth(&reader).send().await.unwrap().json().await.unwrap();
    assert_eq!(stats["tenant"], tenant, "{stats}");
    assert!(stats["entities"].as_u64().unwrap() > 0 && stats["proposals_waiting"] == 1, "figures from DynamoDB: {stats}");
    let served: Vec<String> =
        functions.invocations.lock().unwrap().iter().filter(|(f, _)| f == "ApprovalsFunction").map(|(_, k)| k.clone()).collect();
    assert!(served.iter().any(|k| k == "GET /dashboard") && served.iter().any(|k| k == "GET /api/stats"), "{served:?}");

    // ------------------------------------------------------------ the approver, in the console
    let mut jar = Jar::default();
    let page = http.get(format!("{base}/approvals")).send().await.unwrap();
    jar.take(page.headers());
    let html = page.text().await.unwrap();
    let csrf = hidden(&html, "csrf");
    let form = [("csrf", csrf.as_str()), ("tenant", tenant), ("email", "grace@globex.example"), ("password", APPROVER_PASSWORD)];
    let signed = http.post(format!("{base}/approvals/login")).header("cookie", jar.header()).form(&form).send().await.unwrap();
    assert_eq!(signed.status(), 303, "{}", signed.text().await.unwrap());
    jar.take(signed.headers());
    let list = http.get(format!("{base}/approvals")).header("cookie", jar.header()).send().await.unwrap();
    let html = list.text().await.unwrap();
    assert!(html.contains("Renewal call timing"), "the proposal is in the console:\n{html}");
    let csrf = hidden(&html, "csrf");
    let decided = http
        .post(format!("{base}/approvals/{proposal}/decide"))
        .header("cookie", jar.header())
        .form(&[("csrf", csrf.as_str()), ("decision", "approve"), ("reason", "Renewals start a quarter ahead")])
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 303, "{}", decided.text().await.unwrap());

    // SendTaskSuccess → Write (our triage handler, invoked by moto's Step Functions).
    let deadline = Instant::now() + Duration::from_secs(120);
    let finished = loop {
        let d = sfn.describe_execution().execution_arn(&execution).send().await.unwrap();
        if *d.status() != ExecutionStatus::Running {
            break d;
        }
        assert!(Instant::now() < deadline, "the execution did not finish after the approval");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let history = sfn.get_execution_history().execution_arn(&execution).max_results(500).send().await.unwrap();
    let entered: Vec<String> = history
        .events()
        .iter()
        .filter(|e| matches!(e.r#type(), HistoryEventType::TaskStateEntered | HistoryEventType::ChoiceStateEntered))
        .filter_map(|e| e.state_entered_event_details().map(|s| s.name().to_owned()))
        .collect();
    assert_eq!(*finished.status(), ExecutionStatus::Succeeded, "{entered:?} {:?}", finished.output());
    assert_eq!(entered, ["Score", "Route", "AwaitApproval", "Apply", "Write"]);
    let tasks: Vec<String> =
        functions.invocations.lock().unwrap().iter().filter(|(f, _)| f == "TriageFunction").map(|(_, k)| k.clone()).collect();
    assert_eq!(tasks, ["score", "sqs", "write"], "moto's Step Functions ran our triage handler, the wait went through the queue");
    let p = mcp_services.backend.records.get_proposal(&tenant_id, &proposal_id).await.unwrap().unwrap();
    assert_eq!(p.state, ProposalState::Written);

    // ------------------------------------------------------------ the client finds it
    // Once the collection has refreshed: a search inside the window may not see the
    // written memory yet, on AWS as with the stand-in.
    if profile == Profile::Production {
        tokio::time::sleep(opensearch::REFRESH).await;
    }
    writeln!(to_python, "approved").unwrap();
    to_python.flush().unwrap();
    let second = tokio::time::timeout(Duration::from_secs(120), lines.recv()).await.ok().flatten();
    let Some(second) = second else {
        drop(python);
        panic!("the SDK client stopped:\n{}", stderr.join().unwrap());
    };
    let after: Value = serde_json::from_str(&second).unwrap();
    assert!(after["org"].to_string().contains("Renewal call timing"), "memory.search_org: {after}");
    assert_eq!(after["status"]["proposal"]["state"], "written", "{after}");
    drop(python);

    // ------------------------------------------------------------ each schedule, once
    for schedule in ev.schedules().unwrap() {
        let input = schedule.input.clone().unwrap_or_else(|| json!({}));
        let answer = functions.invoke(&schedule.function, input).await;
        assert!(answer.is_ok(), "{} {}: {:?}", schedule.function, schedule.event, answer.err());
    }
    // The hourly run fans the governance upkeep out through the work queue; it drains.
    let work = physical["<Ref:WorkQueue>"].clone();
    until("the work queue to drain", 120, || {
        let (sqs, work) = (sqs.clone(), work.clone());
        async move {
            let a = sqs
                .get_queue_attributes()
                .queue_url(&work)
                .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
                .send()
                .await
                .unwrap();
            let n = |k: aws_sdk_sqs::types::QueueAttributeName| {
                a.attributes().and_then(|m| m.get(&k)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(1)
            };
            n(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages) == 0
                && n(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible) == 0
        }
    })
    .await;
    for q in queues.iter().filter(|q| q.contains("DeadLetter")) {
        let got = sqs.receive_message().queue_url(&physical[&format!("<Ref:{q}>")]).send().await.unwrap();
        assert!(got.messages().is_empty(), "{q} holds a dead letter: {:?}", got.messages());
    }

    // Every request of the journey was routed by the template; only the probes missed.
    let log = gateway.log.lock().unwrap().clone();
    let unrouted: Vec<_> =
        log.iter().filter(|(_, p, _, kind)| kind == "MISSING_AUTHENTICATION_TOKEN" && p != "/no/such/route").collect();
    assert!(unrouted.is_empty(), "requests the template does not route: {unrouted:?}");
    let failed: Vec<_> = log.iter().filter(|(_, _, status, _)| *status >= 500).collect();
    assert!(failed.is_empty(), "server errors: {failed:?}");
    // The functions used the cache as its IAM user, and the template's access string
    // allowed every command they sent.
    let mut signed_in = 0;
    for node in &nodes {
        let mut c = node.clone();
        let clients: String = redis::cmd("CLIENT").arg("LIST").query_async(&mut c).await.unwrap();
        signed_in += clients.lines().filter(|l| l.split(' ').any(|f| f == format!("user={cache_user}"))).count();
        let log: Vec<Vec<redis::Value>> = redis::cmd("ACL").arg("LOG").query_async(&mut c).await.unwrap();
        let denied: Vec<_> = log.iter().filter(|entry| format!("{entry:?}").contains(&cache_user)).collect();
        assert!(denied.is_empty(), "the cache refused the functions: {denied:?}");
    }
    assert!(signed_in > 0, "no function connection signed in as {cache_user}");

    // The authorizer ran once per credential (bad token, operator, ingest key, the
    // SDK's access token): its cached Allow covered every other route it was used on.
    let authorizations = functions.invocations.lock().unwrap().iter().filter(|(f, _)| f == "AuthorizerFunction").count();
    assert_eq!(authorizations, 4, "{:?}", functions.invocations.lock().unwrap());

    // A route the template lacks is not served: without the McpPost event, the same
    // request gets API Gateway's answer for an unknown route.
    let mut pruned = template.clone();
    pruned.doc["Resources"]["McpFunction"]["Properties"]["Events"].as_object_mut().unwrap().remove("McpPost");
    let pruned_ev = pruned.evaluate(&stack).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pruned_base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(apigw::serve(listener, Arc::new(apigw::Gateway::new(&pruned_ev, functions.clone()))));
    let (status, _, body) =
        call(&http, reqwest::Method::POST, &format!("{pruned_base}/mcp"), Some(&operator), Some(json!({}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("NOT_FOUND")), "{body}");

    // The same stack deployed without PublicBaseUrl or DomainName: a client arriving
    // without a token learns nothing about where to sign in (API Gateway answers
    // before any function runs and the template cannot name its own URL there), so
    // OAuth discovery needs a custom domain (docs/aws.md); a configured token still works.
    let bare_ev = template.evaluate(&Stack::new(&name, "0a1b2c3d").with_parameter("Embedder", "hashing")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bare_base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(apigw::serve(listener, Arc::new(apigw::Gateway::new(&bare_ev, functions.clone()))));
    let (status, headers, _) = call(&http, reqwest::Method::POST, &format!("{bare_base}/mcp"), None, Some(json!({}))).await;
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"].to_str().unwrap(), "Bearer realm=\"continuity\"", "no resource metadata to discover");
    let (status, _, body) =
        call(&http, reqwest::Method::POST, &format!("{bare_base}/mcp"), Some(&operator), Some(json!({}))).await;
    assert_ne!(status, 401, "a configured credential is accepted without a custom domain: {body}");
    for p in pollers {
        p.abort();
    }

    // An outage under the authorizer (the table gone): its invocation fails, which API
    // Gateway answers with AUTHORIZER_CONFIGURATION_ERROR — a 503 to retry, readable by a
    // browser, never a 401 that would make a client drop its credential.
    drop(moto_process);
    // A well-formed key of the operator's tenant that no cache has seen: the authorizer
    // must read the table.
    let unseen = format!("{}.unseen1.{}", operator.split('.').next().unwrap(), "a".repeat(36));
    let (status, headers, body) =
        call(&http, reqwest::Method::POST, &format!("{base}/mcp"), Some(&unseen), Some(json!({}))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("UNAVAILABLE")), "{body}");
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(headers["access-control-allow-origin"], "*");
    let last = gateway.log.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.3, "AUTHORIZER_CONFIGURATION_ERROR", "{last:?}");
}
