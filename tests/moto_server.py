"""moto_server as our suites need it: DynamoDB's write atomicity, and fast.

- moto serves requests on several threads and its DynamoDB backend checks a write's
  condition and applies the write without a lock, so two concurrent conditional writes
  to one item can both succeed, which real DynamoDB never allows. Our contract suites
  race conditional writes on purpose (single-use codes, refresh rotation), so DynamoDB's
  reads and writes are serialised with one lock. Everything else (S3, SQS long polls,
  KMS…) stays concurrent.
- TransactWriteItems rolls back the transaction's own items instead of copying whole
  tables (see below).
- a Query reads its partition, not a sorted copy of the whole table (see below).
- moto's app is served by waitress with kept-alive connections, not werkzeug's
  development server, and each request's service is looked up once per host.
- `/moto-api/data.json?service=ses` dumps one service's model instances (the mail
  contract reads SES's sent messages there): the whole dump takes minutes once the
  suites have filled the server.

tests/moto_selftest.py checks the first three against the running server; tests/run.sh
runs it after starting moto. The changes speed up only the stand-in: what the AWS
adapters send and get back is DynamoDB's API either way.

Usage: python tests/moto_server.py -H 127.0.0.1 -p PORT [--exit-with-parent]
"""

import argparse
import copy
import functools
import logging
import os
import threading
import time

import waitress

from moto import backends as moto_backends

from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.moto_api._internal.responses import MotoAPIResponse
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

_LOCK = threading.RLock()

for _name in ("put_item", "update_item", "delete_item", "transact_write_items", "get_item", "query"):
    _original = getattr(DynamoDBBackend, _name)

    def _locked(*args, __original=_original, **kwargs):
        with _LOCK:
            return __original(*args, **kwargs)

    setattr(DynamoDBBackend, _name, functools.wraps(_original)(_locked))


# moto's TransactWriteItems deep-copies each table it touches, whole, once per item of
# the transaction, to roll back on failure: a transaction cost grew with the table (a
# 2,500-company import spent most of its time copying). Here the copy is left out and
# only the items the transaction names are kept, then put back in reverse order if it
# fails: the same all-or-nothing outcome at the cost of the transaction's own items.
class _NoTableCopy:
    """`copy` for moto's DynamoDB module: tables are not copied, all else is."""

    @staticmethod
    def deepcopy(x, memo=None):
        return x if isinstance(x, Table) else copy.deepcopy(x, memo)


dynamodb_models.copy = _NoTableCopy
_transact_write_items = DynamoDBBackend.transact_write_items


def _transact_with_item_rollback(self, transact_items):
    with _LOCK:
        before = []
        for entry in transact_items[:100]:
            _, op = next(iter(entry.items()))
            name = op.get("TableName")
            if name not in self.tables:
                continue
            table = self.tables[name]
            key = op.get("Key")
            if key is None and "Item" in op:
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs.get(table.hash_key_attr)}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs.get(table.range_key_attr)
            if not key or any(v is None for v in key.values()):
                continue
            current = self.get_item(name, key)
            before.append((name, key, current.to_json()["Attributes"] if current else None))
        try:
            return _transact_write_items(self, transact_items)
        except Exception:
            for name, key, attrs in reversed(before):
                if attrs is None:
                    self.delete_item(name, key)
                else:
                    self.put_item(name, attrs)
            raise


DynamoDBBackend.transact_write_items = functools.wraps(_transact_write_items)(_transact_with_item_rollback)


# moto's Query starts from `Table.all_items()`: every item of the table, sorted by key
# (thousands of DynamoType comparisons in Python), then keeps the queried partition (or,
# on an index, the items whose index keys match) and sorts those again. With audit
# records piling up in a test's table, each query cost grew with the whole table and the
# AWS suites spent most of moto's time sorting. During a Query, `all_items` here returns
# only the partition's items for a base-table query and the unsorted items for an index
# query; moto's own filter and sort then run on those as before, so the answer and its
# order are unchanged (a partition's range keys, and an index's key attributes plus the
# table's key, are unique). Scans still get the sorted table: their pages follow its order.
_in_query = threading.local()
_all_items = Table.all_items
_table_query = Table.query


def _query_items(self):
    asked = getattr(_in_query, "asked", None)
    if asked is None or asked[0] is not self:
        return _all_items(self)
    _, hash_key, index_name = asked
    if index_name:
        items = []
        for stored in self.items.values():
            items.extend(stored.values() if self.range_key_attr else [stored])
        return items
    stored = self.items.get(hash_key) if hash_key is not None else None
    if stored is None:
        return []
    return list(stored.values()) if self.range_key_attr else [stored]


def _query_one_partition(self, hash_key, *args, **kwargs):
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    _in_query.asked = (self, hash_key, index_name)
    try:
        return _table_query(self, hash_key, *args, **kwargs)
    finally:
        _in_query.asked = None


Table.all_items = functools.wraps(_all_items)(_query_items)
Table.query = functools.wraps(_table_query)(_query_one_partition)


def _model_data(self, request, full_url, headers):
    """moto's own model dump, limited to `?service=` when given."""
    import json
    from urllib.parse import parse_qs, urlparse

    from moto.core.model_instances import model_data

    only = parse_qs(urlparse(full_url).query).get("service")
    results = {}
    for service in sorted(model_data):
        if only and service not in only:
            continue
        results[service] = {}
        for name in sorted(model_data[service]):
            results[service][name] = []
            for instance in model_data[service][name].instances_tracked:
                fields = {}
                for attr in dir(instance):
                    if attr.startswith("_"):
                        continue
                    try:
                        json.dumps(getattr(instance, attr))
                    except (TypeError, AttributeError, ValueError):
                        continue
                    fields[attr] = getattr(instance, attr)
                results[service][name].append(fields)
    return 200, {"Content-Type": "application/javascript"}, json.dumps(results)


MotoAPIResponse.model_data = _model_data


# moto finds the service of every request under one global lock, and on the way lists its
# own package folder (~150 `stat`s) and tries hundreds of URL patterns: with the suites'
# parallel clients most of the server's time went to waiting for that lock. The answer
# for a host never changes, so it is worked out once per host. Same answers, no waiting.
_listed = tuple(moto_backends.list_of_moto_modules())
moto_backends.list_of_moto_modules = lambda: _listed
_by_host = {}
_get_backend_for_host = DomainDispatcherApplication.get_backend_for_host


def _backend_for_host(self, host):
    if host not in _by_host:
        _by_host[host] = _get_backend_for_host(self, host)
    return _by_host[host]


DomainDispatcherApplication.get_backend_for_host = _backend_for_host

# One log line per request, written under the logging lock, was a tenth of the server's
# time. Warnings and errors are still written.
logging.getLogger("werkzeug").setLevel(logging.WARNING)


def exit_with_parent():
    """Ends this process once its parent has ended (its parent id changes): a test
    process that started a moto of its own cannot stop it on the way out."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def serve(argv=None):
    """moto's app on waitress instead of werkzeug's development server.

    werkzeug's server closes the connection after every response (so each request paid
    a TCP handshake, a new thread and the client's reconnect) and waits up to 10 ms
    after each one for a body nobody sends. waitress keeps connections alive and serves
    them from a pool of threads: the same moto, a few times the requests per second.
    64 threads, so SQS long polls and Step Functions' calls back into this server never
    wait for a free one.
    """
    parser = argparse.ArgumentParser(description="moto_server on waitress")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=int(os.environ.get("MOTO_PORT", "5000")))
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop when the process that started this one ends (a test's own moto)",
    )
    args = parser.parse_args(argv)
    if args.exit_with_parent:
        exit_with_parent()
    # moto's Step Functions interpreter calls this server back on MOTO_PORT.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    waitress.serve(app, host=args.host, port=args.port, threads=64, connection_limit=1000, asyncore_use_poll=True, ident="moto")


if __name__ == "__main__":
    serve()
