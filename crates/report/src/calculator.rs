//! The files `overeager stats` reads: two raters' labels (for Cohen's κ) and a contingency
//! table of counts (for χ²), each a CSV file; a refusal names the file and the line.

use std::path::Path;

use anyhow::{Context, Result, anyhow};

/// The non-empty records of a CSV file, each with its line number.
fn csv_rows(path: &Path, has_header: bool) -> Result<Vec<(u64, Vec<String>)>> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(has_header)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_path(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for rec in rdr.records() {
        let rec = rec.with_context(|| format!("{}: not valid CSV", path.display()))?;
        let line = rec.position().map_or(0, |p| p.line());
        if rec.iter().all(str::is_empty) {
            continue;
        }
        out.push((line, rec.iter().map(str::to_string).collect()));
    }
    Ok(out)
}

/// Two raters' labels of the same items: a header, then one `rater 1,rater 2` row per item.
pub fn rating_pairs(path: &Path) -> Result<Vec<(String, String)>> {
    let rows = csv_rows(path, true)?;
    let mut pairs = Vec::with_capacity(rows.len());
    for (line, r) in rows {
        let [a, b] = <[String; 2]>::try_from(r).map_err(|r| anyhow!("{}:{line}: expected 2 columns (rater 1's label, rater 2's label), found {}", path.display(), r.len()))?;
        pairs.push((a, b));
    }
    Ok(pairs)
}

/// A contingency table: one row of whole-number counts per line, no header.
pub fn counts_table(path: &Path) -> Result<Vec<Vec<u64>>> {
    let mut table = Vec::new();
    for (line, r) in csv_rows(path, false)? {
        let row = r
            .iter()
            .enumerate()
            .map(|(j, cell)| cell.parse::<u64>().map_err(|_| anyhow!("{}:{line}: column {}: `{cell}` is not a count (a whole number ≥ 0)", path.display(), j + 1)))
            .collect::<Result<Vec<u64>>>()?;
        table.push(row);
    }
    Ok(table)
}
