//! Where the VkPipelineCache starts from, and the seeds shipped in the package.
//!
//! A fresh machine has no per-device cache file (cache_file.rs: keyed by the device UUID, which
//! names one physical GPU), so its first step would compile every pipeline in the driver. A seed
//! is a cache exported on another machine with the same GPU model and driver build (`helios
//! warmup --export-pipeline-seed=DIR`), named `<vendorID>-<deviceID>-<pipelineCacheUUID>.bin`
//! (hex; the ids at least 4 digits, the UUID 32): the fields of the Vulkan pipeline-cache header
//! that say which driver build can use the data. It is HELIOSPC-wrapped like the per-device file,
//! so truncation and corruption are detected, and the payload's own header is checked against the
//! device before the driver sees it. The seed is only a starting point: the per-device file,
//! saved as pipelines arrive, takes over at the next init.

use std::path::{Path, PathBuf};

use crate::error::{HeliosError, HeliosResult};
use crate::runtime::cache_file;

/// The largest seed read (or exported): a driver's cache of every Helios kernel is a few MiB.
pub const MAX_SEED_BYTES: u64 = 256 << 20;

/// VK_PIPELINE_CACHE_HEADER_VERSION_ONE, and the size of its header (4 u32 + a 16-byte UUID).
const HEADER_VERSION_ONE: u32 = 1;
const HEADER_BYTES: usize = 32;

/// The fields of a VkPipelineCacheHeaderVersionOne that say which devices and driver builds
/// can use the cache (`VkPhysicalDeviceProperties` vendorID, deviceID, pipelineCacheUUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheKey {
    pub vendor_id: u32,
    pub device_id: u32,
    pub uuid: [u8; 16],
}

/// Where the device's pipeline cache started from (`DeviceInfo.pipelineCacheSource`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CacheSource {
    /// This device's own cache file in the cache directory.
    Own,
    /// A shipped seed for this GPU model and driver build.
    Seed,
    #[default]
    Empty,
}

impl CacheSource {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheSource::Own => "own",
            CacheSource::Seed => "seed",
            CacheSource::Empty => "empty",
        }
    }
}

impl CacheKey {
    /// The key a pipeline-cache payload's header names (its fields are little-endian whatever
    /// the host), or why it has no usable VERSION_ONE header.
    pub fn parse(payload: &[u8]) -> Result<CacheKey, String> {
        let u32_at = |at: usize| payload.get(at..at + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
        let (Some(size), Some(version), Some(vendor_id), Some(device_id), Some(uuid)) =
            (u32_at(0), u32_at(4), u32_at(8), u32_at(12), payload.get(16..HEADER_BYTES))
        else {
            return Err(format!("{} bytes, shorter than the {HEADER_BYTES}-byte Vulkan header", payload.len()));
        };
        if version != HEADER_VERSION_ONE {
            return Err(format!("header version {version}, not {HEADER_VERSION_ONE}"));
        }
        if (size as usize) < HEADER_BYTES || size as usize > payload.len() {
            return Err(format!("header size {size} outside {HEADER_BYTES}..={}", payload.len()));
        }
        let uuid = uuid.try_into().map_err(|_| "short UUID".to_string())?;
        Ok(CacheKey { vendor_id, device_id, uuid })
    }

    /// The seed's file name for this key.
    pub fn file_name(&self) -> String {
        let uuid: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!("{:04x}-{:04x}-{uuid}.bin", self.vendor_id, self.device_id)
    }
}

/// The payload if the file decodes and its header names `key`. Missing file or another key:
/// silent; unreadable (a symlink, FIFO, over the cap) or corrupt: one warning on stderr.
fn load_checked(path: &Path, cap: u64, key: &CacheKey, what: &str) -> Option<Vec<u8>> {
    let bytes = match cache_file::read_regular(path, cap + cache_file::HEADER as u64) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            eprintln!("helios: ignoring {what} {} ({e})", path.display());
            return None;
        }
    };
    let checked = cache_file::decode(&bytes).and_then(|p| CacheKey::parse(p).map(|k| (p, k)));
    match checked {
        Ok((payload, k)) if k == *key => Some(payload.to_vec()),
        Ok(_) => None,
        Err(why) => {
            eprintln!("helios: ignoring corrupt {what} {} ({why})", path.display());
            None
        }
    }
}

/// The initial data of the device's VkPipelineCache and where it came from: the device's own
/// file (`own`) when it is usable, else the seed for `key` in `seed_dir`, else nothing.
pub fn initial_data(own: Option<&Path>, seed_dir: Option<&Path>, key: &CacheKey) -> (Vec<u8>, CacheSource) {
    if let Some(p) = own.and_then(|p| load_checked(p, cache_file::MAX_PIPELINE_CACHE_BYTES, key, "pipeline cache")) {
        return (p, CacheSource::Own);
    }
    let seed = seed_dir.and_then(|d| load_checked(&d.join(key.file_name()), MAX_SEED_BYTES, key, "pipeline-cache seed"));
    match seed {
        Some(p) => (p, CacheSource::Seed),
        None => (Vec::new(), CacheSource::Empty),
    }
}

/// Writes `payload` (vkGetPipelineCacheData) as a seed in `dir`, named by its own header;
/// returns the file's path. The file is world-readable (it ships in images and packages).
pub fn export(dir: &Path, payload: &[u8]) -> HeliosResult<PathBuf> {
    let key = CacheKey::parse(payload)
        .map_err(|why| HeliosError::internal(format!("the driver's pipeline-cache data has no usable header ({why})")))?;
    if payload.len() as u64 > MAX_SEED_BYTES {
        return Err(HeliosError::out_of_range(format!(
            "the pipeline cache holds {} bytes, more than a seed may ({MAX_SEED_BYTES})",
            payload.len()
        )));
    }
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => return Err(HeliosError::invalid_argument(format!("{} is not a directory", dir.display()))),
        _ => {}
    }
    let path = dir.join(key.file_name());
    cache_file::write_atomic_mode(&path, &cache_file::encode(payload), 0o644)
        .map_err(|e| HeliosError::invalid_argument(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: CacheKey = CacheKey { vendor_id: 0x10de, device_id: 0x2335, uuid: [0xa5; 16] };

    fn payload(size: u32, version: u32, key: &CacheKey, extra: usize) -> Vec<u8> {
        let mut p = Vec::new();
        for w in [size, version, key.vendor_id, key.device_id] {
            p.extend_from_slice(&w.to_le_bytes());
        }
        p.extend_from_slice(&key.uuid);
        p.extend((0..extra).map(|i| (i * 13 % 251) as u8));
        p
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("helios-seed-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn header_parsing() {
        assert_eq!(CacheKey::parse(&payload(32, 1, &KEY, 100)), Ok(KEY));
        assert_eq!(CacheKey::parse(&payload(48, 1, &KEY, 16)), Ok(KEY), "a longer header is allowed");
        let full = payload(32, 1, &KEY, 0);
        for n in [0, 4, 16, 31] {
            assert!(CacheKey::parse(&full[..n]).unwrap_err().contains("shorter"), "{n} bytes");
        }
        assert!(CacheKey::parse(&payload(32, 2, &KEY, 8)).unwrap_err().contains("version 2"));
        assert!(CacheKey::parse(&payload(32, 1000298001, &KEY, 8)).is_err(), "the safety-critical header is another format");
        assert!(CacheKey::parse(&payload(16, 1, &KEY, 8)).unwrap_err().contains("header size 16"));
        assert!(CacheKey::parse(&payload(64, 1, &KEY, 8)).unwrap_err().contains("header size 64"));
        let other = CacheKey { device_id: 0x2330, ..KEY };
        assert_ne!(CacheKey::parse(&payload(32, 1, &other, 8)), Ok(KEY));
        let newer = CacheKey { uuid: [0xa6; 16], ..KEY };
        assert_ne!(CacheKey::parse(&payload(32, 1, &newer, 8)), Ok(KEY));
    }

    #[test]
    fn file_names() {
        assert_eq!(KEY.file_name(), format!("10de-2335-{}.bin", "a5".repeat(16)));
        let mesa = CacheKey { vendor_id: 0x10005, device_id: 0, uuid: [0; 16] };
        assert_eq!(mesa.file_name(), format!("10005-0000-{}.bin", "0".repeat(32)));
    }

    #[test]
    fn own_file_then_seed_then_empty() {
        let dir = temp_dir("sources");
        let seeds = dir.join("seeds");
        let own = dir.join("own.bin");
        let seed = payload(32, 1, &KEY, 40);
        assert_eq!(initial_data(Some(&own), Some(&seeds), &KEY), (Vec::new(), CacheSource::Empty), "nothing there");
        let path = export(&seeds, &seed).unwrap();
        assert_eq!(path, seeds.join(KEY.file_name()));
        assert_eq!(initial_data(Some(&own), Some(&seeds), &KEY), (seed.clone(), CacheSource::Seed));
        assert_eq!(initial_data(None, Some(&seeds), &KEY), (seed.clone(), CacheSource::Seed), "cache dir off");
        assert_eq!(initial_data(Some(&own), None, &KEY).1, CacheSource::Empty, "seeding off");
        let mine = payload(32, 1, &KEY, 70);
        cache_file::save(&own, &mine);
        assert_eq!(initial_data(Some(&own), Some(&seeds), &KEY), (mine, CacheSource::Own));
        // an own file of another driver build is unusable: the seed still serves
        cache_file::save(&own, &payload(32, 1, &CacheKey { uuid: [1; 16], ..KEY }, 70));
        assert_eq!(initial_data(Some(&own), Some(&seeds), &KEY).1, CacheSource::Seed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn mismatched_corrupt_and_unsafe_seeds_are_ignored() {
        let dir = temp_dir("bad");
        let file = dir.join(KEY.file_name());
        let write = |bytes: &[u8]| {
            let _ = std::fs::remove_file(&file);
            cache_file::write_atomic(&file, bytes).unwrap();
        };
        let seed = |p: &Path| initial_data(None, Some(p), &KEY).1;
        // a seed named for this device whose header names another device or build
        for other in [CacheKey { device_id: 1, ..KEY }, CacheKey { vendor_id: 0x1002, ..KEY }, CacheKey { uuid: [2; 16], ..KEY }] {
            write(&cache_file::encode(&payload(32, 1, &other, 8)));
            assert_eq!(seed(&dir), CacheSource::Empty, "{other:?}");
        }
        let good = cache_file::encode(&payload(32, 1, &KEY, 64));
        write(&good);
        assert_eq!(seed(&dir), CacheSource::Seed, "the control: the same file with this device's key");
        write(&good[..good.len() - 3]);
        assert_eq!(seed(&dir), CacheSource::Empty, "truncated");
        let mut flipped = good.clone();
        flipped[40] ^= 4;
        write(&flipped);
        assert_eq!(seed(&dir), CacheSource::Empty, "corrupt");
        write(&cache_file::encode(&payload(32, 1, &KEY, 0)[..20]));
        assert_eq!(seed(&dir), CacheSource::Empty, "checksum fine, Vulkan header short");
        let elsewhere = dir.join("elsewhere.bin");
        cache_file::write_atomic(&elsewhere, &good).unwrap();
        let _ = std::fs::remove_file(&file);
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert_eq!(seed(&dir), CacheSource::Empty, "a symlink is not followed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn export_checks_the_payload_and_the_directory() {
        let dir = temp_dir("export");
        assert_eq!(export(&dir, b"short").unwrap_err().code, crate::error::ErrorCode::Internal);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let err = export(&file, &payload(32, 1, &KEY, 8)).unwrap_err();
        assert_eq!(err.code, crate::error::ErrorCode::InvalidArgument);
        assert!(err.message.contains("not a directory"), "{}", err.message);
        let path = export(&dir.join("new/sub"), &payload(32, 1, &KEY, 8)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
