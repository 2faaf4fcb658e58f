//! The examples and lists under each subcommand's help (`after_help`), so that a person can use
//! a subcommand without the papers. Every `$ schedkit ...` line here is parsed by the real
//! argument parser in the tests of `cli.rs`, so an example cannot name a flag that is gone.

use schedkit_core::policies;

pub const SIM: &str = "\
Examples:
  $ schedkit sim examples/quickstart.toml
  $ schedkit sim examples/textbook/rr.toml --policy srtf --json
  $ schedkit sim examples/fairness/greedy.toml --cores 4 --horizon 2s --gantt gantt.svg
  $ schedkit sim examples/realtime/sweep.toml --sweep seeds=1..20 --policies gedf,pedf";

/// `sim --help`: examples, then the simulator's policies with one line each.
pub fn sim() -> String {
    format!(
        "{SIM}\n\nPolicies (--policy, or `[policy] name` in the file; `schedkit policies` \
         says which engine runs each):\n{}\nEvent budget: before simulating, the events the \
         scenario implies are estimated; beyond --max-events (default {}) it is refused with \
         the keys that drive the estimate.",
        policies::table(true),
        crate::simcmd::DEFAULT_MAX_EVENTS_TEXT,
    )
}

pub const COMPARE: &str = "\
Examples:
  $ schedkit compare examples/textbook/rr.toml --policies fcfs,sjf,srtf,rr
  $ schedkit compare examples/fairness/greedy.toml --policies cfs,pfs,tfps,twrs --chart shares.svg
  $ schedkit compare examples/realtime/dhall.toml --policies gedf,pedf --json";

/// `compare --help`: examples, then the simulator's policies.
pub fn compare() -> String {
    format!(
        "{COMPARE}\n\nPolicies (--policies):\n{}",
        policies::table(true)
    )
}

pub const RUN: &str = "\
Examples:
  $ schedkit run examples/run/spin.toml --horizon 2s
  $ schedkit run --policy fifo --priority 10 --cpus 2,3 -- ./server --port 8080
  $ schedkit run --exclusive --pid 4242
  $ schedkit run examples/paws/two-tasks.toml --allow-degraded --json

Policies that run on real cores: `schedkit policies`.";

pub const TOPO: &str = "\
Examples:
  $ schedkit topo
  $ schedkit topo --json";

pub const RESTORE: &str = "\
Examples:
  $ schedkit restore
  $ schedkit restore --state-dir /run/schedkit
  $ schedkit restore --force";

/// `restore --help`: examples, then its exit statuses.
pub fn restore() -> String {
    format!("{RESTORE}\n\n{}", crate::restore::EXIT_STATUS_HELP)
}

pub const CTL: &str = "\
Examples (beside a running `schedkit run examples/fair/tenants-1-2.toml`):
  $ schedkit ctl status
  $ schedkit ctl set-weight vm2 300
  $ schedkit ctl --pid 4242 status --json

`set-weight GROUP WEIGHT`: GROUP is a `[[group]]` name of the running scenario, WEIGHT its new
cgroup v2 cpu.weight (1 to 10000; 100 is the kernel's default).";

pub const BENCH: &str = "\
Examples:
  $ schedkit bench sim --quick
  $ schedkit bench sim --only gedf --json
  $ schedkit bench export --dir sets --tasks 20 --cores 4
  $ schedkit bench files sets/set-001.toml sets/set-002.toml";

pub const EXPERIMENT: &str = "\
Examples:
  $ schedkit experiment gang --sim-only --quick
  $ schedkit experiment paws --sim-only --quick
  $ schedkit experiment greedy --sim-only --quick
  $ schedkit experiment fibers-gauss --quick

Each experiment writes a table on stdout and its charts as SVG; see docs/experiments.md.";

pub const POLICIES: &str = "\
Examples:
  $ schedkit policies
  $ schedkit policies --sim";

pub const COMPLETIONS: &str = "\
Examples:
  $ schedkit completions bash > ~/.local/share/bash-completion/completions/schedkit
  $ schedkit completions zsh > ~/.zfunc/_schedkit
  $ schedkit completions fish > ~/.config/fish/completions/schedkit.fish";

pub const MAN: &str = "\
Examples:
  $ schedkit man --out /usr/local/share/man/man1
  $ schedkit man --out man && man -l man/schedkit-sim.1";

/// Every subcommand's help text with examples, by subcommand name (for the tests).
#[cfg(test)]
pub fn all() -> Vec<(&'static str, String)> {
    vec![
        ("sim", sim()),
        ("compare", compare()),
        ("run", RUN.into()),
        ("topo", TOPO.into()),
        ("restore", restore()),
        ("ctl", CTL.into()),
        ("bench", BENCH.into()),
        ("experiment", EXPERIMENT.into()),
        ("policies", POLICIES.into()),
        ("completions", COMPLETIONS.into()),
        ("man", MAN.into()),
    ]
}
