// Kernel IR builder (docs/kernel-ir.md): describe a kernel in TypeScript, get a KernelDesc to hand
// to the native compileKernel / kernelSpirv.
export * from "./types.js";
export * from "./nodes.js";
export { Expr, lit, lift, bin, un, tern, select, vecOf, scalarTypeOf, type ExprLike } from "./expr.js";
export * from "./math.js";
export { packHalves, unpackHalves } from "./pack.js";
export { roundToBf16, toBf16 } from "./bf16.js";
export { Buffer, BufferView, Shared, SharedView, Var, VarArray, type TensorAccess } from "./memory.js";
export { KernelBuilder, kernel, assertType, type KernelOptions, type ForOptions } from "./builder.js";
