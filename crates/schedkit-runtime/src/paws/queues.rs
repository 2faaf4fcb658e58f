//! The pool's dispatcher: the PAWS / global EDF / work-stealing state machine of
//! `schedkit-policy` (rules A-F of seed 001, section 4), written once and driven here under
//! the pool's lock, in the simulator on virtual time. The pool's victim choice is
//! [`XorShift`] seeded from [`super::RtConfig::seed`].

pub use schedkit_policy::paws::*;
