//! SimSo configurations (the XML that SimSo's `Configuration.save` writes) in and out.
//!
//! SimSo describes processors, periodic tasks (period, deadline, WCET, activation date, all
//! in milliseconds) and a scheduler class. schedkit models the periodic, WCET-exact,
//! overhead-free subset: importing turns that subset into a scenario (as TOML text, so it can
//! be saved and edited), and refuses, with the file, line, column and attribute, what
//! schedkit would silently model differently: sporadic or aperiodic tasks, execution-time
//! models other than the WCET, scheduling, context-switch and preemption overheads, processor
//! speeds, task chains, and scheduler classes it has no policy for. What differs without
//! changing whether deadlines are met comes back as warnings.
//!
//! Export writes the reverse for scenarios of sequential periodic tasks under `edf`, `gedf`,
//! `rm` or `pedf`, with one SimSo cycle per nanosecond (`cycles_per_ms = 1000000`), so every
//! time converts exactly.

use crate::Error;
use schedkit_core::scenario::{PolicyName, Region, Scenario, ScenarioError};
use schedkit_core::Nanos;
use std::collections::HashSet;
use std::path::Path;

/// An imported configuration: the scenario as TOML text, and what was modelled differently.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub toml: String,
    pub warnings: Vec<String>,
}

/// SimSo's scheduler classes schedkit runs, and the policy each becomes (by core count).
pub const SCHEDULERS: &[(&str, &str)] = &[
    ("simso.schedulers.EDF", "gedf (edf on one processor)"),
    ("simso.schedulers.EDF_mono", "edf (one processor)"),
    ("simso.schedulers.RM_mono", "rm (one processor)"),
    ("simso.schedulers.RM", "rm (one processor only)"),
    ("simso.schedulers.P_EDF", "pedf"),
];

struct Doc<'a> {
    file: &'a str,
    xml: &'a roxmltree::Document<'a>,
}

impl Doc<'_> {
    fn err_at(&self, pos: usize, field: &str, message: impl Into<String>) -> Error {
        let p = self.xml.text_pos_at(pos);
        Error::Scenario(ScenarioError {
            file: self.file.to_string(),
            line: p.row as usize,
            column: p.col as usize,
            field: field.to_string(),
            message: message.into(),
        })
    }

    fn err(&self, node: roxmltree::Node, attr: &str, message: impl Into<String>) -> Error {
        let pos = node
            .attributes()
            .find(|a| a.name() == attr)
            .map_or(node.range().start, |a| a.range().start);
        let field = format!("{}.{attr}", node.tag_name().name());
        self.err_at(pos, &field, message)
    }

    fn child<'n>(
        &self,
        parent: roxmltree::Node<'n, 'n>,
        tag: &str,
    ) -> Result<roxmltree::Node<'n, 'n>, Error> {
        parent
            .children()
            .find(|n| n.has_tag_name(tag))
            .ok_or_else(|| {
                self.err_at(
                    parent.range().start,
                    tag,
                    format!("missing <{tag}> element"),
                )
            })
    }

    fn number(&self, node: roxmltree::Node, attr: &str) -> Result<Option<f64>, Error> {
        match node.attribute(attr) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(Some)
                .ok_or_else(|| self.err(node, attr, format!("\"{v}\" is not a number"))),
        }
    }

    /// A value that schedkit models only as zero (an overhead, a cost).
    fn zero(&self, node: roxmltree::Node, attr: &str, what: &str) -> Result<(), Error> {
        match self.number(node, attr)? {
            Some(x) if x != 0.0 => Err(self.err(
                node,
                attr,
                format!("{what} is {x}: schedkit models no {what} in SimSo's terms (remove it or set it to 0)"),
            )),
            _ => Ok(()),
        }
    }

    /// Milliseconds (SimSo's unit) as nanoseconds.
    fn ms(
        &self,
        node: roxmltree::Node,
        attr: &str,
        positive: bool,
    ) -> Result<Option<Nanos>, Error> {
        let Some(x) = self.number(node, attr)? else {
            return Ok(None);
        };
        if x < 0.0 || (positive && x == 0.0) {
            let need = if positive {
                "greater than zero"
            } else {
                "zero or more"
            };
            return Err(self.err(node, attr, format!("{x} ms: must be {need}")));
        }
        Ok(Some(Nanos((x * 1e6).round() as u64)))
    }
}

/// A duration as the scenario format writes it, exact to the nanosecond.
fn duration(n: Nanos) -> String {
    let ns = n.0;
    if ns.is_multiple_of(1_000_000) {
        format!("\"{}ms\"", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("\"{}us\"", ns / 1_000)
    } else {
        format!("\"{ns}ns\"")
    }
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Reads a SimSo configuration file.
pub fn import_file(path: &Path) -> Result<Imported, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::file(
            path.display(),
            format!("cannot read SimSo configuration: {e}"),
        )
    })?;
    import(&path.display().to_string(), &text)
}

/// Turns SimSo configuration text into scenario TOML; `file` names it in errors.
pub fn import(file: &str, text: &str) -> Result<Imported, Error> {
    let xml = roxmltree::Document::parse(text).map_err(|e| {
        let p = e.pos();
        Error::Scenario(ScenarioError {
            file: file.to_string(),
            line: p.row as usize,
            column: p.col as usize,
            field: "xml".into(),
            message: e.to_string(),
        })
    })?;
    let d = Doc { file, xml: &xml };
    let root = xml.root_element();
    if !root.has_tag_name("simulation") {
        return Err(d.err_at(
            root.range().start,
            "simulation",
            "not a SimSo configuration (no <simulation> root)",
        ));
    }
    let mut warnings = Vec::new();
    let horizon = horizon(&d, root)?;
    let cores = cores(&d, root)?;
    let policy = policy(&d, root, cores, &mut warnings)?;
    if let Ok(caches) = d.child(root, "caches") {
        if caches.children().any(|n| n.has_tag_name("cache")) {
            warnings.push(format!("{file}: caches are ignored (they only matter to SimSo's cache execution-time model)"));
        }
    }

    let tasks_el = d.child(root, "tasks")?;
    let mut out = format!(
        "# Imported from the SimSo configuration {file} (`schedkit import simso`).\ncores = {cores}\n\n[policy]\nname = \"{}\"\n\n[run]\nhorizon = {}\n",
        policy.as_str(),
        duration(horizon)
    );
    let mut names = HashSet::new();
    let mut aborting = false;
    for t in tasks_el.children().filter(|n| n.has_tag_name("task")) {
        out.push_str(&task_toml(&d, t, &mut names, &mut aborting)?);
    }
    if names.is_empty() {
        return Err(d.err_at(
            tasks_el.range().start,
            "tasks",
            "no <task>: nothing to schedule",
        ));
    }
    if aborting {
        warnings.push(format!(
            "{file}: abort_on_miss: SimSo aborts a job that misses its deadline, schedkit lets it finish; whether any deadline is missed is the same, the counts after a first miss can differ"
        ));
    }
    Ok(Imported {
        toml: out,
        warnings,
    })
}

/// The simulated time, from `<simulation duration cycles_per_ms>`; only the WCET
/// execution-time model is accepted (every job runs for exactly its WCET in schedkit).
fn horizon(d: &Doc, root: roxmltree::Node) -> Result<Nanos, Error> {
    let etm = root.attribute("etm").unwrap_or("wcet");
    if etm != "wcet"
        || root
            .attribute("use_wcet")
            .is_some_and(|v| v == "no" || v == "false")
    {
        return Err(d.err(root, "etm", format!("execution-time model \"{etm}\": schedkit runs every job for exactly its WCET (etm=\"wcet\")")));
    }
    let cycles_per_ms = d.number(root, "cycles_per_ms")?.unwrap_or(1e6);
    if cycles_per_ms <= 0.0 {
        return Err(d.err(root, "cycles_per_ms", "must be greater than zero"));
    }
    let duration_cycles = d.number(root, "duration")?.unwrap_or(50_000.0);
    let horizon = Nanos((duration_cycles / cycles_per_ms * 1e6).round() as u64);
    if horizon == Nanos::ZERO {
        return Err(d.err(root, "duration", "must be greater than zero"));
    }
    Ok(horizon)
}

/// The core count, from `<processors>`: at least one, each of speed 1 and no overheads.
fn cores(d: &Doc, root: roxmltree::Node) -> Result<usize, Error> {
    let procs_el = d.child(root, "processors")?;
    d.zero(procs_el, "migration_overhead", "migration overhead")?;
    let procs: Vec<_> = procs_el
        .children()
        .filter(|n| n.has_tag_name("processor"))
        .collect();
    if procs.is_empty() {
        return Err(d.err_at(
            procs_el.range().start,
            "processors",
            "no <processor>: a scenario needs at least one core",
        ));
    }
    for p in &procs {
        d.zero(*p, "cs_overhead", "context-switch overhead")?;
        d.zero(*p, "cl_overhead", "cache-load overhead")?;
        if let Some(s) = d.number(*p, "speed")? {
            if s != 1.0 {
                return Err(d.err(
                    *p,
                    "speed",
                    format!("speed {s}: schedkit's cores all run at speed 1"),
                ));
            }
        }
    }
    Ok(procs.len())
}

/// The policy of `<sched class>` on `cores` cores (no overheads), with warnings for what
/// schedkit does differently or ignores.
fn policy(
    d: &Doc,
    root: roxmltree::Node,
    cores: usize,
    warnings: &mut Vec<String>,
) -> Result<PolicyName, Error> {
    let file = d.file;
    let sched = d.child(root, "sched")?;
    for a in ["overhead", "overhead_activate", "overhead_terminate"] {
        d.zero(sched, a, "scheduler overhead")?;
    }
    let class = sched.attribute("class").unwrap_or("");
    if class.is_empty() {
        let what = match sched.attribute("className") {
            Some(f) => format!("a scheduler loaded from the file \"{f}\" has no schedkit policy"),
            None => "no scheduler class".to_string(),
        };
        return Err(d.err(
            sched,
            "className",
            format!("{what} (supported: {})", supported()),
        ));
    }
    let policy = match (class, cores) {
        ("simso.schedulers.EDF", 1) | ("simso.schedulers.EDF_mono", 1) => PolicyName::Edf,
        ("simso.schedulers.EDF", _) => PolicyName::Gedf,
        ("simso.schedulers.RM", 1) | ("simso.schedulers.RM_mono", 1) => PolicyName::Rm,
        ("simso.schedulers.P_EDF", _) => {
            warnings.push(format!(
                "{file}: P_EDF: schedkit's pedf packs tasks onto cores itself (docs/policies.md); SimSo's partitioning may place them differently"
            ));
            PolicyName::Pedf
        }
        ("simso.schedulers.EDF_mono" | "simso.schedulers.RM_mono" | "simso.schedulers.RM", _) => {
            return Err(d.err(sched, "class", format!("{class} on {cores} processors: schedkit runs it on one processor only (global RM is not modelled)")));
        }
        _ => {
            return Err(d.err(
                sched,
                "class",
                format!(
                    "scheduler \"{class}\" has no schedkit policy (supported: {})",
                    supported()
                ),
            ));
        }
    };
    if sched.children().any(|n| n.has_tag_name("field")) {
        warnings.push(format!(
            "{file}: the scheduler's <field> parameters are ignored (schedkit's {} takes none)",
            policy.as_str()
        ));
    }
    Ok(policy)
}

fn supported() -> String {
    SCHEDULERS
        .iter()
        .map(|(c, p)| format!("{c} -> {p}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn task_toml(
    d: &Doc,
    t: roxmltree::Node,
    names: &mut HashSet<String>,
    aborting: &mut bool,
) -> Result<String, Error> {
    let kind = t
        .attribute("task_type")
        .unwrap_or(if t.attribute("periodic") == Some("no") {
            "APeriodic"
        } else {
            "Periodic"
        });
    if kind != "Periodic" {
        return Err(d.err(
            t,
            "task_type",
            format!("a {kind} task: schedkit models periodic tasks only"),
        ));
    }
    if t.attribute("list_activation_dates")
        .is_some_and(|v| !v.trim().is_empty())
    {
        return Err(d.err(
            t,
            "list_activation_dates",
            "explicit activation dates: schedkit releases jobs every period only",
        ));
    }
    if t.attribute("followed_by").is_some() {
        return Err(d.err(t, "followed_by", "task chains are not modelled by schedkit"));
    }
    if t.attribute("stack").is_some() {
        return Err(d.err(
            t,
            "stack",
            "stack traces drive SimSo's cache model, which schedkit does not model",
        ));
    }
    d.zero(t, "preemption_cost", "preemption cost")?;
    *aborting |= t.attribute("abort_on_miss").is_none_or(|v| v == "yes");
    let name = match t.attribute("name") {
        Some(n) if !n.trim().is_empty() => n.to_string(),
        _ => format!("T{}", t.attribute("id").unwrap_or("?")),
    };
    if !names.insert(name.clone()) {
        return Err(d.err(t, "name", format!("duplicate task name \"{name}\"")));
    }
    let need = |attr: &str| d.err(t, attr, format!("missing `{attr}`"));
    let period = d.ms(t, "period", true)?.ok_or_else(|| need("period"))?;
    let wcet = d.ms(t, "WCET", true)?.ok_or_else(|| need("WCET"))?;
    let deadline = d.ms(t, "deadline", true)?.ok_or_else(|| need("deadline"))?;
    let offset = d.ms(t, "activationDate", false)?.unwrap_or(Nanos::ZERO);
    let line = d.xml.text_pos_at(t.range().start).row;
    Ok(format!(
        "\n[[task]]  # line {line} of the SimSo file\nname = {}\nperiod = {}\ndeadline = {}\noffset = {}\nwcet = {}\n",
        quoted(&name),
        duration(period),
        duration(deadline),
        duration(offset),
        duration(wcet)
    ))
}

/// Nanoseconds as SimSo's milliseconds, exactly (`2.5`, `7`).
fn ms(n: Nanos) -> String {
    let (whole, frac) = (n.0 / 1_000_000, n.0 % 1_000_000);
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{frac:06}")
            .trim_end_matches('0')
            .to_string()
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('"', "&quot;")
        .replace('>', "&gt;")
}

/// The scenario as a SimSo configuration, for the periodic subset: sequential tasks without
/// affinity under `edf`, `gedf`, `rm` (one core) or `pedf`, and no processes.
pub fn export(s: &Scenario) -> Result<String, Error> {
    let at = |line: usize, field: &str, message: String| {
        Error::Scenario(ScenarioError {
            file: s.file().to_string(),
            line,
            column: 1,
            field: field.to_string(),
            message,
        })
    };
    if let Some(p) = s.processes().first() {
        return Err(at(
            p.line(),
            "process",
            format!("process \"{}\": SimSo models periodic tasks only", p.name()),
        ));
    }
    if s.tasks().is_empty() {
        return Err(at(0, "task", "no [[task]] to export".into()));
    }
    let class = match s.policy().name() {
        PolicyName::Edf | PolicyName::Gedf => "simso.schedulers.EDF",
        PolicyName::Rm if s.cores() == 1 => "simso.schedulers.RM",
        PolicyName::Pedf => "simso.schedulers.P_EDF",
        other => {
            return Err(at(0, "policy.name", format!("policy \"{other}\" has no SimSo scheduler here (edf, gedf, pedf; rm on one core)")));
        }
    };
    if s.policy().context_switch() != Nanos::ZERO {
        return Err(at(
            0,
            "policy.context_switch",
            "a context-switch cost is not exported (SimSo charges overheads differently)".into(),
        ));
    }
    let mut out = format!(
        "<?xml version=\"1.0\" ?>\n<simulation duration=\"{}\" cycles_per_ms=\"1000000\" etm=\"wcet\">\n\
         \t<sched overhead=\"0\" overhead_activate=\"0\" overhead_terminate=\"0\" class=\"{class}\"/>\n\
         \t<caches memory_access_time=\"100\"/>\n\t<processors>\n",
        s.horizon().0
    );
    for c in 0..s.cores() {
        out.push_str(&format!(
            "\t\t<processor name=\"CPU {}\" id=\"{}\" cl_overhead=\"0\" cs_overhead=\"0\" speed=\"1.0\"/>\n",
            c + 1,
            c + 1
        ));
    }
    out.push_str("\t</processors>\n\t<tasks>\n");
    for (i, t) in s.tasks().iter().enumerate() {
        if t.cpus().is_some() {
            return Err(at(
                t.line(),
                "task.cpus",
                format!("task \"{}\": SimSo tasks have no affinity", t.name()),
            ));
        }
        let wcet = match t.regions() {
            [Region::Seq(w)] => *w,
            _ => {
                return Err(at(
                    t.line(),
                    "task.regions",
                    format!(
                        "task \"{}\": SimSo tasks are sequential (one `wcet`)",
                        t.name()
                    ),
                ));
            }
        };
        out.push_str(&format!(
            "\t\t<task name=\"{}\" id=\"{}\" task_type=\"Periodic\" abort_on_miss=\"no\" period=\"{}\" activationDate=\"{}\" list_activation_dates=\"\" deadline=\"{}\" base_cpi=\"1.0\" instructions=\"0\" mix=\"0.5\" WCET=\"{}\" ACET=\"0\" preemption_cost=\"0\" et_stddev=\"0\"/>\n",
            xml_escape(t.name()),
            i + 1,
            ms(t.period()),
            ms(t.offset()),
            ms(t.deadline()),
            ms(wcet)
        ));
    }
    out.push_str("\t</tasks>\n</simulation>\n");
    Ok(out)
}

#[cfg(test)]
mod tests;
