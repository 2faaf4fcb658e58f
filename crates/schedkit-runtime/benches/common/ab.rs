//! An interleaved A/B(/C...) harness for the peer benchmarks: every round runs one sample of
//! each side, the side that goes first rotating from round to round, so that the machine's
//! noise (other programs, frequency, a host that holds the VM) falls on every side alike.
//! Criterion measures one side for seconds, then the next, and on a shared machine the load
//! changes in between; here it cannot favour one side.
//!
//! Each case prints the machine's load average and allowed CPUs beside its numbers, the median
//! and range (min-max) of each side's time per operation, and for each peer the ratio
//! `schedkit / peer` of the medians with the range of the per-round ratios. With `--json PATH`
//! every case is also appended to PATH as one JSON line (`scripts/bench-runtime.sh` turns those
//! into docs/results/runtime.md).
#![allow(dead_code)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

/// One side of a comparison: `run` takes one sample and returns its time and how many
/// operations (joins, tasks, round trips, hops) it covered.
pub struct Side<'a> {
    pub name: String,
    pub run: Box<dyn FnMut() -> (Duration, u64) + 'a>,
}

impl<'a> Side<'a> {
    pub fn new(name: impl Into<String>, run: impl FnMut() -> (Duration, u64) + 'a) -> Side<'a> {
        Side {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

/// Command-line options (after `cargo bench ... --`).
pub struct Opts {
    /// Rounds per case (each side one sample per round).
    pub samples: usize,
    /// Only cases whose `group/case` contains this.
    pub filter: Option<String>,
    pub json: Option<std::path::PathBuf>,
    /// `cargo test --benches` and `cargo bench` without `--bench`: one round, smallest sizes.
    pub smoke: bool,
    /// Free text recorded with each case (`--label "two hogs"`), e.g. what else ran.
    pub label: String,
}

impl Opts {
    pub fn from_args() -> Opts {
        let mut o = Opts {
            samples: 21,
            filter: None,
            json: None,
            smoke: true,
            label: String::new(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--bench" => o.smoke = false,
                "--samples" => {
                    o.samples = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .expect("--samples N")
                }
                "--json" => o.json = Some(args.next().expect("--json PATH").into()),
                "--label" => o.label = args.next().expect("--label TEXT"),
                s if s.starts_with("--") => {} // cargo's own flags
                s => o.filter = Some(s.to_string()),
            }
        }
        if o.smoke {
            o.samples = 1;
        }
        o.samples = o.samples.max(1);
        o
    }

    pub fn wants(&self, group: &str, case: &str) -> bool {
        self.filter
            .as_deref()
            .is_none_or(|f| format!("{group}/{case}").contains(f))
    }
}

/// The CPUs this process may run on (`sched_getaffinity` of the first caller, read once:
/// a case that pins its submitting thread must not narrow what later cases see).
fn allowed_set() -> &'static schedkit_linux::affinity::CpuSet {
    static SET: std::sync::OnceLock<schedkit_linux::affinity::CpuSet> = std::sync::OnceLock::new();
    SET.get_or_init(|| schedkit_linux::affinity::get_thread(0).unwrap_or_default())
}

pub fn allowed_cpus() -> Vec<usize> {
    allowed_set().iter().collect()
}

fn allowed_list() -> String {
    allowed_set().to_list()
}

fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// The 1-, 5- and 15-minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Says loudly, once per case, when the process may use fewer CPUs than a case's workers:
/// then the workers share CPUs and the numbers are not the machine's.
pub fn check_cpus(workers: usize) -> Option<String> {
    let n = allowed_cpus().len();
    (n < workers).then(|| {
        format!(
            "WARNING: {workers} workers but this process may use only {n} CPU(s) ({}): \
             the workers share CPUs",
            allowed_list()
        )
    })
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

struct Summary {
    median: f64,
    min: f64,
    max: f64,
}

fn summary(v: &[f64]) -> Summary {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Summary {
        median: quantile(&s, 0.5),
        min: s[0],
        max: s[s.len() - 1],
    }
}

/// Runs `sides` interleaved for `opts.samples` rounds (after one warm-up round) and prints the
/// case; `sides[0]` is schedkit's, every ratio is `sides[0] / peer` (below 1: schedkit faster).
/// `unit` names the operation ("join", "task", ...); `workers` is checked against the CPUs.
pub fn compare(opts: &Opts, group: &str, case: &str, unit: &str, workers: usize, sides: Vec<Side>) {
    if !opts.wants(group, case) {
        return;
    }
    let mut sides = sides;
    let load_before = loadavg();
    let warning = check_cpus(workers);
    if let Some(w) = &warning {
        eprintln!("{group}/{case}: {w}");
    }
    for s in sides.iter_mut() {
        (s.run)();
    }
    let n = sides.len();
    let mut ns: Vec<Vec<f64>> = vec![Vec::with_capacity(opts.samples); n];
    for round in 0..opts.samples {
        for k in 0..n {
            let i = (round + k) % n;
            let (d, ops) = (sides[i].run)();
            ns[i].push(d.as_secs_f64() * 1e9 / ops.max(1) as f64);
        }
    }
    let load_after = loadavg();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "{group}/{case}: ns per {unit}, {} interleaved rounds; load {load_before} -> {load_after}; \
         CPUs allowed {} of {} online{}",
        opts.samples,
        allowed_list(),
        online_cpus(),
        if opts.label.is_empty() {
            String::new()
        } else {
            format!("; {}", opts.label)
        }
    );
    let sums: Vec<Summary> = ns.iter().map(|v| summary(v.as_slice())).collect();
    let mut json_sides = Vec::new();
    for (i, s) in sides.iter().enumerate() {
        let m = &sums[i];
        let _ = write!(
            out,
            "  {:<22} median {:>10.1}  range {:>10.1} .. {:<10.1}",
            s.name, m.median, m.min, m.max
        );
        let mut ratio_json = String::from("null");
        if i > 0 {
            let per_round: Vec<f64> = ns[0].iter().zip(&ns[i]).map(|(a, b)| a / b).collect();
            let r = summary(&per_round);
            let of_medians = sums[0].median / m.median;
            let _ = write!(
                out,
                "  {} / {}: {:.2}x (rounds {:.2} .. {:.2})",
                sides[0].name, s.name, of_medians, r.min, r.max
            );
            ratio_json = format!(
                "{{\"of_medians\":{of_medians:.4},\"round_median\":{:.4},\"round_min\":{:.4},\"round_max\":{:.4}}}",
                r.median, r.min, r.max
            );
        }
        out.push('\n');
        json_sides.push(format!(
            "{{\"name\":{:?},\"median_ns\":{:.2},\"min_ns\":{:.2},\"max_ns\":{:.2},\"ratio\":{ratio_json}}}",
            s.name, m.median, m.min, m.max
        ));
    }
    print!("{out}");
    if let Some(path) = &opts.json {
        let line = format!(
            "{{\"group\":{group:?},\"case\":{case:?},\"unit\":{unit:?},\"rounds\":{},\"workers\":{workers},\
             \"load_before\":{load_before:?},\"load_after\":{load_after:?},\"allowed\":{:?},\"online\":{},\
             \"label\":{:?},\"warning\":{:?},\"sides\":[{}]}}\n",
            opts.samples,
            allowed_list(),
            online_cpus(),
            opts.label,
            warning.unwrap_or_default(),
            json_sides.join(",")
        );
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("--json file");
        f.write_all(line.as_bytes()).expect("--json write");
    }
}

/// Pins the calling thread to the `i`-th allowed CPU (wrapping), as the PAWS pool and the
/// fiber runtime pin their workers; used by peers that have no pinning of their own.
pub fn pin_to_nth(i: usize) {
    let cpus = allowed_cpus();
    if !cpus.is_empty() {
        let _ = schedkit_linux::affinity::pin_current(cpus[i % cpus.len()]);
    }
}

/// How long one sample lasts at least, for the cases whose single operation is short (a fib(22)
/// run, a batch of 10,000 tasks): longer than the kernel's time slices. A sample of a few
/// milliseconds beside CPU hogs either fits between two of a hog's slices or waits out one or
/// more, so its time is one of two modes (fib(22) beside two hogs: 140 ns or 2-5 us per join;
/// a 10,000-task batch: 70-100 ns or 1-7 us per task, for every pool) and a median over such
/// samples says which mode came up more often in that process, not how fast the side is.
pub const SAMPLE: Duration = Duration::from_millis(60);

/// How many times a sample repeats `run` to last [`SAMPLE`], by the fastest of three timed
/// runs (the same count then serves every side of the case); 1 in a smoke run.
pub fn reps_for(o: &Opts, mut run: impl FnMut()) -> u64 {
    if o.smoke {
        return 1;
    }
    let best = (0..3)
        .map(|_| {
            let t = std::time::Instant::now();
            run();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
        .max(Duration::from_micros(1));
    (SAMPLE.as_nanos() / best.as_nanos()).max(1) as u64
}
