//! The control socket thread's warnings reach the run's report (a library does not print).
//!
//! Provoked for real: the process runs out of file descriptors while a client connects, so
//! the socket thread's `accept` fails with EMFILE. A binary of its own, because the
//! descriptor limit is the whole process's. Needs root (tenants creates cgroups).

use schedkit_core::Scenario;
use schedkit_linux::ctl;
use std::os::unix::net::UnixStream;
use std::time::Duration;

mod common;

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

fn set_nofile(soft: u64, hard: u64) {
    let l = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: l is a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) }, 0);
}

#[test]
fn a_failing_accept_on_the_control_socket_is_a_run_warning() {
    if !common::root() {
        eprintln!("skipped: tenants creates cgroups: needs root");
        return;
    }
    let dir = common::state_dir("fairwarn", "accept");
    let sc = Scenario::parse(
        "warn.toml",
        "cores = 2\n[policy]\nname = \"tenants\"\nperiod = \"100ms\"\ntrim = false\n[run]\nhorizon = \"20s\"\n\
         [[group]]\nname = \"vm1\"\nweight = 1\n\
         [[process]]\nname = \"P1\"\nthreads = 1\ngroup = \"vm1\"\n",
    )
    .expect("scenario");
    let o = common::with_run_in_thread(sc, &dir, |sock| {
        std::thread::sleep(Duration::from_millis(300)); // the run is in its loop
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: old is a valid rlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut old) }, 0);
        // Every descriptor but one taken: the client's socket takes the last, and the server's
        // accept finds none. Held for a few of its 10 ms retries, then given back.
        let n = open_fds();
        set_nofile(n + 64, old.rlim_max);
        let mut fill = Vec::new();
        while let Ok(f) = std::fs::File::open("/dev/null") {
            fill.push(f);
        }
        fill.pop();
        let client = UnixStream::connect(sock);
        std::thread::sleep(Duration::from_millis(60));
        drop(fill);
        set_nofile(old.rlim_cur, old.rlim_max);
        drop(client);
        std::thread::sleep(Duration::from_millis(300)); // a sample or two takes the warning
    });
    eprintln!("warnings: {:#?}", o.warnings);
    let accept: Vec<&String> = o
        .warnings
        .iter()
        .filter(|w| w.starts_with("control socket: accept:"))
        .collect();
    assert_eq!(
        accept.len(),
        1,
        "one line for the failing accept, however often it failed: {:?}",
        o.warnings
    );
    assert!(
        ctl::take_unclaimed_warnings()
            .iter()
            .all(|w| !w.starts_with("control socket: accept:")),
        "taken by the run, not left for the binary"
    );
}
