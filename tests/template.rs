//! What `infra/template.yaml` deploys, checked without deploying it: names unique per
//! stack and within their services' limits, the search collection's data access policy
//! in step with the IAM policy, least-privilege S3 and Step Functions grants, the
//! pipeline's concurrency, timeouts below API Gateway's, the table's deletion
//! protection, schedules with retries and a dead-letter queue, CORS preflights and
//! gateway responses, the authorizer's identity source, the Bedrock grant following
//! `Embedder`, and the alarms and dashboard. Also the readers of
//! `continuity_tests::template` themselves (routes, queue consumers, schedules, the
//! intrinsic evaluator) on the real template and on small ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use continuity_tests::template::{Evaluated, PhysicalName, Route, Stack, Template, policy_collections, route_for};
use serde_json::{Value, json};

fn eu() -> Stack {
    Stack::new("continuity-eu", "5d2f7a10-3c4b-11ef-8a1e-0a58a9feac02")
}

fn eu_2() -> Stack {
    Stack::new("continuity-eu-2", "9e41b3c0-3c4c-11ef-b6f3-06c1d2e3f4a5")
}

/// A 50-character stack name.
fn long() -> Stack {
    let name = "continuity-eu-west-1-production-tenants-0123456789";
    assert_eq!(name.len(), 50);
    Stack::new(name, "0f1e2d3c-3c4d-11ef-a0b1-0c2d3e4f5a6b")
}

fn evaluate<'t>(t: &'t Template, stack: &Stack) -> Evaluated<'t> {
    t.evaluate(stack).unwrap_or_else(|e| panic!("{}: {e}", stack.name))
}

fn names(t: &Template, stack: &Stack) -> Vec<PhysicalName> {
    evaluate(t, stack).physical_names().unwrap()
}

/// The longest name each (resource type, property) may have. A name the table does
/// not know fails the test: classify it here with its service's limit.
fn limit(resource_type: &str, property: &str) -> Option<usize> {
    Some(match (resource_type, property) {
        // OpenSearch Serverless: lowercase, 3-32 characters, for collections, security
        // and access policies, VPC endpoints alike.
        (t, _) if t.starts_with("AWS::OpenSearchServerless::") => 32,
        ("AWS::ElastiCache::ServerlessCache", "ServerlessCacheName") => 40,
        // 3-63 lower-case letters, digits and hyphens, unique in the account and region.
        ("AWS::S3Vectors::VectorBucket", "VectorBucketName") => 63,
        // Lower-case letters, digits and single hyphens, starting with a letter.
        ("AWS::ElastiCache::User", "UserId") | ("AWS::ElastiCache::UserGroup", "UserGroupId") => 40,
        ("AWS::KMS::Alias", "AliasName") => 256,
        ("AWS::Scheduler::Schedule", "Name") => 64,
        ("AWS::Serverless::StateMachine", "Name") | ("AWS::StepFunctions::StateMachine", "StateMachineName") => 80,
        ("AWS::CloudWatch::Dashboard", "DashboardName") | ("AWS::CloudWatch::Alarm", "AlarmName") => 255,
        ("AWS::SQS::Queue", "QueueName") => 80,
        ("AWS::SNS::Topic", "TopicName") => 256,
        ("AWS::Logs::LogGroup", "LogGroupName") => 512,
        // A REST API's name need not be unique and has no documented limit; held to
        // 255 here so that it stays readable.
        ("AWS::Serverless::Api", "Name") | ("AWS::ApiGateway::RestApi", "Name") => 255,
        _ => return None,
    })
}

#[test]
fn two_stacks_share_no_physical_name() {
    let t = Template::load();
    let a = names(&t, &eu());
    let b = names(&t, &eu_2());
    assert!(a.len() >= 8, "expected the collection, its four policies and endpoint, the cache, aliases…: {a:#?}");
    let a_values: BTreeSet<&str> = a.iter().map(|n| n.value.as_str()).collect();
    let shared: Vec<&PhysicalName> = b.iter().filter(|n| a_values.contains(n.value.as_str())).collect();
    assert!(shared.is_empty(), "names both stacks would claim in one account and region: {shared:#?}");

    // Every kind of name that must be unique is there (derived per stack).
    let kinds: BTreeSet<(&str, &str)> = a.iter().map(|n| (n.resource_type.as_str(), n.property.as_str())).collect();
    for expected in [
        ("AWS::OpenSearchServerless::Collection", "Name"),
        ("AWS::OpenSearchServerless::SecurityPolicy", "Name"),
        ("AWS::OpenSearchServerless::AccessPolicy", "Name"),
        ("AWS::OpenSearchServerless::VpcEndpoint", "Name"),
        ("AWS::OpenSearchServerless::AccessPolicy", "Policy:collection"),
        ("AWS::ElastiCache::ServerlessCache", "ServerlessCacheName"),
        ("AWS::ElastiCache::User", "UserId"),
        ("AWS::ElastiCache::UserGroup", "UserGroupId"),
        ("AWS::KMS::Alias", "AliasName"),
        ("AWS::CloudWatch::Dashboard", "DashboardName"),
    ] {
        assert!(kinds.contains(&expected), "{expected:?} missing from {kinds:#?}");
    }
    // The small profile's vector bucket too (unique per account and region).
    let small = |s: Stack| names(&t, &s.with_parameter("Profile", "small"));
    let (a, b) = (small(eu()), small(eu_2()));
    let bucket = |names: &[PhysicalName]| {
        names.iter().find(|n| n.resource_type == "AWS::S3Vectors::VectorBucket").map(|n| n.value.clone()).unwrap()
    };
    assert_ne!(bucket(&a), bucket(&b));
    assert!(bucket(&a).chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{}", bucket(&a));
}

#[test]
fn every_name_fits_its_service_for_a_fifty_character_stack_name() {
    let t = Template::load();
    for stack in
        [long(), long().with_parameter("SearchCollectionName", "a".repeat(27)), long().with_parameter("Profile", "small")]
    {
        for n in names(&t, &stack) {
            let max = limit(&n.resource_type, &n.property)
                .unwrap_or_else(|| panic!("no known length limit for {} {}: add it to limit()", n.resource_type, n.property));
            assert!(n.value.len() <= max, "{n:?} is {} characters, over {max}", n.value.len());
            if n.resource_type.starts_with("AWS::ElastiCache::User") {
                let ok = n.value.starts_with(|c: char| c.is_ascii_lowercase())
                    && n.value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !n.value.contains("--")
                    && !n.value.ends_with('-');
                assert!(ok, "ElastiCache user and group ids are lowercase letters, digits and single hyphens: {n:?}");
            }
            if n.resource_type.starts_with("AWS::OpenSearchServerless::") {
                let ok = n.value.len() >= 3
                    && n.value.starts_with(|c: char| c.is_ascii_lowercase())
                    && n.value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                assert!(ok, "OpenSearch Serverless names are lowercase letters, digits and hyphens: {n:?}");
            }
        }
    }
}

#[test]
fn the_search_names_derive_from_the_stack_id_unless_given() {
    let t = Template::load();
    let collection = |stack: &Stack| evaluate(&t, stack).properties("SearchCollection").unwrap()["Name"].clone();
    // The first 8 hex digits of the stack id's UUID.
    assert_eq!(collection(&eu()), "cty-5d2f7a10");
    assert_eq!(collection(&eu_2()), "cty-9e41b3c0");
    assert_eq!(collection(&eu().with_parameter("SearchCollectionName", "continuity")), "continuity");

    // Each policy names the collection the stack creates, and its own name derives from it.
    for stack in [eu(), eu().with_parameter("SearchCollectionName", "continuity")] {
        let e = evaluate(&t, &stack);
        let name = collection(&stack);
        let name = name.as_str().unwrap();
        for (id, suffix) in [
            ("SearchEncryptionPolicy", "enc"),
            ("SearchNetworkPolicy", "net"),
            ("SearchAccessPolicy", "data"),
            ("SearchVpcEndpoint", "vpce"),
        ] {
            let props = e.properties(id).unwrap();
            assert_eq!(props["Name"], format!("{name}-{suffix}"), "{id}");
            if let Some(policy) = props.get("Policy") {
                let named = policy_collections(policy.as_str().unwrap()).unwrap();
                assert_eq!(named, BTreeSet::from([name.to_owned()]), "{id} names another collection");
            }
        }
    }
    // And the cache: continuity-{suffix}.
    assert_eq!(evaluate(&t, &eu()).properties("Cache").unwrap()["ServerlessCacheName"], "continuity-5d2f7a10");
}

/// The functions whose role gets `SearchClientPolicy`.
fn search_clients(e: &Evaluated<'_>) -> BTreeSet<String> {
    e.functions()
        .into_iter()
        .filter(|f| {
            let props = e.properties(f).unwrap();
            props["Policies"].as_array().into_iter().flatten().any(|p| p == "<Ref:SearchClientPolicy>")
        })
        .collect()
}

#[test]
fn every_search_client_is_a_principal_of_the_data_access_policy() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let clients = search_clients(&e);
    assert!(clients.contains("TriageFunction"), "triage indexes on Write and compares on Score: {clients:?}");

    let policy = e.properties("SearchAccessPolicy").unwrap();
    let policy: Value = serde_json::from_str(policy["Policy"].as_str().unwrap()).unwrap();
    let principals: BTreeSet<String> = policy
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["Principal"].as_array().unwrap().iter())
        .map(|p| {
            let p = p.as_str().unwrap();
            let role = p.strip_prefix("<GetAtt:").and_then(|r| r.strip_suffix("Role.Arn>"));
            role.unwrap_or_else(|| panic!("principal {p} is not a function's role")).to_owned()
        })
        .collect();
    assert_eq!(principals, clients, "the data access policy's principals and the roles with SearchClientPolicy differ");
}

/// Every `Allow` statement of the template's identity and endpoint policies, with where
/// it is.
fn allow_statements(e: &Evaluated<'_>) -> Vec<(String, Value)> {
    fn statements(doc: &Value) -> Vec<Value> {
        match doc.get("Statement") {
            Some(Value::Array(items)) => items.clone(),
            Some(one) => vec![one.clone()],
            None => Vec::new(),
        }
    }
    let mut out = Vec::new();
    for (id, resource) in e.resources() {
        let kind = resource["Type"].as_str().unwrap_or_default();
        let props = e.properties(&id).unwrap();
        let mut docs = Vec::new();
        match kind {
            "AWS::Serverless::Function" | "AWS::Serverless::StateMachine" => {
                for policy in props["Policies"].as_array().into_iter().flatten() {
                    for sam in ["S3CrudPolicy", "S3ReadPolicy", "S3WritePolicy", "S3FullAccessPolicy"] {
                        assert!(policy.get(sam).is_none(), "{id} uses the SAM policy template {sam} (bucket-level wildcards)");
                    }
                    docs.push(policy.clone());
                }
            }
            "AWS::IAM::ManagedPolicy" | "AWS::IAM::Policy" | "AWS::EC2::VPCEndpoint" | "AWS::S3::BucketPolicy" => {
                docs.push(props["PolicyDocument"].clone());
            }
            "AWS::IAM::Role" => {
                docs.extend(props["Policies"].as_array().into_iter().flatten().map(|p| p["PolicyDocument"].clone()));
            }
            _ => {}
        }
        for doc in docs {
            for statement in statements(&doc) {
                if statement["Effect"] == "Allow" {
                    out.push((id.clone(), statement));
                }
            }
        }
    }
    out
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn s3_and_step_functions_grants_are_scoped() {
    let t = Template::load();
    for stack in [eu(), eu().with_parameter("Embedder", "hashing")] {
        let e = evaluate(&t, &stack);
        let statements = allow_statements(&e);
        assert!(statements.len() > 10, "expected the functions' statements: {statements:#?}");
        let mut listers = BTreeSet::new();
        for (id, s) in &statements {
            let actions = strings(&s["Action"]);
            let resources = strings(&s["Resource"]);
            for action in &actions {
                assert!(action != "*" && action != "s3:*", "{id} allows {action}");
                if let Some(s3) = action.strip_prefix("s3:") {
                    assert!(!s3.contains('*'), "{id} allows the S3 wildcard {action}");
                    for resource in &resources {
                        // A bucket-level resource is the bucket itself (no key part) or "*".
                        let bucket_level = !resource.contains('/');
                        if bucket_level {
                            assert_eq!(action, "s3:ListBucket", "{id} allows {action} on the bucket {resource}");
                            listers.insert(id.clone());
                        }
                    }
                }
                if action == "states:StartExecution" || action == "states:*" {
                    assert!(!resources.iter().any(|r| r == "*"), "{id} allows {action} on any state machine");
                    assert!(
                        resources.iter().all(|r| r == "<Ref:TriageStateMachine>"),
                        "{id}: StartExecution on {resources:?}, not the triage state machine"
                    );
                }
            }
        }
        // Compaction lists backup files: the functions that run it (maintenance on
        // `serve`-style runs, the pipeline for queued daily jobs) and the endpoint only.
        assert!(listers.contains("MaintenanceFunction") && listers.contains("PipelineFunction"), "{listers:?}");
        assert!(
            listers.iter().all(|l| ["MaintenanceFunction", "PipelineFunction", "S3Endpoint"].contains(&l.as_str())),
            "{listers:?}"
        );
    }
}

#[test]
fn the_pipeline_and_maintenance_are_wired_for_the_resume_fan_out() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let pipeline = e.properties("PipelineFunction").unwrap();
    assert!(pipeline.get("ReservedConcurrentExecutions").is_none(), "throttling would dead-letter healthy messages");
    assert_eq!(pipeline["Environment"]["Variables"]["CONTINUITY_TRIAGE_STATE_MACHINE"], "<Ref:TriageStateMachine>");
    let consumers = t.queue_consumers();
    let work = consumers.iter().find(|c| c.function == "PipelineFunction").unwrap();
    assert_eq!(work.queue, "WorkQueue");
    assert_eq!(work.max_concurrency, Some(10));
    let bounded = t.evaluate(&eu().with_parameter("PipelineMaxConcurrency", 40)).unwrap().queue_consumers().unwrap();
    assert_eq!(bounded.iter().find(|c| c.function == "PipelineFunction").unwrap().max_concurrency, Some(40));

    // The pipeline restarts, re-sends and heartbeats; the maintenance job sends to the queue.
    let actions = |id: &str| -> BTreeSet<String> {
        allow_statements(&e).into_iter().filter(|(f, _)| f == id).flat_map(|(_, s)| strings(&s["Action"])).collect()
    };
    let pipeline_actions = actions("PipelineFunction");
    for a in ["states:StartExecution", "states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"] {
        assert!(pipeline_actions.contains(a), "PipelineFunction lacks {a}: {pipeline_actions:?}");
    }
    let maintenance_actions = actions("MaintenanceFunction");
    assert!(
        !maintenance_actions.iter().any(|a| a.starts_with("states:")),
        "the resume runs in the pipeline: {maintenance_actions:?}"
    );
    let maintenance = e.properties("MaintenanceFunction").unwrap();
    let sends = maintenance["Policies"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.pointer("/SQSSendMessagePolicy/QueueName") == Some(&json!("<GetAtt:WorkQueue.QueueName>")));
    assert!(sends, "MaintenanceFunction cannot send resume messages to the work queue");
    // The pipeline runs each tenant's daily jobs: it searches, embeds and lists backups.
    let policies = pipeline["Policies"].as_array().unwrap();
    assert!(policies.contains(&json!("<Ref:SearchClientPolicy>")), "the reindex needs the search collection");
}

#[test]
fn every_sqs_consumer_fits_its_queues_visibility_timeout() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    for c in t.queue_consumers() {
        let timeout = e.properties(&c.function).unwrap()["Timeout"].as_u64().unwrap();
        let visibility = e.properties(&c.queue).unwrap()["VisibilityTimeout"].as_u64().unwrap();
        assert!(visibility >= 6 * timeout, "{}: visibility {visibility} s < 6 × {timeout} s of {}", c.queue, c.function);
        assert!(c.reports_item_failures, "{} does not report item failures", c.function);
    }
}

#[test]
fn functions_behind_api_gateway_stop_before_its_29_second_timeout() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let mut behind: BTreeSet<String> = t.routes().into_iter().map(|r| r.function).collect();
    behind.insert("AuthorizerFunction".to_owned());
    assert!(behind.len() >= 6, "{behind:?}");
    for f in &behind {
        let timeout = e.properties(f).unwrap()["Timeout"].as_u64().unwrap_or_else(|| panic!("{f} has no Timeout"));
        assert!(timeout < 29, "{f}: Timeout {timeout} s is not below API Gateway's 29 s");
    }
    // API Gateway waits 10 s for an authorizer's answer: past it, the request fails
    // however the authorizer ends; within it, a failed invocation is a 503.
    let authorizer = e.properties("AuthorizerFunction").unwrap()["Timeout"].as_u64().unwrap();
    assert!(authorizer < 10, "the authorizer's Timeout {authorizer} s is not below API Gateway's 10 s");
}

#[test]
fn the_table_has_deletion_protection() {
    let t = Template::load();
    let table = evaluate(&t, &eu()).properties("Table").unwrap();
    assert_eq!(table["DeletionProtectionEnabled"], true);
}

#[test]
fn every_schedule_retries_and_dead_letters() {
    let t = Template::load();
    let schedules = t.schedules();
    assert_eq!(schedules.len(), 4, "{schedules:#?}");
    for s in &schedules {
        assert_eq!(s.kind, "ScheduleV2");
        let retry = &s.properties["RetryPolicy"];
        assert!(retry["MaximumRetryAttempts"].is_u64() && retry["MaximumEventAgeInSeconds"].is_u64(), "{s:#?}");
        let dlq = s.properties["DeadLetterConfig"]["Arn"].as_str().unwrap_or_else(|| panic!("{s:#?}"));
        assert_eq!(dlq, "<GetAtt:SchedulerDeadLetterQueue.Arn>");
        // SAM's default name is the same in every stack.
        assert_eq!(s.name, None, "{}.{} gets a fixed name", s.function, s.event);
    }
    let e = evaluate(&t, &eu());
    // The scheduler's retries and dead-letter queue cover only the (asynchronous)
    // invoke: a run that fails must reach a dead-letter queue too, through the
    // function's own on-failure destination.
    for f in schedules.iter().map(|s| s.function.as_str()).collect::<BTreeSet<_>>() {
        let config = &e.properties(f).unwrap()["EventInvokeConfig"];
        let failure = &config["DestinationConfig"]["OnFailure"];
        assert_eq!(
            (failure["Type"].as_str(), failure["Destination"].as_str()),
            (Some("SQS"), Some("<GetAtt:SchedulerDeadLetterQueue.Arn>")),
            "{f}: {config}"
        );
        assert!(config["MaximumRetryAttempts"].as_u64().is_some_and(|n| n <= 2), "{f}: {config}");
    }
    let dlq = e.properties("SchedulerDeadLetterQueue").unwrap();
    assert_eq!(dlq["MessageRetentionPeriod"], 1_209_600);
    assert_eq!(dlq["SqsManagedSseEnabled"], true);
}

#[test]
fn the_schedules_reader_finds_the_maintenance_jobs() {
    let schedules = Template::load().schedules();
    let by_event: BTreeMap<&str, _> = schedules.iter().map(|s| (s.event.as_str(), s)).collect();
    assert_eq!(by_event["Hourly"].function, "MaintenanceFunction");
    assert_eq!(by_event["Hourly"].expression, "rate(1 hour)");
    assert_eq!(by_event["Hourly"].input, None);
    assert_eq!(by_event["Daily"].expression, "rate(1 day)");
    assert_eq!(by_event["Daily"].input, Some(json!({"job": "daily"})));
    // Heartbeats on their own schedule, with margin: a wait escalates after two missed
    // hours, and three runs fit in them.
    assert_eq!(by_event["Heartbeat"].function, "MaintenanceFunction");
    assert_eq!(by_event["Heartbeat"].expression, "rate(30 minutes)");
    assert_eq!(by_event["Heartbeat"].input, Some(json!({"job": "heartbeat"})));
    assert_eq!(by_event["Pulls"].function, "MaintenanceFunction");
    assert_eq!(by_event["Pulls"].expression, "rate(5 minutes)");
    assert_eq!(by_event["Pulls"].input, Some(json!({"job": "pulls"})));
}

fn route<'r>(routes: &'r [Route], method: &str, path: &str) -> &'r Route {
    route_for(routes, method, path).unwrap_or_else(|| panic!("no route for {method} {path}"))
}

#[test]
fn the_routes_reader_finds_every_route() {
    let routes = Template::load().routes();
    let expect = |method: &str, path: &str, function: &str, authorizer: &str| {
        let r = route(&routes, method, path);
        assert_eq!((r.function.as_str(), r.authorizer.as_str()), (function, authorizer), "{method} {path}: {r:?}");
    };
    expect("POST", "/mcp", "McpFunction", "ContinuityAuthorizer");
    expect("GET", "/mcp", "McpFunction", "ContinuityAuthorizer");
    expect("DELETE", "/mcp", "McpFunction", "ContinuityAuthorizer");
    expect("POST", "/", "McpFunction", "ContinuityAuthorizer");
    expect("GET", "/healthz", "McpFunction", "NONE");
    expect("GET", "/.well-known/oauth-authorization-server", "OAuthFunction", "NONE");
    expect("GET", "/.well-known/oauth-protected-resource/mcp", "OAuthFunction", "NONE");
    expect("POST", "/oauth/token", "OAuthFunction", "NONE");
    expect("GET", "/oauth/authorize", "OAuthFunction", "NONE");
    expect("GET", "/v1/capabilities", "AdkFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/capabilities/kb.search", "AdkFunction", "ContinuityAuthorizer");
    expect("GET", "/v1/connectors", "IngestFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/connectors/crm", "IngestFunction", "ContinuityAuthorizer");
    expect("DELETE", "/v1/connectors/crm", "IngestFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/connectors/crm/connect", "IngestFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/connectors/crm/sync", "IngestFunction", "ContinuityAuthorizer");
    expect("GET", "/v1/connectors/pulls", "IngestFunction", "ContinuityAuthorizer");
    expect("GET", "/v1/connectors/oauth/callback", "IngestFunction", "NONE");
    expect("POST", "/v1/webhooks/acme/stripe", "IngestFunction", "NONE");
    expect("GET", "/dashboard/connectors", "ApprovalsFunction", "NONE");
    expect("POST", "/dashboard/connectors/hubspot/sync", "ApprovalsFunction", "NONE");
    expect("PUT", "/v1/admin/source-apps/hubspot", "AdminFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/ingest/crm", "IngestFunction", "ContinuityAuthorizer");
    // A literal segment beats {source}.
    assert_eq!(route(&routes, "GET", "/v1/ingest/failures").event, "IngestFailures");
    expect("POST", "/v1/kb/documents", "IngestFunction", "ContinuityAuthorizer");
    expect("GET", "/v1/kb/review", "IngestFunction", "ContinuityAuthorizer");
    expect("GET", "/v1/approvals", "ApprovalsFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/approvals/p-1/approve", "ApprovalsFunction", "ContinuityAuthorizer");
    expect("POST", "/v1/approvals/p-1/reject", "ApprovalsFunction", "ContinuityAuthorizer");
    expect("GET", "/approvals", "ApprovalsFunction", "NONE");
    expect("POST", "/approvals/sign-in", "ApprovalsFunction", "NONE");
    expect("POST", "/v1/admin/tenants", "AdminFunction", "ContinuityAuthorizer");
    expect("PATCH", "/v1/admin/tenants/acme/users/ada@acme.example", "AdminFunction", "ContinuityAuthorizer");
    expect("PUT", "/v1/admin/entities/account/acme-1", "AdminFunction", "ContinuityAuthorizer");
    assert!(route_for(&routes, "GET", "/nope").is_none());
    assert!(route_for(&routes, "PUT", "/mcp").is_none());
    assert!(route_for(&routes, "GET", "/v1/approvals/p-1/approve").is_none());

    let functions: BTreeSet<&str> = routes.iter().map(|r| r.function.as_str()).collect();
    assert_eq!(
        functions,
        BTreeSet::from(["AdkFunction", "AdminFunction", "ApprovalsFunction", "IngestFunction", "McpFunction", "OAuthFunction"])
    );
}

#[test]
fn the_routes_reader_follows_the_template() {
    let t = Template::load();
    let before = t.routes();

    let mut doc = t.doc.clone();
    let events = doc.pointer_mut("/Resources/McpFunction/Properties/Events").unwrap().as_object_mut().unwrap();
    assert!(events.remove("Healthz").is_some());
    let events = doc.pointer_mut("/Resources/IngestFunction/Properties/Events").unwrap().as_object_mut().unwrap();
    events.insert(
        "Extra".to_owned(),
        json!({"Type": "Api", "Properties": {"RestApiId": {"Ref": "Api"}, "Path": "/v1/extra/{id}", "Method": "put"}}),
    );
    let after = Template::from_value(doc).routes();

    assert!(route_for(&before, "GET", "/healthz").is_some());
    assert!(route_for(&after, "GET", "/healthz").is_none(), "the removed event is still routed");
    let extra = route(&after, "PUT", "/v1/extra/42");
    assert_eq!((extra.function.as_str(), extra.authorizer.as_str()), ("IngestFunction", "ContinuityAuthorizer"));
    assert_eq!(after.len(), before.len());
}

#[test]
fn browser_preflights_skip_the_authorizer_and_reach_the_paths_function() {
    let t = Template::load();
    let routes = t.routes();
    for path in ["/mcp", "/", "/oauth/{proxy+}", "/.well-known/{proxy+}"] {
        let options =
            routes.iter().find(|r| r.path == path && r.method == "OPTIONS").unwrap_or_else(|| panic!("no OPTIONS {path}"));
        assert_eq!(options.authorizer, "NONE", "OPTIONS {path}");
        for other in routes.iter().filter(|r| r.path == path) {
            assert_eq!(other.function, options.function, "{} {path}", other.method);
        }
    }
    let e = evaluate(&t, &eu().with_parameter("AllowedOrigins", "https://app.example.com"));
    for f in routes.iter().map(|r| &r.function).collect::<BTreeSet<_>>() {
        let env = &e.properties(f).unwrap()["Environment"]["Variables"];
        assert_eq!(env["CONTINUITY_ALLOWED_ORIGINS"], "https://app.example.com", "{f}");
        assert_eq!(env["CONTINUITY_STACK"], "continuity-eu", "{f}");
    }
}

#[test]
fn the_authorizer_has_an_identity_source_and_the_401s_say_where_to_sign_in() {
    let t = Template::load();
    let api = |stack: Stack| evaluate(&t, &stack).properties("Api").unwrap();
    let plain = api(eu());
    let identity = &plain["Auth"]["Authorizers"]["ContinuityAuthorizer"]["Identity"];
    assert_eq!(identity["Headers"], json!(["Authorization"]));
    assert_eq!(identity["ReauthorizeEvery"], 60);

    let responses = &plain["GatewayResponses"];
    for kind in ["ACCESS_DENIED", "UNAUTHORIZED", "AUTHORIZER_FAILURE", "AUTHORIZER_CONFIGURATION_ERROR", "THROTTLED"] {
        let headers = &responses[kind]["ResponseParameters"]["Headers"];
        assert_eq!(headers["Access-Control-Allow-Origin"], "'*'", "{kind}");
        assert!(headers["Access-Control-Expose-Headers"].as_str().unwrap().contains("WWW-Authenticate"), "{kind}");
    }
    assert_eq!(
        responses["ACCESS_DENIED"]["ResponseParameters"]["Headers"]["WWW-Authenticate"],
        "context.authorizer.wwwAuthenticate"
    );
    // An authorizer that errors or times out is an outage (API Gateway's
    // AUTHORIZER_CONFIGURATION_ERROR, else 500 without Retry-After or CORS), as is a
    // failed authentication: 503, retry.
    for kind in ["AUTHORIZER_FAILURE", "AUTHORIZER_CONFIGURATION_ERROR"] {
        assert_eq!(responses[kind]["StatusCode"], "503", "{kind}");
        assert_eq!(responses[kind]["ResponseParameters"]["Headers"]["Retry-After"], "'1'", "{kind}");
    }
    assert_eq!(responses["UNAUTHORIZED"]["ResponseParameters"]["Headers"]["WWW-Authenticate"], "'Bearer realm=\"continuity\"'");

    let custom = api(eu().with_parameter("PublicBaseUrl", "https://eu.continuity.example.com"));
    assert_eq!(
        custom["GatewayResponses"]["UNAUTHORIZED"]["ResponseParameters"]["Headers"]["WWW-Authenticate"],
        "'Bearer realm=\"continuity\", resource_metadata=\"https://eu.continuity.example.com/.well-known/oauth-protected-resource/mcp\"'"
    );
}

#[test]
fn the_bedrock_grant_follows_the_embedder() {
    let t = Template::load();
    let bedrock = |stack: Stack| -> (Vec<String>, bool) {
        let e = evaluate(&t, &stack);
        let resources = allow_statements(&e)
            .into_iter()
            .filter(|(_, s)| strings(&s["Action"]).iter().any(|a| a.starts_with("bedrock:")))
            .flat_map(|(_, s)| strings(&s["Resource"]))
            .collect();
        (resources, e.has_resource("BedrockEndpoint"))
    };
    assert_eq!(
        bedrock(eu()),
        (vec!["arn:aws:bedrock:eu-west-1::foundation-model/amazon.titan-embed-text-v2:0".to_owned()], true)
    );
    // The dimensions are not part of the model id.
    assert_eq!(bedrock(eu().with_parameter("Embedder", "bedrock:amazon.titan-embed-text-v2:0:1024")), bedrock(eu()));
    assert_eq!(
        bedrock(eu().with_parameter("Embedder", "bedrock:example.embed-model:3:256")),
        (vec!["arn:aws:bedrock:eu-west-1::foundation-model/example.embed-model:3".to_owned()], true)
    );
    assert_eq!(bedrock(eu().with_parameter("Embedder", "hashing")), (Vec::new(), false));

    // The dropped branch would evaluate too: the padding keeps Fn::Select in range.
    let e = evaluate(&t, &eu().with_parameter("Embedder", "hashing"));
    let raw = t.doc.pointer("/Resources/SearchClientPolicy/Properties/PolicyDocument/Statement/2/Fn::If/1/Resource").unwrap();
    assert_eq!(e.eval(raw).unwrap(), "arn:aws:bedrock:eu-west-1::foundation-model/:");
}

#[test]
fn every_alarm_notifies_a_topic_and_the_dashboard_is_json() {
    let t = Template::load();
    let own = evaluate(&t, &eu());
    assert!(own.has_resource("AlarmTopic"));
    let alarms = own.resources_of_type("AWS::CloudWatch::Alarm");
    assert!(alarms.len() >= 8 + 2 * own.functions().len(), "{alarms:?}");
    for a in &alarms {
        let p = own.properties(a).unwrap();
        assert_eq!(p["AlarmActions"], json!(["<Ref:AlarmTopic>"]), "{a}");
        assert_eq!(p["OKActions"], json!(["<Ref:AlarmTopic>"]), "{a}");
        assert_eq!(p["TreatMissingData"], "notBreaching", "{a}");
    }
    for f in own.functions() {
        for kind in ["Errors", "Throttles"] {
            assert!(alarms.contains(&format!("{f}{kind}Alarm")), "no {kind} alarm for {f}");
        }
    }
    for queue in ["DeadLetterQueue", "ApprovalWaitsDeadLetterQueue", "SchedulerDeadLetterQueue"] {
        let watched = alarms.iter().any(|a| {
            let p = own.properties(a).unwrap();
            p["MetricName"] == "ApproximateNumberOfMessagesVisible"
                && p["Dimensions"][0]["Value"] == format!("<GetAtt:{queue}.QueueName>")
        });
        assert!(watched, "no alarm on {queue}");
    }

    let topic = "arn:aws:sns:eu-west-1:123456789012:oncall";
    let given = evaluate(&t, &eu().with_parameter("AlarmTopicArn", topic));
    assert!(!given.has_resource("AlarmTopic"));
    assert_eq!(given.properties(&alarms[0]).unwrap()["AlarmActions"], json!([topic]));

    let body = own.properties("Dashboard").unwrap()["DashboardBody"].as_str().unwrap().to_owned();
    let body: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("the dashboard body is not JSON: {e}"));
    let text = body.to_string();
    for metric in [
        "Requests",
        "Errors",
        "ServerErrors",
        "Latency",
        "5XXError",
        "4XXError",
        "Throttles",
        "Duration",
        "ApproximateAgeOfOldestMessage",
        "TriageAutoApproved",
        "TriageHuman",
        "TriageRejected",
        "ApprovalWaitsNearTimeout",
        "HeartbeatFailures",
        "MaintenanceFailures",
        "BlobBackupFailures",
        "ExecutionsStarted",
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "CacheHits",
        "CacheMisses",
        "AuthorizerDenials",
    ] {
        assert!(text.contains(&format!("\"{metric}\"")), "the dashboard lacks {metric}");
    }
    assert!(!text.contains("${"), "an unsubstituted variable in the dashboard");
}

// ----------------------------------------------------------- the evaluator itself

fn small(yaml: &str) -> Template {
    Template::parse(yaml).unwrap()
}

#[test]
fn short_form_tags_become_long_form_json() {
    let t = small(
        "Resources:\n  A:\n    Type: X\n    Properties:\n      R: !Ref P\n      G: !GetAtt Cache.Endpoint.Address\n      S: !Sub \"${AWS::Region}\"\n      L: !Select [0, !Split [\",\", \"a,b\"]]\n      C: !If [Yes, 1, 2]\n",
    );
    let p = &t.doc["Resources"]["A"]["Properties"];
    assert_eq!(p["R"], json!({"Ref": "P"}));
    assert_eq!(p["G"], json!({"Fn::GetAtt": ["Cache", "Endpoint.Address"]}));
    assert_eq!(p["S"], json!({"Fn::Sub": "${AWS::Region}"}));
    assert_eq!(p["L"], json!({"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]}));
    assert_eq!(p["C"], json!({"Fn::If": ["Yes", 1, 2]}));
    assert!(Template::parse("A: !Bogus x\n").is_err());
}

#[test]
fn intrinsics_and_conditions_evaluate() {
    let t = small(
        r#"
Parameters:
  Name: { Type: String, Default: "" }
  Size: { Type: Number, Default: 3 }
Conditions:
  HasName: !Not [!Equals [!Ref Name, ""]]
  Big: !Equals [!Ref Size, 3]
  Both: !And [!Condition HasName, !Condition Big]
  Either: !Or [!Condition HasName, !Condition Big]
Resources:
  Queue: { Type: AWS::SQS::Queue }
  Gone: { Type: AWS::SQS::Queue, Condition: HasName }
  Thing:
    Type: X
    Properties:
      Sub: !Sub ["${AWS::StackName}-${V}-${Queue}-${Queue.Arn}-${!Literal}-${Size}", { V: !Select [1, [a, b]] }]
      Join: !Join ["/", [!Ref AWS::Region, !Ref AWS::AccountId, !GetAtt Queue.Arn]]
      Suffix: !Select [0, !Split ["-", !Select [2, !Split ["/", !Ref AWS::StackId]]]]
      Maybe: !If [HasName, !Ref Name, !Ref AWS::NoValue]
      List: [a, !If [HasName, b, !Ref AWS::NoValue], c]
"#,
    );
    let e = t.evaluate(&Stack::new("s", "abcdef01-2345")).unwrap();
    assert!(!e.condition("HasName") && e.condition("Big") && !e.condition("Both") && e.condition("Either"));
    assert!(!e.has_resource("Gone") && e.has_resource("Queue"));
    let p = e.properties("Thing").unwrap();
    assert_eq!(p["Sub"], "s-b-<Ref:Queue>-<GetAtt:Queue.Arn>-${Literal}-3");
    assert_eq!(p["Join"], "eu-west-1/123456789012/<GetAtt:Queue.Arn>");
    assert_eq!(p["Suffix"], "abcdef01");
    assert!(p.get("Maybe").is_none());
    assert_eq!(p["List"], json!(["a", "c"]));

    let named = t.evaluate(&Stack::new("s", "u").with_parameter("Name", "n")).unwrap();
    assert!(named.condition("Both") && named.has_resource("Gone"));
    assert_eq!(named.properties("Thing").unwrap()["List"], json!(["a", "b", "c"]));

    assert!(t.evaluate(&Stack::default().with_parameter("Nope", "x")).is_err(), "an unknown parameter is an error");
    let err = e.eval(&json!({"Fn::Select": [2, {"Fn::Split": [":", "hashing"]}]})).unwrap_err();
    assert!(err.contains("out of range"), "{err}");
    assert!(e.eval(&json!({"Ref": "Missing"})).is_err());
}

#[test]
fn globals_merge_into_functions_as_sam_does() {
    let t = small(
        r#"
Globals:
  Function:
    Timeout: 25
    Environment: { Variables: { A: "1", B: "2" } }
    Layers: [g]
Resources:
  F:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 5
      Environment: { Variables: { B: "3" } }
      Layers: [l]
      Events:
        Q: { Type: SQS, Properties: { Queue: !GetAtt Q.Arn, BatchSize: 5, ScalingConfig: { MaximumConcurrency: 2 } } }
        S: { Type: ScheduleV2, Properties: { ScheduleExpression: rate(1 hour), Input: '{"job":"x"}' } }
        A: { Type: Api, Properties: { Path: /x, Method: get } }
  Q: { Type: AWS::SQS::Queue }
"#,
    );
    let e = t.evaluate(&Stack::default()).unwrap();
    let f = e.properties("F").unwrap();
    assert_eq!(f["Timeout"], 5);
    assert_eq!(f["Environment"]["Variables"], json!({"A": "1", "B": "3"}));
    assert_eq!(f["Layers"], json!(["g", "l"]));

    let consumers = t.queue_consumers();
    assert_eq!((consumers[0].queue.as_str(), consumers[0].batch_size, consumers[0].max_concurrency), ("Q", Some(5), Some(2)));
    let schedules = t.schedules();
    // Without OmitName or Name, SAM names the schedule after the event.
    assert_eq!(schedules[0].name.as_deref(), Some("FS"));
    assert_eq!(schedules[0].input, Some(json!({"job": "x"})));
    let routes = t.routes();
    assert_eq!(
        (routes[0].method.as_str(), routes[0].api.as_str(), routes[0].authorizer.as_str()),
        ("GET", "ServerlessRestApi", "NONE")
    );
}

#[test]
fn route_matching_prefers_the_most_specific_resource() {
    let r = |method: &str, path: &str, function: &str| Route {
        method: method.into(),
        path: path.into(),
        function: function.into(),
        authorizer: "NONE".into(),
        event: function.into(),
        api: "Api".into(),
    };
    let routes = vec![
        r("GET", "/a/{proxy+}", "Greedy"),
        r("GET", "/a/{id}", "Param"),
        r("GET", "/a/b", "Literal"),
        r("ANY", "/a/b", "Any"),
        r("POST", "/", "Root"),
    ];
    assert_eq!(route_for(&routes, "GET", "/a/b").unwrap().function, "Literal");
    assert_eq!(route_for(&routes, "PUT", "/a/b").unwrap().function, "Any");
    assert_eq!(route_for(&routes, "GET", "/a/c").unwrap().function, "Param");
    assert_eq!(route_for(&routes, "GET", "/a/c/d").unwrap().function, "Greedy");
    assert!(route_for(&routes, "GET", "/a").is_none(), "{{proxy+}} needs a segment");
    assert_eq!(route_for(&routes, "POST", "/").unwrap().function, "Root");
}

#[test]
fn the_cache_admits_only_the_functions_iam_user() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let cache = e.properties("Cache").unwrap();
    assert_eq!(cache["UserGroupId"], "<Ref:CacheUserGroup>");
    let group = e.properties("CacheUserGroup").unwrap();
    let members: Vec<&str> = group["UserIds"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(members, ["<Ref:CacheDefaultUser>", "<Ref:CacheUser>"]);
    let user = e.properties("CacheUser").unwrap();
    assert_eq!(user["AuthenticationMode"]["Type"], "iam");
    assert_eq!(user["UserId"], user["UserName"], "IAM users: the name is the id");
    let default = e.properties("CacheDefaultUser").unwrap();
    assert_eq!(default["UserName"], "default");
    assert!(default["AccessString"].as_str().unwrap().starts_with("off "), "the default user cannot sign in");
    // Every function that reaches the cache signs in as that user and may.
    for f in e.functions() {
        let props = e.properties(&f).unwrap();
        let env = &props["Environment"]["Variables"];
        if env.get("CONTINUITY_REDIS_URLS").is_none() {
            continue;
        }
        assert_eq!(env["CONTINUITY_REDIS_IAM_USER"], "<Ref:CacheUser>", "{f}");
        assert_eq!(env["CONTINUITY_REDIS_CACHE_NAME"], "<Ref:Cache>", "{f}");
        let policies = props["Policies"].as_array().unwrap();
        assert!(policies.iter().any(|p| p == "<Ref:CacheClientPolicy>"), "{f} lacks elasticache:Connect");
    }
    let policy = e.properties("CacheClientPolicy").unwrap();
    let statement = &policy["PolicyDocument"]["Statement"][0];
    assert_eq!(statement["Action"], "elasticache:Connect");
    assert_eq!(statement["Resource"], serde_json::json!(["<GetAtt:Cache.ARN>", "<GetAtt:CacheUser.Arn>"]));
}

/// Outbound HTTPS needs the internet: `ConnectorEgress=nat` adds a NAT gateway and two
/// egress subnets routed through it, and only the functions that call out run there
/// (OAuth: IdP key sets and client metadata documents; ingest and approvals: connect,
/// token exchange, revoke; pipeline: pulls and notifications; triage: approved
/// actions). The default adds nothing (no internet route at all); every other function
/// and the cache stay in subnets without one; the security group allows HTTPS out only.
#[test]
fn only_the_functions_that_call_out_get_an_internet_route() {
    const CALL_OUT: [&str; 5] = ["OAuthFunction", "IngestFunction", "ApprovalsFunction", "PipelineFunction", "TriageFunction"];
    let private = json!(["<Ref:PrivateSubnetA>", "<Ref:PrivateSubnetB>"]);
    let egress = json!(["<Ref:EgressSubnetA>", "<Ref:EgressSubnetB>"]);
    let t = Template::load();
    let without = evaluate(&t, &eu());
    assert!(without.resources_of_type("AWS::EC2::NatGateway").is_empty());
    assert!(without.resources_of_type("AWS::EC2::InternetGateway").is_empty());
    assert!(without.resources_of_type("AWS::EC2::Route").is_empty(), "no route leaves the VPC");
    for f in without.functions() {
        assert_eq!(without.properties(&f).unwrap()["VpcConfig"]["SubnetIds"], private, "{f}");
    }
    let with = evaluate(&t, &eu().with_parameter("ConnectorEgress", "nat"));
    assert_eq!(with.resources_of_type("AWS::EC2::NatGateway"), ["NatGateway"]);
    // Exactly one route leaves through the NAT gateway: the egress subnets' default.
    let mut routes = with.resources_of_type("AWS::EC2::Route");
    routes.sort();
    assert_eq!(routes, ["EgressDefaultRoute", "PublicDefaultRoute"]);
    let route = with.properties("EgressDefaultRoute").unwrap();
    assert_eq!(
        (route["DestinationCidrBlock"].as_str(), route["RouteTableId"].clone(), route["NatGatewayId"].clone()),
        (Some("0.0.0.0/0"), json!("<Ref:EgressRouteTable>"), json!("<Ref:NatGateway>"))
    );
    for subnet in ["EgressSubnetA", "EgressSubnetB"] {
        let association = with
            .resources_of_type("AWS::EC2::SubnetRouteTableAssociation")
            .into_iter()
            .find(|a| with.properties(a).unwrap()["SubnetId"] == json!(format!("<Ref:{subnet}>")))
            .unwrap_or_else(|| panic!("{subnet} has no route table"));
        assert_eq!(with.properties(&association).unwrap()["RouteTableId"], json!("<Ref:EgressRouteTable>"));
    }
    for f in with.functions() {
        let expected = if CALL_OUT.contains(&f.as_str()) { &egress } else { &private };
        let vpc = &with.properties(&f).unwrap()["VpcConfig"];
        assert_eq!(&vpc["SubnetIds"], expected, "{f}");
        assert_eq!(vpc["SecurityGroupIds"], json!(["<Ref:LambdaSecurityGroup>"]), "{f}");
    }
    assert_eq!(with.functions().len(), 10, "a new function must be placed in one list or the other");
    // The egress subnets still reach DynamoDB and S3 through the gateway endpoints.
    for endpoint in ["DynamoDbEndpoint", "S3Endpoint"] {
        assert_eq!(
            with.properties(endpoint).unwrap()["RouteTableIds"],
            json!(["<Ref:PrivateRouteTable>", "<Ref:EgressRouteTable>"]),
            "{endpoint}"
        );
    }
    let egress_rules = with.properties("LambdaSecurityGroup").unwrap()["SecurityGroupEgress"].clone();
    assert!(egress_rules.as_array().unwrap().iter().all(|r| r["FromPort"] == 443 && r["ToPort"] == 443), "{egress_rules}");
    // The triage function performs actions: long enough for the retries, its queue's
    // visibility six times that.
    assert!(with.properties("TriageFunction").unwrap()["Timeout"].as_u64().unwrap() >= 90);
}

/// Every function that reads or writes sealed records (entities, connector
/// credentials) may use the vault's KMS key: without it, its first sealed read fails.
#[test]
fn functions_that_notify_may_queue_the_deliveries() {
    // Every function that emits an event (proposal waiting or escalated: triage and the
    // pipeline's resume; gate requested: MCP, ADK, approvals; task assigned and
    // connector errors: the pipeline; digests: maintenance) queues `notify.deliver`.
    let t = Template::load();
    let e = evaluate(&t, &eu());
    for f in ["TriageFunction", "PipelineFunction", "McpFunction", "AdkFunction", "ApprovalsFunction", "MaintenanceFunction"] {
        let g = grants(&e, f);
        assert!(
            g.iter().any(|(action, resource)| action == "sqs:SendMessage" && resource.contains("WorkQueue")),
            "{f} cannot queue notifications: {g:?}"
        );
    }
}

/// The hourly watch (`health.alarm`) peeks at the work queue's dead letters: the
/// maintenance function may receive from that queue, and no other queue's.
#[test]
fn the_watch_may_peek_at_the_dead_letters() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let g = grants(&e, "MaintenanceFunction");
    let receives: Vec<&(String, String)> = g.iter().filter(|(action, _)| action == "sqs:ReceiveMessage").collect();
    assert!(!receives.is_empty(), "the watch cannot read the dead letters: {g:?}");
    assert!(
        receives.iter().all(|(_, r)| r.contains("DeadLetterQueue") && !r.contains("Scheduler") && !r.contains("ApprovalWaits")),
        "{receives:?}"
    );
}

#[test]
fn functions_that_open_sealed_records_may_use_the_vault_key() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    for f in [
        "McpFunction",
        "AdkFunction",
        "IngestFunction",
        "AdminFunction",
        "PipelineFunction",
        "ApprovalsFunction",
        "TriageFunction",
        // The notification digests open the tenants' sealed channels.
        "MaintenanceFunction",
    ] {
        let policies = e.properties(f).unwrap()["Policies"].clone();
        let allowed = policies.as_array().unwrap().iter().any(|p| {
            p["Statement"].as_array().into_iter().flatten().any(|st| {
                st["Resource"] == json!("<GetAtt:VaultKey.Arn>")
                    && st["Action"]
                        .as_array()
                        .is_some_and(|a| a.contains(&json!("kms:Decrypt")) && a.contains(&json!("kms:GenerateDataKey")))
            })
        });
        assert!(allowed, "{f} cannot open sealed records: {policies}");
    }
}

/// What a function's role allows, as `(action, resource)` pairs: its `Allow` statements,
/// and the SAM policy templates and managed policies it names (a template as the action
/// it grants, e.g. `sqs:SendMessage` for `SQSSendMessagePolicy`; a managed policy as
/// `policy` and its reference).
fn grants(e: &Evaluated<'_>, function: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    let props = e.properties(function).unwrap_or_else(|e| panic!("no function {function}: {e}"));
    for policy in props["Policies"].as_array().into_iter().flatten() {
        if let Some(name) = policy.as_str() {
            out.insert(("policy".to_owned(), name.to_owned()));
            continue;
        }
        for (template, field, action) in [
            ("DynamoDBCrudPolicy", "TableName", "dynamodb:crud"),
            ("SQSSendMessagePolicy", "QueueName", "sqs:SendMessage"),
            ("LambdaInvokePolicy", "FunctionName", "lambda:InvokeFunction"),
        ] {
            if let Some(t) = policy.get(template) {
                out.insert((action.to_owned(), t[field].to_string()));
            }
        }
        let statements = match policy.get("Statement") {
            Some(Value::Array(items)) => items.clone(),
            Some(one) => vec![one.clone()],
            None => Vec::new(),
        };
        for st in statements.iter().filter(|st| st["Effect"] == "Allow") {
            for action in strings(&st["Action"]) {
                for resource in strings(&st["Resource"]) {
                    out.insert((action.clone(), resource));
                }
            }
        }
    }
    out
}

/// IAM is the one thing the moto tests cannot see, so this derives who needs what from
/// the template's wiring and what the code behind it can do: every function serving the
/// tool set (MCP or the capability API — any tool can run there, `task.dispatch`
/// queues work, any Spine write appends its backup file) has the same data-plane grants;
/// and every function whose handlers write Spine entities — those, the admin API's
/// entity seeding, the triage state machine's task function (approved proposals,
/// connector actions) and the work queue's consumer (the pipeline writer) — may append
/// the write's backup file (`services::entities`; a failure only logs and counts
/// `BlobBackupFailures`, so without the grant backups would be silently lost).
#[test]
fn functions_that_serve_the_tools_or_write_the_spine_have_every_grant_they_use() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let routes = t.routes();
    let toolset: BTreeSet<String> = routes
        .iter()
        .filter(|r| r.path == "/mcp" || r.path.starts_with("/v1/capabilities/"))
        .map(|r| r.function.clone())
        .collect();
    assert!(toolset.len() >= 2, "the MCP endpoint and the capability API: {toolset:?}");
    let first = toolset.iter().next().unwrap();
    for f in &toolset {
        let (a, b) = (grants(&e, first), grants(&e, f));
        assert_eq!(
            a,
            b,
            "{first} and {f} serve the same tools but differ: only {first}: {:?}; only {f}: {:?}",
            a.difference(&b).collect::<Vec<_>>(),
            b.difference(&a).collect::<Vec<_>>()
        );
    }
    let admin = route(&routes, "ANY", "/v1/admin/{proxy+}").function.clone();
    let machine = e.properties("TriageStateMachine").unwrap();
    let task = machine["DefinitionSubstitutions"]["TriageFunctionArn"].as_str().unwrap().to_owned();
    let task = task.trim_start_matches("<GetAtt:").trim_start_matches("<Ref:").split('.').next().unwrap().to_owned();
    let consumers: Vec<String> = t.queue_consumers().into_iter().filter(|c| c.queue == "WorkQueue").map(|c| c.function).collect();
    assert!(!consumers.is_empty(), "the work queue has a consumer");
    let writers: BTreeSet<String> = toolset.iter().cloned().chain([admin.clone(), task]).chain(consumers).collect();
    for f in &writers {
        let g = grants(&e, f);
        let backs_up = g.iter().any(|(a, r)| a == "s3:PutObject" && r.contains("BlobBucket") && r.ends_with("/*"));
        assert!(backs_up, "{f} writes Spine entities but may not append their backup files: {g:?}");
    }
    for f in toolset.iter().chain([&admin]) {
        let g = grants(&e, f);
        assert!(
            g.iter().any(|(a, q)| a == "sqs:SendMessage" && q.contains("WorkQueue")),
            "{f} queues work (task.dispatch, an entity put while the table is away) but may not send to the work queue: {g:?}"
        );
    }
}

/// The dashboard runs on the approvals function: its "propose a change" starts triage,
/// and its overview reads the work queue's depth.
#[test]
fn the_dashboard_function_may_propose_and_read_the_queue_depth() {
    let t = Template::load();
    let e = evaluate(&t, &eu());
    let actions: BTreeSet<String> = allow_statements(&e)
        .into_iter()
        .filter(|(f, _)| f == "ApprovalsFunction")
        .flat_map(|(_, s)| strings(&s["Action"]))
        .collect();
    for a in ["states:StartExecution", "sqs:GetQueueAttributes", "states:SendTaskSuccess"] {
        assert!(actions.contains(a), "ApprovalsFunction lacks {a}: {actions:?}");
    }
    let routes = t.routes();
    for (method, path) in [("GET", "/dashboard"), ("GET", "/api/stats"), ("POST", "/dashboard/memory/{id}/{action}")] {
        assert!(
            routes.iter().any(|r| r.function == "ApprovalsFunction" && r.method == method && r.path == path),
            "{method} {path} is not the approvals function's"
        );
    }
}

/// E-mail notifications: with `MailFrom` every function learns the sender and the
/// pipeline (the one that delivers) may `ses:SendEmail` from that address only; without
/// it nobody may send.
#[test]
fn only_the_pipeline_may_send_mail_and_only_from_mail_from() {
    let t = Template::load();
    let sends = |e: &Evaluated<'_>, f: &str| grants(e, f).iter().any(|(action, _)| action == "ses:SendEmail");
    let without = evaluate(&t, &eu());
    for f in without.functions() {
        assert!(!sends(&without, &f), "{f} may send mail without MailFrom");
        assert_eq!(without.properties(&f).unwrap()["Environment"]["Variables"]["CONTINUITY_MAIL_FROM"], "", "{f}");
    }
    let with = evaluate(&t, &eu().with_parameter("MailFrom", "continuity@acme.example"));
    for f in with.functions() {
        assert_eq!(sends(&with, &f), f == "PipelineFunction", "{f}");
        assert_eq!(with.properties(&f).unwrap()["Environment"]["Variables"]["CONTINUITY_MAIL_FROM"], "continuity@acme.example");
    }
    let policies = with.properties("PipelineFunction").unwrap()["Policies"].clone();
    let statement = policies
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["Statement"].as_array().cloned().unwrap_or_default())
        .find(|s| s["Action"] == "ses:SendEmail")
        .unwrap();
    assert_eq!(statement["Condition"]["StringEquals"]["ses:FromAddress"], "continuity@acme.example", "{statement}");
}

fn output(e: &Evaluated<'_>, name: &str) -> Value {
    let raw = e.template().doc.pointer(&format!("/Outputs/{name}/Value")).unwrap_or_else(|| panic!("no output {name}")).clone();
    e.eval(&raw).unwrap()
}

#[test]
fn a_custom_domain_maps_the_stage_at_its_root_and_becomes_the_public_url() {
    let t = Template::load();
    let cert = "arn:aws:acm:eu-west-1:123456789012:certificate/0f1e2d3c-aaaa-bbbb-cccc-0123456789ab";
    let unauthorized = |e: &Evaluated<'_>| {
        e.properties("Api").unwrap()["GatewayResponses"]["UNAUTHORIZED"]["ResponseParameters"]["Headers"]["WWW-Authenticate"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // None: the execute-api URL, no discovery hint, no domain resources.
    let plain = evaluate(&t, &eu());
    for id in ["ApiDomain", "ApiBasePathMapping", "ApiDomainRecord"] {
        assert!(!plain.has_resource(id), "{id} without DomainName");
    }
    assert_eq!(plain.properties("McpFunction").unwrap()["Environment"]["Variables"]["CONTINUITY_PUBLIC_URL"], "");
    assert_eq!(unauthorized(&plain), "'Bearer realm=\"continuity\"'");
    assert_eq!(output(&plain, "McpUrl"), "https://<Ref:Api>.execute-api.eu-west-1.amazonaws.com/prod/mcp");

    // A domain: mapped at its root to the stage SAM creates, and the public URL.
    let domain =
        evaluate(&t, &eu().with_parameter("DomainName", "eu.continuity.example.com").with_parameter("CertificateArn", cert));
    let d = domain.properties("ApiDomain").unwrap();
    assert_eq!(domain.resource_type("ApiDomain").as_deref(), Some("AWS::ApiGateway::DomainName"));
    assert_eq!((d["DomainName"].as_str(), d["RegionalCertificateArn"].as_str()), (Some("eu.continuity.example.com"), Some(cert)));
    assert_eq!(d["EndpointConfiguration"]["Types"], json!(["REGIONAL"]), "the API is regional, so is its domain");
    assert_eq!(d["SecurityPolicy"], "TLS_1_2");
    let m = domain.properties("ApiBasePathMapping").unwrap();
    assert_eq!((m["DomainName"].as_str(), m["RestApiId"].as_str()), (Some("<Ref:ApiDomain>"), Some("<Ref:Api>")));
    assert_eq!(m["Stage"], "<Ref:Api.Stage>", "the stage SAM creates, so the mapping waits for it");
    assert!(m.get("BasePath").is_none(), "mapped at the root: /.well-known/… sits at the host root");
    assert!(!domain.has_resource("ApiDomainRecord"), "no zone given: the operator points the name");
    assert_eq!(output(&domain, "ApiDomainTarget"), "<GetAtt:ApiDomain.RegionalDomainName>");
    for f in domain.functions() {
        let env = &domain.properties(&f).unwrap()["Environment"]["Variables"];
        assert_eq!(env["CONTINUITY_PUBLIC_URL"], "https://eu.continuity.example.com", "{f}");
    }
    assert!(
        unauthorized(&domain)
            .contains("resource_metadata=\"https://eu.continuity.example.com/.well-known/oauth-protected-resource/mcp\""),
        "a client without a token discovers the authorization server: {}",
        unauthorized(&domain)
    );
    assert_eq!(output(&domain, "McpUrl"), "https://eu.continuity.example.com/mcp");
    assert_eq!(output(&domain, "ApprovalsConsoleUrl"), "https://eu.continuity.example.com/approvals");

    // With its hosted zone: the alias record to the regional domain name.
    let zoned = evaluate(
        &t,
        &eu()
            .with_parameter("DomainName", "eu.continuity.example.com")
            .with_parameter("CertificateArn", cert)
            .with_parameter("HostedZoneId", "Z0123456789ABCDEFGHIJ"),
    );
    let r = zoned.properties("ApiDomainRecord").unwrap();
    assert_eq!((r["Type"].as_str(), r["Name"].as_str()), (Some("A"), Some("eu.continuity.example.com")));
    assert_eq!(r["AliasTarget"]["DNSName"], "<GetAtt:ApiDomain.RegionalDomainName>");
    assert_eq!(r["AliasTarget"]["HostedZoneId"], "<GetAtt:ApiDomain.RegionalHostedZoneId>");

    // PublicBaseUrl, when given, stays what clients are told (a CDN in front, say).
    let both = evaluate(
        &t,
        &eu()
            .with_parameter("DomainName", "eu.continuity.example.com")
            .with_parameter("CertificateArn", cert)
            .with_parameter("PublicBaseUrl", "https://memory.example.com"),
    );
    assert_eq!(
        both.properties("McpFunction").unwrap()["Environment"]["Variables"]["CONTINUITY_PUBLIC_URL"],
        "https://memory.example.com"
    );
    assert_eq!(output(&both, "McpUrl"), "https://memory.example.com/mcp");

    // A domain without its certificate is refused before anything is created.
    let rule = &t.doc["Rules"]["DomainNeedsCertificate"];
    assert_eq!(rule["RuleCondition"], json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "DomainName"}, ""]}]}));
    assert_eq!(rule["Assertions"][0]["Assert"], json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "CertificateArn"}, ""]}]}));
}

#[test]
fn the_managed_services_have_alarms_and_access_logs_are_a_choice() {
    let t = Template::load();
    let own = evaluate(&t, &eu());
    let watched = |namespace: &str, metric: &str| -> Vec<Value> {
        own.resources_of_type("AWS::CloudWatch::Alarm")
            .iter()
            .map(|a| own.properties(a).unwrap())
            .filter(|p| p["Namespace"] == namespace && p["MetricName"] == metric)
            .collect()
    };
    let dims = |p: &Value| -> BTreeMap<String, Value> {
        p["Dimensions"].as_array().unwrap().iter().map(|d| (d["Name"].as_str().unwrap().to_owned(), d["Value"].clone())).collect()
    };
    for (ns, metric, dimension, value) in [
        ("AWS/DynamoDB", "ReadThrottleEvents", "TableName", json!("<Ref:Table>")),
        ("AWS/DynamoDB", "WriteThrottleEvents", "TableName", json!("<Ref:Table>")),
        ("AWS/ElastiCache", "ThrottledCmds", "clusterId", json!("<Ref:Cache>")),
        ("AWS/ElastiCache", "BytesUsedForCache", "clusterId", json!("<Ref:Cache>")),
        ("AWS/ElastiCache", "ElastiCacheProcessingUnits", "clusterId", json!("<Ref:Cache>")),
        ("AWS/AOSS", "SearchRequestErrors", "CollectionId", json!("<GetAtt:SearchCollection.Id>")),
        ("AWS/AOSS", "IngestionRequestErrors", "CollectionId", json!("<GetAtt:SearchCollection.Id>")),
        ("AWS/AOSS", "SearchOCU", "ClientId", json!(own.stack().account)),
        ("AWS/AOSS", "IndexingOCU", "ClientId", json!(own.stack().account)),
        ("AWS/Bedrock", "InvocationThrottles", "ModelId", json!("amazon.titan-embed-text-v2:0")),
        ("AWS/Lambda", "Duration", "FunctionName", json!("<Ref:AuthorizerFunction>")),
        ("AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", json!("<GetAtt:ApprovalWaitsQueue.QueueName>")),
    ] {
        let found = watched(ns, metric);
        assert!(
            found.iter().any(|p| dims(p).get(dimension) == Some(&value)),
            "no alarm on {ns} {metric} with {dimension}={value}"
        );
    }
    let latency = &watched("AWS/Lambda", "Duration")[0];
    assert_eq!((latency["ExtendedStatistic"].as_str(), latency["Threshold"].as_f64()), (Some("p99"), Some(1000.0)));
    // The cache alarms sit below the cache's own limits, so they fire before it evicts or throttles.
    let limits = own.properties("Cache").unwrap()["CacheUsageLimits"].clone();
    let storage = &watched("AWS/ElastiCache", "BytesUsedForCache")[0];
    assert!(storage["Threshold"].as_f64().unwrap() < limits["DataStorage"]["Maximum"].as_f64().unwrap() * 1e9);
    let ecpu = &watched("AWS/ElastiCache", "ElastiCacheProcessingUnits")[0];
    let per_period = limits["ECPUPerSecond"]["Maximum"].as_f64().unwrap() * ecpu["Period"].as_f64().unwrap();
    assert!(ecpu["Threshold"].as_f64().unwrap() < per_period, "{ecpu}");
    // The OCU alarms follow the account's maximum; the hashing embedder calls no Bedrock.
    let raised = evaluate(&t, &eu().with_parameter("SearchOcuMax", 40));
    assert_eq!(raised.properties("SearchOcuAtMaxAlarm").unwrap()["Threshold"], 40);
    let hashing = evaluate(&t, &eu().with_parameter("Embedder", "hashing"));
    assert!(!hashing.has_resource("BedrockThrottlesAlarm"));

    // Access logs: off by default (they need the account's API Gateway logging role).
    assert!(own.properties("Api").unwrap().get("AccessLogSetting").is_none());
    assert!(!own.has_resource("ApiAccessLogGroup"));
    let logged = evaluate(&t, &eu().with_parameter("ApiAccessLogs", "on"));
    let setting = logged.properties("Api").unwrap()["AccessLogSetting"].clone();
    assert_eq!(setting["DestinationArn"], "<GetAtt:ApiAccessLogGroup.Arn>");
    let format: Value = serde_json::from_str(setting["Format"].as_str().unwrap()).expect("one JSON object per line");
    for field in ["requestId", "ip", "method", "path", "status", "latencyMs", "tenant"] {
        assert!(format.get(field).is_some(), "the access log lacks {field}");
    }
    let text = format.to_string().to_ascii_lowercase();
    assert!(!text.contains("header") && !text.contains("authorization"), "no credential in an access log: {text}");
    assert_eq!(logged.properties("ApiAccessLogGroup").unwrap()["RetentionInDays"], 30);
}

#[test]
fn the_api_functions_deploy_gradually_and_roll_back_on_their_alarms() {
    let t = Template::load();
    let own = evaluate(&t, &eu());
    let behind_api: BTreeSet<String> = own.routes().unwrap().into_iter().map(|r| r.function).collect();
    assert!(behind_api.len() >= 6, "{behind_api:?}");
    for f in behind_api.iter().map(String::as_str).chain(["AuthorizerFunction"]) {
        let p = own.properties(f).unwrap();
        assert_eq!(p["AutoPublishAlias"], "live", "{f}");
        let pref = &p["DeploymentPreference"];
        assert_eq!(pref["Type"], "Canary10Percent5Minutes", "{f}");
        let alarms = pref["Alarms"].as_array().unwrap_or_else(|| panic!("{f}: no rollback alarms"));
        assert!(alarms.contains(&json!(format!("<Ref:{f}ErrorsAlarm>"))), "{f}: its own errors roll it back");
        assert!(alarms.contains(&json!("<Ref:Api5xxRateAlarm>")), "{f}: the API's 5xx rate rolls it back");
        for a in alarms {
            let id = a.as_str().unwrap().trim_start_matches("<Ref:").trim_end_matches('>');
            assert_eq!(own.resource_type(id).as_deref(), Some("AWS::CloudWatch::Alarm"), "{f}: {id}");
        }
    }
    // API Gateway calls the authorizer's alias, and the state machine the triage alias.
    let api = own.properties("Api").unwrap();
    assert_eq!(api["Auth"]["Authorizers"]["ContinuityAuthorizer"]["FunctionArn"], "<Ref:AuthorizerFunction.Alias>");
    assert_eq!(own.properties("TriageFunction").unwrap()["AutoPublishAlias"], "live");
    assert_eq!(
        own.properties("TriageStateMachine").unwrap()["DefinitionSubstitutions"]["TriageFunctionArn"],
        "<Ref:TriageFunction.Alias>"
    );
    // A development stack shifts at once.
    let dev = evaluate(&t, &eu().with_parameter("DeploymentStrategy", "AllAtOnce"));
    assert_eq!(dev.properties("McpFunction").unwrap()["DeploymentPreference"]["Type"], "AllAtOnce");
}

#[test]
fn the_fortress_is_encrypted_with_its_own_key_usable_only_through_dynamodb() {
    let t = Template::load();
    let own = evaluate(&t, &eu());
    let sse = own.properties("FortressTable").unwrap()["SSESpecification"].clone();
    assert_eq!(sse, json!({"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": "<GetAtt:FortressKey.Arn>"}));
    assert_ne!(own.properties("Table").unwrap()["SSESpecification"].get("KMSMasterKeyId"), sse.get("KMSMasterKeyId"));
    let key = own.properties("FortressKey").unwrap();
    assert_eq!(key["EnableKeyRotation"], true);
    assert_eq!(
        t.raw_resources()["FortressKey"]["DeletionPolicy"],
        "Retain",
        "the key outlives the stack with the table it opens"
    );
    let statements = key["KeyPolicy"]["Statement"].as_array().unwrap();
    for s in statements {
        if s["Principal"]["AWS"] == "*" {
            assert_eq!(s["Condition"]["StringEquals"]["kms:ViaService"], "dynamodb.eu-west-1.amazonaws.com", "{s}");
            assert_eq!(s["Condition"]["StringEquals"]["kms:CallerAccount"], own.stack().account, "{s}");
        } else {
            assert_eq!(s["Principal"]["AWS"], format!("arn:aws:iam::{}:root", own.stack().account), "{s}");
        }
    }
    assert!(statements.iter().any(|s| s["Principal"]["AWS"] == "*"), "DynamoDB may use it for the account");
}

#[test]
fn the_audit_retention_is_a_parameter_every_function_is_told() {
    let t = Template::load();
    for (stack, days) in [(eu(), json!(7)), (eu().with_parameter("AuditRetentionDays", 90), json!(90))] {
        let e = evaluate(&t, &stack);
        let env = &e.properties("MaintenanceFunction").unwrap()["Environment"]["Variables"];
        assert_eq!(env["CONTINUITY_AUDIT_RETENTION_DAYS"], days);
    }
    let p = &t.doc["Parameters"]["AuditRetentionDays"];
    assert_eq!((p["MinValue"].as_u64(), p["MaxValue"].as_u64()), (Some(1), Some(3650)), "the range the service accepts");
}

/// The `small` profile (#37 §3): search on S3 Vectors and a DynamoDB keyword table
/// instead of the collection; every search client told where they are and granted
/// exactly the S3 Vectors calls the adapter makes; interface endpoints in one subnet.
#[test]
fn the_small_profile_searches_on_s3_vectors_and_keeps_endpoints_in_one_subnet() {
    let t = Template::load();
    let small = evaluate(&t, &eu().with_parameter("Profile", "small"));
    let production = evaluate(&t, &eu());
    for kind in ["AWS::OpenSearchServerless::Collection", "AWS::OpenSearchServerless::VpcEndpoint"] {
        assert!(small.resources_of_type(kind).is_empty(), "the small profile keeps no {kind}");
        assert_eq!(production.resources_of_type(kind).len(), 1, "{kind}");
    }
    for id in ["VectorBucket", "SearchTable", "S3VectorsEndpoint"] {
        assert!(small.has_resource(id) && !production.has_resource(id), "{id} belongs to the small profile only");
    }
    for (id, _) in small.resources() {
        assert!(!small.properties(&id).unwrap().to_string().contains("SearchCollection"), "{id} refers to the collection");
    }
    // The S3 Vectors operations the adapter sends (each `self.call("Op"` of its client).
    let client =
        std::fs::read_to_string(continuity_tests::workspace_root().join("shared/store-aws/src/s3vectors/client.rs")).unwrap();
    let called: BTreeSet<String> =
        client.split("self.call(\"").skip(1).map(|rest| format!("s3vectors:{}", rest.split('"').next().unwrap())).collect();
    assert_eq!(called.len(), 5, "{called:?}");
    let bucket = "cty-5d2f7a10-vectors";
    let clients: Vec<String> = small
        .functions()
        .into_iter()
        .filter(|f| grants(&small, f).contains(&("policy".to_owned(), "<Ref:SearchClientPolicy>".to_owned())))
        .collect();
    assert!(clients.len() >= 6, "{clients:?}");
    let statements = allow_statements(&small);
    for f in &clients {
        let env = &small.properties(f).unwrap()["Environment"]["Variables"];
        assert_eq!(env["CONTINUITY_VECTOR_BUCKET"], bucket, "{f}");
        assert_eq!(env["CONTINUITY_SEARCH_TABLE"], "<Ref:SearchTable>", "{f}");
        assert!(env.get("CONTINUITY_OPENSEARCH_ENDPOINT").is_none(), "{f}");
        // What the function reads at cold start selects the S3 Vectors index.
        let vars = env.clone();
        let aws = store_aws::LambdaEnv::from_vars(&|n| match vars.get(n) {
            Some(Value::String(v)) => Some(v.clone()),
            Some(Value::Number(v)) => Some(v.to_string()),
            _ => Some("x".to_owned()),
        })
        .unwrap()
        .aws;
        assert_eq!(aws.search.vector_bucket.as_deref(), Some(bucket), "{f}");
        let granted: BTreeSet<String> = statements
            .iter()
            .filter(|(owner, s)| {
                owner == "SearchClientPolicy" && strings(&s["Action"]).iter().any(|a| a.starts_with("s3vectors:"))
            })
            .flat_map(|(_, s)| strings(&s["Action"]))
            .collect();
        assert!(called.is_subset(&granted), "{f} may not call {:?}", called.difference(&granted).collect::<Vec<_>>());
        let penv = &production.properties(f).unwrap()["Environment"]["Variables"];
        assert!(penv.get("CONTINUITY_VECTOR_BUCKET").is_none() && penv["CONTINUITY_OPENSEARCH_ENDPOINT"].is_string(), "{f}");
    }
    let s3v: Vec<&Value> = statements
        .iter()
        .filter(|(owner, s)| owner == "SearchClientPolicy" && strings(&s["Action"]).iter().any(|a| a.starts_with("s3vectors:")))
        .map(|(_, s)| s)
        .collect();
    assert_eq!(s3v.len(), 1);
    assert_eq!(
        strings(&s3v[0]["Resource"]),
        ["<GetAtt:VectorBucket.VectorBucketArn>", "<GetAtt:VectorBucket.VectorBucketArn>/index/*"]
    );
    let table: Vec<String> = statements
        .iter()
        .filter(|(owner, s)| owner == "SearchClientPolicy" && strings(&s["Resource"]) == ["<GetAtt:SearchTable.Arn>"])
        .flat_map(|(_, s)| strings(&s["Action"]))
        .collect();
    for a in ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"] {
        assert!(table.iter().any(|g| g == a), "the keyword table needs {a}: {table:?}");
    }
    // The data perimeter admits the keyword table on the DynamoDB endpoint.
    let dynamo = small.properties("DynamoDbEndpoint").unwrap();
    assert!(strings(&dynamo["PolicyDocument"]["Statement"][0]["Resource"]).contains(&"<GetAtt:SearchTable.Arn>".to_owned()));
    // Interface endpoints: one subnet on small, two on production.
    for (e, subnets) in [(&small, 1), (&production, 2)] {
        for id in e.resources_of_type("AWS::EC2::VPCEndpoint") {
            let p = e.properties(&id).unwrap();
            if p["VpcEndpointType"] == "Interface" {
                assert_eq!(p["SubnetIds"].as_array().unwrap().len(), subnets, "{id}");
            }
        }
    }
}

/// docs/aws.md's cost table lists every resource each profile bills for while idle,
/// the alarms by count, and adds up; the small profile stays under $100 a month.
#[test]
fn the_cost_table_lists_every_idle_resource_of_each_profile() {
    let t = Template::load();
    let docs = std::fs::read_to_string(continuity_tests::workspace_root().join("docs/aws.md")).unwrap();
    let section = docs.split("## Deployment profiles").nth(1).expect("docs/aws.md has a Deployment profiles section");
    let section = section.split("\n## ").next().unwrap();
    let rows: Vec<Vec<String>> = section
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect())
        .collect();
    let money = |c: &str| -> Option<f64> { c.trim_matches('*').trim_start_matches('+').trim_start_matches('$').parse().ok() };
    let billed = [
        "AWS::OpenSearchServerless::Collection",
        "AWS::OpenSearchServerless::VpcEndpoint",
        "AWS::EC2::VPCEndpoint",
        "AWS::ElastiCache::ServerlessCache",
        "AWS::KMS::Key",
        "AWS::CloudWatch::Dashboard",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
    ];
    for (column, profile) in [(1, "production"), (2, "small")] {
        let e = evaluate(&t, &eu().with_parameter("Profile", profile).with_parameter("ConnectorEgress", "nat"));
        for kind in billed {
            for id in e.resources_of_type(kind) {
                if kind == "AWS::EC2::VPCEndpoint" && e.properties(&id).unwrap()["VpcEndpointType"] != "Interface" {
                    continue; // gateway endpoints cost nothing
                }
                let row =
                    rows.iter().find(|r| r[0].contains(&format!("`{id}`"))).unwrap_or_else(|| panic!("no cost row names {id}"));
                assert!(money(&row[column]).is_some(), "{id} bills on {profile} but its row says {:?}", row[column]);
            }
        }
        let alarms = e.resources_of_type("AWS::CloudWatch::Alarm").len();
        let row = rows.iter().find(|r| r[0].starts_with("CloudWatch alarms")).expect("an alarms row");
        assert!(row[0].contains(&format!("{alarms} on {profile}")), "{profile} has {alarms} alarms: {:?}", row[0]);
        let total = rows.iter().find(|r| r[0].contains("total")).expect("a total row");
        let sum: f64 =
            rows.iter().filter(|r| !r[0].contains("total") && !r[0].contains("NAT")).filter_map(|r| money(&r[column])).sum();
        let stated = money(&total[column]).unwrap();
        assert!((sum - stated).abs() < 0.01, "{profile}: the rows add up to {sum:.2}, the total says {stated:.2}");
        if profile == "small" {
            assert!(stated <= 100.0, "the small profile must idle under $100: {stated}");
        }
    }
}

/// `infra/build.sh`, the deploy build the docs give, with a stand-in `sam` first on the
/// PATH that prints what it was given: the size settings reach it, the caller's own
/// settings win, and the arguments pass through.
#[test]
fn the_deploy_build_runs_sam_with_the_size_settings() {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    let sam = bin.path().join("sam");
    std::fs::write(
        &sam,
        "#!/bin/sh\necho \"args=$*\"\necho \"opt=$CARGO_PROFILE_RELEASE_OPT_LEVEL lto=$CARGO_PROFILE_RELEASE_LTO \
         panic=$CARGO_PROFILE_RELEASE_PANIC\"\necho \"rustflags=${RUSTFLAGS-unset}\"\necho \"cwd=$(pwd -P)\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&sam, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = continuity_tests::workspace_root();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let run = |env: &[(&str, &str)]| {
        let mut cmd = std::process::Command::new(root.join("infra/build.sh"));
        cmd.args(["--config-env", "eu-west-1"]).env("PATH", &path).current_dir(bin.path());
        for var in ["CARGO_PROFILE_RELEASE_OPT_LEVEL", "CARGO_PROFILE_RELEASE_LTO", "CARGO_PROFILE_RELEASE_PANIC", "RUSTFLAGS"] {
            cmd.env_remove(var);
        }
        cmd.envs(env.iter().copied());
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let out = run(&[]);
    assert!(out.contains("args=build --beta-features --config-env eu-west-1\n"), "{out}");
    assert!(out.contains("opt=z lto=fat panic=abort\n"), "{out}");
    // Left unset: cargo-lambda's own `build.rustflags` (its target CPU) would lose to it.
    assert!(out.contains("rustflags=unset\n"), "{out}");
    let canonical = std::fs::canonicalize(&root).unwrap();
    assert!(out.contains(&format!("cwd={}\n", canonical.display())), "sam runs from the workspace root: {out}");
    let out = run(&[
        ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3"),
        ("CARGO_PROFILE_RELEASE_LTO", "thin"),
        ("RUSTFLAGS", "-C target-cpu=neoverse-n1"),
    ]);
    assert!(out.contains("opt=3 lto=thin panic=abort\n"), "{out}");
    assert!(out.contains("rustflags=-C target-cpu=neoverse-n1\n"), "{out}");
}
