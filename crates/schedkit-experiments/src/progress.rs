//! How a long experiment says how far it is. The library never prints: it reports progress
//! through this trait, and the binary draws it (a progress bar on a terminal, nothing
//! otherwise). Tests pass [`Silent`].

/// Progress of a run of many steps.
pub trait Progress: Sync {
    /// The number of steps the whole run takes (may be called again to correct it).
    fn start(&self, _steps: u64) {}
    /// What is being done now.
    fn message(&self, _what: &str) {}
    /// One step is done.
    fn step(&self) {}
    /// The run is over (the bar is cleared).
    fn finish(&self) {}
}

/// Progress that goes nowhere.
pub struct Silent;

impl Progress for Silent {}
