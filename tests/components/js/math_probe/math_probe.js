// Test algorithm: the Rust math_probe (tests/components/algorithms) modes
// 3-6 in JavaScript, to show the SDK's kernel language gives the same bytes
// and picoseconds (see the Python port for what each mode does).

export const PARAMS = ["kernel_mode"];

export function kernel(tPtr, n, ws, mode, tl) {
  if (mode === 6) {
    const x = tl.load(tPtr, [1, n], "f16");
    const row = tl.reduce("max", x, 0);
    const one = tl.mul(tl.unary("exp", tl.sub(row, row)), tl.fill([n], "f16", 1));
    let acc = tl.cast(tl.div(row, one), "f32");
    if (ws > 1) {
      const f = tl.recvAsync("W", [n], "f16");
      tl.sendAddr("E", tPtr, [n], "f16");
      let current = tl.wait(f);
      acc = tl.add(acc, tl.cast(current, "f32"));
      for (let step = 2; step < ws; step++) {
        const g = tl.recvAsync("W", [n], "f16");
        tl.send("E", current);
        const next = tl.wait(g);
        acc = tl.add(acc, tl.cast(next, "f32"));
        current.drop();
        current = next;
      }
      current.drop();
    }
    tl.store(tPtr, tl.cast(acc, "f16"));
    return;
  }
  const d = Math.round(Math.sqrt(n));
  const x = tl.load(tPtr, [d, d], "f16");
  if (mode === 3) {
    tl.store(tPtr, tl.cast(tl.gemm(x, x, "f32"), "f16"));
  } else {
    tl.store(tPtr, tl.composite(mode === 4 ? "gemm-acc" : "gemm-bias", x, x, x, "f16"));
  }
}

export function kernelArgs({ worldSize, nElem, kernel_mode = 0 }) {
  return [nElem, worldSize, kernel_mode];
}
