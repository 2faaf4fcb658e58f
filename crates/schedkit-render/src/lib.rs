//! Rendering for schedkit: the report as a table or CSV ([`table`]), deterministic SVG charts
//! ([`chart`]), the Gantt chart of a trace ([`gantt`]) and the trace as Chrome trace-event JSON
//! ([`chrome`]), a scenario's errors and warnings with a caret under the value
//! ([`diagnostic`]), and what only a real run knows: the kernel's view of a process run
//! ([`kernel`]), the extra lines of a `[[task]]` run ([`tasks`]), the machine's topology
//! ([`topo`]), what `restore` undid ([`restore`]), what a run on work already running changed
//! and undid ([`attach`]) and a live run's `ctl status` ([`ctl`]).
//! Everything here turns data into text; writing it to stdout or files is the caller's
//! business.

pub mod attach;
pub mod chart;
pub mod chrome;
pub mod ctl;
pub mod diagnostic;
pub mod gantt;
pub mod kernel;
pub mod restore;
pub mod table;
pub mod tasks;
pub mod topo;
