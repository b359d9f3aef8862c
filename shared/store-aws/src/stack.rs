//! A deployed stack as the operator's machine sees it (feature `stack`, linked by the
//! `continuity` CLI only): its CloudFormation outputs, turned into the [`AwsSettings`]
//! the functions run with, and the checks of `continuity --backend aws doctor`.
//!
//! The operator's machine cannot reach the stack's ElastiCache or the OpenSearch VPC
//! endpoint: what it does goes to DynamoDB, KMS, S3, SQS, Step Functions and (the small
//! profile's search) S3 Vectors only, and the rest is checked through the API's own
//! `/healthz`, which runs inside the VPC.

use std::collections::BTreeMap;

pub use aws_config::SdkConfig;
use domain::{Error, Result};

use crate::cache::RedisSettings;
use crate::settings::{AwsSettings, SearchSettings};

/// A stack's outputs, by key.
#[derive(Debug, Clone, Default)]
pub struct StackOutputs {
    pub name: String,
    pub outputs: BTreeMap<String, String>,
}

/// The outputs every command needs.
pub const REQUIRED: [&str; 5] = ["TableName", "QueueUrl", "DeadLetterQueueUrl", "BucketName", "VaultKeyId"];

/// Reads `stack`'s outputs.
///
/// # Errors
/// `NOT_FOUND` for an unknown stack; `INVALID_REQUEST` for a stack still being created or
/// one that failed; `UNAVAILABLE` when CloudFormation cannot be reached.
pub async fn describe(sdk: &SdkConfig, stack: &str) -> Result<StackOutputs> {
    let client = aws_sdk_cloudformation::Client::new(sdk);
    let answer = client.describe_stacks().stack_name(stack).send().await.map_err(|e| {
        let text = format!("{}", aws_sdk_cloudformation::error::DisplayErrorContext(&e));
        if text.contains("does not exist") {
            Error::not_found(format!("stack {stack} in this account and region"))
        } else {
            crate::unavailable("cloudformation DescribeStacks", &e)
        }
    })?;
    let Some(s) = answer.stacks().first() else { return Err(Error::not_found(format!("stack {stack}"))) };
    let status = s.stack_status().map(|st| st.as_str().to_owned()).unwrap_or_default();
    if !(status.ends_with("_COMPLETE") && !status.contains("ROLLBACK") && !status.starts_with("DELETE")) {
        return Err(Error::invalid_field("stack", format!("stack {stack} is {status}; wait until sam deploy has finished")));
    }
    let outputs = s.outputs().iter().filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned()))).collect();
    Ok(StackOutputs { name: stack.to_owned(), outputs })
}

impl StackOutputs {
    /// One output.
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming the missing output (a stack older than this binary).
    pub fn get(&self, key: &str) -> Result<&str> {
        self.outputs.get(key).map(String::as_str).filter(|v| !v.is_empty()).ok_or_else(|| {
            Error::invalid_field(key, format!("stack {} has no output {key}; deploy this version's template", self.name))
        })
    }

    /// The settings of the stack's functions, without the cache and search (unreachable
    /// from outside the VPC): the caller gives the backend a local cache.
    ///
    /// # Errors
    /// As [`Self::get`] for a required output.
    pub fn settings(&self, region: &str, endpoint_url: Option<&str>) -> Result<AwsSettings> {
        for key in REQUIRED {
            self.get(key)?;
        }
        let optional = |k: &str| self.outputs.get(k).filter(|v| !v.is_empty()).cloned();
        Ok(AwsSettings {
            region: region.to_owned(),
            endpoint_url: endpoint_url.map(str::to_owned),
            table: self.get("TableName")?.to_owned(),
            fortress_table: optional("FortressTableName"),
            queue_url: self.get("QueueUrl")?.to_owned(),
            dead_letter_queue_url: self.get("DeadLetterQueueUrl")?.to_owned(),
            bucket: self.get("BucketName")?.to_owned(),
            // Never connected to from here (see the module notes).
            redis: RedisSettings::single("redis://127.0.0.1:9".to_owned()),
            jwt_kms_keys: optional("TokenSigningKeyId").into_iter().collect(),
            vault_kms_key: optional("VaultKeyId"),
            search: SearchSettings {
                endpoint: None,
                service: "aoss".into(),
                index: "continuity".into(),
                embedder: "hashing".into(),
                bedrock_endpoint: None,
                visible_after: crate::settings::DEFAULT_VISIBLE_AFTER,
                vector_bucket: None,
                keyword_table: None,
                s3vectors_endpoint: None,
            },
            triage_state_machine: optional("TriageStateMachineArn"),
            mail_from: None,
        })
    }
}

/// One finding of [`doctor`]: what was checked, whether it is fine, and — when not —
/// what is wrong and how to fix it. `warning` findings do not stop the stack from
/// working (a dead-lettered message, deletion protection off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub what: String,
    pub state: FindingState,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingState {
    Ok,
    Warning,
    Failed,
}

impl Finding {
    fn ok(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { what: what.into(), state: FindingState::Ok, detail: detail.into() }
    }
    fn warn(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { what: what.into(), state: FindingState::Warning, detail: detail.into() }
    }
    fn failed(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { what: what.into(), state: FindingState::Failed, detail: detail.into() }
    }
}

fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    crate::unavailable("", e).internal.unwrap_or_default().trim_start_matches(": ").to_owned()
}

/// Checks every dependency of a deployed stack the operator's machine can reach, and
/// the rest (cache, store and vault as the functions see them) through the API's
/// `/healthz`. Never fails: each problem is a finding.
pub async fn doctor(sdk: &SdkConfig, outputs: &StackOutputs, region: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for key in REQUIRED {
        if let Err(e) = outputs.get(key) {
            out.push(Finding::failed(format!("output {key}"), e.message));
        }
    }
    let get = |k: &str| outputs.outputs.get(k).cloned().unwrap_or_default();

    // The table: active, and protected against deletion.
    let dynamo = crate::settings::dynamo_client(sdk);
    let table = get("TableName");
    if !table.is_empty() {
        out.push(match dynamo.describe_table().table_name(&table).send().await {
            Ok(d) => {
                let t = d.table();
                let status = t.and_then(|t| t.table_status()).map(|s| s.as_str().to_owned()).unwrap_or_default();
                if status != "ACTIVE" {
                    Finding::failed(
                        format!("table {table}"),
                        format!("status {status}; wait for ACTIVE or check the stack events"),
                    )
                } else if t.and_then(|t| t.deletion_protection_enabled()) != Some(true) {
                    Finding::warn(
                        format!("table {table}"),
                        "deletion protection is off; deploy this template (it sets DeletionProtectionEnabled)",
                    )
                } else {
                    Finding::ok(format!("table {table}"), "active, deletion protection on")
                }
            }
            Err(e) => Finding::failed(
                format!("table {table}"),
                format!("{}; check the credentials' dynamodb:DescribeTable and the region", cause(&e)),
            ),
        });
    }

    // The bucket.
    let bucket = get("BucketName");
    if !bucket.is_empty() {
        out.push(match crate::settings::s3_client(sdk).head_bucket().bucket(&bucket).send().await {
            Ok(_) => Finding::ok(format!("bucket {bucket}"), "reachable"),
            Err(e) => {
                Finding::failed(format!("bucket {bucket}"), format!("{}; the stack's bucket is missing or not yours", cause(&e)))
            }
        });
    }

    // The queues: reachable; dead letters are a warning with what to do.
    let sqs = crate::settings::sqs_client(sdk);
    for (key, dead, advice) in [
        ("QueueUrl", false, ""),
        (
            "DeadLetterQueueUrl",
            true,
            "failed ingest batches or governance upkeep: read GET /v1/ingest/failures, fix the cause, then redrive the DLQ",
        ),
        (
            "SchedulerDeadLetterQueueUrl",
            true,
            "maintenance schedules that could not run: check the maintenance function, then redrive",
        ),
        ("ApprovalWaitsQueueUrl", false, ""),
    ] {
        let url = get(key);
        if url.is_empty() {
            if key != "QueueUrl" {
                out.push(Finding::warn(format!("output {key}"), "missing; deploy this version's template"));
            }
            continue;
        }
        let name = url.rsplit('/').next().unwrap_or(&url).to_owned();
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await;
        out.push(match attrs {
            Ok(a) => {
                let n: u64 = a
                    .attributes()
                    .and_then(|m| m.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                if dead && n > 0 {
                    Finding::warn(format!("queue {name}"), format!("{n} dead-lettered message(s): {advice}"))
                } else {
                    Finding::ok(format!("queue {name}"), format!("{n} message(s) waiting"))
                }
            }
            Err(e) => {
                Finding::failed(format!("queue {name}"), format!("{}; check sqs:GetQueueAttributes and the region", cause(&e)))
            }
        });
    }

    // The KMS keys: enabled, of the right kind.
    let kms = crate::settings::kms_client(sdk);
    for (key, usage, role) in
        [("VaultKeyId", "ENCRYPT_DECRYPT", "the Spine vault"), ("TokenSigningKeyId", "SIGN_VERIFY", "access-token signing")]
    {
        let id = get(key);
        if id.is_empty() {
            continue;
        }
        out.push(match kms.describe_key().key_id(&id).send().await {
            Ok(d) => match d.key_metadata() {
                Some(m) if !m.enabled() => Finding::failed(
                    format!("KMS key {id}"),
                    format!("disabled ({role} stops working): enable it in the KMS console"),
                ),
                Some(m) if m.key_usage().map(|u| u.as_str()) != Some(usage) => {
                    Finding::failed(format!("KMS key {id}"), format!("usage is not {usage}; {role} needs it"))
                }
                _ => Finding::ok(format!("KMS key {id}"), format!("enabled, {role}")),
            },
            Err(e) => Finding::failed(format!("KMS key {id}"), format!("{}; check kms:DescribeKey", cause(&e))),
        });
    }

    // The triage state machine.
    let machine = get("TriageStateMachineArn");
    if machine.is_empty() {
        out.push(Finding::warn("triage state machine", "no TriageStateMachineArn output; deploy this version's template"));
    } else {
        out.push(match crate::settings::sfn_client(sdk).describe_state_machine().state_machine_arn(&machine).send().await {
            Ok(d) => {
                let status = d.status().map(|s| s.as_str().to_owned()).unwrap_or_else(|| "ACTIVE".into());
                if status == "ACTIVE" {
                    Finding::ok("triage state machine", "active")
                } else {
                    Finding::failed("triage state machine", format!("status {status}; redeploy the stack"))
                }
            }
            Err(e) => Finding::failed("triage state machine", format!("{}; check states:DescribeStateMachine", cause(&e))),
        });
    }

    // Bedrock model access, for the configured embedder.
    let embedder = get("Embedder");
    if let Some(rest) = embedder.strip_prefix("bedrock:") {
        let (model, dims) = rest.rsplit_once(':').unwrap_or((rest, "512"));
        let endpoint = format!("https://bedrock-runtime.{region}.amazonaws.com");
        let probe = async {
            let http = crate::SignedHttp::new(sdk, &endpoint, "bedrock")?;
            let e = crate::BedrockEmbedder::new(http, model, dims.parse().unwrap_or(512))?;
            ports::Embedder::embed(&e, &["doctor".to_owned()]).await
        };
        out.push(match probe.await {
            Ok(_) => Finding::ok(format!("Bedrock model {model}"), "invocable"),
            Err(e) => Finding::failed(
                format!("Bedrock model {model}"),
                format!(
                    "{}; request access to the model in the Bedrock console for {region}, or deploy with Embedder=hashing",
                    e.internal.unwrap_or(e.message)
                ),
            ),
        });
    } else if !embedder.is_empty() {
        out.push(Finding::ok("embedder", format!("{embedder} (no Bedrock)")));
    }

    // The alarm topic: an alarm that notifies a topic nobody subscribed to reaches nobody.
    let topic = get("AlarmTopicArn");
    if topic.is_empty() {
        out.push(Finding::warn("alarm topic", "no AlarmTopicArn output; deploy this version's template"));
    } else {
        out.push(alarm_topic(sdk, &topic).await);
    }

    // Inside the VPC: the API's readiness (cache, store, vault as the functions see them).
    let api = get("ApiUrl");
    if api.is_empty() {
        out.push(Finding::failed("API", "no ApiUrl output"));
    } else {
        out.push(healthz(&api).await);
    }
    // Search: the small profile's stores are public APIs (IAM), checked from here; the
    // production profile's collection answers only its VPC endpoint.
    let (vectors, keywords) = (get("VectorBucketName"), get("SearchTableName"));
    if vectors.is_empty() {
        out.push(Finding::warn(
            "search collection",
            "not reachable from outside the VPC; the functions log a failed index write or query (and searches fall back to a keyword scan)",
        ));
    } else {
        out.push(small_profile_search(sdk, region, &vectors, &keywords).await);
    }
    out
}

/// The small profile's search stores: the vector bucket (`GetVectorBucket`) and the
/// keyword table (`DescribeTable`).
async fn small_profile_search(sdk: &SdkConfig, region: &str, bucket: &str, table: &str) -> Finding {
    let what = format!("search: vector bucket {bucket}, keyword table {table}");
    let endpoint = sdk.endpoint_url().map_or_else(|| format!("https://s3vectors.{region}.api.aws"), str::to_owned);
    let http = match crate::SignedHttp::new(sdk, &endpoint, "s3vectors") {
        Ok(h) => h,
        Err(e) => return Finding::failed(what, e.message),
    };
    let body = serde_json::json!({"vectorBucketName": bucket}).to_string().into_bytes();
    match http.send("POST", "/GetVectorBucket", "application/json", body, &[404]).await {
        Ok((404, _)) => return Finding::failed(what, "the vector bucket does not exist; check the stack's events"),
        Ok(_) => {}
        Err(e) => {
            return Finding::failed(
                what,
                format!(
                    "{}; check the credentials' s3vectors:GetVectorBucket and that S3 Vectors is offered in {region}",
                    e.message
                ),
            );
        }
    }
    match crate::settings::dynamo_client(sdk).describe_table().table_name(table).send().await {
        Ok(d) if d.table().and_then(|t| t.table_status()).is_some_and(|s| s.as_str() == "ACTIVE") => {
            Finding::ok(what, "both reachable (the small profile: hybrid search on S3 Vectors and DynamoDB)")
        }
        Ok(_) => Finding::failed(what, "the keyword table is not ACTIVE yet; wait, or check the stack's events"),
        Err(e) => Finding::failed(what, format!("{}; check the credentials' dynamodb:DescribeTable", cause(&e))),
    }
}

/// Whether the alarm topic has a confirmed subscription (a pending one, waiting for
/// its e-mail's link to be followed, receives nothing yet). Reads at most 10 pages.
async fn alarm_topic(sdk: &SdkConfig, topic: &str) -> Finding {
    let sns = aws_sdk_sns::Client::new(sdk);
    let what = format!("alarm topic {topic}");
    let (mut confirmed, mut pending) = (0_usize, 0_usize);
    let mut next: Option<String> = None;
    for _ in 0..10 {
        let page = match sns.list_subscriptions_by_topic().topic_arn(topic).set_next_token(next.take()).send().await {
            Ok(p) => p,
            Err(e) => return Finding::failed(what, format!("{}; check sns:ListSubscriptionsByTopic", cause(&e))),
        };
        for s in page.subscriptions() {
            if s.subscription_arn().is_some_and(|arn| arn.starts_with("arn:")) {
                confirmed += 1;
            } else {
                pending += 1;
            }
        }
        next = page.next_token().map(str::to_owned);
        if confirmed > 0 || next.is_none() {
            break;
        }
    }
    let subscribe = format!("aws sns subscribe --topic-arn {topic} --protocol email --notification-endpoint you@example.com");
    match (confirmed, pending) {
        (0, 0) => Finding::warn(what, format!("no subscription: alarms reach nobody; subscribe, e.g. {subscribe}")),
        (0, p) => Finding::warn(
            what,
            format!(
                "{p} subscription(s) pending confirmation: alarms reach nobody until the link in the confirmation e-mail is followed"
            ),
        ),
        (c, _) => Finding::ok(what, format!("{c} confirmed subscription(s)")),
    }
}

/// `GET {api}/healthz`: the stack's own readiness checks, from inside the VPC.
async fn healthz(api: &str) -> Finding {
    let url = format!("{}/healthz", api.trim_end_matches('/'));
    let client = match reqwest::Client::builder()
        .use_preconfigured_tls(tls::client_config())
        .timeout(std::time::Duration::from_secs(15))
        .build()
    {
        Ok(c) => c,
        Err(e) => return Finding::failed("API /healthz", e.to_string()),
    };
    match client.get(&url).send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            let failed: Vec<String> = body
                .get("checks")
                .and_then(serde_json::Value::as_object)
                .map(|m| m.iter().filter(|(_, v)| *v != "ok").map(|(k, _)| k.clone()).collect())
                .unwrap_or_default();
            if status == 200 {
                Finding::ok(format!("API {url}"), "ready (cache, store and vault answer from inside the VPC)")
            } else if failed.is_empty() {
                Finding::failed(format!("API {url}"), format!("answered {status}; read the MCP function's log"))
            } else {
                Finding::failed(
                    format!("API {url}"),
                    format!("not ready: {} failed; the MCP function's log says why (e.g. the cache)", failed.join(", ")),
                )
            }
        }
        Err(e) => Finding::failed(
            format!("API {url}"),
            format!("unreachable ({}); check the stack's API Gateway stage and your network", cause(&e)),
        ),
    }
}

/// Creates a stack with these literal outputs, for tests against moto (which runs
/// CloudFormation); a real stack comes from `sam deploy`.
///
/// # Errors
/// `UNAVAILABLE`.
pub async fn create_for_test(sdk: &SdkConfig, name: &str, outputs: &BTreeMap<String, String>) -> Result<()> {
    let outputs: serde_json::Map<String, serde_json::Value> =
        outputs.iter().map(|(k, v)| (k.clone(), serde_json::json!({ "Value": v }))).collect();
    let template = serde_json::json!({
        "Resources": {"Placeholder": {"Type": "AWS::SQS::Queue"}},
        "Outputs": outputs,
    });
    aws_sdk_cloudformation::Client::new(sdk)
        .create_stack()
        .stack_name(name)
        .template_body(template.to_string())
        .send()
        .await
        .map_err(|e| crate::unavailable("cloudformation CreateStack", &e))?;
    Ok(())
}
