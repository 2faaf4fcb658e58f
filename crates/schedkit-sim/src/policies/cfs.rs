//! The CFS model: Linux's Completely Fair Scheduler as seed 004 describes it (3.1.1, 3.4.3,
//! 4.2.1), with per-core run queues and periodic load balancing by eqs. 4.1-4.3. The policies
//! `pfs`, `tfps`, `twrs`, `global-fair` and `tenants` run this dispatcher under a controller
//! (`schedkit_core::controllers`) that changes weights or moves threads.
//!
//! # Model
//! - **Weights** come from nice through prio_to_weight (`SimThread::weight`, set by the
//!   scenario; controllers change it through [`Dispatcher::reweight`]).
//! - **vruntime**: a running thread's virtual runtime grows by `ran * 1024 / weight`, exactly
//!   (the division remainder is carried per thread, so no time is lost to rounding). `charge`
//!   only accumulates; the division happens when the vruntime is next needed.
//! - **Run queues**: one per core, an indexed 4-ary heap ordered by `(vruntime, ticket)`; the
//!   running thread (the kernel's `curr`) is outside the heap but counted in the queue's load
//!   and thread count, as in the kernel.
//! - **Slice** of a thread on core k: `period * w / W_k`, where `W_k` is the load of the queue
//!   (eq. 3.1-3.2) and `period = max(sched_latency, n_k * min_granularity)` with n_k the
//!   runnable threads of the queue; never below `min_granularity`.
//! - **Placement** of a new thread: the least-loaded core its affinity allows (ties: fewer
//!   threads, then the lower index), starting at that queue's `min_vruntime`. A woken thread
//!   (after a stop) goes to the least-loaded allowed core too, with the kernel's sleeper
//!   credit: `max(its vruntime, min_vruntime - sched_latency / 2)`, its vruntime carried over
//!   relative to the `min_vruntime` of the queue it left.
//! - **Wakeup/arrival preemption** (the kernel's `check_preempt_wakeup`): after a thread is
//!   placed or pulled onto a busy core, the running thread is preempted if its vruntime
//!   exceeds the newcomer's by more than the wakeup granularity converted to the newcomer's
//!   virtual time, `gran * 1024 / w_new`, with `gran = sched_latency / 6` (1 ms at the default
//!   6 ms, the kernel's default ratio; the scenario format has no separate knob). A new thread
//!   starts at `min_vruntime`, which is at most the running thread's vruntime, so arrivals
//!   rarely preempt; the slice end (`check_preempt_tick`) is the usual switch point.
//! - **Load balancing** every `balance_interval`: each
//!   core k in index order pulls from the busiest other queue that has a waiting thread, by
//!   eqs. 4.1-4.3 and `imbalance_pct` ([`schedkit_core::controllers::cfs_imbalance`], shared
//!   with the shuttle controller so both use the same test). Threads are taken from the
//!   busiest queue's tail (largest vruntime first); like the kernel's `move_tasks`, a thread is
//!   skipped if half its weight exceeds the load still to move, and moving stops once the
//!   imbalance is covered. A moved thread's vruntime is re-based on the target's
//!   `min_vruntime`. In the 4.2.2 example (1024 vs 4 x 335 on two cores) the imbalance is
//!   158 < 335 / 2, so nothing ever moves.
//! - **Newly idle cores** do not wait for eq. 4.3: a core whose queue is empty takes one
//!   waiting thread it may run from the most loaded queue that has one (the kernel's newidle
//!   balance with spare capacity, `migrate_task`, does the same), so the model is
//!   work-conserving. The thesis's example never has an idle core, so this changes nothing
//!   there.
//! - **Reweight** keeps the vruntime (2.6.24 behaviour) and updates the queue load.
//! - **Place** (a controller's `Migrate`) moves the thread to the target queue, re-based.
//!
//! # Invariants
//! Every runnable thread is in exactly one queue (in its heap, or as its `curr`, or "held"
//! between a migration and its re-enqueue); a queue's `load` and `nr` are the sums over those
//! threads. `min_vruntime` never decreases.
//!
//! # Cost
//! `enqueue` of an expired or preempted thread, `pick_next`, `charge` and `time_slice` are
//! O(log n) or O(1) with no allocation once the tables have grown. Placing a *new* thread
//! scans the cores (O(cores)); balancing is O(cores^2 + n log n) per interval in the worst
//! case but O(cores) when loads are balanced; an idle core's pull runs only when some queue
//! has a waiting thread, and costs O(cores log cores) plus a scan of the queues it looks
//! into (with affinities that forbid most moves, every queue).
//!
//! # Tie-breaking
//! Equal vruntimes run in enqueue order (ticket), which for simultaneous arrivals is file
//! order. Cores of equal load: fewer threads first, then the lower index.
//!
//! # What finishes without telling
//! The engine does not call the dispatcher when a running thread finishes or is stopped; the
//! queue notices when it next looks at that core (`settle`) by the thread's state.

use super::rt_class::{is_rt, RtClass};
use crate::policy::{Ctx, Dispatcher, Enqueue, ThreadState};
use schedkit_core::controllers::cfs_imbalance;
use schedkit_core::scenario::PolicySpec;
use schedkit_core::trace::Slot;
use schedkit_core::Nanos;

/// The weight of nice 0: one unit of vruntime per nanosecond at this weight.
const NICE_0_LOAD: u64 = 1024;

/// Where the dispatcher keeps a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Not runnable, finished, or never seen.
    Off,
    /// In the heap of `core`.
    Queued,
    /// Running on `core` (its `curr`).
    Running,
    /// Moved to `core` by a controller while running; its re-enqueue follows.
    Held,
}

#[derive(Clone, Copy, Debug)]
struct Ent {
    vruntime: u64,
    /// CPU time charged but not yet folded into `vruntime` (running threads only): `charge`
    /// is called for every running thread at every event instant, so it only adds, and the
    /// division happens when the vruntime is next looked at ([`Cfs::flush`]).
    pending: u64,
    /// Remainder of `ran * 1024 / weight`, carried to the next flush.
    rem: u64,
    /// Weight as counted in the queue's load.
    weight: u64,
    core: usize,
    at: At,
    /// vruntime minus the queue's min_vruntime when it went Off (for wakeups).
    lag: i64,
}

const OFF: Ent = Ent {
    vruntime: 0,
    pending: 0,
    rem: 0,
    weight: NICE_0_LOAD,
    core: 0,
    at: At::Off,
    lag: 0,
};

/// Children per heap node: a 4-ary heap is half as deep as a binary one and its children
/// share cache lines, which matters for queues of hundreds of threads.
const ARITY: usize = 4;

/// A heap entry: `(vruntime, ticket)` and the slot.
#[derive(Clone, Copy, Debug)]
struct Node {
    key: (u64, u64),
    slot: Slot,
}

#[derive(Default)]
struct RunQueue {
    /// 4-ary min-heap of waiting threads.
    heap: Vec<Node>,
    /// Sum of weights of runnable threads on this queue, `curr` included (eq. 4.1).
    load: u64,
    /// Runnable threads on this queue, `curr` included.
    nr: usize,
    curr: Option<Slot>,
    min_vruntime: u64,
    /// A thread was placed here since the last `preempt`: check wakeup preemption.
    check: bool,
}

/// The CFS dispatcher.
pub struct Cfs {
    /// The real-time class above this one (`class = "fifo"` threads).
    rt: RtClass,
    ents: Vec<Ent>,
    /// Heap index of each queued slot.
    pos: Vec<usize>,
    rqs: Vec<RunQueue>,
    ticket: u64,
    /// Threads waiting in heaps, all cores together.
    queued: usize,
    total_load: u64,
    latency: Nanos,
    min_gran: Nanos,
    wakeup_gran: u64,
    balance_interval: Nanos,
    imbalance_pct: u32,
    /// Cores whose `check` flag is set.
    to_check: Vec<usize>,
    scratch: Vec<Node>,
    order: Vec<usize>,
}

impl Cfs {
    pub fn new(spec: &PolicySpec, cores: usize) -> Cfs {
        Cfs {
            rt: RtClass::new(cores),
            ents: Vec::new(),
            pos: Vec::new(),
            rqs: (0..cores).map(|_| RunQueue::default()).collect(),
            ticket: 0,
            queued: 0,
            total_load: 0,
            latency: spec.sched_latency(),
            min_gran: spec.min_granularity(),
            wakeup_gran: spec.sched_latency().0 / 6,
            balance_interval: spec.balance_interval(),
            imbalance_pct: spec.imbalance_pct(),
            to_check: Vec::with_capacity(cores),
            scratch: Vec::new(),
            order: Vec::with_capacity(cores),
        }
    }

    fn ensure(&mut self, slot: Slot) {
        let i = slot as usize;
        if self.ents.len() <= i {
            self.ents.resize(i + 1, OFF);
            self.pos.resize(i + 1, usize::MAX);
        }
    }

    // --- the indexed heap -------------------------------------------------------------------

    /// Moves the node at `i` up to its place ("hole" technique: one write per level).
    /// Returns its final index.
    fn sift_up(&mut self, core: usize, mut i: usize) -> usize {
        let h = &mut self.rqs[core].heap;
        let node = h[i];
        while i > 0 {
            let p = (i - 1) / ARITY;
            if node.key >= h[p].key {
                break;
            }
            h[i] = h[p];
            self.pos[h[i].slot as usize] = i;
            i = p;
        }
        h[i] = node;
        self.pos[node.slot as usize] = i;
        i
    }

    /// Moves the node at `i` down to its place. Returns its final index.
    fn sift_down(&mut self, core: usize, mut i: usize) -> usize {
        let h = &mut self.rqs[core].heap;
        let node = h[i];
        let len = h.len();
        loop {
            let first = ARITY * i + 1;
            if first >= len {
                break;
            }
            let mut m = first;
            for c in first + 1..(first + ARITY).min(len) {
                if h[c].key < h[m].key {
                    m = c;
                }
            }
            if h[m].key >= node.key {
                break;
            }
            h[i] = h[m];
            self.pos[h[i].slot as usize] = i;
            i = m;
        }
        h[i] = node;
        self.pos[node.slot as usize] = i;
        i
    }

    /// Puts `slot` into the heap of `core` (its load is already counted there).
    fn push(&mut self, slot: Slot, core: usize) {
        self.flush(slot);
        self.ticket += 1;
        let e = &mut self.ents[slot as usize];
        e.at = At::Queued;
        e.core = core;
        let node = Node {
            key: (e.vruntime, self.ticket),
            slot,
        };
        let h = &mut self.rqs[core].heap;
        h.push(node);
        let i = h.len() - 1;
        self.pos[slot as usize] = i;
        self.queued += 1;
        self.sift_up(core, i);
    }

    /// Takes `slot` out of its heap.
    fn unlink(&mut self, slot: Slot) {
        let core = self.ents[slot as usize].core;
        let i = self.pos[slot as usize];
        self.pos[slot as usize] = usize::MAX;
        self.queued -= 1;
        let h = &mut self.rqs[core].heap;
        let last = h.pop().expect("queued slot is in its heap");
        if i < h.len() {
            h[i] = last;
            if self.sift_down(core, i) == i {
                self.sift_up(core, i);
            }
        }
    }

    // --- queue bookkeeping --------------------------------------------------------------------

    /// Folds `slot`'s pending CPU time into its vruntime: `ran * 1024 / weight`, exactly
    /// (the remainder is carried).
    fn flush(&mut self, slot: Slot) {
        let e = &mut self.ents[slot as usize];
        let ran = std::mem::take(&mut e.pending);
        if ran == 0 {
            return;
        }
        if e.weight == NICE_0_LOAD {
            e.vruntime += ran; // one vruntime unit per nanosecond
        } else if ran < 1 << 52 && e.weight < 1 << 61 {
            // 64-bit arithmetic suffices: ran * 1024 + rem < 2^62 + 2^61.
            let num = ran * NICE_0_LOAD + e.rem;
            e.vruntime += num / e.weight;
            e.rem = num % e.weight;
        } else {
            let num = ran as u128 * NICE_0_LOAD as u128 + e.rem as u128;
            let w = e.weight as u128;
            e.vruntime += (num / w) as u64;
            e.rem = (num % w) as u64;
        }
    }

    /// The queue's min_vruntime, brought up to date: `max(old, min(curr, leftmost))`.
    fn min_vruntime(&mut self, core: usize) -> u64 {
        if let Some(c) = self.rqs[core].curr {
            self.flush(c);
        }
        let rq = &self.rqs[core];
        let curr = rq.curr.map(|s| self.ents[s as usize].vruntime);
        let left = rq.heap.first().map(|n| n.key.0);
        let cand = match (curr, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let rq = &mut self.rqs[core];
        if let Some(v) = cand {
            rq.min_vruntime = rq.min_vruntime.max(v);
        }
        rq.min_vruntime
    }

    fn add_load(&mut self, core: usize, w: u64) {
        self.rqs[core].load += w;
        self.rqs[core].nr += 1;
        self.total_load += w;
    }

    fn sub_load(&mut self, core: usize, w: u64) {
        self.rqs[core].load -= w;
        self.rqs[core].nr -= 1;
        self.total_load -= w;
    }

    /// Takes `slot` off its queue entirely (it finished, blocked, or is placed anew).
    fn detach(&mut self, slot: Slot) {
        self.flush(slot);
        let e = self.ents[slot as usize];
        match e.at {
            At::Off => return,
            At::Queued => self.unlink(slot),
            At::Running => {
                if self.rqs[e.core].curr == Some(slot) {
                    self.rqs[e.core].curr = None;
                }
            }
            At::Held => {}
        }
        let min = self.min_vruntime(e.core);
        self.sub_load(e.core, e.weight);
        let e = &mut self.ents[slot as usize];
        e.lag = e.vruntime.wrapping_sub(min) as i64;
        e.at = At::Off;
    }

    /// Notices that `core`'s running thread finished or was stopped.
    fn settle(&mut self, ctx: &Ctx, core: usize) {
        if let Some(s) = self.rqs[core].curr {
            if matches!(
                ctx.thread(s).state,
                ThreadState::Done | ThreadState::Blocked
            ) {
                self.detach(s);
            }
        }
    }

    fn settle_all(&mut self, ctx: &Ctx) {
        for c in 0..self.rqs.len() {
            self.settle(ctx, c);
        }
    }

    fn mark(&mut self, core: usize) {
        if !self.rqs[core].check {
            self.rqs[core].check = true;
            self.to_check.push(core);
        }
    }

    /// The least-loaded core `slot` may use (ties: fewer threads, then the lower index).
    fn select_core(&self, ctx: &Ctx, slot: Slot) -> usize {
        let t = ctx.thread(slot);
        (0..self.rqs.len())
            .filter(|&c| t.allowed_on(c))
            .min_by_key(|&c| (self.rqs[c].load, self.rqs[c].nr, c))
            .unwrap_or(0)
    }

    /// Moves `slot` (queued or held) from its queue to `to`, re-basing its vruntime.
    fn move_to(&mut self, slot: Slot, to: usize) {
        self.flush(slot);
        let e = self.ents[slot as usize];
        let from = e.core;
        if from == to {
            return;
        }
        let from_min = self.min_vruntime(from);
        let to_min = self.min_vruntime(to);
        let queued = e.at == At::Queued;
        if queued {
            self.unlink(slot);
        }
        self.sub_load(from, e.weight);
        self.add_load(to, e.weight);
        let ent = &mut self.ents[slot as usize];
        ent.vruntime = (ent.vruntime as i128 - from_min as i128 + to_min as i128).max(0) as u64;
        ent.core = to;
        if queued {
            self.push(slot, to);
            self.mark(to);
        }
    }

    /// The two most loaded cores that have a waiting thread (ties: the lower index).
    fn busiest_two(&self) -> (Option<usize>, Option<usize>) {
        let (mut b1, mut b2): (Option<usize>, Option<usize>) = (None, None);
        for c in (0..self.rqs.len()).filter(|&c| !self.rqs[c].heap.is_empty()) {
            let l = self.rqs[c].load;
            if b1.is_none_or(|b| l > self.rqs[b].load) {
                b2 = b1;
                b1 = Some(c);
            } else if b2.is_none_or(|b| l > self.rqs[b].load) {
                b2 = Some(c);
            }
        }
        (b1, b2)
    }

    /// One pull of core `k` from the busiest other queue `b` (eqs. 4.1-4.3). Returns whether
    /// a thread moved.
    fn pull_from(&mut self, ctx: &Ctx, k: usize, b: usize) -> bool {
        let cores = self.rqs.len();
        let (ents, rq) = (&self.ents, &self.rqs[b]);
        // Smallest weight in S_busiest (waiting threads and curr), for eq. 4.3; only
        // computed when the cheaper gates pass.
        let min_w = || {
            rq.heap
                .iter()
                .map(|n| ents[n.slot as usize].weight)
                .chain(rq.curr.map(|s| ents[s as usize].weight))
                .min()
                .unwrap_or(u64::MAX)
        };
        let Some(imbal_n) = cfs_imbalance(
            rq.load,
            self.rqs[k].load,
            self.total_load,
            cores,
            self.imbalance_pct,
            min_w,
        ) else {
            return false;
        };
        // Candidates: waiting threads allowed on k, largest vruntime first.
        let mut cand = std::mem::take(&mut self.scratch);
        cand.clear();
        cand.extend(
            self.rqs[b]
                .heap
                .iter()
                .filter(|n| ctx.thread(n.slot).allowed_on(k)),
        );
        cand.sort_unstable_by_key(|n| std::cmp::Reverse(n.key));
        let n = cores as i128;
        let mut rem = imbal_n as i128; // cores * load still to move
        let mut moved = false;
        for node in &cand {
            if rem <= 0 {
                break;
            }
            let w = self.ents[node.slot as usize].weight as i128;
            if w * n / 2 > rem {
                continue; // half its weight exceeds what is left to move
            }
            self.move_to(node.slot, k);
            rem -= w * n;
            moved = true;
        }
        self.scratch = cand;
        moved
    }

    /// Pull of a newly idle core `k`: one waiting thread it may run, from the most loaded
    /// queue that has one (ties: the lower index), the one with the largest vruntime there.
    /// This does not wait for eq. 4.3, so no core idles while a thread it may run waits.
    fn idle_pull(&mut self, ctx: &Ctx, k: usize) -> bool {
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend((0..self.rqs.len()).filter(|&c| c != k && !self.rqs[c].heap.is_empty()));
        let rqs = &self.rqs;
        order.sort_unstable_by_key(|&c| (std::cmp::Reverse(rqs[c].load), c));
        let mut found = None;
        for &b in &order {
            found = self.rqs[b]
                .heap
                .iter()
                .filter(|n| ctx.thread(n.slot).allowed_on(k))
                .max_by_key(|n| n.key)
                .map(|n| n.slot);
            if found.is_some() {
                break;
            }
        }
        self.order = order;
        match found {
            Some(slot) => {
                self.move_to(slot, k);
                true
            }
            None => false,
        }
    }
}

impl Dispatcher for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        self.ensure(slot);
        if self.rt.enqueue(ctx, slot, why) {
            return;
        }
        let e = self.ents[slot as usize];
        if matches!(why, Enqueue::Expired | Enqueue::Preempted)
            && matches!(e.at, At::Running | At::Held)
        {
            // Back into its own queue (which a migration may have changed).
            if self.rqs[e.core].curr == Some(slot) {
                self.rqs[e.core].curr = None;
            }
            self.push(slot, e.core);
            return;
        }
        // A new thread, a woken one, or a reused slot: place it afresh.
        self.detach(slot);
        let lag = self.ents[slot as usize].lag;
        self.settle_all(ctx);
        let core = self.select_core(ctx, slot);
        let min = self.min_vruntime(core);
        let weight = ctx.thread(slot).weight.max(1);
        let vruntime = match why {
            Enqueue::New => min,
            _ => {
                let credit = min.saturating_sub(self.latency.0 / 2);
                let carried = (min as i128 + lag as i128).max(0) as u64;
                carried.max(credit)
            }
        };
        self.ents[slot as usize] = Ent {
            vruntime,
            pending: 0,
            rem: 0,
            weight,
            core,
            at: At::Off,
            lag: 0,
        };
        self.add_load(core, weight);
        self.push(slot, core);
        self.mark(core);
    }

    fn pick_next(&mut self, ctx: &Ctx, core: usize) -> Option<Slot> {
        self.settle(ctx, core);
        if let Some(s) = self.rt.pick(core) {
            return Some(s);
        }
        if self.rqs[core].heap.is_empty() && self.queued > 0 {
            self.idle_pull(ctx, core);
        }
        let slot = self.rqs[core].heap.first()?.slot;
        self.unlink(slot);
        self.ents[slot as usize].at = At::Running;
        self.rqs[core].curr = Some(slot);
        Some(slot)
    }

    fn time_slice(&mut self, ctx: &Ctx, core: usize, slot: Slot) -> Option<Nanos> {
        if is_rt(ctx, slot) {
            return None;
        }
        let rq = &self.rqs[core];
        let w = self.ents[slot as usize].weight;
        let period = self.latency.0.max(self.min_gran.0 * rq.nr.max(1) as u64);
        let slice = (period as u128 * w as u128 / rq.load.max(w) as u128) as u64;
        Some(Nanos(slice.max(self.min_gran.0)))
    }

    fn charge(&mut self, ctx: &Ctx, slot: Slot, _core: usize, ran: Nanos) {
        if is_rt(ctx, slot) {
            return;
        }
        self.ents[slot as usize].pending += ran.0;
    }

    fn preempt(&mut self, ctx: &Ctx, out: &mut Vec<usize>) {
        self.rt.preempt(ctx, out);
        while let Some(core) = self.to_check.pop() {
            self.rqs[core].check = false;
            let (Some(curr), Some(top)) = (ctx.running[core], self.rqs[core].heap.first()) else {
                continue;
            };
            if is_rt(ctx, curr) || out.contains(&core) {
                continue;
            }
            let (top_vr, new_w) = (top.key.0, self.ents[top.slot as usize].weight);
            self.flush(curr);
            let gran = self.wakeup_gran * NICE_0_LOAD / new_w.max(1);
            if self.ents[curr as usize].vruntime > top_vr.saturating_add(gran) {
                out.push(core);
            }
        }
    }

    fn remove(&mut self, ctx: &Ctx, slot: Slot) {
        if is_rt(ctx, slot) {
            self.rt.remove(slot);
            return;
        }
        if (slot as usize) < self.ents.len() {
            self.detach(slot);
        }
    }

    fn balance_interval(&self) -> Option<Nanos> {
        (self.rqs.len() > 1).then_some(self.balance_interval)
    }

    fn balance(&mut self, ctx: &Ctx) {
        self.settle_all(ctx);
        if self.queued == 0 {
            return;
        }
        // The busiest queues change only when something moves: O(cores) per round.
        let mut top = self.busiest_two();
        for k in 0..self.rqs.len() {
            let b = match top {
                (Some(b), _) if b != k => b,
                (_, Some(b)) => b,
                _ => continue,
            };
            if self.pull_from(ctx, k, b) {
                self.mark(k);
                top = self.busiest_two();
            }
        }
    }

    fn reweight(&mut self, ctx: &Ctx, slot: Slot, _old_weight: u64) {
        if slot as usize >= self.ents.len() {
            return;
        }
        let new = ctx.thread(slot).weight.max(1);
        self.flush(slot); // time run so far counts at the old weight
        let e = &mut self.ents[slot as usize];
        let old = std::mem::replace(&mut e.weight, new);
        e.rem = 0;
        if e.at != At::Off {
            let core = e.core;
            self.rqs[core].load = self.rqs[core].load - old + new;
            self.total_load = self.total_load - old + new;
        }
    }

    fn place(&mut self, _ctx: &Ctx, slot: Slot, core: usize) {
        self.ensure(slot);
        let e = self.ents[slot as usize];
        match e.at {
            At::Off => self.ents[slot as usize].core = core,
            At::Queued | At::Held => self.move_to(slot, core),
            At::Running => {
                // The engine took it off its core and will enqueue it right after.
                if self.rqs[e.core].curr == Some(slot) {
                    self.rqs[e.core].curr = None;
                }
                self.ents[slot as usize].at = At::Held;
                self.move_to(slot, core);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate_report;
    use schedkit_core::Scenario;

    fn run(text: &str) -> schedkit_core::Report {
        let sc = Scenario::parse("t.toml", text).expect("scenario");
        simulate_report(&sc, false).expect("sim").0
    }

    #[test]
    fn weights_share_one_core() {
        // nice 0 vs nice 5: 1024 : 335.
        let r = run(r#"
cores = 1
[policy]
name = "cfs"
[run]
horizon = "10s"
[[process]]
name = "a"
nice = 0
[[process]]
name = "b"
nice = 5
"#);
        let a = r.processes[0].cpu_ns as f64;
        let b = r.processes[1].cpu_ns as f64;
        let want = 1024.0 / 335.0;
        assert!((a / b - want).abs() / want < 0.01, "{a} / {b}");
    }

    #[test]
    fn slices_follow_the_period() {
        // 3 equal threads on one core: period 6 ms, slice 2 ms; 10 threads: period 7.5 ms,
        // slice 0.75 ms. Dispatches in [0, 60 ms], both ends included: 60 / slice + 1.
        for (n, want) in [(3u64, 31u64), (10, 81)] {
            let r = run(&format!(
                "cores = 1\n[policy]\nname = \"cfs\"\n[run]\nhorizon = \"60ms\"\n\
                 [[process]]\nname = \"p\"\nthreads = {n}\n"
            ));
            assert_eq!(r.summary.dispatches, want, "{n} threads");
        }
    }

    #[test]
    fn idle_core_pulls_and_finishes_everything() {
        let r = run(r#"
cores = 2
[policy]
name = "cfs"
[[process]]
name = "p"
threads = 4
burst = "20ms"
cpus = [0]
[[process]]
name = "q"
threads = 1
burst = "5ms"
"#);
        for t in &r.threads {
            assert_eq!(
                t.cpu_ns,
                if t.process == "q" {
                    5_000_000
                } else {
                    20_000_000
                }
            );
        }
        // p is pinned to core 0: 80 ms of work there; q runs on core 1.
        assert_eq!(r.summary.makespan_ns, 80_000_000);
    }
}
