// The mock runtime (issue 2's contracts, synchronous, on the CPU) running every dispatch in the
// cooperative-matrix-capable kernel interpreter and reporting a device with cooperative matrices
// and 32-wide subgroups: HeliosBackend's tensor-core paths (not just their kernels) run in CI.
import type { DeviceInfo } from "../../ts/exec/runtime.js";
import type { KernelDesc } from "../../ts/ir/index.js";
import { MockRuntime } from "../mock/runtime.js";
import type { Compiled } from "../mock/interp.js";
import { Interp } from "./kernel-interp.js";
import { decodeBuf, encodeBuf } from "./interp-runtime.js";

export class CoopMockRuntime extends MockRuntime {
  private readonly interps = new Map<KernelDesc, Interp>();
  /** Kernel name of every dispatch, in order. */
  readonly labels: string[] = [];

  getDeviceInfo(): DeviceInfo {
    return {
      ...super.getDeviceInfo(), deviceName: "mock (cooperative-matrix interpreter)", deviceType: "cpu",
      coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152,
    };
  }

  protected run(k: Compiled, buffers: ArrayBuffer[], groups: [number, number, number], push: ArrayBuffer | null): void {
    const desc = k.desc;
    let interp = this.interps.get(desc);
    if (!interp) this.interps.set(desc, (interp = new Interp(desc)));
    const vals = desc.bindings.map((b, i) => decodeBuf(new Uint8Array(buffers[i]), b.elem));
    interp.run(vals, groups, push ?? new ArrayBuffer(0));
    desc.bindings.forEach((b, i) => {
      if (b.access !== "read") encodeBuf(vals[i], b.elem, new Uint8Array(buffers[i]));
    });
    this.labels.push(desc.name);
  }
}
