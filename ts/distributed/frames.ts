// The rendezvous wire format: each frame is a JSON header and a binary payload, both preceded
// by their byte length (u32, big-endian). Headers are small; payloads carry unique ids and, for
// the test transport, tensor bytes.

export interface Frame {
  head: Record<string, unknown> & { op: string };
  body: Buffer;
}

/** Largest header or payload accepted (a corrupt length must not allocate gigabytes). */
const MAX_PART = 1 << 30;

export function encodeFrame(head: Frame["head"], body: Uint8Array = new Uint8Array(0)): Buffer {
  const h = Buffer.from(JSON.stringify(head), "utf8");
  const out = Buffer.allocUnsafe(8 + h.length + body.byteLength);
  out.writeUInt32BE(h.length, 0);
  h.copy(out, 4);
  out.writeUInt32BE(body.byteLength, 4 + h.length);
  out.set(body, 8 + h.length);
  return out;
}

/** Splits a byte stream into frames; `push` returns the frames completed by a chunk. */
export class FrameReader {
  private chunks: Buffer[] = [];
  private bytes = 0;

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    const out: Frame[] = [];
    for (;;) {
      const f = this.next();
      if (!f) return out;
      out.push(f);
    }
  }

  private next(): Frame | null {
    if (this.bytes < 4) return null;
    const buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    this.chunks = [buf];
    const hl = buf.readUInt32BE(0);
    if (hl > MAX_PART) throw new Error(`rendezvous frame header of ${hl} bytes (corrupt stream?)`);
    if (buf.length < 8 + hl) return null;
    const bl = buf.readUInt32BE(4 + hl);
    if (bl > MAX_PART) throw new Error(`rendezvous frame payload of ${bl} bytes (corrupt stream?)`);
    const end = 8 + hl + bl;
    if (buf.length < end) return null;
    const head = JSON.parse(buf.toString("utf8", 4, 4 + hl)) as Frame["head"];
    if (typeof head !== "object" || head === null || typeof head.op !== "string") throw new Error("rendezvous frame without an op");
    const body = Buffer.from(buf.subarray(8 + hl, end));
    this.chunks = [buf.subarray(end)];
    this.bytes = buf.length - end;
    return { head, body };
  }
}
