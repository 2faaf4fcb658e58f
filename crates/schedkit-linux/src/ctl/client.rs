//! The client's side of the control socket (`schedkit ctl`): which run to talk to, the
//! request, and what the answer means. Every failure says whether the input was at fault (a
//! weight out of range, an unknown group, no such run: exit status 2 at the CLI) or the run
//! or the connection (1).

use super::{check_weight, request, socket_path, sockets, Reply, Request, Status};
use std::path::{Path, PathBuf};

/// Why a `ctl` request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    /// The input was refused (rather than the run unreachable, busy or gone).
    pub bad_input: bool,
    pub message: String,
}

impl ClientError {
    fn input(message: impl Into<String>) -> ClientError {
        ClientError {
            bad_input: true,
            message: message.into(),
        }
    }
}

/// What a run answered to a request it accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `status`'s state of the run.
    Status(Status),
    /// What the run did (`done` when it says nothing).
    Message(String),
}

/// The request to set `group`'s weight, the weight checked here for a clear error without a
/// round trip (the run checks again).
pub fn set_weight(group: &str, weight: u64) -> Result<Request, ClientError> {
    check_weight(weight).map_err(ClientError::input)?;
    Ok(Request::SetWeight {
        group: group.to_string(),
        weight,
    })
}

/// The control socket to talk to: `socket` as given, else run `pid`'s in the state directory,
/// else the one live run's there (a run killed with SIGKILL leaves its socket file behind, so
/// only runs whose process exists count).
pub fn find_socket(socket: Option<&Path>, pid: Option<i32>) -> Result<PathBuf, ClientError> {
    if let Some(s) = socket {
        return Ok(s.to_path_buf());
    }
    let dir = crate::journal::state_dir();
    if let Some(pid) = pid {
        return Ok(socket_path(&dir, pid));
    }
    let found: Vec<(i32, PathBuf)> = sockets(&dir)
        .into_iter()
        // SAFETY: signal 0 only checks that the process exists.
        .filter(|(pid, _)| unsafe { libc::kill(*pid, 0) == 0 })
        .collect();
    match found.len() {
        1 => Ok(found[0].1.clone()),
        0 => Err(ClientError::input(format!(
            "no running `schedkit run` with a control socket in {} (only policy tenants has one)",
            dir.display()
        ))),
        _ => Err(ClientError::input(format!(
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

/// Sends `req` to the run at `path`; no socket there is bad input (no such run).
pub fn send(path: &Path, req: &Request) -> Result<Reply, ClientError> {
    request(path, req).map_err(|e| ClientError {
        bad_input: e.kind() == std::io::ErrorKind::NotFound,
        message: format!("cannot reach the run at {}: {e}", path.display()),
    })
}

impl Reply {
    /// The answer of an accepted request, or the refusal: a refusal of the request itself is
    /// bad input; a refused peer, a run with all its control connections open, or one that
    /// ended or did not answer in time is not.
    pub fn answer(self) -> Result<Answer, ClientError> {
        match self {
            Reply {
                ok: false, error, ..
            } => {
                let message = error.unwrap_or_else(|| "refused".into());
                let not_input = ["permission denied", "busy:", "the run "];
                Err(ClientError {
                    bad_input: !not_input.iter().any(|p| message.starts_with(p)),
                    message,
                })
            }
            Reply {
                status: Some(s), ..
            } => Ok(Answer::Status(s)),
            Reply { message, .. } => Ok(Answer::Message(message.unwrap_or_else(|| "done".into()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weight_out_of_range_is_bad_input_before_any_round_trip() {
        let e = set_weight("vm1", 0).unwrap_err();
        assert!(e.bad_input, "{e:?}");
        assert!(e.message.contains("out of range"), "{e:?}");
        assert_eq!(
            set_weight("vm1", 3),
            Ok(Request::SetWeight {
                group: "vm1".into(),
                weight: 3
            })
        );
    }

    #[test]
    fn refusals_of_the_request_are_bad_input_and_those_of_the_run_are_not() {
        let e = Reply::error("unknown group \"x\"").answer().unwrap_err();
        assert!(e.bad_input);
        assert_eq!(e.message, "unknown group \"x\"");
        for msg in [
            "permission denied: uid 7",
            "busy: 128 connections",
            "the run ended",
        ] {
            let e = Reply::error(msg).answer().unwrap_err();
            assert!(!e.bad_input, "{msg}");
        }
        assert_eq!(
            Reply::done("weight set").answer(),
            Ok(Answer::Message("weight set".into()))
        );
        let silent = Reply {
            message: None,
            ..Reply::done("")
        };
        assert_eq!(silent.answer(), Ok(Answer::Message("done".into())));
    }

    #[test]
    fn no_socket_at_the_path_is_bad_input() {
        let dir = std::env::temp_dir().join(format!("schedkit-ctl-client-{}", std::process::id()));
        let e = send(&dir.join("1.sock"), &Request::Status).unwrap_err();
        assert!(e.bad_input, "{e:?}");
        assert!(e.message.starts_with("cannot reach the run at "), "{e:?}");
    }
}
