#!/usr/bin/env bash
# What users see, recorded before a change and compared after it: every
# built-in bench with every built-in algorithm that serves it, on 4 and 5
# SIPs (ring_1d) and 64 SIPs (torus_2d 8 x 8). For each case it keeps the
# JSON table (`--format json`: every simulated time, algbw, busbw,
# #wrong), the run's summary line without its wall time and host memory
# (simulated end, executor events, DMA / MATH / GEMM commands), and the
# sha256 of the op log (`--oplog`: every completed command, what it read
# and wrote, when).
#
#   scripts/compare-runs.sh record DIR [BINARY]   # default target/release/kernbench-host
#   scripts/compare-runs.sh diff DIR_BEFORE DIR_AFTER
#
# `diff` prints each case that differs and exits 1 if any does, else
# prints the number of cases compared. A refactor that changes nothing
# users see reports 0 differences. Takes ~2-4 minutes on 2 cores.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

# bench | ccl.yaml choice (or -) | bench arguments
cases() {
    local small="-b 8 -e 16K -f 8"
    for a in ring_allreduce ring_rsag_allreduce tree_allreduce double_tree_allreduce \
        rabenseifner_allreduce mesh_allreduce; do
        echo "ccl_allreduce|all_reduce=$a|$small"
        echo "ccl_allreduce|all_reduce=$a|-b 1K -e 1K -d all -o all"
    done
    echo "ccl_allreduce|all_reduce=lrab_hierarchical_allreduce|$small"
    echo "ccl_allreduce|all_reduce=lrab_hierarchical_allreduce|-b 256 -e 256 -d all -o all"
    for a in ring_reduce binomial_reduce; do
        echo "ccl_reduce|reduce=$a|$small -r all"
        echo "ccl_reduce|reduce=$a|-b 1K -e 1K -d all -o all"
    done
    for a in ring_broadcast binomial_broadcast; do
        echo "ccl_broadcast|broadcast=$a|$small -r all"
    done
    echo "ccl_allgather|all_gather=ring_allgather|$small -d all"
    echo "ccl_reducescatter|reduce_scatter=ring_reducescatter|$small"
    echo "ccl_reducescatter|reduce_scatter=ring_reducescatter|-b 1K -e 1K -d all -o all"
    for a in ring_alltoall direct_alltoall; do
        echo "ccl_alltoall|all_to_all=$a|$small"
    done
    echo "ccl_sendrecv|-|$small"
    echo "ccl_hello|-|"
    echo "gemm_single_pe|-|"
    echo "gpt3_qkv|-|"
    echo "va_offset_verify|-|"
}

topology() { # sips kind -> a topology.yaml path
    local sips=$1 kind=$2 out=$3
    sed -e "s/^    count: 4$/    count: $sips/" \
        -e "s/^    topology: ring_1d /    topology: $kind /" \
        "$root/configs/topology.yaml" >"$out"
    grep -q "count: $sips" "$out" || { echo "cannot set the SIP count in $out" >&2; exit 1; }
}

record() {
    local dir=$1 bin=${2:-$root/target/release/kernbench-host}
    [ -x "$bin" ] || { echo "no binary $bin (cargo build --release)" >&2; exit 1; }
    mkdir -p "$dir"
    local tmp
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    local n=0
    for machine in "4 ring_1d" "5 ring_1d" "64 torus_2d"; do
        set -- $machine
        local sips=$1 kind=$2
        topology "$sips" "$kind" "$tmp/topo$sips.yaml"
        while IFS='|' read -r bench choice args; do
            local name="${sips}sips.${bench}.${choice//[=\/]/_}.$(echo "$args" | tr -c 'a-zA-Z0-9' _)"
            local alg=()
            [ "$choice" = - ] || alg=(--algorithm "$choice")
            # shellcheck disable=SC2086
            if ! "$bin" run "$bench" --no-layout-cache --topology "$tmp/topo$sips.yaml" \
                "${alg[@]}" --format json --oplog "$tmp/oplog" -- $args \
                >"$dir/$name.json" 2>"$tmp/err"; then
                { echo "FAILED"; cat "$tmp/err"; } >"$dir/$name.summary"
            else
                grep '^# simulated' "$tmp/err" |
                    sed -e 's/ *| *peak budgeted host memory [^|]*//' -e 's/ *| *wall .*//' \
                        >"$dir/$name.summary" || true
                sha256sum <"$tmp/oplog" | cut -d' ' -f1 >>"$dir/$name.summary"
            fi
            n=$((n + 1))
        done < <(cases)
    done
    echo "recorded $n cases in $dir"
}

compare() {
    local a=$1 b=$2 diffs=0 n=0
    for f in "$a"/*.summary; do
        local name
        name=$(basename "$f" .summary)
        n=$((n + 1))
        for ext in summary json; do
            if ! cmp -s "$a/$name.$ext" "$b/$name.$ext"; then
                echo "== $name.$ext differs"
                diff <(head -c 20000 "$a/$name.$ext") <(head -c 20000 "$b/$name.$ext") | head -20 || true
                diffs=$((diffs + 1))
            fi
        done
    done
    [ "$n" -gt 0 ] || { echo "no cases in $a" >&2; exit 2; }
    echo "$n cases compared, $diffs differences"
    [ "$diffs" -eq 0 ]
}

case "${1:-}" in
record) [ $# -ge 2 ] || usage; record "$2" "${3:-}" ;;
diff) [ $# -eq 3 ] || usage; compare "$2" "$3" ;;
*) usage ;;
esac
