//! Line charts, with optional error bars.

use super::*;

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
    /// What the legend's entries are ("policy"), written before them.
    pub legend_title: Option<String>,
    /// Why there is no data, shown under the "no data" note when no series has a point.
    pub no_data: Option<String>,
}

impl LineChart {
    pub fn new(title: &str, x: Axis, y: Axis) -> LineChart {
        LineChart {
            title: title.to_string(),
            x,
            y,
            series: Vec::new(),
            y_from_zero: true,
            legend_title: None,
            no_data: None,
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
        let top = header(
            svg,
            area,
            &self.title,
            self.legend_title.as_deref(),
            &legend,
        );
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
        if self.series.iter().all(|s| s.points.is_empty()) {
            no_data(svg, plot, self.no_data.as_deref());
        }
        svg.frame(plot.x, plot.y, plot.w, plot.h, AXIS_COLOR);
    }
}
