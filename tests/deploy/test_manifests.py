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
SECRET_SETTINGS = {
    "RELAYBOX_SERVER_SECRET_KEY",
    "RELAYBOX_VAPID_PRIVATE_KEY",
    "RELAYBOX_DATABASE_URL",
    "RELAYBOX_REDIS_URL",  # it may hold a password
    "RELAYBOX_S3_ACCESS_KEY_ID",
    "RELAYBOX_S3_SECRET_ACCESS_KEY",
}
OPTIONAL_SECRETS = {"RELAYBOX_VAPID_PRIVATE_KEY"}  # kept in the database when not given
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


def kustomization() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    return loaded


def k8s_documents() -> list[dict[str, Any]]:
    """What ``kubectl apply -k deploy/k8s/`` applies: the kustomization's resources."""
    documents = []
    for name in kustomization()["resources"]:
        text = (DEPLOY / "k8s" / name).read_text()
        documents += [doc for doc in yaml.safe_load_all(text) if doc is not None]
    return documents


def example_secret() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "examples" / "k8s-secret.yaml").read_text())
    return loaded


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
    """A tag that names at least a major version (or a MinIO release): never untagged or ``latest``."""
    name, _, tag = image.rpartition(":")
    assert name and "/" not in tag, f"{image} has no tag"
    release = re.fullmatch(r"RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ", tag)
    assert tag != "latest" and (tag[0].isdigit() or release), f"{image} is not pinned to a version"


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
    compose_only = {"PUBLIC_HOSTNAME", "POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD"}  # read by compose.yaml
    assert {"RELAYBOX_SERVER_SECRET_KEY", "RELAYBOX_S3_SECRET_ACCESS_KEY", *compose_only} <= set(example)
    assert set(example) - VALID == compose_only
    for secret in (
        "RELAYBOX_SERVER_SECRET_KEY",
        "RELAYBOX_S3_SECRET_ACCESS_KEY",
        *compose_only - {"PUBLIC_HOSTNAME"},
    ):
        assert example[secret] == "", secret  # to fill in: never a shared example secret
    settings_from(monkeypatch, {k: v for k, v in example.items() if k in VALID})  # values it accepts


# -- compose ----------------------------------------------------------------------------------------


FILLED = {
    "PUBLIC_HOSTNAME": "relay.example.org",
    "POSTGRES_PASSWORD": "pw0123",
    "MINIO_ROOT_PASSWORD": "minio0123",
    "RELAYBOX_S3_SECRET_ACCESS_KEY": "s3secret0123",
    "RELAYBOX_SERVER_SECRET_KEY": "A" * 43 + "=",
}


def compose_settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The relaybox container's settings: its .env (example.env filled in) and its environment."""
    app = compose()["services"]["relaybox"]
    example = env_file(DEPLOY / "example.env") | FILLED
    merged = {k: v for k, v in example.items() if k in VALID}
    merged |= {k: interpolate(v, FILLED) for k, v in app["environment"].items()}
    return settings_from(monkeypatch, merged)


def test_compose_runs_caddy_the_app_postgres_redis_and_minio_on_pinned_images() -> None:
    services = compose()["services"]
    assert set(services) == {"caddy", "relaybox", "postgres", "redis", "minio", "minio-bucket"}
    for service in services.values():
        if "image" in service:
            assert_pinned(service["image"])
    assert services["postgres"]["image"].partition(":")[2].split(".")[0] == "16"
    assert services["redis"]["image"].partition(":")[2].split(".")[0] == "7"
    app = services["relaybox"]
    assert app["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / app["build"]["context"] / app["build"]["dockerfile"]).is_file()
    for dependency in ("postgres", "redis"):
        assert app["depends_on"][dependency] == {"condition": "service_healthy"}
        assert services[dependency]["healthcheck"]["test"]
    assert app["depends_on"]["minio-bucket"] == {"condition": "service_completed_successfully"}
    assert services["minio-bucket"]["depends_on"]["minio"] == {"condition": "service_healthy"}
    assert "/readyz" in " ".join(app["healthcheck"]["test"])  # Caddy waits for a ready app
    assert services["caddy"]["depends_on"]["relaybox"] == {"condition": "service_healthy"}


def test_only_caddy_is_published_and_it_serves_tls_on_443(monkeypatch: pytest.MonkeyPatch) -> None:
    services = compose()["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"caddy"}
    assert {"80:80", "443:443"} <= set(services["caddy"]["ports"])
    mounts = services["caddy"]["volumes"]
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in mounts
    assert any(mount.endswith(":/data") for mount in mounts)  # certificates survive a restart
    assert (DEPLOY / "Caddyfile").is_file()
    settings = compose_settings(monkeypatch)
    assert settings.base_url == f"https://{FILLED['PUBLIC_HOSTNAME']}"
    hostname = interpolate(services["caddy"]["environment"]["PUBLIC_HOSTNAME"], FILLED)
    assert hostname == FILLED["PUBLIC_HOSTNAME"]


def test_compose_wires_the_app_to_its_database_redis_and_bucket_with_settings_it_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from core.startup import check_deployment

    services = compose()["services"]
    app, postgres = services["relaybox"], services["postgres"]
    environment: dict[str, str] = app["environment"]
    assert set(environment) <= VALID
    assert app["env_file"] == ".env"  # the copy of example.env: keys, passwords, push settings
    secrets = {"RELAYBOX_SERVER_SECRET_KEY", "RELAYBOX_VAPID_PRIVATE_KEY", "RELAYBOX_S3_SECRET_ACCESS_KEY"}
    assert not set(environment) & secrets

    assert "${POSTGRES_PASSWORD:?" in environment["RELAYBOX_DATABASE_URL"]  # from .env, never written here
    assert postgres["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    database = urlsplit(interpolate(environment["RELAYBOX_DATABASE_URL"], FILLED))
    assert database.scheme == "postgresql" and database.hostname in services and database.port == 5432
    assert database.username == postgres["environment"]["POSTGRES_USER"]
    assert database.password == interpolate(postgres["environment"]["POSTGRES_PASSWORD"], FILLED)
    assert database.path == "/" + postgres["environment"]["POSTGRES_DB"]
    redis = urlsplit(environment["RELAYBOX_REDIS_URL"])
    assert redis.scheme == "redis" and redis.hostname in services

    settings = compose_settings(monkeypatch)
    assert settings.log_format == "json"
    check_deployment(settings)  # what `relaybox serve` refuses on PostgreSQL is all there
    assert settings.s3_bucket and settings.s3_endpoint_url and settings.s3_public_endpoint_url
    assert urlsplit(settings.s3_endpoint_url).hostname == "minio"  # the server: the compose network
    assert settings.s3_public_endpoint_url == settings.base_url  # devices: through Caddy
    bucket = services["minio-bucket"]
    assert bucket["environment"]["BUCKET"] == settings.s3_bucket
    script = bucket["command"][0]
    assert "mc mb --ignore-existing" in script and "mc ilm rule add" in script
    assert f'mc admin user add store {settings.s3_access_key_id} "$$RELAYBOX_S3_SECRET_ACCESS_KEY"' in script
    assert bucket["environment"]["RELAYBOX_S3_SECRET_ACCESS_KEY"].startswith(
        "${RELAYBOX_S3_SECRET_ACCESS_KEY:?"
    )  # the same .env value the app signs with


# -- Kubernetes ---------------------------------------------------------------------------------------


def test_every_manifest_is_a_named_kubernetes_object() -> None:
    documents = k8s_documents()
    kinds = {"Deployment", "Service", "ConfigMap", "Ingress", "PodDisruptionBudget"}
    assert {doc["kind"] for doc in documents} == kinds
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


def test_the_example_secret_is_outside_what_is_applied_and_has_every_slot() -> None:
    applied = [path.name for path in (DEPLOY / "k8s").iterdir()]
    assert set(kustomization()["resources"]) == set(applied) - {"kustomization.yaml"}
    assert "Secret" not in {doc["kind"] for doc in k8s_documents()}  # applying never overwrites it
    secret = example_secret()
    assert secret["kind"] == "Secret"
    assert SECRET_SETTINGS | {FCM_KEY} == set(secret["stringData"])
    assert json.loads(secret["stringData"][FCM_KEY])["type"] == "service_account"


def test_the_deployment_takes_every_secret_setting_from_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.startup import check_deployment

    secret, config = example_secret(), k8s("ConfigMap")
    keys = set(secret["stringData"])
    pod = k8s("Deployment")["spec"]["template"]["spec"]
    for container in containers(pod):
        assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
        for variable in container.get("env", []):
            reference = variable["valueFrom"]["secretKeyRef"]
            assert reference["name"] == secret["metadata"]["name"]
            assert reference["key"] == variable["name"] and reference["key"] in keys
            assert reference.get("optional", False) == (variable["name"] in OPTIONAL_SECRETS)
    [app] = pod["containers"]
    assert {v["name"] for v in app["env"]} == SECRET_SETTINGS

    # Everything together is what the settings accept and what serve on PostgreSQL requires.
    env = dict(config["data"]) | dict.fromkeys(SECRET_SETTINGS, "placeholder")
    env["RELAYBOX_SERVER_SECRET_KEY"] = "A" * 43 + "="
    env["RELAYBOX_DATABASE_URL"] = secret["stringData"]["RELAYBOX_DATABASE_URL"]
    settings = settings_from(monkeypatch, env)
    check_deployment(settings)
    assert settings.s3_bucket and settings.redis_url
    assert settings.migrate_on_start is False  # the init container migrates
    assert settings.log_format == "json"


def test_the_fcm_file_is_optional_and_mounted_where_the_setting_points() -> None:
    """Without the Secret's FCM key the volume is empty and the pods start; the setting that names
    the file is commented out in the ConfigMap until the key is added."""
    config_text = (DEPLOY / "k8s" / "configmap.yaml").read_text()
    [line] = [line for line in config_text.splitlines() if "RELAYBOX_FCM_CREDENTIALS_FILE:" in line]
    assert line.lstrip().startswith("#")
    assert "RELAYBOX_FCM_CREDENTIALS_FILE" not in k8s("ConfigMap")["data"]
    where = PurePosixPath(yaml.safe_load(line.lstrip("# "))["RELAYBOX_FCM_CREDENTIALS_FILE"])
    pod = k8s("Deployment")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == example_secret()["metadata"]["name"]
    assert volume["secret"]["optional"] is True
    assert volume["secret"]["items"] == [{"key": FCM_KEY, "path": where.name}]
    [app] = pod["containers"]
    [mount] = [m for m in app["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == str(where.parent) and mount["readOnly"] is True


def test_replicas_spread_over_nodes_and_a_drain_evicts_one_at_a_time() -> None:
    deployment, budget = k8s("Deployment"), k8s("PodDisruptionBudget")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] >= 2
    assert budget["spec"]["selector"]["matchLabels"] == labels
    assert budget["spec"]["maxUnavailable"] == 1
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for constraint in spread:
        assert constraint["labelSelector"]["matchLabels"] == labels
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"  # a one-node cluster still runs both


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
    """Legacy MCP sessions live in one process (docs/operations.md, "MCP sessions and session
    affinity"): the Ingress pins a client with a cookie on /mcp, and the Service pins direct traffic
    by client address."""
    service, ingress = k8s("Service"), k8s("Ingress")
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert annotations["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert annotations["nginx.ingress.kubernetes.io/session-cookie-path"] == "/mcp"


# -- the image's pinned dependencies ----------------------------------------------------------------

LOCK = DEPLOY / "requirements.lock"
IMAGE_EXTRAS = ("postgres", "redis", "fcm", "webpush", "s3")


def locked() -> dict[str, tuple[str, list[str]]]:
    """The lock's ``name==version`` pins, each with its hashes, by normalised name."""
    from packaging.utils import canonicalize_name

    pins: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            requirement, *options = line.split()
            name, _, version = requirement.partition("==")
            hashes = [option.removeprefix("--hash=sha256:") for option in options if "--hash=" in option]
            pins[canonicalize_name(name)] = (version, hashes)
    return pins


def test_the_lock_pins_every_package_with_hashes_and_satisfies_pyproject() -> None:
    """Every dependency of relaybox and of the image's extras (and theirs, as the lock lists them)
    is pinned to one version with at least one sha256 hash; each pyproject requirement's version
    range holds the pinned version. A pyproject change without `sh deploy/lock.sh` fails here."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in IMAGE_EXTRAS:
        wanted += project["optional-dependencies"][extra]
    pins = locked()
    assert len(pins) > len(wanted)  # the transitive ones too
    for name, (version, hashes) in pins.items():
        assert version and hashes and all(len(digest) == 64 for digest in hashes), name
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not in deploy/requirements.lock: run sh deploy/lock.sh"
        assert pins[name][0] in requirement.specifier, f"{name}=={pins[name][0]} is not {requirement}"
    assert "setuptools" in pins  # the build backend, for pip install --no-build-isolation


def test_the_dockerfile_installs_the_lock_with_hashes_and_nothing_else() -> None:
    [install] = [a for k, a in dockerfile() if k == "RUN" and "pip install" in a]
    steps = [step.strip() for step in install.split("&&")]
    assert steps[0] == "/opt/relaybox/bin/pip install --require-hashes --no-deps -r requirements.lock"
    assert steps[1].startswith("/opt/relaybox/bin/pip install --no-deps --no-build-isolation ")
    assert steps[2] == "/opt/relaybox/bin/pip check"
    copies = [a.split() for k, a in dockerfile() if k == "COPY"]
    assert ["deploy/requirements.lock", "./"] in copies
    assert "sh deploy/lock.sh" in LOCK.read_text()  # the file says how it is made again
