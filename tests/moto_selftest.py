"""Checks that tests/moto_server.py's changes to moto still give DynamoDB's answers.

The launcher serialises DynamoDB writes with a lock, replaces moto's whole-table copy
in TransactWriteItems with a rollback of the transaction's own items, and lets a Query
read its partition instead of the sorted table. Every contract suite leans on all three,
so tests/run.sh runs this once against the server it started:

- a cancelled transaction (a put, an update and a delete, then a failing condition)
  leaves every item as it was;
- a transaction that succeeds applies all of its writes;
- of 16 racing conditional puts of one new item, exactly one wins;
- queries of the table and of an index, forwards, backwards and a page at a time, give
  the items of the partition asked for, in key order, and nothing else.

Usage: python tests/moto_selftest.py http://127.0.0.1:PORT   (exits 1 with the reason)
"""

import sys
import threading
import uuid

import boto3
import botocore


def main(url):
    db = boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="eu-west-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    table = f"selftest-{uuid.uuid4().hex[:12]}"
    db.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "g", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-g",
                "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        check(db, table)
        check_queries(db, table)
    finally:
        db.delete_table(TableName=table)


def key(pk):
    return {"pk": {"S": pk}, "sk": {"S": "1"}}


def items(db, table):
    return sorted((i["pk"]["S"], i.get("v", {}).get("N")) for i in db.scan(TableName=table)["Items"])


def check(db, table):
    db.put_item(TableName=table, Item={**key("a"), "v": {"N": "1"}})
    db.put_item(TableName=table, Item={**key("b"), "v": {"N": "1"}})
    try:
        db.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {**key("new"), "v": {"N": "1"}}}},
                {
                    "Update": {
                        "TableName": table,
                        "Key": key("a"),
                        "UpdateExpression": "SET v = :n",
                        "ExpressionAttributeValues": {":n": {"N": "2"}},
                    }
                },
                {"Delete": {"TableName": table, "Key": key("b")}},
                {"ConditionCheck": {"TableName": table, "Key": key("absent"), "ConditionExpression": "attribute_exists(pk)"}},
            ]
        )
        fail("a transaction whose condition fails went through")
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] != "TransactionCanceledException":
            raise
    if items(db, table) != [("a", "1"), ("b", "1")]:
        fail(f"a cancelled transaction left {items(db, table)}")

    db.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": {**key("c"), "v": {"N": "1"}}}},
            {"Delete": {"TableName": table, "Key": key("b")}},
        ]
    )
    if items(db, table) != [("a", "1"), ("c", "1")]:
        fail(f"a transaction that succeeded left {items(db, table)}")

    wins = []
    start = threading.Barrier(16)

    def race(n):
        start.wait()
        try:
            db.put_item(
                TableName=table,
                Item={**key("raced"), "v": {"N": str(n)}},
                ConditionExpression="attribute_not_exists(pk)",
            )
            wins.append(n)
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    threads = [threading.Thread(target=race, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(wins) != 1:
        fail(f"{len(wins)} of 16 racing conditional puts won")


def check_queries(db, table):
    for p in range(6):
        for s in range(7):
            # Put out of order, in partitions that sort before and after each other.
            sk = f"{(s * 3) % 7:02d}"
            db.put_item(TableName=table, Item={"pk": {"S": f"q{p}"}, "sk": {"S": sk}, "g": {"S": f"g{(p + s) % 3}"}})

    def query(index=None, value="q3", forward=True, page=None, condition=None):
        kwargs = {"TableName": table, "ScanIndexForward": forward}
        name = "g" if index else "pk"
        kwargs["KeyConditionExpression"] = f"{name} = :v" + (f" AND {condition}" if condition else "")
        kwargs["ExpressionAttributeValues"] = {":v": {"S": value}, **({":s": {"S": "03"}} if condition else {})}
        if index:
            kwargs["IndexName"] = index
        if page:
            kwargs["Limit"] = page
        got = []
        while True:
            out = db.query(**kwargs)
            got += [(i["pk"]["S"], i["sk"]["S"]) for i in out["Items"]]
            if "LastEvaluatedKey" not in out:
                return got
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    everything = [(i["pk"]["S"], i["sk"]["S"], i["g"]["S"]) for i in db.scan(TableName=table)["Items"] if "g" in i]
    partition = sorted((pk, sk) for pk, sk, _ in everything if pk == "q3")
    checks = [
        (query(), partition),
        (query(forward=False), partition[::-1]),
        (query(page=2), partition),
        (query(condition="sk > :s"), [k for k in partition if k[1] > "03"]),
        (query(value="q9"), []),
        (
            query(index="by-g", value="g1", page=4),
            sorted(((pk, sk) for pk, sk, g in everything if g == "g1"), key=lambda k: (k[1], k[0])),
        ),
    ]
    for n, (got, expected) in enumerate(checks):
        if len(expected) == 0 and n != 4 or got != expected:
            fail(f"query {n} gave {got}, not {expected}")


def fail(why):
    print(f"moto self-test: {why}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1])
    print("moto self-test: transactions roll back, racing conditional puts have one winner, queries read their partition")
