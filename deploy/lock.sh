#!/bin/sh
# Writes deploy/requirements.lock: every package the image installs (relaybox's dependencies with
# the postgres, redis, fcm, webpush and s3 extras, and the build backend), pinned with the hashes of
# every file PyPI has for that version, for CPython 3.11 on Linux (any 3.11.x: a dependency needed
# only before 3.11.3 is listed with its marker). The Dockerfile installs exactly these
# (pip --require-hashes --no-deps), then relaybox itself, then runs pip check.
# Run from the repository root after changing the dependencies in pyproject.toml, and commit the
# result:   sh deploy/lock.sh
# The machine's pip configuration is ignored (PIP_CONFIG_FILE=/dev/null, UV_NO_CONFIG): only PyPI is
# read, and the same pyproject.toml and PyPI give the same file.
set -eu
python=${PYTHON:-python3}
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 UV_NO_CONFIG=1
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet uv==0.13.10
printf 'setuptools>=77\n' > "$venv/build.in"  # the build backend (pyproject.toml, [build-system])
UV_CUSTOM_COMPILE_COMMAND="sh deploy/lock.sh" "$venv/bin/uv" pip compile --quiet --universal \
    --python-version 3.11 --generate-hashes --no-strip-markers --index-url https://pypi.org/simple \
    --extra postgres --extra redis --extra fcm --extra webpush --extra s3 \
    --output-file deploy/requirements.lock pyproject.toml "$venv/build.in"
