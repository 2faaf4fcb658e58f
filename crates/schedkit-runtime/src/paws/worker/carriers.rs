//! Fiber stacks and the carrier fibers that run on them: a warm cache of stacks, a small
//! reserve so a worker never waits for an allocation mid-switch.

use super::*;

pub(super) const WARM_CAP: usize = 256;

/// Free fibers each worker makes before the pool starts, on stacks touched end to end, so that
/// the first preemptions of a pool (which need a fiber for the preempting job while the
/// preempted one keeps its own) do not pay for mapping and faulting a stack. Beyond these a
/// worker maps more on demand and keeps them.
pub(super) const RESERVE: usize = 8;

/// A stack of the configured size from [`WARM`] (`PooledStack`), else a freshly mapped one
/// (`NewStack`).
fn new_stack(sh: &Shared) -> (FiberStack, FiberHow) {
    // `FiberStack::new` rounds the size up to pages (and to 16 KiB at least): a stack of this
    // pool's size is one at least `min` and less than a page more.
    let min = sh.cfg.stack_size.max(16 * 1024);
    let mut warm = WARM.lock();
    if let Some(i) = warm
        .iter()
        .rposition(|s| (min..min + 4096).contains(&s.size()))
    {
        return (warm.swap_remove(i), FiberHow::PooledStack);
    }
    drop(warm);
    let stack = FiberStack::new(sh.cfg.stack_size, 16 * 1024)
        .expect("schedkit paws: cannot map a fiber stack");
    (stack, FiberHow::NewStack)
}

/// Writes every page of the usable part of an unused stack, so that running on it later
/// faults nothing in.
fn touch(stack: &FiberStack) {
    use corosensei::stack::Stack;
    let lo = stack.guard_range().1;
    let hi = stack.base().get();
    for a in (lo..hi).step_by(4096) {
        // SAFETY: `[guard end, base)` is the stack's readable and writable part, and nothing
        // runs on this stack yet.
        unsafe { std::ptr::write_volatile(a as *mut u8, 0) };
    }
}

/// A free fiber for `RESERVE`: a warm stack, touched end to end.
pub(super) fn reserve_carrier(sh: &Shared) -> Box<Fib> {
    let (stack, _) = new_stack(sh);
    touch(&stack);
    carrier_on(sh, stack)
}

/// A new fiber, free to carry work (see [`Fib`]), and where its stack came from.
pub(super) fn carrier(sh: &Shared) -> (Box<Fib>, FiberHow) {
    let (stack, how) = new_stack(sh);
    (carrier_on(sh, stack), how)
}

fn carrier_on(sh: &Shared, stack: FiberStack) -> Box<Fib> {
    let (guard, size) = (stack.guard_range(), stack.size());
    let shp = sh as *const Shared as usize;
    let co = Co::with_stack(stack, move |y: &Yielder<(), Suspend>, ()| {
        set_yielder(y);
        // SAFETY: the pool's Shared outlives every fiber (the pool waits for all jobs).
        let sh = unsafe { &*(shp as *const Shared) };
        // Nothing owned lives across the suspensions of this loop (`Suspend::SwitchTo` and
        // `Idle`), so a free fiber can be reset without running destructors at the end.
        loop {
            let Some(mut next) = me().assign.borrow_mut().take() else {
                return;
            };
            loop {
                run_entry(sh, next);
                match after_entry(sh) {
                    Some(n) => next = n,
                    None => break,
                }
            }
        }
    });
    Box::new(Fib {
        co: Some(co),
        yielder: Cell::new(std::ptr::null()),
        entry: RefCell::new(None),
        assign: RefCell::new(None),
        last_core: Cell::new(usize::MAX),
        last: Cell::new(Last::Preempted),
        inline: Cell::new(None),
        guard,
        size,
    })
}
