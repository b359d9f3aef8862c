//! Governed actions that act, tasks through the queue, and the other governed writes
//! (`spine.entity.create`, book entries), on both backends.
//!
//! The sources' write APIs are an in-process HTTP server (`continuity_tests::source`)
//! that records every request and answers like the source documents — success, a 4xx,
//! a 429 with `Retry-After`, a 5xx: there is no local HubSpot, Salesforce, Zendesk,
//! Jira or Stripe. Each adapter's exact request (method, path, headers, body) is
//! asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use continuity_tests::caller;
use continuity_tests::source::{Answer, FakeSource, Seen};
use domain::action::Credential;
use domain::principal::CallerContext;
use domain::proposal::ProposalState;
use domain::spine::EntityRef;
use domain::tenant::{Department, Industry, PlanTier};
use domain::{EntityType, ErrorCode, Id, PageRequest, TenantId};
use ports::records::{EntityStore, LibraryStore, ProposalStore, SignalStore};
use ports::{Backend, SystemClock, Workflow};
use serde_json::{Value, json};
use services::Services;
use services::changes::Change;

struct Rig {
    s: Services,
    t: TenantId,
    agent: CallerContext,
    approver: CallerContext,
    source: FakeSource,
}

async fn rig(backend: Backend) -> Rig {
    let s = Services::new(backend);
    let t = contract::fresh_tenant("act");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    let agent = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    let approver = caller(&s, &t, "approvals:decide tenant:read").await;
    let source = FakeSource::start().await;
    for (name, email) in
        [("hubspot", None), ("salesforce", None), ("zendesk", None), ("jira", Some("bot@acme.test")), ("stripe", None)]
    {
        let credential = Credential {
            base_url: Some(source.base_url.clone()),
            token: format!("{name}-token"),
            email: email.map(str::to_owned),
        };
        s.admin.set_credential(&t, name, credential).await.unwrap();
    }
    Rig { s, t, agent, approver, source }
}

impl Rig {
    async fn propose(&self, connector: &str, operation: &str, target: &str, params: Value) -> Value {
        let args = json!({
            "title": format!("{connector} {operation} {target}"),
            "body": "Agreed on the call of 2 December with the account owner; the signed order form is in the deal's files.",
            "action": {"connector": connector, "operation": operation, "target": target, "params": params},
        });
        self.s.capabilities.execute(&self.agent, "proposal.create", args).await.unwrap().data["proposal"].clone()
    }

    /// Proposes, approves, and returns the proposal as stored plus the requests sent.
    async fn approved(
        &self,
        connector: &str,
        operation: &str,
        target: &str,
        params: Value,
    ) -> (domain::proposal::Proposal, Vec<Seen>) {
        let p = self.propose(connector, operation, target, params).await;
        assert_eq!(p["state"], "awaiting_approval", "an action always waits for a person: {p}");
        let id = Id::new(p["id"].as_str().unwrap()).unwrap();
        self.s.governance.decide(&self.approver, &id, true, Some("go".into())).await.unwrap();
        let stored = self.s.backend.records.get_proposal(&self.t, &id).await.unwrap().unwrap();
        (stored, self.source.take())
    }
}

/// The change notices published since `heard` subscribed.
fn notices(heard: &mut tokio::sync::broadcast::Receiver<Change>) -> Vec<Change> {
    std::iter::from_fn(|| heard.try_recv().ok()).collect()
}

fn one(seen: &[Seen]) -> &Seen {
    assert_eq!(seen.len(), 1, "exactly one request: {seen:?}");
    &seen[0]
}

async fn actions(backend: Backend) {
    let r = rig(backend).await;
    let (s, t) = (&r.s, &r.t);

    // A deal the Spine holds, synced from HubSpot.
    s.ingest.register(&r.agent, "hubspot").await.unwrap();
    let deal = |id: &str, stage: &str| {
        json!({"objectType": "deals", "id": id, "updatedAt": "2026-11-30T10:00:00Z",
               "properties": {"dealname": format!("Acme renewal {id}"), "dealstage": stage, "amount": "48000"},
               "associations": {"companies": {"results": [{"id": "9001", "type": "deal_to_company"}]}}})
    };
    let batch = json!({"records": [deal("4001", "contractsent"), deal("4002", "contractsent"), deal("4003", "contractsent")], "final": true});
    let accepted = s.ingest.accept(&r.agent, "hubspot", batch).await.unwrap();
    assert!(accepted.rejected.is_empty(), "{:?}", accepted.rejected);
    continuity_tests::drain(s).await;
    let f = s.ingest.failures(&r.agent, &PageRequest::first(10)).await.unwrap();
    assert!(f.items.is_empty(), "{:?}", f.items);
    let opportunity = EntityType::new("opportunity").unwrap();
    let deal_id = |n: &str| services::ingest::mapping::canonical_id("hubspot", "opportunity", n);
    let stored = s.backend.records.get_entity(t, &opportunity, &deal_id("4001")).await.unwrap().unwrap();
    assert_eq!(stored.attributes["stage"], domain::value::Value::Text("contractsent".into()));

    // 1. An approved HubSpot deal-stage change: one exact request, the Spine updated from
    //    the answer with a stage_changed signal.
    r.source.script([Answer::json(
        200,
        &json!({"id": "4001", "properties": {"dealstage": "closedwon", "hs_object_id": "4001"}, "updatedAt": "2026-12-02T09:00:00Z", "archived": false}),
    )]);
    let mut heard = s.changes.subscribe();
    let (p, seen) = r.approved("hubspot", "deal.update_stage", "4001", json!({"stage": "closedwon"})).await;
    assert_eq!(p.state, ProposalState::Written, "{p:?}");
    let updated = Change::EntityUpdated {
        tenant: t.clone(),
        entity_type: EntityType::new("opportunity").unwrap(),
        id: services::ingest::mapping::canonical_id("hubspot", "opportunity", "4001"),
    };
    assert!(notices(&mut heard).contains(&updated), "the action's effect on the Spine notifies subscribed sessions");
    let req = one(&seen);
    assert_eq!((req.method.as_str(), req.path.as_str()), ("PATCH", "/crm/v3/objects/deals/4001"));
    assert_eq!(req.header("authorization"), Some("Bearer hubspot-token"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert_eq!(req.header("accept"), Some("application/json"));
    let key = req.header("idempotency-key").unwrap().to_owned();
    assert!(key.starts_with("continuity-") && key.len() > 20, "{key}");
    assert_eq!(req.json(), json!({"properties": {"dealstage": "closedwon"}}));
    let run = p.action.as_ref().unwrap().run.as_ref().unwrap();
    assert_eq!(
        (run.state.as_str(), run.attempts, run.status, run.idempotency_key.as_str()),
        ("done", 1, Some(200), key.as_str())
    );
    let entity = s.backend.records.get_entity(t, &opportunity, &deal_id("4001")).await.unwrap().unwrap();
    assert_eq!(entity.attributes["stage"], domain::value::Value::Text("closedwon".into()));
    assert_eq!(entity.attributes["name"], domain::value::Value::Text("Acme renewal 4001".into()), "other fields kept");
    let me = EntityRef { entity_type: opportunity.clone(), id: deal_id("4001") };
    let signals = s.backend.records.list_signals(t, Some(&me), &PageRequest::first(10)).await.unwrap().items;
    assert!(
        signals.iter().any(|g| g.kind.as_str() == "stage_changed"
            && g.after == Some(domain::value::Value::Text("closedwon".into()))
            && g.before == Some(domain::value::Value::Text("contractsent".into()))),
        "{signals:?}"
    );
    // The approval delivered twice: refused, and the action is not performed again.
    assert_eq!(s.governance.decide(&r.approver, &p.id, true, None).await.unwrap_err().code, ErrorCode::Conflict);
    let token = p.wait.as_ref().unwrap().token.clone();
    let runner = s.governance.runner().expect("the embedded runner");
    assert_eq!(runner.send_success(&token, &json!({})).await.unwrap_err().code, ErrorCode::Conflict);
    assert_eq!(s.governance.tasks().act(t, &p.id).await.unwrap().state, ProposalState::Written);
    assert_eq!(s.governance.tasks().write(t, &p.id, "governance").await.unwrap().state, ProposalState::Written);
    assert!(r.source.take().is_empty(), "performed exactly once");
    // The tool's answer says what happened.
    let status = s.capabilities.execute(&r.agent, "proposal.status", json!({"id": p.id.as_str()})).await.unwrap().data;
    assert_eq!(status["proposal"]["action"]["state"], "done", "{status}");
    assert_eq!(status["proposal"]["action"]["entity"], format!("opportunity:{}", deal_id("4001")).as_str());

    // Two workers racing on one approved action: one claim, one request.
    let p2 = r.propose("hubspot", "deal.update_stage", "4003", json!({"stage": "closedlost"})).await;
    let id2 = Id::new(p2["id"].as_str().unwrap()).unwrap();
    let mut raw = s.backend.records.get_proposal(t, &id2).await.unwrap().unwrap();
    raw.state = ProposalState::Approved;
    s.backend.records.update_proposal(&raw).await.unwrap();
    r.source
        .script([Answer::json(200, &json!({"id": "4003", "properties": {"dealstage": "closedlost"}}))
            .after(Duration::from_millis(400))]);
    let tasks = s.governance.tasks();
    let (a, b) = tokio::join!(tasks.act(t, &id2), tasks.act(t, &id2));
    let outcomes = [&a, &b].map(|x| x.as_ref().map(|p| p.state).map_err(|e| e.code));
    assert!(outcomes.contains(&Ok(ProposalState::Written)), "{outcomes:?}");
    assert!(outcomes.contains(&Err(ErrorCode::Unavailable)), "the second worker finds the claim: {outcomes:?}");
    one(&r.source.take());

    // 2. A 5xx every time: retried with backoff, then failed with the reason.
    r.source.always(Answer::json(503, &json!({"status": "error", "message": "internal error", "category": "INTERNAL_ERROR"})));
    let (p, seen) = r.approved("hubspot", "deal.update_stage", "4002", json!({"stage": "closedwon"})).await;
    assert_eq!(p.state, ProposalState::Failed);
    assert_eq!(seen.len(), 4, "four attempts");
    assert!(seen.iter().all(|q| q.header("idempotency-key") == seen[0].header("idempotency-key")), "one key for every attempt");
    let reason = p.decision_reason.clone().unwrap();
    assert!(reason.starts_with("action failed: hubspot answered 503") && reason.contains("after 4 attempts"), "{reason}");
    assert_eq!(p.action.as_ref().unwrap().run.as_ref().unwrap().state.as_str(), "failed");
    let entity = s.backend.records.get_entity(t, &opportunity, &deal_id("4002")).await.unwrap().unwrap();
    assert_eq!(entity.attributes["stage"], domain::value::Value::Text("contractsent".into()), "unchanged");

    // 3. A 429 with Retry-After: waited for, then performed.
    r.source.script([
        Answer::json(429, &json!({"status": "error", "category": "RATE_LIMITS"})).with_header("Retry-After", "1"),
        Answer::json(200, &json!({"id": "4002", "properties": {"dealstage": "closedwon"}})),
    ]);
    let (p, seen) = r.approved("hubspot", "deal.update_stage", "4002", json!({"stage": "closedwon"})).await;
    assert_eq!((p.state, seen.len()), (ProposalState::Written, 2));

    // 4. A 4xx: not retried; failed with the source's answer.
    r.source.script([Answer::json(400, &json!({"status": "error", "message": "Property values were not valid: dealstage"}))]);
    let (p, seen) = r.approved("hubspot", "deal.update_stage", "4002", json!({"stage": "nosuchstage"})).await;
    assert_eq!((p.state, seen.len()), (ProposalState::Failed, 1));
    let reason = p.decision_reason.unwrap();
    assert!(
        reason.contains("hubspot refused the request (400)") && reason.contains("Property values were not valid"),
        "{reason}"
    );

    // 5. The other adapters' requests, exactly as their APIs document them.
    r.source.script([Answer::empty(204)]);
    let (p, seen) = r.approved("salesforce", "opportunity.update_stage", "006Dn000004ABCD", json!({"stage": "Closed Won"})).await;
    let req = one(&seen);
    assert_eq!(p.state, ProposalState::Written);
    assert_eq!((req.method.as_str(), req.path.as_str()), ("PATCH", "/services/data/v62.0/sobjects/Opportunity/006Dn000004ABCD"));
    assert_eq!(req.header("authorization"), Some("Bearer salesforce-token"));
    assert_eq!(req.json(), json!({"StageName": "Closed Won"}));

    r.source.script([Answer::json(200, &json!({"ticket": {"id": 35436, "status": "open"}, "audit": {"id": 1}}))]);
    let (p, seen) = r.approved("zendesk", "ticket.add_comment", "35436", json!({"body": "Refund issued; see order 1182."})).await;
    let req = one(&seen);
    assert_eq!(p.state, ProposalState::Written);
    assert_eq!((req.method.as_str(), req.path.as_str()), ("PUT", "/api/v2/tickets/35436.json"));
    assert_eq!(req.header("authorization"), Some("Bearer zendesk-token"));
    assert_eq!(req.json(), json!({"ticket": {"comment": {"body": "Refund issued; see order 1182.", "public": false}}}));

    r.source.script([Answer::json(
        201,
        &json!({"id": "10000", "self": "https://acme.atlassian.net/rest/api/3/issue/10010/comment/10000"}),
    )]);
    let (p, seen) =
        r.approved("jira", "issue.add_comment", "PROJ-12", json!({"body": "Fixed in 2.4.1.\n\nReleased today."})).await;
    let req = one(&seen);
    assert_eq!(p.state, ProposalState::Written);
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/rest/api/3/issue/PROJ-12/comment"));
    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD.encode("bot@acme.test:jira-token");
    assert_eq!(req.header("authorization"), Some(format!("Basic {basic}").as_str()));
    assert_eq!(
        req.json(),
        json!({"body": {"type": "doc", "version": 1, "content": [
            {"type": "paragraph", "content": [{"type": "text", "text": "Fixed in 2.4.1."}]},
            {"type": "paragraph", "content": [{"type": "text", "text": "Released today."}]}
        ]}})
    );

    r.source.script([Answer::json(200, &json!({"id": "sub_1MowQVLkdIwHu7ix", "object": "subscription", "status": "canceled"}))]);
    let (p, seen) = r.approved("stripe", "subscription.cancel", "sub_1MowQVLkdIwHu7ix", json!({})).await;
    let req = one(&seen);
    assert_eq!(p.state, ProposalState::Written);
    assert_eq!(
        (req.method.as_str(), req.path.as_str(), req.body.as_str()),
        ("DELETE", "/v1/subscriptions/sub_1MowQVLkdIwHu7ix", "")
    );
    assert_eq!(req.header("authorization"), Some("Bearer stripe-token"));
    assert!(req.header("idempotency-key").is_some(), "Stripe honours idempotency keys");

    // 6. Refused before anyone reviews it: an unknown operation, a missing parameter, a
    //    connector without a credential.
    let bad = |action: Value| {
        let s = s.clone();
        let agent = r.agent.clone();
        async move {
            s.capabilities
                .execute(&agent, "proposal.create", json!({"title": "Do it", "body": "Please do it now.", "action": action}))
                .await
                .unwrap_err()
        }
    };
    let e = bad(json!({"connector": "hubspot", "operation": "deal.delete", "target": "1"})).await;
    assert!(e.code == ErrorCode::InvalidRequest && e.message.contains("deal.update_stage"), "{e:?}");
    let e = bad(json!({"connector": "hubspot", "operation": "deal.update_stage", "target": "1"})).await;
    assert!(e.message.contains("stage"), "{e:?}");
    s.admin.remove_credential(t, "stripe").await.unwrap();
    let e = bad(json!({"connector": "stripe", "operation": "subscription.cancel", "target": "sub_1"})).await;
    assert_eq!(e.code, ErrorCode::ConnectorNotAvailable, "{e:?}");
    // Credentials are never listed, only their sources.
    assert_eq!(s.admin.credential_sources(t).await.unwrap(), ["hubspot", "jira", "salesforce", "zendesk"]);

    // A secret in an action's parameters is redacted before anything is stored, and the
    // proposal rejected; nothing is sent.
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let args = json!({"title": "Note the key", "body": "Record the rotation for the customer.",
                      "action": {"connector": "zendesk", "operation": "ticket.add_comment", "target": "35436",
                                 "params": {"body": format!("aws_secret_access_key = {secret}")}}});
    let p = s.capabilities.execute(&r.agent, "proposal.create", args).await.unwrap().data["proposal"].clone();
    assert_eq!(p["state"], "rejected", "{p}");
    let stored = s.backend.records.get_proposal(t, &Id::new(p["id"].as_str().unwrap()).unwrap()).await.unwrap().unwrap();
    assert!(!format!("{stored:?}").contains(secret), "the secret is not kept");
    assert!(stored.detected.iter().any(|d| d.field == "action.params.body"), "{:?}", stored.detected);

    // A claim whose worker died while a comment was out: not sent again, failed as
    // "outcome unknown" (a comment sent twice would be posted twice).
    let p = r.propose("jira", "issue.add_comment", "PROJ-13", json!({"body": "Shipped."})).await;
    let id = Id::new(p["id"].as_str().unwrap()).unwrap();
    let mut raw = s.backend.records.get_proposal(t, &id).await.unwrap().unwrap();
    raw.state = ProposalState::Approved;
    raw.action.as_mut().unwrap().run = Some(domain::action::ActionRun {
        state: domain::action::ActionState::Performing,
        idempotency_key: "continuity-lost-worker".into(),
        attempts: 0,
        claimed_at: domain::Timestamp(s.backend.clock.now().0 - 10 * 60 * 1000),
        status: None,
        error: None,
        entity: None,
        finished_at: None,
    });
    s.backend.records.update_proposal(&raw).await.unwrap();
    let failed = s.governance.tasks().act(t, &id).await.unwrap();
    assert_eq!(failed.state, ProposalState::Failed);
    assert!(failed.decision_reason.unwrap().contains("outcome is unknown"));
    assert!(r.source.take().is_empty(), "not sent again");

    // Credentials name the source's own hosts over https (loopback only off Lambda), and
    // per-account APIs need their address.
    let cred = |url: Option<&str>| Credential { base_url: url.map(str::to_owned), token: "t".into(), email: None };
    for (source, url) in
        [("salesforce", Some("https://evil.example.com")), ("hubspot", Some("http://api.hubapi.com")), ("zendesk", None)]
    {
        let e = s.admin.set_credential(t, source, cred(url)).await.unwrap_err();
        assert_eq!(
            (e.code, e.payload.field_errors[0].field.as_str()),
            (ErrorCode::InvalidRequest, "base_url"),
            "{source} {url:?}"
        );
    }

    // 7. connector.write is the same governed path through the capability API, for a
    //    connected source.
    let write = json!({"source": "zendesk", "operation": "ticket.update_status", "target": "35436", "params": {"status": "solved"},
                       "reason": "The customer confirmed the refund arrived on 2 December; closing the ticket."});
    let e = s.capabilities.execute(&r.agent, "connector.write", write.clone()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ConnectorNotAvailable, "zendesk is not connected yet: {e:?}");
    s.ingest.register(&r.agent, "zendesk").await.unwrap();
    // (A sales workspace keeps no tickets: the sync brings the organization.)
    let org = json!({"url": "https://acme.zendesk.com/api/v2/organizations/77.json", "id": 77, "name": "Acme",
                     "domain_names": ["acme.com"], "updated_at": "2026-11-30T09:00:00Z"});
    s.ingest.accept(&r.agent, "zendesk", json!({"records": [org], "final": true})).await.unwrap();
    continuity_tests::drain(s).await;
    let out = s.capabilities.execute(&r.agent, "connector.write", write).await.unwrap().data;
    assert_eq!(out["proposal"]["state"], "awaiting_approval", "{out}");
    assert_eq!(out["proposal"]["action"]["operation"], "ticket.update_status");
    assert!(r.source.take().is_empty(), "nothing is sent before approval");
}

async fn tasks_and_governed_writes(backend: Backend) {
    let s = Services::new(backend);
    let t = contract::fresh_tenant("work");
    s.admin.create_tenant(t.clone(), PlanTier::Enterprise, Department::Sales, Industry::Saas).await.unwrap();
    let lead = caller(&s, &t, "mcp:tools tenant:read tenant:write memory:read memory:write").await;
    let worker = caller(&s, &t, "mcp:tools tenant:read memory:read").await;
    let approver = caller(&s, &t, "approvals:decide tenant:read").await;

    // task.dispatch → queue → dispatched → done by its assignee.
    let out = s
        .capabilities
        .execute(&lead, "task.dispatch", json!({"title": "Send the renewal quote", "body": "Acme, 48k, net 30.", "assignee": worker.principal.as_str(), "related": [{"type": "account", "id": "9001"}]}))
        .await
        .unwrap()
        .data;
    assert_eq!(out["task"]["status"], "open", "{out}");
    let id = out["task"]["id"].as_str().unwrap().to_owned();
    continuity_tests::drain(&s).await;
    let mine = s.capabilities.execute(&worker, "task.list", json!({"assignee": "me"})).await.unwrap().data;
    assert_eq!(mine["tasks"][0]["id"], id.as_str());
    assert_eq!(mine["tasks"][0]["status"], "dispatched", "delivered through the queue: {mine}");
    assert_eq!(mine["tasks"][0]["related"], json!(["account:9001"]));
    // Not delivered twice, and nobody else's to move.
    let stranger = caller(&s, &t, "mcp:tools tenant:read").await;
    let e = s.capabilities.execute(&stranger, "task.update", json!({"id": id, "status": "done"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    let e = s.capabilities.execute(&stranger, "task.list", json!({"assignee": worker.principal.as_str()})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden);
    s.capabilities.execute(&worker, "task.update", json!({"id": id, "status": "in_progress"})).await.unwrap();
    let done = s
        .capabilities
        .execute(&worker, "task.update", json!({"id": id, "status": "done", "note": "Sent on 2 December."}))
        .await
        .unwrap()
        .data;
    assert_eq!((done["task"]["status"].as_str(), done["task"]["note"].as_str()), (Some("done"), Some("Sent on 2 December.")));
    let all = s.capabilities.execute(&lead, "task.list", json!({"status": "done"})).await.unwrap().data;
    assert_eq!(all["tasks"].as_array().unwrap().len(), 1, "{all}");
    let e = s.capabilities.execute(&worker, "task.update", json!({"id": id, "status": "in_progress"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidRequest, "a finished task stays finished");
    let e = s.capabilities.execute(&lead, "task.dispatch", json!({"title": "x", "assignee": "nobody-here"})).await.unwrap_err();
    assert!(e.message.contains("nobody-here"), "{e:?}");
    let e = s.capabilities.execute(&worker, "task.dispatch", json!({"title": "x", "assignee": "nobody"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Forbidden, "dispatching needs tenant:write");

    // spine.entity.create: a governed proposal a person approves; then the entity exists.
    let args = json!({"type": "account", "id": "acme-eu", "attributes": {"name": "Acme EU", "domain": "acme.eu"}, "reason": "The EU subsidiary signed its own contract."});
    let p = s.capabilities.execute(&lead, "spine.entity.create", args.clone()).await.unwrap().data["proposal"].clone();
    assert_eq!(p["state"], "awaiting_approval", "{p}");
    let account = EntityType::new("account").unwrap();
    assert!(
        s.backend.records.get_entity(&t, &account, &Id::new("acme-eu").unwrap()).await.unwrap().is_none(),
        "not before approval"
    );
    let id = Id::new(p["id"].as_str().unwrap()).unwrap();
    let mut heard = s.changes.subscribe();
    assert_eq!(s.governance.decide(&approver, &id, true, None).await.unwrap().state, ProposalState::Written);
    // Sessions subscribed to the Spine hear of the entity the approval wrote.
    assert!(
        notices(&mut heard).contains(&Change::EntityUpdated {
            tenant: t.clone(),
            entity_type: account.clone(),
            id: Id::new("acme-eu").unwrap()
        }),
        "an approved entity notifies subscribed sessions"
    );
    let e = s.backend.records.get_entity(&t, &account, &Id::new("acme-eu").unwrap()).await.unwrap().unwrap();
    assert_eq!(e.attributes["name"], domain::value::Value::Text("Acme EU".into()));
    let again = s.capabilities.execute(&lead, "spine.entity.create", args).await.unwrap_err();
    assert_eq!(again.code, ErrorCode::Conflict);
    let e = s
        .capabilities
        .execute(&lead, "spine.entity.create", json!({"type": "account", "id": "x", "attributes": {"colour": "red"}}))
        .await
        .unwrap_err();
    assert!(e.message.contains("colour"), "the schema is checked before anyone reviews it: {e:?}");

    // A book-of-projects entry written by an approved proposal.
    let p = s
        .capabilities
        .execute(
            &lead,
            "proposal.create",
            json!({"title": "Renewal playbook 2027", "body": "Renewals start 120 days before the end date; the owner sends the quote by day 90.",
                   "book": {"project": "renewals", "entry": "playbook"}}),
        )
        .await
        .unwrap()
        .data["proposal"]
        .clone();
    assert!(p["kind"].as_str().unwrap().starts_with("book:renewals/playbook"), "{p}");
    let id = Id::new(p["id"].as_str().unwrap()).unwrap();
    if p["state"] == "awaiting_approval" {
        s.governance.decide(&approver, &id, true, None).await.unwrap();
    }
    let book = s.backend.records.list_book_entries(&t, Some("renewals"), &PageRequest::first(10)).await.unwrap().items;
    assert_eq!(book.len(), 1, "{book:?}");
    assert_eq!((book[0].id.as_str(), book[0].title.as_str()), ("playbook", "Renewal playbook 2027"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_embedded() {
    let dir = tempfile::tempdir().unwrap();
    actions(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_aws() {
    actions(continuity_tests::aws::backend().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_embedded() {
    let dir = tempfile::tempdir().unwrap();
    tasks_and_governed_writes(store_embedded::open_backend(dir.path(), Arc::new(SystemClock)).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_aws() {
    tasks_and_governed_writes(continuity_tests::aws::backend().await).await;
}
