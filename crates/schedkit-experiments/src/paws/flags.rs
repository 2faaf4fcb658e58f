//! `experiment paws`'s options as a command line gives them (durations and policy lists as
//! text, `--quick`, `--sim-only`), turned into [`PawsOptions`]: `--quick` caps the sets and
//! fixes short runs, `--sim-only` drops the real policies, and every list is checked against
//! the policies its engine runs.

use super::SIM_POLICIES;
use super::{parse_policies, PawsOptions, WindowSet, QUICK_DURATION, QUICK_HORIZON, QUICK_SETS};
use crate::Error;
use schedkit_core::Nanos;

/// The options as text, as `schedkit experiment paws` takes them.
#[derive(Clone, Debug)]
pub struct PawsFlags<'a> {
    /// At most [`QUICK_SETS`] sets per window, [`QUICK_DURATION`] real runs,
    /// [`QUICK_HORIZON`] simulated (`duration` and `sim_horizon` are then not read).
    pub quick: bool,
    /// The simulator only: no real policies.
    pub sim_only: bool,
    pub cores: Option<usize>,
    pub sets: usize,
    pub duration: &'a str,
    pub sim_horizon: &'a str,
    pub seed: u64,
    pub windows: WindowSet,
    /// Policies on real cores (`--real`) and in the simulator (`--sim`), by name.
    pub real: &'a [String],
    pub sim: &'a [String],
    pub stall_witness: bool,
}

impl PawsFlags<'_> {
    /// The typed options; a bad duration or policy name is [`Error::BadInput`] naming its
    /// flag.
    pub fn options(&self) -> Result<PawsOptions, Error> {
        let bad = |m: String| Error::BadInput(m);
        let (sets, duration, sim_horizon) = if self.quick {
            let sets = self.sets.min(QUICK_SETS);
            (sets, QUICK_DURATION, QUICK_HORIZON)
        } else {
            let d = Nanos::parse(self.duration).map_err(|e| bad(format!("--duration: {e}")))?;
            let h =
                Nanos::parse(self.sim_horizon).map_err(|e| bad(format!("--sim-horizon: {e}")))?;
            (self.sets, d, h)
        };
        let real = if self.sim_only {
            Vec::new()
        } else {
            parse_policies(
                self.real,
                &schedkit_runtime::tasks::REAL_TASK_POLICIES,
                "--real",
            )?
        };
        Ok(PawsOptions {
            cores: self.cores,
            sets,
            duration,
            sim_horizon,
            seed: self.seed,
            windows: self.windows,
            real,
            sim: parse_policies(self.sim, &SIM_POLICIES, "--sim")?,
            stall_witness: self.stall_witness,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags<'a>(real: &'a [String], sim: &'a [String]) -> PawsFlags<'a> {
        PawsFlags {
            quick: false,
            sim_only: false,
            cores: Some(2),
            sets: 20,
            duration: "1500ms",
            sim_horizon: "10s",
            seed: 1,
            windows: WindowSet::Both,
            real,
            sim,
            stall_witness: false,
        }
    }

    #[test]
    fn quick_and_sim_only_shape_the_options() {
        let (real, sim) = (vec!["paws".to_string()], vec!["gedf".to_string()]);
        let o = flags(&real, &sim).options().unwrap();
        assert_eq!((o.sets, o.duration), (20, Nanos::from_ms(1500)));
        assert_eq!(o.real.len(), 1);
        let quick = PawsFlags {
            quick: true,
            sim_only: true,
            duration: "not read",
            ..flags(&real, &sim)
        };
        let o = quick.options().unwrap();
        assert_eq!(
            (o.sets, o.duration, o.sim_horizon),
            (QUICK_SETS, QUICK_DURATION, QUICK_HORIZON)
        );
        assert!(o.real.is_empty());
    }

    #[test]
    fn bad_values_name_their_flag() {
        let (real, sim) = (vec!["paws".to_string()], vec!["cfs".to_string()]);
        let e = flags(&real, &sim).options().unwrap_err().to_string();
        assert!(e.contains("--sim"), "{e}");
        let sim = vec!["gedf".to_string()];
        let f = PawsFlags {
            duration: "soon",
            ..flags(&real, &sim)
        };
        assert!(f.options().unwrap_err().to_string().contains("--duration"));
    }
}
