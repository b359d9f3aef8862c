#!/usr/bin/env python3
"""Generates tests/corpus/kb.json: the retrieval-quality corpus (SPEC §5.4).

520 knowledge-base documents — 26 internal services x 20 operational topics — each
with its own ticket key and function name, and 240 labelled queries of three kinds:

- `identifier`: a ticket key or function name alone or in a short question; exactly one
  relevant document (it must come first);
- `paraphrase`: the topic asked in other words than the document uses, naming the
  service; one relevant document;
- `topic`: the topic in other words, no service named; all 26 documents of the topic
  are relevant.

Deterministic (fixed seed): re-running it rewrites the same file. Run from the repo
root: `python3 tests/corpus/generate.py`.
"""

import json
import random
from pathlib import Path

SERVICES = [
    "Atlas", "Borealis", "Cobalt", "Dynamo", "Ember", "Fjord", "Granite", "Harbor",
    "Iris", "Juniper", "Kestrel", "Lumen", "Meridian", "Nimbus", "Onyx", "Pylon",
    "Quartz", "Redwood", "Sierra", "Tundra", "Umber", "Vortex", "Willow", "Xenon",
    "Yarrow", "Zephyr",
]

# (slug, title, body, paraphrased question, topic question without a service)
TOPICS = [
    ("refunds", "{s} refund policy",
     "Customers of {s} can ask for a refund within 30 days of purchase. Refunds are issued to the original payment method after the finance team approves the request.",
     "how long do {s} buyers have to get their money back",
     "how long do buyers have to get their money back"),
    ("oncall", "{s} on-call rotation",
     "The {s} team runs a weekly on-call rotation. The primary engineer carries the pager from Monday 09:00 and hands over to the secondary after seven days.",
     "who carries the pager for {s} and when does the shift change",
     "who is responsible for answering alerts outside office hours and when do shifts swap"),
    ("keys", "Rotating {s} signing keys",
     "Signing keys for {s} are rotated every 90 days. Generate the new key in KMS, publish it in the JWKS, and retire the old key after all tokens signed with it have expired.",
     "how often do we replace the cryptographic credentials {s} uses to sign tokens",
     "how often are the cryptographic credentials used for token signatures replaced"),
    ("backups", "{s} database backups",
     "Nightly snapshots of the {s} database are kept for 35 days. Point-in-time recovery is enabled, and a restore drill runs every quarter.",
     "how far back can we recover {s} data if something gets deleted",
     "how far back can lost records be recovered"),
    ("latency", "{s} latency budget",
     "The {s} API must answer 99 percent of requests within 250 milliseconds. Alerts fire when the p99 exceeds the budget for five minutes.",
     "what response time target must {s} meet for nearly all calls",
     "what response time target applies to nearly all calls"),
    ("deploy", "Deploying {s} to production",
     "Production releases of {s} go through the canary stage first: 5 percent of traffic for thirty minutes, then a full rollout if error rates stay flat.",
     "how do we ship a new {s} version to customers safely",
     "how is a new version shipped to customers gradually and safely"),
    ("incident", "{s} incident response",
     "When {s} has a severity-one incident, the incident commander opens a bridge call, posts updates every thirty minutes, and writes the postmortem within five working days.",
     "what happens when {s} goes down badly",
     "what is the procedure when a system suffers a major outage"),
    ("access", "Requesting access to {s}",
     "Access to {s} is requested through the identity portal. A manager approves the request, and permissions are reviewed every six months.",
     "how does a new hire get permission to use {s}",
     "how does a new employee obtain permissions to a system"),
    ("pricing", "{s} pricing tiers",
     "{s} is sold in three tiers: Starter at 29 euros per seat, Growth at 79 euros per seat, and Enterprise with a negotiated annual contract.",
     "how much does {s} cost per user",
     "how much do the plans cost per user"),
    ("retention", "{s} data retention",
     "Personal data held by {s} is deleted 24 months after the customer's last activity, unless a legal hold applies.",
     "when do we erase customer information kept by {s}",
     "when is stored customer information erased"),
    ("ratelimit", "{s} rate limits",
     "Each {s} API key may make 600 requests per minute. Requests over the limit get HTTP 429 with a Retry-After header.",
     "how many calls per minute can a client make against {s} before being throttled",
     "how many calls can a client make before being throttled"),
    ("migration", "{s} schema migrations",
     "Schema changes to {s} are applied with expand-and-contract migrations: add the new column, backfill, switch reads, and drop the old column in a later release.",
     "how do we change {s} table structure without downtime",
     "how are table structures changed without downtime"),
    ("onboarding", "Onboarding a customer to {s}",
     "New {s} customers get a kickoff call, a sandbox tenant, and a named success manager for the first 90 days.",
     "what does a brand-new {s} client receive when they sign up",
     "what does a brand-new client receive when they sign up"),
    ("encryption", "{s} encryption at rest",
     "All {s} data is encrypted at rest with AES-256-GCM under per-tenant data keys wrapped by a KMS master key.",
     "is information stored by {s} protected on disk, and with what cipher",
     "is stored information protected on disk, and with what cipher"),
    ("sla", "{s} service level agreement",
     "{s} guarantees 99.9 percent monthly availability. If availability falls below it, customers receive service credits of 10 percent of the monthly fee.",
     "what uptime does {s} promise and what do clients get if it is missed",
     "what uptime is promised and what compensation follows if it is missed"),
    ("logging", "{s} logging standards",
     "{s} writes structured JSON logs with a tenant id and a request id on every line. Secrets and tokens are never logged.",
     "what format should {s} diagnostic output use and what must never appear in it",
     "what format should diagnostic output use and what must never appear in it"),
    ("capacity", "{s} capacity planning",
     "Capacity for {s} is reviewed monthly. When CPU utilisation stays above 70 percent for a week, the team adds nodes ahead of demand.",
     "when do we add more machines to {s}",
     "when are more machines added to a cluster"),
    ("vendor", "{s} vendor review",
     "Third-party vendors used by {s} must pass a security questionnaire and sign a data processing agreement before any production data is shared.",
     "what must an outside supplier of {s} do before touching real data",
     "what must an outside supplier do before touching real data"),
    ("holidays", "{s} release freeze",
     "No {s} releases are made between 20 December and 3 January. Emergency fixes need approval from the head of engineering.",
     "when can we not ship {s} changes at the end of the year",
     "when is shipping changes forbidden at the end of the year"),
    ("feedback", "{s} customer feedback loop",
     "Feature requests for {s} are collected in the product board, scored every sprint, and the top three are answered publicly each month.",
     "where do {s} users' suggestions for improvements go",
     "where do users' suggestions for improvements go"),
]

VERBS = ["rotate", "sync", "flush", "rebuild", "audit", "export", "reconcile", "drain", "warm", "verify"]


def main() -> None:
    rng = random.Random(20261130)
    docs, by_topic, idents = [], {}, []
    used_keys = set()
    for si, s in enumerate(SERVICES):
        prefix = s[:3].upper()
        for ti, (slug, title, body, _, _) in enumerate(TOPICS):
            while True:
                key = f"{prefix}-{rng.randint(100, 9999)}"
                if key not in used_keys:
                    used_keys.add(key)
                    break
            func = f"{VERBS[(si + ti) % len(VERBS)]}_{s.lower()}_{slug}"
            doc_id = f"kb-{si:02d}{ti:02d}"
            text = body.format(s=s) + f" Tracked in {key}; automated by {func}()."
            docs.append({"id": doc_id, "title": title.format(s=s), "body": text})
            by_topic.setdefault(ti, []).append(doc_id)
            idents.append((doc_id, key, func, s, slug))

    queries = []
    for doc_id, key, func, s, slug in rng.sample(idents, 60):
        form = rng.choice(["{x}", "what is {x}", "status of {x}", "{x} details"])
        queries.append({"kind": "identifier", "query": form.format(x=key), "relevant": {doc_id: 3}})
    for doc_id, key, func, s, slug in rng.sample(idents, 40):
        queries.append({"kind": "identifier", "query": f"{func}", "relevant": {doc_id: 3}})
    for si, ti in rng.sample([(a, b) for a in range(len(SERVICES)) for b in range(len(TOPICS))], 120):
        q = TOPICS[ti][3].format(s=SERVICES[si])
        queries.append({"kind": "paraphrase", "query": q, "relevant": {f"kb-{si:02d}{ti:02d}": 3}})
    for ti in range(len(TOPICS)):
        queries.append({"kind": "topic", "query": TOPICS[ti][4], "relevant": {d: 1 for d in by_topic[ti]}})

    out = {"documents": docs, "queries": queries}
    path = Path(__file__).with_name("kb.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(docs)} documents, {len(queries)} queries -> {path}")


if __name__ == "__main__":
    main()
