"""moto_server with DynamoDB's write atomicity.

moto serves requests on several threads and its DynamoDB backend checks a write's
condition and applies the write without a lock, so two concurrent conditional writes to
one item can both succeed — which real DynamoDB never allows. Our contract suites race
conditional writes on purpose (single-use codes, refresh rotation), so this launcher
serialises moto's DynamoDB write operations with one lock and then runs moto_server
unchanged. Everything else (S3, SQS long polls, KMS…) stays concurrent.

It also lets `/moto-api/data.json?service=ses` dump one service's model instances (the
mail contract reads SES's sent messages there): the whole dump takes minutes once the
suites have filled the server.

Usage: python tests/moto_server.py -H 127.0.0.1 -p PORT   (same arguments as moto_server)
"""

import functools
import threading

from moto.dynamodb.models import DynamoDBBackend
from moto.moto_api._internal.responses import MotoAPIResponse
from moto.server import main

_LOCK = threading.RLock()

for _name in ("put_item", "update_item", "delete_item", "transact_write_items", "get_item", "query"):
    _original = getattr(DynamoDBBackend, _name)

    def _locked(*args, __original=_original, **kwargs):
        with _LOCK:
            return __original(*args, **kwargs)

    setattr(DynamoDBBackend, _name, functools.wraps(_original)(_locked))


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

if __name__ == "__main__":
    main()
