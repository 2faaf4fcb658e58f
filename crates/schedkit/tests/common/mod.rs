//! What the binary's end-to-end tests share: the binary, the repository root, running it,
//! reading its JSON output, whether the tests run as root, and the machine lease for the
//! tests that need whole CPUs.
#![allow(dead_code)] // each test crate uses a part of it

use schedkit_linux::lease::{self, Hold, Lease};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_schedkit");

/// The repository root (examples live there).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `schedkit ARGS` in the repository root.
pub fn schedkit(args: &[&str]) -> Output {
    schedkit_in(args, &root())
}

/// Runs `schedkit ARGS` in `dir`.
pub fn schedkit_in(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run schedkit")
}

/// The JSON on stdout of a run that must have succeeded.
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Whether the tests run as root (real runs need it; the tests say why they skip otherwise).
pub fn is_root() -> bool {
    schedkit_linux::privilege::Privileges::current().root
}

/// `setpriv`, for dropping to an unprivileged user, when the tests run as root and have it;
/// `None` (after saying why the caller skips) otherwise.
pub fn setpriv_as_root() -> Option<&'static str> {
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if !is_root() || setpriv.is_none() {
        eprintln!("skipped: dropping to an unprivileged user needs root and setpriv");
        return None;
    }
    setpriv
}

/// The CPUs this thread may use (`sched_getaffinity`); empty if the call fails.
pub fn allowed_cpus() -> Vec<usize> {
    schedkit_linux::affinity::get_thread(0)
        .map(|s| s.iter().collect())
        .unwrap_or_default()
}

/// How long a test queues behind other schedkit runs' leases before it gives up: longer
/// than any run a person or another test starts beside the suite should last.
const LEASE_WAIT: Duration = Duration::from_secs(1200);

/// Takes schedkit's machine lease (`crates/schedkit-linux/src/lease.rs`) for the part of a
/// test that needs the machine as it is, queueing behind live holders as `run --wait` does.
///
/// `Hold::Shared` for a test whose runs measure CPU time or need whole CPUs: no
/// `--exclusive` run (another test's, or one a person started beside the suite) can move
/// this process's threads to the system CPU while it is held, and runs of policies that
/// take the shared lease themselves start beside it. `Hold::Exclusive` where the test reads
/// or changes machine-wide state. Never hold it across a child run that wants more than the
/// test holds (a shared hold across an `--exclusive` run deadlocks): use
/// [`wait_for_the_machine`] there.
///
/// `None` when not root: an unprivileged test changes nothing machine-wide, and may not
/// create the lease files.
pub fn machine_lease(hold: Hold, what: &str) -> Option<Lease> {
    if !is_root() {
        return None;
    }
    let t0 = Instant::now();
    let l = lease::machine(hold, format!("schedkit test: {what}"), Some(LEASE_WAIT))
        .unwrap_or_else(|e| panic!("the machine lease for {what}: {e}"));
    if t0.elapsed() > Duration::from_millis(500) {
        eprintln!(
            "{what}: waited {:.1} s for the machine lease (another schedkit run held it)",
            t0.elapsed().as_secs_f64()
        );
    }
    Some(l)
}

/// Waits until no schedkit run holds the machine lease (takes it exclusively and lets go at
/// once), for a test that starts an `--exclusive` run itself and must not find another one
/// live: the run under test then takes the lease at once rather than queueing with `--wait`
/// (a test that kills it "1 s into the run", or reads the machine's state before it, needs
/// the run to start when started).
pub fn wait_for_the_machine(what: &str) {
    drop(still_machine(what));
}

/// The exclusive machine lease, taken when no dead run's machine-wide changes wait for their
/// `schedkit restore` either: a run killed with SIGKILL (another user's test kills them
/// on purpose) holds no lease, yet its IRQ masks and RT throttling stay until its journal is
/// undone, so the lease alone does not make the machine's state its own. Waits up to a
/// minute for such leftovers (their owner restores them; `lease::stale` names them), then
/// goes on and says so. For reading the machine's state ("before" and "after").
pub fn still_machine(what: &str) -> Option<Lease> {
    let t0 = Instant::now();
    let mut waited_for_leftovers = false;
    loop {
        let l = machine_lease(Hold::Exclusive, what)?;
        let left: Vec<_> = lease::stale(&lease::lease_dir(), &schedkit_linux::Roots::host())
            .into_iter()
            .filter(|s| s.machine_wide)
            .collect();
        if left.is_empty() {
            if waited_for_leftovers {
                eprintln!(
                    "{what}: waited {:.1} s for a dead run's machine-wide changes to be restored",
                    t0.elapsed().as_secs_f64()
                );
            }
            return Some(l);
        }
        if t0.elapsed() > Duration::from_secs(60) {
            eprintln!(
                "{what}: a dead run's machine-wide changes are still not restored after 60 s \
                 (journals {:?}); reading the machine as it is",
                left.iter().map(|s| &s.journal).collect::<Vec<_>>()
            );
            return Some(l);
        }
        waited_for_leftovers = true;
        drop(l);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes the shared machine lease (see [`machine_lease`]) and checks that this thread may
/// use at least `cpus` CPUs; `None`, with the reason printed, when it may not (an affinity
/// or cpuset narrower than the test needs). Hold the result for the whole measurement.
pub fn shared_machine_with(cpus: usize, what: &str) -> Option<Option<Lease>> {
    let l = machine_lease(Hold::Shared, what);
    let have = allowed_cpus();
    if have.len() < cpus {
        eprintln!(
            "skipped: {what} needs {cpus} usable CPUs; this thread may use {} ({have:?})",
            have.len()
        );
        return None;
    }
    Some(l)
}
