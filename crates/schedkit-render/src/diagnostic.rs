//! A scenario error or warning as shown to a person: `file:line:col: `field`: message`, then,
//! where the span is known, the offending line with a caret under the value
//! (annotate-snippets; only the one line is handed over, so a file of a million lines costs
//! nothing here).

use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
use schedkit_core::scenario::Diagnostic;

/// Whether a diagnostic stops the run or only warns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// `d` as text; `text` is the scenario it points into (`None`, or a span outside it: the
/// located line alone).
pub fn render(d: &Diagnostic, text: Option<&str>, severity: Severity) -> String {
    let head = d.error.to_string();
    let (Some(text), Some(span)) = (text, d.span.clone()) else {
        return head;
    };
    if span.start > text.len() {
        return head;
    }
    let line_start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[span.start..]
        .find('\n')
        .map_or(text.len(), |i| span.start + i);
    let line = &text[line_start..line_end];
    let start = span.start - line_start;
    let end = (span.end.min(line_end) - line_start)
        .max(start + 1)
        .min(line.len());
    if start >= end {
        return head;
    }
    let level = match severity {
        Severity::Error => Level::ERROR,
        Severity::Warning => Level::WARNING,
    };
    let report = &[Group::with_level(level).element(
        Snippet::source(line)
            .line_start(d.error.line.max(1))
            .path(d.error.file.as_str())
            .annotation(
                AnnotationKind::Primary
                    .span(start..end)
                    .label(&d.error.field),
            ),
    )];
    let snippet = Renderer::plain().render(report);
    format!("{head}\n{snippet}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit_core::scenario::Scenario;

    #[test]
    fn an_error_with_a_span_shows_its_line_and_a_caret() {
        let text = "cores = 0\n";
        let d = Scenario::parse_located("s.toml", text).unwrap_err();
        let shown = render(&d, Some(text), Severity::Error);
        assert!(shown.starts_with(&d.error.to_string()), "{shown}");
        assert!(shown.contains("cores = 0"), "{shown}");
        assert!(shown.contains('^'), "{shown}");
        // Without the text, the located line alone.
        assert_eq!(render(&d, None, Severity::Error), d.error.to_string());
    }
}
