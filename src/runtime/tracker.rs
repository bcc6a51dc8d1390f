//! Hazard tracking from declared access: decides where a barrier is needed and what kind.
//!
//! A monotonic epoch counts barriers. Each buffer remembers the epoch of its last read and
//! last write. An access conflicts with work since the last barrier when it reads or writes
//! a buffer written in the current epoch (RAW, WAW) or writes a buffer read in the current
//! epoch (WAR). A conflict costs one barrier (epoch + 1); independent work costs none.
//! A barrier orders everything before it, so it must also make every write of the epoch
//! visible: when the epoch has no writes at all, a WAR needs only an execution dependency
//! (no cache flush or invalidate). The epoch's written buffers are listed for barriers
//! that name buffers (`HELIOS_BARRIER=buffer`).
//! State survives batch boundaries: an earlier submission's write stays pending until a
//! barrier, and a barrier in a later command buffer on the same queue covers it.

/// Per-buffer access epochs; 0 means "never accessed".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessState {
    pub read_epoch: u64,
    pub write_epoch: u64,
}

/// What a conflicting access needs; ordered from cheapest to dearest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hazard {
    None,
    /// Only write-after-read and no write pending in the epoch: an execution dependency.
    Execution,
    /// Read-after-write or write-after-write (or a WAR while writes are pending): execution
    /// plus memory dependency.
    Memory,
}

#[derive(Debug)]
pub struct Tracker {
    epoch: u64,
    /// Resources written in the current epoch (deduplicated by their `write_epoch`).
    written: Vec<u32>,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker { epoch: 1, written: Vec::new() }
    }
}

impl Tracker {
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether an access of `state` (reading and/or writing) conflicts with unbarriered work.
    pub fn conflicts(&self, state: &AccessState, reads: bool, writes: bool) -> bool {
        self.hazard(state, reads, writes) != Hazard::None
    }

    /// The dependency an access of `state` needs before it may run.
    pub fn hazard(&self, state: &AccessState, reads: bool, writes: bool) -> Hazard {
        if (reads || writes) && state.write_epoch == self.epoch {
            Hazard::Memory
        } else if writes && state.read_epoch == self.epoch {
            if self.written.is_empty() {
                Hazard::Execution
            } else {
                Hazard::Memory
            }
        } else {
            Hazard::None
        }
    }

    /// Resources written since the last barrier (what a memory barrier must cover).
    pub fn written(&self) -> &[u32] {
        &self.written
    }

    /// Records that a barrier was emitted: everything before it is ordered before what follows.
    pub fn barrier(&mut self) {
        self.epoch += 1;
        self.written.clear();
    }

    /// Marks resource `id`'s access as done in the current epoch (call after deciding on the barrier).
    pub fn record(&mut self, id: u32, state: &mut AccessState, reads: bool, writes: bool) {
        if reads {
            state.read_epoch = self.epoch;
        }
        if writes {
            if state.write_epoch != self.epoch {
                self.written.push(id);
            }
            state.write_epoch = self.epoch;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sim {
        t: Tracker,
        bufs: Vec<AccessState>,
        barriers: usize,
    }

    impl Sim {
        fn new(n: usize) -> Self {
            Sim { t: Tracker::default(), bufs: vec![AccessState::default(); n], barriers: 0 }
        }
        /// One dispatch: `(buffer, reads, writes)` per binding; returns whether it needed a barrier.
        fn dispatch(&mut self, access: &[(usize, bool, bool)]) -> bool {
            let hazard = access.iter().any(|&(b, r, w)| self.t.conflicts(&self.bufs[b], r, w));
            if hazard {
                self.t.barrier();
                self.barriers += 1;
            }
            for &(b, r, w) in access {
                self.t.record(b as u32, &mut self.bufs[b], r, w);
            }
            hazard
        }
    }

    #[test]
    fn read_after_write_needs_a_barrier() {
        let mut s = Sim::new(2);
        assert!(!s.dispatch(&[(0, false, true)]));
        assert!(s.dispatch(&[(0, true, false), (1, false, true)]));
    }

    #[test]
    fn write_after_write_needs_a_barrier() {
        let mut s = Sim::new(1);
        assert!(!s.dispatch(&[(0, false, true)]));
        assert!(s.dispatch(&[(0, false, true)]));
    }

    #[test]
    fn write_after_read_needs_a_barrier() {
        let mut s = Sim::new(2);
        assert!(!s.dispatch(&[(0, true, false), (1, false, true)]));
        assert!(s.dispatch(&[(0, false, true)]), "WAR on buffer 0 must be caught");
    }

    #[test]
    fn independent_dispatches_need_none() {
        let mut s = Sim::new(6);
        assert!(!s.dispatch(&[(0, true, false), (1, false, true)]));
        assert!(!s.dispatch(&[(2, true, false), (3, false, true)]));
        assert!(!s.dispatch(&[(0, true, false), (4, false, true)]), "read after read is no hazard");
        assert_eq!(s.barriers, 0);
    }

    #[test]
    fn one_barrier_resolves_everything_before_it() {
        let mut s = Sim::new(3);
        s.dispatch(&[(0, false, true)]);
        s.dispatch(&[(1, false, true)]);
        assert!(s.dispatch(&[(0, true, false), (2, false, true)]));
        assert!(!s.dispatch(&[(1, true, false)]), "the barrier already covered buffer 1's write");
    }

    #[test]
    fn chain_of_dependent_dispatches_gets_one_barrier_each() {
        let mut s = Sim::new(2);
        s.dispatch(&[(0, false, true)]);
        for i in 0..1000 {
            let (src, dst) = if i % 2 == 0 { (0, 1) } else { (1, 0) };
            assert!(s.dispatch(&[(src, true, false), (dst, false, true)]));
        }
        assert_eq!(s.barriers, 1000);
    }

    #[test]
    fn war_alone_needs_only_an_execution_dependency() {
        let mut s = Sim::new(3);
        s.t.barrier();
        s.dispatch(&[(0, true, false)]);
        assert_eq!(s.t.hazard(&s.bufs[0], false, true), Hazard::Execution);
        s.dispatch(&[(1, false, true)]);
        assert_eq!(s.t.hazard(&s.bufs[0], false, true), Hazard::Memory, "a pending write must still become visible");
        assert_eq!(s.t.written(), &[1]);
        assert_eq!(s.t.hazard(&s.bufs[2], true, true), Hazard::None);
    }

    #[test]
    fn written_list_is_deduplicated_and_cleared() {
        let mut s = Sim::new(2);
        s.dispatch(&[(0, false, true), (0, false, true), (1, true, true)]);
        assert_eq!(s.t.written(), &[0, 1]);
        s.t.barrier();
        assert!(s.t.written().is_empty());
    }

    #[test]
    fn readwrite_binding_aliasing_a_read_binding() {
        let mut s = Sim::new(1);
        s.dispatch(&[(0, true, false)]);
        assert!(s.dispatch(&[(0, true, true)]));
        assert!(s.dispatch(&[(0, true, false)]));
    }
}
