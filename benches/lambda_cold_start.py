#!/usr/bin/env python3
"""Cold start of every Lambda binary through a local Lambda Runtime API (#36 §4).

For each function: starts the `bootstrap` binary the way Lambda does (a fresh process,
`AWS_LAMBDA_RUNTIME_API` pointing at this script's Runtime API server, the function's
environment), serves it one event, and measures from exec to its first
`GET …/invocation/next` (init: configuration, clients, the router) and to its first
response posted back. Each function is started RUNS times; the median and the worst
are printed, with the size of the binary and of its deployment zip, compressed as SAM
packs it (deflate at zlib's default level) and with `zip -9`'s level.

The backend is the test rig's: moto (DynamoDB, SQS, S3, KMS) and Redis, named by the
environment `tests/run.sh` exports (CONTINUITY_TEST_MOTO_URL, CONTINUITY_TEST_REDIS_URL).
The events are the light ones from `events/`: API Gateway's `/healthz`, an authorizer
request without a credential (denied without a store read), the heartbeat job, an
empty SQS batch, and a triage `score` of a proposal that does not exist (answered with
its error). Nothing here is AWS's own Lambda service: its sandbox start-up and the zip's
download are not in these figures.

Usage: benches/lambda_cold_start.py [DIR]   (DIR: where the `*/bootstrap` folders are;
default $CARGO_TARGET_DIR/lambda, what `cargo lambda build` writes). RUNS=5 by default.
Build the binaries first, optimised (`release` without link-time optimisation; `--release`
for the deploy profile, with the variables `infra/build.sh` sets for the deploy build —
`CARGO_PROFILE_RELEASE_OPT_LEVEL=z CARGO_PROFILE_RELEASE_LTO=fat
CARGO_PROFILE_RELEASE_PANIC=abort`, docs/aws.md):

    cargo lambda build --profile release-check --x86-64 --compiler cargo \
      --bin continuity-http --bin continuity-authorizer --bin continuity-pipeline \
      --bin continuity-maintenance --bin continuity-triage
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = int(os.environ.get("RUNS", "5"))


def event(name):
    with open(os.path.join(ROOT, "events", name)) as f:
        return f.read()


FUNCTIONS = [
    ("continuity-http", "McpFunction", event("healthz.json")),
    ("continuity-authorizer", "AuthorizerFunction", event("authorizer-request-missing.json")),
    ("continuity-maintenance", "MaintenanceFunction", event("maintenance-heartbeat.json")),
    ("continuity-pipeline", "PipelineFunction", json.dumps({"Records": []})),
    ("continuity-triage", "TriageFunction", json.dumps({"task": "score", "tenant": "demo", "proposal": "no-such-proposal"})),
]


class Run:
    def __init__(self, body):
        self.body = body.encode()
        self.started = time.perf_counter()
        self.ready = None
        self.answered = None
        self.answer = b""
        self.served = False
        self.done = threading.Event()


class Api(BaseHTTPRequestHandler):
    run = None

    def log_message(self, *_):
        pass

    def do_GET(self):
        r = self.run
        if self.path.endswith("/runtime/invocation/next"):
            if r.served:
                # Lambda freezes the sandbox here: the bench is done with it.
                r.done.wait(30)
                self.send_response(500)
                self.end_headers()
                return
            r.ready = time.perf_counter()
            r.served = True
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Lambda-Runtime-Aws-Request-Id", "bench-1")
            self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 30_000))
            self.send_header("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:bench")
            self.send_header("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793")
            self.send_header("Content-Length", str(len(r.body)))
            self.end_headers()
            self.wfile.write(r.body)
        else:
            self.send_response(404)
            self.end_headers()

    def do_POST(self):
        r = self.run
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if "/invocation/" in self.path or "/init/error" in self.path:
            r.answered = time.perf_counter()
            r.answer = self.path.encode() + b" " + body[:300]
            r.done.set()
        self.send_response(202)
        self.end_headers()


def environment(port, function):
    moto = os.environ.get("CONTINUITY_TEST_MOTO_URL", "http://127.0.0.1:5000")
    redis = os.environ.get("CONTINUITY_TEST_REDIS_URL", "redis://127.0.0.1:6379")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{port}",
        "AWS_LAMBDA_FUNCTION_NAME": f"bench-{function}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "CONTINUITY_AWS_ENDPOINT_URL": moto,
        "CONTINUITY_TABLE": "bench-table",
        "CONTINUITY_QUEUE_URL": f"{moto}/123456789012/bench-work",
        "CONTINUITY_DLQ_URL": f"{moto}/123456789012/bench-dlq",
        "CONTINUITY_BUCKET": "bench-bucket",
        "CONTINUITY_REDIS_URLS": redis,
        "CONTINUITY_PUBLIC_URL": "https://api.example.com",
        # As the `production` profile configures a stack: an OpenSearch endpoint and a
        # Bedrock embedder, whose HTTPS clients are built at start-up (the light events
        # below never call them, so the addresses need not answer).
        "CONTINUITY_OPENSEARCH_ENDPOINT": "https://127.0.0.1:9",
        "CONTINUITY_EMBEDDER": "bedrock:amazon.titan-embed-text-v2:0:512",
        "CONTINUITY_BEDROCK_ENDPOINT": "https://127.0.0.1:9",
        "RUST_LOG": "warn",
        "AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH": "true",
    }
    return env


PROVISION = """
import boto3, os, sys
moto = sys.argv[1]
kw = dict(endpoint_url=moto, region_name="eu-west-1", aws_access_key_id="testing", aws_secret_access_key="testing")
ddb = boto3.client("dynamodb", **kw)
if "bench-table" not in ddb.list_tables()["TableNames"]:
    ddb.create_table(TableName="bench-table", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}])
sqs = boto3.client("sqs", **kw)
for q in ("bench-work", "bench-dlq"):
    sqs.create_queue(QueueName=q)
s3 = boto3.client("s3", **kw)
try:
    s3.create_bucket(Bucket="bench-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
"""


def provision():
    """The table, queues and bucket the functions are configured with, in moto."""
    python = os.environ.get("CONTINUITY_TEST_MOTO_PYTHON", sys.executable)
    moto = os.environ.get("CONTINUITY_TEST_MOTO_URL", "http://127.0.0.1:5000")
    subprocess.run([python, "-c", PROVISION, moto], check=True)


def once(binary, function, body):
    # A Runtime API of its own per start: nothing of the previous process reaches it.
    r = Run(body)
    handler = type("Handler", (Api,), {"run": r})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    r.started = time.perf_counter()
    proc = subprocess.Popen([binary], env=environment(server.server_address[1], function),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finished = r.done.wait(30)
    proc.kill()
    _, err = proc.communicate()
    server.shutdown()
    server.server_close()
    if not finished or r.ready is None:
        sys.exit(f"{function}: no answer within 30 s\n{err.decode(errors='replace')[-2000:]}")
    if b"/init/error" in r.answer:
        sys.exit(f"{function}: init failed: {r.answer.decode(errors='replace')}")
    return (r.ready - r.started) * 1000, (r.answered - r.started) * 1000, r.answer


def zipped(binary, level=None):
    """The size of `binary` zipped as `bootstrap`: at zlib's default level, as SAM packs a
    function's code (samcli.lib.package.utils), or at `level`."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as z:
            z.write(binary, "bootstrap")
        return os.path.getsize(path)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "lambda")
    provision()
    print(f"{'function':24} {'init p50/max ms':>17} {'first answer p50/max ms':>25} {'binary MB':>10} {'zip MB (SAM / -9)':>18}")
    for binary_name, function, body in FUNCTIONS:
        binary = os.path.join(base, binary_name, "bootstrap")
        if not os.path.exists(binary):
            sys.exit(f"{binary} is missing: build the functions first (the command in this script's header)")
        inits, answers = [], []
        answer = b""
        for _ in range(RUNS):
            i, a, answer = once(binary, function, body)
            inits.append(i)
            answers.append(a)
        print(f"{binary_name:24} {statistics.median(inits):8.1f} / {max(inits):6.1f} "
              f"{statistics.median(answers):14.1f} / {max(answers):8.1f} "
              f"{os.path.getsize(binary) / 1e6:10.2f} {zipped(binary) / 1e6:11.2f} / {zipped(binary, 9) / 1e6:4.2f}")
        print(f"    answer: {answer[:160].decode(errors='replace')}")


if __name__ == "__main__":
    main()
