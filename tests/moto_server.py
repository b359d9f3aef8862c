"""moto_server with DynamoDB's write atomicity.

moto serves requests on several threads and its DynamoDB backend checks a write's
condition and applies the write without a lock, so two concurrent conditional writes to
one item can both succeed — which real DynamoDB never allows. Our contract suites race
conditional writes on purpose (single-use codes, refresh rotation), so this launcher
serialises moto's DynamoDB write operations with one lock and then runs moto_server
unchanged. Everything else (S3, SQS long polls, KMS…) stays concurrent.

Usage: python tests/moto_server.py -H 127.0.0.1 -p PORT   (same arguments as moto_server)
"""

import functools
import threading

from moto.dynamodb.models import DynamoDBBackend
from moto.server import main

_LOCK = threading.RLock()

for _name in ("put_item", "update_item", "delete_item", "transact_write_items", "get_item", "query"):
    _original = getattr(DynamoDBBackend, _name)

    def _locked(*args, __original=_original, **kwargs):
        with _LOCK:
            return __original(*args, **kwargs)

    setattr(DynamoDBBackend, _name, functools.wraps(_original)(_locked))

if __name__ == "__main__":
    main()
