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
