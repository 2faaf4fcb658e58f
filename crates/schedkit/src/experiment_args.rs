//! The output flags every `schedkit experiment` shares: `--out DIR`, `--json`, `--sim-only`,
//! `--quick`, `--repeat N` (one `#[command(flatten)]` struct, so they are spelled and
//! documented the same everywhere). An experiment that has no use for one refuses it with
//! the reason ([`ExperimentFlags::refuse`]) instead of ignoring it.

use crate::failure::{Failure, EXIT_BAD_INPUT};
use clap::Args;
use schedkit_experiments::Error;
use std::path::{Path, PathBuf};

#[derive(Args, Clone, Debug)]
pub struct ExperimentFlags {
    /// Directory for the experiment's JSON and SVG files (created when missing).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
    /// Print the results as JSON on stdout instead of the tables (the files are written
    /// either way).
    #[arg(long)]
    pub json: bool,
    /// Only the simulated part: no real runs, no root needed.
    #[arg(long)]
    pub sim_only: bool,
    /// A short run for CI (fewer configurations, repeats and shorter runs; see the
    /// experiment's own help).
    #[arg(long)]
    pub quick: bool,
    /// Repeats of every real configuration (default: the experiment's own, in its help).
    #[arg(long, value_name = "N", alias = "repeats")]
    pub repeat: Option<usize>,
}

/// A flag an experiment refuses.
#[derive(Clone, Copy)]
pub enum Flag {
    SimOnly,
    Repeat,
    Json,
}

impl ExperimentFlags {
    /// Exit 2 naming `flag` and why `experiment` has no use for it, when it was given.
    pub fn refuse(&self, flag: Flag, experiment: &str, why: &str) -> Result<(), Failure> {
        let (given, name) = match flag {
            Flag::SimOnly => (self.sim_only, "--sim-only"),
            Flag::Repeat => (self.repeat.is_some(), "--repeat"),
            Flag::Json => (self.json, "--json"),
        };
        if given {
            return Err(Failure {
                status: EXIT_BAD_INPUT,
                message: format!("{name}: experiment {experiment} {why}"),
            });
        }
        Ok(())
    }

    /// `--repeat`, or the experiment's default.
    pub fn repeat_or(&self, default: usize) -> usize {
        self.repeat.unwrap_or(default)
    }

    /// Creates the output directory.
    pub fn out_dir(&self) -> Result<&Path, Failure> {
        std::fs::create_dir_all(&self.out).map_err(|e| Error::io(self.out.display(), e))?;
        Ok(&self.out)
    }

    /// Writes `contents` to `DIR/name` and returns the path.
    pub fn write(&self, name: &str, contents: &str) -> Result<PathBuf, Failure> {
        let path = self.out_dir()?.join(name);
        std::fs::write(&path, contents)
            .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
        Ok(path)
    }
}
