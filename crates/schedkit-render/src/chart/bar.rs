//! Grouped bar charts, with optional error whiskers and marks.

use super::*;

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
    /// What the legend's entries are ("policy"), written before them.
    pub legend_title: Option<String>,
    /// Why there is no data, shown under the "no data" note when there are no bars.
    pub no_data: Option<String>,
}

/// Where a bar starts: 0 on a linear axis; 1 on a logarithmic one (a ratio: bars above it
/// are greater, below it smaller), which has no 0.
fn base(y: &Axis) -> f64 {
    if y.log {
        1.0
    } else {
        0.0
    }
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
            legend_title: None,
            no_data: None,
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

/// Where a bar chart's parts go inside its area (see [`BarChart::layout`]).
struct BarLayout {
    plot: Rect,
    /// Width of one category's slot, of its group of bars, of one bar.
    slot: f64,
    group_w: f64,
    bar_w: f64,
    /// Category labels rotated (they would overlap), and the room kept for them below.
    rotated: bool,
    label_room: f64,
}

impl Chart for BarChart {
    /// The steps: title and legend, the layout, the y axis over every value drawn, each
    /// category's group of bars with its label, then the zero line, the x label, "no data"
    /// and the frame.
    fn draw(&self, svg: &mut Svg, area: Rect) {
        let top = header(
            svg,
            area,
            &self.title,
            self.legend_title.as_deref(),
            &self.legend(),
        );
        let l = self.layout(area, top);
        let places = |v: &f64| self.y.places(*v);
        let (lo, hi) = data_range(
            self.values_drawn().filter(places).chain([base(&self.y)]),
            !self.y.log,
        );
        let ys = y_axis(svg, l.plot, &self.y, lo, hi);
        for ci in 0..self.categories.len() {
            self.draw_category(svg, &l, &ys, ci);
        }
        let (plot, zero) = (l.plot, ys.map(base(&self.y)));
        svg.line(plot.x, zero, plot.x + plot.w, zero, AXIS_COLOR, 1.0);
        svg.text(
            plot.x + plot.w / 2.0,
            plot.y + plot.h + l.label_room + 20.0,
            &self.x_label,
            LABEL_FONT,
            Anchor::Middle,
        );
        if self.series.is_empty() || self.categories.is_empty() {
            no_data(svg, plot, self.no_data.as_deref());
        }
        svg.frame(plot.x, plot.y, plot.w, plot.h, AXIS_COLOR);
    }
}

impl BarChart {
    /// The series, then the reference and the marks (black lines) when there are any.
    fn legend(&self) -> Vec<LegendEntry> {
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
        legend
    }

    /// The plot below `top`, with room on the left for the y axis and below for the
    /// category labels.
    fn layout(&self, area: Rect, top: f64) -> BarLayout {
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
        let k = self.series.len().max(1) as f64;
        let group_w = slot * 0.8;
        BarLayout {
            plot,
            slot,
            group_w,
            bar_w: group_w / k,
            rotated,
            label_room,
        }
    }

    /// Every value the y axis must hold: bars and their error bounds, then the reference
    /// and the marks.
    fn values_drawn(&self) -> impl Iterator<Item = f64> + '_ {
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
        vals.chain(refs)
    }

    /// Category `ci`: a bar per series (with its zero label, mark and error bar), the
    /// reference across the group, the category's label.
    fn draw_category(&self, svg: &mut Svg, l: &BarLayout, ys: &Scale, ci: usize) {
        let (plot, slot, group_w, bar_w) = (l.plot, l.slot, l.group_w, l.bar_w);
        let cat = &self.categories[ci];
        let zero = ys.map(base(&self.y));
        // A value a logarithmic axis cannot place (0) is drawn at the axis's lower end.
        let floor = ys.lowest();
        let at = |v: f64| if self.y.places(v) { ys.map(v) } else { floor };
        let base = plot.y + plot.h;
        let gx = plot.x + ci as f64 * slot + (slot - group_w) / 2.0;
        for (si, s) in self.series.iter().enumerate() {
            let v = s.values[ci];
            let x = gx + si as f64 * bar_w;
            let y = at(v);
            let tip = format!("{} · {}: {} {}", cat, s.name, fmt_value(v), self.y.unit);
            svg.rect(
                x,
                y.min(zero),
                (bar_w - 1.0).max(0.5),
                (y - zero).abs(),
                &color(si),
                Some(tip.trim_end()),
            );
            // A zero bar has no height: say 0 so it does not read as missing.
            if v == 0.0 {
                svg.text(x + bar_w / 2.0, zero - 4.0, "0", TICK_FONT, Anchor::Middle);
            }
            if let Some(marks) = &s.marks {
                let my = at(marks[ci]);
                svg.line(x - 1.0, my, x + bar_w, my, "#111111", 2.0);
            }
            if let Some(errs) = &s.errors {
                let (elo, ehi) = errs[ci];
                error_bar(
                    svg,
                    x + bar_w / 2.0,
                    at(elo),
                    at(ehi),
                    (bar_w / 4.0).min(4.0),
                );
            }
        }
        if let Some((_, refs)) = &self.reference {
            let y = ys.map(refs[ci]);
            svg.line(gx - 2.0, y, gx + group_w + 2.0, y, "#111111", 2.0);
        }
        let cx = plot.x + (ci as f64 + 0.5) * slot;
        if l.rotated {
            svg.text_rot(cx, base + 14.0, cat, TICK_FONT, Anchor::End, false, -40.0);
        } else {
            svg.text(cx, base + 16.0, cat, TICK_FONT, Anchor::Middle);
        }
    }
}

pub(super) fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}
