//! The on-disk VkPipelineCache: one file per device UUID + driver version, wrapped in our
//! own header (magic, version, length, FNV-1a checksum) so a truncated or corrupt file is
//! detected and ignored (with a warning) instead of being handed to the driver.

use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"HELIOSPC";
const VERSION: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 8;

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

/// Reads the cache payload; a missing file is silent, a corrupt one warns on stderr.
pub fn load(path: &Path) -> Vec<u8> {
    let Ok(bytes) = std::fs::read(path) else { return Vec::new() };
    match decode(&bytes) {
        Ok(p) => p.to_vec(),
        Err(why) => {
            eprintln!("helios: ignoring corrupt pipeline cache {} ({why})", path.display());
            Vec::new()
        }
    }
}

/// Writes atomically (temp file + rename); failures only warn.
pub fn save(path: &Path, payload: &[u8]) {
    if payload.is_empty() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let result = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&tmp, encode(payload)))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
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
        assert_eq!(load(&path), b"hello");
        std::fs::write(&path, b"HELIOSPC not really").unwrap();
        assert!(load(&path).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
