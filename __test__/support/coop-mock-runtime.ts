// The mock runtime (issue 2's contracts, synchronous, on the CPU) reporting a device with
// cooperative matrices and 32-wide subgroups: HeliosBackend's tensor-core paths (not just their
// kernels) run in CI, in the kernel interpreter like every mock dispatch.
import type { DeviceInfo } from "../../ts/exec/runtime.js";
import { MockRuntime, type Compiled } from "../mock/runtime.js";

export class CoopMockRuntime extends MockRuntime {
  /** Kernel name of every dispatch, in order. */
  readonly labels: string[] = [];

  getDeviceInfo(): DeviceInfo {
    return {
      ...super.getDeviceInfo(), deviceName: "mock (cooperative-matrix interpreter)", deviceType: "cpu",
      coopMatSupported: true, subgroupSize: 32, maxSharedMemoryBytes: 49152,
    };
  }

  protected run(k: Compiled, buffers: ArrayBuffer[], groups: [number, number, number], push: ArrayBuffer | null): void {
    super.run(k, buffers, groups, push);
    this.labels.push(k.desc.name);
  }
}
