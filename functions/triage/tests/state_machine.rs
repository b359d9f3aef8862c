//! `statemachines/triage.asl.json` executed for real by moto's Step Functions
//! (`execute_state_machine`), over the AWS backend on moto (DynamoDB, SQS):
//!
//! - the `AwaitApproval` wait is a real `sqs:sendMessage.waitForTaskToken`: the message
//!   reaches our consumer (`continuity_triage::waits`), which stores the token with the
//!   proposal, and the approver's decision (`GovernanceService::decide` on the
//!   `StepFunctionsWorkflow` adapter) sends it back — `SendTaskSuccess` ends in `Write`,
//!   `SendTaskFailure("Rejected")` in `RecordRejection`, and a wait nobody decides times
//!   out into `Escalate` (after a `SendTaskHeartbeat` from the resume job); an approved
//!   action goes through `Apply` to `Act`, whose real task sends the connector request
//!   once (an in-process server stands in for HubSpot) or fails after its retries;
//! - the Lambda tasks: moto runs no Lambda code without Docker, it answers each invoke
//!   with the next queued result (`/moto-api/static/lambda-simple/response`). We queue
//!   the outputs of our real task code: for the auto-approve and reject paths the tasks
//!   run first against the same store, in the order the state machine calls them; for
//!   the decisions, whose task runs after the decision, the expected output is queued
//!   and then checked against what the real task answers when run on the result.
//!
//! moto's result queue is shared, so everything runs in this one test, in order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sfn::types::{ExecutionStatus, HistoryEventType};
use continuity_tests::aws::{REGION, env};
use continuity_tests::caller;
use continuity_tests::source::{Answer, FakeSource};
use domain::action::{Action, ActionRequest, Credential};
use domain::proposal::{Proposal, ProposalState};
use domain::tenant::{Department, Industry, PlanTier, TriagePolicy};
use domain::{ErrorCode, Id, TenantId};
use ports::Workflow;
use ports::records::{MemoryStore, ProposalStore};
use serde_json::{Value, json};
use services::Services;
use store_aws::{SignedHttp, StepFunctionsWorkflow, aws_config_for};

const ACCOUNT: &str = "123456789012";

struct Rig {
    moto: String,
    http: reqwest::Client,
    sfn: aws_sdk_sfn::Client,
    sqs: aws_sdk_sqs::Client,
    waits_queue: String,
    machine: String,
    services: Services,
}

impl Rig {
    async fn queue_results(&self, results: &[Value]) {
        let body = json!({
            "results": results.iter().map(Value::to_string).collect::<Vec<_>>(),
            "region": REGION,
            "account_id": ACCOUNT,
        });
        let r = self.http.post(format!("{}/moto-api/static/lambda-simple/response", self.moto)).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "queue lambda results: {}", r.status());
    }

    async fn task(&self, task: &str, t: &TenantId, id: &Id) -> Value {
        let tasks = self.services.governance.tasks();
        continuity_triage::handle(tasks, json!({"task": task, "tenant": t.as_str(), "proposal": id.as_str()}))
            .await
            .unwrap_or_else(|e| panic!("{task}: {}: {}", e.error_type, e.error_message))
    }

    /// The wait message `AwaitApproval` sent, run through the queue consumer.
    async fn consume_wait(&self, id: &Id) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let got = self
                .sqs
                .receive_message()
                .queue_url(&self.waits_queue)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for m in got.messages() {
                let body: Value = serde_json::from_str(m.body().unwrap()).unwrap();
                if body["proposal"] == id.as_str() {
                    let event = json!({"Records": [{
                        "messageId": m.message_id().unwrap(), "receiptHandle": m.receipt_handle().unwrap(),
                        "body": m.body().unwrap(), "attributes": {}, "messageAttributes": {},
                        "eventSource": "aws:sqs", "awsRegion": REGION
                    }]});
                    let answer = continuity_triage::handle(self.services.governance.tasks(), event).await.unwrap();
                    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
                    self.sqs
                        .delete_message()
                        .queue_url(&self.waits_queue)
                        .receipt_handle(m.receipt_handle().unwrap())
                        .send()
                        .await
                        .unwrap();
                    return body;
                }
            }
        }
        panic!("no wait message for {id}");
    }

    async fn start(&self, t: &TenantId, id: &Id) -> String {
        self.services.governance.triage(t, id).await.unwrap();
        format!("arn:aws:states:{REGION}:{ACCOUNT}:execution:{}:{id}", self.machine.rsplit(':').next().unwrap())
    }

    /// Waits for the execution to end; its status and the states it entered, in order.
    async fn finished(&self, execution: &str) -> (ExecutionStatus, Vec<String>, Value) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let d = self.sfn.describe_execution().execution_arn(execution).send().await.unwrap();
            if *d.status() != ExecutionStatus::Running || Instant::now() > deadline {
                let history = self.sfn.get_execution_history().execution_arn(execution).max_results(500).send().await.unwrap();
                let entered = history
                    .events()
                    .iter()
                    .filter(|e| {
                        matches!(
                            e.r#type(),
                            HistoryEventType::TaskStateEntered
                                | HistoryEventType::ChoiceStateEntered
                                | HistoryEventType::PassStateEntered
                                | HistoryEventType::FailStateEntered
                        )
                    })
                    .filter_map(|e| e.state_entered_event_details().map(|s| s.name().to_owned()))
                    .collect();
                let output = d.output().and_then(|o| serde_json::from_str(o).ok()).unwrap_or(Value::Null);
                return (d.status().clone(), entered, output);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn running_until_wait(&self, execution: &str) {
        let d = self.sfn.describe_execution().execution_arn(execution).send().await.unwrap();
        assert_eq!(*d.status(), ExecutionStatus::Running, "the execution waits on its task token");
    }
}

async fn rig() -> Rig {
    let moto = env("CONTINUITY_TEST_MOTO_URL");
    let http = reqwest::Client::new();
    let config = json!({"stepfunctions": {"execute_state_machine": true}, "lambda": {"use_docker": false}});
    assert!(http.post(format!("{moto}/moto-api/config")).json(&config).send().await.unwrap().status().is_success());
    let sdk = aws_config_for(Some(&moto), REGION).await;

    // An execution role and the triage function (moto checks the role exists).
    let iam = SignedHttp::new(&sdk, &moto, "iam").unwrap().with_timeout(Duration::from_secs(120)).unwrap();
    let role = format!("continuity-triage-it-{}", contract::fresh_tenant("r"));
    let trust = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]}, "Action": "sts:AssumeRole"}]});
    let form: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("Action", "CreateRole")
        .append_pair("Version", "2010-05-08")
        .append_pair("RoleName", &role)
        .append_pair("AssumeRolePolicyDocument", &trust.to_string())
        .finish();
    let (status, _) = iam.send("POST", "/", "application/x-www-form-urlencoded", form.into_bytes(), &[]).await.unwrap();
    assert_eq!(status, 200);
    let role_arn = format!("arn:aws:iam::{ACCOUNT}:role/{role}");
    let lambda = SignedHttp::new(&sdk, &moto, "lambda").unwrap().with_timeout(Duration::from_secs(120)).unwrap();
    let function = format!("continuity-triage-{}", contract::fresh_tenant("f"));
    // An empty zip archive: moto without Docker never runs the code.
    let empty_zip =
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [b"PK\x05\x06".as_slice(), &[0u8; 18]].concat());
    let create = json!({"FunctionName": function, "Runtime": "provided.al2023", "Role": role_arn, "Handler": "bootstrap",
                        "Code": {"ZipFile": empty_zip}});
    let (status, created) =
        lambda.send("POST", "/2015-03-31/functions", "application/json", create.to_string().into_bytes(), &[]).await.unwrap();
    assert!(status == 201 || status == 200, "{status} {created}");
    let function_arn = created["FunctionArn"].as_str().unwrap().to_owned();

    let sqs = store_aws::settings::sqs_client(&sdk);
    let waits_queue = sqs
        .create_queue()
        .queue_name(format!("approval-waits-{}", contract::fresh_tenant("q")))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();

    // The state machine exactly as deployed, with the template's substitutions.
    let asl = std::fs::read_to_string(continuity_tests::workspace_root().join("statemachines/triage.asl.json")).unwrap();
    let definition = asl.replace("${TriageFunctionArn}", &function_arn).replace("${ApprovalWaitsQueueUrl}", &waits_queue);
    assert!(!definition.contains("${"), "every substitution is filled");
    let sfn = store_aws::settings::sfn_client(&sdk);
    let machine = sfn
        .create_state_machine()
        .name(format!("continuity-triage-{}", contract::fresh_tenant("m")))
        .definition(definition)
        .role_arn(&role_arn)
        .send()
        .await
        .unwrap()
        .state_machine_arn()
        .to_owned();

    let mut backend = continuity_tests::aws::backend().await;
    backend.workflow = Some(Arc::new(StepFunctionsWorkflow::new(sfn.clone(), &machine)));
    let services = Services::new(backend);
    assert_eq!(services.governance.workflow_name(), "step-functions");
    Rig { moto, http, sfn, sqs, waits_queue, machine, services }
}

async fn pending(s: &Services, t: &TenantId, title: &str, body: &str, session: Option<&str>) -> Id {
    let now = s.backend.clock.now();
    let id = Id::generate(now, rand::random());
    let p = Proposal {
        tenant: t.clone(),
        id: id.clone(),
        kind: "memory:decision".into(),
        title: title.into(),
        body: body.into(),
        supersedes: None,
        suggested_supersede: None,
        state: ProposalState::Pending,
        score: None,
        decision_reason: None,
        proposed_by: Id::new("agent-1").unwrap(),
        proposed_via: None,
        source_session: session.map(str::to_owned),
        origin: None,
        wait: None,
        action: None,
        entity: None,
        detected: Vec::new(),
        created_at: now,
        updated_at: now,
        version: 1,
    };
    s.backend.records.create_proposal(&p).await.unwrap();
    id
}

/// A pending action proposal: move HubSpot deal `deal` to closed-won.
async fn pending_action(s: &Services, t: &TenantId, deal: &str) -> Id {
    let id = pending(
        s,
        t,
        &format!("Close deal {deal} as won"),
        "The customer signed the order form on 2 December; the signed copy is attached to the deal.",
        None,
    )
    .await;
    let mut p = state(s, t, &id).await;
    p.kind = "action".into();
    p.action = Some(Action {
        request: ActionRequest {
            connector: "hubspot".into(),
            operation: "deal.update_stage".into(),
            target: deal.into(),
            params: [("stage".to_owned(), domain::value::Value::Text("closedwon".into()))].into(),
        },
        run: None,
    });
    s.backend.records.update_proposal(&p).await.unwrap();
    id
}

async fn state(s: &Services, t: &TenantId, id: &Id) -> Proposal {
    s.backend.records.get_proposal(t, id).await.unwrap().unwrap()
}

/// Hedged proposals that wait for a person (0.60–0.84), different enough not to be
/// near-duplicates of each other once one is written.
const WAITS: [(&str, &str); 3] = [
    ("Onboarding kickoff owner", "Maybe the onboarding kickoff should be run by the account owner rather than support."),
    ("Renewal call timing", "Maybe renewal calls should happen a quarter before the contract ends, not a month before."),
    (
        "Business review deck",
        "Perhaps the quarterly business review deck should be prepared by the account owner instead of the CSM.",
    ),
];

#[tokio::test]
async fn triage_state_machine_runs_on_moto() {
    let rig = rig().await;
    let s = &rig.services;
    let t = contract::fresh_tenant("sfn");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let approver = caller(s, &t, "approvals:decide tenant:read").await;

    // 1. Auto-approve: Score → Route → AutoApprove → Write. The real tasks run first, in
    //    the machine's order; their outputs are what moto's Lambda answers.
    let auto = pending(
        s,
        &t,
        "Health score review cadence",
        "Customer success reviews every account health score weekly on Monday; accounts under 40 get an owner call within 2 days.",
        Some("qbr"),
    )
    .await;
    let scored = rig.task("score", &t, &auto).await;
    assert_eq!(scored["route"], "auto_approve", "{scored}");
    let approved = rig.task("auto_approve", &t, &auto).await;
    let written = rig.task("write", &t, &auto).await;
    assert_eq!(written, json!({"proposal": auto.as_str(), "state": "written"}));
    rig.queue_results(&[scored, approved, written]).await;
    let execution = rig.start(&t, &auto).await;
    let (status, entered, output) = rig.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{entered:?}");
    assert_eq!(entered, ["Score", "Route", "AutoApprove", "Apply", "Write"]);
    assert_eq!(output["written"]["state"], "written", "{output}");
    assert_eq!(s.backend.records.get_memory(&t, &auto).await.unwrap().unwrap().title, "Health score review cadence");

    // 2. Below the bar: Score → Route → Reject → RecordRejection, the reason kept.
    let low = pending(s, &t, "idea", "maybe wipe it", None).await;
    let scored = rig.task("score", &t, &low).await;
    assert_eq!(scored["route"], "reject", "{scored}");
    let rejected = rig.task("record_rejection", &t, &low).await;
    rig.queue_results(&[scored, rejected]).await;
    let (status, entered, _) = rig.finished(&rig.start(&t, &low).await).await;
    assert_eq!(status, ExecutionStatus::Succeeded);
    assert_eq!(entered, ["Score", "Route", "Reject", "RecordRejection"]);
    let p = state(s, &t, &low).await;
    assert_eq!(p.state, ProposalState::Rejected);
    assert!(p.decision_reason.unwrap().contains("below"));

    // 3. A person approves: the execution waits on its task token until SendTaskSuccess.
    let hitl = pending(s, &t, WAITS[0].0, WAITS[0].1, None).await;
    let scored = rig.task("score", &t, &hitl).await;
    assert_eq!(scored["route"], "human", "{scored}");
    rig.queue_results(&[scored]).await;
    let execution = rig.start(&t, &hitl).await;
    let message = rig.consume_wait(&hitl).await;
    assert_eq!(message["timeout_seconds"], 604_800, "the tenant's approval timeout (default 7 days)");
    let p = state(s, &t, &hitl).await;
    assert_eq!(p.state, ProposalState::AwaitingApproval);
    assert_eq!(p.wait.as_ref().unwrap().token, message["token"].as_str().unwrap(), "the token is stored with the proposal");
    tokio::time::sleep(Duration::from_millis(500)).await;
    rig.running_until_wait(&execution).await;
    let listed = s.governance.waiting(&approver, &domain::PageRequest::first(10)).await.unwrap();
    assert!(
        listed.items.iter().any(|w| w.proposal.id == hitl && w.proposal.wait.as_ref().unwrap().token.is_empty()),
        "listed, token hidden"
    );
    // The Write task's output, queued before the decision sends the token.
    let expected_write = json!({"proposal": hitl.as_str(), "state": "written"});
    rig.queue_results(std::slice::from_ref(&expected_write)).await;
    let decided = s.governance.decide(&approver, &hitl, true, Some("Owners know the account".into())).await.unwrap();
    assert_eq!(decided.state, ProposalState::Approved, "on Step Functions the Write state writes it");
    let (status, entered, output) = rig.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{entered:?}");
    assert_eq!(entered, ["Score", "Route", "AwaitApproval", "Apply", "Write"]);
    assert_eq!(output["decision"]["decision"], "approved", "SendTaskSuccess's output: {output}");
    // What the Lambda does when moto calls it — our real Write task — answers what was queued.
    assert_eq!(rig.task("write", &t, &hitl).await, expected_write);
    assert_eq!(s.backend.records.get_memory(&t, &hitl).await.unwrap().unwrap().state, domain::memory::GovernanceState::Active);
    assert_eq!(s.governance.decide(&approver, &hitl, true, None).await.unwrap_err().code, ErrorCode::Conflict);

    // 4. A person rejects: SendTaskFailure("Rejected") → RecordRejection.
    let hitl = pending(s, &t, WAITS[1].0, WAITS[1].1, None).await;
    let scored = rig.task("score", &t, &hitl).await;
    assert_eq!(scored["route"], "human", "{scored}");
    rig.queue_results(&[scored]).await;
    let execution = rig.start(&t, &hitl).await;
    rig.consume_wait(&hitl).await;
    let expected = json!({"proposal": hitl.as_str(), "state": "rejected"});
    rig.queue_results(std::slice::from_ref(&expected)).await;
    let decided = s.governance.decide(&approver, &hitl, false, Some("Escalations go to the account owner".into())).await.unwrap();
    assert_eq!(decided.state, ProposalState::Rejected);
    let (status, entered, output) = rig.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{entered:?}");
    assert_eq!(entered, ["Score", "Route", "AwaitApproval", "RecordRejection"]);
    assert_eq!(output["decision"]["Error"], "Rejected", "{output}");
    assert_eq!(rig.task("record_rejection", &t, &hitl).await, expected);
    assert_eq!(state(s, &t, &hitl).await.decision_reason.as_deref(), Some("Escalations go to the account owner"));

    // 5. An approved action: AwaitApproval → Apply → Act, the connector adapter's request
    //    sent once by the real Act task (the source is an in-process server asserting it).
    let source = FakeSource::start().await;
    let credential = Credential { base_url: Some(source.base_url.clone()), token: "pat-hub".into(), email: None };
    s.admin.set_credential(&t, "hubspot", credential).await.unwrap();
    for (deal, answer, outcome) in [
        ("4001", Answer::json(200, &json!({"id": "4001", "properties": {"dealstage": "closedwon"}})), "written"),
        ("4002", Answer::json(503, &json!({"message": "internal error"})), "failed"),
    ] {
        source.always(answer);
        let act = pending_action(s, &t, deal).await;
        let scored = rig.task("score", &t, &act).await;
        assert_eq!((scored["route"].as_str(), scored["apply"].as_str()), (Some("human"), Some("act")), "{scored}");
        rig.queue_results(&[scored]).await;
        let execution = rig.start(&t, &act).await;
        rig.consume_wait(&act).await;
        let expected = json!({"proposal": act.as_str(), "state": outcome});
        rig.queue_results(std::slice::from_ref(&expected)).await;
        s.governance.decide(&approver, &act, true, None).await.unwrap();
        let (status, entered, output) = rig.finished(&execution).await;
        assert_eq!(status, ExecutionStatus::Succeeded, "{entered:?}");
        assert_eq!(entered, ["Score", "Route", "AwaitApproval", "Apply", "Act"]);
        assert_eq!(output["acted"]["state"], outcome, "{output}");
        assert!(source.take().is_empty(), "moto runs no Lambda code: nothing is sent until the real task runs");
        // What the Lambda does when moto calls it — our real Act task — answers what was queued.
        assert_eq!(rig.task("act", &t, &act).await, expected);
        let seen = source.take();
        assert_eq!(seen.len(), if outcome == "written" { 1 } else { 4 }, "one request, or four attempts: {seen:?}");
        assert_eq!((seen[0].method.as_str(), seen[0].path.as_str()), ("PATCH", format!("/crm/v3/objects/deals/{deal}").as_str()));
        assert_eq!(seen[0].json(), json!({"properties": {"dealstage": "closedwon"}}));
        // Delivered again (a Lambda retry): nothing is sent twice.
        assert_eq!(rig.task("act", &t, &act).await, expected);
        assert!(source.take().is_empty());
        if outcome == "failed" {
            let reason = state(s, &t, &act).await.decision_reason.unwrap();
            assert!(reason.contains("hubspot answered 503") && reason.contains("after 4 attempts"), "{reason}");
        }
    }

    // 6. Nobody decides: the wait times out into Escalate — never auto-approved.
    // (20 s, a 19 s heartbeat: slack for a loaded machine, where moto answers slowly.)
    let strict = TriagePolicy { approval_timeout_secs: 20, ..TriagePolicy::default() };
    s.admin.set_tenant(&t, services::admin::TenantChanges { triage: Some(strict), ..Default::default() }).await.unwrap();
    let hitl = pending(s, &t, WAITS[2].0, WAITS[2].1, None).await;
    let scored = rig.task("score", &t, &hitl).await;
    assert_eq!(scored["route"], "human", "{scored}");
    assert_eq!((scored["timeout_seconds"].as_u64(), scored["heartbeat_seconds"].as_u64()), (Some(20), Some(19)));
    // Escalate's answer is queued with Score's, before the wait starts: the execution
    // reaches Escalate by itself, whenever the timeout fires.
    let expected = json!({"proposal": hitl.as_str(), "state": "expired"});
    rig.queue_results(&[scored, expected.clone()]).await;
    let execution = rig.start(&t, &hitl).await;
    rig.consume_wait(&hitl).await;
    // The resume job's heartbeat reaches the wait (SendTaskHeartbeat accepted).
    let resumed = s.governance.resume(&t, domain::Timestamp(0)).await.unwrap();
    assert!(resumed.heartbeats >= 1, "{resumed:?}");
    let (status, entered, output) = rig.finished(&execution).await;
    assert_eq!(status, ExecutionStatus::Succeeded, "{entered:?}");
    assert_eq!(entered, ["Score", "Route", "AwaitApproval", "Escalate"]);
    assert!(output["error"]["Error"].as_str().unwrap().starts_with("States."), "{output}");
    // Our real Escalate task — what the Lambda runs when moto calls it — answers what was
    // queued, and the proposal expires.
    assert_eq!(rig.task("escalate", &t, &hitl).await, expected);
    // A late decision is refused and changes nothing.
    assert_eq!(s.governance.decide(&approver, &hitl, true, None).await.unwrap_err().code, ErrorCode::Conflict);
    let p = state(s, &t, &hitl).await;
    assert_eq!(p.state, ProposalState::Expired);
    assert!(s.backend.records.get_memory(&t, &hitl).await.unwrap().is_none(), "never auto-approved");
    let workflow = StepFunctionsWorkflow::new(rig.sfn.clone(), &rig.machine);
    let late = workflow.send_success(&p.wait.unwrap().token, &json!({})).await.unwrap_err();
    assert_eq!(late.code, ErrorCode::Conflict, "a timed-out token is CONFLICT: {late:?}");
}

/// The ASL file and the embedded runner have the same states and transitions.
#[test]
fn triage_state_machine_matches_the_runner() {
    let asl: Value = serde_json::from_str(
        &std::fs::read_to_string(continuity_tests::workspace_root().join("statemachines/triage.asl.json")).unwrap(),
    )
    .unwrap();
    let states = asl["States"].as_object().unwrap();
    let mut from_asl: Vec<(String, Vec<String>)> = states
        .iter()
        .map(|(name, s)| {
            let mut next: Vec<String> = Vec::new();
            for v in [&s["Next"], &s["Default"]] {
                if let Some(n) = v.as_str() {
                    next.push(n.into());
                }
            }
            for key in ["Choices", "Catch"] {
                for c in s[key].as_array().into_iter().flatten() {
                    next.push(c["Next"].as_str().unwrap().into());
                }
            }
            next.sort();
            next.dedup();
            (name.clone(), next)
        })
        .collect();
    from_asl.sort();
    let mut from_runner: Vec<(String, Vec<String>)> = services::governance::runner::STATES
        .iter()
        .map(|(n, next)| {
            let mut next: Vec<String> = next.iter().map(|s| (*s).to_owned()).collect();
            next.sort();
            (String::from(*n), next)
        })
        .collect();
    from_runner.sort();
    assert_eq!(from_asl, from_runner);
    assert_eq!(asl["StartAt"], "Score");
    let wait = &states["AwaitApproval"];
    assert!(wait["Resource"].as_str().unwrap().ends_with(".waitForTaskToken"));
    assert!(wait["TimeoutSecondsPath"].is_string() && wait["HeartbeatSecondsPath"].is_string());
    // No timeout path leads anywhere but Escalate, and nothing auto-approves after a wait.
    let timeout = wait["Catch"].as_array().unwrap().iter().find(|c| c["ErrorEquals"][0] == "States.Timeout").unwrap();
    assert_eq!(timeout["Next"], "Escalate");
    // Every Task retries with backoff and is caught into the recorded failure.
    for (name, s) in states.iter().filter(|(n, s)| s["Type"] == "Task" && *n != "RecordFailure") {
        assert!(s["Retry"][0]["BackoffRate"].as_f64().unwrap() > 1.0, "{name} retries with backoff");
        assert!(
            s["Catch"].as_array().unwrap().iter().any(|c| c["ErrorEquals"][0] == "States.ALL" && c["Next"] == "RecordFailure"),
            "{name}"
        );
    }
}

/// `events/triage-score.json` and `events/triage-wait-sqs.json` through the handler, on
/// the embedded backend: Score answers the route, the wait message puts the proposal in
/// the approvers' queue, a malformed wait is reported for redelivery, and a task error
/// carries the taxonomy code as its `errorType` (what the state machine's Retry reads).
#[tokio::test]
async fn sample_events_drive_the_handler() {
    let dir = tempfile::tempdir().unwrap();
    let backend = store_embedded::open_backend(dir.path(), Arc::new(ports::SystemClock)).unwrap();
    let s = Services::new(backend);
    let t = TenantId::new("demo").unwrap();
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::CustomerSuccess, Industry::Saas).await.unwrap();
    let id = pending(&s, &t, WAITS[0].0, WAITS[0].1, None).await;
    let tasks = s.governance.tasks();
    let score = continuity_tests::event("triage-score.json").to_string().replace("PROPOSAL_ID", id.as_str());
    let out = continuity_triage::handle(tasks, serde_json::from_str(&score).unwrap()).await.unwrap();
    assert_eq!(out, json!({"route": "human", "timeout_seconds": 604_800, "heartbeat_seconds": 7800, "apply": "write"}));
    let wait = continuity_tests::event("triage-wait-sqs.json").to_string().replace("PROPOSAL_ID", id.as_str());
    let out = continuity_triage::handle(tasks, serde_json::from_str(&wait).unwrap()).await.unwrap();
    assert_eq!(out["batchItemFailures"], json!([]), "{out}");
    let p = state(&s, &t, &id).await;
    assert_eq!(p.state, ProposalState::AwaitingApproval);
    assert_eq!(p.wait.unwrap().token, "AQB8AAAAKgAAAAMAAAAAAAAAAexampletasktoken");
    // The same message again (SQS delivers at least once): nothing changes.
    let out = continuity_triage::handle(tasks, serde_json::from_str(&wait).unwrap()).await.unwrap();
    assert_eq!(out["batchItemFailures"], json!([]));
    assert_eq!(state(&s, &t, &id).await.version, p.version);
    // A wait for a proposal that does not exist is reported, not dropped.
    let bad = wait.replace(id.as_str(), "no-such-proposal");
    let out = continuity_triage::handle(tasks, serde_json::from_str(&bad).unwrap()).await.unwrap();
    assert_eq!(out["batchItemFailures"][0]["itemIdentifier"], "5b1e1a0c-7a2f-4f1b-9c3e-2d9a0f6b7c11");
    // Scoring it again is CONFLICT (it is waiting): the error type the machine catches.
    let e = continuity_triage::handle(tasks, serde_json::from_str(&score).unwrap()).await.unwrap_err();
    assert_eq!(e.error_type, "CONFLICT");
    // Act before approval is CONFLICT too: nothing is carried out without a person.
    let act = continuity_tests::event("triage-act.json").to_string().replace("PROPOSAL_ID", id.as_str());
    let e = continuity_triage::handle(tasks, serde_json::from_str(&act).unwrap()).await.unwrap_err();
    assert_eq!(e.error_type, "CONFLICT");
    // An approved action whose connector has no credential: failed, with what to do.
    let action = pending_action(&s, &t, "4001").await;
    tasks.score(&t, &action).await.unwrap();
    tasks.register_wait(&t, &action, "token-1", 3600).await.unwrap();
    let mut p = state(&s, &t, &action).await;
    p.state = ProposalState::Approved;
    s.backend.records.update_proposal(&p).await.unwrap();
    let act = continuity_tests::event("triage-act.json").to_string().replace("PROPOSAL_ID", action.as_str());
    let out = continuity_triage::handle(tasks, serde_json::from_str(&act).unwrap()).await.unwrap();
    assert_eq!(out["state"], "failed", "{out}");
    let reason = state(&s, &t, &action).await.decision_reason.unwrap();
    assert!(reason.contains("no hubspot credential") && reason.contains("continuity connector credential set"), "{reason}");
    let e = continuity_triage::handle(tasks, json!({"task": "nope", "tenant": "demo", "proposal": "x"})).await.unwrap_err();
    assert_eq!(e.error_type, "INVALID_REQUEST");
    // RecordFailure with a Step Functions error object keeps a readable cause.
    let other = pending(&s, &t, WAITS[1].0, WAITS[1].1, None).await;
    let failed = continuity_triage::handle(
        tasks,
        json!({"task": "record_failure", "tenant": "demo", "proposal": other.as_str(),
               "error": {"Error": "UNAVAILABLE", "Cause": "{\"errorMessage\": \"table unreachable\", \"errorType\": \"UNAVAILABLE\"}"}}),
    )
    .await
    .unwrap();
    assert_eq!(failed["state"], "failed");
    assert_eq!(state(&s, &t, &other).await.decision_reason.as_deref(), Some("workflow failure: UNAVAILABLE: table unreachable"));

    // A wait whose message never reached the store times out while the proposal is
    // still `scored`: Escalate records it as failed (never approved).
    let lost = pending(&s, &t, WAITS[2].0, WAITS[2].1, None).await;
    let scored =
        continuity_triage::handle(tasks, json!({"task": "score", "tenant": "demo", "proposal": lost.as_str()})).await.unwrap();
    assert_eq!(scored["route"], "human");
    let out =
        continuity_triage::handle(tasks, json!({"task": "escalate", "tenant": "demo", "proposal": lost.as_str()})).await.unwrap();
    assert_eq!(out["state"], "failed");
    // Its message arriving late changes nothing and is not retried.
    let late = wait.replace(id.as_str(), lost.as_str());
    let out = continuity_triage::handle(tasks, serde_json::from_str(&late).unwrap()).await.unwrap();
    assert_eq!(out["batchItemFailures"], json!([]));
    let p = state(&s, &t, &lost).await;
    assert_eq!(p.state, ProposalState::Failed);
    assert!(p.wait.is_none());
}
