#!/usr/bin/env bash
# Install the toolchains of the non-Rust guests into .toolchains/ (or
# $KERNBENCH_TOOLCHAINS): idempotent, quick when already there.
#
#   Python  componentize-py (PyPI), pinned below, in a venv
#
# The integration tests (tests/languages.rs) build the examples with them
# and fail, naming this script, when one is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${KERNBENCH_TOOLCHAINS:-$PWD/.toolchains}"
COMPONENTIZE_PY=0.25.1

mkdir -p "$DIR"
if ! "$DIR/venv/bin/componentize-py" --version 2>/dev/null | grep -q "$COMPONENTIZE_PY"; then
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY"
fi
echo "guest toolchains in $DIR: componentize-py $("$DIR/venv/bin/componentize-py" --version | cut -d' ' -f2)"
