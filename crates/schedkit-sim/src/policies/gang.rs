//! Gang scheduling's dispatcher: each core runs only the threads pinned to it.
//!
//! Policy: the gang controller ([`schedkit_core::controllers::gang`], Ousterhout's matrix,
//! seed 002) decides *which* jobs run (it stops every job outside the running time slot) and
//! *where* (it pins each thread to its matrix column with `Migrate`). This dispatcher only
//! obeys: a core picks, first come first served, among the ready threads pinned to it. A
//! thread that arrived after the controller's last tick waits, unpicked, until the
//! controller places it: running it anywhere would break the
//! gang (its core could belong to another job of the slot).
//!
//! Invariants: a thread is in at most one queue; only threads whose affinity is exactly one
//! core are picked, on that core. Not work-conserving (idle columns of a slot stay idle).
//! Ties: FIFO per core.

use crate::policy::{Ctx, Dispatcher, Enqueue};
use schedkit_core::trace::Slot;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Out,
    Unplaced,
    Core(usize),
}

pub struct GangDispatch {
    queues: Vec<Vec<Slot>>,
    loc: Vec<Loc>,
}

impl GangDispatch {
    pub fn new(cores: usize) -> GangDispatch {
        GangDispatch {
            queues: vec![Vec::new(); cores],
            loc: Vec::new(),
        }
    }

    fn take_out(&mut self, slot: Slot) {
        let s = slot as usize;
        if let Some(Loc::Core(c)) = self.loc.get(s).copied() {
            self.queues[c].retain(|&x| x != slot);
        }
        if s < self.loc.len() {
            self.loc[s] = Loc::Out;
        }
    }

    fn put(&mut self, slot: Slot, loc: Loc) {
        let s = slot as usize;
        if s >= self.loc.len() {
            self.loc.resize(s + 1, Loc::Out);
        }
        self.loc[s] = loc;
        if let Loc::Core(c) = loc {
            self.queues[c].push(slot);
        }
    }
}

/// The single core a thread is pinned to, if it is.
fn pinned(ctx: &Ctx, slot: Slot) -> Option<usize> {
    match ctx.thread(slot).affinity.as_deref() {
        Some([c]) => Some(*c),
        _ => None,
    }
}

impl Dispatcher for GangDispatch {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn enqueue(&mut self, ctx: &Ctx, slot: Slot, why: Enqueue) {
        // A new thread waits for the controller's `Migrate` (`place`), even if the scenario
        // pinned it (`cpus`): its column in the matrix decides where it runs. Afterwards its
        // affinity is the controller's.
        let loc = match why {
            Enqueue::New => Loc::Unplaced,
            _ => pinned(ctx, slot).map_or(Loc::Unplaced, Loc::Core),
        };
        self.put(slot, loc);
    }

    fn pick_next(&mut self, _ctx: &Ctx, core: usize) -> Option<Slot> {
        let q = &mut self.queues[core];
        if q.is_empty() {
            return None;
        }
        let slot = q.remove(0);
        self.loc[slot as usize] = Loc::Out;
        Some(slot)
    }

    fn remove(&mut self, _ctx: &Ctx, slot: Slot) {
        self.take_out(slot);
    }

    fn place(&mut self, _ctx: &Ctx, slot: Slot, core: usize) {
        // Only a queued thread moves; a running or stopped one is queued on its new core when
        // it is enqueued again (its affinity already says where).
        if matches!(
            self.loc.get(slot as usize),
            Some(Loc::Unplaced | Loc::Core(_))
        ) {
            self.take_out(slot);
            self.put(slot, Loc::Core(core));
        }
    }

    fn work_conserving(&self) -> bool {
        false
    }
}
