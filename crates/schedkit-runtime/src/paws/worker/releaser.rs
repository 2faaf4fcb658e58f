//! The releaser thread (periodic jobs released at their times), and the per-thread kernel
//! counters the workers and the releaser both open and read.

use super::*;

pub(super) fn open_counters(sh: &Shared) -> Option<CounterSet> {
    sh.cfg.perf.then(|| {
        CounterSet::open(
            &mut PerfSource,
            Target::Thread(schedkit_linux::gettid()),
            &[CounterKind::ContextSwitches, CounterKind::CpuMigrations],
        )
    })
}

pub(super) fn read_kernel(
    sh: &Shared,
    what: &str,
    cpu: Option<usize>,
    counters: Option<&mut CounterSet>,
) -> WorkerKernel {
    let mut k = WorkerKernel {
        cpu,
        ..Default::default()
    };
    if let Some(rs) = counters.map(|c| c.read()) {
        for (kind, r) in rs {
            let v = match r {
                Reading::Value { value, .. } => Some(value),
                other => {
                    sh.warnings
                        .lock()
                        .push(format!("{what}: perf {}: {other:?}", kind.name()));
                    None
                }
            };
            match kind {
                CounterKind::ContextSwitches => k.context_switches = v,
                CounterKind::CpuMigrations => k.migrations = v,
                _ => {}
            }
        }
    }
    k
}

/// Releases periodic jobs at their release times until the pool stops releasing; at the stop,
/// every job due before it is released first.
pub(crate) fn releaser(sh: Arc<Shared>, ready: Sender<()>) {
    setup(
        &sh,
        "releaser",
        None,
        sh.cfg.fifo_priority.map(|p| (p + 1).min(99)),
    );
    let mut counters = open_counters(&sh);
    let _ = sh.releaser.set(std::thread::current());
    let _ = ready.send(());
    drop(ready);
    loop {
        // The end of the timer stage of this wake-up's releases.
        let woke = sh.now();
        let mut st = sh.state.lock();
        let now = sh.now();
        let mut next = u64::MAX;
        let mut due = Vec::new();
        let cutoff = st.cutoff;
        for (ti, t) in st.tasks.iter_mut().enumerate() {
            while t.next <= now && t.next < cutoff {
                due.push((
                    ti,
                    t.index,
                    t.next,
                    t.next + t.spec.deadline,
                    t.spec.clone(),
                ));
                t.index += 1;
                t.next += t.spec.period;
            }
            // A release at or after the cutoff never comes: waiting for it would wake the
            // releaser at the cutoff and then spin (nothing due, next already passed) at a
            // real-time priority until the pool stops, on a CPU a worker may need.
            if t.next < cutoff {
                next = next.min(t.next);
            }
        }
        for (ti, index, release, deadline, spec) in due {
            let meta = Arc::new(JobMeta {
                task: ti,
                index,
                release,
                deadline,
                counters: Default::default(),
                body: Body::Task(spec),
            });
            meta.counters.woke.store(woke, Relaxed);
            let it = st.sched.item(deadline, Kind::Job, Unit::Job(meta));
            st.in_flight += 1;
            let t = &mut st.tasks[ti];
            if t.busy {
                t.backlog.push_back(it);
            } else {
                t.busy = true;
                sh.ready(&mut st, it);
            }
        }
        if !st.releasing {
            drop(st);
            *sh.releaser_kernel.lock() = read_kernel(&sh, "releaser", None, counters.as_mut());
            return;
        }
        drop(st);
        // Every sleep is a kernel context switch of this thread: sleep until the next release
        // (a new task and `stop` unpark it), never in shorter slices. The timer is set
        // `release_spin` early and the rest is spun, so that the timer's own lateness (tens
        // of us in a virtual machine) does not delay the release; a late timer spins nothing.
        if next == u64::MAX {
            std::thread::park();
        } else {
            let spin = sh.cfg.release_spin.as_nanos() as u64;
            let left = next.saturating_sub(sh.now());
            if left > spin {
                std::thread::park_timeout(Duration::from_nanos(left - spin));
            } else {
                while sh.now() < next {
                    std::hint::spin_loop();
                }
            }
        }
    }
}
