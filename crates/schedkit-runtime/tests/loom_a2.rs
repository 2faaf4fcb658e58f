//! Loom models of A2's state machine (`src/gate/a2core.rs`): every interleaving of two
//! setters and two joiners on one primitive (within loom's preemption bound), checking that no
//! wake-up is lost and no fiber is woken twice, with exact expected totals.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p schedkit-runtime --test loom_a2 --release
//! --target-dir target/loom` (docs/fibers.md). Without `--cfg loom` this file is empty.
#![cfg(loom)]

use std::cell::Cell;
use std::ptr;

use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use schedkit_runtime::a2core::{A2Core, Linked};

/// A stand-in for a blocked fiber: counts its wake-ups.
struct Node {
    link: Cell<*mut Node>,
    woken: AtomicUsize,
}
unsafe impl Linked for Node {
    fn link(&self) -> &Cell<*mut Node> {
        &self.link
    }
}
unsafe impl Send for Node {}
unsafe impl Sync for Node {}

impl Node {
    fn new() -> Node {
        Node {
            link: Cell::new(ptr::null_mut()),
            woken: AtomicUsize::new(0),
        }
    }
}

struct Model {
    core: A2Core<Node>,
    nodes: [Node; 2],
    /// Joins that found a permit and did not block.
    passed: AtomicUsize,
}
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

fn wake(p: *mut Node) {
    unsafe { (*p).woken.fetch_add(1, SeqCst) };
}

fn join(m: &Model, i: usize) {
    let p = &m.nodes[i] as *const Node as *mut Node;
    // Joiner i blocks from "ST" i: on a manual-reset event each has its own lane.
    let queued = unsafe { m.core.join(p, i, &mut |q| wake(q)) };
    if !queued {
        m.passed.fetch_add(1, SeqCst);
    }
}

/// Two joiners and two setters; returns (per-node wake counts, passes, final permits, list
/// empty).
fn run(cap: u32, manual: bool) -> ([usize; 2], usize, u32, bool) {
    run_with(cap, manual, |m| m.core.release(1, &mut |q| wake(q)))
}

/// Two joiners, a setter thread, and `main` (the second setter's part) on this thread.
fn run_with(cap: u32, manual: bool, main: impl FnOnce(&Model)) -> ([usize; 2], usize, u32, bool) {
    let m = Arc::new(Model {
        core: A2Core::with_lanes(0, cap, manual, 2),
        nodes: [Node::new(), Node::new()],
        passed: AtomicUsize::new(0),
    });
    let mut ts = Vec::new();
    for i in 0..2 {
        let m = m.clone();
        ts.push(thread::spawn(move || join(&m, i)));
    }
    {
        let m = m.clone();
        ts.push(thread::spawn(move || m.core.release(1, &mut |q| wake(q))));
    }
    main(&m);
    for t in ts {
        t.join().unwrap();
    }
    let w = [m.nodes[0].woken.load(SeqCst), m.nodes[1].woken.load(SeqCst)];
    (
        w,
        m.passed.load(SeqCst),
        m.core.permits(),
        m.core.is_empty(),
    )
}

/// Both joiners got through exactly once: woken, or passed on a permit.
fn all_woken_once(w: [usize; 2], passed: usize) {
    assert!(w[0] <= 1 && w[1] <= 1, "woken twice: {w:?}");
    assert_eq!(
        w[0] + w[1] + passed,
        2,
        "lost wake-up: {w:?} passed {passed}"
    );
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

#[test]
fn semaphore_two_posts_two_waiters() {
    // Two permits posted, two waiters: both get through exactly once, nothing left over.
    model(|| {
        let (w, passed, permits, empty) = run(u32::MAX >> 1, false);
        all_woken_once(w, passed);
        assert_eq!(permits, 0);
        assert!(empty);
    });
}

#[test]
fn manual_event_two_sets_two_waiters() {
    // A manual-reset event that ends set: nobody may stay blocked, nobody is woken twice.
    model(|| {
        let (w, passed, permits, empty) = run(1, true);
        all_woken_once(w, passed);
        assert_eq!(permits, 1);
        assert!(empty);
    });
}

#[test]
fn auto_event_two_sets_two_waiters() {
    // An auto-reset event: two sets may merge into one (setting a set event does nothing), so
    // one or two waiters pass; what must hold is that the event is never left set while a
    // waiter is blocked, and that every set that was not merged released exactly one waiter.
    model(|| {
        let (w, passed, permits, empty) = run(1, false);
        assert!(w[0] <= 1 && w[1] <= 1, "woken twice: {w:?}");
        let released = w[0] + w[1] + passed;
        assert!((1..=2).contains(&released), "released {released}");
        assert!(!(permits > 0 && !empty), "set while a waiter is blocked");
        // Conservation: releases through waiters plus the permit left equal the sets that
        // took effect (1 or 2).
        assert!(released + permits as usize <= 2);
        if released == 1 {
            // The other waiter is still blocked, and the event is unset.
            assert!(!empty && permits == 0);
        }
    });
}

#[test]
fn manual_event_set_reset_set_two_waiters() {
    // A manual-reset event set, reset and set again while two fibers block on it: the walk
    // that meets the reset puts waiters back, and the put-back is itself a publish that must
    // not miss the later set. The event ends set, so nobody may stay blocked.
    model(|| {
        let (w, passed, permits, empty) = run_with(1, true, |m| {
            m.core.reset();
            m.core.release(1, &mut |q| wake(q));
        });
        all_woken_once(w, passed);
        assert_eq!(permits, 1);
        assert!(empty);
    });
}
