//! Byte offsets to lines and columns, and errors located with them.

use super::ScenarioError;
use std::ops::Range;

/// Converts byte offsets to 1-based line and column.
pub(crate) struct Locator<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
    /// Byte offset where each line starts, so a lookup is a binary search (scenarios with
    /// 10,000 processes must not parse in quadratic time).
    line_starts: Vec<usize>,
    /// The span of the last error made by [`Locator::err`]: the error returned, since every
    /// error is made where it is returned. It travels beside the [`ScenarioError`] (whose
    /// public fields are built by literal elsewhere) to put a caret under the value.
    pub(super) last_span: std::cell::Cell<Option<(usize, usize)>>,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str) -> Locator<'a> {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Locator {
            file,
            text,
            line_starts,
            last_span: std::cell::Cell::new(None),
        }
    }

    /// Byte offset where 1-based `line` starts (the text's end past the last line).
    pub(crate) fn line_offset(&self, line: usize) -> usize {
        self.line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(self.text.len())
    }

    pub(crate) fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        let col = self.text[start..offset].chars().count() + 1;
        (line, col)
    }

    /// An error at `span` (a range in the text), or at no place (`None`: a value made in
    /// code, line 0).
    pub(crate) fn err(
        &self,
        span: impl Into<Option<Range<usize>>>,
        field: &str,
        message: impl Into<String>,
    ) -> ScenarioError {
        let span = span.into();
        self.last_span.set(span.as_ref().map(|s| (s.start, s.end)));
        let (line, column) = match &span {
            Some(s) => self.line_col(s.start),
            None => (0, 0),
        };
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The key whose value starts at `offset`: the identifier before the nearest `=` to the
    /// left on the same line. Serde errors carry a span but not always the key name.
    pub(super) fn key_at(&self, offset: usize) -> Option<String> {
        let offset = offset.min(self.text.len());
        let line_start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let before = &self.text[line_start..offset];
        let eq = before.rfind('=')?;
        let key = before[..eq]
            .trim_end()
            .rsplit(|c: char| c == '{' || c == ',' || c.is_whitespace())
            .next()?
            .trim();
        (!key.is_empty()).then(|| key.to_string())
    }
}
