//! The progress bar the binary draws for the libraries' [`Progress`] reports (on stderr, and
//! only on a terminal).

use schedkit_experiments::progress::Progress;
use std::io::IsTerminal;

/// An indicatif bar behind the experiments' `Progress` trait.
pub struct Bar(indicatif::ProgressBar);

impl Bar {
    /// indicatif's default bar (drawn on stderr when it is a terminal).
    pub fn plain() -> Bar {
        Bar(indicatif::ProgressBar::new(0))
    }

    /// A bar in `template` (indicatif's syntax), drawn only when stderr is a terminal.
    pub fn styled(template: &str) -> Bar {
        if !std::io::stderr().is_terminal() {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let pb = indicatif::ProgressBar::new(0);
        pb.set_style(
            indicatif::ProgressStyle::with_template(template)
                .expect("valid template")
                .progress_chars("=> "),
        );
        Bar(pb)
    }

    /// The usual bar of the experiments: steps, what is being done, the time left.
    pub fn experiment() -> Bar {
        Bar::styled("{bar:40} {pos}/{len} · {msg} · ETA {eta}")
    }
}

impl Progress for Bar {
    fn start(&self, steps: u64) {
        self.0.set_length(steps);
    }
    fn message(&self, what: &str) {
        self.0.set_message(what.to_string());
    }
    fn step(&self) {
        self.0.inc(1);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
