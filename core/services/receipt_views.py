"""A receipt as Pushover's receipt API shows it: the receipt (as ``GET /v1/receipts/{id}`` reads
it, with its rules of who may) and when its acknowledgement callback was delivered, if it was."""

from __future__ import annotations

from core.principal import Principal
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.receipt_callbacks import called_back_at
from core.services.receipts import ReceiptOut, get_receipt


@read_only
def receipt_and_callback(tx: Tx, principal: Principal, *, receipt_id: str) -> tuple[ReceiptOut, int | None]:
    """The receipt (404 ``receipt_not_found`` as ``get_receipt`` refuses) and its callback's
    delivery time."""
    receipt = get_receipt(tx, principal, receipt_id=receipt_id)
    return receipt, called_back_at(tx, receipt_id)
