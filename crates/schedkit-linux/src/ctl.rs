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

enum State {
    /// Reading the request line.
    Reading,
    /// The run has the request.
    Waiting(Receiver<Reply>),
    /// Writing the reply from `at`.
    Writing {
        out: Vec<u8>,
        at: usize,
    },
    Closed,
}

struct Conn {
    stream: UnixStream,
    buf: Vec<u8>,
    deadline: Instant,
    state: State,
}

impl Conn {
    fn events(&self) -> libc::c_short {
        match self.state {
            State::Reading => libc::POLLIN,
            State::Writing { .. } => libc::POLLOUT,
            // Hang-ups and errors are reported anyway.
            State::Waiting(_) | State::Closed => 0,
        }
    }

    /// Moves on after poll reported `revents`, or a deadline passed.
    fn step(&mut self, revents: libc::c_short, now: Instant, jobs: &Sender<Job>, n: &Counters) {
        let gone = revents & (libc::POLLHUP | libc::POLLERR) != 0;
        match &self.state {
            State::Reading if revents != 0 => self.read(now, jobs, n),
            State::Waiting(rx) => match rx.try_recv() {
                Ok(reply) => self.answer(reply, now),
                Err(TryRecvError::Disconnected) => self.answer(Reply::error("the run ended"), now),
                Err(TryRecvError::Empty) if gone => self.state = State::Closed,
                Err(TryRecvError::Empty) => {}
            },
            State::Writing { .. } if revents != 0 => self.flush(),
            _ => {}
        }
        if now >= self.deadline {
            match self.state {
                State::Reading => {
                    bump(&n.timed_out);
                    self.answer(
                        Reply::error(format!(
                            "bad request: no whole request line within {} ms",
                            REQUEST_DEADLINE.as_millis()
                        )),
                        now,
                    );
                }
                State::Waiting(_) => self.answer(
                    Reply::error(format!(
                        "the run did not answer within {} ms",
                        REPLY_DEADLINE.as_millis()
                    )),
                    now,
                ),
                State::Writing { .. } => {
                    bump(&n.timed_out);
                    self.state = State::Closed;
                }
                State::Closed => {}
            }
        }
    }

    fn read(&mut self, now: Instant, jobs: &Sender<Job>, n: &Counters) {
        let mut chunk = [0u8; 4096];
        loop {
            match (&self.stream).read(&mut chunk) {
                Ok(0) => {
                    // The client shut its side: what it sent is the request.
                    if self.buf.iter().all(u8::is_ascii_whitespace) {
                        self.state = State::Closed;
                    } else {
                        let line = std::mem::take(&mut self.buf);
                        self.submit(&line, now, jobs);
                    }
                    return;
                }
                Ok(k) => {
                    let start = self.buf.len();
                    self.buf.extend_from_slice(&chunk[..k]);
                    let end = self.buf[start..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map(|i| start + i);
                    if end.map_or(self.buf.len(), |e| e + 1) > MAX_LINE {
                        bump(&n.oversize);
                        self.answer(
                            Reply::error(format!(
                                "bad request: the request line is longer than {} KiB",
                                MAX_LINE / 1024
                            )),
                            now,
                        );
                        return;
                    }
                    if let Some(e) = end {
                        let mut line = std::mem::take(&mut self.buf);
                        line.truncate(e);
                        self.submit(&line, now, jobs);
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.state = State::Closed;
                    return;
                }
            }
        }
    }

    /// A whole line: parsed, and passed on to the run.
    fn submit(&mut self, line: &[u8], now: Instant, jobs: &Sender<Job>) {
        let text = String::from_utf8_lossy(line);
        match serde_json::from_str::<Request>(text.trim()) {
            Err(e) => self.answer(Reply::error(format!("bad request: {e}")), now),
            Ok(request) => {
                let (reply, rx) = mpsc::sync_channel(1);
                if jobs.send(Job { request, reply }).is_err() {
                    self.answer(Reply::error("the run ended"), now);
                } else {
                    self.state = State::Waiting(rx);
                    self.deadline = now + REPLY_DEADLINE;
                }
            }
        }
    }

    /// Starts writing `reply` (and writes what the socket takes now).
    fn answer(&mut self, reply: Reply, now: Instant) {
        let mut out = serde_json::to_vec(&reply).expect("reply serialises");
        out.push(b'\n');
        self.state = State::Writing { out, at: 0 };
        self.deadline = now + WRITE_DEADLINE;
        self.flush();
    }

    fn flush(&mut self) {
        let State::Writing { out, at } = &mut self.state else {
            return;
        };
        while *at < out.len() {
            match send_nosignal(&self.stream, &out[*at..]) {
                Ok(0) => break,
                Ok(k) => *at += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        // Done (or the client is gone). Unread input (a turned-away request, the rest of an
        // oversize line) is taken first: closing a Unix socket with unread data sets
        // ECONNRESET on the client's side.
        let mut sink = [0u8; 4096];
        for _ in 0..16 {
            if !matches!((&self.stream).read(&mut sink), Ok(k) if k > 0) {
                break;
            }
        }
        self.state = State::Closed;
    }
}

/// send(2) without SIGPIPE: a client gone before its reply (or a server thread gone before
/// its wake-up) is an error here, not a signal to the whole run.
fn send_nosignal(s: &UnixStream, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes.
    let n = unsafe {
        libc::send(
            s.as_raw_fd(),
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
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
mod tests {
    use super::*;

    /// A fresh directory for one test's socket.
    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sk-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn server_thread_warnings_come_back_once_each_and_survive_the_drop() {
        let d = dir("warn");
        let srv = CtlServer::bind_at(&d.join("w.sock"), 0o600).unwrap();
        for _ in 0..3 {
            srv.warnings
                .push("control socket: accept: Too many open files".into());
        }
        srv.warnings.push("control socket: poll: x".into());
        assert_eq!(
            srv.take_warnings(),
            vec![
                "control socket: accept: Too many open files (3 times)".to_string(),
                "control socket: poll: x".to_string()
            ]
        );
        assert!(srv.take_warnings().is_empty(), "taken once");
        // Not taken by the run: the binary still gets them, after the drop.
        let tag = format!("untaken warning of {}", d.display());
        srv.warnings.push(tag.clone());
        drop(srv);
        assert!(take_unclaimed_warnings().contains(&tag));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Answers every request with `reply` until `client` is done; returns what was asked.
    fn serve_until<T>(
        srv: &mut CtlServer,
        client: std::thread::JoinHandle<T>,
        reply: Reply,
    ) -> (Vec<Request>, T) {
        let mut seen = Vec::new();
        let t0 = Instant::now();
        while !client.is_finished() && t0.elapsed() < Duration::from_secs(20) {
            srv.poll(|r| {
                seen.push(r);
                reply.clone()
            });
            std::thread::sleep(Duration::from_millis(2));
        }
        (seen, client.join().unwrap())
    }

    /// Connects and writes `bytes` (no newline added; a connection turned away at once may
    /// be closed before they are written).
    fn connect(path: &Path, bytes: &[u8]) -> UnixStream {
        let mut s = UnixStream::connect(path).expect("connect");
        let _ = s.write_all(bytes);
        s
    }

    /// The reply line on `s` (waits up to 5 s).
    fn reply_on(s: &UnixStream) -> Reply {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).expect("reply");
        serde_json::from_str(line.trim()).expect("a JSON reply")
    }

    fn status_from(path: &Path) -> std::thread::JoinHandle<(Duration, std::io::Result<Reply>)> {
        let path = path.to_path_buf();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            let r = request(&path, &Request::Status);
            (t0.elapsed(), r)
        })
    }

    #[test]
    fn weights_out_of_range_are_refused() {
        assert!(check_weight(0).is_err());
        assert!(check_weight(10_001).is_err());
        assert!(check_weight(1).is_ok());
        assert!(check_weight(10_000).is_ok());
    }

    #[test]
    fn request_round_trip_over_the_socket() {
        let dir = dir("rt");
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
        let (seen, reply) = serve_until(&mut srv, client, Reply::done("set"));
        assert!(reply.expect("reply").ok);
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

    #[test]
    fn connections_beyond_the_bound_are_turned_away_and_the_rest_served() {
        let dir = dir("bound");
        let path = dir.join("1.sock");
        let mut srv = CtlServer::bind_at(&path, 0o600).expect("bind");
        let idle: Vec<UnixStream> = (0..MAX_CONNECTIONS).map(|_| connect(&path, b"")).collect();
        let t0 = Instant::now();
        let extra = connect(&path, b"{\"op\":\"status\"}\n");
        let r = reply_on(&extra);
        eprintln!("turned away after {:?}: {:?}", t0.elapsed(), r.error);
        assert!(!r.ok);
        assert!(r.error.unwrap().starts_with("busy"));
        assert_eq!(srv.counts().turned_away, 1);
        // Room again once they close (and the server has seen them go): served.
        drop(idle);
        std::thread::sleep(Duration::from_millis(200));
        let t0 = Instant::now();
        let (seen, (took, reply)) = serve_until(&mut srv, status_from(&path), Reply::done("ok"));
        eprintln!(
            "served after the idle ones closed: {took:?} ({:?})",
            t0.elapsed()
        );
        assert!(reply.expect("reply").ok);
        assert_eq!(seen, vec![Request::Status]);
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_silent_or_dripping_client_is_cut_at_the_deadline_while_others_are_served() {
        let dir = dir("deadline");
        let path = dir.join("1.sock");
        let mut srv = CtlServer::bind_at(&path, 0o600).expect("bind");
        let silent = connect(&path, b"");
        let t_silent = Instant::now();
        // A byte every 20 ms, never a newline.
        let p2 = path.clone();
        let drip = std::thread::spawn(move || {
            let mut s = UnixStream::connect(&p2).unwrap();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                if s.write_all(b" ").is_err() {
                    break; // closed by the server
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (t0.elapsed(), reply_on(&s))
        });
        // Meanwhile a status is answered at once.
        let (seen, (took, reply)) = serve_until(&mut srv, status_from(&path), Reply::done("ok"));
        eprintln!("status beside a silent and a dripping client: {took:?}");
        assert!(reply.expect("reply").ok);
        assert_eq!(seen, vec![Request::Status]);
        let r = reply_on(&silent);
        let waited = t_silent.elapsed();
        eprintln!("silent client cut after {waited:?}: {:?}", r.error);
        assert!(!r.ok && r.error.unwrap().contains("no whole request line"));
        assert!(waited >= REQUEST_DEADLINE - Duration::from_millis(50));
        let (dripped, r) = drip.join().unwrap();
        eprintln!("dripping client cut after {dripped:?}: {:?}", r.error);
        assert!(!r.ok && r.error.unwrap().contains("no whole request line"));
        assert!(dripped < Duration::from_secs(5), "cut before it gave up");
        assert_eq!(srv.counts().timed_out, 2);
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_line_over_64_kib_is_refused_and_one_within_is_read() {
        let dir = dir("oversize");
        let path = dir.join("1.sock");
        let mut srv = CtlServer::bind_at(&path, 0o600).expect("bind");
        // Within: a status request padded to exactly MAX_LINE with its newline.
        let mut within = b"{\"op\":\"status\"}".to_vec();
        within.resize(MAX_LINE - 1, b' ');
        within.push(b'\n');
        let p2 = path.clone();
        let client = std::thread::spawn(move || reply_on(&connect(&p2, &within)));
        let (seen, r) = serve_until(&mut srv, client, Reply::done("ok"));
        assert!(r.ok, "{r:?}");
        assert_eq!(seen, vec![Request::Status]);
        // Over: one byte more, and no newline at all.
        let p2 = path.clone();
        let client = std::thread::spawn(move || {
            let mut s = UnixStream::connect(&p2).unwrap();
            let _ = s.write_all(&vec![b' '; MAX_LINE + 1]); // may be cut off
            reply_on(&s)
        });
        let (seen, r) = serve_until(&mut srv, client, Reply::done("should not happen"));
        assert!(seen.is_empty());
        assert!(!r.ok && r.error.unwrap().contains("longer than 64 KiB"));
        assert_eq!(srv.counts().oversize, 1);
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_uid_is_refused_and_never_reaches_the_run() {
        let dir = dir("uid");
        let path = dir.join("1.sock");
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let mut srv = CtlServer::bind_for(&path, 0o600, me.wrapping_add(1)).expect("bind");
        let p2 = path.clone();
        let client = std::thread::spawn(move || {
            request(
                &p2,
                &Request::SetWeight {
                    group: "a".into(),
                    weight: 7,
                },
            )
        });
        let (seen, r) = serve_until(&mut srv, client, Reply::done("should not happen"));
        let r = r.expect("reply");
        assert!(!r.ok && r.error.unwrap().starts_with("permission denied"));
        assert!(seen.is_empty(), "the request never reached the run");
        assert_eq!(srv.counts().refused, 1);
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dropping_the_server_answers_who_is_left_stops_the_thread_and_removes_the_socket() {
        let dir = dir("drop");
        let path = dir.join("1.sock");
        let srv = CtlServer::bind_at(&path, 0o600).expect("bind");
        let waiting = connect(&path, b"{\"op\":\"status\"}\n"); // never polled
        let idle = connect(&path, b"");
        std::thread::sleep(Duration::from_millis(50));
        let t0 = Instant::now();
        drop(srv);
        eprintln!("server dropped in {:?}", t0.elapsed());
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(!path.exists(), "socket removed");
        for s in [&waiting, &idle] {
            let r = reply_on(s);
            assert_eq!(r.error.as_deref(), Some("the run ended"));
        }
        assert!(UnixStream::connect(&path).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_server_thread_leaves_a_real_time_class() {
        let Ok(old) = sched::get_thread(0) else {
            return;
        };
        if sched::set_thread(0, Policy::Fifo { priority: 1 }).is_err() {
            eprintln!("skipped: SCHED_FIFO needs CAP_SYS_NICE");
            return;
        }
        let dir = dir("class");
        let srv = CtlServer::bind_at(&dir.join("1.sock"), 0o600);
        let _ = sched::set_thread(0, old);
        let srv = srv.expect("bind");
        let t0 = Instant::now();
        while srv.thread_id().is_none() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let tid = srv.thread_id().expect("the server thread started");
        assert_eq!(sched::get_thread(tid).unwrap(), Policy::Other { nice: 0 });
        drop(srv);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
