"""deploy/ stays consistent with the code: the compose file, the Kubernetes manifests, the env
example and the Dockerfile are parsed (no Docker engine or cluster needed), every ``RELAYBOX_*``
name they use is a real setting with a value the settings accept, images are pinned, probes and
ports match the app, and everything runs as a non-root user."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import BaseModel

from core.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PREFIX = str(Settings.model_config.get("env_prefix", "")).upper()
NAME = re.compile(rf"\b{PREFIX}[A-Z0-9_]+\b")
SECRET_SETTINGS = {"RELAYBOX_SERVER_SECRET_KEY", "RELAYBOX_VAPID_PRIVATE_KEY", "RELAYBOX_DATABASE_URL"}
FCM_KEY = "fcm-service-account.json"
DEFAULT_PORT = Settings.model_fields["port"].default


def setting_names(model: type[BaseModel] = Settings, prefix: str = PREFIX) -> set[str]:
    """Every environment name the settings read: one per field, and per field of a nested model
    when the settings split nested names (``env_nested_delimiter``)."""
    delimiter = Settings.model_config.get("env_nested_delimiter")
    names = set()
    for field_name, field in model.model_fields.items():
        name = prefix + (field.alias or field_name).upper()
        names.add(name)
        annotation = field.annotation
        if delimiter and isinstance(annotation, type) and issubclass(annotation, BaseModel):
            names |= setting_names(annotation, name + delimiter.upper())
    return names


VALID = setting_names()


def settings_from(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    """``Settings`` read from exactly ``env`` (no other variable, no .env file), as the app would."""
    for name in VALID:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)


def deploy_files() -> list[Path]:
    return sorted(path for path in DEPLOY.rglob("*") if path.is_file())


def k8s_documents() -> list[dict[str, Any]]:
    documents = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        documents += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return documents


def k8s(kind: str) -> dict[str, Any]:
    [document] = [doc for doc in k8s_documents() if doc["kind"] == kind]
    return document


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of an env file; comments and blank lines skipped."""
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: not KEY=value: {line!r}"
            values[key.strip()] = value.strip()
    return values


INTERPOLATION = re.compile(r"\$\{(\w+)(?:(:?[?-])([^}]*))?\}")


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:?message}`` and ``${NAME:-default}`` against ``variables``."""

    def one(match: re.Match[str]) -> str:
        name, operator, argument = match[1], match[2], match[3]
        if variables.get(name):
            return variables[name]
        assert operator is not None and "?" not in operator, f"{name} must be set: {argument}"
        return argument or ""

    return INTERPOLATION.sub(one, value)


def containers(pod: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod.get("initContainers", [])
    yield from pod["containers"]


def assert_pinned(image: str) -> None:
    """A tag that names at least a major version: never untagged, never ``latest``."""
    name, _, tag = image.rpartition(":")
    assert name and "/" not in tag, f"{image} has no tag"
    assert tag != "latest" and tag[0].isdigit(), f"{image} is not pinned to a version"


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) per Dockerfile instruction, continuation lines joined."""
    instructions, pending = [], ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, arguments = line.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def exec_form(arguments: str) -> list[str]:
    parsed: list[str] = json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)
    return parsed


# -- every RELAYBOX_* name anywhere in deploy/ ----------------------------------------------------


def test_the_setting_names_are_derived_from_the_settings() -> None:
    assert {"RELAYBOX_PUBLIC_URL", "RELAYBOX_FORWARDED_ALLOW_IPS", "RELAYBOX_MCP_ALLOWED_HOSTS"} <= VALID
    assert "RELAYBOX_NOT_A_SETTING" not in VALID


@pytest.mark.parametrize("path", deploy_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_relaybox_name_in_deploy_is_a_real_setting(path: Path) -> None:
    unknown = set(NAME.findall(path.read_text())) - VALID
    assert not unknown, f"{path.relative_to(REPO)} names settings that do not exist: {sorted(unknown)}"


def test_the_env_example_fills_the_required_settings_with_values_they_accept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    example = env_file(DEPLOY / "example.env")
    assert {"RELAYBOX_PUBLIC_URL", "RELAYBOX_SERVER_SECRET_KEY", "POSTGRES_PASSWORD"} <= set(example)
    assert set(example) - VALID == {"POSTGRES_PASSWORD"}  # read by compose.yaml only
    assert example["RELAYBOX_PUBLIC_URL"].startswith("https://")
    assert example["RELAYBOX_SERVER_SECRET_KEY"] == ""  # to fill in: never a shared example key
    settings = settings_from(monkeypatch, {k: v for k, v in example.items() if k in VALID})
    assert settings.base_url == example["RELAYBOX_PUBLIC_URL"]


# -- compose ----------------------------------------------------------------------------------------


def test_compose_runs_the_app_with_postgres_and_redis_on_pinned_images() -> None:
    services = compose()["services"]
    assert set(services) == {"relaybox", "postgres", "redis"}
    for service in services.values():
        assert_pinned(service["image"])
    assert services["postgres"]["image"].partition(":")[2].split(".")[0] == "16"
    assert services["redis"]["image"].partition(":")[2].split(".")[0] == "7"
    app = services["relaybox"]
    assert app["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (
        (DEPLOY / "compose.yaml")
        .parent.joinpath(app["build"]["context"], app["build"]["dockerfile"])
        .is_file()
    )
    for dependency in ("postgres", "redis"):
        assert app["depends_on"][dependency] == {"condition": "service_healthy"}
        assert services[dependency]["healthcheck"]["test"]


def test_compose_wires_the_app_to_its_database_and_redis_with_settings_it_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = compose()["services"]
    app, postgres = services["relaybox"], services["postgres"]
    environment: dict[str, str] = app["environment"]
    assert set(environment) <= VALID
    assert app["env_file"] == ".env"  # the copy of example.env: public URL, server key, push settings
    assert not set(environment) & {"RELAYBOX_SERVER_SECRET_KEY", "RELAYBOX_VAPID_PRIVATE_KEY"}

    assert "${POSTGRES_PASSWORD:?" in environment["RELAYBOX_DATABASE_URL"]  # from .env, never written here
    assert postgres["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    variables = {"POSTGRES_PASSWORD": "pw0123"}
    database = urlsplit(interpolate(environment["RELAYBOX_DATABASE_URL"], variables))
    assert database.scheme == "postgresql" and database.hostname in services and database.port == 5432
    assert database.username == postgres["environment"]["POSTGRES_USER"]
    assert database.password == interpolate(postgres["environment"]["POSTGRES_PASSWORD"], variables)
    assert database.path == "/" + postgres["environment"]["POSTGRES_DB"]
    redis = urlsplit(environment["RELAYBOX_REDIS_URL"])
    assert redis.scheme == "redis" and redis.hostname in services

    example = env_file(DEPLOY / "example.env")
    merged = {k: v for k, v in example.items() if k in VALID}
    merged |= {k: interpolate(v, variables) for k, v in environment.items()}
    settings = settings_from(monkeypatch, merged)
    assert settings.log_format == "json"
    [published] = app["ports"]
    host_ip, _host_port, container_port = published.split(":")
    assert host_ip == "127.0.0.1"  # only the TLS proxy on the host reaches it
    assert int(container_port) == DEFAULT_PORT == settings.port


# -- Kubernetes ---------------------------------------------------------------------------------------


def test_every_manifest_is_a_named_kubernetes_object() -> None:
    documents = k8s_documents()
    assert {doc["kind"] for doc in documents} >= {"Deployment", "Service", "Secret", "ConfigMap"}
    for doc in documents:
        assert doc["apiVersion"] and doc["metadata"]["name"]


def test_the_deployment_probes_readyz_and_healthz_on_the_apps_port() -> None:
    pod = k8s("Deployment")["spec"]["template"]["spec"]
    [app] = pod["containers"]
    assert app["args"][0] == "serve"
    [port] = app["ports"]
    assert port["containerPort"] == DEFAULT_PORT
    assert app["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert app["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    # /readyz answers within its own bound even when a dependency hangs.
    from core.api.health import READY_TIMEOUT_S

    assert app["readinessProbe"]["timeoutSeconds"] > READY_TIMEOUT_S
    [migrate] = pod["initContainers"]
    assert migrate["args"] == ["migrate"] and migrate["image"] == app["image"]


def test_every_container_is_pinned_non_root_read_only_and_bounded() -> None:
    pod = k8s("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    for container in containers(pod):
        assert_pinned(container["image"])
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert {"/tmp", "/data"} <= mounts  # the only writable places on a read-only root


def test_the_secret_holds_the_three_secrets_and_the_deployment_uses_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret, config = k8s("Secret"), k8s("ConfigMap")
    keys = set(secret["stringData"])
    assert {"RELAYBOX_SERVER_SECRET_KEY", "RELAYBOX_VAPID_PRIVATE_KEY", FCM_KEY} <= keys
    assert json.loads(secret["stringData"][FCM_KEY])["type"] == "service_account"

    pod = k8s("Deployment")["spec"]["template"]["spec"]
    for container in containers(pod):
        assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
        for variable in container.get("env", []):
            reference = variable["valueFrom"]["secretKeyRef"]
            assert reference["name"] == secret["metadata"]["name"]
            assert reference["key"] == variable["name"] and reference["key"] in keys
    [app] = pod["containers"]
    assert {v["name"] for v in app["env"]} == SECRET_SETTINGS

    # The FCM JSON is a file, mounted where RELAYBOX_FCM_CREDENTIALS_FILE points.
    where = PurePosixPath(config["data"]["RELAYBOX_FCM_CREDENTIALS_FILE"])
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert volume["secret"]["items"] == [{"key": FCM_KEY, "path": where.name}]
    [mount] = [m for m in app["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == str(where.parent) and mount["readOnly"] is True

    # Everything together is what the settings accept (placeholders stand in for the secrets).
    env = dict(config["data"]) | dict.fromkeys(SECRET_SETTINGS, "placeholder")
    env["RELAYBOX_SERVER_SECRET_KEY"] = "A" * 43 + "="
    settings = settings_from(monkeypatch, env)
    assert settings.migrate_on_start is False  # the init container migrates
    assert settings.log_format == "json"


def test_the_configmap_holds_only_settings_and_no_secret() -> None:
    data = k8s("ConfigMap")["data"]
    assert set(data) <= VALID
    assert all(isinstance(value, str) for value in data.values())  # Kubernetes wants strings
    secret_fields = {
        PREFIX + name.upper()
        for name, field in Settings.model_fields.items()
        if field.annotation is not None and "SecretStr" in str(field.annotation)
    }
    assert secret_fields and not (set(data) & (secret_fields | SECRET_SETTINGS))


def test_the_service_and_ingress_reach_the_pods_over_tls_on_the_public_host() -> None:
    deployment, service, ingress = k8s("Deployment"), k8s("Service"), k8s("Ingress")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels
    assert service["spec"]["selector"] == labels
    [app] = deployment["spec"]["template"]["spec"]["containers"]
    [service_port] = service["spec"]["ports"]
    assert service_port["targetPort"] == app["ports"][0]["name"]

    public = urlsplit(k8s("ConfigMap")["data"]["RELAYBOX_PUBLIC_URL"])
    assert public.scheme == "https"
    [tls] = ingress["spec"]["tls"]
    [rule] = ingress["spec"]["rules"]
    assert tls["hosts"] == [public.hostname] and rule["host"] == public.hostname
    [path] = rule["http"]["paths"]
    assert path["backend"]["service"] == {
        "name": service["metadata"]["name"],
        "port": {"name": service_port["name"]},
    }


# -- Dockerfile (parsed: no Docker engine here) ----------------------------------------------------


def test_the_dockerfile_builds_a_slim_non_root_image_with_a_healthcheck() -> None:
    instructions = dockerfile()
    stages = [arguments for keyword, arguments in instructions if keyword == "FROM"]
    assert stages and all(stage.split()[0] == "python:3.11-slim" for stage in stages)
    [user] = [arguments for keyword, arguments in instructions if keyword == "USER"]
    assert user.split(":")[0] not in {"root", "0"}
    [healthcheck] = [arguments for keyword, arguments in instructions if keyword == "HEALTHCHECK"]
    assert "CMD" in healthcheck and "/healthz" in healthcheck and "urllib" in healthcheck
    env: dict[str, str] = {}
    for keyword, arguments in instructions:
        if keyword == "ENV":
            env |= dict(item.split("=", 1) for item in shlex.split(arguments))
    [expose] = [arguments for keyword, arguments in instructions if keyword == "EXPOSE"]
    assert int(expose) == int(env["RELAYBOX_PORT"]) == DEFAULT_PORT
    assert env["RELAYBOX_LOG_FORMAT"] == "json"
    [entrypoint] = [exec_form(a) for k, a in instructions if k == "ENTRYPOINT"]
    [command] = [exec_form(a) for k, a in instructions if k == "CMD"]
    assert entrypoint + command == ["relaybox", "serve", "--host", "0.0.0.0"]  # noqa: S104
    [install] = [a for k, a in instructions if k == "RUN" and "pip install" in a]
    extras = re.search(r"\.\[([a-z0-9,]+)\]", install)
    assert extras and set(extras[1].split(",")) == {"postgres", "redis", "fcm", "webpush", "s3"}


def test_the_dockerfile_copies_what_exists_and_the_ignore_file_lets_it_through() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    allowed = {line.removeprefix("!").rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore  # everything else stays out of the context (.venv, .relaybox, tests)
    for keyword, arguments in dockerfile():
        if keyword == "COPY" and not arguments.startswith("--from"):
            *sources, _destination = arguments.split()
            for source in sources:
                assert (REPO / source).exists(), source
                assert source.rstrip("/") in allowed, f"{source} is excluded by the ignore file"


def test_the_dockerfile_copies_every_package_the_project_installs() -> None:
    found = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {pattern.rstrip("*") for pattern in found["include"]}
    copied = {
        source.rstrip("/")
        for keyword, arguments in dockerfile()
        if keyword == "COPY" and not arguments.startswith("--from")
        for source in arguments.split()[:-1]
    }
    assert packages <= copied, packages - copied


def test_legacy_mcp_sessions_stay_on_one_pod_through_the_service_and_the_ingress() -> None:
    """Legacy MCP sessions live in one process (README, "Deployment"): the Ingress pins a client
    with a cookie on /mcp, and the Service pins direct traffic by client address."""
    service, ingress = k8s("Service"), k8s("Ingress")
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert annotations["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert annotations["nginx.ingress.kubernetes.io/session-cookie-path"] == "/mcp"
