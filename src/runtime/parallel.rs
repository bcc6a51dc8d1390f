//! A small scoped parallel map (no thread pool crate): `threads` workers take items by an
//! atomic index; results come back in input order.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

pub fn map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = threads.clamp(1, items.len().max(1));
    if workers == 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                *slots[i].lock() = Some(f(item));
            });
        }
    });
    // every index below items.len() was taken by exactly one worker, which filled its slot
    slots.into_iter().filter_map(|s| s.into_inner()).collect()
}

#[cfg(test)]
mod tests {
    use super::map;

    #[test]
    fn keeps_order_and_visits_every_item_once() {
        let items: Vec<u64> = (0..1000).collect();
        for threads in [1, 2, 7, 64] {
            let out = map(&items, threads, |x| x * x + 1);
            assert_eq!(out, items.iter().map(|x| x * x + 1).collect::<Vec<_>>());
        }
        assert!(map(&Vec::<u32>::new(), 4, |x| *x).is_empty());
    }
}
