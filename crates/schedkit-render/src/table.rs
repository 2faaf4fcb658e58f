//! The report as text: schedkit's table style, the human report table and the per-thread CSV.

use comfy_table::{presets::UTF8_BORDERS_ONLY, CellAlignment, Table};
use schedkit_core::report::{Report, ShareReport, Summary, ThreadReport};

/// Milliseconds with three decimals, the unit of every duration in tables.
pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn pct(x: f64) -> String {
    format!("{:.2}", x * 100.0)
}

/// A table in schedkit's style: light borders, first column left, the others right.
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t.set_header(header.to_vec());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// Threads listed one per row up to this many; beyond, the process table says it all.
const MAX_THREAD_ROWS: usize = 64;

/// The human report: the heading, the thread and task tables, the process (and group)
/// shares, the summary and the run's warnings, each a step below.
pub fn render_table(r: &Report) -> String {
    let mut out = heading(r);
    let plain: Vec<&ThreadReport> = r.threads.iter().filter(|t| t.jobs.is_none()).collect();
    if !plain.is_empty() && plain.len() <= MAX_THREAD_ROWS {
        out.push_str(&thread_table(&plain));
        out.push_str("\n\n");
    }
    if r.threads.iter().any(|t| t.jobs.is_some()) {
        out.push_str(&task_table(r));
        out.push_str("\n\n");
    }
    out.push_str(&share_table("process", &r.processes));
    out.push_str("\n\n");
    if !r.groups.is_empty() {
        out.push_str(&share_table("group", &r.groups));
        out.push_str("\n\n");
    }
    out.push_str(&summary_table(&r.summary));
    out.push('\n');
    if !r.warnings.is_empty() {
        out.push_str("\nthis run was not what the scenario asked:\n");
        for w in &r.warnings {
            out.push_str(&format!("  - {w}\n"));
        }
    }
    out
}

/// The first line: engine, policy, cores (and the CPUs a real job had), window.
fn heading(r: &Report) -> String {
    format!(
        "{} · policy {} · {} cores{} · window {} ms\n\n",
        r.engine,
        r.policy,
        r.cores,
        r.cpus
            .as_ref()
            .map_or(String::new(), |c| format!(" (job CPUs {c})")),
        ms(r.window_ns)
    )
}

/// One row per thread that is not a periodic task's.
fn thread_table(threads: &[&ThreadReport]) -> String {
    let mut t = table(&[
        "thread",
        "arrival ms",
        "start ms",
        "finish ms",
        "cpu ms",
        "waiting ms",
        "turnaround ms",
        "response ms",
        "migr",
        "switches",
    ]);
    for th in threads {
        t.add_row(vec![
            th.name.clone(),
            ms(th.arrival_ns),
            th.start_ns.map_or("-".into(), ms),
            th.finish_ns.map_or("-".into(), ms),
            ms(th.cpu_ns),
            ms(th.waiting_ns),
            ms(th.turnaround_ns),
            th.response_ns.map_or("-".into(), ms),
            th.migrations.to_string(),
            th.context_switches.to_string(),
        ]);
    }
    t.to_string()
}

/// One row per periodic task: its jobs, misses and worst response.
fn task_table(r: &Report) -> String {
    let mut t = table(&["task", "jobs", "misses", "max response ms", "cpu ms"]);
    for th in r.threads.iter().filter(|t| t.jobs.is_some()) {
        t.add_row(vec![
            th.name.clone(),
            th.jobs.unwrap_or(0).to_string(),
            th.deadline_misses.unwrap_or(0).to_string(),
            th.max_response_ns.map_or("-".into(), ms),
            ms(th.cpu_ns),
        ]);
    }
    t.to_string()
}

/// The shares of processes or groups (`title`) against the job and the machine.
fn share_table(title: &str, rows: &[ShareReport]) -> String {
    // A real run says where each row's CPU time came from ("kernel" or "sampled", the
    // words before the source's colon), with the sources in full below the table; the
    // simulator's rows have no source and the table no such column.
    let sources: Vec<&str> = rows
        .iter()
        .filter_map(|p| p.cpu_source.as_deref())
        .collect();
    let mut head = vec![
        title,
        "threads",
        "cpu ms",
        "job %",
        "GPS job %",
        "machine %",
        "lag ms",
        "max |lag| ms",
        "avg wait ms",
        "avg turn ms",
        "work/s",
    ];
    if !sources.is_empty() {
        head.insert(3, "cpu from");
    }
    let mut t = table(&head);
    for p in rows {
        let mut row = vec![
            p.name.clone(),
            p.threads.to_string(),
            ms(p.cpu_ns),
            pct(p.job_share),
            pct(p.ideal_job_share),
            pct(p.share),
            format!("{:.3}", p.lag_ns as f64 / 1e6),
            ms(p.max_abs_lag_ns),
            ms(p.avg_waiting_ns),
            ms(p.avg_turnaround_ns),
            p.work_rate.map_or("-".into(), |w| format!("{w:.1}")),
        ];
        if !sources.is_empty() {
            let short = p
                .cpu_source
                .as_deref()
                .map_or("-", |s| s.split(':').next().unwrap_or(s));
            row.insert(3, short.to_string());
        }
        t.add_row(row);
    }
    let mut out = t.to_string();
    let mut seen: Vec<&str> = Vec::new();
    for s in sources {
        if !seen.contains(&s) {
            seen.push(s);
            out.push_str(&format!("\n  cpu from {s}"));
        }
    }
    if rows.iter().any(|p| p.sampled_cpu_ns.is_some()) {
        out.push_str(
            "\n  (a kernel-counted row's max |lag| is its lag at the end: the count is read once)",
        );
    }
    out
}

/// The summary's key figures, one per row.
fn summary_table(s: &Summary) -> String {
    let mut t = table(&["summary", "value"]);
    let rows: Vec<(&str, String)> = vec![
        ("avg waiting ms", ms(s.avg_waiting_ns)),
        ("avg turnaround ms", ms(s.avg_turnaround_ns)),
        ("avg response ms", ms(s.avg_response_ns)),
        ("makespan ms", ms(s.makespan_ns)),
        ("utilisation %", pct(s.utilisation)),
        ("dispatches", s.dispatches.to_string()),
        ("context switches", s.context_switches.to_string()),
        ("preemptions", s.preemptions.to_string()),
        ("migrations", s.migrations.to_string()),
        (
            "jobs / deadline misses",
            format!("{} / {}", s.jobs, s.deadline_misses),
        ),
        ("job cpu ms", ms(s.job_cpu_ns)),
        ("max |job share - GPS| pp", pct(s.max_abs_job_share_error)),
        ("max |machine share - GPS| pp", pct(s.max_abs_share_error)),
        (
            "mean |error| vs GPS %",
            format!("{:.2}", s.mean_abs_pct_error),
        ),
        ("max |lag| ms", ms(s.max_abs_lag_ns)),
    ];
    for (k, v) in rows {
        t.add_row(vec![k.to_string(), v]);
    }
    t.to_string()
}

/// The line after `sim`'s table that names the dispatcher's own counters (PAWS and WS
/// steals, ...), after a blank line; `None` for a dispatcher without counters.
pub fn policy_counters(policy: &str, counters: &[(&str, u64)]) -> Option<String> {
    if counters.is_empty() {
        return None;
    }
    let c: Vec<String> = counters.iter().map(|(k, v)| format!("{k} {v}")).collect();
    Some(format!("\n{policy} counters: {}", c.join(", ")))
}

/// The per-thread CSV.
pub fn render_csv(r: &Report) -> String {
    let mut out = String::from(
        "name,process,arrival_ns,start_ns,finish_ns,cpu_ns,waiting_ns,turnaround_ns,response_ns,migrations,context_switches,jobs,deadline_misses,max_response_ns\n",
    );
    let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    for t in &r.threads {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            quote(&t.name),
            quote(&t.process),
            t.arrival_ns,
            opt(t.start_ns),
            opt(t.finish_ns),
            t.cpu_ns,
            t.waiting_ns,
            t.turnaround_ns,
            opt(t.response_ns),
            t.migrations,
            t.context_switches,
            opt(t.jobs),
            opt(t.deadline_misses),
            opt(t.max_response_ns),
        ));
    }
    out
}
