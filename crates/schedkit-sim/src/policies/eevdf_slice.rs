//! When the `eevdf` model's running thread stops being the one to run: the end of its slice
//! (`update_deadline`, noticed at a tick or at once by a thread that reads its clock), of its
//! protection (RUN_TO_PARITY), and wake-up preemption (`check_preempt_wakeup_fair`). Cut out
//! of `eevdf.rs`'s `impl Eevdf`; the rules are stated in its module docs ("When a slice end
//! is noticed", "RUN_TO_PARITY", "Wakeup preemption").

use super::*;

impl Eevdf {
    /// When the thread `slot`, just picked or still running on `core`, is to be looked at
    /// again (absolute ns): its deadline, its loss of the pick, or a tick.
    pub(super) fn slice_end(&mut self, ctx: &Ctx, core: usize, slot: Slot) -> u64 {
        self.flush(slot);
        let e = self.ents[slot as usize];
        let left_v = (e.deadline - e.vruntime).max(0) as u128;
        let left = ((left_v * e.weight as u128).div_ceil(NICE_0_LOAD as u128) as u64).max(1);
        let t = ctx.thread(slot);
        // A thread with a burst or a run/sleep pattern reads its CPU clock every few
        // microseconds (schedkit's `spin` workload), and the kernel serves that read with
        // `update_curr`: its used-up slice, or the end of its protection, is noticed at once.
        let reads_clock = t.demand.is_some() || t.phase.is_some();
        let now = ctx.now.0;
        if e.vruntime < e.vprot {
            // Protected to its deadline (vprot is the deadline it was picked with).
            if reads_clock {
                now + left
            } else {
                (now + left).div_ceil(self.tick) * self.tick
            }
        } else if reads_clock {
            // Unprotected: every clock read reschedules, so it runs until another thread
            // is the pick, or to its deadline (renewed, then picked again or not).
            now + self.lose_in(core, slot).map_or(left, |d| d.min(left))
        } else {
            // Unprotected: the next tick's `update_curr` reschedules.
            (now / self.tick + 1) * self.tick
        }
    }

    /// Real time from now until `pick_eevdf` without protection stops returning `curr`, the
    /// running thread on `core`, if its deadline stays as it is: until `curr` is no longer
    /// eligible, or a queued thread with a deadline no later than its own becomes eligible.
    /// While `curr` runs for `t` ns, the queue's `sum(w * v)` grows by `t * 1024`.
    pub(super) fn lose_in(&mut self, core: usize, curr: Slot) -> Option<u64> {
        let (s, w) = self.sums(core);
        let e = self.ents[curr as usize];
        let (k, wc) = (NICE_0_LOAD as i128, e.weight as i128);
        let others = w as i128 - wc;
        if others <= 0 {
            return None;
        }
        let mut best: Option<u64> = None;
        let mut at = |t: i128| {
            let t = t.clamp(1, u64::MAX as i128) as u64;
            best = Some(best.map_or(t, |b| b.min(t)));
        };
        // Eligible while s + t*k >= (v_c + t*k/w_c) * w, i.e. t * k * others / w_c <= s - v_c*w.
        let slack = s - e.vruntime as i128 * w as i128;
        if slack >= 0 {
            at(slack * wc / (k * others) + 1);
        }
        for &(d, _, j) in self.rqs[core].tree.iter() {
            if d > e.deadline {
                break;
            }
            // Eligible once s + t*k >= v_j * w.
            let need = self.ents[j as usize].vruntime as i128 * w as i128 - s;
            at((need.max(0) + k - 1) / k);
        }
        best
    }

    /// `check_preempt_wakeup_fair` for the threads `placed` on `core` while `curr` runs.
    pub(super) fn wakeup_preempts(&mut self, core: usize, curr: Slot, placed: &[Slot]) -> bool {
        self.flush(curr);
        let sums = self.sums(core);
        let e = &mut self.ents[curr as usize];
        if e.vruntime >= e.deadline {
            // update_curr finds the slice used up between two ticks: new deadline, resched.
            e.deadline = e.vruntime + delta_fair(self.slice, e.weight);
            return true;
        }
        // Past its protection (picked again after its slice ended), `update_curr` at the
        // enqueue reschedules and the next pick decides.
        if e.vruntime >= e.vprot {
            return true;
        }
        // RUN_TO_PARITY: an eligible thread keeps the core while it is protected.
        if Self::eligible(sums, e.vruntime) {
            return false;
        }
        self.pick_eevdf(core, Some(curr))
            .is_some_and(|b| placed.contains(&b))
    }
}
