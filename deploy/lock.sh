#!/bin/sh
# Writes deploy/requirements.lock: every package the image installs (relaybox's dependencies with
# the postgres, redis, fcm, webpush and s3 extras, and the build backend), pinned with the hashes of
# every file PyPI has for that version, for CPython 3.11 on Linux like python:3.11-slim. The
# Dockerfile installs exactly these (pip --require-hashes --no-deps), then relaybox itself.
# Run from the repository root after changing the dependencies in pyproject.toml, and commit the
# result:   sh deploy/lock.sh
# The machine's pip configuration is ignored (PIP_CONFIG_FILE=/dev/null): only PyPI is read, and
# the same pyproject.toml and PyPI give the same file.
set -eu
python=${PYTHON:-python3.11}
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 11), "the image runs Python 3.11"'
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet pip-tools==7.7.0
CUSTOM_COMPILE_COMMAND="sh deploy/lock.sh" "$venv/bin/pip-compile" --quiet --generate-hashes \
    --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --build-deps-for wheel \
    --extra postgres --extra redis --extra fcm --extra webpush --extra s3 \
    --output-file deploy/requirements.lock pyproject.toml
