"""How many wrong guesses a live six-digit code can meet before it dies, and who can make them.

A wrong code names no live code, so a guess cannot be charged to the code it was aimed at. The
code space is split instead into buckets by the first hex digit of the code's keyed digest
(secret: a guesser cannot aim at one bucket on purpose). A wrong guess is charged to its bucket
over a rolling window as long as the longest code lifetime; when a bucket's count reaches
``pairing_wrong_guesses_per_code``, every live pairing and consent code in it dies (it expires
now: its computer or consent page says so and the person starts again with a new code).

So a live code meets fewer than that many guesses from the 10^6 / 16 codes of its bucket while
it lives: with the default 32, its chance of being guessed is below 32 · 16 / 10^6 ≈ 0.05 %.

Who can guess at all: a wrong guess needs a phone's credential, and each phone and each address
(an IPv6 /64 as one, ``core.services.limits.address_key``) has budgets of its own in
``core.services.pairing``. Where registration is by invite or closed (``core.services.signup``),
every phone is the owner's or an invitee's: a stranger has none. Where it is open, strangers may
register phones (at most ``open_registrations_per_hour`` an hour, server-wide), so there only the
first ``open_wrong_codes_per_hour`` wrong guesses of any hour, server-wide, are charged to the
buckets; those beyond are answered as wrong all the same, charged to their guesser's own budgets
alone, and kill nothing. With the defaults that is at most 200 in any code's lifetime, spread over
16 buckets (12.5 each): a bucket reaches 32 with odds near 10^-6, so no number of strangers,
addresses and phones kills someone else's live code, and one that does die is replaced by asking
for another. The price, where registration is open: beyond that hourly share a live code's chance
of being guessed is bounded by the guessers' own budgets (5 wrong codes a phone and 10 an address
per 5 minutes) times the phones they registered, no longer by its bucket. A server on the
internet takes phones by invite, its default.
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
    """Count a wrong guess against its bucket; at the limit, the bucket's live codes die. Where
    registration is open, only while the hour's server-wide share lasts."""
    if tx.settings.effective_registration == "open" and not _within_open_share(tx):
        return
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


def _within_open_share(tx: Tx) -> bool:
    """Whether this wrong guess is among the first ``open_wrong_codes_per_hour`` of the rolling
    hour, server-wide (counted only when it is)."""
    check = LimitCheck("open_wrong_codes", "server", tx.settings.open_wrong_codes_per_hour, 3600)
    return tx.limiter.acquire([check], tx.clock.now()).allowed
