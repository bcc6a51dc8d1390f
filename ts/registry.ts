// `heliosRegistry`: Alpha's CLI lists and builds backends through a registry
// (apps/cli/src/resolve.ts: `heliosRegistry.list()`, `heliosRegistry.get(name)`). This is a
// structural twin of Alpha's `Registry<T>` (@alpha/core), so @alpha/helios needs no dependency
// on Alpha's packages: TypeScript and Alpha's code see the same list/get/has/register.
import type { Backend } from "./types.js";
import { HeliosBackend } from "./backend.js";

export class BackendRegistry<T> {
  private readonly factories = new Map<string, () => T>();

  constructor(readonly subsystem: string) {}

  register(name: string, factory: () => T): void {
    this.factories.set(name, factory);
  }

  get(name: string): T {
    const factory = this.factories.get(name);
    if (!factory) throw new Error(`[${this.subsystem}] Unknown implementation "${name}". Available: ${this.list().join(", ")}`);
    return factory();
  }

  has(name: string): boolean {
    return this.factories.has(name);
  }

  list(): string[] {
    return [...this.factories.keys()];
  }
}

/** The backends this package provides: "helios" (a HeliosBackend on the default device). */
export const heliosRegistry = new BackendRegistry<Backend>("backend");
heliosRegistry.register("helios", () => new HeliosBackend());
