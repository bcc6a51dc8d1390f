// Files Helios keeps under HELIOS_CACHE_DIR (the matmul tuning cache), read and written as the
// native runtime does its own (src/runtime/cache_file.rs), because the directory is not trusted
// (issue 24 item 7): reads take regular files only (a FIFO would block, /dev/zero never ends),
// never through a symlink, up to a size cap; writes go to a fresh, unpredictably named temp file
// (created exclusively, never through a symlink) renamed over the target.
import { randomBytes } from "node:crypto";
import { closeSync, constants, fstatSync, mkdirSync, openSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** The file's bytes, or null when it is missing, not a regular file, a symlink or over `cap` bytes. */
export function readCacheFile(path: string, cap: number): Buffer | null {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > cap) return null;
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < buf.length) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` to `path` through a fresh temp file and a rename; throws on failure. */
export function writeCacheFile(path: string, data: string | Uint8Array): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(8).toString("hex")}.tmp`);
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      writeSync(fd, typeof data === "string" ? Buffer.from(data) : data);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
