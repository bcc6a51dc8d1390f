// Matmul kernels: the entry points the backend, the bench and Alpha's tooling use.
export { planMatmul, defaultVariant, candidateVariants, unsupported, type MatmulCaps, type MatmulPlan, type MatmulStep, type PlanOptions } from "./plan.js";
export { chooseMatmul, capsOf, knownRecord, shapeClass, tuneKey, type ChooseOptions, type TuneRecord } from "./autotune.js";
export { recordPlan, runPlan, timePlan, pipelinesOf, precompilePlans, type PlanBuffers, type TimingOptions } from "./run.js";
export { normalize, bytesOf, type MatmulProblem, type MatmulDtype, type Epilogue, type Activation } from "./problem.js";
export { VARIANTS, variantByName, type VariantSpec } from "./variants.js";
export { PUSH_FIELDS, PUSH_BYTES, type BindingRole, type EpilogueRole, type ScratchRole } from "./common.js";
export { readMatmulConfig, type MatmulConfig, type TuneMode } from "./config.js";
export { driverFamily, loadShipped, mergeShipped, parseShipped, shippedKey, shippedRecord, type ShippedData, type ShippedEntry } from "./shipped.js";
export { MatmulFixture } from "./fixture.js";
export type { MatmulRuntime, MatmulDeviceInfo } from "./device.js";
