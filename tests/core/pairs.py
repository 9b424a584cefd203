"""A phone and a computer paired through the core operations (no HTTP), for tests of the core."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass

from core.domain.envelope import seal
from core.domain.keys import generate_keypair
from core.principal import Principal
from core.runtime.core import Core
from core.services.auth import Accept, authenticate
from core.services.devices import DeviceCreate, register_phone
from core.services.pairing import PairConfirm, PairInit, confirm_pairing, init_pairing
from core.services.relay import EnvelopeCreate


@dataclass
class Pair:
    phone: Principal
    phone_secret: bytes
    computer: Principal
    computer_public: bytes

    def envelope(self, text: bytes = b"copied text") -> EnvelopeCreate:
        blob = base64.b64encode(seal(text, self.phone_secret, self.computer_public)).decode()
        assert self.computer.device_id is not None
        return EnvelopeCreate(to=self.computer.device_id, type="clipboard", blob=blob)


async def paired(core: Core) -> Pair:
    ip = f"10.7.{secrets.randbelow(256)}.{secrets.randbelow(254) + 1}"
    phone_secret, phone_public = generate_keypair()
    phone_b64 = base64.b64encode(phone_public).decode()
    registered = await core.run(
        register_phone, Principal.anonymous(ip), body=DeviceCreate(public_key=phone_b64)
    )
    phone = await core.run(
        authenticate, Principal.anonymous(ip), token=registered.device_token, accept=Accept.DEVICE
    )
    _, computer_public = generate_keypair()
    init = PairInit(public_key=base64.b64encode(computer_public).decode(), surface_kind="cli", name="laptop")
    code = await core.run(init_pairing, Principal.anonymous(ip), body=init)
    await core.run(confirm_pairing, phone, body=PairConfirm(code=code.code, public_key=phone_b64), ip=ip)
    computer = await core.run(
        authenticate, Principal.anonymous(ip), token=code.device_token, accept=Accept.DEVICE
    )
    return Pair(phone, phone_secret, computer, computer_public)
