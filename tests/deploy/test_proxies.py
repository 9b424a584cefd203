"""Every proxy example lets the largest file chunk through: the Ingress's annotations, the nginx server
block (also run here: nginx passes a chunk of RELAYBOX_FILE_CHUNK_MAX_BYTES to relaybox and refuses
one past its own limit) and the Caddyfile (adapted by Caddy: no body limit, the bucket's path to
MinIO, everything else to relaybox, streamed)."""

from __future__ import annotations

import json
import re
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from core.settings import Settings
from tests.deploy.test_manifests import DEPLOY, compose, k8s
from tests.e2e.conftest import RelayboxServer, free_port
from tests.services import missing

CHUNK_MAX = int(
    k8s("ConfigMap")["data"].get(
        "RELAYBOX_FILE_CHUNK_MAX_BYTES", Settings.model_fields["file_chunk_max_bytes"].default
    )
)
NGINX_CONF = DEPLOY / "nginx" / "relaybox.conf"
SIZE = re.compile(r"^(\d+)([kKmMgG]?)$")


def nginx_bytes(size: str) -> int:
    """nginx's size syntax (``17m``, ``512k``, bytes) in bytes."""
    match = SIZE.match(size)
    assert match, size
    power: int = " kmg".index((match[2] or " ").lower())
    return int(match[1]) * int(1024**power)


def directive(name: str) -> str:
    [value] = re.findall(rf"^\s*{name}\s+([^;]+);", NGINX_CONF.read_text(), re.MULTILINE)
    return str(value).strip()


def trusting(folder: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(folder / "ca.pem"))


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"{name} is not installed (apt-get install {name})")
    return found


def test_the_configmaps_chunk_size_is_one_the_settings_accept() -> None:
    assert Settings(_env_file=None, file_chunk_max_bytes=CHUNK_MAX).file_chunk_max_bytes == CHUNK_MAX
    assert CHUNK_MAX >= 16 * 1024**2


def test_the_ingress_lets_the_largest_chunk_through_unbuffered() -> None:
    annotations = k8s("Ingress")["metadata"]["annotations"]
    assert nginx_bytes(annotations["nginx.ingress.kubernetes.io/proxy-body-size"]) > CHUNK_MAX
    assert annotations["nginx.ingress.kubernetes.io/proxy-request-buffering"] == "off"
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600


def test_the_nginx_block_lets_the_largest_chunk_through_and_streams() -> None:
    assert nginx_bytes(directive("client_max_body_size")) > CHUNK_MAX
    assert directive("proxy_buffering") == "off" and directive("proxy_request_buffering") == "off"
    assert directive("proxy_read_timeout") == "1h"
    assert "ip_hash;" in NGINX_CONF.read_text()  # legacy MCP sessions stay on one replica
    headers = re.findall(r"proxy_set_header\s+(\S+)\s+([^;]+);", NGINX_CONF.read_text())
    assert ("Host", "$host") in headers and ("X-Forwarded-Proto", "$scheme") in headers


@pytest.fixture
def nginx_in_front(tmp_path: Path) -> Iterator[str]:
    """deploy/nginx/relaybox.conf as shipped, on free ports, with a throwaway CA's certificate, in
    front of a real relaybox: the https origin it serves."""
    nginx = tool("nginx")
    server = RelayboxServer(tmp_path / "relaybox", port=free_port())
    ca = trustme.CA()
    leaf = ca.issue_cert("relay.example.com", "127.0.0.1")
    leaf.cert_chain_pems[0].write_to_path(tmp_path / "fullchain.pem")
    leaf.private_key_pem.write_to_path(tmp_path / "privkey.pem")
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    http_port, https_port = free_port(), free_port()
    block = (
        NGINX_CONF.read_text()
        .replace("/etc/letsencrypt/live/relay.example.com/", f"{tmp_path}/")
        .replace("server 127.0.0.1:8787;", f"server 127.0.0.1:{server.port};")
        .replace("listen 80;", f"listen 127.0.0.1:{http_port};")
        .replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
    )
    block = re.sub(r"^\s*listen \[::\].*$", "", block, flags=re.MULTILINE)
    (tmp_path / "relaybox.conf").write_text(block)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log; daemon off;\n"
        "events { worker_connections 64; }\n"
        f"http {{ access_log off; client_body_temp_path {tmp_path}/body;\n"
        f"       include {tmp_path}/relaybox.conf; }}\n"
    )
    checked = subprocess.run(
        [nginx, "-t", "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr
    with server:
        server.wait_until_ready()
        process = subprocess.Popen([nginx, "-c", str(tmp_path / "nginx.conf")], stderr=subprocess.DEVNULL)
        try:
            origin = f"https://127.0.0.1:{https_port}"
            with httpx.Client(verify=trusting(tmp_path), trust_env=False, timeout=30) as http:
                for _ in range(200):  # bounded: nginx listens within a second
                    try:
                        http.get(f"{origin}/healthz", headers={"Host": "relay.example.com"})
                        break
                    except httpx.TransportError:
                        time.sleep(0.05)
            yield origin
        finally:
            process.terminate()
            process.wait(10)


def test_nginx_passes_the_largest_chunk_to_relaybox_and_refuses_one_past_its_limit(
    nginx_in_front: str, tmp_path: Path
) -> None:
    """A chunk PUT of RELAYBOX_FILE_CHUNK_MAX_BYTES reaches relaybox (which answers it: an object that
    was never presigned is its own JSON error, not nginx's 413); past client_max_body_size nginx
    itself answers 413, so the limit is real and the proxy, not relaybox, is what was tested."""
    ca = trusting(tmp_path)
    object_url = f"{nginx_in_front}/v1/objects/xfr_{'0' * 32}/0"
    with httpx.Client(verify=ca, trust_env=False, timeout=60, headers={"Host": "relay.example.com"}) as http:
        through = http.put(object_url, content=b"\0" * CHUNK_MAX)
        assert through.status_code != 413
        assert through.headers["content-type"].startswith("application/json")
        assert "x-request-id" in through.headers  # relaybox answered
        too_big = http.put(object_url, content=b"\0" * (nginx_bytes(directive("client_max_body_size")) + 1))
        assert too_big.status_code == 413 and "x-request-id" not in too_big.headers


def caddy_routes() -> list[dict[str, object]]:
    caddy = tool("caddy")
    adapted = subprocess.run(
        [caddy, "adapt", "--config", str(DEPLOY / "Caddyfile"), "--adapter", "caddyfile"],
        env={"PUBLIC_HOSTNAME": "relay.example.com", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    config = json.loads(adapted.stdout)
    [server] = config["apps"]["http"]["servers"].values()
    assert server["listen"] == [":443"]  # https, with automatic certificates
    [site] = server["routes"]
    assert site["match"] == [{"host": ["relay.example.com"]}]
    routes: list[dict[str, object]] = site["handle"][0]["routes"]
    return routes


def test_caddy_sends_the_bucket_path_to_minio_and_the_rest_to_relaybox_streamed_unlimited() -> None:
    text = json.dumps(caddy_routes())
    assert "request_body" not in text  # Caddy has no body limit unless one is set: none is
    bucket = compose()["services"]["relaybox"]["environment"]["RELAYBOX_S3_BUCKET"]
    routes = caddy_routes()
    handlers = [json.dumps(route) for route in routes]
    [to_minio] = [h for h in handlers if "minio:9000" in h]
    assert f'"/{bucket}/*"' in to_minio
    [to_relaybox] = [h for h in handlers if '"name": "relaybox"' in h]
    assert '"flush_interval": -1' in to_relaybox and '"policy": "ip_hash"' in to_relaybox
    assert '"port": "8787"' in to_relaybox and "match" not in json.loads(to_relaybox)


def test_the_readme_points_at_the_runbook_for_proxies() -> None:
    readme = (DEPLOY.parent / "README.md").read_text()
    assert "(docs/operations.md)" in readme
    runbook = (DEPLOY.parent / "docs" / "operations.md").read_text()
    # the short nginx snippet under "TLS in front" lets a whole chunk through too, as the full block does
    assert "client_max_body_size 17m;` (a file chunk" in runbook
