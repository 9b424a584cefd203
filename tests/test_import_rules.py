"""The architecture's import rules, checked on the source: core ← oauth ← connector; client uses
only core.domain; webapp (the web pages) only Starlette and the standard library, reaching the core
through the /v1 routes like any device; third-party libraries stay in their home modules."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "oauth", "connector", "app", "demo", "client", "webapp")
# package → project packages it must not import
FORBIDDEN = {
    "core": {"oauth", "connector", "app", "demo", "client", "webapp"},
    "oauth": {"connector", "app", "demo", "client", "webapp"},
    "connector": {"app", "demo", "client"},
    "app": set(),  # the composition root and the CLI: it joins everything
    "demo": {"core", "oauth", "connector", "app", "webapp"},
    "client": {"oauth", "connector", "app", "demo", "webapp"},
    "webapp": {"core", "oauth", "connector", "app", "demo", "client"},
}
# package → the only top-level modules it may import besides its own and the standard library
ONLY_THIRD_PARTY = {"webapp": {"starlette"}}
SQL_HOMES = ("core/store/", "core/queue/", "core/runtime/", "core/services/", "oauth/")
# third-party module → where it may be imported (path prefixes)
HOMES = {
    "authlib": ("oauth/",),
    "mcp": ("connector/", "demo/"),
    "firebase_admin": ("core/adapters/push/fcm.py",),
    "pywebpush": ("core/adapters/push/webpush.py",),
    "redis": (
        "core/adapters/limits/redis.py",
        "core/adapters/fanout/redis.py",
        "core/adapters/fanout/redis_subscriber.py",
    ),
    "boto3": ("core/adapters/storage/s3.py",),
    "botocore": ("core/adapters/storage/s3.py",),
    # SQL: the store, the queue, the run modes, the operations (each owns its queries) and the authorization
    # server's own tables and operations; never the /v1 handlers, the domain, the MCP tools or the app.
    "sqlmodel": SQL_HOMES,
    "sqlalchemy": (*SQL_HOMES, "core/availability.py"),  # availability: a driver error means "database down"
    "alembic": ("core/store/",),
    "psycopg": ("core/store/",),
}


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def source_files() -> list[Path]:
    return [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_one_way_and_libraries_stay_home(path: Path) -> None:
    relative = path.relative_to(ROOT).as_posix()
    package = relative.split("/")[0]
    for name in imports_of(path):
        top = name.split(".")[0]
        assert top not in FORBIDDEN[package], f"{relative} imports {name}"
        if package == "client" and top == "core":
            assert name == "core.domain" or name.startswith("core.domain."), f"{relative} imports {name}"
        if top in HOMES:
            assert relative.startswith(HOMES[top]), f"{relative} imports {top}, which lives in {HOMES[top]}"
        if package in ONLY_THIRD_PARTY and top != package and top not in sys.stdlib_module_names:
            assert top in ONLY_THIRD_PARTY[package], f"{relative} imports {name}"


def test_the_rule_checker_sees_imports() -> None:
    assert "core.domain.keys" in imports_of(ROOT / "core" / "services" / "devices.py")
    assert "starlette.routing" in imports_of(ROOT / "webapp" / "routes.py")


def _imported_modules(path: Path) -> set[str]:
    """The project modules ``path`` imports, wherever in it (a lazy import or one for the type
    checker only still ties the two modules together): ``from a import b`` names ``a.b`` when that
    is a module, else ``a``."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                modules.add(submodule if _module_path(submodule) is not None else node.module)
    return {name for name in modules if _module_path(name) is not None}


def _module_path(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_queue_is_reached_through_its_face() -> None:
    """Outside ``core/queue/`` only ``core.queue`` itself is imported: its private modules (each
    database's bookkeeping) stay its own."""
    for path in source_files():
        if path.relative_to(ROOT).as_posix().startswith("core/queue/"):
            continue
        private = sorted(name for name in _imported_modules(path) if name.startswith("core.queue."))
        assert not private, f"{path.relative_to(ROOT)} imports {private}"


def test_no_module_imports_itself_through_others() -> None:
    """No import circle among the project's modules (Tarjan's strongly connected components): a
    package's ``__init__`` may import its own modules, no other cycle is allowed."""
    graph = {_module_name(path): _imported_modules(path) for path in source_files()}
    for module, imported in graph.items():
        graph[module] = {name for name in imported if not name.startswith(f"{module}.")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in graph:
        if module not in index:
            visit(module)
    assert circles == []
