"""The mcp SDK's own OAuth client, with a stand-in browser that approves the consent page the way
a person does: open it, read the code, confirm it on the (virtual) phone, tick, Allow.

The browser and the token storage are the ones ``relaybox demo`` uses (``demo.oauth_client``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import anyio
from mcp.client.auth import OAuthClientProvider

from demo import oauth_client as demo_oauth
from demo.oauth_client import CALLBACK, ConfirmOnPhone, MemoryStorage
from demo.oauth_client import ConsentBrowser as ApprovingBrowser

__all__ = ["CALLBACK", "ApprovingBrowser", "MemoryStorage", "cli_confirmer", "oauth_provider"]


def oauth_provider(
    server: str,
    storage: MemoryStorage,
    browser: ApprovingBrowser,
    client_name: str = "relaybox tests",
    auth_method: Literal["none", "client_secret_post", "client_secret_basic"] = "none",
) -> OAuthClientProvider:
    return demo_oauth.oauth_provider(server, storage, browser, client_name, auth_method)


def cli_confirmer(run: Callable[..., object]) -> ConfirmOnPhone:
    """Confirm codes with ``relaybox phone connect`` through a blocking CLI runner."""

    async def confirm(code: str) -> str:
        result = await anyio.to_thread.run_sync(lambda: run("phone", "connect", code))
        assert getattr(result, "returncode", 1) == 0, result
        return str(getattr(result, "stdout", ""))

    return confirm
