//! The legend: its title (what the entries are) and the entries laid out in rows under the
//! chart's title.

use super::*;

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

pub(super) const LEGEND_FONT: f64 = 12.0;
pub(super) const LEGEND_ROW: f64 = 18.0;

pub(super) fn legend_entry_width(e: &LegendEntry) -> f64 {
    14.0 + 6.0 + text_width(&e.name, LEGEND_FONT) + 16.0
}

/// Height a legend of `entries` flowed into rows of width `width` needs.
pub fn legend_height(entries: &[LegendEntry], width: f64) -> f64 {
    legend_rows(entries, width).len() as f64 * LEGEND_ROW
}

pub(super) fn legend_rows(entries: &[LegendEntry], width: f64) -> Vec<Vec<usize>> {
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

/// Room a legend's title takes before its first entry: the bold title, its colon, a gap.
fn legend_title_width(title: &str) -> f64 {
    text_width(&format!("{title}:"), LEGEND_FONT) * 1.1 + 10.0
}

/// A legend whose title says what its entries are ("policy:", "process:"), in bold before the
/// first entry, the entries flowed into rows right of it; returns its height (0 without
/// entries: no title over nothing).
pub fn draw_titled_legend(
    svg: &mut Svg,
    title: Option<&str>,
    entries: &[LegendEntry],
    x: f64,
    y: f64,
    width: f64,
) -> f64 {
    if entries.is_empty() {
        return 0.0;
    }
    let (mut x, mut width) = (x, width);
    if let Some(t) = title {
        let text = format!("{t}:");
        svg.text_rot(x, y + 13.0, &text, LEGEND_FONT, Anchor::Start, true, 0.0);
        x += legend_title_width(t);
        width -= legend_title_width(t);
    }
    draw_legend(svg, entries, x, y, width)
}

/// Legends stacked one under the other (a Gantt's colours, then its marks), each with its
/// title, their entries starting at one x (right of the widest title) so that they read as
/// columns; returns their height. Empty legends take no room.
pub fn draw_stacked_legends(
    svg: &mut Svg,
    legends: &[(&str, &[LegendEntry])],
    x: f64,
    y: f64,
    width: f64,
) -> f64 {
    let indent = stacked_indent(legends);
    let mut h = 0.0;
    for (title, entries) in legends.iter().filter(|(_, e)| !e.is_empty()) {
        svg.text_rot(
            x,
            y + h + 13.0,
            &format!("{title}:"),
            LEGEND_FONT,
            Anchor::Start,
            true,
            0.0,
        );
        h += draw_legend(svg, entries, x + indent, y + h, width - indent);
    }
    h
}

/// Height [`draw_stacked_legends`] needs.
pub fn stacked_legends_height(legends: &[(&str, &[LegendEntry])], width: f64) -> f64 {
    let indent = stacked_indent(legends);
    legends
        .iter()
        .map(|(_, e)| legend_height(e, width - indent))
        .sum()
}

fn stacked_indent(legends: &[(&str, &[LegendEntry])]) -> f64 {
    legends
        .iter()
        .filter(|(_, e)| !e.is_empty())
        .map(|(t, _)| legend_title_width(t))
        .fold(0.0, f64::max)
}
