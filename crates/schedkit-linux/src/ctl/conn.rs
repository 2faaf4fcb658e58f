//! One client connection of the socket thread: a small state machine (read the request
//! line, wait for the run's reply, write it) stepped by `poll`, each state under a deadline.

use super::*;

pub(super) enum State {
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

pub(super) struct Conn {
    pub(super) stream: UnixStream,
    pub(super) buf: Vec<u8>,
    pub(super) deadline: Instant,
    pub(super) state: State,
}

impl Conn {
    pub(super) fn events(&self) -> libc::c_short {
        match self.state {
            State::Reading => libc::POLLIN,
            State::Writing { .. } => libc::POLLOUT,
            // Hang-ups and errors are reported anyway.
            State::Waiting(_) | State::Closed => 0,
        }
    }

    /// Moves on after poll reported `revents`, or a deadline passed.
    pub(super) fn step(
        &mut self,
        revents: libc::c_short,
        now: Instant,
        jobs: &Sender<Job>,
        n: &Counters,
    ) {
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
    pub(super) fn answer(&mut self, reply: Reply, now: Instant) {
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
pub(super) fn send_nosignal(s: &UnixStream, buf: &[u8]) -> std::io::Result<usize> {
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
