//! Generational handles that cross to JS as plain numbers below 2^53.
//!
//! Layout (53 bits): `kind` (3 bits) << 50 | `generation` (26 bits) << 24 | `slot` (24 bits).
//! A slot's generation increases on every free, so a destroyed, stale or wrong-kind handle
//! is always detected; a slot whose generation would wrap is retired instead of reused.

use crate::error::{HeliosError, HeliosResult};

const SLOT_BITS: u32 = 24;
const GEN_BITS: u32 = 26;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const KIND_SHIFT: u32 = SLOT_BITS + GEN_BITS;

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
    pub slot: u32,
    pub generation: u32,
}

impl Handle {
    pub fn to_f64(self) -> f64 {
        (((self.kind as u64) << KIND_SHIFT) | ((self.generation as u64) << SLOT_BITS) | self.slot as u64) as f64
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
        Ok(Handle { kind, slot: (bits & SLOT_MASK) as u32, generation: ((bits >> SLOT_BITS) & GEN_MASK) as u32 })
    }
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A slot map of `T` addressed by generational handles of one kind.
pub struct HandleTable<T> {
    kind: Kind,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> HandleTable<T> {
    pub fn new(kind: Kind) -> Self {
        HandleTable { kind, slots: Vec::new(), free: Vec::new(), live: 0 }
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
        Ok(Handle { kind: self.kind, slot, generation: entry.generation }.to_f64())
    }

    fn locate(&self, value: f64) -> HeliosResult<usize> {
        let h = Handle::from_f64(value, self.kind)?;
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
        let mut t = HandleTable::new(Kind::Buffer);
        let a = t.insert(1).unwrap();
        assert_eq!(*t.get(a).unwrap(), 1);
        t.remove(a).unwrap();
        let b = t.insert(2).unwrap();
        assert_ne!(a, b, "a reused slot must get a new generation");
        assert!(t.get(a).is_err());
        assert_eq!(*t.get(b).unwrap(), 2);
        let p = Handle { kind: Kind::Pipeline, slot: 0, generation: 1 }.to_f64();
        let e = t.get(p).unwrap_err();
        assert!(e.message.contains("pipeline handle"), "{}", e.message);
        for bad in [-1.0, 0.5, f64::NAN, 1e300, 0.0] {
            assert!(t.get(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn churn_holds_steady() {
        let mut t = HandleTable::new(Kind::Buffer);
        for i in 0..100_000 {
            let h = t.insert(i).unwrap();
            assert!(h < 9007199254740992.0);
            t.remove(h).unwrap();
        }
        assert_eq!(t.slots.len(), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn exhausted_generation_retires_the_slot() {
        let mut t = HandleTable::new(Kind::Capture);
        t.slots.push(Slot { generation: GEN_MASK as u32, value: None });
        t.free.push(0);
        let h = t.insert(7).unwrap();
        t.remove(h).unwrap();
        assert!(t.free.is_empty());
        let h2 = t.insert(8).unwrap();
        assert_ne!(Handle::from_f64(h2, Kind::Capture).unwrap().slot, 0);
    }
}
