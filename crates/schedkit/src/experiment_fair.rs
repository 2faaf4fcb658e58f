//! `schedkit experiment greedy | global-fairness | tenants`: the flags, and printing and
//! writing what `schedkit_experiments::fair` returns (see there for the experiments).

use crate::experiment_args::ExperimentFlags;
use crate::failure::Failure;
use crate::machine::ThisMachine;
use crate::progress::Bar;
use clap::Args;
use schedkit_core::Nanos;
use schedkit_experiments::fair::{global, greedy, spinner, tenants, FairOptions, Sample};
use schedkit_experiments::Error;
use std::path::PathBuf;

/// Options every fair-share experiment takes. `--repeat` defaults to 3 (mean and 95 %
/// confidence interval over them; the simulator is deterministic and runs once); `--quick`
/// means 1 repeat, 2 s runs (change at 1 s) and fewer configurations.
#[derive(Args, Clone)]
pub struct FairCommon {
    #[command(flatten)]
    pub flags: ExperimentFlags,
    /// Length of each run.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Sampling period of the real engine (per-thread CPU time; lag resolution): a duration
    /// up to 10ms, fixed, or `auto`: 5 ms, lengthened up to 10 ms while sampling would cost
    /// more than 1 % of one core.
    #[arg(long, default_value = "auto")]
    pub sample: String,
    /// Controller period (`policy.period`) of pfs/tfps/twrs/tenants/global-fair, real and
    /// simulated. Default: the scenario file's (100 ms; 20 ms for global-fairness).
    #[arg(long)]
    pub period: Option<String>,
    /// Added to every busy process's nice value (e.g. -10 on a machine that others load:
    /// prio_to_weight ratios stay within 0.1 %, so GPS and the policies' weights keep their
    /// proportions while outside load weighs less). The GPS reference uses the shifted values.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub nice: i32,
    /// Run as a busy process (internal): `N` threads, or `N,M@T` (M threads from T on).
    #[arg(long, hide = true)]
    pub spinner: Option<String>,
}

#[derive(Args)]
pub struct GreedyArgs {
    #[command(flatten)]
    pub common: FairCommon,
    /// Threads of process C.
    #[arg(long, default_value_t = 50)]
    pub c_threads: u32,
}

#[derive(Args)]
pub struct GlobalArgs {
    #[command(flatten)]
    pub common: FairCommon,
}

#[derive(Args)]
pub struct TenantsArgs {
    #[command(flatten)]
    pub common: FairCommon,
}

impl FairCommon {
    /// The library's options; runs as a spinner (and never returns) under `--spinner`.
    fn options(&self) -> Result<FairOptions, Failure> {
        if let Some(p) = &self.spinner {
            let plan = spinner::parse_plan(p).map_err(|m| Error::bad_option("spinner", p, m))?;
            spinner::spinner(&plan);
        }
        let nanos =
            |flag: &str, v: &str| Nanos::parse(v).map_err(|m| Error::bad_option(flag, v, m));
        Ok(FairOptions {
            repeat: self.flags.repeat_or(3),
            quick: self.flags.quick,
            duration: nanos("duration", &self.duration)?,
            sample: Sample::parse(&self.sample)?,
            period: self
                .period
                .as_deref()
                .map(|p| nanos("period", p))
                .transpose()?,
            sim_only: self.flags.sim_only,
            nice: self.nice,
        })
    }

    /// Writes the JSON and the charts, then prints the JSON or the text and the files.
    fn emit(
        &self,
        name: &str,
        json: serde_json::Value,
        charts: Vec<(&str, String)>,
        text: impl FnOnce() -> String,
    ) -> Result<(), Failure> {
        let f = &self.flags;
        let doc = serde_json::to_string_pretty(&json).expect("json");
        let jp = f.write(&format!("{name}.json"), &doc)?;
        let mut files: Vec<PathBuf> = vec![jp];
        for (file, svg) in charts {
            files.push(f.write(file, &svg)?);
        }
        if f.json {
            println!("{json}");
            return Ok(());
        }
        print!("{}", text());
        let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        let (last, rest) = names.split_last().expect("the JSON file");
        println!("\nwrote {} and {last}", rest.join(", "));
        Ok(())
    }
}

fn bar() -> Bar {
    Bar::styled("{bar:40} {pos}/{len} runs · {msg} · ETA {eta}")
}

pub fn greedy(a: GreedyArgs) -> Result<(), Failure> {
    let o = greedy::GreedyOptions {
        common: a.common.options()?,
        c_threads: a.c_threads,
    };
    let r = greedy::run(&o, &ThisMachine, &bar())?;
    a.common
        .emit("greedy", greedy::json(&r), greedy::charts(&r), || {
            greedy::text(&r)
        })
}

pub fn global_fairness(a: GlobalArgs) -> Result<(), Failure> {
    let r = global::run(&a.common.options()?, &ThisMachine, &bar())?;
    a.common.emit(
        "global-fairness",
        global::json(&r),
        global::charts(&r),
        || global::text(&r),
    )
}

pub fn tenants(a: TenantsArgs) -> Result<(), Failure> {
    let r = tenants::run(&a.common.options()?, &ThisMachine, &bar())?;
    a.common
        .emit("tenants", tenants::json(&r), tenants::charts(&r), || {
            tenants::text(&r)
        })
}
