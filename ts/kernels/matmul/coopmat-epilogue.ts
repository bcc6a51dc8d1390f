// The output of the KHR coopmat matmul (coopmat.ts): each subgroup's sm×sn accumulator blocks get
// the epilogue (scale, bias, activation, GELU gradient, residual) and reach C. Whole blocks: the
// epilogue on the accumulator fragment (bias as a coopmat loaded with stride 0, the activation and
// the GELU gradient element-wise), then a per-subgroup f16 tile and 16-byte stores (halfOut), the
// f32 tile's 16-byte stores (wideOut32, wideOut16) or a coopmat store. Edge blocks (and staged
// epilogues): through the per-subgroup f32 tile, each lane applying the epilogue to 8 elements with
// bounds-checked stores.
// The GELU gradient and the residual on whole blocks that leave by 16-byte lane stores are applied
// at that store instead (laneGate): the lane's 8 contiguous outputs meet their 8 preact and
// residual values, read with 16-byte loads issued PREFETCH_BYTES ahead of the blocks that use them
// (aligned tiles). The residual moved there in session 22: on the fragment, GPT-2's projections
// (f32 out, bias and residual) took ~45 µs more than a plain product of their shape (H200). On the
// fragment the gate cost as much as the elementwise pass it replaced (H200,
// GPT-2's 16384×3072×768 dg product: 0.41 ms against 0.26 plain) with the same arithmetic per
// element; what differed was the preact read: a row-strided coopmat load per block (the driver
// makes global coopmat stores narrow, store-tile.ts; likely its loads too) issued in the block
// loop, where nothing hides its latency with one workgroup per SM (not yet profiled). With f16
// output the value gated is the f16 tile's, so df is rounded twice (as the unfused product and
// geluBackward rounded it; relative error 2.9e-4 against 2.1e-4 for one rounding, interpreter).
import { coopmat, lit, packHalves, type Buffer, type CoopMatType, type Expr, type ValueType } from "../../ir/index.js";
import { activate, applyEpilogue, type EpilogueRefs, geluGradExp, isPlainEpilogue, read } from "./common.js";
import type { Kern, TileRun } from "./coopmat.js";
import { CM } from "./coopmat-stage.js";
import { storeTileF16, TILE_SLOT } from "../store-tile.js";

/** How the tile's output blocks leave (one per kernel: the epilogue's choices). */
interface BlockOut {
  x: Kern;
  cBase: Expr;
  refs: EpilogueRefs;
  /** Whole blocks leave straight from the accumulator (plain epilogue, directStore). */
  plain: boolean;
  /** Whole blocks get the epilogue on the accumulator fragment (directStore). */
  fragEpi: boolean;
  /** Whole blocks leave through the f32 tile's 4-wide view (plain epilogue, no directStore). */
  vecStaged: boolean;
  stOff: Expr;
  tOut: CoopMatType;
  /** Aligned tiles: each column block's bias fragment, loaded once for all row blocks. */
  biasByCol: Expr[];
  /** Whole blocks get the GELU gradient and the residual at their 16-byte lane stores (see top). */
  laneGate: boolean;
  /** Aligned tiles with laneGate: each block's preact and residual words for this lane, loaded ahead (by block). */
  pre: LaneWords[];
}

/** A lane's 8 values of the tensors the lane gate reads (laneLoad's words), where the epilogue has them. */
interface LaneWords { pre?: Expr[]; res?: Expr[] }

/** Bytes of preact and residual a lane holds in flight ahead of its blocks (one f16 tensor: 8 blocks, f32: 4). */
const PREFETCH_BYTES = 128;

/** The tile's output blocks: epilogue and store to C (cBase: the batch's first element of C). */
export function epilogue(x: Kern, t: TileRun, cBase: Expr): void {
  const { k, p, c, split, pc, sg } = x;
  const plainEpi = isPlainEpilogue(p.epilogue);
  const plain = (split || plainEpi) && !!c.directStore;
  // Full blocks with an epilogue apply it on the accumulator fragment (no staging round trip, no
  // per-element bounds checks): scale as a coopmat×scalar, bias as a coopmat loaded with stride 0
  // (every row reads the same 16 bias values), the activation element-wise over the invocation's
  // cmlen elements (it needs no index), the GELU gradient element-wise against a coopmat load of
  // the preact tile (element q of two coopmats of one type is the same matrix element), the
  // residual as a coopmat load of the residual tile. With laneGate the last two wait for the lane
  // stores.
  const fragEpi = !split && !plain && !!c.directStore;
  const o: BlockOut = {
    x, cBase, refs: { scale: pc.scale, bias: x.bias, residual: x.residual, preact: x.preact, dtype: p.outDtype }, plain,
    fragEpi,
    vecStaged: !split && !c.directStore && plainEpi && !!c.vecOut,
    stOff: k.let(sg.mul(256), "stoff"),
    tOut: coopmat("acc", x.outElem, CM, CM),
    biasByCol: [],
    laneGate: fragEpi && (p.epilogue.geluGrad || p.epilogue.residual) && !!(x.stageH || c.wideOut32),
    pre: [],
  };
  const blocks: { i: number; j: number; gr0?: Expr; gc0?: Expr }[] = [];
  for (let i = 0; i < c.sm; i++) for (let j = 0; j < c.sn; j++) blocks.push({ i, j });
  const at = (b: (typeof blocks)[number]) => {
    b.gr0 ??= k.let(t.row0.add(t.sgRow).add(b.i * CM), "gr0");
    b.gc0 ??= k.let(t.col0.add(t.sgCol).add(b.j * CM), "gc0");
    return { gr0: b.gr0, gc0: b.gc0 };
  };
  // aligned: every block is whole, so its preact and residual loads can be issued ahead without a bounds test
  const tensors = (p.epilogue.geluGrad ? 1 : 0) + (p.epilogue.residual ? 1 : 0);
  const ahead = o.laneGate && c.aligned ? Math.max(1, PREFETCH_BYTES / (8 * (x.outElem === "f32" ? 4 : 2) * tensors)) : 0;
  const prefetch = (n: number) => {
    if (n >= blocks.length) return;
    const { gr0, gc0 } = at(blocks[n]);
    o.pre[n] = laneWords(o, laneIndex(o, gr0, gc0));
  };
  for (let n = 0; n < ahead; n++) prefetch(n);
  blocks.forEach((b, n) => {
    const { gr0, gc0 } = at(b);
    storeBlock(o, read(t.acc[b.i][b.j]), gr0, gc0, b.j, o.pre[n]);
    if (ahead) prefetch(n + ahead);
  });
}

/** Element index of this lane's first output in block (gr0, gc0): row lane/2, columns 8·(lane%2) .. +8. */
function laneIndex(o: BlockOut, gr0: Expr, gc0: Expr): Expr {
  const { k, pc, lane } = o.x;
  return k.let(o.cBase.add(gr0.add(lane.shr(1)).mul(pc.n)).add(gc0).add(lane.band(1).mul(8)), "oi");
}

/** A lane's 8 elements at element `oi` of an M×N tensor of the output dtype (the preact, or b): one u32x4 of halves or two f32x4. */
function laneLoad(o: BlockOut, oi: Expr, b: Buffer | undefined = o.x.preact): Expr[] {
  if (!b) throw new Error("coopmat epilogue: lane loads of a tensor the kernel does not bind");
  return o.x.outElem === "f32" ? [0, 1].map((h) => b.as("f32", 4).load(oi.div(4).add(h))) : [b.as("u32", 4).load(oi.div(8))];
}

/** The lane's 8 preact and residual values at element `oi`, those the epilogue has. */
function laneWords(o: BlockOut, oi: Expr): LaneWords {
  const e = o.x.p.epilogue;
  return { pre: e.geluGrad ? laneLoad(o, oi) : undefined, res: e.residual ? laneLoad(o, oi, o.x.residual) : undefined };
}

/** Values h*4 .. h*4+3 of a lane's 8 (laneLoad's words) as f32x4. */
function laneF32(words: Expr[], h: number): Expr {
  return words.length === 2 ? words[h] : words[0].swz(h ? "zw" : "xy").bitcast("f16x4").cast("f32x4");
}

/**
 * y · gelu'(preact) + residual on 4 of a lane's values (y: f32x4, h: which 4 of the 8 at oi), each
 * term where the epilogue has it: the late part of the epilogue (scale, bias and activation were
 * applied on the fragment).
 */
function laneGate(o: BlockOut, y: Expr, w: LaneWords, h: number): Expr {
  const g = w.pre ? y.mul(geluGradExp(o.x.k, laneF32(w.pre, h))) : y;
  return w.res ? g.add(laneF32(w.res, h)) : g;
}

/** The lane's 8 gated halves (u32x4 `words` from the f16 tile, output element `oi`) as a u32x4. */
function laneGateF16(o: BlockOut, ahead: LaneWords | undefined) {
  return (words: Expr, oi: Expr): Expr => {
    const w = ahead ?? laneWords(o, oi);
    const out = [0, 1].map((h) => o.x.k.let(laneGate(o, laneF32([words], h), w, h).cast("f16x4"), "dg"));
    return packHalves(out.flatMap((v) => [v.swz("xy"), v.swz("zw")]));
  };
}

/** Output block (gr0, gc0) of accumulator v (column block j; pre: its lane gate's words, if loaded ahead). */
function storeBlock(o: BlockOut, v: Expr, gr0: Expr, gc0: Expr, j: number, pre?: LaneWords): void {
  const { k, c } = o.x;
  const whole = (): void => {
    if (o.vecStaged) stagedVec(o, gr0, gc0, v.cast(o.x.tC32));
    else storeWhole(o, o.plain ? v.cast(o.tOut) : fragment(o, v, gr0, gc0, j), gr0, gc0, pre);
  };
  const edge = () => staged(o, v, gr0, gc0);
  if (!o.vecStaged && !o.plain && !o.fragEpi) return edge();
  // aligned: every block is full, so the bounds test and the edge path are not generated
  if (c.aligned) whole();
  else k.if(k.let(gr0.add(CM).le(o.x.pc.m).and(gc0.add(CM).le(o.x.pc.n)), "full"), whole, edge);
}

/** The epilogue applied on the accumulator fragment of a whole block. */
function fragment(o: BlockOut, v: Expr, gr0: Expr, gc0: Expr, j: number): Expr {
  const { k, p, c, pc, tC32, bias, residual, preact } = o.x;
  const e = p.epilogue;
  // Aligned tiles load each column block's bias once for all sm row blocks (every block is whole,
  // so no load sits in a branch): H200 session 10, 16384×3072×768, the bias cost 15 µs of 284
  const biasOf = (b: Buffer): Expr => {
    const load = () => b.cmLoad(e.biasDtype === p.outDtype ? o.tOut : coopmat("acc", e.biasDtype, CM, CM), gc0, lit("u32", 0), "row");
    return c.aligned ? (o.biasByCol[j] ??= load()) : load();
  };
  const y = k.var(tC32, v.cast(tC32), "ep");
  if (e.scale !== 1) y.set(read(y).mul(pc.scale));
  if (e.bias && bias) y.set(read(y).add(biasOf(bias).cast(tC32)));
  if (e.act !== "none") k.for(0, k.cmLen(tC32), (q) => y.setAt(q, activate(k, e.act, y.at(q))), { name: "eq", unroll: true });
  const at = () => o.cBase.add(gr0.mul(pc.n)).add(gc0);
  // laneGate: the gate and the residual wait for the lane stores (laneGateF16, stagedVec)
  if (o.laneGate) return read(y).cast(o.tOut);
  if (e.geluGrad && preact) {
    const pa = k.var(tC32, preact.cmLoad(o.tOut, at(), pc.n, "row").cast(tC32), "pa");
    k.for(0, k.cmLen(tC32), (q) => y.setAt(q, y.at(q).mul(geluGradExp(k, pa.at(q)))), { name: "gq", unroll: true });
  }
  if (e.residual && residual) y.set(read(y).add(residual.cmLoad(o.tOut, at(), pc.n, "row").cast(tC32)));
  return read(y).cast(o.tOut);
}

/** A whole block leaves through the f16 tile (halfOut), the f32 tile's 16-byte stores (wideOut32) or a coopmat store. */
function storeWhole(o: BlockOut, x: Expr, gr0: Expr, gc0: Expr, pre?: LaneWords): void {
  const { k, c, C, pc, sg, lane, stageH } = o.x;
  const lanes = o.laneGate ? laneGateF16(o, pre) : undefined;
  if (stageH) storeTileF16(k, C, stageH, k.let(sg.mul(TILE_SLOT), "hs"), lane, x, o.cBase.add(gr0.mul(pc.n)).add(gc0), pc.n, lanes);
  else if (c.wideOut32) stagedVec(o, gr0, gc0, x, pre);
  else C.cmStore(x, o.cBase.add(gr0.mul(pc.n)).add(gc0), pc.n, "row");
}

/**
 * A block through the f32 tile's 4-wide view (so its coopmat store uses that view too): lane l
 * writes row l/2, columns 8·(l%2) .. +8 as two 4-wide stores, or (wideOut16) as one 16-byte store
 * of 8 packed 16-bit values.
 */
function stagedVec(o: BlockOut, gr0: Expr, gc0: Expr, x: Expr, pre?: LaneWords): void {
  const { k, c, C, pc, lane, f32Tile, outElem } = o.x;
  f32Tile.store(x, o.stOff.div(4));
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
  const r = k.let(lane.shr(1), "vr");
  const cc = k.let(lane.band(1).mul(8), "vc");
  if (c.wideOut16 && outElem !== "f32") {
    const at = k.let(o.stOff.add(r.mul(CM)).add(cc).div(4), "va");
    const halves = [0, 1].map((h) => k.let(f32Tile.load4(at.add(h)).cast(`${outElem}x4` as ValueType), "vh"));
    const packed = packHalves(halves.flatMap((v) => [v.swz("xy"), v.swz("zw")]));
    const oi = k.let(o.cBase.add(gr0.add(r).mul(pc.n)).add(gc0).add(cc), "oi");
    C.as("u32", 4).store(oi.div(8), packed);
    k.barrier({ scope: "subgroup", mem: ["workgroup"] });
    return;
  }
  // laneGate (f32 output): the lane's 8 preact and residual values, unless loaded ahead
  const w8 = o.laneGate ? pre ?? laneWords(o, laneIndex(o, gr0, gc0)) : undefined;
  for (let h = 0; h < 2; h++) {
    const v = f32Tile.load4(o.stOff.add(r.mul(CM)).add(cc).add(h * 4).div(4));
    const oi = k.let(o.cBase.add(gr0.add(r).mul(pc.n)).add(gc0).add(cc).add(h * 4), "oi");
    const y = w8 ? k.let(laneGate(o, v, w8, h), "dg") : v;
    C.store(oi.div(4), outElem === "f32" ? y : y.cast(`${outElem}x4` as ValueType));
  }
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
}

/** An edge block (or any block of a staged epilogue): through the f32 tile, 8 bounds-checked elements per lane. */
function staged(o: BlockOut, v: Expr, gr0: Expr, gc0: Expr): void {
  const { k, p, split, C, pc, lane, f32Tile, outElem, tC32 } = o.x;
  // through the 4-wide view always: the array's widest view, which its coopmat stores must use
  f32Tile.store(v.cast(tC32), o.stOff.div(4));
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
  for (let q = 0; q < 8; q++) {
    const flat = k.let(lane.mul(8).add(q), "fl");
    const gr = k.let(gr0.add(flat.shr(4)), "gr");
    const gc = k.let(gc0.add(flat.band(15)), "gc");
    k.if(gr.lt(pc.m).and(gc.lt(pc.n)), () => {
      const x = f32Tile.load1(o.stOff.add(flat), q);
      const oi = k.let(o.cBase.add(gr.mul(pc.n)).add(gc), "oi");
      const y = split ? x : applyEpilogue(k, p, o.refs, x, gc, oi);
      C.store(oi, y.cast(outElem));
    });
  }
  k.barrier({ scope: "subgroup", mem: ["workgroup"] });
}
