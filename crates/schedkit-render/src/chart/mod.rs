//! Small, deterministic SVG charts: line charts (with optional error bars), grouped bar
//! charts and horizontal stacked bars, plus the primitives (`Svg`, ticks, palette, legend)
//! that the Gantt chart shares.
//!
//! Why a hand-written writer and not `plotters`: every chart here is a handful of rectangles,
//! lines and text, and we want byte-identical output for identical input (so charts can be
//! diffed and tested), no font discovery, and full control over legends that hold dozens of
//! entries. Text widths are estimated from the character count (a sans-serif average of
//! 0.58 em per character), which is what layout needs: room for labels, not exact kerning.
//!
//! Every chart has a title, axis labels with units, ticks and a legend. Numbers in the output
//! are written with at most two decimals so the same data always gives the same bytes.
//!
//! Use:
//! ```ignore
//! let mut c = LineChart::new("Waiting vs load", Axis::new("load", "%"), Axis::new("waiting", "ms"));
//! c.series(Series::new("cfs", vec![(10.0, 1.2), (50.0, 3.4)]).with_errors(vec![(1.0, 1.4), (3.0, 3.9)]));
//! std::fs::write("w.svg", c.to_svg(800.0, 480.0))?;
//! ```
//!
//! One module per kind: [`line`], [`bar`], [`stacked`]; the writer and palette in [`svg`], axes
//! and ticks in [`axis`], the legend in [`legend`]; this file has the [`Chart`] trait, the
//! grids of panels and the plot-area helpers the kinds share. Every item is re-exported here,
//! so `schedkit_render::chart::X` names all of them.

pub mod axis;
pub mod bar;
pub mod legend;
pub mod line;
pub mod stacked;
pub mod svg;
#[cfg(test)]
mod tests;

pub use axis::*;
pub use bar::*;
pub use legend::*;
pub use line::*;
pub use stacked::*;
pub use svg::*;

use std::fmt::Write as _;

const TITLE_FONT: f64 = 16.0;
const LABEL_FONT: f64 = 13.0;
const TICK_FONT: f64 = 11.0;
const AXIS_COLOR: &str = "#444444";
const GRID_COLOR: &str = "#dddddd";

/// A chart that can draw itself into a region of a canvas (so several can share one figure).
pub trait Chart {
    /// Draws the chart (title, legend, axes, data) inside `area`.
    fn draw(&self, svg: &mut Svg, area: Rect);

    /// The chart alone on a `width` x `height` canvas.
    fn to_svg(&self, width: f64, height: f64) -> String {
        let mut svg = Svg::new(width, height);
        self.draw(
            &mut svg,
            Rect {
                x: 0.0,
                y: 0.0,
                w: width,
                h: height,
            },
        );
        svg.finish()
    }
}

/// Several charts side by side under one title, each `panel_w` x `panel_h`.
pub fn side_by_side(title: &str, charts: &[&dyn Chart], panel_w: f64, panel_h: f64) -> String {
    grid(title, charts, charts.len(), panel_w, panel_h)
}

/// Several charts under one title, `cols` per row (row-major), each `panel_w` x `panel_h`.
/// One column stacks them vertically, which suits wide charts with many categories.
pub fn grid(title: &str, charts: &[&dyn Chart], cols: usize, panel_w: f64, panel_h: f64) -> String {
    let head = 34.0;
    let cols = cols.clamp(1, charts.len().max(1));
    let rows = charts.len().div_ceil(cols).max(1);
    let width = panel_w * cols as f64;
    let mut svg = Svg::new(width, panel_h * rows as f64 + head);
    svg.text_rot(width / 2.0, 23.0, title, 18.0, Anchor::Middle, true, 0.0);
    for (i, c) in charts.iter().enumerate() {
        c.draw(
            &mut svg,
            Rect {
                x: (i % cols) as f64 * panel_w,
                y: head + (i / cols) as f64 * panel_h,
                w: panel_w,
                h: panel_h,
            },
        );
    }
    svg.finish()
}

/// Draws the title and the titled legend at the top of `area`; returns the y where the plot
/// may start.
fn header(
    svg: &mut Svg,
    area: Rect,
    title: &str,
    legend_title: Option<&str>,
    legend: &[LegendEntry],
) -> f64 {
    let mut y = area.y + 10.0;
    svg.text_rot(
        area.x + area.w / 2.0,
        y + TITLE_FONT,
        title,
        TITLE_FONT,
        Anchor::Middle,
        true,
        0.0,
    );
    y += TITLE_FONT + 10.0;
    if !legend.is_empty() {
        y += draw_titled_legend(svg, legend_title, legend, area.x + 60.0, y, area.w - 80.0) + 6.0;
    }
    y
}

/// The "no data" note in the middle of an empty plot, with why when known: an empty plot
/// without it reads as a drawing bug, or as zeros.
fn no_data(svg: &mut Svg, plot: Rect, why: Option<&str>) {
    let (cx, cy) = (plot.x + plot.w / 2.0, plot.y + plot.h / 2.0);
    svg.text_rot(
        cx,
        cy,
        "no data",
        LABEL_FONT + 3.0,
        Anchor::Middle,
        true,
        0.0,
    );
    if let Some(w) = why {
        svg.text(cx, cy + 22.0, w, TICK_FONT, Anchor::Middle);
    }
}

/// A linear mapping from data values to pixels.
#[derive(Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    p0: f64,
    p1: f64,
    /// Maps log10 of the value (d0 and d1 are then log10 too).
    log: bool,
}

impl Scale {
    fn new(axis: &Axis, ticks: &[f64], p0: f64, p1: f64) -> Scale {
        let f = |v: f64| if axis.log { v.log10() } else { v };
        Scale {
            d0: f(ticks[0]),
            d1: f(*ticks.last().expect("at least one tick")),
            p0,
            p1,
            log: axis.log,
        }
    }

    /// The position of the axis's lowest tick.
    fn lowest(&self) -> f64 {
        self.p0
    }

    fn map(&self, v: f64) -> f64 {
        if self.d1 == self.d0 {
            return self.p0;
        }
        let v = if self.log { v.log10() } else { v };
        self.p0 + (v - self.d0) / (self.d1 - self.d0) * (self.p1 - self.p0)
    }
}

/// An axis's ticks for the data range [lo, hi], and the label of each.
fn axis_ticks(axis: &Axis, lo: f64, hi: f64, target: usize) -> Vec<(f64, String)> {
    if axis.log {
        log_ticks(lo, hi)
            .into_iter()
            .map(|t| (t, log_tick_label(t)))
            .collect()
    } else {
        let (ticks, step) = nice_ticks(lo, hi, target);
        ticks
            .into_iter()
            .map(|t| (t, tick_label(t, step)))
            .collect()
    }
}

/// The value range a list of values needs on an axis, optionally forced to include zero.
fn data_range(values: impl Iterator<Item = f64>, include_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if include_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    (lo, hi)
}

/// Draws a vertical value axis (ticks, grid, label) on the left of `plot`; returns its scale.
fn y_axis(svg: &mut Svg, plot: Rect, axis: &Axis, lo: f64, hi: f64) -> Scale {
    // A little headroom so the tallest bar or point does not touch the frame.
    let hi = if hi > 0.0 && !axis.log {
        hi + (hi - lo) * 0.04
    } else {
        hi
    };
    let target = ((plot.h / 45.0).round() as usize).clamp(2, 10);
    let ticks = axis_ticks(axis, lo, hi, target);
    let values: Vec<f64> = ticks.iter().map(|t| t.0).collect();
    let scale = Scale::new(axis, &values, plot.y + plot.h, plot.y);
    for (t, label) in &ticks {
        let y = scale.map(*t);
        svg.dashed(plot.x, y, plot.x + plot.w, y, GRID_COLOR);
        svg.line(plot.x - 5.0, y, plot.x, y, AXIS_COLOR, 1.0);
        svg.text(plot.x - 8.0, y + 4.0, label, TICK_FONT, Anchor::End);
    }
    svg.line(plot.x, plot.y, plot.x, plot.y + plot.h, AXIS_COLOR, 1.0);
    svg.text_rot(
        plot.x - 48.0,
        plot.y + plot.h / 2.0,
        &axis.title(),
        LABEL_FONT,
        Anchor::Middle,
        false,
        -90.0,
    );
    scale
}

/// Draws a horizontal value axis under `plot`; returns its scale.
fn x_axis(svg: &mut Svg, plot: Rect, axis: &Axis, lo: f64, hi: f64) -> Scale {
    let target = ((plot.w / 90.0).round() as usize).clamp(2, 12);
    let ticks = axis_ticks(axis, lo, hi, target);
    let values: Vec<f64> = ticks.iter().map(|t| t.0).collect();
    let scale = Scale::new(axis, &values, plot.x, plot.x + plot.w);
    let base = plot.y + plot.h;
    for (t, label) in &ticks {
        let x = scale.map(*t);
        svg.dashed(x, plot.y, x, base, GRID_COLOR);
        svg.line(x, base, x, base + 5.0, AXIS_COLOR, 1.0);
        svg.text(x, base + 18.0, label, TICK_FONT, Anchor::Middle);
    }
    svg.line(plot.x, base, plot.x + plot.w, base, AXIS_COLOR, 1.0);
    svg.text(
        plot.x + plot.w / 2.0,
        base + 38.0,
        &axis.title(),
        LABEL_FONT,
        Anchor::Middle,
    );
    scale
}

/// A vertical error bar from `lo` to `hi` (pixels) at `x`, with caps; nothing where the
/// bounds coincide (no spread measured: caps there would claim an interval).
fn error_bar(svg: &mut Svg, x: f64, lo: f64, hi: f64, cap: f64) {
    if (hi - lo).abs() < 0.01 {
        return;
    }
    svg.line(x, lo, x, hi, "#222222", 1.2);
    svg.line(x - cap, lo, x + cap, lo, "#222222", 1.2);
    svg.line(x - cap, hi, x + cap, hi, "#222222", 1.2);
}
