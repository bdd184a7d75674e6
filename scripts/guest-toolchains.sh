#!/usr/bin/env bash
# Install the toolchains of the non-Rust guests: idempotent, quick when they
# are already there.
#
#   Python  componentize-py (PyPI), pinned below, in a venv under
#           .toolchains/ (or $KERNBENCH_TOOLCHAINS)
#   JS      componentize-js (npm), pinned below, under .toolchains/node
#           (needs Node.js 18 or later and npm)
#   C       clang for wasm32-wasi with wasi-libc: Debian's clang, lld,
#           wasi-libc, libclang-rt-dev-wasm32 (installed with apt-get when
#           missing and we are root; otherwise the command to run is printed)
#   Registry  an OCI registry server for tests/all/components.rs: Debian's
#           docker-registry (the CNCF distribution server), started by the
#           tests on a loopback port (installed with apt-get when missing
#           and we are root)
#   Slurm     a single-node cluster for tests/all/slurm.rs: Debian's slurm-wlm
#           and munge (slurmctld, slurmd, munged, sbatch ...), started by
#           the test in a temporary directory on loopback ports (installed
#           with apt-get when missing and we are root)
#
# The integration tests (tests/all/languages.rs, tests/all/components.rs) use
# them and fail, naming this script, when one is missing.
#
#   --guests-only   only the guest toolchains (Python, JS, C), not the
#                   servers the tests start: what an algorithm author needs.
#                   (Outside a checkout, `kernbench-host toolchains install
#                   --lang python js c` does the same into a per-user
#                   directory.)
set -euo pipefail
GUESTS_ONLY=0
case "${1:-}" in
    --guests-only) GUESTS_ONLY=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
DIR="${KERNBENCH_TOOLCHAINS:-$PWD/.toolchains}"
COMPONENTIZE_PY=0.25.1
COMPONENTIZE_JS=0.23.0
C_PACKAGES="clang lld wasi-libc libclang-rt-dev-wasm32"

mkdir -p "$DIR"
if ! "$DIR/venv/bin/componentize-py" --version 2>/dev/null | grep -q "$COMPONENTIZE_PY"; then
    python3 -m venv "$DIR/venv"
    "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY"
fi

JS_CLI="$DIR/node/node_modules/@bytecodealliance/componentize-js"
if ! grep -q "\"version\": \"$COMPONENTIZE_JS\"" "$JS_CLI/package.json" 2>/dev/null; then
    mkdir -p "$DIR/node"
    (cd "$DIR/node" && [ -f package.json ] || echo '{"private": true}' > package.json)
    (cd "$DIR/node" && npm install --silent --no-audit --no-fund \
        "@bytecodealliance/componentize-js@$COMPONENTIZE_JS" >/dev/null 2>&1)
fi

c_works() {
    printf 'int f(void){return 1;}\n' > "$DIR/probe.c"
    ${KERNBENCH_CC:-clang} --target=wasm32-wasi -mexec-model=reactor -O2 "$DIR/probe.c" \
        -o "$DIR/probe.wasm" >/dev/null 2>&1
}
if ! c_works; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $C_PACKAGES >/dev/null
    fi
    c_works || {
        echo "C guests need clang for wasm32-wasi with wasi-libc: apt-get install $C_PACKAGES" >&2
        exit 1
    }
fi

[ "$GUESTS_ONLY" = 1 ] && exit 0

if ! [ -x /usr/bin/docker-registry ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null 2>&1 || true
    fi
    [ -x /usr/bin/docker-registry ] || {
        echo "the registry tests need an OCI registry server: apt-get install docker-registry" >&2
        exit 1
    }
fi

if ! { [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/munged ] && [ -x /usr/bin/sbatch ]; }; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 || true
    fi
    [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/munged ] || {
        echo "the Slurm test needs a Slurm and munge install: apt-get install slurm-wlm munge" >&2
        exit 1
    }
fi

echo "guest toolchains: componentize-py $("$DIR/venv/bin/componentize-py" --version | cut -d' ' -f2)" \
     "($DIR/venv), componentize-js $COMPONENTIZE_JS ($DIR/node, node $(node --version))," \
     "$(${KERNBENCH_CC:-clang} --version | head -1) for wasm32-wasi;" \
     "registry server: $(/usr/bin/docker-registry --version | cut -d' ' -f2-);" \
     "$(/usr/sbin/slurmctld -V)"
