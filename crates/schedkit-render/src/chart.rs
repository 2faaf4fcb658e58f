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

use std::fmt::Write as _;

/// Font stack used everywhere; rsvg and browsers pick the first one installed.
pub const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

/// Estimated width in pixels of `text` at `size` px (sans-serif average).
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.58
}

/// Escapes text for SVG element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A number for an SVG attribute: two decimals at most, no trailing zeros, no `-0`.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "0".into();
    }
    let mut s = format!("{:.2}", x);
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// Text anchoring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn as_str(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// An SVG document under construction.
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
}

impl Svg {
    /// A blank white canvas.
    pub fn new(width: f64, height: f64) -> Svg {
        let mut s = Svg {
            width,
            height,
            body: String::new(),
        };
        s.rect(0.0, 0.0, width, height, "#ffffff", None);
        s
    }

    /// A filled rectangle, with an optional tooltip (`<title>`, shown on hover in browsers).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}""#,
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0)),
            fill
        );
        match tip {
            Some(t) => {
                let _ = writeln!(self.body, "><title>{}</title></rect>", escape(t));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    /// An outlined rectangle.
    pub fn frame(&mut self, x: f64, y: f64, w: f64, h: f64, stroke: &str) {
        let _ = writeln!(
            self.body,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="{}" stroke-width="1"/>"#,
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0)),
            stroke
        );
    }

    /// A straight line.
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{}"/>"#,
            num(x1),
            num(y1),
            num(x2),
            num(y2),
            stroke,
            num(width)
        );
    }

    /// A dashed straight line (grid lines).
    pub fn dashed(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="1" stroke-dasharray="3,3"/>"#,
            num(x1),
            num(y1),
            num(x2),
            num(y2),
            stroke
        );
    }

    /// An open polyline.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, width: f64) {
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{},{}", num(*x), num(*y)))
            .collect();
        let _ = writeln!(
            self.body,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="{}" stroke-linejoin="round"/>"#,
            pts.join(" "),
            stroke,
            num(width)
        );
    }

    /// A filled circle (line chart markers).
    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str) {
        let _ = writeln!(
            self.body,
            r#"<circle cx="{}" cy="{}" r="{}" fill="{}"/>"#,
            num(x),
            num(y),
            num(r),
            fill
        );
    }

    /// Text at (x, y) (baseline), optionally rotated by `rotate` degrees around its anchor.
    #[allow(clippy::too_many_arguments)]
    pub fn text_rot(
        &mut self,
        x: f64,
        y: f64,
        text: &str,
        size: f64,
        anchor: Anchor,
        bold: bool,
        rotate: f64,
    ) {
        let weight = if bold { r#" font-weight="bold""# } else { "" };
        let transform = if rotate != 0.0 {
            format!(
                r#" transform="rotate({} {} {})""#,
                num(rotate),
                num(x),
                num(y)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            self.body,
            r##"<text x="{}" y="{}" font-size="{}" text-anchor="{}" fill="#222222"{}{}>{}</text>"##,
            num(x),
            num(y),
            num(size),
            anchor.as_str(),
            weight,
            transform,
            escape(text)
        );
    }

    /// Text at (x, y) (baseline).
    pub fn text(&mut self, x: f64, y: f64, text: &str, size: f64, anchor: Anchor) {
        self.text_rot(x, y, text, size, anchor, false, 0.0);
    }

    /// Finishes the document.
    pub fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"{FONT}\">\n{}</svg>\n",
            self.body,
            w = num(self.width),
            h = num(self.height),
        )
    }
}

/// A categorical palette: Tableau 10 followed by its light variants (20 colours that stay
/// distinguishable); beyond that, hues spread by the golden angle so every index gets a
/// stable colour of its own.
pub fn color(i: usize) -> String {
    const BASE: [&str; 20] = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
        "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d", "#f1ce63",
        "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e",
    ];
    if i < BASE.len() {
        return BASE[i].to_string();
    }
    let hue = ((i - BASE.len()) as f64 * 137.508) % 360.0;
    let light = [0.55, 0.70][i % 2];
    hsl_to_hex(hue, 0.55, light)
}

fn hsl_to_hex(h: f64, s: f64, l: f64) -> String {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let to = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    format!("#{:02x}{:02x}{:02x}", to(r), to(g), to(b))
}

/// "Nice" ticks covering [lo, hi]: steps of 1, 2 or 5 x 10^k, about `target` of them.
/// Returns the ticks (first <= lo, last >= hi) and the step.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        (lo - lo.abs() * 0.5, hi + hi.abs() * 0.5)
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    let ticks = (first as i64..=last as i64)
        .map(|k| k as f64 * step)
        .collect();
    (ticks, step)
}

/// Formats a tick value with just enough decimals for `step`.
pub fn tick_label(v: f64, step: f64) -> String {
    // The fewest decimals that write every multiple of `step` exactly (0.25 -> 2, 2.5 -> 1).
    let decimals = (0..6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6);
    let s = format!("{:.*}", decimals as usize, v);
    if s.starts_with('-') && s.trim_start_matches(['-', '0', '.']).is_empty() {
        s[1..].to_string()
    } else {
        s
    }
}

/// Ticks of a logarithmic axis covering [lo, hi] (both > 0): 1, 2 and 5 x 10^k, the first
/// <= lo and the last >= hi; only powers of ten when the range spans more than three decades.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    // A range with nothing a logarithm can place (no data: `data_range` gives [0, 1]) gets a
    // decade, not a tick loop from log10(0) = -inf.
    let (lo, hi) = match (lo > 0.0 && lo.is_finite(), hi > 0.0 && hi.is_finite()) {
        (true, true) => (lo, hi),
        (false, true) => (hi / 10.0, hi),
        _ => (1.0, 10.0),
    };
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let mantissas: &[f64] = if hi / lo > 1e3 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let all: Vec<f64> = (lo.log10().floor() as i32 - 1..=hi.log10().ceil() as i32 + 1)
        .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
        .collect();
    let first = all
        .iter()
        .rposition(|t| *t <= lo * (1.0 + 1e-9))
        .unwrap_or(0);
    let last = all
        .iter()
        .position(|t| *t >= hi * (1.0 - 1e-9))
        .unwrap_or(all.len() - 1);
    all[first..=last].to_vec()
}

/// A tick label of a logarithmic axis: as many decimals as the tick's own magnitude needs.
fn log_tick_label(v: f64) -> String {
    tick_label(v, 10f64.powf(v.log10().floor()))
}

/// The unit a time axis spanning `span_ns` reads best in: (nanoseconds per unit, symbol).
pub fn time_unit(span_ns: u64) -> (f64, &'static str) {
    match span_ns {
        s if s >= 2_000_000_000 => (1e9, "s"),
        s if s >= 2_000_000 => (1e6, "ms"),
        s if s >= 2_000 => (1e3, "µs"),
        _ => (1.0, "ns"),
    }
}

/// An axis: what is measured and its unit ("waiting", "ms").
#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub unit: String,
    /// Logarithmic: ticks at 1, 2 and 5 x 10^k, values <= 0 left out.
    pub log: bool,
}

impl Axis {
    pub fn new(label: &str, unit: &str) -> Axis {
        Axis {
            label: label.to_string(),
            unit: unit.to_string(),
            log: false,
        }
    }

    /// The same axis on a logarithmic scale, for values that span decades.
    pub fn log(mut self) -> Axis {
        self.log = true;
        self
    }

    /// Whether a value has a place on this axis (a logarithmic one has none for v <= 0).
    pub fn places(&self, v: f64) -> bool {
        !self.log || v > 0.0
    }

    /// "waiting (ms)", or just the label when there is no unit.
    pub fn title(&self) -> String {
        if self.unit.is_empty() {
            self.label.clone()
        } else {
            format!("{} ({})", self.label, self.unit)
        }
    }
}

/// A rectangle of the canvas.
#[derive(Clone, Copy, Debug)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

/// One legend entry: a colour swatch and a name.
pub struct LegendEntry {
    pub name: String,
    pub color: String,
    /// Drawn as a short line (a reference mark) instead of a filled swatch.
    pub line: bool,
}

impl LegendEntry {
    pub fn new(name: &str, color: &str) -> LegendEntry {
        LegendEntry {
            name: name.to_string(),
            color: color.to_string(),
            line: false,
        }
    }
}

const LEGEND_FONT: f64 = 12.0;
const LEGEND_ROW: f64 = 18.0;

fn legend_entry_width(e: &LegendEntry) -> f64 {
    14.0 + 6.0 + text_width(&e.name, LEGEND_FONT) + 16.0
}

/// Height a legend of `entries` flowed into rows of width `width` needs.
pub fn legend_height(entries: &[LegendEntry], width: f64) -> f64 {
    legend_rows(entries, width).len() as f64 * LEGEND_ROW
}

fn legend_rows(entries: &[LegendEntry], width: f64) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = Vec::new();
    let mut used = f64::INFINITY;
    for (i, e) in entries.iter().enumerate() {
        let w = legend_entry_width(e);
        if used + w > width {
            rows.push(Vec::new());
            used = 0.0;
        }
        rows.last_mut().expect("a row was pushed").push(i);
        used += w;
    }
    rows
}

/// Draws a legend flowed left to right into rows starting at (x, y); returns its height.
pub fn draw_legend(svg: &mut Svg, entries: &[LegendEntry], x: f64, y: f64, width: f64) -> f64 {
    let rows = legend_rows(entries, width);
    for (r, row) in rows.iter().enumerate() {
        let mut cx = x;
        let cy = y + r as f64 * LEGEND_ROW;
        for &i in row {
            let e = &entries[i];
            if e.line {
                svg.line(cx, cy + 8.5, cx + 14.0, cy + 8.5, &e.color, 2.0);
            } else {
                svg.rect(cx, cy + 3.0, 14.0, 11.0, &e.color, None);
            }
            svg.text(cx + 20.0, cy + 13.0, &e.name, LEGEND_FONT, Anchor::Start);
            cx += legend_entry_width(e);
        }
    }
    rows.len() as f64 * LEGEND_ROW
}

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

/// Draws the title and legend at the top of `area`; returns the y where the plot may start.
fn header(svg: &mut Svg, area: Rect, title: &str, legend: &[LegendEntry]) -> f64 {
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
        y += draw_legend(svg, legend, area.x + 60.0, y, area.w - 80.0) + 6.0;
    }
    y
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

/// A vertical error bar from `lo` to `hi` (pixels) at `x`, with caps.
fn error_bar(svg: &mut Svg, x: f64, lo: f64, hi: f64, cap: f64) {
    svg.line(x, lo, x, hi, "#222222", 1.2);
    svg.line(x - cap, lo, x + cap, lo, "#222222", 1.2);
    svg.line(x - cap, hi, x + cap, hi, "#222222", 1.2);
}

/// One line of a line chart; `errors` are (low, high) y values per point, e.g. a 95 %
/// confidence interval.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub errors: Option<Vec<(f64, f64)>>,
}

impl Series {
    pub fn new(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.to_string(),
            points,
            errors: None,
        }
    }

    /// Adds (low, high) bounds, one per point.
    pub fn with_errors(mut self, errors: Vec<(f64, f64)>) -> Series {
        assert_eq!(errors.len(), self.points.len(), "one error bound per point");
        self.errors = Some(errors);
        self
    }
}

/// A line chart of x/y series.
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Whether the y axis starts at zero (default true: most of our quantities are >= 0 and
    /// a truncated axis exaggerates differences).
    pub y_from_zero: bool,
}

impl LineChart {
    pub fn new(title: &str, x: Axis, y: Axis) -> LineChart {
        LineChart {
            title: title.to_string(),
            x,
            y,
            series: Vec::new(),
            y_from_zero: true,
        }
    }

    pub fn series(&mut self, s: Series) -> &mut Self {
        self.series.push(s);
        self
    }
}

impl Chart for LineChart {
    fn draw(&self, svg: &mut Svg, area: Rect) {
        let legend: Vec<LegendEntry> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| LegendEntry::new(&s.name, &color(i)))
            .collect();
        let top = header(svg, area, &self.title, &legend);
        let plot = Rect {
            x: area.x + 70.0,
            y: top + 6.0,
            w: area.w - 70.0 - 25.0,
            h: area.y + area.h - top - 6.0 - 50.0,
        };
        let (xlo, xhi) = data_range(
            self.series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
                .filter(|v| self.x.places(*v)),
            false,
        );
        let ys = self.series.iter().flat_map(|s| {
            s.points.iter().map(|p| p.1).chain(
                s.errors
                    .iter()
                    .flat_map(|e| e.iter().flat_map(|(a, b)| [*a, *b])),
            )
        });
        let (ylo, yhi) = data_range(
            ys.filter(|v| self.y.places(*v)),
            self.y_from_zero && !self.y.log,
        );
        let ys = y_axis(svg, plot, &self.y, ylo, yhi);
        let xs = x_axis(svg, plot, &self.x, xlo, xhi);
        for (i, s) in self.series.iter().enumerate() {
            let c = color(i);
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|(x, y)| self.x.places(*x) && self.y.places(*y))
                .map(|(x, y)| (xs.map(*x), ys.map(*y)))
                .collect();
            if let Some(errs) = &s.errors {
                for ((x, _), (lo, hi)) in s.points.iter().zip(errs) {
                    error_bar(svg, xs.map(*x), ys.map(*lo), ys.map(*hi), 4.0);
                }
            }
            svg.polyline(&pts, &c, 2.0);
            for (x, y) in pts {
                svg.circle(x, y, 3.5, &c);
            }
        }
        svg.frame(plot.x, plot.y, plot.w, plot.h, AXIS_COLOR);
    }
}

/// One series of a grouped bar chart: a value per category, optional (low, high) bounds.
#[derive(Clone, Debug)]
pub struct BarSeries {
    pub name: String,
    pub values: Vec<f64>,
    pub errors: Option<Vec<(f64, f64)>>,
    /// A reference value per bar (e.g. the GPS share of that run), drawn as a black tick
    /// across the bar; named in the legend by [`BarChart::marks_label`].
    pub marks: Option<Vec<f64>>,
}

impl BarSeries {
    pub fn new(name: &str, values: Vec<f64>) -> BarSeries {
        BarSeries {
            name: name.to_string(),
            values,
            errors: None,
            marks: None,
        }
    }

    /// Adds a reference mark per bar.
    pub fn with_marks(mut self, marks: Vec<f64>) -> BarSeries {
        assert_eq!(marks.len(), self.values.len(), "one mark per bar");
        self.marks = Some(marks);
        self
    }

    pub fn with_errors(mut self, errors: Vec<(f64, f64)>) -> BarSeries {
        assert_eq!(errors.len(), self.values.len(), "one error bound per bar");
        self.errors = Some(errors);
        self
    }
}

/// Vertical bars grouped by category: one bar per series in each category.
pub struct BarChart {
    pub title: String,
    /// What the categories are ("process"); shown under the category labels.
    pub x_label: String,
    pub y: Axis,
    pub categories: Vec<String>,
    pub series: Vec<BarSeries>,
    /// Optional reference marks per category (e.g. the GPS share), drawn as a black tick
    /// across the group and listed in the legend under this name.
    pub reference: Option<(String, Vec<f64>)>,
    /// Legend name of the per-bar marks of the series (see [`BarSeries::with_marks`]).
    pub marks_label: String,
}

impl BarChart {
    pub fn new(title: &str, x_label: &str, y: Axis, categories: Vec<String>) -> BarChart {
        BarChart {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y,
            categories,
            series: Vec::new(),
            reference: None,
            marks_label: "reference".into(),
        }
    }

    pub fn series(&mut self, s: BarSeries) -> &mut Self {
        assert_eq!(
            s.values.len(),
            self.categories.len(),
            "one value per category"
        );
        self.series.push(s);
        self
    }

    pub fn reference(&mut self, name: &str, values: Vec<f64>) -> &mut Self {
        assert_eq!(
            values.len(),
            self.categories.len(),
            "one value per category"
        );
        self.reference = Some((name.to_string(), values));
        self
    }
}

impl Chart for BarChart {
    fn draw(&self, svg: &mut Svg, area: Rect) {
        let mut legend: Vec<LegendEntry> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| LegendEntry::new(&s.name, &color(i)))
            .collect();
        if let Some((name, _)) = &self.reference {
            legend.push(LegendEntry {
                name: name.clone(),
                color: "#111111".into(),
                line: true,
            });
        }
        if self.series.iter().any(|s| s.marks.is_some()) {
            legend.push(LegendEntry {
                name: self.marks_label.clone(),
                color: "#111111".into(),
                line: true,
            });
        }
        let top = header(svg, area, &self.title, &legend);
        let n = self.categories.len().max(1) as f64;
        let plot_w = area.w - 70.0 - 25.0;
        let slot = plot_w / n;
        let widest = self
            .categories
            .iter()
            .map(|c| text_width(c, TICK_FONT))
            .fold(0.0, f64::max);
        // Rotate category labels when they would overlap; reserve room for them below.
        let rotated = widest > slot - 4.0;
        let label_room = if rotated {
            (widest * 0.72 + 14.0).min(140.0)
        } else {
            20.0
        };
        let plot = Rect {
            x: area.x + 70.0,
            y: top + 6.0,
            w: plot_w,
            h: area.y + area.h - top - 6.0 - label_room - 28.0,
        };
        let vals = self.series.iter().flat_map(|s| {
            s.values.iter().copied().chain(
                s.errors
                    .iter()
                    .flat_map(|e| e.iter().flat_map(|(a, b)| [*a, *b])),
            )
        });
        let refs = self
            .reference
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .chain(
                self.series
                    .iter()
                    .flat_map(|s| s.marks.iter().flatten().copied()),
            );
        let (lo, hi) = data_range(vals.chain(refs), true);
        let ys = y_axis(svg, plot, &self.y, lo, hi);
        let k = self.series.len().max(1) as f64;
        let group_w = slot * 0.8;
        let bar_w = group_w / k;
        let zero = ys.map(0.0);
        let base = plot.y + plot.h;
        for (ci, cat) in self.categories.iter().enumerate() {
            let gx = plot.x + ci as f64 * slot + (slot - group_w) / 2.0;
            for (si, s) in self.series.iter().enumerate() {
                let v = s.values[ci];
                let x = gx + si as f64 * bar_w;
                let y = ys.map(v);
                let tip = format!("{} · {}: {} {}", cat, s.name, fmt_value(v), self.y.unit);
                svg.rect(
                    x,
                    y.min(zero),
                    (bar_w - 1.0).max(0.5),
                    (y - zero).abs(),
                    &color(si),
                    Some(tip.trim_end()),
                );
                if let Some(marks) = &s.marks {
                    let my = ys.map(marks[ci]);
                    svg.line(x - 1.0, my, x + bar_w, my, "#111111", 2.0);
                }
                if let Some(errs) = &s.errors {
                    let (elo, ehi) = errs[ci];
                    error_bar(
                        svg,
                        x + bar_w / 2.0,
                        ys.map(elo),
                        ys.map(ehi),
                        (bar_w / 4.0).min(4.0),
                    );
                }
            }
            if let Some((_, refs)) = &self.reference {
                let y = ys.map(refs[ci]);
                svg.line(gx - 2.0, y, gx + group_w + 2.0, y, "#111111", 2.0);
            }
            let cx = plot.x + (ci as f64 + 0.5) * slot;
            if rotated {
                svg.text_rot(cx, base + 14.0, cat, TICK_FONT, Anchor::End, false, -40.0);
            } else {
                svg.text(cx, base + 16.0, cat, TICK_FONT, Anchor::Middle);
            }
        }
        svg.line(plot.x, zero, plot.x + plot.w, zero, AXIS_COLOR, 1.0);
        svg.text(
            plot.x + plot.w / 2.0,
            base + label_room + 20.0,
            &self.x_label,
            LABEL_FONT,
            Anchor::Middle,
        );
        svg.frame(plot.x, plot.y, plot.w, plot.h, AXIS_COLOR);
    }
}

fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// One kind of segment of a horizontal stacked bar chart, with a value per row.
#[derive(Clone, Debug)]
pub struct Segment {
    pub name: String,
    pub values: Vec<f64>,
}

impl Segment {
    pub fn new(name: &str, values: Vec<f64>) -> Segment {
        Segment {
            name: name.to_string(),
            values,
        }
    }
}

/// Horizontal bars, one per row, each split into coloured segments stacked left to right
/// (e.g. one bar per policy, a segment per process share).
pub struct StackedBarChart {
    pub title: String,
    pub x: Axis,
    pub rows: Vec<String>,
    pub segments: Vec<Segment>,
}

impl StackedBarChart {
    pub fn new(title: &str, x: Axis, rows: Vec<String>) -> StackedBarChart {
        StackedBarChart {
            title: title.to_string(),
            x,
            rows,
            segments: Vec::new(),
        }
    }

    pub fn segment(&mut self, s: Segment) -> &mut Self {
        assert_eq!(s.values.len(), self.rows.len(), "one value per row");
        assert!(
            s.values.iter().all(|v| *v >= 0.0),
            "stacked segments are non-negative"
        );
        self.segments.push(s);
        self
    }
}

impl Chart for StackedBarChart {
    fn draw(&self, svg: &mut Svg, area: Rect) {
        let legend: Vec<LegendEntry> = self
            .segments
            .iter()
            .enumerate()
            .map(|(i, s)| LegendEntry::new(&s.name, &color(i)))
            .collect();
        let top = header(svg, area, &self.title, &legend);
        let label_w = self
            .rows
            .iter()
            .map(|r| text_width(r, LABEL_FONT))
            .fold(40.0, f64::max)
            .min(area.w * 0.3)
            + 16.0;
        let plot = Rect {
            x: area.x + label_w,
            y: top + 6.0,
            w: area.w - label_w - 25.0,
            h: area.y + area.h - top - 6.0 - 50.0,
        };
        let totals: Vec<f64> = (0..self.rows.len())
            .map(|r| self.segments.iter().map(|s| s.values[r]).sum())
            .collect();
        let (lo, hi) = data_range(totals.iter().copied(), true);
        let xs = x_axis(svg, plot, &self.x, lo, hi);
        let n = self.rows.len().max(1) as f64;
        let slot = plot.h / n;
        let bar_h = (slot * 0.7).min(48.0);
        for (ri, row) in self.rows.iter().enumerate() {
            let y = plot.y + ri as f64 * slot + (slot - bar_h) / 2.0;
            let mut acc = 0.0;
            for (si, s) in self.segments.iter().enumerate() {
                let v = s.values[ri];
                let x0 = xs.map(acc);
                let x1 = xs.map(acc + v);
                let tip = format!("{} · {}: {} {}", row, s.name, fmt_value(v), self.x.unit);
                svg.rect(x0, y, x1 - x0, bar_h, &color(si), Some(tip.trim_end()));
                acc += v;
            }
            svg.text(
                plot.x - 8.0,
                y + bar_h / 2.0 + 4.0,
                row,
                LABEL_FONT,
                Anchor::End,
            );
        }
        svg.frame(plot.x, plot.y, plot.w, plot.h, AXIS_COLOR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_and_cover_the_range() {
        let (t, step) = nice_ticks(0.0, 26.0, 6);
        assert_eq!(step, 5.0);
        assert_eq!(t.first(), Some(&0.0));
        assert_eq!(t.last(), Some(&30.0));
        let (t, step) = nice_ticks(0.013, 0.087, 5);
        assert!((step - 0.02).abs() < 1e-12, "{step}");
        assert!(t[0] <= 0.013 && *t.last().unwrap() >= 0.087);
        assert_eq!(tick_label(0.04, 0.02), "0.04");
        assert_eq!(tick_label(2.5, 2.5), "2.5");
        assert_eq!(tick_label(10.0, 5.0), "10");
        // Degenerate ranges still give an axis.
        let (t, _) = nice_ticks(3.0, 3.0, 5);
        assert!(t.len() >= 2);
    }

    #[test]
    fn log_ticks_cover_the_range_in_1_2_5_steps() {
        let t = log_ticks(0.041, 9.44);
        assert_eq!(t.first().copied(), Some(0.02));
        assert_eq!(t.last().copied(), Some(10.0));
        assert!(
            t.contains(&0.05) && t.contains(&0.5) && t.contains(&5.0),
            "{t:?}"
        );
        let labels: Vec<String> = t.iter().map(|v| log_tick_label(*v)).collect();
        assert_eq!(labels[..3], ["0.02", "0.05", "0.1"]);
        assert_eq!(
            log_ticks(32.0, 7936.0),
            [20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0]
        );
        // Nothing placeable (an empty chart's [0, 1]): one decade, not a runaway loop.
        assert_eq!(log_ticks(0.0, 1.0), [0.1, 0.2, 0.5, 1.0]);
        assert_eq!(log_ticks(0.0, 0.0), [1.0, 2.0, 5.0, 10.0]);
        // More than three decades: powers of ten only.
        assert_eq!(
            log_ticks(0.5, 20000.0),
            [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]
        );
    }

    #[test]
    fn log_axes_leave_out_values_they_cannot_place() {
        let mut ch = LineChart::new(
            "log",
            Axis::new("threads", "").log(),
            Axis::new("time", "s").log(),
        );
        ch.series(Series::new(
            "a",
            vec![(0.0, 1.0), (32.0, 0.0), (128.0, 0.5), (496.0, 2.0)],
        ));
        let svg = ch.to_svg(500.0, 300.0);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        // Only the two placeable points are drawn.
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
        // A log chart with nothing to place still draws its axes.
        let mut empty = LineChart::new("none", Axis::new("x", "").log(), Axis::new("y", "s").log());
        empty.series(Series::new("a", vec![(0.0, 0.0)]));
        let svg = empty.to_svg(500.0, 300.0);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 0, "{svg}");
    }

    #[test]
    fn time_units_follow_the_span() {
        assert_eq!(time_unit(26_000_000), (1e6, "ms"));
        assert_eq!(time_unit(10_000_000_000), (1e9, "s"));
        assert_eq!(time_unit(500_000), (1e3, "µs"));
    }

    #[test]
    fn numbers_are_short_and_stable() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.256), "1.26");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(f64::NAN), "0");
    }

    #[test]
    fn palette_is_stable_and_distinct() {
        let colors: Vec<String> = (0..80).map(color).collect();
        assert_eq!(colors[0], "#4e79a7");
        let unique: std::collections::BTreeSet<_> = colors.iter().collect();
        assert_eq!(unique.len(), colors.len());
        assert!(colors.iter().all(|c| c.len() == 7 && c.starts_with('#')));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    fn sample_charts() -> (LineChart, BarChart, StackedBarChart) {
        let mut l = LineChart::new(
            "Waiting time vs utilisation",
            Axis::new("utilisation", "%"),
            Axis::new("avg waiting", "ms"),
        );
        l.series(
            Series::new("cfs", vec![(10.0, 1.0), (50.0, 2.5), (90.0, 7.0)]).with_errors(vec![
                (0.8, 1.2),
                (2.0, 3.0),
                (6.0, 8.5),
            ]),
        );
        l.series(Series::new(
            "twrs",
            vec![(10.0, 0.9), (50.0, 2.0), (90.0, 5.0)],
        ));
        let mut b = BarChart::new(
            "CPU share per process",
            "process",
            Axis::new("share", "%"),
            vec!["A".into(), "B".into(), "C <big>".into()],
        );
        b.series(BarSeries::new("cfs", vec![10.0, 20.0, 70.0]));
        b.series(
            BarSeries::new("twrs", vec![33.0, 33.0, 34.0]).with_errors(vec![
                (30.0, 36.0),
                (31.0, 35.0),
                (32.0, 36.0),
            ]),
        );
        b.reference("GPS", vec![33.3, 33.3, 33.3]);
        let mut s = StackedBarChart::new(
            "Share of the machine",
            Axis::new("CPU share", "%"),
            vec!["cfs".into(), "twrs".into()],
        );
        s.segment(Segment::new("A", vec![10.0, 33.0]));
        s.segment(Segment::new("B", vec![90.0, 67.0]));
        (l, b, s)
    }

    #[test]
    fn charts_are_deterministic_well_formed_and_labelled() {
        let (l, b, s) = sample_charts();
        for (svg, needles) in [
            (
                l.to_svg(700.0, 420.0),
                vec![
                    "Waiting time vs utilisation",
                    "utilisation (%)",
                    "avg waiting (ms)",
                    ">cfs<",
                    ">twrs<",
                    "<polyline",
                ],
            ),
            (
                b.to_svg(700.0, 420.0),
                vec![
                    "CPU share per process",
                    "share (%)",
                    ">process<",
                    ">GPS<",
                    "C &lt;big&gt;",
                ],
            ),
            (
                s.to_svg(700.0, 300.0),
                vec!["Share of the machine", "CPU share (%)", ">A<", ">B<"],
            ),
        ] {
            assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
            assert!(svg.trim_end().ends_with("</svg>"));
            for n in needles {
                assert!(svg.contains(n), "missing {n}");
            }
            assert!(!svg.contains("NaN") && !svg.contains("inf"));
        }
        let (l2, b2, s2) = sample_charts();
        assert_eq!(l.to_svg(700.0, 420.0), l2.to_svg(700.0, 420.0));
        assert_eq!(b.to_svg(700.0, 420.0), b2.to_svg(700.0, 420.0));
        assert_eq!(s.to_svg(700.0, 300.0), s2.to_svg(700.0, 300.0));
        let fig = side_by_side("Three panels", &[&l, &b, &s], 500.0, 400.0);
        assert!(fig.contains("width=\"1500\""));
        let col = grid("Stacked", &[&l, &b, &s], 1, 500.0, 400.0);
        assert!(col.contains("width=\"500\" height=\"1234\""));
    }

    #[test]
    fn write_samples_when_asked() {
        // `SCHEDKIT_CHART_SAMPLES=dir cargo test -p schedkit chart` writes the sample charts
        // so they can be rendered to PNG and looked at.
        if let Ok(dir) = std::env::var("SCHEDKIT_CHART_SAMPLES") {
            let (l, b, s) = sample_charts();
            std::fs::write(format!("{dir}/line.svg"), l.to_svg(700.0, 420.0)).unwrap();
            std::fs::write(format!("{dir}/bar.svg"), b.to_svg(700.0, 420.0)).unwrap();
            std::fs::write(format!("{dir}/stacked.svg"), s.to_svg(700.0, 300.0)).unwrap();
            std::fs::write(
                format!("{dir}/panels.svg"),
                side_by_side("Three panels", &[&l, &b, &s], 500.0, 400.0),
            )
            .unwrap();
        }
    }
}
