"""What a connector tool is: its declaration (``Tool``), the call it runs with (``ToolCall``) and
the hints clients show for it. The tools themselves are declared in ``connector.tool_set`` (and
the receipt tools in ``connector.receipt_tools``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp.types import ToolAnnotations
from pydantic import BaseModel

from core.principal import Principal
from core.runtime.core import Core


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool: the core it runs on and the verified connector grant making it."""

    core: Core
    principal: Principal

    @property
    def ip(self) -> str:
        # Per-IP layers key on the grant: every assistant platform calls from a few shared addresses.
        return f"grant:{self.principal.grant_id}"


@dataclass(frozen=True)
class Tool:
    """A tool as clients see it: ``operation`` runs it (``ToolCall`` first, then the arguments) and
    returns an ``output``; the auth gate asks for ``scope`` before the call reaches it."""

    name: str
    scope: str
    operation: Callable[..., Awaitable[BaseModel]]
    output: type[BaseModel]
    title: str
    annotations: ToolAnnotations


CHANGES = ToolAnnotations(read_only_hint=False, idempotent_hint=False)
REPEATABLE = ToolAnnotations(read_only_hint=False, idempotent_hint=True)
READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
