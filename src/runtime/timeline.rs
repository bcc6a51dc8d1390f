//! Timeline points: a position on the compute and transfer timelines. A resource's last use
//! is a point; it may be reused or freed once both semaphores have reached it.

/// Values on the compute and transfer timeline semaphores (0 = nothing pending there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Point {
    pub compute: u64,
    pub transfer: u64,
}

impl Point {
    pub const ZERO: Point = Point { compute: 0, transfer: 0 };

    pub fn compute(v: u64) -> Point {
        Point { compute: v, transfer: 0 }
    }

    pub fn transfer(v: u64) -> Point {
        Point { compute: 0, transfer: v }
    }

    /// The later of two points on each timeline.
    pub fn max(self, o: Point) -> Point {
        Point { compute: self.compute.max(o.compute), transfer: self.transfer.max(o.transfer) }
    }

    /// Whether `completed` (the semaphore counters) has reached this point.
    pub fn reached_by(self, completed: Point) -> bool {
        self.compute <= completed.compute && self.transfer <= completed.transfer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reached_needs_both_timelines() {
        let p = Point { compute: 5, transfer: 2 };
        assert!(p.reached_by(Point { compute: 5, transfer: 2 }));
        assert!(!p.reached_by(Point { compute: 4, transfer: 9 }));
        assert!(!p.reached_by(Point { compute: 9, transfer: 1 }));
        assert!(Point::ZERO.reached_by(Point::ZERO));
        assert_eq!(p.max(Point::compute(7)), Point { compute: 7, transfer: 2 });
    }
}
