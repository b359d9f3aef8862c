"""What the SDK scripts share: token storage in memory and reading a form's fields."""

import re
from urllib.parse import parse_qs, urljoin, urlparse


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
    m = re.search(r'name="?%s"? value="([^"]*)"' % re.escape(name), html)
    assert m, f"no {name} field in the page"
    return m.group(1)


async def sign_in_and_allow(browser, authorize_url, tenant, email, password, before_sign_in=None):
    """Our sign-in and consent pages, as a browser would use them: open the authorize URL,
    sign in, allow, and return the redirect's code, state and iss. `before_sign_in(page,
    form_url, form)` may look at the page and post other attempts first."""
    page = await browser.get(authorize_url)
    assert page.status_code == 200, (page.status_code, page.text[:300])
    form_url = urljoin(authorize_url.split("?")[0], "authorize")
    form = {"request_id": field(page.text, "request_id"), "csrf": field(page.text, "csrf")}
    if before_sign_in is not None:
        await before_sign_in(page, form_url, form)
    consent = await browser.post(form_url, data={**form, "action": "login", "tenant": tenant, "email": email,
                                                 "password": password})
    assert consent.status_code == 200 and "Allow access" in consent.text, consent.text[:300]
    done = await browser.post(form_url, data={**form, "action": "approve"})
    assert done.status_code == 303, (done.status_code, done.text[:300])
    q = parse_qs(urlparse(done.headers["location"]).query)
    return {"code": q["code"][0], "state": q["state"][0], "iss": q["iss"][0]}
