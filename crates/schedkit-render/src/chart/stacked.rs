//! Horizontal stacked bars.

use super::*;

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
    /// What the segments are ("process"), the legend's title.
    pub legend_title: Option<String>,
}

impl StackedBarChart {
    pub fn new(title: &str, x: Axis, rows: Vec<String>) -> StackedBarChart {
        StackedBarChart {
            title: title.to_string(),
            x,
            rows,
            segments: Vec::new(),
            legend_title: None,
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
        let top = header(
            svg,
            area,
            &self.title,
            self.legend_title.as_deref(),
            &legend,
        );
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
