//! schedkit-core: what every schedkit engine shares.
//!
//! - [`time`]: integer-nanosecond time and unit-carrying durations;
//! - [`scenario`]: the scenario file format, parsed and validated with located errors;
//! - [`policies`]: the one list of policies, what each does and which engines run it;
//! - [`trace`]: the event log both engines write;
//! - [`report`]: every metric, computed once from the trace;
//! - [`gps`]: the GPS ideal reference;
//! - [`controllers`]: the fair-share controllers (PFS, TFPS, TWRS, shuttle balancer, tenants);
//! - [`gang_overhead`]: seed 002's switch-overhead model for gang scheduling;
//! - [`weights`]: the kernel's nice-to-weight table.

pub mod control;
pub mod controllers;
pub mod gang_overhead;
pub mod generate;
pub mod gps;
mod overrides;
pub mod policies;
pub mod report;
pub mod scenario;
pub mod stats;
pub mod time;
pub mod trace;
pub mod validate;
pub mod weights;

pub use report::{Metrics, Report};
pub use scenario::{PolicyName, Scenario, ScenarioError};
pub use time::Nanos;
pub use trace::{Event, Owner, Reason, Slot, TraceLog, TraceSink};
