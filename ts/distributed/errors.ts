// Errors of the distributed layer: a JS Error with a stable ERR_HELIOS_DIST_* code, the call that
// failed and the value or rank at fault in the message (like the native runtime's errors).

export type DistErrorCode =
  /** A torchrun-style variable (RANK, WORLD_SIZE, ...) is missing or malformed. */
  | "ERR_HELIOS_DIST_ENV"
  /** A bad argument to a distributed call (op, root, tensor, option). */
  | "ERR_HELIOS_DIST_ARGUMENT"
  /** NCCL or the CUDA driver could not be loaded, or the transport named is not registered. */
  | "ERR_HELIOS_DIST_UNAVAILABLE"
  /** Another rank died, hung past the timeout, or the rendezvous was lost: the job is over. */
  | "ERR_HELIOS_DIST_ABORTED"
  /** A call before initDistributed() or after destroyDistributed(). */
  | "ERR_HELIOS_DIST_STATE";

export class DistError extends Error {
  constructor(readonly code: DistErrorCode, call: string, message: string) {
    super(`${call}: ${message}`);
    this.name = "DistError";
  }
}

/** Whether `e` is an error carrying `code` (a DistError, or a native error mapped to that code). */
export function hasCode(e: unknown, code: string): boolean {
  return e instanceof Error && (e as Error & { code?: unknown }).code === code;
}
