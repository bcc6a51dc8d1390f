#!/usr/bin/env python3
"""bench/sass.py: the machine code NVIDIA's Vulkan driver made of Helios kernels (bench/MATMUL_NOTES.md,
round 16). VK_KHR_pipeline_executable_properties gives registers and spills only; the driver's own shader
disk cache holds the compiled kernels, one zstd frame per object, and its kernel objects ("NVuc") name
the SPIR-V entry point and carry the SASS as a plain code section, which CUDA's nvdisasm reads.

  # on the GPU host: run anything with a fresh driver cache
  __GL_SHADER_DISK_CACHE_PATH=/tmp/nvc __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 node dist/bench/...
  python3 bench/sass.py extract /tmp/nvc out/        # needs libzstd.so.1 (any Debian/Ubuntu)
  python3 bench/sass.py disasm out/ [--arch=SM90]    # needs CUDA's nvdisasm; writes out/<kernel>.sass
  python3 bench/sass.py summary out/ [--json=F]      # instruction mix of each kernel and its hottest loop
"""
import ctypes
import ctypes.util
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
NVUC_MAGIC = b"NVDANVVMNVuc"
# Offsets inside an NVuc object (driver 580, read from the objects themselves): the first section
# entry is the code section, (type u32 = 1, size u32, file offset u32) at 0x48.
CODE_ENTRY = 0x48
NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_/]{2,200}")


def libzstd():
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_findFrameCompressedSize.restype = ctypes.c_size_t
    lib.ZSTD_findFrameCompressedSize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    return lib


def objects(lib, blob):
    """The contents of a cache file's zstd frames, in order. Entry headers sit between frames, so a
    frame is tried at every magic; one that is not (the magic inside other bytes) fails to decode."""
    base = ctypes.cast(ctypes.c_char_p(blob), ctypes.c_void_p).value
    at = blob.find(ZSTD_MAGIC)
    while at >= 0:
        src, avail = base + at, len(blob) - at
        n = lib.ZSTD_findFrameCompressedSize(src, avail)
        size = lib.ZSTD_getFrameContentSize(src, avail)
        if not lib.ZSTD_isError(n) and size < 2**64 - 2:  # else not a frame, or its size unknown
            out = ctypes.create_string_buffer(size)
            got = lib.ZSTD_decompress(out, size, src, n)
            if not lib.ZSTD_isError(got):
                yield out.raw[:got]
        at = blob.find(ZSTD_MAGIC, at + 1)


def kernel_of(obj):
    """(entry-point name, code bytes) of an NVuc kernel object, or None for other objects."""
    if not obj.startswith(NVUC_MAGIC) or len(obj) < CODE_ENTRY + 12:
        return None
    kind, size, offset = struct.unpack_from("<III", obj, CODE_ENTRY)
    if kind != 1 or offset + size > len(obj):
        return None
    # The section can open with an 8-byte word before the first instruction; checked rather than
    # assumed: a SASS word ends in its scheduling bits (byte 14 mostly 0x0e/0x0f, byte 15 zero),
    # and at the wrong start those bytes are opcode bits of the next word instead.
    def plausible(i):
        return obj[i + 15] == 0 and obj[i + 14] in (0x0C, 0x0D, 0x0E, 0x0F, 0x1F, 0x2E, 0x3E, 0x4E)

    start = max((0, 8), key=lambda s: sum(plausible(i) for i in range(offset + s, offset + size - 15, 16)))
    names = NAME.findall(obj[offset + size:]) or NAME.findall(obj)
    name = next((n.decode() for n in names if n != NVUC_MAGIC), "unnamed")
    code = obj[offset + start:offset + size]
    return name, code[:len(code) // 16 * 16]


def extract(cache_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    found, lib = 0, libzstd()
    for path in sorted(glob.glob(os.path.join(cache_dir, "**", "*.bin"), recursive=True)):
        for obj in objects(lib, open(path, "rb").read()):
            k = kernel_of(obj)
            if k is None:
                continue
            name, code = k
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
            open(os.path.join(out_dir, safe + ".code"), "wb").write(code)
            print(f"{safe}: {len(code)} bytes of code")
            found += 1
    if not found:
        sys.exit(f"sass.py extract: no kernel objects under {cache_dir}")


def disasm(out_dir, arch):
    tool = shutil.which("nvdisasm") or "/usr/local/cuda/bin/nvdisasm"
    for code in sorted(glob.glob(os.path.join(out_dir, "*.code"))):
        name = os.path.basename(code)[:-5]
        res = subprocess.run([tool, "-b", arch, code], capture_output=True, text=True, timeout=30)
        if res.returncode != 0:
            print(f"{name}: nvdisasm failed: {res.stderr.strip()[:300]}")
            continue
        open(code[:-5] + ".sass", "w").write(res.stdout)
        print(f"{name}.sass: {res.stdout.count(';')} instructions")


LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def parse(sass):
    """[(address, opcode without its modifiers, operands)] of a disassembly."""
    return [(int(m.group(1), 16), m.group(3).split(".")[0], m.group(4).strip()) for m in LINE.finditer(sass)]


def mix(instrs):
    counts = {}
    for _, op, _ in instrs:
        counts[op] = counts.get(op, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def loops(instrs):
    """Backward branches as (start, end) address ranges: the loops of the kernel."""
    out = []
    for addr, op, args in instrs:
        m = re.search(r"0x([0-9a-f]+)", args)
        if op == "BRA" and m and int(m.group(1), 16) <= addr:
            out.append((int(m.group(1), 16), addr))
    return out


MATH = ("FFMA", "HMMA", "HFMA2", "FMUL", "FADD")


def hottest_loop(instrs):
    """The innermost loop (one that holds no other) with the most math instructions, or None."""
    spans = loops(instrs)
    inner = [(lo, hi) for lo, hi in spans if not any((lo, hi) != o and lo <= o[0] and o[1] <= hi for o in spans)]
    best = None
    for lo, hi in inner:
        body = [i for i in instrs if lo <= i[0] <= hi]
        math = sum(1 for i in body if i[1] in MATH)
        if math and (best is None or math > best[0]):
            best = (math, lo, hi, body)
    return best


def summary(out_dir, json_path):
    rows = []
    for sass in sorted(glob.glob(os.path.join(out_dir, "*.sass"))):
        instrs = parse(open(sass).read())
        row = {"kernel": os.path.basename(sass)[:-5], "instructions": len(instrs), "mix": mix(instrs)}
        hot = hottest_loop(instrs)
        if hot:
            math, lo, hi, body = hot
            row["loop"] = {"start": lo, "end": hi, "instructions": len(body), "math": math, "mix": mix(body)}
        rows.append(row)
        print(f"== {row['kernel']}: {len(instrs)} instructions")
        print("   whole: " + " ".join(f"{k}:{v}" for k, v in list(row["mix"].items())[:14]))
        if hot:
            print(f"   loop 0x{lo:x}-0x{hi:x} ({len(body)}, {math / len(body):.0%} math): " + " ".join(f"{k}:{v}" for k, v in list(row["loop"]["mix"].items())[:16]))
    if json_path:
        json.dump(rows, open(json_path, "w"), indent=1)


def main(argv):
    opts = {a.split("=")[0][2:]: a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a}
    args = [a for a in argv if not a.startswith("--")]
    if len(args) == 3 and args[0] == "extract":
        extract(args[1], args[2])
    elif len(args) == 2 and args[0] == "disasm":
        disasm(args[1], opts.get("arch", "SM90"))
    elif len(args) == 2 and args[0] == "summary":
        summary(args[1], opts.get("json"))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
