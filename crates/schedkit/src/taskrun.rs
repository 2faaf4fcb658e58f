//! `schedkit run FILE` on a scenario with `[[task]]` entries: the run and its report are
//! `schedkit_runtime::tasks`'s, the lines after the table `schedkit_render::tasks`'s; this
//! module prints them (and maps the library's errors to exit statuses through `Failure`).

use crate::failure::Failure;
use crate::output::{self, ReportArgs};
use schedkit_core::scenario::Scenario;
use schedkit_runtime::tasks::{self, ScenarioOptions};

/// Runs the task set, then prints the report as asked and what only a real task-set run
/// knows: after the table, or, with `--json`/`--csv` on stdout, its warnings on stderr.
pub fn run_scenario(
    scenario: &Scenario,
    report: &ReportArgs,
    options: &ScenarioOptions,
) -> Result<(), Failure> {
    let r = tasks::run_scenario(scenario, options)?;
    output::emit(&r.report, report)?;
    if report.json || report.csv {
        eprint!(
            "{}",
            schedkit_render::tasks::grouped_warnings(&r.run.warnings)
        );
    } else {
        print!(
            "{}",
            schedkit_render::tasks::text(scenario.policy().name(), &r.run)
        );
    }
    Ok(())
}
