//! `schedkit experiment gang`: the flags, and printing and writing what
//! `schedkit_experiments::gang` returns (see there for the experiment).

use crate::failure::Failure;
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::Args;
use schedkit_core::Nanos;
use schedkit_experiments::gang::{self, render, GangOptions};
use schedkit_experiments::Error;
use std::path::PathBuf;

#[derive(Args)]
pub struct GangExpArgs {
    /// Quanta of the real runs, in ms.
    #[arg(long, value_delimiter = ',', default_value = "10,50,100,200,1000")]
    pub quanta: Vec<u64>,
    /// Repeats per configuration (medians are reported).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Length of each real run.
    #[arg(long, default_value = "3s")]
    pub duration: String,
    /// Busy work between two barriers.
    #[arg(long, default_value = "100us")]
    pub compute: String,
    /// A short run for CI: one repeat of 1 s, quanta 20 and 100 ms, fewer simulated slices,
    /// a 128-node scale row.
    #[arg(long)]
    pub quick: bool,
    /// Nice value of the job threads in every real configuration (solo, default, gang). The
    /// default, -10, keeps other load on a shared machine from dominating the comparison;
    /// 0 shows the plain kernel.
    #[arg(long, default_value_t = -10, allow_hyphen_values = true)]
    pub nice: i32,
    /// Skip part (a) (it needs root for the freezer).
    #[arg(long)]
    pub sim_only: bool,
    /// Nodes of the scale row (part c).
    #[arg(long, default_value_t = 1024)]
    pub scale_nodes: usize,
    /// Directory for gang.json, gang-real.svg and gang-sim.svg.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
}

impl GangExpArgs {
    fn options(&self) -> Result<GangOptions, Error> {
        let nanos =
            |flag: &str, v: &str| Nanos::parse(v).map_err(|m| Error::bad_option(flag, v, m));
        Ok(GangOptions {
            quanta: self.quanta.clone(),
            repeat: self.repeat,
            duration: nanos("duration", &self.duration)?,
            compute: nanos("compute", &self.compute)?,
            quick: self.quick,
            nice: self.nice,
            sim_only: self.sim_only,
            scale_nodes: self.scale_nodes,
        })
    }
}

/// Writes `contents` to `dir/name` and says so on stderr.
pub fn write_out(
    dir: &std::path::Path,
    name: &str,
    what: &str,
    contents: &str,
) -> Result<(), Failure> {
    let path = dir.join(name);
    std::fs::write(&path, contents)
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    eprintln!("{what}: {}", path.display());
    Ok(())
}

pub fn run(a: GangExpArgs) -> Result<(), Failure> {
    let options = a.options()?;
    std::fs::create_dir_all(&a.out).map_err(|e| Error::io(a.out.display(), e))?;
    let result = gang::run(&options, &ThisMachine, &Bar::experiment())?;
    if let Some(real) = &result.real {
        println!("{}", render::real_table(real));
        write_out(&a.out, "gang-real.svg", "chart", &render::real_chart(real))?;
    }
    println!("{}", render::sim_table(&result.sim));
    write_out(
        &a.out,
        "gang-sim.svg",
        "chart",
        &render::sim_chart(&result.sim),
    )?;
    println!("{}", render::scale_table(&result.scale));
    let json = serde_json::to_string_pretty(&render::json(&result)).expect("json");
    write_out(&a.out, "gang.json", "data", &json)
}
