//! Fiber stacks: `mmap`ed, with a `PROT_NONE` guard region below the usable part, reused
//! through a pool, and a SIGSEGV/SIGBUS handler that turns a hit on the running fiber's guard
//! into a one-line "fiber stack overflow" report and an abort, instead of a bare segfault.
//!
//! Why abort rather than unwind the fiber: a fault inside a guard page arrives as a signal in
//! the middle of arbitrary code (possibly holding a lock); the only thing that is safe from a
//! signal handler is to report and stop, which is what `std` does for thread stacks too.
//!
//! The handler runs on the ST's alternate signal stack (the fiber's own stack is exhausted);
//! `std` gives every thread it spawns one, and [`ensure_altstack`] adds one if not.
//! A frame larger than the guard (default 16 KiB) can jump over it: the guard size is a knob.

use std::cell::Cell;
use std::io;
use std::ptr;
use std::sync::Once;

use corosensei::stack::{Stack, StackPointer};

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// One fiber stack: `[base - len, base - len + guard)` is the guard, the rest is usable.
pub struct FiberStack {
    map: *mut u8,
    len: usize,
    guard: usize,
}

// SAFETY: the stack is plain memory owned by this value.
unsafe impl Send for FiberStack {}

impl FiberStack {
    /// A stack with at least `size` usable bytes and a guard of at least `guard` bytes (both
    /// rounded up to pages).
    pub fn new(size: usize, guard: usize) -> io::Result<FiberStack> {
        let page = page_size();
        let round = |x: usize| (x.max(1) + page - 1) & !(page - 1);
        let (size, guard) = (round(size.max(16 * 1024)), round(guard));
        let len = size + guard;
        // SAFETY: a fresh anonymous private mapping; checked below.
        unsafe {
            let map = libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if map == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let map = map as *mut u8;
            if libc::mprotect(
                map.add(guard).cast(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
            ) != 0
            {
                let e = io::Error::last_os_error();
                libc::munmap(map.cast(), len);
                return Err(e);
            }
            Ok(FiberStack { map, len, guard })
        }
    }

    /// Usable bytes.
    pub fn size(&self) -> usize {
        self.len - self.guard
    }

    /// The guard region `[start, end)`.
    pub fn guard_range(&self) -> (usize, usize) {
        (self.map as usize, self.map as usize + self.guard)
    }
}

impl Drop for FiberStack {
    fn drop(&mut self) {
        // SAFETY: we own the mapping.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

// SAFETY: base and limit describe memory we own for the stack's life; the limit includes the
// guard, as the trait asks; both are page-aligned (so aligned to STACK_ALIGNMENT).
unsafe impl Stack for FiberStack {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.map as usize + self.len).unwrap()
    }
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.map as usize).unwrap()
    }
}

thread_local! {
    /// Guard range, id and usable size of the fiber running on this thread (0s when none).
    static RUNNING: Cell<(usize, usize, u64, usize)> = const { Cell::new((0, 0, 0, 0)) };
}

/// Records which fiber runs on this thread, for the overflow handler.
#[inline]
pub(crate) fn set_running(guard: (usize, usize), id: u64, size: usize) {
    RUNNING.with(|r| r.set((guard.0, guard.1, id, size)));
}

#[inline]
pub(crate) fn clear_running() {
    RUNNING.with(|r| r.set((0, 0, 0, 0)));
}

static INSTALL: Once = Once::new();
static mut PREV_SEGV: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static mut PREV_BUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

/// Installs the overflow handler once per process (it chains to the previous handler for
/// faults that are not fiber overflows).
pub(crate) fn install_overflow_handler() {
    INSTALL.call_once(|| unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(
            libc::SIGSEGV,
            &sa,
            ptr::addr_of_mut!(PREV_SEGV).cast::<libc::sigaction>(),
        );
        libc::sigaction(
            libc::SIGBUS,
            &sa,
            ptr::addr_of_mut!(PREV_BUS).cast::<libc::sigaction>(),
        );
    });
}

/// Gives the calling thread an alternate signal stack if it has none.
pub(crate) fn ensure_altstack() {
    // SAFETY: querying and setting the calling thread's sigaltstack.
    unsafe {
        let mut cur: libc::stack_t = std::mem::zeroed();
        libc::sigaltstack(ptr::null(), &mut cur);
        if cur.ss_flags & libc::SS_DISABLE == 0 {
            return;
        }
        let size = 64 * 1024;
        let mem = libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if mem == libc::MAP_FAILED {
            return;
        }
        let st = libc::stack_t {
            ss_sp: mem,
            ss_flags: 0,
            ss_size: size,
        };
        // The mapping lives as long as the thread (leaked on purpose: one per ST).
        libc::sigaltstack(&st, ptr::null_mut());
    }
}

unsafe extern "C" fn handler(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let addr = (*info).si_addr() as usize;
    let (lo, hi, id, size) = RUNNING.try_with(|r| r.get()).unwrap_or((0, 0, 0, 0));
    if hi > lo && addr >= lo && addr < hi {
        let mut buf = [0u8; 160];
        let mut n = 0;
        let mut put = |s: &[u8]| {
            for &b in s {
                if n < buf.len() {
                    buf[n] = b;
                    n += 1;
                }
            }
        };
        put(b"schedkit-runtime: fiber ");
        put(itoa(id, &mut [0u8; 20]));
        put(b" has overflowed its stack (");
        put(itoa(size as u64, &mut [0u8; 20]));
        put(b" bytes; raise Config::stack_size)\nfatal runtime error: fiber stack overflow, aborting\n");
        libc::write(2, buf.as_ptr().cast(), n);
        libc::abort();
    }
    // Not ours: restore the previous disposition and return; the fault repeats and the
    // previous handler (std's, or the default) deals with it.
    let prev = if sig == libc::SIGBUS {
        ptr::addr_of!(PREV_BUS)
    } else {
        ptr::addr_of!(PREV_SEGV)
    };
    libc::sigaction(sig, prev.cast::<libc::sigaction>(), ptr::null_mut());
    let _ = ctx;
}

/// Formats `v` in decimal into `buf` without allocating (signal-safe).
fn itoa(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn itoa_formats() {
        assert_eq!(itoa(0, &mut [0; 20]), b"0");
        assert_eq!(itoa(65536, &mut [0; 20]), b"65536");
        assert_eq!(itoa(u64::MAX, &mut [0; 20]), b"18446744073709551615");
    }

    #[test]
    fn stack_sizes_round_to_pages() {
        let s = FiberStack::new(20_000, 1).unwrap();
        let p = page_size();
        assert_eq!(s.size() % p, 0);
        assert!(s.size() >= 20_000);
        let (lo, hi) = s.guard_range();
        assert_eq!(hi - lo, p);
        assert_eq!(s.limit().get(), lo);
        assert_eq!(s.base().get() - s.limit().get(), s.size() + p);
    }
}
