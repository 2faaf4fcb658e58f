//! Scheduling decisions written once, with no clock, no threads and no events of their own.
//!
//! Each module is a pure state machine that a driver feeds with what happened (a job became
//! ready, a core stopped its entry, a core wants work) and that answers with decisions (what
//! a core runs next, which core is asked to preempt, which sleeping core to wake). Two
//! drivers use them:
//! - the simulator (`schedkit-sim`), whose dispatchers `paws` and `ws` translate the engine's
//!   hooks into these calls on virtual time;
//! - the runtime pool (`schedkit-runtime::paws`), which takes the same decisions under one
//!   lock on real time and executes them with fibers.
//!
//! `schedkit-sim/tests/policy_agree.rs` runs both on the same random task sets and requires
//! the same decisions.

pub mod paws;
