//! A scheduler thread (ST): its loop, picking the next fiber, running it, the deadlock check.

use super::*;

pub(super) fn st_main(shared: Arc<Shared>, index: usize, cpu: Option<usize>) {
    stack::ensure_altstack();
    if let Some(c) = cpu {
        // Pinning is a performance matter, not a correctness one: an ST that cannot be
        // pinned (a restricted cpuset) still runs.
        let _ = schedkit_linux::affinity::pin_current(c);
    }
    let ctx = StCtx {
        shared,
        index,
        local: RefCell::new(Local {
            timers: BinaryHeap::new(),
            a1_blocked: Vec::new(),
            stacks: Vec::new(),
            seq: 0,
        }),
        next: Cell::new(None),
    };
    ST.with(|s| s.set(&ctx));
    let sh = &*ctx.shared;
    let me = &sh.workers[index];
    let mut suspect: Option<(Instant, u64)> = None;
    let mut streak = 0u32;
    let mut since_service = 0u32;
    loop {
        if sh.stop.load(Relaxed) {
            break;
        }
        take_chains(sh, index);
        let mut f = ctx.next.take();
        if let Some(slot) = f.take_if(|_| streak >= NEXT_STREAK) {
            me.queue.push(slot);
        }
        if f.is_some() {
            streak += 1;
            bump(&me.stats.slot_runs);
        } else {
            streak = 0;
            f = next_fiber(sh, index);
        }
        if let Some(f) = f {
            bump(&me.stats.runs);
            run(&ctx, f);
            since_service += 1;
            // Timers and A1 notifications are served when the ST idles, and also every
            // SERVICE_EVERY fibers so that a busy queue cannot starve a sleeper.
            if since_service >= SERVICE_EVERY {
                since_service = 0;
                service(&ctx);
            }
            continue;
        }
        if service(&ctx) {
            continue;
        }
        // Idle: spin a little, then park.
        let idle_from = Instant::now();
        me.stats
            .idle_since
            .store(ns_since(sh.epoch, idle_from).max(1), Relaxed);
        let spin_until = idle_from + sh.cfg.spin_before_park;
        let mut found = false;
        while Instant::now() < spin_until {
            if has_work(sh, index) {
                found = true;
                break;
            }
            // A short pause between looks: one PAUSE costs up to ~140 cycles on recent Xeons,
            // so a batch of 64 adds microseconds to every cross-ST hand-off.
            for _ in 0..4 {
                std::hint::spin_loop();
            }
        }
        if found {
            end_idle(me, idle_from);
            continue;
        }
        bump(&me.stats.parks);
        me.sleeping.store(true, SeqCst);
        sh.sleepers.fetch_add(1, SeqCst);
        if !has_work(sh, index) && !sh.stop.load(SeqCst) {
            let next_timer = ctx
                .local
                .borrow()
                .timers
                .peek()
                .map(|Reverse((t, _, _))| *t);
            let mut wait = Duration::from_millis(100);
            if let Some(t) = next_timer {
                wait = wait.min(t.saturating_duration_since(Instant::now()));
            }
            std::thread::park_timeout(wait);
        }
        sh.sleepers.fetch_sub(1, SeqCst);
        me.sleeping.store(false, SeqCst);
        end_idle(me, idle_from);
        if index == 0 {
            check_deadlock(sh, &mut suspect);
        }
    }
    ST.with(|s| s.set(std::ptr::null()));
    // Fibers left over (deadlocked or never joined) are dropped with the queues.
    while let Some(f) = take_inbox(me) {
        drop(f);
    }
    let mut c = me.chains.swap(std::ptr::null_mut(), Acquire);
    while !c.is_null() {
        let next = unsafe { (*c).chain.get() };
        walk_chain(c, |f| drop(unsafe { Box::from_raw(f) }));
        c = next;
    }
    let mut local = ctx.local.borrow_mut();
    local.timers.clear();
    local.a1_blocked.clear();
    let mut pool = sh.stacks.lock();
    pool.append(&mut local.stacks);
}

/// Nanoseconds from `epoch` to `t`.
pub(super) fn ns_since(epoch: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(epoch).as_nanos() as u64
}

/// Adds the idle stretch that began at `from` to the ST's idle time.
pub(super) fn end_idle(me: &Worker, from: Instant) {
    let c = &me.stats;
    c.idle_since.store(0, Relaxed);
    let d = from.elapsed().as_nanos() as u64;
    c.idle_ns.store(c.idle_ns.load(Relaxed) + d, Relaxed);
}

pub(super) fn has_work(sh: &Shared, index: usize) -> bool {
    sh.workers.iter().any(|w| !w.queue.is_empty())
        || !sh.workers[index].inbox.load(SeqCst).is_null()
        || !sh.workers[index].chains.load(SeqCst).is_null()
        || sh.workers[index].notified.load(SeqCst)
        || sh.workers[index].timers.load(Relaxed) > 0 && timer_due(index)
}

pub(super) fn timer_due(_index: usize) -> bool {
    let st = current_st();
    if st.is_null() {
        return false;
    }
    // SAFETY: called on the ST thread, outside any fiber.
    let local = unsafe { (*st).local.borrow() };
    local
        .timers
        .peek()
        .is_some_and(|Reverse((t, _, _))| *t <= Instant::now())
}

/// Own queue first, then own inbox, then steal from the others, starting after ourselves. A
/// stolen fiber bound to its ST goes back to that ST's queue.
pub(super) fn next_fiber(sh: &Shared, index: usize) -> Option<Box<Fiber>> {
    if let Some(f) = sh.workers[index].queue.pop() {
        return Some(f);
    }
    if let Some(f) = take_inbox(&sh.workers[index]) {
        return Some(f);
    }
    let n = sh.workers.len();
    for k in 1..n {
        let victim = &sh.workers[(index + k) % n];
        if let Some(f) = victim.queue.pop() {
            if f.bound && f.home != index {
                victim.queue.push(f);
                if victim.sleeping.load(SeqCst) {
                    sh.unpark(victim);
                }
                continue;
            }
            bump(&sh.workers[index].stats.steals);
            return Some(f);
        }
    }
    None
}

/// Takes the whole inbox: returns its oldest fiber and queues the others behind it.
pub(super) fn take_inbox(w: &Worker) -> Option<Box<Fiber>> {
    let mut p = w.inbox.swap(std::ptr::null_mut(), Acquire);
    if p.is_null() {
        return None;
    }
    // Reverse the stack so the oldest comes first.
    let mut fifo: *mut Fiber = std::ptr::null_mut();
    while !p.is_null() {
        // SAFETY: inbox nodes are fibers published by `push_ready`, now ours.
        let next = unsafe { (*p).link.get() };
        unsafe { (*p).link.set(fifo) };
        fifo = p;
        p = next;
    }
    let first = unsafe { Box::from_raw(fifo) };
    let mut rest = first.link.replace(std::ptr::null_mut());
    while !rest.is_null() {
        let f = unsafe { Box::from_raw(rest) };
        rest = f.link.replace(std::ptr::null_mut());
        w.queue.push(f);
    }
    Some(first)
}

/// Expired timers, the inbox and A1 notifications; true if it made a fiber ready.
pub(super) fn service(ctx: &StCtx) -> bool {
    let sh = &*ctx.shared;
    let me = &sh.workers[ctx.index];
    let mut made = false;
    // A queue that never empties must not keep inbox fibers waiting.
    if let Some(f) = take_inbox(me) {
        me.queue.push(f);
        made = true;
    }
    if me.timers.load(Relaxed) > 0 {
        let now = Instant::now();
        let mut local = ctx.local.borrow_mut();
        while local
            .timers
            .peek()
            .is_some_and(|Reverse((t, _, _))| *t <= now)
        {
            let Reverse((_, _, TimerEntry(f))) = local.timers.pop().unwrap();
            me.timers.store(me.timers.load(Relaxed) - 1, Relaxed);
            me.queue.push(f);
            made = true;
        }
    }
    if me.notified.load(Relaxed) && me.notified.swap(false, SeqCst) {
        // A1: scan the whole blocked queue for fibers whose primitive lets them go.
        let mut local = ctx.local.borrow_mut();
        bump(&me.stats.a1_scans);
        let c = &me.stats.a1_scanned;
        c.store(c.load(Relaxed) + local.a1_blocked.len() as u64, Relaxed);
        let mut i = 0;
        while i < local.a1_blocked.len() {
            // SAFETY: a blocked fiber keeps its primitive borrowed, so it is alive.
            if unsafe { (*local.a1_blocked[i].1).try_acquire() } {
                let (f, _) = local.a1_blocked.swap_remove(i);
                bump(&me.wakes);
                me.queue.push(f);
                made = true;
            } else {
                i += 1;
            }
        }
    }
    made
}

pub(super) fn run(ctx: &StCtx, mut f: Box<Fiber>) {
    let sh = &*ctx.shared;
    let me = &sh.workers[ctx.index];
    if !f.bound {
        f.home = ctx.index;
    }
    FIBER.with(|c| c.set(&mut *f));
    stack::set_running(f.guard, f.id, f.size);
    let r = f.co.as_mut().unwrap().resume(());
    stack::clear_running();
    FIBER.with(|c| c.set(std::ptr::null_mut()));
    match r {
        CoroutineResult::Yield(Suspend::Yield) => me.queue.push(f),
        CoroutineResult::Yield(Suspend::Sleep(t)) => {
            let mut local = ctx.local.borrow_mut();
            local.seq += 1;
            let seq = local.seq;
            local.timers.push(Reverse((t, seq, TimerEntry(f))));
            bump(&me.timers);
        }
        CoroutineResult::Yield(Suspend::BlockA2(core)) => {
            bump(&me.blocks);
            let p = Box::into_raw(f);
            // SAFETY: the blocking fiber borrows the primitive until it is woken.
            let mut wake = RtWake { sh, st: ctx };
            let queued = unsafe { (*core).join(p, ctx.index, &mut wake) };
            if !queued {
                bump(&me.wakes);
                // It need not wait: it runs next, ahead of whatever the slot held.
                if let Some(old) = ctx.next.replace(Some(unsafe { Box::from_raw(p) })) {
                    me.queue.push(old);
                }
            }
        }
        CoroutineResult::Yield(Suspend::BlockA1(g)) => {
            bump(&me.blocks);
            // SAFETY: as above.
            let gate = unsafe { &*g };
            gate.register(ctx.index);
            if gate.try_acquire() {
                bump(&me.wakes);
                me.queue.push(f);
            } else {
                ctx.local.borrow_mut().a1_blocked.push((f, g));
            }
        }
        CoroutineResult::Return(()) => {
            let co = f.co.take().unwrap();
            let stack = co.into_stack();
            let mut local = ctx.local.borrow_mut();
            if local.stacks.len() < 64 {
                local.stacks.push(stack);
            } else {
                sh.stacks.lock().push(stack);
            }
            bump(&me.finished);
        }
    }
}

/// ST 0, when idle: if every live fiber stays blocked for `deadlock_timeout` with no wake-up
/// and nothing sleeping, declare a deadlock (joins from outside return
/// [`JoinError::Deadlock`]) and say so on stderr.
pub(super) fn check_deadlock(sh: &Shared, suspect: &mut Option<(Instant, u64)>) {
    let Some(limit) = sh.cfg.deadlock_timeout else {
        return;
    };
    if sh.deadlock.load(Relaxed) {
        return;
    }
    let timers: u64 = sh.workers.iter().map(|w| w.timers.load(SeqCst)).sum();
    let live = sh.live();
    let progress = sh.total_wakes() + sh.spawned.load(SeqCst);
    let stuck = live > 0 && timers == 0 && sh.blocked() == live;
    match (*suspect, stuck) {
        (_, false) => *suspect = None,
        (None, true) => *suspect = Some((Instant::now(), progress)),
        (Some((_, p)), true) if p != progress => *suspect = Some((Instant::now(), progress)),
        (Some((since, _)), true) => {
            if since.elapsed() >= limit {
                // Joins from outside now return `Error::Deadlock` and `deadlocked()` says so;
                // a library does not print.
                sh.deadlock.store(true, SeqCst);
            }
        }
    }
}
