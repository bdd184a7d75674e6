// Ring all-reduce, the seed's algorithm (seed 003 §2), in JavaScript: for
// worldSize - 1 steps send the current tile east and add the one received
// from the west; forward what was received, so every rank's tile travels
// the ring once; store the sum once. Parameter chunk_size (elements): the
// tile in chunks of at most that many elements, one after another.

export const PARAMS = ["chunk_size"];

// Out of place the sum goes to the output (the host appends its address).
export const OUT_OF_PLACE = ["all_reduce"];

export function kernel(tPtr, nElem, worldSize, chunk, _sipRank, _topoKind, _topoW, _topoH, outPtr, tl) {
  let addr = tl.peTileAddr(tPtr, nElem, "f16");
  let out = tl.peTileAddr(outPtr, nElem, "f16");
  const nChunks = Math.max(1, Math.ceil(nElem / Math.max(1, chunk)));
  const base = Math.floor(nElem / nChunks);
  const extra = nElem % nChunks;
  for (let c = 0; c < nChunks; c++) {
    const n = base + (c < extra ? 1 : 0);
    let acc = tl.load(addr, [n], "f16");
    let current = acc;
    for (let step = 1; step < worldSize; step++) {
      tl.send("E", current);
      const recv = tl.recv("W", [n], "f16");
      const sum = acc.add(recv);
      acc.drop();
      if (current !== acc) current.drop();
      acc = sum;
      current = recv; // forward what was received, not the sum
    }
    if (current !== acc) current.drop();
    tl.store(out, acc);
    acc.drop();
    addr += BigInt(n * 2);
    out += BigInt(n * 2);
  }
}

export function kernelArgs({ worldSize, nElem, chunk_size }) {
  if (chunk_size === undefined) return [nElem, worldSize, nElem];
  if (!Number.isInteger(chunk_size)) throw new TypeError("parameter chunk_size must be an integer");
  if (chunk_size < 1) throw new RangeError(`chunk_size must be >= 1 element, got ${chunk_size}`);
  return [nElem, worldSize, Math.min(chunk_size, Math.max(nElem, 1))];
}
