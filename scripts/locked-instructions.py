#!/usr/bin/env python3
"""Count the locked (full-barrier) instructions a run executed, by function.

Callgrind counts instructions, and a `lock cmpxchg` is one instruction like
an `add`, though it costs ~20 cycles: this script finds the lock-prefixed
instructions (and `xchg` with memory, implicitly locked) in the binary's
disassembly and sums the callgrind counts at those addresses.

    valgrind --tool=callgrind --dump-instr=yes --compress-pos=no \\
        --callgrind-out-file=cg.out target/release/deps/ring_native-<hash> 64 steps=16384
    scripts/locked-instructions.py cg.out target/release/deps/ring_native-<hash> 16384

The last argument (optional) divides the counts, e.g. by the ring steps run.
Needs objdump (binutils).
"""

import collections
import re
import subprocess
import sys


def locked_addresses(binary):
    """Address -> mnemonic of every locked instruction in `binary`."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", binary],
        capture_output=True, text=True, check=True,
    ).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(lock \S+|xchg)\s*(.*)", line)
        # xchg locks only with a memory operand (`xchg %ax,%ax` is a nop).
        if m and (m.group(2) != "xchg" or "(" in m.group(3)):
            found[int(m.group(1), 16)] = m.group(2)
    return found


def counts_at(profile, addresses):
    """(by function, by mnemonic) executions of `addresses` in a callgrind
    profile written with --dump-instr=yes --compress-pos=no."""
    names, current, last, skip = {}, None, 0, False
    by_fn, by_op = collections.Counter(), collections.Counter()
    for line in open(profile):
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2).strip()
            if line.startswith("fn="):
                current = names.get(m.group(1), "?")
            continue
        if line.startswith("calls="):
            skip = True  # the next cost line is the call's, not this function's
            continue
        m = re.match(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s+\S+\s+(\d+)", line)
        if not m:
            continue
        pos = m.group(1)
        if pos.startswith("0x"):
            last = int(pos, 16)
        elif pos != "*":
            last += int(pos)
        if skip:
            skip = False
            continue
        if last in addresses:
            n = int(m.group(2))
            by_fn[current] += n
            by_op[addresses[last]] += n
    return by_fn, by_op


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    profile, binary = sys.argv[1], sys.argv[2]
    per = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    by_fn, by_op = counts_at(profile, locked_addresses(binary))
    print(f"{sum(by_op.values()) / per:10.2f}  locked instructions in all")
    for op, n in by_op.most_common():
        print(f"{n / per:10.2f}  {op}")
    print()
    for f, n in by_fn.most_common(30):
        print(f"{n / per:10.2f}  {f[:120]}")


if __name__ == "__main__":
    main()
