"""Settings: the only code that reads the environment (``RELAYBOX_*`` and an optional ``.env``)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class Settings(BaseSettings):
    """Everything relaybox can be told. Tests build their own instance; nothing reads it at import."""

    model_config = SettingsConfigDict(env_prefix="RELAYBOX_", env_file=".env", extra="ignore")

    # Where it listens and how it is reached from outside.
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    public_url: str | None = Field(
        default=None, description="External base URL (https://relay.example); default http://host:port"
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1,::1",
        description="Proxies whose X-Forwarded-Proto/-For are trusted: IPs or CIDRs, comma-separated, or *",
    )
    log_format: Literal["text", "json"] = Field(
        default="text", description="`relaybox serve` logs: text for a terminal, json (one object a line)"
    )
    log_level: Literal["debug", "info", "warning"] = Field(
        default="info",
        description="`relaybox serve`: how much relaybox and uvicorn log (other libraries: warnings)",
    )

    # Storage. Empty database_url = SQLite file in data_dir.
    data_dir: Path = Path(".relaybox")
    database_url: str | None = None
    database_timeout_s: float = Field(
        default=4.0,
        gt=0,
        le=120,
        description="PostgreSQL: the longest one request may hold a connection; past it, 503 unavailable",
    )
    migrate_on_start: bool = True
    # Scale-out: with a Redis URL, rate limits and fan-out are shared by every replica (else in-process).
    redis_url: str | None = Field(
        default=None, description="redis://host:6379/0 — shared limits and fan-out for several replicas"
    )
    redis_namespace: str = Field(
        default="relaybox",
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="Prefix of Redis keys and channels: deployments sharing one Redis stay apart",
    )

    # The server's own X25519 key (base64 of 32 raw bytes). Generated into data_dir on first run if unset.
    server_secret_key: SecretStr | None = None

    # Who may register a phone (core.services.signup). Unset: open when public_url is on loopback
    # (development, tests), else invite.
    registration: Literal["open", "invite", "closed"] | None = Field(
        default=None,
        description="open: anyone may register a phone; invite: the first phone, then only phones with an "
        "invite; closed: no new phones. Default: open on a loopback public URL, else invite",
    )
    open_registrations_per_hour: int = Field(
        default=30, ge=1, description="registration open: phones registered per rolling hour, server-wide"
    )
    open_wrong_codes_per_hour: int = Field(
        default=200,
        ge=1,
        description="registration open: wrong pairing/consent codes per rolling hour, server-wide, that may "
        "count against live codes (those beyond count against their guesser alone)",
    )
    ipv6_limit_prefix: int = Field(
        default=64,
        ge=32,
        le=128,
        description="Per-address limits count an IPv6 address by this network prefix",
    )

    # Pairing.
    pairing_code_ttl_s: int = Field(default=300, ge=30, le=3600)
    pairing_result_ttl_s: int = Field(default=86_400, ge=60)
    pairing_failures_per_ip: int = Field(default=10, ge=1)
    pairing_failures_per_device: int = Field(default=5, ge=1)
    pairing_wrong_guesses_per_code: int = Field(
        default=32, ge=1, description="wrong guesses a live code's bucket may meet before its codes die"
    )
    pairing_failure_window_s: int = Field(default=300, ge=1)
    pair_init_per_ip_per_minute: int = Field(default=10, ge=1)
    register_per_ip_per_minute: int = Field(default=10, ge=1)

    # Devices and tokens.
    status_report_interval_s: int = Field(default=60, ge=1)
    revoked_token_retention_s: int = Field(default=30 * 86_400, ge=0)
    max_tokens_per_account: int = Field(default=50, ge=1)
    max_devices_per_account: int = Field(default=50, ge=1)
    reg_challenge_ttl_s: int = Field(default=600, ge=30)

    # Send-class rate limits (sends, interactions, ring). Rolling windows unless named otherwise.
    limit_token_burst: int = Field(default=60, ge=1, description="per token per rolling 60 s")
    limit_token_monthly: int = Field(default=500, ge=1, description="per token per UTC calendar month")
    limit_receiver_daily: int = Field(
        default=1000, ge=1, description="per receiving account per rolling 24 h"
    )
    limit_ip_minute: int = Field(default=20, ge=1, description="per client IP per rolling minute")
    limit_ip_hour: int = Field(default=200, ge=1, description="per client IP per rolling hour")

    # Phone operations. Minimum phone app builds per feature (0: any reported build).
    min_build_reminders: int = Field(default=0, ge=0)
    min_build_interactions: int = Field(default=0, ge=0)
    min_build_interaction_text: int = Field(
        default=0, ge=0, description="A question with allow_text (the phone must offer a text box)"
    )
    min_build_ring: int = Field(default=0, ge=0)
    min_build_documents: int = Field(default=0, ge=0)
    min_build_notification_clear: int = Field(
        default=0, ge=0, description="Clearing a notification (an older app shows the clear as a message)"
    )
    min_build_urgent_repeat: int = Field(
        default=0, ge=0, description="An urgent send with repeat (the phone must repeat and acknowledge)"
    )
    reminder_min_lead_s: int = Field(
        default=60, ge=1, description="How far ahead a reminder must be; lowered only in tests and demos"
    )
    delay_min_s: int = Field(
        default=10, ge=1, le=10, description="How far ahead a scheduled send must be; lowered only in tests"
    )
    scheduled_max_pending: int = Field(
        default=100, ge=1, le=10_000, description="Per account: scheduled sends waiting for their time"
    )
    urgent_min_repeat_s: int = Field(
        default=30, ge=1, le=3600, description="The shortest repeat of an urgent send; lowered only in tests"
    )
    ring_duration_s: int = Field(default=60, ge=1, le=300)
    document_parking_s: int = Field(default=3600, ge=60, le=3600)
    attachment_quota_bytes: int = Field(
        default=64 * 1024**2, ge=1, description="Per account: bytes of parked notification attachments"
    )

    # Answer callbacks: a signed POST to a question's callback_url when it is answered or expires.
    callbacks_allow_private: bool = Field(
        default=False,
        description="Let callback_url reach private, loopback and link-local addresses (tests, a LAN)",
    )
    callbacks_ca_file: Path | None = Field(
        default=None, description="A PEM file of extra CAs that callback receivers' certificates may chain to"
    )

    # File transfer: devices move encrypted chunks through presigned URLs. With no bucket the
    # server stores them itself under file_store_dir (default: data_dir/objects).
    file_store_dir: Path | None = Field(default=None, description="Embedded object store folder")
    file_transfer_ttl_s: int = Field(default=86_400, ge=60, description="How long a transfer's objects live")
    file_url_ttl_s: int = Field(default=900, ge=10, le=86_400, description="Lifetime of one presigned URL")
    file_max_bytes: int = Field(
        default=2 * 1024**3, ge=1, description="Largest transfer (ciphertext bytes, all chunks)"
    )
    file_chunk_max_bytes: int = Field(default=16 * 1024**2, ge=17, description="Largest chunk (ciphertext)")
    file_max_chunks: int = Field(default=10_000, ge=1, description="Most chunks in one transfer")
    file_quota_bytes: int = Field(
        default=4 * 1024**3, ge=1, description="Per account: bytes of all open transfers together"
    )
    # S3-compatible object storage, used instead of the embedded store when a bucket is set.
    s3_bucket: str | None = None
    s3_endpoint_url: str | None = Field(default=None, description="e.g. https://s3.eu-west-1.amazonaws.com")
    s3_public_endpoint_url: str | None = Field(
        default=None,
        description="The bucket's endpoint as devices reach it, when the server reaches it at another "
        "(compose: http://minio:9000 inside, the public https URL through Caddy outside)",
    )
    s3_region: str = "us-east-1"
    s3_access_key_id: str | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_prefix: str = Field(default="relaybox/", max_length=200, description="Key prefix inside the bucket")

    # The MCP connector's DNS-rebinding guard: Host and Origin values admitted besides public_url's.
    mcp_allowed_hosts: list[str] = Field(default_factory=list)
    mcp_allowed_origins: list[str] = Field(default_factory=list)

    # Push services. Each is used only when configured (and its extra installed).
    fcm_credentials_file: Path | None = Field(default=None, description="Firebase service-account JSON")
    fcm_url: str | None = Field(default=None, description="Override of the FCM send URL (tests, proxies)")
    web_push_enabled: bool = Field(default=True, description="Push to browsers (the web app), RFC 8291")
    vapid_private_key: SecretStr | None = Field(
        default=None, description="Web push VAPID key (b64url or PEM); default: generated into data_dir"
    )
    vapid_subject: str = "mailto:admin@localhost"
    push_timeout_s: float = Field(default=10.0, gt=0)
    # Web-push endpoints go only to the push services browsers use (core.domain.outbound.WEB_PUSH_HOSTS).
    web_push_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts added to those a web-push endpoint may name (a self-hosted push service): "
        "names, or *.domain for the names below it",
    )
    web_push_allow_private: bool = Field(
        default=False,
        description="Let web-push endpoints reach private and loopback addresses (tests, a LAN)",
    )
    web_push_ca_file: Path | None = Field(
        default=None, description="A PEM file of extra CAs that push services' certificates may chain to"
    )

    # Bodies.
    max_body_bytes: int = Field(default=96 * 1024, ge=1024)

    # Relay and streams.
    max_envelope_bytes: int = Field(default=64 * 1024, ge=64, description="Largest relayed blob (raw bytes)")
    stream_keepalive_s: float = Field(default=15.0, gt=0)
    sms_enabled: bool = False

    # OAuth authorization server for the connector. The issuer is ``base_url``: https, or http on a
    # loopback host (checked when the app is built).
    oauth_access_token_ttl_s: int = Field(default=3600, ge=60, le=86_400)
    oauth_refresh_token_ttl_s: int = Field(default=30 * 86_400, ge=3600)
    oauth_code_ttl_s: int = Field(default=120, ge=10, le=600, description="Authorization code lifetime")
    oauth_consent_ttl_s: int = Field(
        default=300, ge=60, le=900, description="Lifetime of the six-digit code on the consent page"
    )
    oauth_client_ttl_s: int = Field(
        default=86_400, ge=60, description="A registered client that never completes a grant is removed"
    )
    oauth_register_per_ip_per_minute: int = Field(default=10, ge=1)
    oauth_consent_per_ip_per_minute: int = Field(default=10, ge=1)
    # Client ID Metadata Documents (a client_id that is an https URL). Documents on loopback and
    # private addresses are refused unless this is set: for tests only, never in production.
    cimd_allow_private: bool = Field(
        default=False, description="Fetch client ID metadata documents from private addresses (tests only)"
    )
    cimd_ca_file: Path | None = Field(
        default=None, description="A PEM file of extra CAs that metadata documents' hosts may chain to"
    )
    cimd_timeout_s: float = Field(default=5.0, gt=0, le=30)
    cimd_max_bytes: int = Field(default=5 * 1024, ge=512, le=64 * 1024)
    cimd_cache_ttl_s: int = Field(default=3600, ge=60, le=86_400)

    @field_validator("public_url")
    @classmethod
    def _strip_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @property
    def base_url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def effective_registration(self) -> Literal["open", "invite", "closed"]:
        """``registration``, or its default: open when the public URL is on loopback, else invite."""
        if self.registration is not None:
            return self.registration
        return "open" if _is_loopback(urlsplit(self.base_url).hostname or "") else "invite"

    @property
    def effective_file_store_dir(self) -> Path:
        return self.file_store_dir or self.data_dir / "objects"

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'relaybox.db').resolve()}"


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ExplicitSettings(Settings):
    """Settings from the given values only — no environment, no ``.env``. What tests build."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def explicit_settings(**values: Any) -> Settings:
    return ExplicitSettings(**values)
