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
//! `{"ok":false,"error":"..."}`). Weights are v2 `cpu.weight` units, 1..10000; 0 or more than
//! 10000 is refused, as is an unknown group, and then nothing changes.
//!
//! ## Off the run loop
//!
//! Connections are served by a thread of their own, `schedkit-ctl`, which multiplexes the
//! listening socket and every open connection with poll(2) on non-blocking sockets. The run
//! loop never touches a client: a whole, well-formed request from the run's owner goes to it
//! through a channel, with a reply channel of its own; [`CtlServer::poll`] drains the channel
//! without blocking at every sample (10 ms by default), so a weight is applied well within one
//! controller period, by the thread that owns the cgroups; the reply goes back through its
//! channel and the server thread writes it. Bounds, so that no client holds anything:
//!
//! - [`MAX_CONNECTIONS`] open connections; one more is answered an error and closed at once;
//! - [`REQUEST_DEADLINE`] (1 s from the accept) to deliver a whole request line; a silent or
//!   dripping client is answered an error and closed when it passes;
//! - [`MAX_LINE`] (64 KiB) per request line;
//! - [`REPLY_DEADLINE`] for the run to answer, [`WRITE_DEADLINE`] for the client to take the
//!   reply.
//!
//! One multiplexing thread rather than a (bounded) thread per connection: a deadline is just
//! the poll timeout, with nothing to re-arm per read; the bound costs a slot in a `Vec`, not
//! a thread and its stack, so a client opening connections creates no threads; and there is
//! one thread whose scheduling class to set. That thread is SCHED_OTHER (nice 0) even when it
//! is started from a SCHED_FIFO engine thread: a real-time server thread that clients keep
//! busy would take a core from the job. As SCHED_OTHER it still answers under load: it sleeps
//! between requests, and CFS/EEVDF serve a waking sleeper promptly (docs/results/ctl.md).
//! The thread stops, answering "the run ended" to whoever is still connected, and the socket
//! file goes, when the [`CtlServer`] is dropped: at the end of the run, after SIGTERM/SIGINT
//! (the run loop ends) and on an error (the run's state is dropped).
//!
//! Rejected: serving the socket from the run loop itself (what schedkit did first: each
//! connection was read there with a 100 ms timeout, so 100 idle connections, or one client
//! sending a byte every 20 ms, stalled sampling, the horizon and SIGTERM by seconds); a mutex
//! around the run's state (the cgroups and the trace belong to the run loop, and with the
//! channel every write to them stays there); signals carrying a weight (no reply, no
//! credentials).

use crate::sched::{self, Policy};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod client;
mod conn;
pub use client::{find_socket, send, set_weight, Answer, ClientError};
use conn::{send_nosignal, Conn, State};

/// Open control connections at most; one more is answered an error and closed at once.
pub const MAX_CONNECTIONS: usize = 128;
/// Time from the accept to a whole request line.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(1);
/// Time the run has to answer a request (the client waits 5 s).
pub const REPLY_DEADLINE: Duration = Duration::from_secs(4);
/// Time the client has to take its reply.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(1);
/// Longest request line, newline included.
pub const MAX_LINE: usize = 64 * 1024;

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

/// What the server thread counted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtlCounts {
    /// Connections refused for their peer credentials.
    pub refused: u64,
    /// Connections turned away because [`MAX_CONNECTIONS`] were open.
    pub turned_away: u64,
    /// Connections closed at a deadline (no whole request line in time, no reply taken).
    pub timed_out: u64,
    /// Request lines longer than [`MAX_LINE`].
    pub oversize: u64,
}

#[derive(Default)]
struct Counters {
    refused: AtomicU64,
    turned_away: AtomicU64,
    timed_out: AtomicU64,
    oversize: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A request on its way to the run, with the channel its reply goes back through.
struct Job {
    request: Request,
    reply: SyncSender<Reply>,
}

/// The control socket of a run: its server thread, and the run's end of the request channel.
pub struct CtlServer {
    path: PathBuf,
    jobs: Receiver<Job>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    /// Written to wake the server thread (a reply is ready, or it must stop).
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
    /// The server thread's TID, once it has left a real-time class (0 before).
    tid: Arc<AtomicI32>,
    warnings: Arc<Warnings>,
}

/// What went wrong on the server thread that the user should hear of (a library does not
/// print): each distinct message once, with how often it happened, since a failing accept
/// repeats every few milliseconds.
#[derive(Default)]
struct Warnings(std::sync::Mutex<Vec<(String, u64)>>);

impl Warnings {
    fn push(&self, message: String) {
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match w.iter_mut().find(|(m, _)| *m == message) {
            Some((_, n)) => *n += 1,
            None => w.push((message, 1)),
        }
    }

    fn take(&self) -> Vec<String> {
        self.take_counted()
            .into_iter()
            .map(|(m, n)| counted(&m, n))
            .collect()
    }

    fn take_counted(&self) -> Vec<(String, u64)> {
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *w)
    }
}

/// A warning with how often it happened, as the run's warnings show it.
pub fn counted(message: &str, times: u64) -> String {
    match times {
        1 => message.to_string(),
        n => format!("{message} ({n} times)"),
    }
}

fn unclaimed_warnings() -> std::sync::MutexGuard<'static, Vec<String>> {
    static W: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    W.lock().unwrap_or_else(|p| p.into_inner())
}

/// The warnings of control sockets dropped before their owner took them with
/// [`CtlServer::take_warnings`] (the run ended, or failed, with them pending), emptied by the
/// call: the binary prints them before it exits, as it does the journal's
/// ([`crate::journal::take_drop_warnings`]).
pub fn take_unclaimed_warnings() -> Vec<String> {
    std::mem::take(&mut *unclaimed_warnings())
}

impl CtlServer {
    /// Binds `<dir>/<pid>.sock` (dir 0700, socket 0600) and starts the server thread.
    pub fn bind(dir: &Path) -> Result<CtlServer> {
        let path = socket_path(dir, std::process::id() as i32);
        Self::bind_at(&path, 0o600)
    }

    /// Binds `path` with file mode `mode` (its directory is made 0700 first). Tests use a
    /// wider mode to reach the credential check itself.
    pub fn bind_at(path: &Path, mode: u32) -> Result<CtlServer> {
        // SAFETY: geteuid has no preconditions.
        Self::bind_for(path, mode, unsafe { libc::geteuid() })
    }

    /// Binds `path` serving only uid `owner`.
    fn bind_for(path: &Path, mode: u32, owner: u32) -> Result<CtlServer> {
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
        let fail = |what: &str, e: std::io::Error| {
            let _ = std::fs::remove_file(path);
            Error::io(format!("{what} {}", path.display()), e)
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| fail("chmod", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| fail("control socket", e))?;
        let (wake, wake_rx) = UnixStream::pair().map_err(|e| fail("control socket", e))?;
        wake.set_nonblocking(true)
            .and_then(|_| wake_rx.set_nonblocking(true))
            .map_err(|e| fail("control socket", e))?;
        let (jobs_tx, jobs) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicI32::new(0));
        let warnings = Arc::new(Warnings::default());
        let server = Server {
            tid: tid.clone(),
            warnings: warnings.clone(),
            listener,
            owner,
            wake: wake_rx,
            jobs: jobs_tx,
            counters: counters.clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("schedkit-ctl".into())
            .spawn(move || server.run())
            .map_err(|e| fail("control socket thread for", e))?;
        Ok(CtlServer {
            path: path.into(),
            jobs,
            counters,
            stop,
            wake,
            thread: Some(thread),
            tid,
            warnings,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Answers with `handle` every request the server thread has passed on so far; never
    /// waits for a client (the run loop calls it at every sample). Returns how many.
    pub fn poll(&mut self, mut handle: impl FnMut(Request) -> Reply) -> usize {
        let mut n = 0;
        while let Ok(job) = self.jobs.try_recv() {
            n += 1;
            // Capacity 1 and one reply: never blocks. Gone: the client's deadline passed.
            let _ = job.reply.try_send(handle(job.request));
        }
        if n > 0 {
            self.wake_server();
        }
        n
    }

    /// What the server thread counted so far.
    pub fn counts(&self) -> CtlCounts {
        let c = &self.counters;
        CtlCounts {
            refused: c.refused.load(Ordering::Relaxed),
            turned_away: c.turned_away.load(Ordering::Relaxed),
            timed_out: c.timed_out.load(Ordering::Relaxed),
            oversize: c.oversize.load(Ordering::Relaxed),
        }
    }

    /// What went wrong on the server thread so far (a failing poll or accept, a class it
    /// could not leave), for the run's warnings; emptied by the call. What is not taken
    /// goes to [`take_unclaimed_warnings`] when the server is dropped.
    pub fn take_warnings(&self) -> Vec<String> {
        self.warnings.take()
    }

    /// [`Self::take_warnings`] as each distinct message and how often it happened since the
    /// last take: for a caller that takes them at every sample and keeps one line per
    /// message over the whole run.
    pub fn take_warning_counts(&self) -> Vec<(String, u64)> {
        self.warnings.take_counted()
    }

    /// The server thread's TID (`None` until it has started and set its class).
    pub fn thread_id(&self) -> Option<i32> {
        Some(self.tid.load(Ordering::Acquire)).filter(|&t| t != 0)
    }

    fn wake_server(&self) {
        // Full (WouldBlock): a wake-up is pending already.
        let _ = send_nosignal(&self.wake, &[1]);
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        self.stop.store(true, Ordering::Release);
        self.wake_server();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        unclaimed_warnings().extend(self.warnings.take());
    }
}

/// The server thread's state.
struct Server {
    listener: UnixListener,
    owner: u32,
    wake: UnixStream,
    jobs: Sender<Job>,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    tid: Arc<AtomicI32>,
    warnings: Arc<Warnings>,
}

impl Server {
    fn run(self) {
        if let Err(e) = leave_real_time() {
            self.warnings
                .push(format!("the control socket thread stays real-time: {e}"));
        }
        // SAFETY: gettid has no preconditions.
        self.tid.store(unsafe { libc::gettid() }, Ordering::Release);
        let mut conns: Vec<Conn> = Vec::new();
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let pollfd = |fd, events| libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        while !self.stop.load(Ordering::Acquire) {
            fds.clear();
            fds.push(pollfd(self.listener.as_raw_fd(), libc::POLLIN));
            fds.push(pollfd(self.wake.as_raw_fd(), libc::POLLIN));
            fds.extend(
                conns
                    .iter()
                    .map(|c| pollfd(c.stream.as_raw_fd(), c.events())),
            );
            let now = Instant::now();
            let timeout = conns.iter().map(|c| c.deadline).min().map_or(-1, |d| {
                // Rounded up, so that the deadline has passed when poll returns.
                (d.saturating_duration_since(now).as_millis() + 1).min(60_000) as libc::c_int
            });
            // SAFETY: fds is a valid array of fds.len() pollfd structs.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    self.warnings.push(format!("control socket: poll: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            if fds[1].revents != 0 {
                let mut sink = [0u8; 64];
                while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
            }
            let now = Instant::now();
            for (c, fd) in conns.iter_mut().zip(&fds[2..]) {
                c.step(fd.revents, now, &self.jobs, &self.counters);
            }
            conns.retain(|c| !matches!(c.state, State::Closed));
            if fds[0].revents != 0 {
                self.accept(&mut conns, now);
            }
        }
        for mut c in conns {
            if matches!(c.state, State::Reading | State::Waiting(_)) {
                c.answer(Reply::error("the run ended"), Instant::now());
            }
        }
    }

    fn accept(&self, conns: &mut Vec<Conn>, now: Instant) {
        loop {
            let s = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Out of descriptors, say: the listener stays readable; do not spin.
                    self.warnings.push(format!("control socket: accept: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            };
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            let mut c = Conn {
                stream: s,
                buf: Vec::new(),
                deadline: now + REQUEST_DEADLINE,
                state: State::Reading,
            };
            // Turned away and refused connections are answered once, without waiting for
            // the client to read, and closed at once.
            if conns.len() >= MAX_CONNECTIONS {
                bump(&self.counters.turned_away);
                c.answer(
                    Reply::error(format!(
                        "busy: {MAX_CONNECTIONS} control connections are open; try again"
                    )),
                    now,
                );
                continue;
            }
            match peer_uid(&c.stream) {
                Ok(uid) if uid == self.owner => {
                    // Most clients have written their line already.
                    c.step(libc::POLLIN, now, &self.jobs, &self.counters);
                    if !matches!(c.state, State::Closed) {
                        conns.push(c);
                    }
                }
                Ok(uid) => {
                    bump(&self.counters.refused);
                    c.answer(
                        Reply::error(format!(
                            "permission denied: uid {uid} is not the run's owner (uid {})",
                            self.owner
                        )),
                        now,
                    );
                }
                Err(e) => c.answer(
                    Reply::error(format!("cannot read peer credentials: {e}")),
                    now,
                ),
            }
        }
    }
}

/// The calling thread leaves a real-time class for SCHED_OTHER (module docs).
fn leave_real_time() -> Result<()> {
    if matches!(
        sched::get_thread(0),
        Ok(Policy::Fifo { .. } | Policy::Rr { .. } | Policy::Deadline { .. })
    ) {
        sched::set_thread(0, Policy::Other { nice: 0 })?;
    }
    Ok(())
}

trait TakeLine {
    fn take_line(&mut self, line: &mut String) -> std::io::Result<()>;
}

impl<R: BufRead> TakeLine for R {
    /// One line of at most 64 KiB.
    fn take_line(&mut self, line: &mut String) -> std::io::Result<()> {
        let mut limited = std::io::Read::take(self, MAX_LINE as u64);
        limited.read_line(line)?;
        Ok(())
    }
}

/// Client: sends `req` to the run listening on `path` and waits for its reply (up to 5 s).
pub fn request(path: &Path, req: &Request) -> std::io::Result<Reply> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut text = serde_json::to_string(req).expect("request serialises");
    text.push('\n');
    // A run that turns the connection away (another uid, every connection taken) answers and
    // closes at once, maybe before the request is written: its answer is still to be read.
    let sent = s.write_all(text.as_bytes());
    let mut line = String::new();
    let got = BufReader::new(&s).take_line(&mut line);
    if line.trim().is_empty() {
        sent?;
        got?;
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the run closed the connection without answering",
        ));
    }
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
mod tests;
