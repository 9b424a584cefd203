"""The receipt tools: what became of an urgent notification that repeats until acknowledged
(``send_notification`` with priority urgent and repeat), and stopping it. Declared as in
``connector.tool_set``, whose ``TOOLS`` lists them last."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from connector import outputs
from connector.tool_base import READS, REPEATABLE, Tool, ToolCall
from core.principal import SCOPE_NOTIFICATIONS_SEND
from core.services import receipts
from core.services.interactions import WAIT_MAX_S

Receipt = Annotated[str, Field(description="The rcp_… receipt send_notification returned")]


async def check_receipt(
    call: ToolCall,
    receipt: Receipt,
    wait_seconds: Annotated[
        int, Field(ge=0, le=WAIT_MAX_S, description="Hold up to this long for the acknowledgement")
    ] = 0,
) -> outputs.ReceiptState:
    """Find out whether the user acknowledged an urgent notification sent with repeat: pending
    (the phone is still alerting), acknowledged (on which device, and when), cancelled, or
    expired (it stopped by itself, unacknowledged). Returns at once, or with wait_seconds holds
    until it is acknowledged or that long has passed. Call it when you need to know whether the
    user is on it (to escalate as they asked, or to stop waiting); not in a tight loop."""
    out = await call.core.run(receipts.poll_receipt, call.principal, receipt_id=receipt, wait=wait_seconds)
    return outputs.receipt_state(out)


async def cancel_receipt(call: ToolCall, receipt: Receipt) -> outputs.ReceiptState:
    """Stop an urgent notification from alerting again on the user's devices, e.g. once the
    incident it was about has resolved on its own. Safe to repeat: a notification already
    acknowledged, cancelled or expired is reported as it is."""
    out = await call.core.run(receipts.cancel_receipt, call.principal, receipt_id=receipt)
    return outputs.receipt_state(out)


RECEIPT_TOOLS = [
    Tool(
        "check_receipt",
        SCOPE_NOTIFICATIONS_SEND,
        check_receipt,
        outputs.ReceiptState,
        "Check an urgent notification",
        READS,
    ),
    Tool(
        "cancel_receipt",
        SCOPE_NOTIFICATIONS_SEND,
        cancel_receipt,
        outputs.ReceiptState,
        "Stop an urgent notification",
        REPEATABLE,
    ),
]
