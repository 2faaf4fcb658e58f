//! `schedkit experiment gang`: the flags, and printing and writing what
//! `schedkit_experiments::gang` returns (see there for the experiment).

use crate::experiment_args::ExperimentFlags;
use crate::failure::Failure;
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::Args;
use schedkit_core::Nanos;
use schedkit_experiments::gang::{self, render, GangOptions};
use schedkit_experiments::Error;

/// `--repeat` defaults to 3 (medians are reported); `--quick` is one repeat of 1 s, quanta 20
/// and 100 ms, fewer simulated slices and a 128-node scale row; `--sim-only` skips part (a),
/// which needs root for the freezer.
#[derive(Args)]
pub struct GangExpArgs {
    #[command(flatten)]
    pub flags: ExperimentFlags,
    /// Quanta of the real runs, in ms.
    #[arg(long, value_delimiter = ',', default_value = "10,50,100,200,1000")]
    pub quanta: Vec<u64>,
    /// Length of each real run.
    #[arg(long, default_value = "3s")]
    pub duration: String,
    /// Busy work between two barriers.
    #[arg(long, default_value = "100us")]
    pub compute: String,
    /// Nice value of the job threads in every real configuration (solo, default, gang). The
    /// default, -10, keeps other load on a shared machine from dominating the comparison;
    /// 0 shows the plain kernel.
    #[arg(long, default_value_t = -10, allow_hyphen_values = true)]
    pub nice: i32,
    /// Nodes of the scale row (part c).
    #[arg(long, default_value_t = 1024)]
    pub scale_nodes: usize,
}

impl GangExpArgs {
    fn options(&self) -> Result<GangOptions, Error> {
        let nanos =
            |flag: &str, v: &str| Nanos::parse(v).map_err(|m| Error::bad_option(flag, v, m));
        Ok(GangOptions {
            quanta: self.quanta.clone(),
            repeat: self.flags.repeat_or(3),
            duration: nanos("duration", &self.duration)?,
            compute: nanos("compute", &self.compute)?,
            quick: self.flags.quick,
            nice: self.nice,
            sim_only: self.flags.sim_only,
            scale_nodes: self.scale_nodes,
        })
    }
}

pub fn run(a: GangExpArgs) -> Result<(), Failure> {
    let options = a.options()?;
    let f = &a.flags;
    f.out_dir()?;
    let result = gang::run(&options, &ThisMachine, &Bar::experiment())?;
    let mut files = Vec::new();
    if let Some(real) = &result.real {
        if !f.json {
            println!("{}", render::real_table(real));
        }
        files.push(f.write("gang-real.svg", &render::real_chart(real))?);
    }
    files.push(f.write("gang-sim.svg", &render::sim_chart(&result.sim))?);
    let json = serde_json::to_string_pretty(&render::json(&result)).expect("json");
    let jp = f.write("gang.json", &json)?;
    if f.json {
        println!("{json}");
        return Ok(());
    }
    println!("{}", render::sim_table(&result.sim));
    println!("{}", render::scale_table(&result.scale));
    for p in files {
        eprintln!("chart: {}", p.display());
    }
    eprintln!("data: {}", jp.display());
    Ok(())
}
