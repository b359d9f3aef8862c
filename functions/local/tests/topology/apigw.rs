//! The emulated API Gateway (REST API behind a custom domain whose base path maps to the
//! stage), driven by the template alone: the routes (path, method → function,
//! authorizer or none) from the functions' `Api` events; the REQUEST authorizer with its
//! identity source (`Authorization`) and result cache (`ReauthorizeEvery`), whose policy
//! is evaluated against each request's method ARN — a cached `Allow` that does not cover
//! another route is refused, as on AWS; the gateway responses (`GatewayResponses`: status,
//! headers from literals or `context.authorizer.*`, JSON body) for a missing token, a
//! denial, an authorizer failure, an unknown route and a failed function; and the REST
//! proxy event built as API Gateway builds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use continuity_tests::template::{ACCOUNT, Evaluated, REGION, Route, route_for};
use serde_json::{Map, Value, json};

use super::lambda::Functions;

pub const API_ID: &str = "emu1234567";

#[derive(Clone)]
struct Decision {
    principal: String,
    policy: Value,
    context: Map<String, Value>,
    at: Instant,
}

pub struct Gateway {
    routes: Vec<Route>,
    /// `GatewayResponses` of the Api, by type.
    responses: Map<String, Value>,
    /// Authorizer name → (function, identity header, cache seconds).
    authorizers: HashMap<String, (String, String, u64)>,
    stage: String,
    functions: Arc<Functions>,
    cache: Mutex<HashMap<String, Decision>>,
    /// `(method, path, status, gateway response type or "")` of every request.
    pub log: Mutex<Vec<(String, String, u16, String)>>,
}

impl Gateway {
    pub fn new(stack: &Evaluated<'_>, functions: Arc<Functions>) -> Self {
        let routes = stack.routes().unwrap_or_else(|e| panic!("{e}"));
        let apis: Vec<&str> = {
            let mut a: Vec<&str> = routes.iter().map(|r| r.api.as_str()).collect();
            a.sort_unstable();
            a.dedup();
            a
        };
        assert_eq!(apis.len(), 1, "one REST API: {apis:?}");
        let api = stack.properties(apis[0]).unwrap_or_else(|e| panic!("{e}"));
        let responses = api["GatewayResponses"].as_object().cloned().unwrap_or_default();
        let mut authorizers = HashMap::new();
        for (name, a) in api.pointer("/Auth/Authorizers").and_then(Value::as_object).into_iter().flatten() {
            let function = a["FunctionArn"].as_str().unwrap_or_default();
            // `<GetAtt:AuthorizerFunction.Arn>` or `<Ref:AuthorizerFunction.Alias>` → the logical id.
            let function = function
                .trim_start_matches("<GetAtt:")
                .trim_start_matches("<Ref:")
                .split('.')
                .next()
                .unwrap_or_default()
                .to_owned();
            assert_eq!(a["FunctionPayloadType"], "REQUEST", "{name}: only REQUEST authorizers are emulated");
            let header = a.pointer("/Identity/Headers/0").and_then(Value::as_str).unwrap_or("Authorization").to_ascii_lowercase();
            let ttl = a
                .pointer("/Identity/ReauthorizeEvery")
                .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
                .unwrap_or(300);
            authorizers.insert(name.clone(), (function, header, ttl));
        }
        let stage = api["StageName"].as_str().unwrap_or("prod").to_owned();
        Self { routes, responses, authorizers, stage, functions, cache: Mutex::new(HashMap::new()), log: Mutex::new(Vec::new()) }
    }

    /// `arn:aws:execute-api:{region}:{account}:{api}/{stage}/{METHOD}/{path}`.
    fn method_arn(&self, method: &str, path: &str) -> String {
        format!("arn:aws:execute-api:{REGION}:{ACCOUNT}:{API_ID}/{}/{method}{path}", self.stage)
    }

    /// A gateway response of the template (or API Gateway's default for the type).
    fn respond(&self, kind: &str, default_status: u16, context: Option<&Map<String, Value>>) -> Response {
        let fallback = if default_status >= 500 { "DEFAULT_5XX" } else { "DEFAULT_4XX" };
        let r = self.responses.get(kind).or_else(|| self.responses.get(fallback)).cloned().unwrap_or(Value::Null);
        let status = r["StatusCode"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| r["StatusCode"].as_u64().and_then(|s| u16::try_from(s).ok()))
            .unwrap_or(default_status);
        let mut headers = HeaderMap::new();
        for (name, source) in r.pointer("/ResponseParameters/Headers").and_then(Value::as_object).into_iter().flatten() {
            let source = source.as_str().unwrap_or_default();
            let value = if let Some(literal) = source.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
                Some(literal.to_owned())
            } else if let Some(key) = source.strip_prefix("context.authorizer.") {
                context.and_then(|c| c.get(key)).and_then(Value::as_str).map(str::to_owned)
            } else {
                panic!("gateway response {kind}: the emulator does not know the mapping {source}")
            };
            if let Some(v) = value {
                headers.insert(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(&v).unwrap());
            }
        }
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let body =
            r.pointer("/ResponseTemplates/application~1json").and_then(Value::as_str).unwrap_or(r#"{"message":null}"#).to_owned();
        (StatusCode::from_u16(status).unwrap(), headers, body).into_response()
    }

    async fn authorize(
        &self,
        name: &str,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        route: &Route,
    ) -> Result<Decision, (Response, &'static str)> {
        let (function, identity, ttl) = self.authorizers.get(name).unwrap_or_else(|| panic!("no authorizer {name}"));
        // No identity source: UNAUTHORIZED, without running the authorizer.
        let Some(token) = headers.get(identity.as_str()).and_then(|v| v.to_str().ok()).filter(|t| !t.is_empty()) else {
            return Err((self.respond("UNAUTHORIZED", 401, None), "UNAUTHORIZED"));
        };
        let arn = self.method_arn(method, path);
        let cached = self.cache.lock().unwrap().get(token).filter(|d| d.at.elapsed() < Duration::from_secs(*ttl)).cloned();
        let decision = match cached {
            Some(d) => d,
            None => {
                let event = json!({
                    "type": "REQUEST", "methodArn": arn, "resource": route.path, "path": path, "httpMethod": method,
                    "headers": single_headers(headers), "multiValueHeaders": multi_headers(headers),
                    "queryStringParameters": {}, "multiValueQueryStringParameters": {}, "pathParameters": {},
                    "stageVariables": {}, "requestContext": self.context(method, path, route, headers, None),
                });
                match self.functions.invoke(function, event).await {
                    Ok(answer) => {
                        let d = Decision {
                            principal: answer["principalId"].as_str().unwrap_or_default().to_owned(),
                            policy: answer["policyDocument"].clone(),
                            // API Gateway passes context values as strings.
                            context: answer["context"]
                                .as_object()
                                .map(|c| {
                                    c.iter()
                                        .map(|(k, v)| {
                                            (k.clone(), Value::String(v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                                        })
                                        .collect()
                                })
                                .unwrap_or_default(),
                            at: Instant::now(),
                        };
                        self.cache.lock().unwrap().insert(token.to_owned(), d.clone());
                        d
                    }
                    // A failed invocation (an error, a timeout) is never cached, and API
                    // Gateway answers it with AUTHORIZER_CONFIGURATION_ERROR (500 unless
                    // the API sets that response).
                    Err(_) => {
                        return Err((
                            self.respond("AUTHORIZER_CONFIGURATION_ERROR", 500, None),
                            "AUTHORIZER_CONFIGURATION_ERROR",
                        ));
                    }
                }
            }
        };
        if allows(&decision.policy, &arn) {
            Ok(decision)
        } else {
            Err((self.respond("ACCESS_DENIED", 403, Some(&decision.context)), "ACCESS_DENIED"))
        }
    }

    fn context(&self, method: &str, path: &str, route: &Route, headers: &HeaderMap, auth: Option<&Decision>) -> Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let mut c = json!({
            "resourceId": "emu01", "resourcePath": route.path, "httpMethod": method,
            "extendedRequestId": format!("e{}", now.as_nanos()), "requestTime": "01/Dec/2026:00:00:00 +0000",
            "path": path, "accountId": ACCOUNT, "protocol": "HTTP/1.1", "stage": self.stage,
            "domainPrefix": "mcp", "requestTimeEpoch": u64::try_from(now.as_millis()).unwrap_or_default(),
            "requestId": format!("r{}", now.as_nanos()),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("user-agent").and_then(|v| v.to_str().ok())},
            "domainName": headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("localhost"), "apiId": API_ID,
        });
        if let Some(d) = auth {
            let mut a = d.context.clone();
            a.insert("principalId".into(), Value::String(d.principal.clone()));
            c["authorizer"] = Value::Object(a);
        }
        c
    }
}

/// Serves the emulated API on `listener`.
pub async fn serve(listener: tokio::net::TcpListener, gateway: Arc<Gateway>) {
    let app = Router::new().fallback(handle).with_state(gateway);
    axum::serve(listener, app).await.expect("the emulated API Gateway");
}

/// IAM policy evaluation for `execute-api:Invoke` on `arn`: an explicit Deny wins, then
/// an Allow; nothing matching denies.
fn allows(policy: &Value, arn: &str) -> bool {
    let statements = policy["Statement"].as_array().cloned().unwrap_or_default();
    let matching = |effect: &str| {
        statements.iter().any(|s| {
            s["Effect"] == effect && {
                let resources = match &s["Resource"] {
                    Value::String(r) => vec![r.clone()],
                    Value::Array(rs) => rs.iter().filter_map(|r| r.as_str().map(str::to_owned)).collect(),
                    _ => Vec::new(),
                };
                resources.iter().any(|r| glob(r, arn))
            }
        })
    };
    !matching("Deny") && matching("Allow")
}

/// `*` matches any run of characters (IAM resource matching).
fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, tail)) => {
            s.starts_with(head)
                && (0..=s.len() - head.len()).any(|i| s.is_char_boundary(head.len() + i) && glob(tail, &s[head.len() + i..]))
        }
    }
}

fn single_headers(h: &HeaderMap) -> Map<String, Value> {
    h.iter().map(|(k, v)| (k.as_str().to_owned(), Value::String(v.to_str().unwrap_or_default().to_owned()))).collect()
}

fn multi_headers(h: &HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in h {
        if let Value::Array(a) = out.entry(k.as_str().to_owned()).or_insert_with(|| Value::Array(Vec::new())) {
            a.push(Value::String(v.to_str().unwrap_or_default().to_owned()));
        }
    }
    out
}

/// `{name}` and `{proxy+}` values of `path` under the route's template.
fn path_parameters(template: &str, path: &str) -> Map<String, Value> {
    let wanted: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut out = Map::new();
    for (i, segment) in template.split('/').filter(|s| !s.is_empty()).enumerate() {
        if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix("+}")) {
            out.insert(name.to_owned(), Value::String(wanted[i..].join("/")));
        } else if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            out.insert(name.to_owned(), Value::String(wanted.get(i).copied().unwrap_or_default().to_owned()));
        }
    }
    out
}

async fn handle(State(gw): State<Arc<Gateway>>, method: Method, uri: Uri, mut headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let method = method.as_str().to_owned();
    let (response, kind) = route(&gw, &method, &path, uri.query(), &mut headers, body).await;
    gw.log.lock().unwrap().push((method, path, response.status().as_u16(), kind.to_owned()));
    response
}

async fn route(
    gw: &Gateway,
    method: &str,
    path: &str,
    query: Option<&str>,
    headers: &mut HeaderMap,
    body: Bytes,
) -> (Response, &'static str) {
    let Some(route) = route_for(&gw.routes, method, path).cloned() else {
        return (gw.respond("MISSING_AUTHENTICATION_TOKEN", 403, None), "MISSING_AUTHENTICATION_TOKEN");
    };
    let decision = if route.authorizer == "NONE" {
        None
    } else {
        match gw.authorize(&route.authorizer, method, path, headers, &route).await {
            Ok(d) => Some(d),
            Err((r, kind)) => return (r, kind),
        }
    };
    headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
    headers.insert("x-forwarded-for", HeaderValue::from_static("127.0.0.1"));
    let mut query_single = Map::new();
    let mut query_multi = Map::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        query_single.insert(k.to_string(), Value::String(v.to_string()));
        if let Value::Array(a) = query_multi.entry(k.to_string()).or_insert_with(|| Value::Array(Vec::new())) {
            a.push(Value::String(v.to_string()));
        }
    }
    let parameters = path_parameters(&route.path, path);
    let null_if_empty = |m: Map<String, Value>| if m.is_empty() { Value::Null } else { Value::Object(m) };
    let (text, encoded) = match std::str::from_utf8(&body) {
        Ok(s) => (s.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(&body), true),
    };
    let event = json!({
        "resource": route.path, "path": path, "httpMethod": method,
        "headers": single_headers(headers), "multiValueHeaders": multi_headers(headers),
        "queryStringParameters": null_if_empty(query_single), "multiValueQueryStringParameters": null_if_empty(query_multi),
        "pathParameters": null_if_empty(parameters), "stageVariables": null,
        "requestContext": gw.context(method, path, &route, headers, decision.as_ref()),
        "body": if body.is_empty() { Value::Null } else { Value::String(text) }, "isBase64Encoded": encoded,
    });
    match gw.functions.invoke(&route.function, event).await {
        Ok(answer) => (proxy_response(&answer), ""),
        // A failed or malformed Lambda proxy answer: 502.
        Err(_) => (gw.respond("DEFAULT_5XX", 502, None), "DEFAULT_5XX"),
    }
}

/// A Lambda proxy integration's answer as API Gateway sends it to the client.
fn proxy_response(answer: &Value) -> Response {
    let status = answer["statusCode"].as_u64().and_then(|s| u16::try_from(s).ok()).unwrap_or(502);
    let mut headers = HeaderMap::new();
    for (k, v) in answer["headers"].as_object().into_iter().flatten() {
        if let Some(v) = v.as_str() {
            headers.insert(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
    }
    for (k, vs) in answer["multiValueHeaders"].as_object().into_iter().flatten() {
        for v in vs.as_array().into_iter().flatten().filter_map(Value::as_str) {
            headers.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
        }
    }
    let body = answer["body"].as_str().unwrap_or_default();
    let bytes = if answer["isBase64Encoded"] == true {
        base64::engine::general_purpose::STANDARD.decode(body).unwrap_or_default()
    } else {
        body.as_bytes().to_vec()
    };
    (StatusCode::from_u16(status).unwrap(), headers, bytes).into_response()
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn iam_resource_globs() {
        assert!(glob("arn:x:api/prod/*", "arn:x:api/prod/POST/mcp"));
        assert!(!glob("arn:x:api/prod/GET/mcp", "arn:x:api/prod/POST/mcp"));
        let allow = json!({"Statement": [{"Effect": "Allow", "Resource": "arn:x:api/prod/POST/mcp"}]});
        assert!(allows(&allow, "arn:x:api/prod/POST/mcp"));
        assert!(!allows(&allow, "arn:x:api/prod/GET/v1/connectors"), "a cached Allow for one route does not cover another");
    }
}
