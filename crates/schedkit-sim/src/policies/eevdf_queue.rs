//! The `eevdf` model's per-core timeline: waiting and delayed threads ordered by
//! `(deadline, ticket, slot)`, the order of the kernel's rbtree (`__entity_less`: an equal
//! deadline goes to the right).
//!
//! Why not a plain `BTreeSet`: a profile of `schedkit bench sim` at 8 cores (1,000 nice-0
//! threads, `perf record -e cpu-clock --call-graph dwarf`) spent 26 % of the run in the set's
//! `insert` and `pop_first`. With equal weights every renewed deadline is the latest of the
//! queue, so nearly every insert walks the right edge of the B-tree comparing against every
//! key of each node on the way. Here a key greater than every key queued is appended to a
//! sorted `VecDeque` (`tail`) in O(1), and the earliest is taken from its front in O(1)
//! when the tree part is empty. Keys that land before the tail's end go to the `BTreeSet`
//! (`head`); an insert between the tail's first and last keys first moves the whole tail into
//! the set (each key moves at most once per insert, so O(log n) amortised), so the order,
//! and every result of the model, is the set's.
//!
//! Invariant: every key of `head` is less than every key of `tail`; `tail` is sorted.

use schedkit_core::trace::Slot;
use std::collections::{BTreeSet, VecDeque};

pub(super) type Key = (i64, u64, Slot);

#[derive(Default)]
pub(super) struct Timeline {
    head: BTreeSet<Key>,
    tail: VecDeque<Key>,
}

impl Timeline {
    pub(super) fn insert(&mut self, k: Key) {
        match self.tail.back() {
            Some(&b) if k > b => self.tail.push_back(k),
            Some(_) if self.tail.front().is_some_and(|&f| k > f) => {
                // Between the tail's ends: the tail joins the set (see the module docs).
                self.head.extend(self.tail.drain(..));
                self.head.insert(k);
            }
            Some(_) => {
                self.head.insert(k);
            }
            None if self.head.last().is_none_or(|&l| k > l) => self.tail.push_back(k),
            None => {
                self.head.insert(k);
            }
        }
    }

    pub(super) fn first(&self) -> Option<&Key> {
        self.head.first().or_else(|| self.tail.front())
    }

    pub(super) fn pop_first(&mut self) -> Option<Key> {
        self.head.pop_first().or_else(|| self.tail.pop_front())
    }

    /// Removes `k`, which must be queued.
    pub(super) fn remove(&mut self, k: &Key) {
        if self.tail.front().is_some_and(|f| k >= f) {
            if let Ok(i) = self.tail.binary_search(k) {
                self.tail.remove(i);
            }
        } else {
            self.head.remove(k);
        }
    }

    /// In order, earliest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Key> + '_ {
        self.head.iter().chain(self.tail.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_keeps_the_order_of_a_set() {
        // Appends, inserts before the tail, between its ends (the tail joins the set),
        // removals from both parts and pops, checked against a BTreeSet after each step.
        let mut t = Timeline::default();
        let mut s = BTreeSet::new();
        let mut x: u64 = 12345;
        for step in 0..5000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let op = (x >> 60) % 4;
            let d = if op == 0 {
                // Mostly appends: a deadline past every one queued.
                (step * 10) as i64
            } else {
                ((x >> 20) % 50_000) as i64
            };
            let k = (d, step, (x % 7) as Slot);
            match (op, s.first().copied()) {
                (3, Some(f)) if step % 2 == 0 => {
                    assert_eq!(t.pop_first(), Some(f));
                    s.remove(&f);
                }
                (3, Some(_)) => {
                    let mid = *s.iter().nth(s.len() / 2).unwrap();
                    t.remove(&mid);
                    s.remove(&mid);
                }
                _ => {
                    t.insert(k);
                    s.insert(k);
                }
            }
            assert!(t.iter().copied().eq(s.iter().copied()), "step {step}");
            assert_eq!(t.first(), s.first());
        }
    }
}
