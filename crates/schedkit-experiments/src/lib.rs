//! schedkit's experiments as library code: each takes typed options and returns typed rows,
//! with rendering (tables, JSON, charts) separate, so the `schedkit` binary only parses
//! arguments, calls, and prints. Also the pieces experiments share: summary statistics
//! ([`stats`]) and fairness metrics over traces ([`metrics`]).
//!
//! Here: the simulator's parameter sweep ([`sweep`]), the policy comparison ([`compare`]), the
//! simulator's benchmarks ([`bench`]) and the experiments [`gang`], [`exclusive`], [`fibers`]
//! and [`paws`]. Those that need the real engine or
//! helper processes get them through [`machine::Machine`], which the binary implements;
//! progress goes through [`progress::Progress`]; nothing here prints. `experiment greedy`,
//! `global-fairness` and `tenants` still live in the binary. The fidelity of the simulator's
//! kernel models against real runs ([`fidelity`]) gets its real runs from the binary too.

pub mod bench;
pub mod compare;
pub mod error;
pub mod exclusive;
pub mod fibers;
pub mod fidelity;
pub mod gang;
pub mod machine;
pub mod metrics;
pub mod paws;
pub mod progress;
pub mod stats;
pub mod sweep;

pub use error::Error;
