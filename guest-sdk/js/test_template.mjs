// __NAME__ in the KernBench mock, natively: node --test test___NAME__.mjs
//
// The kernel of __NAME__.js runs on 1 to 8 ranks of a ring in the SDK's
// mock (kernbench/mock.mjs: worker threads, correctness only, no timing);
// every rank must end with the element-wise sum of all the ranks' inputs.

import { test } from "node:test";
import assert from "node:assert/strict";

import * as algo from "./__NAME__.js";
import { runKernelInMock } from "./kernbench/mock.mjs";

// The mock's workers import the algorithm themselves, from this file.
const moduleUrl = new URL("./__NAME__.js", import.meta.url);

for (const worldSize of [1, 2, 3, 4, 8]) {
  test(`every rank gets the sum, ${worldSize} rank${worldSize > 1 ? "s" : ""}`, async () => {
    const n = 16;
    // Small integers: exact in f16, and so are their sums.
    const inputs = Array.from({ length: worldSize }, (_, r) =>
      Array.from({ length: n }, (_, i) => r * 7 + (i % 5)),
    );
    const want = Array.from({ length: n }, (_, i) => inputs.reduce((s, v) => s + v[i], 0));
    const out = await runKernelInMock(algo, { moduleUrl, worldSize, topology: "ring_1d", inputs, dtype: "f16" });
    const wrong = out
      .map((got, r) => ({ got, r }))
      .filter(({ got }) => got.length !== n || got.some((x, i) => x !== want[i]));
    if (wrong.length) {
      assert.fail(
        wrong.map(({ got, r }) => `rank ${r} of ${worldSize}: got [${got.join(", ")}], want [${want.join(", ")}]`).join("\n"),
      );
    }
  });
}
