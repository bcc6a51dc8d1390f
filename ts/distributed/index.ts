// Data-parallel training across processes (issue 28): the process group (group.ts), the
// transport interface (transport.ts; NCCL in nccl.ts), the DDP-style gradient reducer
// (buckets.ts) and the launcher (launch.ts). docs/distributed.md describes the design.
export { initDistributed, destroyDistributed, allReduce, broadcast, barrier, processGroup, ProcessGroup, type InitDistributedOptions } from "./group.js";
export { registerTransport, type Transport, type TransportContext, type ReduceOp, type CollectiveBackend } from "./transport.js";
export { planBuckets, GradReducer, type Bucket, type GradSpec, type ReducerBackend } from "./buckets.js";
export { DataParallel, shardRows, type DdpBackend } from "./ddp.js";
export { readDistEnv, hasDistEnv, type DistEnv } from "./env.js";
export { DistError, type DistErrorCode } from "./errors.js";
export { launch, parseLaunchArgs, LAUNCH_USAGE } from "./launch.js";
