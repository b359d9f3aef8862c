"""A headless 'browser' for the conformance suite's interactive authorization-code test.

Reads the suite's output until it prints the authorize URL, opens our login page,
signs in as the given user, approves, and follows the redirect to the suite's callback
server. Standard library only.

Usage: browser.py OUTPUT_FILE TENANT EMAIL PASSWORD
"""

import http.cookiejar
import re
import sys
import time
import urllib.parse
import urllib.request

out_file, tenant, email, password = sys.argv[1:5]
deadline = time.time() + 60
url = None
while time.time() < deadline and url is None:
    with open(out_file, encoding="utf-8", errors="replace") as f:
        m = re.search(r"^(https?://\S+/oauth/authorize\?\S+)$", f.read(), re.M)
    if m:
        url = m.group(1)
    else:
        time.sleep(0.2)
if url is None:
    sys.exit("the conformance suite printed no authorize URL")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)


def field(html, name):
    m = re.search(r'name="?%s"? value="([^"]*)"' % re.escape(name), html)
    if not m:
        sys.exit(f"no {name} field on the page: {html[:300]}")
    return m.group(1)


page = opener.open(url).read().decode()
form_url = url.split("?")[0]
common = {"request_id": field(page, "request_id"), "csrf": field(page, "csrf")}
login = dict(common, action="login", tenant=tenant, email=email, password=password)
consent = opener.open(form_url, urllib.parse.urlencode(login).encode()).read().decode()
if "Allow access" not in consent:
    sys.exit(f"sign-in failed: {consent[:300]}")
try:
    opener.open(form_url, urllib.parse.urlencode(dict(common, action="approve")).encode())
    sys.exit("expected a redirect after consent")
except urllib.error.HTTPError as e:
    if e.code != 303:
        sys.exit(f"consent answered {e.code}")
    location = e.headers["Location"]
urllib.request.urlopen(location).read()
print("delivered the authorization response to", location.split("?")[0])
