#!/usr/bin/env bash
# Reproduce the table of docs/performance.md: each figure is the CLI command
# a user would run, timed as a whole process (start, topology compile, run,
# exit; `date +%s%N` around it, peak RSS from /usr/bin/time -f %M), 5 times;
# printed as Markdown table rows
#
#   | figure | median | spread (min–max) | command |
#
#   bash scripts/perf-table.sh                 # every figure, 5 runs each (~1-2 min on 2 cores)
#   bash scripts/perf-table.sh --quick         # 1 run each, no warm-up run (a smoke test)
#   bash scripts/perf-table.sh --only ring-1024
#   bash scripts/perf-table.sh --runs 3        # another count of runs
#
# Figures (names for --only, which may be given more than once):
#   default     run ccl_allreduce, the embedded 4-SIP machine, default sizes
#   ring-1024   ring all-reduce, 1024 SIPs x 16 B
#   rss-1024    peak RSS of that run (/usr/bin/time %M)
#   ring-64x1m  ring all-reduce, 64 SIPs x 1 MiB
#   bcast-256   binomial broadcast, 256 SIPs x 8 B
#   a2a-torus   direct all-to-all, 16 x 16 torus (256 SIPs), 4 KiB
#   ring-step   wall time of one ring step (send + recv + add), 256 SIPs x 16 B:
#               a run with -n 5 less a run with -n 1, over the MATH commands
#               they differ by (the footer's count), per pair of runs
#
# The binary is target/release/kernbench-host (build it with
# `cargo build --release -p kernbench-host`); $KERNBENCH overrides the path.
# Machines of N SIPs are configs/topology.yaml with system.sips.count set
# to N (and topology: torus_2d for the torus), written to a temporary
# directory. Before its timed runs each figure runs once untimed (not with
# --quick), so that the compiled-component and cube-layout caches are warm,
# as they are for a user's second run. A run that fails (a wrong element, a
# budget error) stops the script.
#
# Wall times on a shared VM vary by up to 2x from hour to hour: compare
# figures taken in the same minutes, and see docs/performance-history.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

runs=5
warm=true
only=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) runs=1; warm=false ;;
        --runs)
            [ $# -ge 2 ] || { echo "perf-table.sh: --runs needs a count" >&2; exit 2; }
            runs=$2; shift
            [[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "perf-table.sh: --runs $runs: a count of at least 1" >&2; exit 2; }
            ;;
        --only)
            [ $# -ge 2 ] || { echo "perf-table.sh: --only needs a figure name (try --help)" >&2; exit 2; }
            only+=("$2"); shift
            ;;
        -h | --help)
            # This header, up to the first line that is not a comment.
            awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
            exit 0
            ;;
        *)
            echo "perf-table.sh: unknown argument '$1' (try --help)" >&2
            exit 2
            ;;
    esac
    shift
done

figures=(default ring-1024 rss-1024 ring-64x1m bcast-256 a2a-torus ring-step)
for f in "${only[@]+"${only[@]}"}"; do
    case " ${figures[*]} " in
        *" $f "*) ;;
        *) echo "perf-table.sh: no figure '$f' (one of: ${figures[*]})" >&2; exit 2 ;;
    esac
done
wanted() {
    [ ${#only[@]} -eq 0 ] && return 0
    local f
    for f in "${only[@]}"; do [ "$f" = "$1" ] && return 0; done
    return 1
}

bin=${KERNBENCH:-$root/target/release/kernbench-host}
if [ ! -x "$bin" ]; then
    echo "perf-table.sh: no binary at $bin (cargo build --release -p kernbench-host, or set KERNBENCH)" >&2
    exit 1
fi
if [ ! -x /usr/bin/time ]; then
    echo "perf-table.sh: needs /usr/bin/time (GNU time; apt-get install time)" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/perf-table.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# topo N [torus]: the path of a topology.yaml with N SIPs.
topo() {
    local n=$1 kind=${2:-ring_1d} file
    file="$tmp/sips$1-$kind/topology.yaml"
    if [ ! -f "$file" ]; then
        mkdir -p "$(dirname "$file")"
        sed -e "s/^\(    count:\) 4\b/\1 $n/" \
            -e "s/^\(    topology:\) ring_1d\b/\1 $kind/" \
            "$root/configs/topology.yaml" >"$file"
        grep -q "^    count: $n\b" "$file" && grep -q "^    topology: $kind\b" "$file" || {
            echo "perf-table.sh: could not set the SIP count in a copy of configs/topology.yaml" >&2
            exit 1
        }
    fi
    echo "$file"
}

# timed ARGS...: run "$bin" ARGS once; sets t_wall (s), t_rss (KiB) and
# t_math (the footer's MATH command count). Output goes to files in $tmp.
timed() {
    local t0 t1
    t0=$(date +%s%N)
    if ! /usr/bin/time -f '%M' -o "$tmp/time" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; then
        echo "perf-table.sh: failed: kernbench-host $*" >&2
        tail -n 20 "$tmp/err" >&2
        exit 1
    fi
    t1=$(date +%s%N)
    t_wall=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e9 }')
    t_rss=$(tail -n 1 "$tmp/time")
    t_math=$(sed -n 's/^# simulated .* \([0-9][0-9]*\) MATH + .*/\1/p' "$tmp/err" | tail -n 1)
}

# stats V...: "median<TAB>min<TAB>max" of numbers (median of an even count:
# the upper middle one, as the scale bench takes it).
stats() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%s\t%s\t%s\n", v[int(NR / 2) + 1], v[1], v[NR] }'
}

# row FIGURE UNIT COMMAND V...: a table row of the values V.
row() {
    local figure=$1 unit=$2 cmd=$3 med lo hi
    shift 3
    IFS=$'\t' read -r med lo hi < <(stats "$@")
    printf '| %s | %s %s | %s–%s %s | `%s` |\n' "$figure" "$med" "$unit" "$lo" "$hi" "$unit" "$cmd"
}

# mib KIB...: the values in MiB.
mib() {
    local r
    for r in "$@"; do echo $((r / 1024)); done
}

# measure FIGURE ARGS...: warm up, then $runs timed runs; walls in
# walls[], peak RSS (KiB) in rsss[].
measure() {
    walls=()
    rsss=()
    if $warm; then timed "$@"; fi
    local i
    for ((i = 0; i < runs; i++)); do
        timed "$@"
        walls+=("$t_wall")
        rsss+=("$t_rss")
    done
}

# The command as printed: the binary's name, and a generated topology as
# <N SIPs> (or <16x16 torus>).
shown() {
    local out="kernbench-host" a d
    for a in "$@"; do
        case "$a" in
            "$tmp"/sips*)
                d=$(basename "$(dirname "$a")")
                case "$d" in
                    *-torus_2d) a="<${d#sips} SIPs, torus_2d>"; a=${a/-torus_2d/} ;;
                    *) a="<${d#sips} SIPs>"; a=${a/-ring_1d/} ;;
                esac
                ;;
        esac
        out+=" $a"
    done
    echo "$out"
}

echo "<!-- perf-table.sh: $runs run(s) each, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $("$bin" --version) -->"
echo
echo "| figure | median | spread (min–max) | command |"
echo "|---|---|---|---|"

if wanted default; then
    args=(run ccl_allreduce)
    measure "${args[@]}"
    row "default \`run ccl_allreduce\` (4 SIPs, 8 B–1 MiB, 18 sizes)" s "$(shown "${args[@]}")" "${walls[@]}"
    row "peak RSS, default \`run ccl_allreduce\`" MiB "$(shown "${args[@]}")" $(mib "${rsss[@]}")
fi

if wanted ring-1024 || wanted rss-1024; then
    args=(run ccl_allreduce --topology "$(topo 1024)" -- -b 16 -e 16)
    measure "${args[@]}"
    if wanted ring-1024; then
        row "ring all-reduce, 1024 SIPs × 16 B" s "$(shown "${args[@]}")" "${walls[@]}"
    fi
    if wanted rss-1024; then
        row "peak RSS, ring all-reduce 1024 SIPs × 16 B" MiB "$(shown "${args[@]}")" $(mib "${rsss[@]}")
    fi
fi

if wanted ring-64x1m; then
    args=(run ccl_allreduce --topology "$(topo 64)" -- -b 1M -e 1M)
    measure "${args[@]}"
    row "ring all-reduce, 64 SIPs × 1 MiB" s "$(shown "${args[@]}")" "${walls[@]}"
fi

if wanted bcast-256; then
    args=(run ccl_broadcast --algorithm binomial_broadcast --topology "$(topo 256)" -- -b 8 -e 8)
    measure "${args[@]}"
    row "binomial broadcast, 256 SIPs × 8 B" s "$(shown "${args[@]}")" "${walls[@]}"
fi

if wanted a2a-torus; then
    args=(run ccl_alltoall --algorithm direct_alltoall --topology "$(topo 256 torus_2d)" -- -b 4K -e 4K -n 1 -w 0)
    measure "${args[@]}"
    row "direct all-to-all, 16 × 16 torus × 4 KiB" s "$(shown "${args[@]}")" "${walls[@]}"
fi

if wanted ring-step; then
    t=$(topo 256)
    one=(run ccl_allreduce --topology "$t" -- -b 16 -e 16 -n 1)
    five=(run ccl_allreduce --topology "$t" -- -b 16 -e 16 -n 5)
    if $warm; then timed "${five[@]}"; timed "${one[@]}"; fi
    steps=()
    for ((i = 0; i < runs; i++)); do
        # The longer run first, as the scale bench does.
        timed "${five[@]}"
        w5=$t_wall m5=$t_math
        timed "${one[@]}"
        w1=$t_wall m1=$t_math
        if [ -z "$m5" ] || [ -z "$m1" ] || [ "$m5" -le "$m1" ]; then
            echo "perf-table.sh: ring-step: no MATH command counts in the footers ($m5, $m1)" >&2
            exit 1
        fi
        steps+=("$(awk -v a="$w5" -v b="$w1" -v s=$((m5 - m1)) 'BEGIN { printf "%.2f", (a - b) * 1e6 / s }')")
    done
    row "ring step (send + recv + add), 256 SIPs × 16 B: a \`-n 5\` run less a \`-n 1\` run" µs \
        "$(shown "${five[@]}")" "${steps[@]}"
fi
