//! schedkit's experiments as library code: each takes typed options and returns typed rows,
//! with rendering (tables, JSON, charts) separate, so the `schedkit` binary only parses
//! arguments, calls, and prints. Also the pieces experiments share: summary statistics
//! ([`stats`]) and fairness metrics over traces ([`metrics`]).
//!
//! So far: the simulator's parameter sweep ([`sweep`]) and the fidelity of the simulator's
//! kernel models against real runs ([`fidelity`], whose real runs the binary supplies). The experiments that drive the real
//! engine (`schedkit experiment ...`) still live in the binary.

pub mod error;
pub mod fidelity;
pub mod metrics;
pub mod stats;
pub mod sweep;

pub use error::Error;
