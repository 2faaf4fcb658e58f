//! The SVG writer and the primitives every chart shares: text width, escaping, numbers
//! with at most two decimals, the palette.

use super::*;

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

pub(super) fn hsl_to_hex(h: f64, s: f64, l: f64) -> String {
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
