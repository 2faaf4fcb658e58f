//! The progress bar the binary draws for the libraries' [`Progress`] reports (on stderr, and
//! only on a terminal).

use schedkit_experiments::progress::Progress;
use std::io::IsTerminal;

/// An indicatif bar behind the experiments' `Progress` trait.
pub struct Bar(indicatif::ProgressBar);

impl Bar {
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

/// The bar of `schedkit run` and of work attached with `--pid`, drawn only when stderr is a
/// terminal (whatever stdout is: the report may go to a file or a pipe while a person watches
/// the terminal). A run that stops at its horizon shows how much of it has passed; one that
/// lasts as long as its command (or until Ctrl-C) a spinner and the time elapsed.
#[derive(Clone)]
pub struct RunBar(Option<indicatif::ProgressBar>);

impl RunBar {
    /// `bounded`: the run stops at its horizon. `open_ended`: what ends it otherwise.
    pub fn new(bounded: bool, open_ended: &str) -> RunBar {
        if !std::io::stderr().is_terminal() {
            return RunBar(None);
        }
        let (pb, template) = if bounded {
            (
                indicatif::ProgressBar::new(1000),
                "{bar:40} {percent:>3}% of the horizon · {elapsed} elapsed, ETA {eta}".to_string(),
            )
        } else {
            (
                indicatif::ProgressBar::new_spinner(),
                format!("{{spinner}} {{elapsed}} elapsed · {open_ended}"),
            )
        };
        pb.set_style(
            indicatif::ProgressStyle::with_template(&template)
                .expect("valid template")
                .progress_chars("=> "),
        );
        RunBar(Some(pb))
    }

    /// The run's progress callback (the fraction of the horizon elapsed, at every sample);
    /// a spinner just turns. No thread of its own: exclusive mode moves every other thread.
    pub fn callback(&self) -> Option<Box<dyn FnMut(f64)>> {
        let pb = self.0.clone()?;
        Some(Box::new(move |f| {
            if pb.length().is_some() {
                pb.set_position((f * 1000.0) as u64)
            } else {
                pb.tick()
            }
        }))
    }

    /// Prints `line` on stderr above the bar, which is drawn again under it.
    pub fn eprintln(&self, line: &str) {
        match &self.0 {
            Some(pb) => pb.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Starts drawing at once (a spinner otherwise waits for its first tick).
    pub fn show(&self) {
        if let Some(pb) = &self.0 {
            pb.tick();
        }
    }

    /// Turns the spinner from a thread of indicatif's own, for work the engine does not
    /// sample (attached work).
    pub fn tick_every(&self, every: std::time::Duration) {
        if let Some(pb) = &self.0 {
            pb.enable_steady_tick(every);
        }
    }

    pub fn finish(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}
