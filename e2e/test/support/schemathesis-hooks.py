"""Checks of the API fuzz test (openapi-fuzz.e2e.test.ts), loaded by schemathesis through SCHEMATHESIS_HOOKS."""
import json
import os
import re
from urllib.parse import urlsplit

import requests
import schemathesis

# The one 503 a fuzzer may cause on purpose (decisions.md: 503 when no agent can serve): the
# agents and connections it creates have no agent process behind them. Any other status >= 500,
# and this one with another message, is a failure.
AGENT_UNAVAILABLE = re.compile(r"is offline|No online agent can serve|which no longer exists|has no [a-z0-9 ]+ connector")


def _error_body(response):
    """The `error` message when the body is exactly {"error": "<non-empty string>"}, else None."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    if isinstance(body, dict) and list(body) == ["error"] and isinstance(body["error"], str) and body["error"].strip():
        return body["error"]
    return None


@schemathesis.check
def error_body_is_error_only(ctx, response, case):
    """Every 4xx answers exactly {"error": "<message>"}: no other field, no HTML, no empty message."""
    if 400 <= response.status_code < 500 and _error_body(response) is None:
        raise AssertionError(f"{response.status_code} is not {{\"error\": string}}: {response.content[:300]!r}")


@schemathesis.check
def no_server_error(ctx, response, case):
    """No status >= 500, but for a 503 naming an agent that is offline (the fuzzer's own agents)."""
    if response.status_code < 500:
        return
    message = _error_body(response)
    if response.status_code == 503 and message is not None and AGENT_UNAVAILABLE.search(message):
        return
    raise AssertionError(f"server error {response.status_code}: {response.content[:300]!r}")


@schemathesis.hook
def filter_case(ctx, case):
    """Drops a multipart body with a field drawn as an empty list: on the wire that field is simply
    absent (no part is sent for it), so the request is the valid one without it, and a 201 for it
    is right, not a "schema-violating request accepted". A field sent twice is still fuzzed (400)."""
    if (case.media_type or "").startswith("multipart/") and isinstance(case.body, dict):
        return not any(isinstance(value, list) and not value for value in case.body.values())
    return True


# Ids of the API keys the run must not revoke (the key it fuzzes with, the bootstrap key), from the
# test. DELETE /api-keys/{id} stays fuzzed, with any other id: schemathesis reuses ids it saw in
# responses (GET /api-keys lists these keys), and revoking its own key would end the run in 401s.
PROTECTED_KEY_IDS = frozenset(filter(None, os.environ.get("XFER_FUZZ_PROTECTED_KEY_IDS", "").split(",")))
UNKNOWN_ID = "0" * 24


# The console-only run (settings) fuzzes with a session of a user the test made. DELETE
# /settings/sessions signs that session out too: the hooks sign in again, so that route stays
# fuzzed and the requests after it are still authenticated.
SESSION = {
    "token": os.environ.get("XFER_FUZZ_SESSION_TOKEN"),
    "email": os.environ.get("XFER_FUZZ_LOGIN_EMAIL"),
    "password": os.environ.get("XFER_FUZZ_LOGIN_PASSWORD"),
}


@schemathesis.hook
def before_call(ctx, case, kwargs):
    if case.method.upper() == "DELETE" and case.path.endswith("/api-keys/{id}"):
        if str((case.path_parameters or {}).get("id")) in PROTECTED_KEY_IDS:
            case.path_parameters["id"] = UNKNOWN_ID
    if SESSION["token"]:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {SESSION['token']}"}


@schemathesis.hook
def after_call(ctx, case, response):
    signed_out = case.method.upper() == "DELETE" and case.path.endswith("/settings/sessions") and response.status_code == 200
    if SESSION["token"] and signed_out:
        url = urlsplit(response.request.url)
        login = requests.post(
            f"{url.scheme}://{url.netloc}/api/v1/auth/login",
            json={"email": SESSION["email"], "password": SESSION["password"]},
            timeout=30,
        )
        login.raise_for_status()
        SESSION["token"] = login.json()["data"]["token"]
