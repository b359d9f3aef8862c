"""Checks that tests/moto_server.py's changes to moto still give DynamoDB's answers.

The launcher serialises DynamoDB writes with a lock and replaces moto's whole-table copy
in TransactWriteItems with a rollback of the transaction's own items. Every contract
suite leans on both, so tests/run.sh runs this once against the server it started:

- a cancelled transaction (a put, an update and a delete, then a failing condition)
  leaves every item as it was;
- a transaction that succeeds applies all of its writes;
- of 16 racing conditional puts of one new item, exactly one wins.

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
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        check(db, table)
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


def fail(why):
    print(f"moto self-test: {why}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1])
    print("moto self-test: transactions roll back, racing conditional puts have one winner")
