//! The `eevdf` model's newidle balance, proportional to its success rate: Linux's
//! `sched_balance_newidle` with the NI_RANDOM feature ("sched/fair: Proportional newidle
//! balance", commit 33cf66d88306, mainline 6.19; in the 6.18 stable series from 6.18.5 and
//! in 6.12 from 6.12.65, on by default).
//!
//! - **When a core runs out of work** (its last fair thread blocks or exits, or a real-time
//!   thread leaves an empty fair queue) and the root domain is overloaded (some CPU has two
//!   or more runnable tasks of any class; the kernel's `rd->overloaded`, set when a queue
//!   reaches two and refreshed by every balance), the core throws a 1024-sided die and runs a
//!   newidle balance only if the throw is at most `1 + newidle_ratio`: a balance that rarely
//!   pulls anything is rarely tried.
//! - **The success rate** (`update_newidle_stats`): each such occasion counts a call; a
//!   balance that pulled a thread counts `round(1024 / (1 + ratio))` successes (the inverse of
//!   the chance it was tried, so `success / call` estimates how often a balance *would* pull);
//!   at 1024 calls the ratio becomes the success count and both counts halve, so the ratio
//!   follows roughly the last 512 to 1024 occasions. Per core (the kernel keeps it per
//!   sched_domain instance, one per CPU and level; schedkit models one level).
//! - **The state a run starts from** is the kernel's boot state (`sd_init`: 512 calls, 256
//!   successes, ratio 512: a one-in-two chance) unless `[policy] newidle_ratio` gives another;
//!   a live kernel carries its ratio over from whatever ran before, which `schedkit
//!   experiment fidelity` fixes by conditioning the real CPUs before each run.
//!
//! Invariants: `call` stays below 1024 between occasions; a skipped occasion never moves a
//! thread; the die comes from the model's own seeded stream, so a run is reproducible.

use rand::Rng;

/// One core's newidle statistics (`sd->newidle_call`, `newidle_success`, `newidle_ratio`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NewIdle {
    call: u32,
    success: u32,
    ratio: u32,
}

impl NewIdle {
    /// The state `sd_init` gives a domain at boot when the ratio is the default 512, else
    /// one whose counts give `ratio` at once (512 calls, `ratio / 2` successes).
    pub(super) fn starting_at(ratio: u32) -> NewIdle {
        NewIdle {
            call: 512,
            success: ratio / 2,
            ratio,
        }
    }

    /// Tests: the state after `n` more occasions without success.
    #[cfg(test)]
    pub(super) fn after_calls(mut self, n: u32) -> NewIdle {
        for _ in 0..n {
            self.record(0);
        }
        self
    }

    /// `update_newidle_stats`.
    fn record(&mut self, success: u32) {
        self.call += 1;
        self.success += success;
        if self.call >= 1024 {
            self.ratio = self.success;
            self.call /= 2;
            self.success /= 2;
        }
    }

    /// Throws the die for one occasion: `Some(weight)` when the balance runs (its success
    /// then counts `weight`, via [`NewIdle::ran`]), `None` when it is skipped (already
    /// counted as a call without success).
    pub(super) fn throw(&mut self, rng: &mut impl Rng) -> Option<u32> {
        let d1k = rng.gen_range(0..1024u32);
        let weight = 1 + self.ratio;
        if d1k > weight {
            self.record(0);
            return None;
        }
        Some((1024 + weight / 2) / weight)
    }

    /// Counts a balance that ran, with the weight [`NewIdle::throw`] gave it.
    pub(super) fn ran(&mut self, weight: u32, pulled: bool) {
        self.record(if pulled { weight } else { 0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_ratio_is_the_success_count_at_each_1024th_call_and_both_counts_halve() {
        // Boot: 512 calls, 256 successes, ratio 512. 511 failures leave the ratio; the 512th
        // makes 1024 calls: ratio 256, counts 512 and 128. 512 more: ratio 128.
        let mut n = NewIdle::starting_at(512).after_calls(511);
        assert_eq!((n.call, n.success, n.ratio), (1023, 256, 512));
        n.record(0);
        assert_eq!((n.call, n.success, n.ratio), (512, 128, 256));
        let n = n.after_calls(512);
        assert_eq!((n.call, n.success, n.ratio), (512, 64, 128));
        // From a success count of 4096, twelve updates (6144 calls) leave a ratio of 2.
        let n = NewIdle {
            call: 512,
            success: 4096,
            ratio: 1024,
        };
        assert_eq!(n.after_calls(12 * 512).ratio, 2);
    }

    #[test]
    fn a_balance_runs_with_chance_2_plus_ratio_in_1024_and_counts_its_inverse() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // Ratio 1023 or more: every throw is at most 1 + ratio, weight (1024 + 512) / 1024 = 1.
        let mut n = NewIdle::starting_at(1023);
        assert!((0..1000).all(|_| n.throw(&mut rng) == Some(1)));
        // Ratio 0: weight 1, so a run counts 1024 successes; runs are rare (2 in 1024). A
        // fresh state for each throw: skipped throws count as calls and would move the ratio.
        let mut throw = |r: u32| NewIdle::starting_at(r).throw(&mut rng);
        let runs = (0..102_400).filter(|_| throw(0) == Some(1024)).count();
        assert!(
            (100..=300).contains(&runs),
            "{runs} runs, about 200 expected"
        );
        // Ratio 255: a run counts round(1024 / 256) = 4, and runs come 257 times in 1024.
        let runs = (0..10_000).filter(|_| throw(255) == Some(4)).count();
        assert!(
            (2300..=2700).contains(&runs),
            "{runs} runs, about 2500 expected"
        );
        // A pulled run at ratio 0 lifts the success count by 1024 at once.
        let mut n = NewIdle::starting_at(0);
        n.ran(1024, true);
        assert_eq!((n.call, n.success), (513, 1024));
    }
}
