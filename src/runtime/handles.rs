//! Generational handles that cross to JS as plain numbers below 2^53 (exact in a JS number).
//!
//! Layout (53 bits): `kind` (2 bits) << 51 | `epoch` (12 bits) << 39 | `generation` (16 bits)
//! << 23 | `slot` (23 bits). The epoch names the device instance (one per successful
//! `initDevice`), so a handle from before `destroy()` can never alias an object of the next
//! device; a slot's generation increases on every free, so a destroyed, stale or wrong-kind
//! handle is always detected; a slot whose generation would wrap is retired instead of reused.

use crate::error::{HeliosError, HeliosResult};

const SLOT_BITS: u32 = 23;
const GEN_BITS: u32 = 16;
const EPOCH_BITS: u32 = 12;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
const EPOCH_SHIFT: u32 = SLOT_BITS + GEN_BITS;
const KIND_SHIFT: u32 = EPOCH_SHIFT + EPOCH_BITS;

/// The largest device epoch a handle can carry: `initDevice` refuses to create a device past it.
pub const MAX_EPOCH: u32 = EPOCH_MASK as u32;

/// What a handle refers to; part of the handle so kinds can never be confused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Buffer = 1,
    Pipeline = 2,
    Capture = 3,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Buffer => "buffer",
            Kind::Pipeline => "pipeline",
            Kind::Capture => "capture",
        }
    }
    fn from_bits(b: u64) -> Option<Kind> {
        match b {
            1 => Some(Kind::Buffer),
            2 => Some(Kind::Pipeline),
            3 => Some(Kind::Capture),
            _ => None,
        }
    }
}

/// A decoded handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    pub kind: Kind,
    pub epoch: u32,
    pub slot: u32,
    pub generation: u32,
}

impl Handle {
    pub fn to_f64(self) -> f64 {
        let bits = ((self.kind as u64) << KIND_SHIFT)
            | ((self.epoch as u64 & EPOCH_MASK) << EPOCH_SHIFT)
            | ((self.generation as u64 & GEN_MASK) << SLOT_BITS)
            | (self.slot as u64 & SLOT_MASK);
        bits as f64
    }

    /// Decodes a JS number, checking it is an integer handle of `kind`.
    pub fn from_f64(value: f64, kind: Kind) -> HeliosResult<Handle> {
        let bad = || HeliosError::invalid_handle(format!("{value} is not a {} handle", kind.name()));
        if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0 && value < 9007199254740992.0) {
            return Err(bad());
        }
        let bits = value as u64;
        let found = Kind::from_bits(bits >> KIND_SHIFT).ok_or_else(bad)?;
        if found != kind {
            return Err(HeliosError::invalid_handle(format!(
                "handle {value} is a {} handle, expected a {} handle",
                found.name(),
                kind.name()
            )));
        }
        Ok(Handle {
            kind,
            epoch: ((bits >> EPOCH_SHIFT) & EPOCH_MASK) as u32,
            slot: (bits & SLOT_MASK) as u32,
            generation: ((bits >> SLOT_BITS) & GEN_MASK) as u32,
        })
    }
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A slot map of `T` addressed by generational handles of one kind and one device epoch.
pub struct HandleTable<T> {
    kind: Kind,
    epoch: u32,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> HandleTable<T> {
    /// `epoch` (1..=MAX_EPOCH) is the device instance whose objects this table holds.
    pub fn new(kind: Kind, epoch: u32) -> Self {
        HandleTable { kind, epoch: epoch & MAX_EPOCH, slots: Vec::new(), free: Vec::new(), live: 0 }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn insert(&mut self, value: T) -> HeliosResult<f64> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                if self.slots.len() as u64 > SLOT_MASK {
                    return Err(HeliosError::out_of_memory(format!("too many live {} handles", self.kind.name())));
                }
                self.slots.push(Slot { generation: 0, value: None });
                (self.slots.len() - 1) as u32
            }
        };
        let entry = &mut self.slots[slot as usize];
        entry.value = Some(value);
        self.live += 1;
        Ok(Handle { kind: self.kind, epoch: self.epoch, slot, generation: entry.generation }.to_f64())
    }

    fn locate(&self, value: f64) -> HeliosResult<usize> {
        let h = Handle::from_f64(value, self.kind)?;
        if h.epoch != self.epoch {
            return Err(HeliosError::invalid_handle(format!(
                "{} handle {value} belongs to device instance {} (destroyed); the current device is instance {}",
                self.kind.name(),
                h.epoch,
                self.epoch
            )));
        }
        let stale = || HeliosError::invalid_handle(format!("{} handle {value} is stale (destroyed or released)", self.kind.name()));
        match self.slots.get(h.slot as usize) {
            Some(s) if s.generation == h.generation && s.value.is_some() => Ok(h.slot as usize),
            Some(_) => Err(stale()),
            None => Err(HeliosError::invalid_handle(format!("unknown {} handle {value}", self.kind.name()))),
        }
    }

    pub fn get(&self, value: f64) -> HeliosResult<&T> {
        let i = self.locate(value)?;
        self.slots[i].value.as_ref().ok_or_else(|| HeliosError::internal("slot emptied".to_string()))
    }

    pub fn get_mut(&mut self, value: f64) -> HeliosResult<&mut T> {
        let i = self.locate(value)?;
        self.slots[i].value.as_mut().ok_or_else(|| HeliosError::internal("slot emptied".to_string()))
    }

    /// Removes the value; the handle (and every copy of it) becomes stale.
    pub fn remove(&mut self, value: f64) -> HeliosResult<T> {
        let i = self.locate(value)?;
        let slot = &mut self.slots[i];
        let taken = slot.value.take().ok_or_else(|| HeliosError::internal("slot emptied".to_string()))?;
        slot.generation += 1;
        if (slot.generation as u64) <= GEN_MASK {
            self.free.push(i as u32);
        }
        self.live -= 1;
        Ok(taken)
    }

    /// Takes every value (used by destroy()).
    pub fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.live);
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(v) = slot.value.take() {
                slot.generation += 1;
                if (slot.generation as u64) <= GEN_MASK {
                    self.free.push(i as u32);
                }
                out.push(v);
            }
        }
        self.live = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_and_wrong_kind_are_detected() {
        let mut t = HandleTable::new(Kind::Buffer, 1);
        let a = t.insert(1).unwrap();
        assert_eq!(*t.get(a).unwrap(), 1);
        t.remove(a).unwrap();
        let b = t.insert(2).unwrap();
        assert_ne!(a, b, "a reused slot must get a new generation");
        assert!(t.get(a).is_err());
        assert_eq!(*t.get(b).unwrap(), 2);
        let p = Handle { kind: Kind::Pipeline, epoch: 1, slot: 0, generation: 1 }.to_f64();
        let e = t.get(p).unwrap_err();
        assert!(e.message.contains("pipeline handle"), "{}", e.message);
        for bad in [-1.0, 0.5, f64::NAN, 1e300, 0.0] {
            assert!(t.get(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn churn_holds_steady() {
        let mut t = HandleTable::new(Kind::Buffer, 1);
        for i in 0..100_000 {
            let h = t.insert(i).unwrap();
            assert!(h < 9007199254740992.0);
            t.remove(h).unwrap();
        }
        // a slot retires after 2^16 uses: 100,000 cycles use two
        assert_eq!(t.slots.len(), 1 + 100_000 / (GEN_MASK as usize + 1));
        assert!(t.is_empty());
    }

    #[test]
    fn exhausted_generation_retires_the_slot() {
        let mut t = HandleTable::new(Kind::Capture, 1);
        t.slots.push(Slot { generation: GEN_MASK as u32, value: None });
        t.free.push(0);
        let h = t.insert(7).unwrap();
        t.remove(h).unwrap();
        assert!(t.free.is_empty());
        let h2 = t.insert(8).unwrap();
        assert_ne!(Handle::from_f64(h2, Kind::Capture).unwrap().slot, 0);
    }

    #[test]
    fn a_handle_of_an_earlier_device_never_aliases() {
        let mut old = HandleTable::new(Kind::Buffer, 1);
        let a = old.insert("old").unwrap();
        let mut new = HandleTable::new(Kind::Buffer, 2);
        let b = new.insert("new").unwrap();
        assert_ne!(a, b, "same slot and generation, different epoch");
        let e = new.get(a).unwrap_err();
        assert!(e.message.contains("device instance 1"), "{}", e.message);
        assert!(new.remove(a).is_err());
        assert_eq!(*new.get(b).unwrap(), "new");
    }

    #[test]
    fn the_largest_handle_is_exact_in_a_js_number() {
        let h = Handle { kind: Kind::Capture, epoch: MAX_EPOCH, slot: SLOT_MASK as u32, generation: GEN_MASK as u32 };
        let v = h.to_f64();
        assert!(v < 9007199254740992.0, "{v}");
        assert_eq!(Handle::from_f64(v, Kind::Capture).unwrap(), h);
    }
}
