"""The consent page: server-rendered HTML with the site's stylesheet, no other asset, a strict CSP.

It names who is asking (client name, the host the browser returns to, whether the client runs on
this computer) and shows the six-digit code to type into the phone. A small same-origin script,
allowed by a per-response nonce, long-polls the session's status and, once the phone confirmed,
reveals the requested scopes as checkboxes with Allow / Deny. The form carries a CSRF token;
``form-action`` admits the page itself and the client's redirect origin (where the answer goes).

A refused authorization request that cannot be sent back to the client is an error page instead:
in plain words what is wrong and what to do, naming the parameter at fault but never echoing its
value, with the RFC 6749 ``error`` code for whoever debugs the app.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from starlette.responses import HTMLResponse

from oauth.redirect_uris import csp_source, is_loopback, redirect_host
from oauth.scopes import DESCRIPTIONS


@dataclass(frozen=True)
class ConsentView:
    session_id: str
    code: str
    client_id: str
    client_name: str
    metadata_document: bool
    redirect_uri: str
    scopes: list[str]
    csrf_token: str
    ttl_s: int


# Every page wears the site's stylesheet (webapp/static/site.css: light and dark, readable on a
# phone); the consent page's own rules are its "OAuth pages" section.
HEAD = """<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<link rel="stylesheet" href="/static/site.css">"""
BANNER = (
    '<header class="site-header"><div class="inner"><a class="brand" href="/">relaybox</a></div></header>'
)

SCRIPT = """
(function () {
  "use strict";
  var root = document.getElementById("consent");
  var waiting = document.getElementById("waiting");
  var form = document.getElementById("decide");
  var over = document.getElementById("over");
  var allow = document.getElementById("allow");
  var boxes = form.querySelectorAll("input[name=scope]");
  function sync() {
    var any = false;
    boxes.forEach(function (box) { any = any || box.checked; });
    allow.disabled = !any;
  }
  boxes.forEach(function (box) { box.addEventListener("change", sync); });
  function show(section) { waiting.hidden = true; section.hidden = false; }
  function pause(ms) { return new Promise(function (done) { setTimeout(done, ms); }); }
  async function watch() {
    for (;;) {
      var reply;
      try {
        reply = await fetch(root.dataset.statusUrl + "?wait=25",
                            {cache: "no-store", credentials: "same-origin"});
      } catch (error) {
        await pause(2000);
        continue;
      }
      if (!reply.ok) { show(over); return; }
      var state = await reply.json();
      if (state.status === "confirmed") {
        if (state.phone_name) {
          document.getElementById("confirmed-by").textContent =
            "Confirmed on your phone (" + state.phone_name + ").";
        }
        show(form);
        sync();
        return;
      }
      if (state.status !== "pending") { show(over); return; }
    }
  }
  watch();
})();
"""


def consent_page(view: ConsentView) -> HTMLResponse:
    nonce = secrets.token_urlsafe(18)
    name = escape(view.client_name)
    spaced = f"{view.code[:3]} {view.code[3:]}"
    identity = (
        f"<dt>Described at</dt><dd>{escape(view.client_id)}</dd>"
        if view.metadata_document
        else "<dt>Name</dt><dd>chosen by the app itself (not verified)</dd>"
    )
    boxes = "".join(
        f'<label><input type="checkbox" name="scope" value="{escape(scope)}" checked> '
        f"{escape(DESCRIPTIONS.get(scope, scope))} <code>{escape(scope)}</code></label>"
        for scope in view.scopes
    )
    status_url = f"/oauth/consent/{escape(view.session_id)}/status"
    body = f"""<!doctype html>
<html lang="en"><head>{HEAD}
<title>Connect {name} to relaybox</title></head>
<body>{BANNER}<main class="oauth-page"><div class="card" id="consent" data-status-url="{status_url}">
<h1>Connect <span id="client-name">{name}</span> to your phone</h1>
<dl class="facts"><dt>App</dt><dd>{name}</dd>
<dt>Returns you to</dt><dd id="redirect-host">{escape(redirect_host(view.redirect_uri))}</dd>
<dt>Runs</dt><dd id="client-kind">{_runs(view.redirect_uri)}</dd>
{identity}</dl>
<section id="waiting"><p>To continue, type this code into relaybox on your phone:</p>
<p class="code"><output id="code">{spaced}</output></p>
<p class="hint">With the virtual phone: <code>relaybox phone connect {view.code}</code></p>
<p class="hint">The code works once and for {view.ttl_s // 60} minutes.
Nothing is shared until you choose Allow.</p>
<noscript><p>This page needs JavaScript to notice your phone's confirmation.</p></noscript></section>
<section id="over" hidden><p>This request expired or was already answered.
Start connecting again from {name}.</p></section>
<form id="decide" method="post" action="/oauth/consent/{escape(view.session_id)}/decision" hidden>
<input type="hidden" name="csrf_token" value="{escape(view.csrf_token)}">
<p id="confirmed-by">Confirmed on your phone.</p>
<fieldset><legend>{name} asks to:</legend>{boxes}</fieldset>
<div class="button-row">
<button class="button" type="submit" name="decision" value="deny" id="deny">Deny</button>
<button class="button primary" type="submit" name="decision" value="allow" id="allow">Allow</button>
</div></form>
</div></main><script nonce="{nonce}">{SCRIPT}</script></body></html>"""
    return HTMLResponse(body, headers=page_headers(nonce, csp_source(view.redirect_uri)))


def _runs(redirect_uri: str) -> str:
    if is_loopback(redirect_uri):
        return 'on this computer <span class="badge">loopback</span>'
    if not redirect_uri.startswith(("http://", "https://")):
        return "as an app on this device (its own URI scheme)"
    return "on the web"


START_AGAIN = "Start connecting again from the app."
BY_HAND = (
    "This is the authorization endpoint an AI assistant's app opens to connect to relaybox; "
    "open it from the app, not by hand."
)
OAUTH_PARAMETERS = ("response_type", "client_id", "redirect_uri")
SINGLE = (*OAUTH_PARAMETERS, "scope", "state")  # what Authlib refuses to see twice (RFC 6749 §3.1)


def error_page(status: int, title: str, message: str, code: str | None = None) -> HTMLResponse:
    """An error the browser shows instead of a redirect (the redirect URI is not trusted);
    ``code`` is the stable RFC 6749 ``error`` value, shown below the message."""
    shown = f'\n<p id="error-code">Error code: <code>{escape(code)}</code></p>' if code else ""
    body = f"""<!doctype html>
<html lang="en"><head>{HEAD}
<title>{escape(title)}</title></head>
<body>{BANNER}<main class="oauth-page"><div class="card error-state"><h1>{escape(title)}</h1>
<p id="error">{escape(message)}</p>{shown}</div></main></body></html>"""
    return HTMLResponse(body, status_code=status, headers=page_headers(None, None))


def response_type_problem(response_type: str | None) -> str:
    """What is wrong with a ``response_type`` other than ``code`` (ASCII, fit for a redirect)."""
    if not response_type:
        return "The request has no response_type; send response_type=code."
    return "The response_type must be code."


def refusal(error: str, params: Mapping[str, list[str]]) -> tuple[str, str]:
    """The title and message of a refused authorization request shown as a page: which parameter
    is at fault and what to do. ``error`` is the RFC 6749 code, ``params`` the query, by name.
    Such a page is shown when the answer cannot go back to the client's redirect URI."""
    if not any(params.get(name) for name in OAUTH_PARAMETERS):
        return "Open this from your app", BY_HAND
    repeated = next((name for name in SINGLE if len(params.get(name, [])) > 1), None)
    if error == "unsupported_response_type":
        response_type = params.get("response_type", [""])[0]
        return "This request is not supported", f"{response_type_problem(response_type)} {START_AGAIN}"
    if error == "invalid_request" and repeated:
        return (
            "This request is malformed",
            f"The {repeated} parameter appears more than once; an authorization request names "
            f"each parameter once. {START_AGAIN}",
        )
    if error == "invalid_client" and not params.get("client_id", [""])[0]:
        return (
            "The app did not say who it is",
            f"The request has no client_id, so relaybox cannot tell which app is asking. {START_AGAIN}",
        )
    if error == "invalid_client":
        return (
            "This app is not known here",
            "The client_id is not registered with this relaybox server: the app may have registered "
            f"with another server, or its registration expired or was removed. {START_AGAIN}",
        )
    if error == "invalid_request" and params.get("redirect_uri", [""])[0]:
        return (
            "This return address is not allowed",
            "The redirect_uri is not one this app registered, so relaybox will not send you there. "
            f"{START_AGAIN}",
        )
    if error == "invalid_request":  # Authlib's: no redirect_uri, and no single one to default to
        return (
            "The return address is missing",
            "The request has no redirect_uri, and this app registered more than one, so relaybox "
            f"cannot tell where to send you back. {START_AGAIN}",
        )
    return "This request was refused", f"relaybox refused the app's authorization request. {START_AGAIN}"


def page_headers(nonce: str | None, redirect_source: str | None) -> dict[str, str]:
    allowed = f"'nonce-{nonce}'" if nonce else "'none'"
    form_action = "'self'" + (f" {redirect_source}" if redirect_source else "")
    policy = (
        f"default-src 'none'; script-src {allowed}; style-src 'self'; connect-src 'self'; "
        f"img-src 'none'; form-action {form_action}; frame-ancestors 'none'; base-uri 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }
