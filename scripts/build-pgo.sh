#!/usr/bin/env bash
# Profile-guided release build of kernbench-host (issue 9's measurement
# build): build the host instrumented, run it on the scale figures' workloads
# (the ring all-reduce at 1024 SIPs x 16 B, at 64 SIPs from 16 B to 1 MiB,
# the RS+AG ring at 8 SIPs), merge the profiles and build again with them.
#
#   bash scripts/build-pgo.sh            # -> target/pgo/optimized/release/kernbench-host
#   bash scripts/build-pgo.sh --bench    # the same, then the scale bench built with the profile
#
# Both builds include the scale bench: a profile is matched to functions by
# their symbol names, which carry a hash of each crate's features, and a
# bench build unifies the dev-dependencies' features into the graph; a
# binary built without them has other names and would find no profile.
#
# The result behaves exactly as the plain release build (same bytes, same
# simulated times); only the host's code layout and inlining follow the
# profile. Two release builds of the whole dependency tree: ~15 min cold.
# Everything lives under target/pgo (KERNBENCH_PGO_DIR to move it), apart
# from the normal build's target directory, so that neither rebuilds the
# other. The guest components are never instrumented: runtime/build.rs builds
# them without the outer RUSTFLAGS. (Build scripts and proc macros are, and
# write profiles of their own into the merge: harmless, their functions are
# not the host's.)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bench=false
for arg in "$@"; do
    case "$arg" in
        --bench) bench=true ;;
        -h | --help)
            # This header, up to the first line that is not a comment.
            awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
            exit 0
            ;;
        *)
            echo "build-pgo.sh: unknown argument '$arg' (try --help)" >&2
            exit 2
            ;;
    esac
done

pgo=${KERNBENCH_PGO_DIR:-$root/target/pgo}
mkdir -p "$pgo"
pgo=$(cd "$pgo" && pwd)
raw="$pgo/raw"
merged="$pgo/merged.profdata"
train="$pgo/train"

# llvm-profdata must match the compiler's LLVM: take the toolchain's own.
rustup component add llvm-tools >/dev/null
profdata="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    echo "build-pgo.sh: no llvm-profdata at $profdata (rustup component add llvm-tools)" >&2
    exit 1
fi

# The caller's own RUSTFLAGS (e.g. -Ctarget-cpu=native) go into both builds:
# the profile only fits code built the same way.
flags=${RUSTFLAGS:-}

echo "== 1/4 instrumented build ($pgo/instrumented)"
rm -rf "$raw"
RUSTFLAGS="$flags -Cprofile-generate=$raw" CARGO_TARGET_DIR="$pgo/instrumented" \
    cargo build --release -p kernbench-host --bin kernbench-host --bench scale
instrumented="$pgo/instrumented/release/kernbench-host"

echo "== 2/4 training runs"
# The embedded topology with N SIPs (the count is the only change).
mkdir -p "$train"
for n in 8 64 1024; do
    sed "s/^    count: 4$/    count: $n/" configs/topology.yaml >"$train/sips$n.yaml"
    grep -q "^    count: $n$" "$train/sips$n.yaml" || {
        echo "build-pgo.sh: configs/topology.yaml has no '    count: 4' SIP count to change" >&2
        exit 1
    }
done
# Each run checks its data; a wrong result fails the script (set -e).
train_run() {
    echo "   kernbench-host run $*"
    "$instrumented" run "$@" >"$train/last.out" 2>&1 || {
        cat "$train/last.out" >&2
        exit 1
    }
}
train_run ccl_allreduce --topology "$train/sips1024.yaml" --no-layout-cache -- -b 16 -e 16
train_run ccl_allreduce --topology "$train/sips64.yaml" --no-layout-cache -- -b 16 -e 1M -f 16
train_run ccl_allreduce --topology "$train/sips8.yaml" --no-layout-cache \
    --algorithm ring_rsag_allreduce -- -b 1K -e 64K -f 4

echo "== 3/4 merging the profiles"
"$profdata" merge -o "$merged" "$raw"

echo "== 4/4 build with the profile ($pgo/optimized)"
use_flags="$flags -Cprofile-use=$merged"
RUSTFLAGS="$use_flags" CARGO_TARGET_DIR="$pgo/optimized" \
    cargo build --release -p kernbench-host --bin kernbench-host --bench scale
echo "profile-guided build: $pgo/optimized/release/kernbench-host"

if $bench; then
    RUSTFLAGS="$use_flags" CARGO_TARGET_DIR="$pgo/optimized" \
        cargo bench -p kernbench-host --bench scale
fi
