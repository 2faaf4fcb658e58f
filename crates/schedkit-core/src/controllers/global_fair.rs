//! Global fairness by a shuttle process (seed 004, 4.4), generalised to any number of cores
//! and to threads that come and go.
//!
//! CFS balances per-core loads (eqs. 4.1-4.3) but leaves imbalances smaller than half the
//! lightest movable weight alone: 1024 vs 4 x 335 on two cores stays as it is, and the 1024
//! thread runs 4x as long as each 335 thread instead of 3.06x (4.2.2). The thesis moves the
//! lightest thread of the heavy core, the *shuttle*, to the light core for one period and back
//! for the next, so that over two periods the heavy core's threads run faster and the light
//! core's slower, closer to GPS (lemma of 4.6.4).
//!
//! Phases, every `policy.period` (the thesis's flowchart, fig. 4.2):
//! - first period: nothing; CFS's own placement stands;
//! - **positioning (return)**: if shuttles are away (flag 1), each goes back to its home core
//!   (if it still exists and is runnable), and nothing else happens this period;
//! - otherwise **condition**: cores are ranked by load (eq. 4.1, runnable threads' weights) and
//!   paired heaviest with lightest, second heaviest with second lightest, and so on (on two
//!   cores this is the thesis's heavy and light core). A pair qualifies when the heavy core has
//!   at least two more runnable threads than the light one;
//! - **decision**: if eqs. 4.2-4.3 ([`crate::controllers::cfs_imbalance`]) say CFS itself will
//!   move load between the pair, CFS's migration has priority and the shuttle stays; otherwise
//!   the load to transfer is one thread, the lightest on the heavy core;
//! - **positioning (out)**: the shuttle moves to the light core (flag 0 -> 1).
//!
//! Generalisation: with more than two cores the pairing above runs one shuttle per pair per
//! period; loads and thread counts are recomputed from the snapshot at every "out" phase, so
//! threads that arrived, finished or blocked since are accounted for, and a shuttle that
//! finished while away is simply forgotten. Threads whose core is not known yet (before their
//! first dispatch) are left out of the loads.
//!
//! Lag feedback (schedkit's generalisation; the thesis's fixed alternation is what it does
//! while every lag is zero). Alternating every period gives the light core's threads one
//! period alone and one beside the shuttle, a duty cycle of 1/2 whatever the weights: with
//! 1024 + 4 x 335 the 1024 thread then gets `(1 + 1024/1359) / 2` = 87.7 % of a core against
//! GPS's 86.6 %, and its lag grows without bound (200 ms after 10 s at a 20 ms period). So
//! the controller keeps, for every thread, the CPU time GPS would have given it since it was
//! first seen (water-filling its weight over the cores, scaled to the CPU time the threads
//! actually received together, so that load from outside the scenario does not count as
//! unfairness) and its lag = GPS time - received time, and decides by the sign of the light
//! core's lag (summed over its threads other than shuttles):
//! - **return** a shuttle only when the light core's own threads are not ahead of GPS
//!   (lag >= 0); while they are ahead it stays one more period;
//! - **send** one out only when they are not behind (lag <= 0): a light core that owes its
//!   threads time keeps them to itself for a period.
//!
//! A pair the shuttle rule does not cover (fewer than two extra threads on the heavier core)
//! gets a one-off placement repair once the lags show that CFS left it alone
//! ([`GlobalFair::repair`]); a lone thread on a core that is behind GPS trades places with
//! the other core's threads ([`GlobalFair::swap_lone`]).
//!
//! Observed capacity (schedkit's generalisation for real cores, where work outside the job
//! shares the CPUs). Eq. 4.1 counts weights only, as if every core gave the job all its time.
//! On a real machine a core that other work loads gives the job's threads less, so the
//! controller measures, for every core, the CPU time its job threads actually received per
//! period (only over periods in which the same threads stayed runnable on it, so that
//! arrivals, blocking and moves do not read as lost capacity), smooths it (EWMA, 1/4), and
//! ranks cores by *effective* load `load / capacity`: a core that gives the job 60 % of its
//! time with 1024 on it counts as 1707, heavier than 4 x 335 on a core of its own. In the
//! simulator every busy core gives the job all its time, the capacity stays 1 and the
//! ranking is eq. 4.1's. Capacities above 0.9 count as 1, so that timer-tick noise does not
//! reorder cores of equal weight.
//!
//! This is a bang-bang control of the duty cycle: it settles at the fraction that gives GPS
//! rates (54 % out for 1024 + 4 x 335), still moves at most one thread per pair per period,
//! and keeps every lag within about one period's worth of rate difference.
//!
//! Tie-breaking: the shuttle is the lightest thread of the heavy core that is furthest ahead
//! of GPS (it is the one that gives up time by moving); among equal lags (at the start, all
//! zero) it rotates (the next thread id after the previous shuttle of that core, cyclically),
//! so that the cost of shuttling is shared by equal-weight threads instead of falling on one.
//! Cores of equal load rank by index.
//!
//! `Migrate` pins the thread to its target core (sched_setaffinity in real runs), which is the
//! thesis's "flag enforces the transfer": CFS's balancer cannot undo a shuttle move.

use crate::control::{Action, Controller, Snapshot};
use crate::controllers::cfs_imbalance;
use crate::time::Nanos;
use std::collections::HashMap;

/// GPS bookkeeping of one thread since it was first seen.
#[derive(Clone, Copy, Debug)]
struct Account {
    /// CPU time GPS would have given it, ns.
    ideal: f64,
    /// CPU time it received, ns.
    got: f64,
    /// Its CPU time at the previous tick.
    last_cpu: Nanos,
    /// Tick at which it was last in a snapshot.
    seen: u64,
}

/// A shuttle away from its home core.
#[derive(Clone, Copy, Debug)]
struct Away {
    thread: u64,
    home: usize,
}

pub struct GlobalFair {
    period: Nanos,
    imbalance_pct: u32,
    ticks: u64,
    away: Vec<Away>,
    /// Previous shuttle of each core, for rotation.
    last: Vec<Option<(usize, usize)>>,
    load: Vec<u64>,
    nr: Vec<u64>,
    order: Vec<usize>,
    accounts: HashMap<u64, Account>,
    /// Scratch: (weight, cap) of runnable threads for the water-fill, and their ids.
    fill: Vec<(f64, f64)>,
    fill_ids: Vec<u64>,
    /// Observed share of each core that the job's threads received (EWMA, 1 = all of it).
    capacity: Vec<f64>,
    /// Snapshot time of the previous tick.
    prev_now: Option<Nanos>,
    /// Core and runnable state of every thread at the previous tick.
    prev_place: HashMap<u64, (Option<usize>, bool)>,
}

impl GlobalFair {
    pub fn new(period: Nanos, imbalance_pct: u32) -> GlobalFair {
        GlobalFair {
            period,
            imbalance_pct,
            ticks: 0,
            away: Vec::new(),
            last: Vec::new(),
            load: Vec::new(),
            nr: Vec::new(),
            order: Vec::new(),
            accounts: HashMap::new(),
            fill: Vec::new(),
            fill_ids: Vec::new(),
            capacity: Vec::new(),
            prev_now: None,
            prev_place: HashMap::new(),
        }
    }

    /// Updates each core's observed capacity from the CPU time its job threads received since
    /// the previous tick (see the module docs). A core counts only when every thread on it now
    /// was runnable on it at the previous tick too and at least one is runnable.
    fn observe_capacity(&mut self, snap: &Snapshot, delta: &HashMap<u64, f64>) {
        let cores = snap.cores;
        self.capacity.resize(cores, 1.0);
        let elapsed = self.prev_now.map(|p| snap.now.0.saturating_sub(p.0) as f64);
        if let Some(elapsed) = elapsed.filter(|&e| e > 0.0) {
            let mut got = vec![0.0f64; cores];
            let mut steady = vec![true; cores];
            let mut any = vec![false; cores];
            for t in snap.threads {
                let Some(c) = t.core.filter(|&c| c < cores) else {
                    continue;
                };
                let stayed = self.prev_place.get(&t.id) == Some(&(Some(c), true));
                steady[c] &= t.runnable && stayed;
                any[c] |= t.runnable;
                got[c] += delta.get(&t.id).copied().unwrap_or(0.0);
            }
            for c in 0..cores {
                if steady[c] && any[c] {
                    let seen = (got[c] / elapsed).clamp(0.05, 1.0);
                    self.capacity[c] += (seen - self.capacity[c]) / 4.0;
                }
            }
        }
        self.prev_now = Some(snap.now);
        self.prev_place.clear();
        self.prev_place
            .extend(snap.threads.iter().map(|t| (t.id, (t.core, t.runnable))));
    }

    /// Observed capacity of `core` as the ranking uses it (above 0.9: a whole core).
    fn cap(&self, core: usize) -> f64 {
        match self.capacity.get(core) {
            Some(&c) if c < 0.9 => c,
            _ => 1.0,
        }
    }

    /// A lone thread on a core whose capacity the job does not get (effective load above the
    /// other core's) and which has been owed more than half a period of CPU time while the
    /// other core's threads are as far ahead: it moves to the other core, and that core's
    /// lightest threads (furthest ahead of GPS first) come over while that lowers the larger
    /// effective load of the two. The shuttle rule cannot help here (the heavy core has one
    /// thread to give), and on a stock kernel CFS's balancer would not make this move either:
    /// the job's threads are pinned. Returns whether it acted.
    fn swap_lone(&self, snap: &Snapshot, owed: usize, other: usize, out: &mut Vec<Action>) -> bool {
        let threshold = self.period.0 as f64 / 2.0;
        if self.nr[owed] != 1
            || self.core_lag(snap, owed) <= threshold
            || self.core_lag(snap, other) >= -threshold
        {
            return false;
        }
        let Some(lone) = snap
            .threads
            .iter()
            .find(|t| t.runnable && t.core == Some(owed))
        else {
            return false;
        };
        let (co, cx) = (self.cap(owed), self.cap(other));
        let (mut lo, mut lx) = (0.0, (self.load[other] + lone.weight) as f64);
        // Ties between equal weights and lags go by the engine-independent key, not the id.
        let mut back: Vec<(u64, f64, (usize, usize), u64)> = snap
            .threads
            .iter()
            .filter(|t| t.runnable && t.core == Some(other))
            .map(|t| (t.weight, self.lag(t.id), t.key(), t.id))
            .collect();
        back.sort_by(|a, b| {
            (a.0, a.1, a.2)
                .partial_cmp(&(b.0, b.1, b.2))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let mut moves = vec![Action::Migrate {
            thread: lone.id,
            core: other,
        }];
        for (w, _, _, id) in back {
            let w = w as f64;
            let (now, then) = ((lo / co).max(lx / cx), ((lo + w) / co).max((lx - w) / cx));
            if then >= now {
                break;
            }
            lo += w;
            lx -= w;
            moves.push(Action::Migrate {
                thread: id,
                core: owed,
            });
        }
        if moves.len() < 2 {
            return false; // nothing would come back: the lone thread would only share a core
        }
        out.extend(moves);
        true
    }

    /// Brings every thread's GPS account up to this snapshot (see the module docs).
    fn account(&mut self, snap: &Snapshot) {
        let tick = self.ticks;
        let mut delivered = 0.0;
        let mut delta: HashMap<u64, f64> = HashMap::with_capacity(snap.threads.len());
        for t in snap.threads {
            let a = self.accounts.entry(t.id).or_insert(Account {
                ideal: 0.0,
                got: 0.0,
                last_cpu: t.cpu,
                seen: tick,
            });
            let d = t.cpu.0.saturating_sub(a.last_cpu.0) as f64;
            a.got += d;
            a.last_cpu = t.cpu;
            a.seen = tick;
            delivered += d;
            delta.insert(t.id, d);
        }
        self.observe_capacity(snap, &delta);
        self.accounts.retain(|_, a| a.seen == tick);
        self.fill.clear();
        self.fill_ids.clear();
        for t in snap.threads.iter().filter(|t| t.runnable) {
            self.fill.push((t.weight as f64, 1.0));
            self.fill_ids.push(t.id);
        }
        let rates = crate::gps::water_fill(snap.cores as f64, &self.fill);
        let sum: f64 = rates.iter().sum();
        if sum > 0.0 && delivered > 0.0 {
            for (id, r) in self.fill_ids.iter().zip(rates) {
                if let Some(a) = self.accounts.get_mut(id) {
                    a.ideal += delivered * r / sum;
                }
            }
        }
    }

    /// Placement repair for a pair the shuttle rule does not cover (the heavier core has fewer
    /// than two threads more, e.g. 1024 + 335 against 3 x 335): when one core's threads have
    /// been owed more than half a period of CPU time while the other's are as far ahead, the
    /// owed core's lightest thread furthest ahead of GPS moves over (pinned; not a shuttle, it
    /// does not come back). CFS's own balancer would make that move in the thesis's model
    /// (eq. 4.3 passes: 177 >= 167.5), so in the simulator the lag never gets that far; on a
    /// real kernel that left such a placement alone, this restores the shape the shuttle
    /// works from. A core keeps at least one thread.
    fn repair(&self, snap: &Snapshot, a: usize, b: usize, out: &mut Vec<Action>) {
        let threshold = self.period.0 as f64 / 2.0;
        let (la, lb) = (self.core_lag(snap, a), self.core_lag(snap, b));
        let (owed, ahead) = if la > threshold && lb < -threshold {
            (a, b)
        } else if lb > threshold && la < -threshold {
            (b, a)
        } else {
            return;
        };
        if self.nr[owed] < 2 {
            return;
        }
        let on_owed = || {
            snap.threads
                .iter()
                .filter(move |t| t.runnable && t.core == Some(owed))
        };
        let Some(min_w) = on_owed().map(|t| t.weight).min() else {
            return;
        };
        let pick = on_owed()
            .filter(|t| t.weight == min_w)
            .map(|t| (self.lag(t.id), t.key(), t.id))
            .min_by(|x, y| x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal));
        if let Some((_, _, thread)) = pick {
            out.push(Action::Migrate {
                thread,
                core: ahead,
            });
        }
    }

    /// GPS time minus received time, ns (positive: the thread is owed time).
    fn lag(&self, id: u64) -> f64 {
        self.accounts.get(&id).map_or(0.0, |a| a.ideal - a.got)
    }

    /// Summed lag of the runnable threads on `core`, shuttles excluded.
    fn core_lag(&self, snap: &Snapshot, core: usize) -> f64 {
        snap.threads
            .iter()
            .filter(|t| t.runnable && t.core == Some(core))
            .filter(|t| !self.away.iter().any(|a| a.thread == t.id))
            .map(|t| self.lag(t.id))
            .sum()
    }
}

impl Controller for GlobalFair {
    fn name(&self) -> &'static str {
        "global-fair"
    }
    fn period(&self) -> Nanos {
        self.period
    }
    fn emits(&self) -> &'static [crate::control::ActionKind] {
        use crate::control::ActionKind;
        &[ActionKind::Migrate]
    }
    /// One balancer round of seed 004 ch. 4 in the paper's order (the condition phase, the
    /// effective loads of eq. 4.1, the decision phase): slightly over ~120 lines and kept whole so that
    /// it reads as the algorithm does.
    fn tick(&mut self, snap: &Snapshot, out: &mut Vec<Action>) {
        self.ticks += 1;
        self.account(snap);
        let cores = snap.cores;
        if self.ticks == 1 || cores < 2 {
            return; // first period: CFS's assignment
        }
        if !self.away.is_empty() {
            let mut away = std::mem::take(&mut self.away);
            away.retain(|a| {
                let Some(t) = snap.threads.iter().find(|t| t.id == a.thread && t.runnable) else {
                    return false; // finished or blocked while away: forgotten
                };
                // Stay out while the light core's own threads are still ahead of GPS.
                let light = t.core.unwrap_or(a.home);
                if light != a.home && self.core_lag(snap, light) < 0.0 {
                    return true;
                }
                out.push(Action::Migrate {
                    thread: a.thread,
                    core: a.home,
                });
                false
            });
            self.away = away;
            return;
        }
        // Condition phase: loads (eq. 4.1) and thread counts per core.
        self.load.clear();
        self.load.resize(cores, 0);
        self.nr.clear();
        self.nr.resize(cores, 0);
        self.last.resize(cores, None);
        for t in snap.threads.iter().filter(|t| t.runnable) {
            if let Some(c) = t.core.filter(|&c| c < cores) {
                self.load[c] += t.weight;
                self.nr[c] += 1;
            }
        }
        let total: u64 = self.load.iter().sum();
        self.order.clear();
        self.order.extend(0..cores);
        // Effective load (eq. 4.1 over the observed capacity, see the module docs).
        let eff: Vec<f64> = (0..cores)
            .map(|c| self.load[c] as f64 / self.cap(c))
            .collect();
        self.order.sort_by(|&a, &b| {
            eff[b]
                .partial_cmp(&eff[a])
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.cmp(&b))
        });
        for i in 0..cores / 2 {
            let (heavy, light) = (self.order[i], self.order[cores - 1 - i]);
            if self.nr[heavy] < self.nr[light] + 2 {
                if !self.swap_lone(snap, heavy, light, out) {
                    self.repair(snap, heavy, light, out);
                }
                continue;
            }
            // The lightest weight on the heavy core, and the shuttle among those threads.
            let on_heavy = || {
                snap.threads
                    .iter()
                    .filter(move |t| t.runnable && t.core == Some(heavy))
            };
            let Some(min_w) = on_heavy().map(|t| t.weight).min() else {
                continue;
            };
            // Decision phase: CFS's own migration has priority.
            if cfs_imbalance(
                self.load[heavy],
                self.load[light],
                total,
                cores,
                self.imbalance_pct,
                || min_w,
            )
            .is_some()
            {
                // In the thesis's model CFS moves load here. A real run pins every job
                // thread (the engine's placement), so CFS cannot: once the lags show that the
                // move did not happen, the controller makes it (in the simulator CFS moves
                // first and the lags never get that far).
                self.repair(snap, heavy, light, out);
                continue;
            }
            // Lag feedback: a light core whose threads are behind GPS keeps them to itself.
            if self.core_lag(snap, light) > 0.0 {
                continue;
            }
            // The lightest threads of the heavy core that are furthest ahead of GPS (within
            // a microsecond), then rotation among those.
            let most_ahead = on_heavy()
                .filter(|t| t.weight == min_w)
                .map(|t| self.lag(t.id))
                .fold(f64::INFINITY, f64::min);
            let prev = self.last[heavy];
            // Rotation goes by the engine-independent key (process, thread number).
            let candidates = || {
                on_heavy()
                    .filter(|t| t.weight == min_w && self.lag(t.id) <= most_ahead + 1e3)
                    .map(|t| (t.key(), t.id))
            };
            let shuttle = candidates()
                .filter(|&(key, _)| prev.is_none_or(|p| key > p))
                .min()
                .or_else(|| candidates().min());
            let Some((key, shuttle)) = shuttle else {
                continue;
            };
            self.last[heavy] = Some(key);
            self.away.push(Away {
                thread: shuttle,
                home: heavy,
            });
            out.push(Action::Migrate {
                thread: shuttle,
                core: light,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ThreadView;
    use crate::scenario::Scenario;

    fn view(id: u64, core: usize, weight: u64) -> ThreadView {
        ThreadView {
            id,
            process: id as usize,
            index: 0,
            group: None,
            core: Some(core),
            weight,
            base_weight: weight,
            runnable: true,
            cpu: Nanos::ZERO,
        }
    }

    /// One period of `g` at `ms` on two cores; the actions it takes.
    fn tick_at(g: &mut GlobalFair, sc: &Scenario, threads: &[ThreadView], ms: u64) -> Vec<Action> {
        let mut out = Vec::new();
        g.tick(
            &Snapshot {
                now: Nanos::from_ms(ms),
                cores: 2,
                threads,
                group_weights: &[],
                process_cpu: &[],
                process_cpu_epoch: 0,
                scenario: sc,
            },
            &mut out,
        );
        out
    }

    #[test]
    fn shuttle_alternates_and_rotates() {
        let sc = Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"global-fair\"\n")
            .expect("scenario");
        let mut g = GlobalFair::new(Nanos::from_ms(100), 125);
        let mut threads = vec![view(0, 0, 1024)];
        threads.extend((1..5).map(|i| view(i, 1, 335)));
        let mut tick = |threads: &[ThreadView]| tick_at(&mut g, &sc, threads, 0);
        assert!(tick(&threads).is_empty(), "first period: CFS placement");
        let out = tick(&threads);
        assert_eq!(out, vec![Action::Migrate { thread: 1, core: 0 }]);
        threads[1].core = Some(0);
        assert_eq!(tick(&threads), vec![Action::Migrate { thread: 1, core: 1 }]);
        threads[1].core = Some(1);
        // The next shuttle is the next 335 thread.
        assert_eq!(tick(&threads), vec![Action::Migrate { thread: 2, core: 0 }]);
    }

    #[test]
    fn lag_feedback_sets_the_duty_cycle() {
        let sc = Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"global-fair\"\n")
            .expect("scenario");
        let mut g = GlobalFair::new(Nanos::from_ms(100), 125);
        let mut threads = vec![view(0, 0, 1024)];
        threads.extend((1..5).map(|i| view(i, 1, 335)));
        let mut tick = |threads: &[ThreadView], ms: u64| tick_at(&mut g, &sc, threads, ms);
        assert!(tick(&threads, 0).is_empty());
        // 200 ms delivered, T1 got only 60 of its GPS 86.6: the light core is behind, so no
        // shuttle goes out.
        threads[0].cpu = Nanos::from_ms(60);
        for (i, c) in [(1, 35), (2, 35), (3, 35), (4, 35)] {
            threads[i].cpu = Nanos::from_ms(c);
        }
        assert!(tick(&threads, 100).is_empty(), "T1 owed time: no shuttle");
        // T1 now far ahead (+100 ms on 200 more delivered); thread 3 is the 335 furthest ahead:
        // it is the shuttle, not thread 1 (rotation order).
        threads[0].cpu = Nanos::from_ms(260);
        for (i, c) in [(1, 35), (2, 35), (3, 50), (4, 20)] {
            threads[i].cpu = Nanos::from_ms(c);
        }
        assert_eq!(
            tick(&threads, 200),
            vec![Action::Migrate { thread: 3, core: 0 }]
        );
        // Away, and T1 still ahead of GPS: the shuttle stays one more period.
        threads[3].core = Some(0);
        assert!(tick(&threads, 300).is_empty(), "stays while T1 is ahead");
        // T1 falls behind (gets nothing for 200 ms): the shuttle comes home.
        for (i, c) in [(1, 135), (2, 135), (3, 150), (4, 120)] {
            threads[i].cpu = Nanos::from_ms(c);
        }
        assert_eq!(
            tick(&threads, 400),
            vec![Action::Migrate { thread: 3, core: 1 }]
        );
    }

    #[test]
    fn a_placement_the_shuttle_rule_misses_is_repaired_once_lags_show_it() {
        let sc = Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"global-fair\"\n")
            .expect("scenario");
        let mut g = GlobalFair::new(Nanos::from_ms(20), 125);
        // 1024 + 335 on core 0, 3 x 335 on core 1: the heavier core has one thread fewer.
        let mut threads = vec![view(0, 0, 1024), view(1, 0, 335)];
        threads.extend((2..5).map(|i| view(i, 1, 335)));
        let mut tick = |threads: &[ThreadView]| tick_at(&mut g, &sc, threads, 0);
        assert!(tick(&threads).is_empty());
        // One period as CFS shares it: core 0 gives 15.1 / 4.9 ms, core 1 6.7 ms each. Lags
        // stay under half a period: nothing moves yet.
        let mut cpu = [0u64; 5];
        let mut run = |threads: &mut Vec<ThreadView>, periods: u64| {
            for _ in 0..periods {
                for (c, d) in cpu.iter_mut().zip([15_066, 4_934, 6_667, 6_667, 6_666]) {
                    *c += d * 1000;
                }
            }
            for (t, c) in threads.iter_mut().zip(cpu) {
                t.cpu = Nanos(c);
            }
        };
        run(&mut threads, 1);
        assert!(tick(&threads).is_empty(), "lags still small");
        // Five periods later core 0 is owed > 10 ms, core 1 as far ahead: the 335 of core 0
        // moves to core 1, giving the thesis's 1 + 4.
        run(&mut threads, 5);
        assert_eq!(tick(&threads), vec![Action::Migrate { thread: 1, core: 1 }]);
    }

    #[test]
    fn a_lone_thread_on_a_core_that_other_work_loads_trades_places() {
        let sc = Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"global-fair\"\n")
            .expect("scenario");
        let mut g = GlobalFair::new(Nanos::from_ms(20), 125);
        // T1 alone on core 0, which other work holds 40 % of the time; 4 x 335 on core 1.
        let mut threads = vec![view(0, 0, 1024)];
        threads.extend((1..5).map(|i| view(i, 1, 335)));
        let mut moved = Vec::new();
        for k in 0..40u64 {
            moved = tick_at(&mut g, &sc, &threads, 20 * k);
            if !moved.is_empty() {
                break;
            }
            threads[0].cpu = Nanos(threads[0].cpu.0 + 12_000_000);
            for t in &mut threads[1..] {
                t.cpu = Nanos(t.cpu.0 + 5_000_000);
            }
        }
        assert!(
            g.cap(0) < 0.9 && g.cap(1) == 1.0,
            "capacities {:?}",
            g.capacity
        );
        // T1 goes to the whole core, three 335s come over: 1005 / 0.6-0.7 against 1359.
        assert_eq!(moved[0], Action::Migrate { thread: 0, core: 1 });
        assert_eq!(moved.len(), 4, "{moved:?}");
        assert!(moved[1..]
            .iter()
            .all(|a| matches!(a, Action::Migrate { thread, core: 0 } if *thread != 0)));
    }

    #[test]
    fn a_move_cfs_would_make_is_made_once_lags_show_it_did_not_happen() {
        let sc = Scenario::parse("t.toml", "cores = 2\n[policy]\nname = \"global-fair\"\n")
            .expect("scenario");
        let mut g = GlobalFair::new(Nanos::from_ms(20), 125);
        // 1024 + 3 x 335 on core 0, one 335 on core 1 (pinned: CFS cannot even it out).
        let mut threads = vec![view(0, 0, 1024)];
        threads.extend((1..4).map(|i| view(i, 0, 335)));
        threads.push(view(4, 1, 335));
        let mut tick = |threads: &[ThreadView], ms: u64| tick_at(&mut g, &sc, threads, ms);
        assert!(tick(&threads, 0).is_empty());
        // One 20 ms period as the kernel shares these queues: core 0 owes its threads 14 ms.
        for (t, us) in threads
            .iter_mut()
            .zip([10_093, 3_302, 3_302, 3_302, 20_000])
        {
            t.cpu = Nanos(us * 1000);
        }
        assert_eq!(
            tick(&threads, 20),
            vec![Action::Migrate { thread: 1, core: 1 }]
        );
    }
}
