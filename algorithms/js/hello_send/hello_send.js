// Hello world (seed 003 §1), in JavaScript: send your tile east, receive
// the west neighbour's and store it in place of your own.

export function kernel(tPtr, nElem, tl) {
  const peAddr = tl.peTileAddr(tPtr, nElem, "f16");
  const src = tl.load(peAddr, [nElem], "f16");
  tl.send("E", src);
  const recv = tl.recv("W", [nElem], "f16");
  tl.store(peAddr, recv);
  src.drop();
  recv.drop();
}

export function kernelArgs({ nElem }) {
  return [nElem];
}
