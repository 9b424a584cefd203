"""How many wrong guesses a live six-digit code can meet before it dies.

A wrong code names no live code, so a guess cannot be charged to the code it was aimed at. The
code space is split instead into buckets by the first hex digit of the code's keyed digest
(secret: a guesser cannot aim at one bucket on purpose). Every wrong guess is charged to its
bucket over a rolling window as long as the longest code lifetime; when a bucket's count reaches
``pairing_wrong_guesses_per_code``, every live pairing and consent code in it dies (it expires
now: its computer or consent page says so and the person starts again with a new code).

So a live code meets fewer than that many guesses from the 10^6 / 16 codes of its bucket: with
the default 32, its chance of being guessed is below 32 · 16 / 10^6 ≈ 0.05 % however many
addresses and phones the guesser has. And no stranger can lock anyone out: 200 stray guesses put
about 12.5 in a code's bucket and kill it with odds near 10^-6, and a code that does die is
replaced by asking for another. The per-IP and per-phone budgets in ``core.services.pairing``
make each guesser wait besides.
"""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import col

from core.adapters.limits.base import LimitCheck
from core.runtime.tx import Tx
from core.store.tables import ConsentSession, PairingCode

BUCKET_DIGITS = 1  # leading hex digits of the digest that name its bucket: 16 buckets


def guess_bucket(code_digest: str) -> str:
    return code_digest[:BUCKET_DIGITS]


def charge_wrong_code(tx: Tx, code_digest: str) -> None:
    """Count a wrong guess against its bucket; at the limit, the bucket's live codes die."""
    bucket = guess_bucket(code_digest)
    window = max(tx.settings.pairing_code_ttl_s, tx.settings.oauth_consent_ttl_s)
    check = LimitCheck("code_guesses", bucket, tx.settings.pairing_wrong_guesses_per_code, window)
    decision = tx.limiter.acquire([check], tx.clock.now())
    if decision.allowed and decision.binding.remaining > 0:
        return
    now = tx.now()
    tx.session.execute(
        update(PairingCode)
        .where(col(PairingCode.code_digest).startswith(bucket), col(PairingCode.expires_at) > now)
        .values(expires_at=now)
    )
    tx.session.execute(
        update(ConsentSession)
        .where(
            col(ConsentSession.code_digest).startswith(bucket),
            col(ConsentSession.confirmed_at).is_(None),
            col(ConsentSession.expires_at) > now,
        )
        .values(expires_at=now)
    )
