//! `schedkit ctl`: talk to a running `schedkit run` of policy `tenants` over its control
//! socket (`schedkit_linux::ctl`): change a group's weight while it runs, or show its state.
//!
//! Exit status: 0 done; 2 refused input (weight 0 or above 10000, unknown group, no such run);
//! 1 the run could not be reached, refused the connection (not its owner), had all its control
//! connections open, or ended or did not answer in time.

use crate::failure::{Failure, EXIT_BAD_INPUT};
use clap::{Args, Subcommand};
use schedkit_linux::ctl::{self, Reply, Request};
use schedkit_linux::journal;
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
    SetWeight { group: String, weight: u64 },
    /// Show the run's policy, groups, their weights (and what the kernel holds) and the
    /// changes so far.
    Status,
}

fn bad(msg: impl Into<String>) -> Failure {
    Failure {
        status: EXIT_BAD_INPUT,
        message: msg.into(),
    }
}

fn socket(a: &CtlArgs) -> Result<PathBuf, Failure> {
    if let Some(s) = &a.socket {
        return Ok(s.clone());
    }
    let dir = journal::state_dir();
    if let Some(pid) = a.pid {
        return Ok(ctl::socket_path(&dir, pid));
    }
    // A run killed with SIGKILL leaves its socket file: only live runs count.
    let found: Vec<(i32, PathBuf)> = ctl::sockets(&dir)
        .into_iter()
        // SAFETY: signal 0 only checks that the process exists.
        .filter(|(pid, _)| unsafe { libc::kill(*pid, 0) == 0 })
        .collect();
    match found.len() {
        1 => Ok(found[0].1.clone()),
        0 => Err(bad(format!(
            "no running `schedkit run` with a control socket in {} (only policy tenants has one)",
            dir.display()
        ))),
        _ => Err(bad(format!(
            "several runs have control sockets in {} (pids {}): choose one with --pid",
            dir.display(),
            found
                .iter()
                .map(|(p, _)| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

pub fn ctl(a: CtlArgs) -> Result<(), Failure> {
    let req = match &a.command {
        CtlCommand::SetWeight { group, weight } => {
            // Checked here for a clear error without a round trip; the run checks again.
            ctl::check_weight(*weight).map_err(bad)?;
            Request::SetWeight {
                group: group.clone(),
                weight: *weight,
            }
        }
        CtlCommand::Status => Request::Status,
    };
    let path = socket(&a)?;
    let reply = ctl::request(&path, &req).map_err(|e| Failure {
        status: if e.kind() == std::io::ErrorKind::NotFound {
            EXIT_BAD_INPUT
        } else {
            1
        },
        message: format!("cannot reach the run at {}: {e}", path.display()),
    })?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reply).expect("reply serialises")
        );
    }
    match reply {
        Reply {
            ok: false, error, ..
        } => {
            let msg = error.unwrap_or_else(|| "refused".into());
            // Refusals of the request itself are bad input; a refused peer, a run with all its
            // control connections open, or one that ended or did not answer in time is not.
            let not_input = ["permission denied", "busy:", "the run "];
            let status = if not_input.iter().any(|p| msg.starts_with(p)) {
                1
            } else {
                EXIT_BAD_INPUT
            };
            Err(Failure {
                status,
                message: msg,
            })
        }
        Reply {
            status: Some(s), ..
        } if !a.json => {
            println!(
                "run {} · policy {} · period {} · {} elapsed{}",
                s.pid,
                s.policy,
                schedkit_core::Nanos(s.period_ns),
                schedkit_core::Nanos(s.elapsed_ns),
                if s.controller.is_empty() {
                    String::new()
                } else {
                    format!(" · {}", s.controller)
                }
            );
            let rows: Vec<Vec<String>> = s
                .groups
                .iter()
                .map(|g| {
                    vec![
                        g.name.clone(),
                        g.weight.to_string(),
                        g.kernel_value.map_or("-".into(), |v| v.to_string()),
                    ]
                })
                .collect();
            let w = rows.iter().map(|r| r[0].len()).max().unwrap_or(0).max(5);
            println!("{:<w$}  {:>6}  {:>12}", "group", "weight", "kernel value");
            for r in rows {
                println!("{:<w$}  {:>6}  {:>12}", r[0], r[1], r[2]);
            }
            for c in &s.changes {
                println!(
                    "weight of group {} set to {} at {}",
                    c.group,
                    c.weight,
                    schedkit_core::Nanos(c.t_ns)
                );
            }
            Ok(())
        }
        Reply { message, .. } => {
            if !a.json {
                println!("{}", message.unwrap_or_else(|| "done".into()));
            }
            Ok(())
        }
    }
}
