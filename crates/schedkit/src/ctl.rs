//! `schedkit ctl`: talk to a running `schedkit run` of policy `tenants` over its control
//! socket (`schedkit_linux::ctl`): change a group's weight while it runs, or show its state.
//!
//! Exit status: 0 done; 2 refused input (weight 0 or above 10000, unknown group, no such run);
//! 1 the run could not be reached, refused the connection (not its owner), had all its control
//! connections open, or ended or did not answer in time.

use crate::failure::Failure;
use clap::{Args, Subcommand};
use schedkit_linux::ctl::{self, Answer, Request};
use std::path::PathBuf;

#[derive(Args)]
pub struct CtlArgs {
    /// The run's control socket (default: the only `<pid>.sock` in the state directory).
    #[arg(long, value_name = "PATH", global = true)]
    pub socket: Option<PathBuf>,
    /// The run's process id (its socket is `<state dir>/<pid>.sock`).
    #[arg(long, value_name = "PID", global = true, conflicts_with = "socket")]
    pub pid: Option<i32>,
    /// Print the reply as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Subcommand)]
pub enum CtlCommand {
    /// Set group GROUP's weight to WEIGHT (1..10000, cgroup v2 cpu.weight units); takes effect
    /// at once and is recorded in the run's report.
    SetWeight {
        /// A `[[group]]` name of the running scenario (`ctl status` lists them).
        group: String,
        /// The group's new weight, 1 to 10000 (cgroup v2 cpu.weight; 100 is the kernel's
        /// default).
        weight: u64,
    },
    /// Show the run's policy, groups, their weights (and what the kernel holds) and the
    /// changes so far.
    Status,
}

pub fn ctl(a: CtlArgs) -> Result<(), Failure> {
    let req = match &a.command {
        CtlCommand::SetWeight { group, weight } => ctl::set_weight(group, *weight)?,
        CtlCommand::Status => Request::Status,
    };
    let path = ctl::find_socket(a.socket.as_deref(), a.pid)?;
    let reply = ctl::send(&path, &req)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reply).expect("reply serialises")
        );
    }
    let answer = reply.answer()?;
    if !a.json {
        match answer {
            Answer::Status(s) => print!("{}", schedkit_render::ctl::status(&s)),
            Answer::Message(m) => println!("{m}"),
        }
    }
    Ok(())
}
