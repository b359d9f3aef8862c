//! The emulated Lambda service: each function of the template, built as its binary's
//! `main` builds it — from exactly the environment the template declares for it
//! (Globals merged), its placeholders replaced by the emulated stack's physical values —
//! and invoked in process with the event AWS would deliver. Plus the moto proxy that lets
//! moto's Step Functions invoke them, and the SQS event-source pollers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use continuity_tests::template::{Evaluated, QueueConsumer};
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use services::Services;
use tower::ServiceExt;

/// What each placeholder of the evaluated template (`<Ref:Table>`,
/// `<GetAtt:Cache.Endpoint.Address>`) is in the emulated stack.
pub type Physical = BTreeMap<String, String>;

/// Replaces every `<Ref:…>` / `<GetAtt:…>` in `text`; an unknown one fails the test,
/// naming it (the emulated stack lacks a resource the template gives a function).
pub fn resolve(text: &str, physical: &Physical, what: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = [rest.find("<Ref:"), rest.find("<GetAtt:")].into_iter().flatten().min() {
        let end = rest[start..].find('>').map(|e| start + e).unwrap_or_else(|| panic!("{what}: unterminated placeholder"));
        let key = &rest[start..=end];
        let value = physical
            .get(key)
            .unwrap_or_else(|| panic!("{what}: the emulated stack has no physical value for {key} (add it to the rig)"));
        out.push_str(&rest[..start]);
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// An invocation's failure, as the Lambda service reports it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub error_type: String,
    pub message: String,
}

enum Handler {
    /// `continuity-http`: the router its `main` serves.
    Http(Router),
    /// `continuity-authorizer`: the one service its `main` builds, on its own backend
    /// (`store_aws::authorizer_backend`: no queue, blobs, search or workflow).
    Authorizer(Box<services::auth::Authenticator>, String),
    /// `continuity-pipeline`.
    Pipeline(Services),
    /// `continuity-triage`.
    Triage(Services),
    /// `continuity-maintenance`.
    Maintenance(Services),
}

struct Function {
    handler: Handler,
    services: Services,
}

/// Every function of the stack.
pub struct Functions {
    functions: HashMap<String, Function>,
    /// `(function, kind)` of every invocation, in order.
    pub invocations: Mutex<Vec<(String, String)>>,
}

impl Functions {
    /// Builds every function of `stack`. `extra` holds what the Lambda runtime adds
    /// (`AWS_REGION`) and the one local-run variable (`CONTINUITY_AWS_ENDPOINT_URL`, moto);
    /// `ca_pem` is the private CA of the local TLS cache cluster (ElastiCache's
    /// certificates chain to public roots).
    pub async fn new(stack: &Evaluated<'_>, physical: &Physical, extra: &[(&str, String)], ca_pem: &[u8]) -> Self {
        let mut functions = HashMap::new();
        for id in stack.functions() {
            let props = stack.properties(&id).unwrap_or_else(|e| panic!("{e}"));
            let binary = stack
                .template()
                .doc
                .pointer(&format!("/Resources/{id}/Metadata/BuildProperties/Binary"))
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{id}: no Metadata.BuildProperties.Binary"))
                .to_owned();
            let mut env: BTreeMap<String, String> = props
                .pointer("/Environment/Variables")
                .and_then(Value::as_object)
                .map(|vars| {
                    vars.iter()
                        .map(|(k, v)| {
                            let raw = match v {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            };
                            (k.clone(), resolve(&raw, physical, &format!("{id}.{k}")))
                        })
                        .collect()
                })
                .unwrap_or_default();
            for (k, v) in extra {
                env.insert((*k).to_owned(), v.clone());
            }
            let lookup = |name: &str| env.get(name).cloned();
            let mut settings =
                store_aws::LambdaEnv::from_vars(&lookup).unwrap_or_else(|e| panic!("{id}: its environment: {}", e.message));
            if settings.aws.redis.urls.iter().any(|u| u.starts_with("rediss://")) {
                settings.aws.redis = settings.aws.redis.clone().with_ca_pem(ca_pem.to_vec());
            }
            // As the functions' `main`s: the SDK configuration of a Lambda function.
            let sdk = settings.aws.function_sdk_config();
            let backend = store_aws::backend(&settings.aws, &sdk, Arc::new(ports::SystemClock))
                .unwrap_or_else(|e| panic!("{id}: backend: {} {:?}", e.message, e.internal));
            let services = Services::for_lambda(backend);
            let handler = match binary.as_str() {
                "continuity-http" => Handler::Http(gateway::lambda::app_with_hosts(
                    services.clone(),
                    settings.public_url.clone(),
                    settings.allowed_hosts.clone(),
                    settings.allowed_origins.clone(),
                )),
                "continuity-authorizer" => {
                    let own = store_aws::authorizer_backend(&settings.aws, &sdk, Arc::new(ports::SystemClock))
                        .unwrap_or_else(|e| panic!("{id}: authorizer backend: {} {:?}", e.message, e.internal));
                    Handler::Authorizer(Box::new(Services::authenticator(own)), settings.public_url.clone())
                }
                "continuity-pipeline" => Handler::Pipeline(services.clone()),
                "continuity-triage" => Handler::Triage(services.clone()),
                "continuity-maintenance" => Handler::Maintenance(services.clone()),
                other => panic!("{id}: the topology test does not know the binary {other}"),
            };
            functions.insert(id, Function { handler, services });
        }
        Self { functions, invocations: Mutex::new(Vec::new()) }
    }

    /// A function's services, for the test's own checks.
    pub fn services(&self, function: &str) -> &Services {
        &self.function(function).services
    }

    fn function(&self, id: &str) -> &Function {
        self.functions.get(id).unwrap_or_else(|| panic!("no function {id} in the template"))
    }

    /// One invocation with `payload`, as the Lambda service delivers it.
    pub async fn invoke(&self, function: &str, payload: Value) -> Result<Value, Failure> {
        let f = self.function(function);
        let kind = match &f.handler {
            Handler::Http(_) => {
                format!("{} {}", payload["httpMethod"].as_str().unwrap_or("?"), payload["path"].as_str().unwrap_or("?"))
            }
            _ if payload.get("Records").is_some() => "sqs".to_owned(),
            _ => payload.get("task").or_else(|| payload.get("type")).and_then(Value::as_str).unwrap_or("event").to_owned(),
        };
        self.invocations.lock().unwrap().push((function.to_owned(), kind));
        let failed = |e: &domain::Error| Failure { error_type: e.code.as_str().to_owned(), message: e.message.clone() };
        let answer = match &f.handler {
            Handler::Http(router) => Ok(http(router, &payload).await),
            Handler::Authorizer(auth, public_url) => {
                let event = serde_json::from_value(payload)
                    .map_err(|e| Failure { error_type: "Runtime.UnmarshalError".into(), message: e.to_string() })?;
                match continuity_authorizer::decide(auth, &event, public_url).await {
                    Ok(decision) => Ok(serde_json::to_value(decision).unwrap()),
                    Err(outage) => Err(failed(&outage.0)),
                }
            }
            Handler::Pipeline(services) => {
                let event = serde_json::from_value(payload)
                    .map_err(|e| Failure { error_type: "Runtime.UnmarshalError".into(), message: e.to_string() })?;
                Ok(serde_json::to_value(continuity_pipeline::handle(services, event).await).unwrap())
            }
            Handler::Triage(s) => continuity_triage::handle(s.governance.tasks(), payload)
                .await
                .map_err(|d| Failure { error_type: d.error_type, message: d.error_message }),
            Handler::Maintenance(services) => continuity_maintenance::handle(services, &payload).await.map_err(|e| failed(&e)),
        };
        metrics::flush_emf();
        answer
    }
}

/// An API Gateway (REST, proxy integration) event through the router, answered as the
/// proxy response `lambda_http` would serialise.
async fn http(router: &Router, event: &Value) -> Value {
    let request = lambda_http::request::from_str(&event.to_string()).expect("an API Gateway REST event lambda_http accepts");
    let response = router.clone().oneshot(request).await.expect("infallible");
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("a body").to_bytes();
    let mut headers: Map<String, Value> = Map::new();
    for (name, value) in &parts.headers {
        let entry = headers.entry(name.as_str().to_owned()).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(values) = entry {
            values.push(Value::String(value.to_str().unwrap_or_default().to_owned()));
        }
    }
    // lambda_http sends text as text and anything else base64-encoded.
    let text = parts.headers.get("content-type").and_then(|v| v.to_str().ok()).is_none_or(|t| {
        t.starts_with("text/") || t.contains("json") || t.contains("xml") || t.contains("javascript") || t.contains("yaml")
    });
    let (body, encoded) = match (text, std::str::from_utf8(&bytes)) {
        (true, Ok(s)) => (s.to_owned(), false),
        _ => (base64::engine::general_purpose::STANDARD.encode(&bytes), true),
    };
    json!({
        "statusCode": parts.status.as_u16(),
        "headers": {},
        "multiValueHeaders": headers,
        "body": if bytes.is_empty() { Value::Null } else { Value::String(body) },
        "isBase64Encoded": encoded,
    })
}

/// Between moto's Step Functions and moto: a Lambda `Invoke` runs the emulated
/// function (moto without Docker runs no code); every other call is forwarded to moto
/// unchanged. moto's Step Functions call `localhost:$MOTO_PORT`, which is this proxy.
pub struct MotoProxy {
    pub moto: String,
    pub functions: Arc<Functions>,
    /// Function name → logical id.
    pub names: HashMap<String, String>,
    pub http: reqwest::Client,
}

pub async fn serve_proxy(listener: tokio::net::TcpListener, proxy: Arc<MotoProxy>) {
    let app = Router::new().fallback(proxied).with_state(proxy);
    axum::serve(listener, app).await.expect("the moto proxy");
}

async fn proxied(State(p): State<Arc<MotoProxy>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path();
    if method == Method::POST
        && let Some(name) = path.strip_prefix("/2015-03-31/functions/").and_then(|r| r.strip_suffix("/invocations"))
    {
        let name = percent_decode(name);
        // A name, or an ARN with or without a qualifier (an alias: `…:function:{name}:live`).
        let short = name
            .split_once(":function:")
            .map_or(name.as_str(), |(_, rest)| rest)
            .split(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        let Some(id) = p.names.get(&short) else {
            return (StatusCode::NOT_FOUND, format!("{{\"Type\":\"User\",\"message\":\"Function not found: {name}\"}}"))
                .into_response();
        };
        let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        return match p.functions.invoke(id, payload).await {
            Ok(out) => (StatusCode::OK, [("x-amz-executed-version", "$LATEST")], out.to_string()).into_response(),
            Err(f) => (
                StatusCode::OK,
                [("x-amz-executed-version", "$LATEST"), ("x-amz-function-error", "Unhandled")],
                json!({"errorType": f.error_type, "errorMessage": f.message}).to_string(),
            )
                .into_response(),
        };
    }
    let url = format!("{}{}", p.moto, uri.path_and_query().map_or(path, |pq| pq.as_str()));
    let mut request = p.http.request(method, url).body(body.to_vec());
    for (name, value) in &headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(r) => {
            let status = r.status();
            let mut out = HeaderMap::new();
            for (name, value) in r.headers() {
                if name != "content-length" && name != "transfer-encoding" && name != "connection" {
                    out.append(name, value.clone());
                }
            }
            let bytes = r.bytes().await.unwrap_or_default();
            (status, out, bytes).into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

fn percent_decode(s: &str) -> String {
    form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default()
}

/// One SQS event-source mapping: long-polls the queue with moto's real
/// receive/visibility semantics, delivers batches of up to `BatchSize` to the function,
/// and deletes what succeeded — with `ReportBatchItemFailures`, all but the reported
/// failures; without it, everything or (on a failed invocation) nothing.
pub async fn poll(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    queue_arn: String,
    consumer: QueueConsumer,
    functions: Arc<Functions>,
) {
    let batch = i32::try_from(consumer.batch_size.unwrap_or(10).min(10)).unwrap_or(10);
    loop {
        let got = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(batch)
            .wait_time_seconds(1)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await;
        let Ok(got) = got else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let messages = got.messages();
        if messages.is_empty() {
            continue;
        }
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let attributes: Map<String, Value> = m
                    .attributes()
                    .map(|a| a.iter().map(|(k, v)| (k.as_str().to_owned(), Value::String(v.clone()))).collect())
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(), "receiptHandle": m.receipt_handle(), "body": m.body(),
                    "attributes": attributes, "messageAttributes": {}, "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": continuity_tests::aws::REGION,
                })
            })
            .collect();
        let answer = functions.invoke(&consumer.function, json!({"Records": records})).await;
        let failed: Vec<String> = match (&answer, consumer.reports_item_failures) {
            (Ok(a), true) => a["batchItemFailures"]
                .as_array()
                .map(|f| f.iter().filter_map(|i| i["itemIdentifier"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
            (Ok(_), false) => Vec::new(),
            (Err(_), _) => messages.iter().filter_map(|m| m.message_id().map(str::to_owned)).collect(),
        };
        for m in messages {
            if !failed.iter().any(|f| Some(f.as_str()) == m.message_id())
                && let Some(handle) = m.receipt_handle()
            {
                let _ = sqs.delete_message().queue_url(&queue_url).receipt_handle(handle).send().await;
            }
        }
    }
}
