// KernBench JavaScript SDK: the native mock (seed 003 §6), for unit tests
// under plain Node.js (>= 18):
//
//   import * as algo from "./my_algo.js";
//   import { runKernelInMock } from "./kernbench/mock.mjs";
//   const out = await runKernelInMock(algo, {
//     moduleUrl: new URL("./my_algo.js", import.meta.url),
//     worldSize: 4, inputs: [[1, 2], [3, 4], [5, 6], [7, 8]],
//   });                       // out[r]: rank r's shard afterwards (Numbers)
//
// What it is: the algorithm's `kernel(tPtr, ...args, tl)` run on
// `worldSize` ranks, each in its own worker thread, against a `tl` with the
// API of kernbench.js (same functions, argument defaults, Tensor class and
// `drop()`), computing on the CPU. Its arguments are made as
// exportAlgorithm() makes them: `kernelArgs({worldSize, nElem, cubeW,
// cubeH, ...params})`, then (rank, topoKind, gridW, gridH); tPtr is a
// BigInt. It is the Python SDK's mock (guest-sdk/python/kernbench/mock.py)
// in JavaScript, with the same semantics:
//   * rank r's memory is its shard only, `inputs[r]` at MOCK_T_PTR;
//     programId is 0 and numPrograms 1, so tl.peTileAddr(tPtr, ...) is
//     tPtr; loads and stores outside the shard fail; results of MATH ops
//     get fresh scratch addresses from 0x4000_0000_0000.
//   * each (sender, direction) link is a queue of at most nSlots messages;
//     a message holds one slot from its send until the receiver drops the
//     received tensor (`t.drop()`; recvInto frees it after the copy), so a
//     kernel that keeps received tensors alive deadlocks here as it would
//     in the simulator. A wait longer than 10 s (env KB_MOCK_DEADLOCK_S,
//     or option deadlockS) fails the rank as a deadlock; once a rank fails
//     the others stop and runKernelInMock throws
//     Error("mock rank R failed: ...").
//   * neighbours: the host's builtin tables (ring_1d, ring_1d_unidir,
//     none, global_ring, tree_binary, mesh_2d, torus_2d), rewritten by the
//     module's neighbors() when it has one.
// What it is not: a simulator. No timing (tl.nowPs() is 0n), no DMA, no
// fabric, no cubes (one PE per rank), no memory spaces; arithmetic is done
// in float64 and rounded to the dtype once per op (f16/bf16 round to
// nearest even, overflow gives infinity), which need not match the
// simulated hardware bit for bit. Correctness only.
//
// This one file is both the library (main thread) and the worker script:
// each worker loads it again, imports the algorithm from `moduleUrl` and
// runs one rank. Links and wake-ups live in SharedArrayBuffers; a blocked
// send/recv sleeps in Atomics.wait on its rank's doorbell.

import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import { writeSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";

/** Where rank r's shard (inputs[r]) lives: the tPtr the kernel gets. */
export const MOCK_T_PTR = 0x1000_0000n;
/** The first address of MATH results and received tensors. */
export const MOCK_SCRATCH = 0x4000_0000_0000n;
export const DEADLOCK_TIMEOUT_S = 10;
export const ITEMSIZE = { f16: 2, bf16: 2, f32: 4, i32: 4, i8: 1, u8: 1, u32: 4, i64: 8, u64: 8, f64: 8 };

const STANDARD_KINDS = { ring_1d: 0, torus_2d: 1, mesh_2d_no_wrap: 2 };
const COMPASS = { E: "W", W: "E", N: "S", S: "N" };
const UNARY_OPS = ["neg", "abs", "exp", "log", "sqrt", "relu", "recip"];
const COMPOSITES = ["gemm", "gemm-acc", "gemm-bias", "gemm-relu", "gemm-bias-relu"];
// The longest single Atomics.wait: how soon a blocked rank notices that
// another one failed (a failure also rings every doorbell).
const POLL_MS = 100;

// ---------------------------------------------------------------- dtypes

function roundHalfEven(v) {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** IEEE binary16 bits of `x`, rounded to nearest even (overflow: inf). */
export function f16Bits(x) {
  x = Number(x);
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  // 65504 is the largest half; from halfway to the next step (65536) up,
  // round to nearest even gives infinity.
  if (a >= 65520) return sign | 0x7c00;
  // Subnormals are multiples of 2^-24; 1024 of them is the smallest
  // normal, whose encoding is exactly 1024 (0x0400).
  if (a < 2 ** -14) return sign | roundHalfEven(a * 2 ** 24);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  let m = roundHalfEven((a / 2 ** e) * 1024); // in [1024, 2048]
  if (m === 2048) {
    m = 1024;
    e++;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | (m - 1024);
}

/** The value of IEEE binary16 bits `h`. */
export function f16Value(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1024 + m) * 2 ** (e - 25);
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** bfloat16 bits of `x`: its f32 bits rounded to nearest even (mock.py _bf16_bits). */
export function bf16Bits(x) {
  x = Number(x);
  if (Number.isNaN(x)) return 0x7fc0;
  f32Scratch[0] = x;
  const bits = u32Scratch[0];
  return Math.floor((bits + 0x7fff + ((bits >>> 16) & 1)) / 65536) & 0xffff;
}

/** The value of bfloat16 bits `h`. */
export function bf16Value(h) {
  u32Scratch[0] = (h & 0xffff) << 16;
  return f32Scratch[0];
}

// Integer dtypes: [width in bits, signed]. A value is rounded half away
// from zero and saturated, NaN to 0, as the host encodes it.
const INTS = { i8: [8, true], u8: [8, false], i32: [32, true], u32: [32, false], i64: [64, true], u64: [64, false] };

/** `v` (a Number) as a BigInt of `dtype`'s range (mock.py _to_int). */
function intOf(v, dtype) {
  const [bits, signed] = INTS[dtype];
  const lo = signed ? -(1n << BigInt(bits - 1)) : 0n;
  const hi = signed ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
  if (Number.isNaN(v)) return 0n;
  if (v === Infinity) return hi;
  if (v === -Infinity) return lo;
  let t = Math.trunc(v);
  if (Math.abs(v - t) >= 0.5) t += v > 0 ? 1 : -1;
  const r = BigInt(t);
  return r < lo ? lo : r > hi ? hi : r;
}

/** `op` of two integers of `dtype` (BigInts) as the host's MATH unit: exact,
 * add / sub / mul wrapping at the width, div truncating, 0 for a zero divisor. */
function intOp(op, dtype, p, q) {
  const [bits, signed] = INTS[dtype];
  const wrap = (r) => (signed ? BigInt.asIntN(bits, r) : BigInt.asUintN(bits, r));
  switch (op) {
    case "add": return wrap(p + q);
    case "sub": return wrap(p - q);
    case "mul": return wrap(p * q);
    case "max": return q > p ? q : p;
    case "min": return q < p ? q : p;
    default: return q === 0n ? 0n : wrap(p / q); // BigInt division truncates
  }
}

/** The elements of integer `bytes` of `dtype` as BigInts. */
function intsOf(bytes, dtype) {
  const [bits, signed] = INTS[dtype];
  const size = bits / 8;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const get = {
    8: (at) => BigInt(signed ? dv.getInt8(at) : dv.getUint8(at)),
    32: (at) => BigInt(signed ? dv.getInt32(at, true) : dv.getUint32(at, true)),
    64: (at) => (signed ? dv.getBigInt64(at, true) : dv.getBigUint64(at, true)),
  }[bits];
  return Array.from({ length: Math.floor(bytes.byteLength / size) }, (_, i) => get(i * size));
}

/** Little-endian bytes of BigInts of integer `dtype` (each in its range). */
function bytesOfInts(values, dtype) {
  const [bits, signed] = INTS[dtype];
  const size = bits / 8;
  const out = new Uint8Array(values.length * size);
  const dv = new DataView(out.buffer);
  values.forEach((r, i) => {
    const at = i * size;
    if (bits === 8) signed ? dv.setInt8(at, Number(r)) : dv.setUint8(at, Number(r));
    else if (bits === 32) signed ? dv.setInt32(at, Number(r), true) : dv.setUint32(at, Number(r), true);
    else signed ? dv.setBigInt64(at, r, true) : dv.setBigUint64(at, r, true);
  });
  return out;
}

function dtypeOf(d) {
  if (!(d in ITEMSIZE)) throw new TypeError(`dtype ${d}: one of ${Object.keys(ITEMSIZE).join(", ")}`);
  return d;
}

/** Little-endian bytes (Uint8Array) of `values` in `dtype`. */
export function encode(values, dtype) {
  const vals = Array.from(values, Number);
  const size = ITEMSIZE[dtypeOf(dtype)];
  const out = new Uint8Array(vals.length * size);
  const dv = new DataView(out.buffer);
  vals.forEach((v, i) => {
    const at = i * size;
    if (dtype === "f16") dv.setUint16(at, f16Bits(v), true);
    else if (dtype === "bf16") dv.setUint16(at, bf16Bits(v), true);
    else if (dtype === "f32") dv.setFloat32(at, v, true);
    else if (dtype === "f64") dv.setFloat64(at, v, true);
    else if (dtype === "i8") dv.setInt8(at, Number(intOf(v, dtype)));
    else if (dtype === "u8") dv.setUint8(at, Number(intOf(v, dtype)));
    else if (dtype === "u32") dv.setUint32(at, Number(intOf(v, dtype)), true);
    else if (dtype === "i64") dv.setBigInt64(at, intOf(v, dtype), true);
    else if (dtype === "u64") dv.setBigUint64(at, intOf(v, dtype), true);
    else dv.setInt32(at, Number(intOf(v, dtype)), true);
  });
  return out;
}

/** The values (Numbers) of little-endian `bytes` of `dtype`. */
export function decode(bytes, dtype) {
  const size = ITEMSIZE[dtypeOf(dtype)];
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = Math.floor(bytes.byteLength / size);
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    const at = i * size;
    if (dtype === "f16") out[i] = f16Value(dv.getUint16(at, true));
    else if (dtype === "bf16") out[i] = bf16Value(dv.getUint16(at, true));
    else if (dtype === "f32") out[i] = dv.getFloat32(at, true);
    else if (dtype === "f64") out[i] = dv.getFloat64(at, true);
    else if (dtype === "i8") out[i] = dv.getInt8(at);
    else if (dtype === "u8") out[i] = dv.getUint8(at);
    else if (dtype === "u32") out[i] = dv.getUint32(at, true);
    else if (dtype === "i64") out[i] = Number(dv.getBigInt64(at, true));
    else if (dtype === "u64") out[i] = Number(dv.getBigUint64(at, true));
    else out[i] = dv.getInt32(at, true);
  }
  return out;
}

// ------------------------------------------------------------ topologies

const mod = (a, n) => ((a % n) + n) % n;

function grid(worldSize, gridW) {
  const w = gridW || Math.floor(Math.sqrt(worldSize));
  if (!(w > 0) || worldSize % w) {
    throw new Error(`mock: world_size ${worldSize} is not a ${w}-wide grid`);
  }
  return [w, worldSize / w];
}

/** `[[dir, peer, peerDir]]` of `rank`: the host's builtin tables
 * (sim/src/ccl/tables.rs), as mock.py's table(). */
export function table(topology, worldSize, rank, gridW) {
  const n = worldSize;
  switch (topology) {
    case "ring_1d":
      return [["E", mod(rank + 1, n), "W"], ["W", mod(rank - 1, n), "E"]];
    case "ring_1d_unidir":
      return [["E", mod(rank + 1, n), "W"]];
    case "none":
      return [];
    case "global_ring":
      return [["global_E", mod(rank + 1, n), "global_W"], ["global_W", mod(rank - 1, n), "global_E"]];
    case "tree_binary": {
      const row = [];
      if (rank > 0) row.push(["P", Math.floor((rank - 1) / 2), rank % 2 === 1 ? "C0" : "C1"]);
      for (const [child, d] of [[2 * rank + 1, "C0"], [2 * rank + 2, "C1"]]) {
        if (child < n) row.push([d, child, "P"]);
      }
      return row;
    }
    case "mesh_2d":
    case "torus_2d": {
      const [w, h] = grid(n, gridW);
      const x = rank % w;
      const y = Math.floor(rank / w);
      const row = [];
      for (const [d, dx, dy] of [["E", 1, 0], ["W", -1, 0], ["S", 0, 1], ["N", 0, -1]]) {
        let nx = x + dx;
        let ny = y + dy;
        if (topology === "torus_2d") {
          nx = mod(nx, w);
          ny = mod(ny, h);
        }
        if (nx >= 0 && nx < w && ny >= 0 && ny < h && (nx !== x || ny !== y)) {
          row.push([d, ny * w + nx, COMPASS[d]]);
        }
      }
      return row;
    }
    default:
      throw new Error(`mock: unknown topology ${JSON.stringify(topology)}`);
  }
}

/** `rank`'s row after `module.neighbors(rank, worldSize, {dir: peer})`
 * (if it has one), resolved as the host does (mock.py rows()). */
export function rows(module, topology, worldSize, rank, gridW) {
  const builtin = table(topology, worldSize, rank, gridW);
  if (!module || typeof module.neighbors !== "function") return builtin;
  const map = Object.fromEntries(builtin.map(([d, p]) => [d, p]));
  const got = module.neighbors(rank, worldSize, map);
  if (got == null) return builtin;
  return Object.entries(got).map(([d, v]) => {
    const [peer, given] = Array.isArray(v) ? v : [v, undefined];
    if (!Number.isInteger(peer) || peer < 0 || peer >= worldSize) {
      throw new Error(`mock: neighbors() of rank ${rank}: ${JSON.stringify(d)} leads to rank ${peer}`);
    }
    let pd = given ?? builtin.find((b) => b[0] === d && b[1] === peer)?.[2] ?? COMPASS[d];
    if (pd == null) {
      throw new Error(`mock: neighbors() of rank ${rank}: direction ${JSON.stringify(d)} needs a peer_dir`);
    }
    return [d, peer, String(pd)];
  });
}

// ------------------------------------------------ shared state (layouts)
//
// Global Int32Array: [0] failed (0, or the first failing rank + 1),
// [1 + r] rank r's doorbell: bumped and notified whenever something rank r
// may be waiting for happens (a message for it, a freed slot of a link it
// sends on, a failure).
//
// One SharedArrayBuffer per link (sender, direction): Int32 header
// [HEAD, TAIL, QUEUED, HELD, len of cell 0 .. nSlots-1], then nSlots cells
// of slotBytes. QUEUED: messages sent, not yet received; HELD: slots taken
// (from send until the receiver drops the tensor), QUEUED <= HELD <= nSlots.
const HEAD = 0;
const TAIL = 1;
const QUEUED = 2;
const HELD = 3;
const LENS = 4;

function linkBuffer(nSlots, slotBytes) {
  const cell = Math.ceil(slotBytes / 4) * 4;
  return new SharedArrayBuffer(4 * (LENS + nSlots) + nSlots * cell);
}

function linkViews(sab, nSlots, slotBytes) {
  const cell = Math.ceil(slotBytes / 4) * 4;
  return {
    ctl: new Int32Array(sab, 0, LENS + nSlots),
    data: new Uint8Array(sab, 4 * (LENS + nSlots), nSlots * cell),
    cell,
  };
}

// ------------------------------------------------------------ main thread

function toArgs(values) {
  return Array.from(values, (v) => {
    if (typeof v === "bigint") return Number(v);
    if (!Number.isInteger(v)) throw new TypeError(`kernelArgs must return integers, got ${v}`);
    return v;
  });
}

// exportAlgorithm's check of the ccl.yaml parameters against PARAMS.
function checkParams(module, given) {
  const params = module.PARAMS ?? [];
  const unknown = Object.keys(given).filter((n) => !params.includes(n));
  if (unknown.length) {
    throw new Error(
      `unknown parameter${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} ` +
        `(this algorithm takes ${params.length ? params.join(", ") : "none"})`,
    );
  }
  return given;
}

function urlOf(where) {
  if (where instanceof URL) return where.href;
  if (typeof where === "string") {
    return /^(file|data):/.test(where) ? where : pathToFileURL(resolvePath(where)).href;
  }
  return undefined;
}

/**
 * Run `module.kernel` on `worldSize` ranks in worker threads; rank r's
 * shard holds `inputs[r]` (Numbers, encoded as `dtype`). Resolves to every
 * rank's shard afterwards (arrays of Numbers); rejects with
 * Error("mock rank R failed: ...") when a rank fails.
 *
 * `module`: the algorithm's module namespace (`import * as algo`), used
 * for kernelArgs / PARAMS / neighbors / TOPO_NAME_TO_KIND; the workers
 * import it themselves from `moduleUrl` (a URL or file path: pass
 * `new URL("./algo.js", import.meta.url)`). `module` may also be that URL
 * or path itself.
 *
 * Options: worldSize, topology ("ring_1d"), inputs, dtype ("f16"), nSlots
 * (4, per direction), gridW (mesh_2d / torus_2d: the grid's width, default
 * the square root), and less often: params (ccl.yaml parameters given to
 * kernelArgs, checked against PARAMS), kernelArgs (the values instead of
 * calling module.kernelArgs), nElem (inputs[0].length), cubeW / cubeH (1),
 * slotBytes (the largest message: 4 bytes per element of the largest
 * shard), deadlockS (env KB_MOCK_DEADLOCK_S, else 10).
 */
export async function runKernelInMock(module, options = {}) {
  const {
    worldSize,
    topology = "ring_1d",
    inputs,
    dtype = "f16",
    nSlots = 4,
    gridW,
    moduleUrl,
    params = {},
    kernelArgs,
    cubeW = 1,
    cubeH = 1,
  } = options;
  let url = urlOf(moduleUrl);
  if (urlOf(module) !== undefined) {
    url ??= urlOf(module);
    module = await import(url);
  }
  if (url === undefined) {
    throw new TypeError(
      "runKernelInMock: the ranks' workers import the algorithm themselves: pass " +
        'moduleUrl: new URL("./<name>.js", import.meta.url) with the module (or that URL as the module)',
    );
  }
  if (!module || typeof module.kernel !== "function") {
    throw new TypeError(`runKernelInMock: ${url} exports no function kernel`);
  }
  if (!Number.isInteger(worldSize) || worldSize < 1) {
    throw new RangeError(`mock: worldSize must be an integer >= 1, got ${worldSize}`);
  }
  if (!inputs || inputs.length !== worldSize) throw new Error("mock: need one input per rank");
  dtypeOf(dtype);
  if (!Number.isInteger(nSlots) || nSlots < 1) throw new RangeError(`mock: nSlots must be >= 1, got ${nSlots}`);
  const shards = Array.from(inputs, (v) => encode(v, dtype));
  const nElem = options.nElem ?? inputs[0].length;
  const maxElems = Math.max(...Array.from(inputs, (v) => v.length));
  const slotBytes = options.slotBytes ?? Math.max(16, 4 * maxElems);
  const envS = Number(process.env.KB_MOCK_DEADLOCK_S);
  const deadlockS = options.deadlockS ?? (envS > 0 ? envS : DEADLOCK_TIMEOUT_S);

  // The kernel's arguments, as exportAlgorithm makes them.
  let args;
  if (kernelArgs !== undefined) {
    args = toArgs(kernelArgs);
  } else {
    if (typeof module.kernelArgs !== "function") {
      throw new TypeError("runKernelInMock: the module exports no function kernelArgs (or pass kernelArgs: [...])");
    }
    const kw = { worldSize, nElem: Number(nElem), cubeW, cubeH, ...checkParams(module, params) };
    args = toArgs(module.kernelArgs(kw));
  }
  const kinds = module.TOPO_NAME_TO_KIND ?? STANDARD_KINDS;
  const kind = kinds[topology] ?? 0;
  const [gw, gh] = topology === "mesh_2d" || topology === "torus_2d" ? grid(worldSize, gridW) : [0, 0];

  const links = [];
  for (let r = 0; r < worldSize; r++) {
    for (const [dir, to, peerDir] of rows(module, topology, worldSize, r, gridW)) {
      links.push({ from: r, dir, to, peerDir, sab: linkBuffer(nSlots, slotBytes) });
    }
  }
  const global = new SharedArrayBuffer(4 * (1 + worldSize));

  const workers = [];
  for (let r = 0; r < worldSize; r++) {
    workers.push(
      new Worker(new URL(import.meta.url), {
        workerData: {
          kbMock: true,
          rank: r,
          worldSize,
          moduleUrl: url,
          args: [...args, r, kind, gw, gh],
          memory: shards[r],
          links,
          global,
          nSlots,
          slotBytes,
          deadlockS,
        },
      }),
    );
  }

  const memories = new Array(worldSize);
  const g = new Int32Array(global);
  try {
    await new Promise((resolve, reject) => {
      const failures = new Map(); // rank -> what it posted
      let exited = 0;
      let settled = false;
      const settle = (r) => {
        settled = true;
        const m = failures.get(r);
        let text = m.name && m.name !== "Error" ? `${m.name}: ${m.message}` : m.message;
        // Where in the algorithm it happened: its innermost frame.
        const at = String(m.stack ?? "").split("\n").find((l) => l.includes(url));
        if (at) text += ` (at ${at.trim().replace(/^at /, "")})`;
        const cause = new Error(m.message);
        if (m.name) cause.name = m.name;
        if (m.stack) cause.stack = m.stack;
        reject(new Error(`mock rank ${r} failed: ${text}`, { cause }));
      };
      // Report the rank that failed first (it set the shared flag before
      // posting); ranks it stopped post `aborted` and are not reported.
      const failed = (r, m) => {
        if (settled) return;
        if (!failures.has(r)) failures.set(r, m);
        const first = g[0] - 1;
        if (first < 0 || failures.has(first)) settle(first < 0 ? r : first);
      };
      workers.forEach((w, r) => {
        w.on("message", (m) => {
          if (m.ok) memories[r] = new Uint8Array(m.memory);
          else if (!m.aborted) failed(r, m);
        });
        w.on("error", (e) => failed(r, { name: e?.name, message: String(e?.message ?? e), stack: e?.stack }));
        w.on("exit", (code) => {
          exited++;
          if (settled) return;
          if (memories[r] === undefined && code !== 0 && !failures.has(r)) {
            failures.set(r, { message: `its worker exited with code ${code}` });
          }
          if (exited < worldSize) return;
          if (!memories.includes(undefined) && memories.length === worldSize) {
            settled = true;
            resolve();
          } else {
            const first = g[0] - 1;
            const r0 = failures.has(first) ? first : failures.keys().next().value;
            if (r0 !== undefined) settle(r0);
            else {
              failures.set(Math.max(first, 0), { message: "it stopped without a result" });
              settle(Math.max(first, 0));
            }
          }
        });
      });
    });
  } finally {
    // A failed run: stop the ranks still blocked (or spinning) now.
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return memories.map((m) => decode(m, dtype));
}

// ---------------------------------------------------------- worker: a rank

/** A rank stopping because another one failed (not reported). */
class Aborted extends Error {}

/** A tensor in the rank's (mock) memory: kernbench.js's Tensor, over a
 * raw record {addr, shape, dtype, data, slot}. */
export class Tensor {
  constructor(raw) {
    this.raw = raw;
  }
  get shape() {
    return Array.from(this.raw.shape);
  }
  get dtype() {
    return this.raw.dtype;
  }
  /** Address of the first element (BigInt). */
  get addr() {
    return this.raw.addr;
  }
  get nbytes() {
    return this.raw.data.length;
  }
  add(other) {
    return rankTl.add(this, other);
  }
  sub(other) {
    return rankTl.sub(this, other);
  }
  mul(other) {
    return typeof other === "number" ? rankTl.scale(this, other) : rankTl.mul(this, other);
  }
  /** Give the handle back now (a received tensor's slot is freed). */
  drop() {
    if (this.raw) {
      rankState?.release(this.raw);
      this.raw = null;
    }
  }
}

let rankTl = null; // this worker's tl (one rank per worker)
let rankState = null;

function raw(t, what) {
  if (!(t instanceof Tensor) || !t.raw) throw new TypeError(`${what}: expected a live tl tensor`);
  return t.raw;
}

function shapeOf(shape) {
  return Array.from(Uint32Array.from(typeof shape === "number" ? [shape] : shape));
}

const prod = (xs) => xs.reduce((a, b) => a * b, 1);
const hex = (a) => `0x${a.toString(16)}`;
const sameShape = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);
const showDir = (dir) => (dir == null ? "null" : JSON.stringify(dir));

class MockFuture {
  constructor(id, dir, shape, dtype) {
    Object.assign(this, { id, dir, shape, dtype, waited: false });
  }
}

const UNARY = {
  neg: (x) => -x,
  abs: Math.abs,
  exp: Math.exp,
  log: (x) => (x > 0 ? Math.log(x) : x === 0 ? -Infinity : NaN),
  sqrt: (x) => (x >= 0 ? Math.sqrt(x) : NaN),
  relu: (x) => (0 > x ? 0 : x),
  recip: (x) => 1 / x,
};

// mock.py's _OPS (Python's max/min: the first unless the second is larger/smaller).
const OPS = {
  div: (a, b) => (b !== 0 ? a / b : a !== 0 ? (a < 0 ? -Infinity : Infinity) : NaN),
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  max: (a, b) => (b > a ? b : a),
  min: (a, b) => (b < a ? b : a),
};

const REDUCE = {
  sum: (xs) => xs.reduce((s, x) => s + x, 0),
  max: (xs) => xs.reduce((m, x) => (x > m ? x : m)),
  min: (xs) => xs.reduce((m, x) => (x < m ? x : m)),
};

/** The backend of one rank (mock.py _Rank): memory, links, futures. */
class Rank {
  constructor(d) {
    this.rank = d.rank;
    this.memory = new Uint8Array(d.memory);
    this.g = new Int32Array(d.global);
    this.nSlots = d.nSlots;
    this.slotBytes = d.slotBytes;
    this.deadlockS = d.deadlockS;
    this.worldSize = d.worldSize;
    this.nextScratch = MOCK_SCRATCH;
    this.tx = new Map(); // dir -> link (the last one wins, as a dict)
    this.rx = []; // [peerDir, link], in the host's order
    for (const l of d.links) {
      const link = { ...l, ...linkViews(l.sab, d.nSlots, d.slotBytes) };
      if (l.from === this.rank) this.tx.set(l.dir, link);
      if (l.to === this.rank) this.rx.push([l.peerDir, link]);
    }
    this.rxByDir = new Map(this.rx);
    this.rr = 0;
    this.pending = new Map(); // dir -> ids of futures not yet given a message
    this.claimed = new Map(); // id -> message
    this.nextFuture = 0;
    this.live = new Set(); // received raws still holding their slot
  }

  fail(msg) {
    throw new Error(msg);
  }

  ring(r) {
    Atomics.add(this.g, 1 + r, 1);
    Atomics.notify(this.g, 1 + r);
  }

  /** Wait until `ready()` gives something other than undefined; `what()`
   * is the deadlock message after deadlockS. */
  waitFor(ready, what) {
    const deadline = Date.now() + this.deadlockS * 1000;
    const bell = 1 + this.rank;
    for (;;) {
      const seen = Atomics.load(this.g, bell);
      const v = ready();
      if (v !== undefined) return v;
      if (Atomics.load(this.g, 0) !== 0) throw new Aborted("another rank failed");
      const left = deadline - Date.now();
      if (left <= 0) this.fail(what());
      Atomics.wait(this.g, bell, seen, Math.min(left, POLL_MS));
    }
  }

  range(addr, n) {
    const start = addr - MOCK_T_PTR;
    if (start < 0n || start + BigInt(n) > BigInt(this.memory.length)) {
      this.fail(`access [${hex(addr)}, +${n}) is outside the shard [${hex(MOCK_T_PTR)}, +${this.memory.length})`);
    }
    return Number(start);
  }

  scratch(shape, dtype, data, slot = null) {
    const addr = this.nextScratch;
    this.nextScratch += BigInt(data.length);
    return { addr, shape, dtype, data, slot };
  }

  load(addr, shape, dtype) {
    const n = prod(shape) * ITEMSIZE[dtype];
    const at = this.range(addr, n);
    return { addr, shape, dtype, data: this.memory.slice(at, at + n), slot: null };
  }

  store(addr, r) {
    this.memory.set(r.data, this.range(addr, r.data.length));
  }

  send(dir, r) {
    const link = this.tx.get(dir);
    if (link === undefined) this.fail(`send to direction ${showDir(dir)}, which is not installed`);
    const bytes = r.data;
    if (bytes.length > this.slotBytes) {
      this.fail(
        `send(dir=${showDir(dir)}) of ${bytes.length} bytes: the mock's slots hold ${this.slotBytes} ` +
          "(runKernelInMock option slotBytes)",
      );
    }
    const { ctl, data, cell } = link;
    this.waitFor(
      () => (Atomics.load(ctl, HELD) < this.nSlots ? true : undefined),
      () =>
        `deadlock: send(dir=${showDir(dir)}) waited ${this.deadlockS} s for a free slot ` +
        "(a slot is free again when the peer drops the tensor it received there: " +
        "does it keep received tensors alive?)",
    );
    Atomics.add(ctl, HELD, 1); // only this rank takes slots of this link
    const tail = Atomics.load(ctl, TAIL);
    const c = tail % this.nSlots;
    data.set(bytes, c * cell);
    Atomics.store(ctl, LENS + c, bytes.length);
    Atomics.store(ctl, TAIL, tail + 1);
    Atomics.add(ctl, QUEUED, 1); // publishes the bytes above
    this.ring(link.to);
  }

  sendAddr(dir, addr, shape, dtype) {
    this.send(dir, this.load(addr, shape, dtype));
  }

  // The next message of `link`, if one is queued (a copy; its slot stays
  // held until release()).
  poll(link) {
    const { ctl, data, cell } = link;
    if (Atomics.load(ctl, QUEUED) === 0) return undefined;
    const head = Atomics.load(ctl, HEAD);
    const c = head % this.nSlots;
    const len = Atomics.load(ctl, LENS + c);
    const bytes = data.slice(c * cell, c * cell + len);
    Atomics.store(ctl, HEAD, head + 1);
    Atomics.sub(ctl, QUEUED, 1);
    return { bytes, link };
  }

  release(r) {
    if (r.slot && this.live.delete(r)) {
      Atomics.sub(r.slot.ctl, HELD, 1);
      this.ring(r.slot.from);
    }
  }

  take(dir) {
    if (dir != null) {
      const link = this.rxByDir.get(dir);
      if (link === undefined) this.fail(`recv from direction ${showDir(dir)}, which is not installed`);
      return this.waitFor(
        () => this.poll(link),
        () => `deadlock: recv(dir=${showDir(dir)}) waited ${this.deadlockS} s`,
      );
    }
    return this.waitFor(
      () => {
        for (let i = 0; i < this.rx.length; i++) {
          const idx = (this.rr + i) % this.rx.length;
          const m = this.poll(this.rx[idx][1]);
          if (m !== undefined) {
            this.rr = (idx + 1) % this.rx.length;
            return m;
          }
        }
        return undefined;
      },
      () => `deadlock: recv() waited ${this.deadlockS} s on every direction`,
    );
  }

  serveOne(dir) {
    const id = this.pending.get(dir).shift();
    this.claimed.set(id, this.take(dir));
  }

  recvAsync(dir, shape, dtype) {
    const id = ++this.nextFuture;
    if (!this.pending.has(dir)) this.pending.set(dir, []);
    this.pending.get(dir).push(id);
    return new MockFuture(id, dir, shape, dtype);
  }

  wait(f) {
    while (!this.claimed.has(f.id)) this.serveOne(f.dir);
    const m = this.claimed.get(f.id);
    this.claimed.delete(f.id);
    return this.checked(f.dir, f.shape, f.dtype, m);
  }

  unwaited() {
    let n = this.claimed.size;
    for (const q of this.pending.values()) n += q.length;
    return n;
  }

  recv(dir, shape, dtype) {
    while (this.pending.get(dir)?.length) this.serveOne(dir);
    return this.checked(dir, shape, dtype, this.take(dir));
  }

  checked(dir, shape, dtype, { bytes, link }) {
    const r = this.scratch(shape, dtype, bytes, link);
    this.live.add(r);
    const want = prod(shape) * ITEMSIZE[dtype];
    if (bytes.length !== want) {
      this.release(r);
      this.fail(`recv(dir=${showDir(dir)}) of ${want} bytes got a message of ${bytes.length}`);
    }
    return r;
  }

  recvInto(dir, shape, dtype, dst) {
    const r = this.recv(dir, shape, dtype);
    try {
      this.store(dst, r);
    } finally {
      this.release(r);
    }
    return { addr: dst, shape, dtype, data: r.data, slot: null };
  }

  binary(op, a, b) {
    if (!sameShape(a.shape, b.shape) || a.dtype !== b.dtype) {
      this.fail(`${op}: shapes/dtypes differ: [${a.shape}] ${a.dtype} vs [${b.shape}] ${b.dtype}`);
    }
    if (a.dtype in INTS) {
      const y = intsOf(b.data, b.dtype);
      const out = intsOf(a.data, a.dtype).map((x, i) => intOp(op, a.dtype, x, y[i]));
      return this.scratch(a.shape, a.dtype, bytesOfInts(out, a.dtype));
    }
    const f = OPS[op];
    const y = decode(b.data, b.dtype);
    const out = decode(a.data, a.dtype).map((x, i) => f(x, y[i]));
    return this.scratch(a.shape, a.dtype, encode(out, a.dtype));
  }

  unary(op, a) {
    if (!UNARY_OPS.includes(op)) this.fail(`tl.unary: op ${JSON.stringify(op)} is one of ${UNARY_OPS.join(", ")}`);
    return this.scratch(a.shape, a.dtype, encode(decode(a.data, a.dtype).map(UNARY[op]), a.dtype));
  }

  cast(a, dtype) {
    return this.scratch(a.shape, dtype, encode(decode(a.data, a.dtype), dtype));
  }

  fill(shape, dtype, value) {
    return this.scratch(shape, dtype, encode(new Array(prod(shape)).fill(value), dtype));
  }

  reduce(op, a, axis) {
    if (!(op in REDUCE)) this.fail(`tl.reduce: op ${JSON.stringify(op)} is one of sum, max, min`);
    if (!Number.isInteger(axis) || axis < 0 || axis >= a.shape.length) {
      this.fail(`reduce over axis ${axis} of [${a.shape}]`);
    }
    const v = decode(a.data, a.dtype);
    const n = a.shape[axis];
    const inner = prod(a.shape.slice(axis + 1));
    const outer = prod(a.shape.slice(0, axis));
    const out = [];
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const xs = [];
        for (let k = 0; k < n; k++) xs.push(v[(o * n + k) * inner + i]);
        out.push(REDUCE[op](xs));
      }
    }
    const shape = [...a.shape.slice(0, axis), ...a.shape.slice(axis + 1)];
    return this.scratch(shape.length ? shape : [1], a.dtype, encode(out, a.dtype));
  }

  composite(op, a, b, c, outDtype) {
    if (!COMPOSITES.includes(op)) this.fail(`tl.composite: op ${JSON.stringify(op)} is one of ${COMPOSITES.join(", ")}`);
    if (a.shape.length !== 2 || b.shape.length !== 2 || a.shape[1] !== b.shape[0] || a.dtype !== b.dtype) {
      this.fail(`${op} of [${a.shape}] ${a.dtype} and [${b.shape}] ${b.dtype}`);
    }
    const [m, k] = a.shape;
    const n = b.shape[1];
    const x = decode(a.data, a.dtype);
    const y = decode(b.data, b.dtype);
    let out = [];
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let p = 0; p < k; p++) s += x[i * k + p] * y[p * n + j];
        out.push(s);
      }
    }
    const wantC = { "gemm-acc": [m, n], "gemm-bias": [n], "gemm-bias-relu": [n] }[op];
    const cOk = c == null || (wantC && (sameShape(c.shape, wantC) || sameShape(c.shape, [1, n])));
    if ((wantC === undefined) !== (c == null) || !cOk) {
      this.fail(`composite ${op} of an [${m}, ${n}] result: c of shape ${c == null ? "none" : `[${c.shape}]`}`);
    }
    if (c != null) {
      const cv = decode(c.data, c.dtype);
      const full = op === "gemm-acc" && cv.length === m * n;
      out = out.map((v, i) => v + cv[full ? i : i % n]);
    }
    if (op === "gemm-relu" || op === "gemm-bias-relu") out = out.map((v) => (0 > v ? 0 : v));
    return this.scratch([m, n], outDtype, encode(out, outDtype));
  }

  scale(a, factor) {
    return this.scratch(a.shape, a.dtype, encode(decode(a.data, a.dtype).map((x) => x * factor), a.dtype));
  }

  log(msg) {
    // Synchronous, so a line logged just before a failure is not lost
    // when the main thread terminates the workers.
    writeSync(1, `[mock rank ${this.rank}] ${msg}\n`);
  }
}

/** kernbench.js's `tl`, over rank `b` (same names, defaults, checks). */
function makeTl(b) {
  const wrap = (r) => new Tensor(r);
  const dirOf = (dir) => dir ?? null;
  return {
    /** axis 0: this PE's index in its cube (0 in the mock); axis 1: the cube index (0). */
    programId: (axis = 0) => 0,
    /** axis 0: PEs per cube; axis 1: cubes per SIP (1 and 1 in the mock). */
    numPrograms: (axis = 0) => 1,
    load: (addr, shape, dtype = "f16") => wrap(b.load(BigInt(addr), shapeOf(shape), dtypeOf(dtype))),
    store: (addr, value) => b.store(BigInt(addr), raw(value, "tl.store")),
    send: (dir, value) => b.send(dir, raw(value, "tl.send")),
    recv: (dir, shape, dtype = "f16") => wrap(b.recv(dirOf(dir), shapeOf(shape), dtypeOf(dtype))),
    recvInto: (dir, shape, dtype, dstAddr) =>
      wrap(b.recvInto(dirOf(dir), shapeOf(shape), dtypeOf(dtype), BigInt(dstAddr))),
    sendAddr: (dir, srcAddr, shape, dtype = "f16") => b.sendAddr(dir, BigInt(srcAddr), shapeOf(shape), dtypeOf(dtype)),
    recvAsync: (dir, shape, dtype = "f16") => b.recvAsync(dirOf(dir), shapeOf(shape), dtypeOf(dtype)),
    wait: (future) => {
      if (!(future instanceof MockFuture) || future.waited) {
        throw new TypeError("tl.wait: expected a future from tl.recvAsync, not yet waited for");
      }
      future.waited = true;
      return wrap(b.wait(future));
    },
    add: (a, c) => wrap(b.binary("add", raw(a, "tl.add"), raw(c, "tl.add"))),
    div: (a, c) => wrap(b.binary("div", raw(a, "tl.div"), raw(c, "tl.div"))),
    unary: (op, a) => wrap(b.unary(op, raw(a, `tl.unary(${op})`))),
    cast: (a, dtype) => wrap(b.cast(raw(a, "tl.cast"), dtypeOf(dtype))),
    fill: (shape, dtype, value) => wrap(b.fill(shapeOf(shape), dtypeOf(dtype), Number(value))),
    reduce: (op, a, axis = 0) => wrap(b.reduce(op, raw(a, `tl.reduce(${op})`), axis)),
    gemm: (a, c, outDtype) =>
      wrap(b.composite("gemm", raw(a, "tl.gemm"), raw(c, "tl.gemm"), null, dtypeOf(outDtype ?? a.dtype))),
    composite: (op, a, x, c, outDtype) =>
      wrap(
        b.composite(op, raw(a, "tl.composite"), raw(x, "tl.composite"),
          c == null ? null : raw(c, "tl.composite"), dtypeOf(outDtype ?? a.dtype)),
      ),
    sub: (a, c) => wrap(b.binary("sub", raw(a, "tl.sub"), raw(c, "tl.sub"))),
    mul: (a, c) => wrap(b.binary("mul", raw(a, "tl.mul"), raw(c, "tl.mul"))),
    maximum: (a, c) => wrap(b.binary("max", raw(a, "tl.maximum"), raw(c, "tl.maximum"))),
    minimum: (a, c) => wrap(b.binary("min", raw(a, "tl.minimum"), raw(c, "tl.minimum"))),
    scale: (a, factor) => wrap(b.scale(raw(a, "tl.scale"), Number(factor))),
    /** Simulated time: always 0n in the mock (BigInt, as the host's u64). */
    nowPs: () => 0n,
    log: (msg) => b.log(String(msg)),
    peTileAddr(tPtr, nElem, dtype = "f16") {
      const rank = this.programId(1) * this.numPrograms(0) + this.programId(0);
      return BigInt(tPtr) + BigInt(rank * nElem * ITEMSIZE[dtypeOf(dtype)]);
    },
  };
}

async function runRank(d) {
  const g = new Int32Array(d.global);
  try {
    const algo = await import(d.moduleUrl);
    rankState = new Rank(d);
    rankTl = makeTl(rankState);
    if (typeof algo.kernel !== "function") throw new TypeError(`${d.moduleUrl} exports no function kernel`);
    // exportAlgorithm: as many of the arguments as kernel names before tl.
    const wanted = Math.max(0, algo.kernel.length - 2);
    // It takes the output's address too (OUT_OF_PLACE): in place.
    if (wanted === d.args.length + 1) d.args.push(MOCK_T_PTR);
    if (wanted > d.args.length) {
      throw new TypeError(`kernel takes ${wanted} arguments between tPtr and tl, the host gives ${d.args.length}`);
    }
    const result = algo.kernel(MOCK_T_PTR, ...d.args.slice(0, wanted), rankTl);
    if (result && typeof result.then === "function") {
      throw new TypeError("kernel returned a Promise: kernels are synchronous (tl calls block)");
    }
    const n = rankState.unwaited();
    if (n) throw new Error(`the kernel ended without waiting for ${n} recvAsync future(s)`);
    // Received tensors still alive free their slots when the kernel ends.
    for (const r of [...rankState.live]) rankState.release(r);
    parentPort.postMessage({ ok: true, memory: rankState.memory });
  } catch (e) {
    const aborted = e instanceof Aborted;
    if (!aborted && Atomics.compareExchange(g, 0, 0, d.rank + 1) === 0) {
      for (let r = 0; r < d.worldSize; r++) {
        Atomics.add(g, 1 + r, 1);
        Atomics.notify(g, 1 + r);
      }
    }
    parentPort.postMessage({
      ok: false,
      aborted,
      name: e?.name,
      message: e instanceof Error ? e.message : String(e),
      stack: e?.stack,
    });
  }
}

if (!isMainThread && workerData?.kbMock) runRank(workerData);
