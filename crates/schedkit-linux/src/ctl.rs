//! The control socket of a `tenants` run: `schedkit ctl set-weight GROUP WEIGHT` and
//! `schedkit ctl status` (seed 004, chapter 5: the thesis changes a VM's weight through a new
//! system call while it runs; schedkit does it from user space through this socket).
//!
//! ## Where and who
//!
//! `<state dir>/<pid>.sock`, i.e. `/run/schedkit/<pid>.sock` for root (the state dir of the
//! journal, see [`crate::journal::state_dir`]); the directory is made 0700 and the socket
//! 0600 before anyone can reach it, and every connection's peer credentials (SO_PEERCRED) are
//! checked: only the run's own uid is served, anyone else gets a refusal and nothing changes.
//! File modes alone would let root in; the credential check does not (the issue: "only the
//! run's owner").
//!
//! ## Protocol
//!
//! One JSON request per connection, one line (`{"op":"set-weight","group":"a","weight":3}`
//! or `{"op":"status"}`), one JSON reply line (`{"ok":true,...}` or
//! `{"ok":false,"error":"..."}`). The run polls the socket from its sampling loop (every
//! sample, 10 ms by default) and applies a valid weight at once, so a change takes effect well
//! within one controller period. Weights are v2 `cpu.weight` units, 1..10000; 0 or more than
//! 10000 is refused, as is an unknown group, and then nothing changes.
//!
//! Rejected: a thread per connection (the run loop owns the cgroups; one request at a time
//! is plenty for a human or a script), and signals carrying a weight (no reply, no
//! credentials).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest weight `set-weight` accepts (cgroup v2 `cpu.weight` range).
pub const MAX_WEIGHT: u64 = 10_000;

/// A request to a running `schedkit run`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    SetWeight { group: String, weight: u64 },
    Status,
}

/// One group as `status` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    pub name: String,
    pub weight: u64,
    /// What the kernel holds in the group's weight file (`cpu.weight` or `cpu.shares`).
    pub kernel_value: Option<u64>,
}

/// One weight change of the run's timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightChange {
    /// Run time of the change, ns.
    pub t_ns: u64,
    pub group: String,
    pub weight: u64,
}

/// `status`'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub pid: i32,
    pub policy: String,
    pub period_ns: u64,
    pub elapsed_ns: u64,
    pub controller: String,
    pub groups: Vec<GroupStatus>,
    pub changes: Vec<WeightChange>,
}

/// The run's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

impl Reply {
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply {
            ok: false,
            error: Some(msg.into()),
            message: None,
            status: None,
        }
    }
    pub fn done(msg: impl Into<String>) -> Reply {
        Reply {
            ok: true,
            error: None,
            message: Some(msg.into()),
            status: None,
        }
    }
}

/// Checks a weight: 1..=10000.
pub fn check_weight(weight: u64) -> std::result::Result<(), String> {
    if weight == 0 || weight > MAX_WEIGHT {
        return Err(format!(
            "weight {weight} is out of range: a group weight is 1..{MAX_WEIGHT} (cgroup v2 cpu.weight units)"
        ));
    }
    Ok(())
}

/// The socket path of run `pid` in `dir`.
pub fn socket_path(dir: &Path, pid: i32) -> PathBuf {
    dir.join(format!("{pid}.sock"))
}

/// The uid of the process at the other end of `s` (SO_PEERCRED).
pub fn peer_uid(s: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: cred and len are valid for writes of the sizes passed.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// The listening side, owned by the run.
pub struct CtlServer {
    listener: UnixListener,
    path: PathBuf,
    owner: u32,
    /// Connections refused for their credentials.
    pub refused: u64,
}

impl CtlServer {
    /// Binds `<dir>/<pid>.sock` (dir 0700, socket 0600).
    pub fn bind(dir: &Path) -> Result<CtlServer> {
        let path = socket_path(dir, std::process::id() as i32);
        Self::bind_at(&path, 0o600)
    }

    /// Binds `path` with file mode `mode` (its directory is made 0700 first). Tests use a
    /// wider mode to reach the credential check itself.
    pub fn bind_at(path: &Path, mode: u32) -> Result<CtlServer> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        if mode == 0o600 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::io(format!("chmod 0700 {}", dir.display()), e))?;
        }
        let _ = std::fs::remove_file(path); // a stale socket of a recycled pid
        let listener = UnixListener::bind(path)
            .map_err(|e| Error::io(format!("bind {}", path.display()), e))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(format!("chmod {}", path.display()), e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("control socket", e))?;
        Ok(CtlServer {
            listener,
            path: path.into(),
            // SAFETY: geteuid has no preconditions.
            owner: unsafe { libc::geteuid() },
            refused: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves every pending connection with `handle`; returns how many were served.
    pub fn poll(&mut self, mut handle: impl FnMut(Request) -> Reply) -> usize {
        let mut n = 0;
        while let Ok((s, _)) = self.listener.accept() {
            n += 1;
            let reply = match peer_uid(&s) {
                Ok(uid) if uid == self.owner => match read_request(&s) {
                    Ok(req) => handle(req),
                    Err(e) => Reply::error(format!("bad request: {e}")),
                },
                Ok(uid) => {
                    self.refused += 1;
                    Reply::error(format!(
                        "permission denied: uid {uid} is not the run's owner (uid {})",
                        self.owner
                    ))
                }
                Err(e) => Reply::error(format!("cannot read peer credentials: {e}")),
            };
            let _ = send(&s, &reply);
        }
        n
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn read_request(s: &UnixStream) -> std::io::Result<Request> {
    // The client writes at once; a silent peer must not hold the run loop.
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut line = String::new();
    BufReader::new(s).take_line(&mut line)?;
    serde_json::from_str(line.trim())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

trait TakeLine {
    fn take_line(&mut self, line: &mut String) -> std::io::Result<()>;
}

impl<R: BufRead> TakeLine for R {
    /// One line of at most 64 KiB.
    fn take_line(&mut self, line: &mut String) -> std::io::Result<()> {
        let mut limited = std::io::Read::take(self, 64 * 1024);
        limited.read_line(line)?;
        Ok(())
    }
}

fn send(mut s: &UnixStream, reply: &Reply) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_write_timeout(Some(Duration::from_millis(100)))?;
    let mut text = serde_json::to_string(reply).expect("reply serialises");
    text.push('\n');
    s.write_all(text.as_bytes())
}

/// Client: sends `req` to the run listening on `path` and waits for its reply (up to 5 s).
pub fn request(path: &Path, req: &Request) -> std::io::Result<Reply> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut text = serde_json::to_string(req).expect("request serialises");
    text.push('\n');
    s.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(&s).take_line(&mut line)?;
    serde_json::from_str(line.trim())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The sockets of runs in `dir` (`<pid>.sock`), as (pid, path), sorted by pid.
pub fn sockets(dir: &Path) -> Vec<(i32, PathBuf)> {
    let mut v: Vec<(i32, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = name.strip_suffix(".sock")?.parse().ok()?;
                    Some((pid, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_out_of_range_are_refused() {
        assert!(check_weight(0).is_err());
        assert!(check_weight(10_001).is_err());
        assert!(check_weight(1).is_ok());
        assert!(check_weight(10_000).is_ok());
    }

    #[test]
    fn request_round_trip_over_the_socket() {
        let dir = std::env::temp_dir().join(format!("sk-ctl-{}", std::process::id()));
        let path = dir.join("1.sock");
        let mut srv = CtlServer::bind_at(&path, 0o600).expect("bind");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let p2 = path.clone();
        let client = std::thread::spawn(move || {
            request(
                &p2,
                &Request::SetWeight {
                    group: "a".into(),
                    weight: 3,
                },
            )
        });
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while seen.is_empty() && std::time::Instant::now() < deadline {
            srv.poll(|r| {
                seen.push(r);
                Reply::done("set")
            });
            std::thread::sleep(Duration::from_millis(5));
        }
        let reply = client.join().unwrap().expect("reply");
        assert!(reply.ok);
        assert_eq!(
            seen,
            vec![Request::SetWeight {
                group: "a".into(),
                weight: 3
            }]
        );
        assert_eq!(sockets(&dir), vec![(1, path.clone())]);
        drop(srv);
        assert!(!path.exists(), "socket removed with the server");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
