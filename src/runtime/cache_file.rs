//! The on-disk VkPipelineCache: one file per device UUID + driver version, wrapped in our
//! own header (magic, version, length, FNV-1a checksum) so a truncated or corrupt file is
//! detected and ignored (with a warning, pipeline_seed.rs) instead of being handed to the
//! driver. Shipped seeds (pipeline_seed.rs) use the same wrapper.
//!
//! The cache directory is not trusted (issue 24 item 7): files are read only when they are
//! regular files (a FIFO would block, /dev/zero never ends), never through a symlink, and only up
//! to a size cap; writes go to a fresh temp file with an unpredictable name, created exclusively
//! and never through a symlink, then renamed over the target (rename replaces a link, it does
//! not follow it). `read_regular` and `write_atomic` serve every file Helios keeps there.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest pipeline cache Helios reads back (a driver's cache for every Helios kernel is a
/// few MiB to a few hundred).
pub const MAX_PIPELINE_CACHE_BYTES: u64 = 1 << 30;

const MAGIC: &[u8; 8] = b"HELIOSPC";
const VERSION: u32 = 1;
/// Bytes of our wrapper ahead of the payload.
pub const HEADER: usize = 8 + 4 + 8 + 8;

fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub fn file_path(dir: &Path, uuid: &[u8; 16], driver_version: u32) -> PathBuf {
    let uuid: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("pipelines-{uuid}-{driver_version:08x}.bin"))
}

pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&fnv1a(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload, or why the file is unusable.
pub fn decode(file: &[u8]) -> Result<&[u8], String> {
    if file.len() < HEADER || &file[..8] != MAGIC {
        return Err("bad magic".to_string());
    }
    let word = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap_or([0; 8]));
    let version = u32::from_le_bytes(file[8..12].try_into().unwrap_or([0; 4]));
    if version != VERSION {
        return Err(format!("version {version}"));
    }
    let len = word(12) as usize;
    let payload = &file[HEADER..];
    if payload.len() != len {
        return Err(format!("length {} != {len}", payload.len()));
    }
    if fnv1a(payload) != word(20) {
        return Err("checksum mismatch".to_string());
    }
    Ok(payload)
}

/// Reads `path` if it is a regular file (not a symlink, FIFO or device) of at most `cap`
/// bytes. Opening never blocks: O_NONBLOCK keeps a FIFO from waiting for a writer.
pub fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > cap {
        return Err(std::io::Error::other(format!("{} bytes, more than the {cap}-byte cap", meta.len())));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // `take` holds the cap even if the file grows while it is read
    (&mut file).take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::other(format!("grew past the {cap}-byte cap while read")));
    }
    Ok(bytes)
}

/// A temp-file name no other process can guess ahead of time: the std hasher's per-process
/// random keys mixed with the pid, the time and a counter.
fn temp_name(target: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let name = target.file_name().map_or_else(|| "cache".into(), |n| n.to_string_lossy());
    target.with_file_name(format!(".{name}.{:016x}.tmp", h.finish()))
}

/// Writes `bytes` to `path` through a fresh temp file (O_CREAT | O_EXCL | O_NOFOLLOW, 0600) and a
/// rename, creating the parent directory; a reader sees the old file or the whole new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, 0o600)
}

/// `write_atomic` with the file's permission bits (set on the open file, whatever the umask).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = temp_name(path);
    let written = (|| {
        let mut f: File = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes atomically (see `write_atomic`); failures only warn.
pub fn save(path: &Path, payload: &[u8]) {
    if payload.is_empty() {
        return;
    }
    if let Err(e) = write_atomic(path, &encode(payload)) {
        eprintln!("helios: could not save pipeline cache {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let payload: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let file = encode(&payload);
        assert_eq!(decode(&file).unwrap(), &payload[..]);
        let mut flipped = file.clone();
        flipped[HEADER + 10] ^= 1;
        assert!(decode(&flipped).is_err());
        assert!(decode(&file[..file.len() - 1]).is_err());
        assert!(decode(b"garbage").is_err());
    }

    #[test]
    fn corrupt_file_is_ignored() {
        let dir = std::env::temp_dir().join(format!("helios-cache-test-{}", std::process::id()));
        let path = file_path(&dir, &[1; 16], 42);
        save(&path, b"hello");
        let read = || read_regular(&path, 1 << 20).unwrap();
        assert_eq!(decode(&read()).unwrap(), b"hello");
        std::fs::write(&path, b"HELIOSPC not really").unwrap();
        assert!(decode(&read()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn fifos_devices_symlinks_and_huge_files_are_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("helios-cache-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false);
        if made {
            assert!(read_regular(&fifo, 1 << 20).is_err(), "a FIFO is not read (and opening it does not block)");
        }
        assert!(read_regular(Path::new("/dev/zero"), 1 << 20).is_err());
        let big = dir.join("big");
        std::fs::write(&big, vec![7u8; 4096]).unwrap();
        assert!(read_regular(&big, 4095).is_err());
        assert_eq!(read_regular(&big, 4096).unwrap().len(), 4096);
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = dir.join("link.spv");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(read_regular(&link, 1 << 20).is_err(), "a symlink is not followed on read");
        write_atomic(&link, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep", "a write replaces the link, not its target");
        assert_eq!(read_regular(&link, 1 << 20).unwrap(), b"new");
        assert_ne!(temp_name(&link), temp_name(&link));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
