//! Recursive Fibonacci with `join`, written once for the PAWS pool and for Rayon, shared by
//! `benches/peers.rs` and `examples/paws_fib_ab.rs` so both compare the same code.
#![allow(dead_code)]

pub mod ab;

use schedkit_runtime::paws;

/// The sequential leaves, shared by both sides (not inlined, so both run the same code).
#[inline(never)]
pub fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

pub fn fib_paws(n: u64, cutoff: u64) -> u64 {
    if n < 2 {
        return n;
    }
    if n <= cutoff {
        return fib_seq(n);
    }
    let (a, b) = paws::join(|| fib_paws(n - 1, cutoff), || fib_paws(n - 2, cutoff));
    a + b
}

pub fn fib_rayon(n: u64, cutoff: u64) -> u64 {
    if n < 2 {
        return n;
    }
    if n <= cutoff {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1, cutoff), || fib_rayon(n - 2, cutoff));
    a + b
}
