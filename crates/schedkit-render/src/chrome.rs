//! `--trace FILE.json`: the trace in Chrome's trace-event format, which Perfetto
//! (ui.perfetto.dev) and chrome://tracing open.
//!
//! Layout: one trace "process" (pid 1) for the modelled machine, one "thread" per core
//! (tid = core number) carrying a complete event (`ph: "X"`) per run interval, named after
//! the process or task so the viewer colours each one consistently. Real-time job releases
//! and deadline misses are instant events (`ph: "i"`) on an extra "jobs" track (tid = cores);
//! migrations are instants on the destination core; free-form `Mark`s are global instants.
//! Timestamps are microseconds (the format's unit) with nanosecond decimals.
//!
//! Format reference: "Trace Event Format" (Google, the JSON Object Format with `traceEvents`).

use schedkit_core::report::Report;
use schedkit_core::scenario::Scenario;
use schedkit_core::trace::{Event, JobRow, JobTable, Owner, Slot, TraceLog};
use schedkit_core::Nanos;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// The machine's pid in the trace.
const PID: u32 = 1;

#[derive(Serialize)]
struct TraceEvent {
    name: String,
    ph: &'static str,
    /// Microseconds.
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u64,
    /// Instant scope: "t" thread, "g" global.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    #[serde(skip_serializing_if = "Value::is_null")]
    args: Value,
}

fn us(t: Nanos) -> f64 {
    t.0 as f64 / 1000.0
}

fn owner_label(s: &Scenario, o: &Owner) -> (String, Value) {
    match *o {
        Owner::Process { process, thread } => {
            let p = &s.processes()[process];
            (
                p.name().to_string(),
                json!({ "process": p.name(), "thread": thread }),
            )
        }
        Owner::Task { task, job } => {
            let t = &s.tasks()[task];
            (
                t.name().to_string(),
                json!({ "task": t.name(), "job": job }),
            )
        }
    }
}

/// Builds the trace-event document for `trace` (which ends at `end`).
pub fn render(scenario: &Scenario, report: &Report, trace: &TraceLog, end: Nanos) -> Value {
    render_window(scenario, report, trace, end, None)
}

/// [`render`] limited to `window` (`[from, to)`): run intervals cut at its edges, instants
/// inside it. The steps: run intervals, instants (migrations, releases, marks), deadline
/// misses, the window's cut, one order (time, track, phase), then the viewer's metadata.
pub fn render_window(
    scenario: &Scenario,
    report: &Report,
    trace: &TraceLog,
    end: Nanos,
    window: Option<(Nanos, Nanos)>,
) -> Value {
    // The report's core count: the modelled cores for `sim`, the machine's for `run`; the
    // jobs track comes after the cores.
    let jobs_tid = report.cores as u64;
    let mut events = run_events(scenario, trace);
    instant_events(scenario, trace, jobs_tid, &mut events);
    for m in deadline_misses(trace, end) {
        events.push(miss(scenario, &m, jobs_tid));
    }
    if let Some((a, b)) = window {
        cut(&mut events, us(a), us(b));
    }
    events.sort_by(|a, b| {
        a.ts.total_cmp(&b.ts)
            .then(a.tid.cmp(&b.tid))
            .then(a.ph.cmp(b.ph))
    });
    let mut all = metadata(scenario, report, jobs_tid);
    all.extend(
        events
            .into_iter()
            .map(|e| serde_json::to_value(e).expect("trace events serialise")),
    );
    json!({ "traceEvents": all, "displayTimeUnit": "ms" })
}

/// A complete event per run interval, on its core's track.
fn run_events(scenario: &Scenario, trace: &TraceLog) -> Vec<TraceEvent> {
    trace
        .intervals()
        .into_iter()
        .map(|iv| {
            let (name, args) = owner_label(scenario, &iv.owner);
            TraceEvent {
                name,
                ph: "X",
                ts: us(iv.start),
                dur: Some(us(iv.end) - us(iv.start)),
                pid: PID,
                tid: iv.core as u64,
                s: None,
                cat: Some("run"),
                args,
            }
        })
        .collect()
}

/// An instant event (`ph: "i"`, thread scope).
fn instant(name: String, t: Nanos, tid: u64, cat: &'static str, args: Value) -> TraceEvent {
    TraceEvent {
        name,
        ph: "i",
        ts: us(t),
        dur: None,
        pid: PID,
        tid,
        s: Some("t"),
        cat: Some(cat),
        args,
    }
}

/// The instants of the trace, in its order: migrations on the destination core, releases
/// on the jobs track, marks global.
fn instant_events(
    scenario: &Scenario,
    trace: &TraceLog,
    jobs_tid: u64,
    events: &mut Vec<TraceEvent>,
) {
    // Instants need the slot -> owner map as it was at the time (slots are recycled).
    let mut owners: HashMap<Slot, Owner> = HashMap::new();
    for e in &trace.events {
        match e {
            Event::Arrive { slot, owner, .. } => {
                owners.insert(*slot, *owner);
            }
            Event::Migrate { t, slot, from, to } => {
                let name = owners
                    .get(slot)
                    .map_or_else(|| format!("slot {slot}"), |o| owner_label(scenario, o).0);
                events.push(instant(
                    format!("migrate {name}"),
                    *t,
                    *to as u64,
                    "migration",
                    json!({ "from": from, "to": to, "thread": name }),
                ));
            }
            Event::JobRelease {
                t,
                task,
                job,
                deadline,
            } => {
                let name = &scenario.tasks()[*task].name();
                events.push(instant(
                    format!("release {name}"),
                    *t,
                    jobs_tid,
                    "release",
                    json!({ "task": name, "job": job, "deadline_us": us(*deadline) }),
                ));
            }
            Event::Mark { t, label } => {
                events.push(TraceEvent {
                    s: Some("g"),
                    ..instant(label.clone(), *t, jobs_tid, "mark", Value::Null)
                });
            }
            _ => {}
        }
    }
}

/// Keeps what falls in `[a, b)` (microseconds): complete events cut at the edges, instants
/// inside.
fn cut(events: &mut Vec<TraceEvent>, a: f64, b: f64) {
    events.retain_mut(|e| match e.dur {
        Some(d) => {
            let (s0, s1) = (e.ts.max(a), (e.ts + d).min(b));
            e.ts = s0;
            e.dur = Some(s1 - s0);
            s1 > s0
        }
        None => e.ts >= a && e.ts < b,
    });
}

/// The viewer's metadata: the process's name, a named and ordered track per core, and the
/// jobs track.
fn metadata(scenario: &Scenario, report: &Report, jobs_tid: u64) -> Vec<Value> {
    let policy = &report.policy;
    let mut meta = vec![json!({
        "name": "process_name", "ph": "M", "pid": PID, "tid": 0,
        "args": { "name": format!("schedkit {} · {} · policy {policy}", report.engine, scenario.file()) }
    })];
    for core in 0..report.cores {
        meta.push(json!({
            "name": "thread_name", "ph": "M", "pid": PID, "tid": core,
            "args": { "name": format!("core {core}") }
        }));
        meta.push(json!({
            "name": "thread_sort_index", "ph": "M", "pid": PID, "tid": core,
            "args": { "sort_index": core }
        }));
    }
    meta.push(json!({
        "name": "thread_name", "ph": "M", "pid": PID, "tid": jobs_tid,
        "args": { "name": "jobs (releases, deadline misses)" }
    }));
    meta
}

/// The deadline misses of a trace ending at `end`, in order of deadline (then task, job):
/// the jobs of the one pairing of job events ([`JobTable`]) that miss by the one definition
/// (`schedkit_core::trace::misses_deadline`). A miss is a job that finished after its
/// deadline, or had not finished when the window ended after its deadline (`finish` is
/// `None`).
pub fn deadline_misses(trace: &TraceLog, end: Nanos) -> Vec<JobRow> {
    let mut out: Vec<JobRow> = JobTable::of(&trace.events).misses(end).copied().collect();
    out.sort_by_key(|m| (m.deadline, m.task, m.job));
    out
}

fn miss(s: &Scenario, m: &JobRow, tid: u64) -> TraceEvent {
    let (task, job, finish) = (m.task, m.job, m.finish);
    let name = &s.tasks()[task].name();
    instant(
        format!("deadline miss {name}"),
        m.deadline,
        tid,
        "deadline_miss",
        json!({ "task": name, "job": job, "finish_us": finish.map(us) }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Value {
        let s = Scenario::parse("t.toml", text).unwrap();
        let (report, trace, stats) = schedkit_sim::simulate_report(&s, true).unwrap();
        // Round-trip through text, as a viewer would read it.
        let v = render(&s, &report, &trace.unwrap(), stats.end);
        serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap()
    }

    /// The shape Perfetto's JSON importer needs.
    pub fn check_shape(v: &Value) {
        let evs = v["traceEvents"].as_array().expect("traceEvents array");
        assert!(!evs.is_empty());
        for e in evs {
            let ph = e["ph"].as_str().expect("ph");
            assert!(["X", "i", "M"].contains(&ph), "{e}");
            assert!(
                e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(),
                "{e}"
            );
            if ph != "M" {
                assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
            }
            if ph == "X" {
                assert!(e["dur"].as_f64().unwrap() > 0.0, "{e}");
            }
            if ph == "i" {
                assert!(["t", "g", "p"].contains(&e["s"].as_str().unwrap()), "{e}");
            }
        }
    }

    #[test]
    fn rr_trace_has_one_track_per_core_and_complete_events() {
        let v = doc(include_str!("../../../examples/textbook/rr.toml"));
        check_shape(&v);
        let evs = v["traceEvents"].as_array().unwrap();
        let x: Vec<_> = evs.iter().filter(|e| e["ph"] == "X").collect();
        // RR q=4: P1 0-4, P2 4-8, P3 8-12, P4 12-16, P1 16-20, P3 20-24, P4 24-25, P3 25-26.
        assert_eq!(x.len(), 8);
        assert_eq!(x[0]["name"], "P1");
        assert_eq!(x[0]["ts"], 0.0);
        assert_eq!(x[0]["dur"], 4000.0);
        let busy: f64 = x.iter().map(|e| e["dur"].as_f64().unwrap()).sum();
        assert_eq!(busy, 26_000.0);
        assert!(evs
            .iter()
            .any(|e| e["ph"] == "M" && e["args"]["name"] == "core 0"));
    }

    #[test]
    fn rm_misses_and_migrations_are_instants() {
        let v = doc(
            "cores = 1\n[policy]\nname = \"rm\"\n[run]\nhorizon = \"35ms\"\n\
             [[task]]\nname = \"a\"\nperiod = \"5ms\"\nwcet = \"2ms\"\n\
             [[task]]\nname = \"b\"\nperiod = \"7ms\"\nwcet = \"4ms\"\n",
        );
        check_shape(&v);
        let evs = v["traceEvents"].as_array().unwrap();
        assert!(evs.iter().any(|e| e["cat"] == "release"));
        assert!(
            evs.iter().any(|e| e["cat"] == "deadline_miss"),
            "RM misses on this set"
        );
        let v = doc(
            "cores = 2\n[policy]\nname = \"rr\"\nquantum = \"1ms\"\n[run]\nhorizon = \"20ms\"\n\
             [[process]]\nname = \"a\"\n[[process]]\nname = \"b\"\n[[process]]\nname = \"c\"\n",
        );
        check_shape(&v);
        let evs = v["traceEvents"].as_array().unwrap();
        assert!(
            evs.iter().any(|e| e["cat"] == "migration"),
            "3 threads on 2 cores under global RR migrate"
        );
    }
}
