// KernBench guest SDK for JavaScript: the kernel language `tl` (seed 003
// §4) over the host's imports, and exportAlgorithm(), which turns a module
// of seed-style functions into the exports of the WIT world
// `algorithm-full`. `kernbench-host build my_algo.js -o my_algo.wasm`
// bundles them with componentize-js.
//
// Addresses are BigInt (a tensor's virtual base has its high bits set);
// sizes, counts and ids are Numbers. JavaScript has no operator
// overloading: `acc.add(recv)` issues a MATH add. Tensors are not freed by
// the garbage collector in time: call `t.drop()` when done with one
// (dropping a received tensor frees its IPCQ slot).

import * as host from "kernbench:sim/tl@0.8.4";

export const ITEMSIZE = { f16: 2, bf16: 2, f32: 4, i32: 4, i8: 1, u8: 1, u32: 4, i64: 8, u64: 8, f64: 8 };

function dtypeOf(d) {
  if (!(d in ITEMSIZE)) throw new TypeError(`dtype ${d}: one of ${Object.keys(ITEMSIZE).join(", ")}`);
  return d;
}

function shapeOf(shape) {
  return Uint32Array.from(typeof shape === "number" ? [shape] : shape);
}

/** A tensor in PE-visible memory; the bytes stay in the simulator. */
export class Tensor {
  constructor(raw) {
    this.raw = raw;
  }
  get shape() {
    return Array.from(this.raw.shape());
  }
  get dtype() {
    return this.raw.dtype();
  }
  /** Physical address of the first element (BigInt). */
  get addr() {
    return this.raw.addr();
  }
  get nbytes() {
    return Number(this.raw.nbytes());
  }
  add(other) {
    return tl.add(this, other);
  }
  sub(other) {
    return tl.sub(this, other);
  }
  mul(other) {
    return typeof other === "number" ? tl.scale(this, other) : tl.mul(this, other);
  }
  /** Give the handle back now (a received tensor's slot is freed once no
   * issued command still reads it). */
  drop() {
    if (this.raw) {
      this.raw[Symbol.dispose]();
      this.raw = null;
    }
  }
}

function raw(t, what) {
  if (!(t instanceof Tensor) || !t.raw) throw new TypeError(`${what}: expected a live tl tensor`);
  return t.raw;
}

const wrap = (r) => new Tensor(r);

/** `tl`: what a kernel calls. */
export const tl = {
  /** axis 0: this PE's index in its cube; axis 1: the cube index. */
  programId: (axis = 0) => Number(host.programId(axis)),
  /** axis 0: PEs per cube; axis 1: cubes per SIP. */
  numPrograms: (axis = 0) => Number(host.numPrograms(axis)),
  /** DMA read of `shape` / `dtype` elements at `addr` into TCM. */
  load: (addr, shape, dtype = "f16") => wrap(host.load(BigInt(addr), shapeOf(shape), dtypeOf(dtype))),
  /** DMA write of `value` to `addr`. */
  store: (addr, value) => host.store(BigInt(addr), raw(value, "tl.store")),
  /** Send `value` to the neighbour in `dir` (blocks while its slots are full). */
  send: (dir, value) => host.send(dir, raw(value, "tl.send")),
  /** Receive from `dir` (or round-robin over every direction when null). */
  recv: (dir, shape, dtype = "f16") => wrap(host.recv(dir ?? undefined, shapeOf(shape), dtypeOf(dtype))),
  /** Receive and copy to `dstAddr`; the slot is freed after the copy. */
  recvInto: (dir, shape, dtype, dstAddr) =>
    wrap(host.recvInto(dir ?? undefined, shapeOf(shape), dtypeOf(dtype), BigInt(dstAddr))),
  /** Send `shape` / `dtype` elements straight from memory at `srcAddr`
   * (no load first); the DMA reads them when its transfer starts. */
  sendAddr: (dir, srcAddr, shape, dtype = "f16") =>
    host.sendAddr(dir, BigInt(srcAddr), shapeOf(shape), dtypeOf(dtype)),
  /** Start a receive and return at once; `tl.wait(future)` gives the
   * tensor. A future never waited for fails the kernel when it ends. */
  recvAsync: (dir, shape, dtype = "f16") =>
    host.recvAsync(dir ?? undefined, shapeOf(shape), dtypeOf(dtype)),
  wait: (future) => wrap(host.wait(future)),
  add: (a, b) => wrap(host.add(raw(a, "tl.add"), raw(b, "tl.add"))),
  div: (a, b) => wrap(host.binary("div", raw(a, "tl.div"), raw(b, "tl.div"))),
  /** `op(a)` element-wise: neg, abs, exp, log, sqrt, relu, recip. */
  unary: (op, a) => wrap(host.unary(op, raw(a, `tl.unary(${op})`))),
  /** `a` converted to `dtype`. */
  cast: (a, dtype) => wrap(host.cast(raw(a, "tl.cast"), dtypeOf(dtype))),
  /** A tensor of `shape` / `dtype` in TCM whose every element is `value`,
   * converted as `cast` converts (one MATH command; kernbench:sim 0.8.1). */
  fill: (shape, dtype, value) => wrap(host.fill(shapeOf(shape), dtypeOf(dtype), Number(value))),
  /** `op` (sum, max, min) over `axis` of `a`; the axis is dropped. */
  reduce: (op, a, axis = 0) => wrap(host.reduce(op, raw(a, `tl.reduce(${op})`), axis)),
  /** `a [m, k] x b [k, n]` on the matrix unit, rounded once to `outDtype`. */
  gemm: (a, b, outDtype) =>
    wrap(host.gemm(raw(a, "tl.gemm"), raw(b, "tl.gemm"), dtypeOf(outDtype ?? a.dtype))),
  /** The seed's composite: the GEMM then `op`'s epilogue (gemm, gemm-acc,
   * gemm-bias, gemm-relu, gemm-bias-relu) with `c`, one command. */
  composite: (op, a, b, c, outDtype) =>
    wrap(host.composite(op, raw(a, "tl.composite"), raw(b, "tl.composite"),
      c == null ? undefined : raw(c, "tl.composite"), dtypeOf(outDtype ?? a.dtype))),
  sub: (a, b) => wrap(host.binary("sub", raw(a, "tl.sub"), raw(b, "tl.sub"))),
  mul: (a, b) => wrap(host.binary("mul", raw(a, "tl.mul"), raw(b, "tl.mul"))),
  maximum: (a, b) => wrap(host.binary("max", raw(a, "tl.maximum"), raw(b, "tl.maximum"))),
  minimum: (a, b) => wrap(host.binary("min", raw(a, "tl.minimum"), raw(b, "tl.minimum"))),
  /** `a * factor` on the MATH unit. */
  scale: (a, factor) => wrap(host.scale(raw(a, "tl.scale"), factor)),
  /** Simulated time of this PE in picoseconds (BigInt). */
  nowPs: () => host.nowPs(),
  /** A line for the kernel trace, printed with the PE's name. */
  log: (msg) => host.log(String(msg)),
  /** The seed kernels' tile of this PE: tPtr + rank * nElem * itemsize,
   * rank = cube_id * pes_per_cube + local_pe (ADR-0022). */
  peTileAddr(tPtr, nElem, dtype = "f16") {
    const rank = this.programId(1) * this.numPrograms(0) + this.programId(0);
    return BigInt(tPtr) + BigInt(rank * nElem * ITEMSIZE[dtypeOf(dtype)]);
  },
};

const STANDARD_KINDS = { ring_1d: 0, torus_2d: 1, mesh_2d_no_wrap: 2 };
const COMPASS = { E: "W", W: "E", N: "S", S: "N" };

function toArgs(values) {
  return BigInt64Array.from(values.map((v) => {
    if (typeof v === "bigint") return v;
    if (!Number.isInteger(v)) throw new TypeError(`kernelArgs must return integers, got ${v}`);
    return BigInt(v);
  }));
}

/**
 * The exports of `algorithm-outputs` for a module with
 *   kernel(tPtr, ...args, tl)      args: kernelArgs' values, then sipRank,
 *                                  sipTopoKind, sipTopoW, sipTopoH and,
 *                                  for a call with an output of its own,
 *                                  outPtr (it gets as many as it names
 *                                  before tl; Numbers, but a value past
 *                                  2^53, e.g. an address, is a BigInt)
 *   kernelArgs({worldSize, nElem, cubeW, cubeH, ...params}) -> [integers]
 * and optionally PARAMS (the ccl.yaml parameters kernelArgs takes),
 * COLLECTIVES, OUT_OF_PLACE and kernelArgsFor(call, params) (see below),
 * TOPO_NAME_TO_KIND, ENTRY_DEFAULTS and neighbors(rank, worldSize, map)
 * with the seed's {dir: peer} objects.
 */
export function exportAlgorithm(mod) {
  const params = mod.PARAMS ?? [];
  const checkParams = (given) => {
    const unknown = given.map((p) => p.name).filter((n) => !params.includes(n));
    if (unknown.length) {
      throw `unknown parameter${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} ` +
        `(this algorithm takes ${params.length ? params.join(", ") : "none"})`;
    }
    const kw = {};
    for (const p of given) kw[p.name] = typeof p.value.val === "bigint" ? Number(p.value.val) : p.value.val;
    return kw;
  };
  const argsWith = (worldSize, nElem, cubeW, cubeH, given) => {
    const kw = { worldSize, nElem: Number(nElem), cubeW, cubeH, ...checkParams(given) };
    try {
      return toArgs(mod.kernelArgs(kw));
    } catch (e) {
      throw String(e?.message ?? e);
    }
  };
  return {
    kernel(tPtr, args) {
      const wanted = Math.max(0, mod.kernel.length - 2);
      // Numbers, but a value past 2^53 (an address, such as outPtr)
      // stays a BigInt: a Number would round it.
      const all = Array.from(args, (v) => {
        const n = Number(v);
        return Number.isSafeInteger(n) ? n : v;
      });
      if (wanted > all.length) {
        throw new TypeError(`kernel takes ${wanted} arguments between tPtr and tl, the host gives ${all.length}`);
      }
      mod.kernel(tPtr, ...all.slice(0, wanted), tl);
    },
    kernelArgs(worldSize, nElem, cubeW, cubeH) {
      return toArgs(mod.kernelArgs({ worldSize, nElem: Number(nElem), cubeW, cubeH }));
    },
    kernelArgsWith(worldSize, nElem, cubeW, cubeH, given) {
      return argsWith(worldSize, nElem, cubeW, cubeH, given);
    },
    // COLLECTIVES lists what the module implements (PyTorch's names);
    // without it, all_reduce only.
    collectives() {
      return (mod.COLLECTIVES ?? ["all_reduce"]).map((c) => c.replace(/_/g, "-"));
    },
    // OUT_OF_PLACE lists those of all_reduce, broadcast and reduce whose
    // kernel reads tPtr and writes the output address the host then
    // appends after its four values; default: none.
    outOfPlace() {
      return (mod.OUT_OF_PLACE ?? []).map((c) => c.replace(/_/g, "-"));
    },
    // kernelArgsFor({collective, dtype, op, root, block, worldSize, cubeW,
    // cubeH}, params) when the module has it; else the seed's ABI for an
    // f16 sum all_reduce.
    kernelArgsFor(call, given) {
      const c = {
        collective: call.collective.replace(/-/g, "_"),
        dtype: call.dtype,
        op: call.op.replace(/-/g, "_"),
        root: call.root,
        block: Number(call.block),
        worldSize: call.worldSize,
        cubeW: call.cubeW,
        cubeH: call.cubeH,
      };
      if (mod.kernelArgsFor) {
        const kw = checkParams(given);
        try {
          return toArgs(mod.kernelArgsFor(c, kw));
        } catch (e) {
          throw String(e?.message ?? e);
        }
      }
      if (c.collective === "all_reduce" && c.dtype === "f16" && c.op === "sum") {
        return argsWith(call.worldSize, call.block, call.cubeW, call.cubeH, given);
      }
      throw "implements only an f16 sum all_reduce (the seed's ABI)";
    },
    topoNameToKind(name) {
      const table = mod.TOPO_NAME_TO_KIND ?? STANDARD_KINDS;
      return table[name];
    },
    entryDefaults() {
      const d = mod.ENTRY_DEFAULTS ?? {};
      return {
        topology: d.topology,
        mapper: d.mapper,
        bufferKind: d.buffer_kind,
        nSlots: d.n_slots,
        slotSize: d.slot_size === undefined ? undefined : BigInt(d.slot_size),
        validator: d.validator,
      };
    },
    neighbors(rank, worldSize, links) {
      if (!mod.neighbors) return undefined;
      const map = Object.fromEntries(links.map((l) => [l.dir, l.peer]));
      const out = mod.neighbors(rank, worldSize, map);
      if (out == null) return undefined;
      return Object.entries(out).map(([dir, v]) => {
        const [peer, peerDir] = Array.isArray(v) ? v : [v, undefined];
        return { dir, peer, peerDir: peerDir ?? undefined };
      });
    },
  };
}

export { COMPASS };
