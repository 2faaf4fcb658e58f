//! PELT, per-entity load tracking, as the `eevdf` model uses it for load balancing: the
//! geometric average of `kernel/sched/pelt.c` (`decay_load`, `___update_load_avg`), in the
//! kernel's own integers. Time is cut into periods of 1024 us; a contribution `n` periods old
//! counts `y^n`, with `y^32 = 1/2`. An entity's `load_avg` follows its weight while it is
//! runnable (waiting or running) and decays towards 0 while it sleeps; a run queue's sum is
//! the sum of the averages attached to it, sleeping ones included (their "blocked load"),
//! which is why a queue whose thread just went to sleep still looks loaded to the balancer.
//!
//! Simplifications (the model's, not the kernel's): whole periods only (the partial period
//! is carried to the next update, not accumulated as `period_contrib`); the target is the
//! full weight, not `weight * (LOAD_AVG_MAX - 1024) / LOAD_AVG_MAX`; a new task starts at its
//! weight, as `init_entity_runnable_average` does.

use schedkit_core::trace::Slot;

/// One PELT period: 1024 us.
pub const PERIOD: u64 = 1_024_000;

/// `runnable_avg_yN_inv`: `y^k * 2^32` for k in 0..32 (kernel/sched/sched-pelt.h).
const Y_INV: [u32; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796,
    0xd744fcc9, 0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46,
    0xb504f333, 0xb123f581, 0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9,
    0x9837f050, 0x94f4efa8, 0x91c3d373, 0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// `decay_load`: `val * y^n`, halving once per 32 periods and then a table step.
pub fn decay_load(val: u64, n: u64) -> u64 {
    // LOAD_AVG_PERIOD * 63: past it everything has decayed to nothing.
    if n > 32 * 63 {
        return 0;
    }
    let v = val >> (n / 32);
    ((v as u128 * Y_INV[(n % 32) as usize] as u128) >> 32) as u64
}

/// A load average and the time it was last brought up to date (a whole number of periods
/// after its start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Avg {
    pub load: u64,
    pub at: u64,
}

impl Avg {
    pub fn new(load: u64, now: u64) -> Avg {
        Avg { load, at: now }
    }

    /// Brings the average to `now`, its target (the runnable weight) having been `target`
    /// since the last update: `target + (load - target) * y^n` over the `n` whole periods
    /// that passed.
    pub fn advance(&mut self, now: u64, target: u64) {
        let n = now.saturating_sub(self.at) / PERIOD;
        if n == 0 {
            return;
        }
        self.at += n * PERIOD;
        self.load = if self.load >= target {
            target + decay_load(self.load - target, n)
        } else {
            target - decay_load(target - self.load, n)
        };
    }

    /// The average at `now` without storing it.
    pub fn at_time(mut self, now: u64, target: u64) -> u64 {
        self.advance(now, target);
        self.load
    }
}

/// A CPU's real-time utilisation (`rq->avg_rt.util_avg`): 1024 while a real-time thread
/// runs there, 0 otherwise, averaged as PELT does (half-life 32 periods) but in continuous
/// time: it only scales the CPU's capacity, where whole-period steps would make a 140 us
/// run count a whole period at random.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RtUtil {
    util: f64,
    at: u64,
    on: bool,
}

impl RtUtil {
    fn decayed(&self, now: u64) -> f64 {
        // Nothing real-time has run here (most cores of most scenarios): no decay to compute.
        if !self.on && self.util == 0.0 {
            return 0.0;
        }
        let target = if self.on { 1024.0 } else { 0.0 };
        let periods = now.saturating_sub(self.at) as f64 / PERIOD as f64;
        target + (self.util - target) * 0.5f64.powf(periods / 32.0)
    }

    /// A real-time thread starts (`on`) or stops running at `now`.
    pub fn set(&mut self, now: u64, on: bool) {
        self.util = self.decayed(now);
        // Decayed below a hundredth of a unit: gone (and cheap again, `decayed`).
        if !self.on && self.util < 0.01 {
            self.util = 0.0;
        }
        self.at = now;
        self.on = on;
    }

    /// The utilisation at `now`, 0..1024.
    pub fn at_time(&self, now: u64) -> u64 {
        self.decayed(now).round().clamp(0.0, 1024.0) as u64
    }
}

/// The queues' PELT bookkeeping as threads become runnable, stop, and move.
impl super::Eevdf {
    /// `slot` becomes runnable on `core` (where its load average is attached).
    pub(super) fn add_load(&mut self, core: usize, slot: Slot) {
        let now = self.now;
        let e = &mut self.ents[slot as usize];
        let w = e.weight;
        e.la.advance(now, 0);
        self.group_advance(core);
        let rq = &mut self.rqs[core];
        rq.avg.advance(now, rq.load);
        rq.advance_nr(now);
        rq.load += w;
        rq.nr += 1;
        self.total_load += w;
        self.group_update(core);
    }

    /// `slot` stops being runnable on `core` (its load average stays attached).
    pub(super) fn sub_load(&mut self, core: usize, slot: Slot) {
        let now = self.now;
        let e = &mut self.ents[slot as usize];
        let w = e.weight;
        e.la.advance(now, w);
        self.group_advance(core);
        let rq = &mut self.rqs[core];
        rq.avg.advance(now, rq.load);
        rq.advance_nr(now);
        rq.load -= w;
        rq.nr -= 1;
        self.total_load -= w;
        self.group_update(core);
    }

    /// Moves `slot`'s load average from `from`'s sum to `to`'s (`migrate_task_rq_fair`:
    /// `remove_entity_load_avg`, then `attach_entity_load_avg`); `to = None` detaches it
    /// for good (the thread exited). Called after `sub_load` or while it sleeps, so its
    /// average is up to date.
    pub(super) fn move_load(&mut self, slot: Slot, from: usize, to: Option<usize>) {
        let now = self.now;
        let running = self.ents[slot as usize].at == super::At::Running;
        let e = &mut self.ents[slot as usize];
        e.ua.advance(now, if running { 1024 } else { 0 });
        let (la, w, ua) = (e.la.load, e.weight, e.ua.load);
        // Its runnable average, per unit of weight as its load average is.
        let ra = la * 1024 / w.max(1);
        let rq = &mut self.rqs[from];
        rq.avg.advance(now, rq.load);
        rq.avg.load = rq.avg.load.saturating_sub(la);
        rq.advance_nr(now);
        rq.util.load = rq.util.load.saturating_sub(ua);
        rq.runnable.load = rq.runnable.load.saturating_sub(ra);
        self.group_detach(from);
        if let Some(to) = to {
            let rq = &mut self.rqs[to];
            rq.avg.advance(now, rq.load);
            rq.avg.load += la;
            rq.advance_nr(now);
            rq.util.load += ua;
            rq.runnable.load += ra;
            self.group_attach(to, la, w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_halves_every_32_periods() {
        // y^32 = 1/2 exactly by the shift; y^1 * 1024 = 1002.04 (floored); y^16 = 1/sqrt 2.
        assert_eq!(decay_load(1024, 0), 1023); // 0xffffffff / 2^32, floored
        assert_eq!(decay_load(1024, 1), 1002);
        assert_eq!(decay_load(1024, 16), 724);
        assert_eq!(decay_load(1024, 32), 511);
        assert_eq!(decay_load(1024, 64), 255);
        assert_eq!(decay_load(1 << 40, 32 * 64), 0);
    }

    #[test]
    fn a_load_follows_its_target() {
        // From 0 towards 1024: after 32 periods (32.768 ms) 1024 - 1024 * y^32 = 1024 - 511.
        let mut a = Avg::new(0, 0);
        a.advance(32 * PERIOD + 5, 1024);
        assert_eq!(
            a,
            Avg {
                load: 513,
                at: 32 * PERIOD
            }
        );
        // Asleep for 64 more periods: 513 * y^64 = 513 / 4, floored twice.
        a.advance(96 * PERIOD + 999, 0);
        assert_eq!(a.load, 127);
        // Less than a period later: nothing changes.
        assert_eq!(a.at_time(96 * PERIOD + 1_000_000, 1024), 127);
    }
}
