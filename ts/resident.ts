// Plain TensorData objects (`{shape, dtype, data}` made by the caller: Alpha's optimizer state,
// checkpoint-loaded weights, data batches) kept resident on the device. The first op that reads
// one uploads it once; in-place ops (addInplace, scaleInplace, adamwStep) update the device copy;
// nothing crosses back to the host until the caller reads `data`.
//
// The object's `data` becomes an accessor so both directions are seen without polling:
// - reading `data` after a device update reads the device copy back into the same host array
//   (other references to that array see the new values too);
// - reading `data` hands the caller an array it may write, and assigning `data` replaces it:
//   either way the next op re-uploads before it reads (host writes are picked up).
// releaseGpuTensor(td) brings the values home (if the device copy is newer), frees the device
// copy and restores `data` as a plain property. An object whose `data` cannot be redefined (a
// frozen object) is uploaded per use, as before.
import type { TensorArray, TensorData } from "./types.js";
import type { HeliosTensor } from "./tensor.js";
import { size } from "./shape.js";

/** What the residency needs from the engine that holds the device copies. */
export interface ResidencyHost {
  /** A device tensor holding `data` (an upload recorded in program order). */
  upload(td: TensorData, data: TensorArray): HeliosTensor;
  /** Overwrites `t`'s device buffer with `data` in program order. */
  writeTensor(t: HeliosTensor, data: TensorArray): void;
  /** The device values of `t` (waits for the batch that last wrote them). */
  readTensor(t: HeliosTensor): TensorArray;
  /** Frees `t`'s device buffers. */
  release(t: HeliosTensor): void;
  /** Whether `t` was made by this engine on the live device. */
  owns(t: HeliosTensor): boolean;
}

/** Which copy holds the current values: both agree, the device is newer, or the host may be. */
type Current = "both" | "device" | "host";

interface Resident {
  host: ResidencyHost;
  device: HeliosTensor;
  array: TensorArray;
  current: Current;
}

const residents = new WeakMap<object, Resident>();

/**
 * The device tensor for plain `td`, uploading it on first use (or after a host write), or null
 * when `td` cannot be made resident (its `data` cannot be redefined).
 */
export function residentDevice(host: ResidencyHost, td: TensorData): HeliosTensor | null {
  const r = residents.get(td);
  if (r && r.host === host && host.owns(r.device) && fits(r.device, td, r.array)) {
    if (r.current === "host") {
      host.writeTensor(r.device, r.array);
      r.current = "both";
    }
    return r.device;
  }
  // A copy from another engine or an earlier device, or a reshaped object: start over.
  const array = r ? hostValues(r) : td.data;
  if (r) detach(td, array);
  const entry: Resident = { host, device: host.upload(td, array), array, current: "both" };
  if (!attach(td, entry)) {
    host.release(entry.device);
    return null;
  }
  residents.set(td, entry);
  return entry.device;
}

/** After an in-place op rebound `td`'s device copy: the device now holds the current values. */
export function markDeviceNewer(td: TensorData): void {
  const r = residents.get(td);
  if (r) r.current = "device";
}

/** The host array of `td` when it holds current values (never a readback), else null. */
export function currentHostValues(td: TensorData): TensorArray | null {
  const r = residents.get(td);
  if (!r) return td.data;
  return r.current === "device" ? null : r.array;
}

/** Whether `td` is a plain object with a device copy. */
export function isResident(td: TensorData): boolean {
  return residents.has(td);
}

/** Brings `td`'s values home if the device copy is newer, frees it, and makes `data` plain again. */
export function evict(td: TensorData): void {
  const r = residents.get(td);
  if (!r) return;
  const array = hostValues(r);
  detach(td, array);
  r.host.release(r.device);
}

function fits(device: HeliosTensor, td: TensorData, array: TensorArray): boolean {
  return device.dtype === td.dtype && size(td.shape) === device.size && array.length === device.size;
}

/** The current values as a host array, reading the device copy back into `r.array` if newer. */
function hostValues(r: Resident): TensorArray {
  if (r.current !== "device") return r.array;
  const fresh = r.host.readTensor(r.device);
  if (r.array.length === fresh.length && sameKind(r.array, fresh)) r.array.set(fresh as never);
  else r.array = fresh;
  r.current = "both";
  return r.array;
}

function sameKind(a: TensorArray, b: TensorArray): boolean {
  return Object.getPrototypeOf(a) === Object.getPrototypeOf(b);
}

function attach(td: TensorData, r: Resident): boolean {
  try {
    Object.defineProperty(td, "data", {
      configurable: true,
      enumerable: true,
      get(): TensorArray {
        const values = hostValues(r);
        // the caller may write the array it was handed: the next op re-uploads first
        r.current = "host";
        return values;
      },
      set(v: TensorArray) {
        r.array = v;
        r.current = "host";
      },
    });
    return true;
  } catch {
    return false;
  }
}

function detach(td: TensorData, array: TensorArray): void {
  residents.delete(td);
  Object.defineProperty(td, "data", { value: array, writable: true, configurable: true, enumerable: true });
}
