"""What the SDK scripts share: token storage in memory and reading a form's fields."""

import re


class MemoryStorage:
    """The SDK's TokenStorage, kept in memory for one run."""

    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


def field(html, name):
    """The value of the hidden input `name` in a page of ours."""
    m = re.search(r'name=%s value="([^"]*)"' % re.escape(name), html)
    assert m, f"no {name} field in the page"
    return m.group(1)
