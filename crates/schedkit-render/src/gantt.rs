//! `--gantt FILE.svg`: the run intervals of a trace drawn as a Gantt chart, one lane per core
//! and one colour per process (or real-time task).
//!
//! Colours come from [`chart::color`] indexed by the owner's position in the scenario file
//! (processes first, then tasks), so the same process keeps its colour across policies and
//! across `sim` and `compare` runs.
//!
//! Long runs produce far more intervals than pixels (60 processes under CFS over 10 s are
//! thousands of 3 ms slices on a 1,100-pixel axis). Intervals at least one pixel wide are
//! drawn exactly, with a tooltip and, when there is room, the process name inside. Narrower
//! ones are binned into pixel columns per core; each column takes the colour of the owner that
//! ran longest in it, and runs of equal columns become one rectangle. So the file stays
//! proportional to the picture, not to the trace, and what dominates each pixel is what shows.

use crate::chart::{self, draw_stacked_legends, stacked_legends_height, Anchor, LegendEntry, Svg};
use schedkit_core::report::Report;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, Owner, RunInterval, TraceLog};
use schedkit_core::Nanos;

/// Canvas width in pixels.
const WIDTH: f64 = 1200.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;

/// The colour index and display name of an owner.
fn owner_key(s: &Scenario, o: &Owner) -> usize {
    match *o {
        Owner::Process { process, .. } => process,
        Owner::Task { task, .. } => s.processes().len() + task,
    }
}

fn owner_name(s: &Scenario, o: &Owner) -> String {
    match *o {
        Owner::Process { process, thread } => {
            let p = &s.processes()[process];
            if p.threads() > 1 {
                format!("{} thread {}", p.name(), thread)
            } else {
                p.name().to_string()
            }
        }
        Owner::Task { task, job } => format!("{} job {}", s.tasks()[task].name(), job),
    }
}

fn key_name(s: &Scenario, key: usize) -> &str {
    if key < s.processes().len() {
        s.processes()[key].name()
    } else {
        s.tasks()[key - s.processes().len()].name()
    }
}

/// Renders the Gantt chart of `trace` over `[0, end]` as an SVG document.
pub fn render(scenario: &Scenario, report: &Report, trace: &TraceLog, end: Nanos) -> String {
    render_window(scenario, report, trace, end, None)
}

/// The label of a run interval inside its bar: the process or task, and a real-time job's
/// number (`T1 #3`), which tells the jobs of one task apart.
fn bar_label(s: &Scenario, o: &Owner) -> String {
    match *o {
        Owner::Process { process, .. } => s.processes()[process].name().to_string(),
        Owner::Task { task, job } => format!("{} #{job}", s.tasks()[task].name()),
    }
}

/// [`render`] limited to `window` (`[from, to)`, e.g. `--window 2s..2.1s`): only what runs in
/// it, cut at its edges, on an axis from `from` to `to`. A Gantt of a long run is thousands of
/// intervals per pixel; a window shows the schedule itself. Drawn in layers, back to front:
/// heading and legends, lanes, time axis, run intervals, deadline misses, job ticks.
pub fn render_window(
    scenario: &Scenario,
    report: &Report,
    trace: &TraceLog,
    end: Nanos,
    window: Option<(Nanos, Nanos)>,
) -> String {
    let (intervals, run_end, from, end_ns) = windowed(trace, end, window);
    // Real-time jobs: a row of release ticks and a row of deadline ticks above the lanes.
    let jobs: Vec<(Nanos, usize, u64, Nanos)> = trace
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::JobRelease {
                t,
                task,
                job,
                deadline,
            } => Some((t, task, job, deadline)),
            _ => None,
        })
        .collect();
    let legends = Legends::of(scenario, !jobs.is_empty());
    let f = Frame::new(report, from, end_ns, &legends, !jobs.is_empty());
    let mut svg = Svg::new(WIDTH, f.height);
    heading(&mut svg, report, &f, intervals.len(), &legends);
    lanes(&mut svg, &f);
    time_axis(&mut svg, &f, report);
    let bins = draw_intervals(&mut svg, &f, scenario, &intervals);
    if let Some(bins) = bins {
        draw_bins(&mut svg, &f, scenario, &bins);
    }
    // Deadline misses: a black line across the lanes at the missed deadline.
    let misses = crate::chrome::deadline_misses(trace, Nanos(run_end));
    for m in misses
        .iter()
        .filter(|m| m.deadline.0 >= from && m.deadline.0 <= end_ns)
    {
        let x = f.x_of(m.deadline.0);
        let unit = f.unit;
        let tip = format!(
            "deadline miss: {} job {} (deadline {} {unit}{})",
            scenario.tasks()[m.task].name(),
            m.job,
            chart::num(m.deadline.0 as f64 / f.div),
            m.finish.map_or(", unfinished".into(), |t| format!(
                ", finished {} {unit}",
                chart::num(t.0 as f64 / f.div)
            ))
        );
        svg.rect(
            x - 1.0,
            f.top - 4.0,
            2.0,
            f.plot_h + 8.0,
            "#111111",
            Some(&tip),
        );
    }
    if !jobs.is_empty() {
        let ticks = JobTicks {
            y: f.top - f.marks_h,
            row_h: f.marks_h / 2.0,
            from,
            to: end_ns,
            ns_per_px: f.ns_per_px,
            div: f.div,
            unit: f.unit,
        };
        ticks.draw(&mut svg, scenario, &jobs);
    }
    svg.frame(LEFT, f.top, f.plot_w, f.plot_h, "#888888");
    svg.finish()
}

/// The run intervals within `window` (cut at its edges), the end of the whole run, and the
/// drawn span `[from, to]` in ns: the whole run (from 0) without a window. `from` is
/// subtracted from every time drawn, so the picture of a whole run is what it always was.
fn windowed(
    trace: &TraceLog,
    end: Nanos,
    window: Option<(Nanos, Nanos)>,
) -> (Vec<RunInterval>, u64, u64, u64) {
    let mut intervals = trace.intervals();
    let run_end = intervals
        .iter()
        .map(|i| i.end.0)
        .max()
        .unwrap_or(0)
        .max(end.0)
        .max(1);
    let (from, to) = match window {
        Some((a, b)) => {
            intervals.retain(|i| i.end > a && i.start < b);
            for i in &mut intervals {
                i.start = i.start.max(a);
                i.end = i.end.min(b);
            }
            (a.0, b.0.max(a.0 + 1))
        }
        None => (0, run_end),
    };
    (intervals, run_end, from, to)
}

/// Two titled legends: the colours (one per process or task), then the marks drawn over
/// them, so that "deadline miss" is not read as one more task.
struct Legends {
    /// What a colour stands for: "process", "task" or "process or task".
    kind: &'static str,
    colours: Vec<LegendEntry>,
    marks: Vec<LegendEntry>,
}

impl Legends {
    fn of(scenario: &Scenario, jobs: bool) -> Legends {
        let owners = scenario.processes().len() + scenario.tasks().len();
        let kind = match (scenario.processes().is_empty(), scenario.tasks().is_empty()) {
            (false, true) => "process",
            (true, false) => "task",
            _ => "process or task",
        };
        let colours = (0..owners)
            .map(|k| LegendEntry::new(key_name(scenario, k), &chart::color(k)))
            .collect();
        let mut marks = Vec::new();
        if !scenario.tasks().is_empty() {
            marks.push(LegendEntry {
                name: "deadline miss".into(),
                color: "#111111".into(),
                line: true,
            });
        }
        if jobs {
            marks.push(LegendEntry {
                name: "job release (upper ticks) and deadline (lower, grey); bars: task #job"
                    .into(),
                color: "#777777".into(),
                line: true,
            });
        }
        Legends {
            kind,
            colours,
            marks,
        }
    }

    fn titled(&self) -> [(&str, &[LegendEntry]); 2] {
        [(self.kind, &self.colours[..]), ("marks", &self.marks[..])]
    }
}

/// Where everything goes: the drawn span and its unit, the lanes and the plot.
struct Frame {
    from: u64,
    end_ns: u64,
    /// Nanoseconds per axis unit, and the unit.
    div: f64,
    unit: &'static str,
    /// The report's core count: the modelled cores for `sim`, the machine's for `run`.
    cores: usize,
    plot_w: f64,
    ns_per_px: f64,
    lane_h: f64,
    lane_gap: f64,
    /// Height of the job tick rows above the lanes (0 without real-time jobs).
    marks_h: f64,
    top: f64,
    plot_h: f64,
    height: f64,
}

impl Frame {
    fn new(report: &Report, from: u64, end_ns: u64, legends: &Legends, jobs: bool) -> Frame {
        let (div, unit) = chart::time_unit(end_ns);
        let cores = report.cores.max(1);
        let plot_w = WIDTH - LEFT - RIGHT;
        let marks_h = if jobs { 26.0 } else { 0.0 };
        let legend_h = stacked_legends_height(&legends.titled(), WIDTH - LEFT - RIGHT);
        // Lanes shrink with the core count so 64 cores still fit on a page.
        let lane_h = (360.0 / cores as f64).clamp(8.0, 40.0);
        let lane_gap = if lane_h >= 20.0 { 8.0 } else { 2.0 };
        let top = 64.0 + legend_h + 8.0 + marks_h;
        let plot_h = cores as f64 * (lane_h + lane_gap) - lane_gap;
        Frame {
            from,
            end_ns,
            div,
            unit,
            cores,
            plot_w,
            ns_per_px: (end_ns - from) as f64 / plot_w,
            lane_h,
            lane_gap,
            marks_h,
            top,
            plot_h,
            height: top + plot_h + 56.0,
        }
    }

    fn lane_y(&self, core: usize) -> f64 {
        self.top + core as f64 * (self.lane_h + self.lane_gap)
    }

    fn x_of(&self, t: u64) -> f64 {
        LEFT + (t - self.from) as f64 / self.ns_per_px
    }
}

/// The title (scenario, policy, cores), the line under it and the legends.
fn heading(svg: &mut Svg, report: &Report, f: &Frame, intervals: usize, legends: &Legends) {
    let cores = f.cores;
    let stem = std::path::Path::new(&report.scenario)
        .file_stem()
        .map_or(report.scenario.clone(), |s| {
            s.to_string_lossy().into_owned()
        });
    let title = format!(
        "{} · policy {} · {} core{}{}",
        stem,
        report.policy,
        cores,
        if cores == 1 { "" } else { "s" },
        if report.engine == "sim" {
            ""
        } else {
            " · real run"
        }
    );
    svg.text_rot(WIDTH / 2.0, 26.0, &title, 16.0, Anchor::Middle, true, 0.0);
    svg.text(
        WIDTH / 2.0,
        46.0,
        &format!(
            "{} run intervals over {}{} {} · one lane per core, one colour per {}",
            intervals,
            if f.from > 0 {
                format!("{}..", chart::num(f.from as f64 / f.div))
            } else {
                String::new()
            },
            chart::num(f.end_ns as f64 / f.div),
            f.unit,
            legends.kind
        ),
        11.0,
        Anchor::Middle,
    );
    draw_stacked_legends(svg, &legends.titled(), LEFT, 56.0, WIDTH - LEFT - RIGHT);
}

/// Lane backgrounds (idle time shows as this grey) and labels.
fn lanes(svg: &mut Svg, f: &Frame) {
    for core in 0..f.cores {
        let y = f.lane_y(core);
        svg.rect(LEFT, y, f.plot_w, f.lane_h, "#f0f0f0", None);
        let label_size = (f.lane_h * 0.6).clamp(7.0, 12.0);
        svg.text(
            LEFT - 8.0,
            y + f.lane_h / 2.0 + label_size * 0.35,
            &format!("core {core}"),
            label_size,
            Anchor::End,
        );
    }
}

/// Time grid and axis under the lanes; ticks only inside the window.
fn time_axis(svg: &mut Svg, f: &Frame, report: &Report) {
    let (div, unit) = (f.div, f.unit);
    let end_u = f.end_ns as f64 / div;
    let from_u = f.from as f64 / div;
    let (ticks, step) = chart::nice_ticks(from_u, end_u, 10);
    let base = f.top + f.plot_h;
    for t in ticks
        .into_iter()
        .filter(|t| *t <= end_u * (1.0 + 1e-9) && *t >= from_u * (1.0 - 1e-9))
    {
        let x = LEFT + (t * div - f.from as f64) / f.ns_per_px;
        svg.dashed(x, f.top, x, base, "#d0d0d0");
        svg.line(x, base, x, base + 5.0, "#444444", 1.0);
        svg.text(
            x,
            base + 18.0,
            &chart::tick_label(t, step),
            11.0,
            Anchor::Middle,
        );
    }
    svg.line(LEFT, base, LEFT + f.plot_w, base, "#444444", 1.0);
    svg.text(
        LEFT + f.plot_w / 2.0,
        base + 40.0,
        &if report.engine == "sim" {
            format!("simulated time ({unit})")
        } else {
            format!("time since the run started ({unit})")
        },
        13.0,
        Anchor::Middle,
    );
}

/// Per core, per pixel column: the time each owner (colour key) ran there, ns.
type Bins = Vec<Vec<Vec<(usize, u64)>>>;

/// Draws the intervals at least a pixel wide exactly and bins the narrower ones into pixel
/// columns; returns the bins when any interval went there.
fn draw_intervals(
    svg: &mut Svg,
    f: &Frame,
    scenario: &Scenario,
    intervals: &[RunInterval],
) -> Option<Bins> {
    let (cores, unit, div) = (f.cores, f.unit, f.div);
    let columns = f.plot_w.ceil() as usize + 1;
    let mut bins: Bins = vec![vec![Vec::new(); columns]; cores];
    let mut any_binned = false;
    for iv in intervals {
        if iv.core >= cores {
            continue;
        }
        let key = owner_key(scenario, &iv.owner);
        let (x0, x1) = (f.x_of(iv.start.0), f.x_of(iv.end.0));
        if x1 - x0 >= 1.0 {
            let y = f.lane_y(iv.core);
            let name = owner_name(scenario, &iv.owner);
            let tip = format!(
                "{name} on core {}: {} to {} {unit}",
                iv.core,
                chart::num(iv.start.0 as f64 / div),
                chart::num(iv.end.0 as f64 / div)
            );
            // A hairline gap after wide intervals keeps back-to-back runs of the same
            // process (two threads, or a re-dispatch) visibly separate.
            let w = if x1 - x0 > 3.0 {
                x1 - x0 - 0.75
            } else {
                x1 - x0
            };
            svg.rect(x0, y, w, f.lane_h, &chart::color(key), Some(&tip));
            let size = (f.lane_h * 0.45).clamp(7.0, 12.0);
            let label = bar_label(scenario, &iv.owner);
            if f.lane_h >= 14.0 && chart::text_width(&label, size) + 6.0 < x1 - x0 {
                svg.text(
                    (x0 + x1) / 2.0,
                    y + f.lane_h / 2.0 + size * 0.35,
                    &label,
                    size,
                    Anchor::Middle,
                );
            }
        } else {
            any_binned = true;
            // Split the interval's time among the columns it touches.
            let mut t = iv.start.0;
            while t < iv.end.0 {
                let col = (((t - f.from) as f64 / f.ns_per_px) as usize).min(columns - 1);
                let col_end = f.from + (((col + 1) as f64) * f.ns_per_px).ceil() as u64;
                let upto = iv.end.0.min(col_end.max(t + 1));
                let cell = &mut bins[iv.core][col];
                match cell.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, ns)) => *ns += upto - t,
                    None => cell.push((key, upto - t)),
                }
                t = upto;
            }
        }
    }
    any_binned.then_some(bins)
}

/// The binned columns: each takes the colour of the owner that ran longest in it, and runs
/// of equal columns become one rectangle.
fn draw_bins(svg: &mut Svg, f: &Frame, scenario: &Scenario, bins: &Bins) {
    let (unit, div, from, ns_per_px) = (f.unit, f.div, f.from, f.ns_per_px);
    for (core, lane) in bins.iter().enumerate() {
        let columns = lane.len();
        let y = f.lane_y(core);
        // (owner, first column) of the run being built.
        let mut run: Option<(usize, usize)> = None;
        let dominant = |cell: &Vec<(usize, u64)>| {
            cell.iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|(k, _)| *k)
        };
        let flush = |run: Option<(usize, usize)>, to: usize, svg: &mut Svg| {
            if let Some((key, from_px)) = run {
                let tip = format!(
                    "mostly {} on core {core}: {} to {} {unit} (merged sub-pixel intervals)",
                    key_name(scenario, key),
                    chart::num((from_px as f64 * ns_per_px + from as f64) / div),
                    chart::num((to as f64 * ns_per_px + from as f64) / div)
                );
                let x0 = LEFT + from_px as f64;
                let w = (to - from_px) as f64;
                svg.rect(
                    x0,
                    y,
                    w.min(LEFT + f.plot_w - x0),
                    f.lane_h,
                    &chart::color(key),
                    Some(&tip),
                );
            }
        };
        for (col, cell) in lane.iter().enumerate() {
            let d = dominant(cell);
            let same = matches!((run, d), (Some((k, _)), Some(dk)) if k == dk);
            if !same {
                flush(run, col, svg);
                run = d.map(|k| (k, col));
            }
        }
        flush(run, columns, svg);
    }
}

/// Where the release and deadline ticks of real-time jobs go: a row each above the lanes,
/// over the window `[from, to]`.
struct JobTicks {
    y: f64,
    row_h: f64,
    from: u64,
    to: u64,
    ns_per_px: f64,
    div: f64,
    unit: &'static str,
}

impl JobTicks {
    /// A tick per release (in the task's colour) and per deadline (grey), each with a
    /// tooltip naming the job.
    fn draw(&self, svg: &mut Svg, scenario: &Scenario, jobs: &[(Nanos, usize, u64, Nanos)]) {
        let (rel_y, dl_y, unit) = (self.y, self.y + self.row_h, self.unit);
        svg.text(LEFT - 8.0, rel_y + 9.0, "release", 9.0, Anchor::End);
        svg.text(LEFT - 8.0, dl_y + 9.0, "deadline", 9.0, Anchor::End);
        let inside = |t: Nanos| t.0 >= self.from && t.0 <= self.to;
        let x_of = |t: Nanos| LEFT + (t.0 - self.from) as f64 / self.ns_per_px;
        let at = |t: Nanos| chart::num(t.0 as f64 / self.div);
        for &(t, task, job, deadline) in jobs {
            let name = &scenario.tasks()[task].name();
            let key = scenario.processes().len() + task;
            if inside(t) {
                let tip = format!(
                    "release: {name} #{job} at {} {unit} (deadline {} {unit})",
                    at(t),
                    at(deadline)
                );
                svg.rect(
                    x_of(t) - 0.75,
                    rel_y,
                    1.5,
                    10.0,
                    &chart::color(key),
                    Some(&tip),
                );
            }
            if inside(deadline) {
                let tip = format!("deadline: {name} #{job} at {} {unit}", at(deadline));
                svg.rect(
                    x_of(deadline) - 0.75,
                    dl_y,
                    1.5,
                    10.0,
                    "#777777",
                    Some(&tip),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> String {
        let s = Scenario::parse("t.toml", text).unwrap();
        let (report, trace, stats) = schedkit_sim::simulate_report(&s, true).unwrap();
        render(&s, &report, &trace.unwrap(), stats.end)
    }

    #[test]
    fn textbook_rr_draws_every_interval_with_labels() {
        let svg = run(include_str!("../../../examples/textbook/rr.toml"));
        assert!(svg.contains("rr · policy rr · 1 core") || svg.contains("policy rr"));
        assert!(svg.contains("simulated time (ms)"));
        // P1 runs 0-4 ms first under RR with a 4 ms quantum.
        assert!(svg.contains("P1 on core 0: 0 to 4 ms"), "{svg}");
        for p in ["P1", "P2", "P3", "P4"] {
            assert!(svg.contains(&format!(">{p}<")), "legend/label {p}");
        }
        assert!(!svg.contains("merged sub-pixel"));
    }

    #[test]
    fn legends_say_what_their_entries_are() {
        let rr = run(include_str!("../../../examples/textbook/rr.toml"));
        assert!(rr.contains(">process:</text>"), "{rr}");
        assert!(!rr.contains(">marks:<"), "no marks, no marks legend");
        let dhall = run(include_str!("../../../examples/realtime/dhall.toml"));
        assert!(dhall.contains(">task:</text>"));
        assert!(dhall.contains(">marks:</text>"));
        // The marks are a legend of their own, under the tasks' colours.
        assert!(dhall.find(">task:<") < dhall.find(">deadline miss<"));
    }

    #[test]
    fn long_runs_merge_sub_pixel_intervals_and_stay_small() {
        let mut text = String::from(
            "cores = 2\n[policy]\nname = \"rr\"\nquantum = \"1ms\"\n[run]\nhorizon = \"2s\"\n",
        );
        for i in 0..60 {
            text.push_str(&format!("[[process]]\nname = \"p{i}\"\n"));
        }
        let svg = run(&text);
        assert!(svg.contains("merged sub-pixel intervals"));
        assert!(svg.contains("simulated time (s)"));
        // About 4,000 intervals, but the picture is bounded by its pixels.
        let rects = svg.matches("<rect").count();
        assert!(rects < 2 * 1200 + 200, "{rects} rects");
        assert!(svg.contains(">p59<"));
    }

    #[test]
    fn deadline_misses_are_marked() {
        let svg = run(include_str!("../../../examples/realtime/dhall.toml"));
        // Global EDF: the heavy task's first job finishes at 12 ms, after its 11 ms deadline.
        assert!(
            svg.contains("deadline miss: heavy job 0 (deadline 11 ms, finished 12 ms)"),
            "{svg}"
        );
        assert!(svg.contains("one colour per task"));
        // Every job's release and deadline are marked, and bars name their job.
        assert!(
            svg.contains("release: heavy #0 at 0 ms (deadline 11 ms)"),
            "{svg}"
        );
        assert!(svg.contains("deadline: heavy #0 at 11 ms"));
        assert!(svg.contains(">heavy #0<"), "job number in the bar");
    }

    #[test]
    fn a_window_keeps_only_what_runs_in_it() {
        let text = include_str!("../../../examples/textbook/rr.toml");
        let s = Scenario::parse("t.toml", text).unwrap();
        let (report, trace, stats) = schedkit_sim::simulate_report(&s, true).unwrap();
        let trace = trace.unwrap();
        let whole = render(&s, &report, &trace, stats.end);
        let w = (Nanos::from_ms(4), Nanos::from_ms(8));
        let part = render_window(&s, &report, &trace, stats.end, Some(w));
        assert!(whole.contains("P1 on core 0: 0 to 4 ms"));
        assert!(!part.contains("P1 on core 0: 0 to 4 ms"));
        // RR with a 4 ms quantum: P2 runs [4, 8) and fills the window.
        assert!(part.contains("P2 on core 0: 4 to 8 ms"), "{part}");
        assert!(part.contains("1 run intervals over 4..8 ms"), "{part}");
        assert_eq!(
            render_window(&s, &report, &trace, stats.end, None),
            whole,
            "no window: the whole run, unchanged"
        );
        let doc = crate::chrome::render_window(&s, &report, &trace, stats.end, Some(w));
        let runs: Vec<_> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0]["ts"], 4000.0);
    }
}
