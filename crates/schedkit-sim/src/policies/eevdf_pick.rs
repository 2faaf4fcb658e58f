//! The `eevdf` model's V, eligibility and pick (`avg_vruntime`, `entity_eligible`,
//! `pick_eevdf` of `kernel/sched/fair.c`): the arithmetic stated in `eevdf.rs`'s module docs,
//! cut out of that file to keep it readable. Part of `impl Eevdf`.
//!
//! Invariant (the queue's, `eevdf.rs`): `sum_w` and `sum_wv` are the sums of `w` and
//! `w * vruntime` over the tree; the running thread is added here, flushed first.

use super::*;

impl Eevdf {
    /// Sums over the tree and the running thread (flushed).
    pub(super) fn sums(&mut self, core: usize) -> (i128, u64) {
        let rq = &self.rqs[core];
        let (mut wv, mut w) = (rq.sum_wv, rq.sum_w);
        if let Some(c) = rq.curr {
            self.flush(c);
            let e = &self.ents[c as usize];
            wv += e.weight as i128 * e.vruntime as i128;
            w += e.weight;
        }
        (wv, w)
    }

    /// V, the queue's weighted average vruntime (floored), or its last value when empty.
    pub(super) fn avg_vruntime(&mut self, core: usize) -> i64 {
        let (wv, w) = self.sums(core);
        if w > 0 {
            self.rqs[core].zero = wv.div_euclid(w as i128) as i64;
        }
        self.rqs[core].zero
    }

    pub(super) fn eligible(sums: (i128, u64), v: i64) -> bool {
        sums.0 >= v as i128 * sums.1 as i128
    }

    /// The eligible thread with the earliest deadline among the tree and `with` (the running
    /// thread, if it is still on the queue). Delayed threads found first leave the queue.
    pub(super) fn pick_eevdf(&mut self, core: usize, with: Option<Slot>) -> Option<Slot> {
        loop {
            let sums = self.sums(core);
            let curr = with.filter(|&c| Self::eligible(sums, self.ents[c as usize].vruntime));
            let elig =
                |k: &&(i64, u64, Slot)| Self::eligible(sums, self.ents[k.2 as usize].vruntime);
            // The earliest deadline is usually eligible: look at it before building an
            // iterator (which finds both ends of the tree).
            let tree = &self.rqs[core].tree;
            let found = match tree.first() {
                Some(k) if elig(&k) => Some(*k),
                Some(_) => tree.iter().skip(1).find(elig).copied(),
                None => None,
            };
            let best = match (found, curr) {
                // entity_before: the running thread wins only with a strictly earlier deadline.
                (Some(b), Some(c)) if self.ents[c as usize].deadline < b.0 => return Some(c),
                (Some(b), _) => b.2,
                (None, Some(c)) => return Some(c),
                // Nothing eligible (only after rounding): the earliest deadline.
                (None, None) => self.rqs[core].tree.first()?.2,
            };
            if self.ents[best as usize].at != At::Delayed {
                return Some(best);
            }
            self.finish_delayed(best);
        }
    }
}
