//! Fairness metrics over a trace, for any experiment: CPU time per entity per time bin
//! ([`cpu_bins`]), an entity's share of the job's CPU over sliding windows ([`window_shares`])
//! and the time until a share settles in a band after a change ([`recovery`]).

use schedkit_core::trace::{run_intervals, Event, Owner};
use schedkit_core::Nanos;

/// Per-entity CPU time per `step` bin, from a trace. `entity` maps an owner to the entity
/// index (process, or group). The run intervals are core's
/// ([`schedkit_core::trace::run_intervals`]), a thread still running at `end` counted to it.
pub fn cpu_bins(
    events: &[Event],
    n_entities: usize,
    entity: &dyn Fn(Owner) -> Option<usize>,
    step: u64,
    end: u64,
) -> Vec<Vec<u64>> {
    let nbins = end.div_ceil(step).max(1) as usize;
    let mut bins = vec![vec![0u64; nbins]; n_entities];
    for iv in run_intervals(events, Some(Nanos(end))) {
        let Some(k) = entity(iv.owner) else { continue };
        let mut t = iv.start.0;
        while t < iv.end.0 {
            let i = (t / step) as usize;
            if i >= nbins {
                break;
            }
            let hi = ((i as u64 + 1) * step).min(iv.end.0);
            bins[k][i] += hi - t;
            t = hi;
        }
    }
    bins
}

/// Share of the job's CPU time that one entity got in the window of `w` bins starting at
/// each bin (`total`: the job's CPU per bin; an empty window counts as 0).
pub fn window_shares(bins: &[u64], total: &[u64], w: usize) -> Vec<f64> {
    if bins.len() < w || w == 0 {
        return Vec::new();
    }
    let mut s: u64 = bins[..w].iter().sum();
    let mut t: u64 = total[..w].iter().sum();
    let ratio = |s: u64, t: u64| if t == 0 { 0.0 } else { s as f64 / t as f64 };
    let mut out = vec![ratio(s, t)];
    for i in w..bins.len() {
        s = s + bins[i] - bins[i - w];
        t = t + total[i] - total[i - w];
        out.push(ratio(s, t));
    }
    out
}

/// Time from bin `change` until the windowed share (windows *starting* at each bin, so a
/// window never reaches back before the instant it is credited to) is within `tol` of
/// `target` and stays there for `hold` bins (or to the end). `None`: it never settles.
pub fn recovery(
    shares: &[f64],
    change: usize,
    target: f64,
    tol: f64,
    hold: usize,
) -> Option<usize> {
    let ok = |x: f64| (x - target).abs() <= tol;
    let mut i = change;
    while i < shares.len() {
        let last = (i + hold).min(shares.len() - 1);
        match (i..=last).find(|&j| !ok(shares[j])) {
            None => return Some(i - change),
            Some(bad) => i = bad + 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_split_run_intervals_at_boundaries() {
        let ev = vec![
            Event::Arrive {
                t: Nanos(0),
                slot: 0,
                owner: Owner::Process {
                    process: 1,
                    thread: 0,
                },
            },
            Event::Dispatch {
                t: Nanos(3),
                core: 0,
                slot: 0,
            },
            Event::Deschedule {
                t: Nanos(12),
                core: 0,
                slot: 0,
                reason: schedkit_core::trace::Reason::Expired,
            },
            Event::Dispatch {
                t: Nanos(18),
                core: 1,
                slot: 0,
            },
        ];
        let b = cpu_bins(
            &ev,
            2,
            &|o| match o {
                Owner::Process { process, .. } => Some(process),
                _ => None,
            },
            5,
            20,
        );
        assert_eq!(b[0], vec![0, 0, 0, 0]);
        // [3,12) -> 2 + 5 + 2, then [18, 20) still running at the end.
        assert_eq!(b[1], vec![2, 5, 2, 2]);
    }

    #[test]
    fn recovery_needs_the_share_to_stay_in_the_band() {
        let w = window_shares(&[1, 1, 0, 3], &[2, 2, 2, 3], 2);
        assert_eq!(w, vec![0.5, 0.25, 0.6]);
        let s = [0.33, 0.33, 0.6, 0.5, 0.34, 0.2, 0.33, 0.34, 0.33, 0.33];
        // Enters the band at 4 but leaves at 5; stays from 6 on.
        assert_eq!(recovery(&s, 2, 1.0 / 3.0, 0.02, 3), Some(4));
        assert_eq!(recovery(&s, 2, 0.9, 0.02, 3), None);
        // Already in the band at the change.
        assert_eq!(recovery(&s, 0, 1.0 / 3.0, 0.02, 1), Some(0));
    }
}
