//! Offset bookkeeping for the staging ring (no Vulkan here): regions are handed out in
//! order and come back in order once their timeline point completed.
//!
//! A region's point is `None` while the host still needs it (an upload being filled, a
//! download not yet copied out); such a region and everything after it cannot be reclaimed.

use std::collections::VecDeque;

use crate::runtime::timeline::Point;

/// Copies are aligned so the DMA engine sees friendly offsets.
pub const ALIGN: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug)]
struct Live {
    start: u64,
    end: u64,
    point: Option<Point>,
}

#[derive(Debug)]
pub struct Ring {
    size: u64,
    head: u64,
    live: VecDeque<Live>,
}

impl Ring {
    pub fn new(size: u64) -> Ring {
        Ring { size, head: 0, live: VecDeque::new() }
    }

    pub fn capacity(&self) -> u64 {
        self.size
    }

    /// Allocates `len` bytes (held: point None), or None when the ring is full.
    pub fn alloc(&mut self, len: u64) -> Option<Region> {
        let len = len.max(1).next_multiple_of(ALIGN);
        if len > self.size {
            return None;
        }
        let start = match self.live.front() {
            None => {
                self.head = 0;
                0
            }
            Some(front) => {
                let tail = front.start;
                if self.head > tail {
                    if self.size - self.head >= len {
                        self.head
                    } else if tail >= len {
                        0
                    } else {
                        return None;
                    }
                } else if self.head < tail && tail - self.head >= len {
                    self.head
                } else {
                    return None;
                }
            }
        };
        self.head = start + len;
        self.live.push_back(Live { start, end: start + len, point: None });
        Some(Region { offset: start, len })
    }

    /// Sets the point after which the region at `offset` may be reused.
    pub fn set_point(&mut self, offset: u64, point: Point) {
        if let Some(r) = self.live.iter_mut().rev().find(|r| r.start == offset) {
            r.point = Some(point);
        }
    }

    /// Frees regions from the front whose points `completed` reached.
    pub fn reclaim(&mut self, completed: Point) {
        while let Some(front) = self.live.front() {
            match front.point {
                Some(p) if p.reached_by(completed) => {
                    self.live.pop_front();
                }
                _ => break,
            }
        }
        if self.live.is_empty() {
            self.head = 0;
        }
    }

    /// The point to wait for to free the oldest region (None: empty or still held by the host).
    pub fn oldest_point(&self) -> Option<Point> {
        self.live.front().and_then(|r| r.point)
    }

    pub fn in_use(&self) -> u64 {
        self.live.iter().map(|r| r.end - r.start).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_reclaims_in_order() {
        let mut r = Ring::new(4096);
        let a = r.alloc(1024).unwrap();
        let b = r.alloc(2048).unwrap();
        assert_eq!((a.offset, b.offset), (0, 1024));
        assert!(r.alloc(2048).is_none(), "only 1024 left at the end");
        r.set_point(a.offset, Point::compute(1));
        r.set_point(b.offset, Point::transfer(1));
        r.reclaim(Point::compute(1));
        let c = r.alloc(1024).unwrap();
        assert_eq!(c.offset, 3072);
        assert!(r.alloc(1024).is_some(), "wraps to 0 where region a was");
        assert!(r.alloc(256).is_none(), "full: head meets region b");
        r.set_point(c.offset, Point::ZERO);
        r.reclaim(Point { compute: 1, transfer: 1 });
        assert_eq!(r.in_use(), 1024);
    }

    #[test]
    fn held_regions_block_reclaim() {
        let mut r = Ring::new(1024);
        let a = r.alloc(512).unwrap();
        r.alloc(512).unwrap();
        r.reclaim(Point { compute: 99, transfer: 99 });
        assert!(r.alloc(256).is_none());
        assert_eq!(r.oldest_point(), None);
        r.set_point(a.offset, Point::ZERO);
        r.reclaim(Point::ZERO);
        assert_eq!(r.alloc(512).map(|x| x.offset), Some(0));
    }

    #[test]
    fn never_overlaps_under_random_churn() {
        let mut r = Ring::new(64 * ALIGN);
        let mut live: Vec<Region> = Vec::new();
        let mut seed = 7u64;
        for step in 0..20_000u64 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let len = ((seed >> 33) % (20 * ALIGN)) + 1;
            if let Some(reg) = r.alloc(len) {
                assert!(reg.offset + reg.len <= 64 * ALIGN);
                for o in &live {
                    assert!(reg.offset + reg.len <= o.offset || o.offset + o.len <= reg.offset, "overlap at {step}");
                }
                r.set_point(reg.offset, Point::compute(step));
                live.push(reg);
            }
            if (seed >> 7).is_multiple_of(3) {
                let done = step.saturating_sub(3);
                r.reclaim(Point::compute(done));
                let keep = r.in_use();
                while live.iter().map(|x| x.len).sum::<u64>() > keep {
                    live.remove(0);
                }
            }
        }
    }
}
