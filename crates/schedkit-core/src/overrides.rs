//! Builder overrides of a validated [`Scenario`]: the command line's `compare --policies`
//! and `run --horizon`, and the Python module's `Scenario.with_*`, change a scenario after
//! parsing. Each override re-checks exactly what the parser checks for that field, so a
//! `Scenario` stays valid by construction; an error names the field as the file would.

use crate::scenario::{PolicyName, PolicySpec, Scenario, ScenarioError};
use crate::time::Nanos;

impl Scenario {
    fn override_error(&self, field: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file().to_string(),
            line: 0,
            column: 0,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The scenario under another policy, every other `[policy]` parameter kept (what
    /// `schedkit compare` does per run). `name` is checked like `policy.name` in a file;
    /// whether an engine runs it is the engine's check, as for a file.
    pub fn with_policy(&self, name: &str) -> Result<Scenario, ScenarioError> {
        let p = PolicyName::parse(name.trim()).ok_or_else(|| {
            self.override_error(
                "policy.name",
                format!(
                    "unknown policy \"{name}\" (known: {})",
                    PolicyName::known_list()
                ),
            )
        })?;
        let mut spec = self.policy().clone();
        // Gang's default quantum differs; a quantum left at the other default follows it,
        // as if the file had named this policy.
        let default_before = PolicySpec::new(self.policy().name()).quantum();
        if spec.quantum() == default_before {
            spec = spec.with_quantum(PolicySpec::new(p).quantum());
        }
        self.to_builder().with_policy(spec.with_name(p)).build()
    }

    /// The scenario under `spec` (another policy or parameters, nothing adjusted), checked
    /// as a file's `[policy]` table.
    pub fn with_policy_spec(&self, spec: PolicySpec) -> Result<Scenario, ScenarioError> {
        self.to_builder().with_policy(spec).build()
    }

    /// The scenario with another `[run] horizon` (what `schedkit run --horizon` does).
    pub fn with_horizon(&self, horizon: Nanos) -> Result<Scenario, ScenarioError> {
        self.to_builder().with_horizon(horizon).build()
    }

    /// The scenario on `cores` modelled cores; every `cpus` list must still fit.
    pub fn with_cores(&self, cores: usize) -> Result<Scenario, ScenarioError> {
        // The range first, as in a file: `--cores 0` is out of range, not "too small for a
        // cpus list".
        if !(1..=1 << 20).contains(&cores) {
            return Err(self.override_error("cores", "must be between 1 and 1048576"));
        }
        // The checks would name the first `cpus` beyond `cores`; say which entry and line,
        // since the file's value was fine and the override made it wrong.
        let beyond = |cpus: Option<&[usize]>| cpus.iter().copied().flatten().any(|&c| c >= cores);
        for p in self.processes() {
            if beyond(p.cpus()) {
                return Err(self.override_error(
                    "cores",
                    format!(
                        "process \"{}\" (line {}) lists a CPU at or beyond {cores}",
                        p.name(),
                        p.line()
                    ),
                ));
            }
        }
        for t in self.tasks() {
            if beyond(t.cpus()) {
                return Err(self.override_error(
                    "cores",
                    format!(
                        "task \"{}\" (line {}) lists a CPU at or beyond {cores}",
                        t.name(),
                        t.line()
                    ),
                ));
            }
        }
        self.to_builder().with_cores(cores).build()
    }

    /// The scenario with another `[policy] seed` (any seed is valid).
    pub fn with_seed(&self, seed: u64) -> Scenario {
        self.to_builder()
            .with_seed(seed)
            .build()
            .expect("a valid scenario with another seed is valid")
    }

    /// The scenario with another `[policy] quantum`.
    pub fn with_quantum(&self, quantum: Nanos) -> Result<Scenario, ScenarioError> {
        let spec = self.policy().clone().with_quantum(quantum);
        self.to_builder().with_policy(spec).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rr() -> Scenario {
        Scenario::parse(
            "t.toml",
            "cores = 2\n[policy]\nname = \"rr\"\n[[process]]\nname = \"a\"\nburst = \"4ms\"\ncpus = [1]\n",
        )
        .unwrap()
    }

    #[test]
    fn overrides_check_like_the_parser() {
        let s = rr();
        assert_eq!(
            s.with_policy("srtf").unwrap().policy().name(),
            PolicyName::Srtf
        );
        let e = s.with_policy("fifo").unwrap_err();
        assert_eq!(e.field, "policy.name");
        assert!(e.message.contains("unknown policy \"fifo\""), "{e}");
        assert_eq!(
            s.with_policy("gang").unwrap().policy().quantum(),
            Nanos::from_ms(100)
        );
        assert_eq!(
            s.with_horizon(Nanos::ZERO).unwrap_err().field,
            "run.horizon"
        );
        assert_eq!(
            s.with_quantum(Nanos::ZERO).unwrap_err().field,
            "policy.quantum"
        );
        let e = s.with_cores(1).unwrap_err();
        assert!(e.message.contains("process \"a\" (line 4)"), "{e}");
        assert_eq!(s.with_cores(4).unwrap().cores(), 4);
        assert_eq!(s.with_seed(7).policy().seed(), 7);
    }
}
