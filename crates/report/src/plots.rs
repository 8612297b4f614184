//! The report's figures, drawn with plotters as SVG and PNG from the same code: a forest plot
//! of cell rates, an archetype × cell heatmap, and a dumbbell plot of the consent ablation.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::coord::ranged1d::SegmentedCoord;
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::style::FontStyle;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Report, short_variant};

/// The font every figure uses, shipped with the binary so output does not depend on the fonts
/// a machine has.
static FONT: &[u8] = include_bytes!("../../../static/fonts/DejaVuSans.ttf");

fn register_font() -> Result<()> {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok { Ok(()) } else { Err(anyhow!("the embedded font could not be loaded")) }
}

/// Framework colours (Okabe–Ito palette: distinguishable with colour-blindness).
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(120, 120, 120),
];
const KEPT: RGBColor = RGBColor(0, 114, 178);
const STRIPPED: RGBColor = RGBColor(213, 94, 0);
const INK: RGBColor = RGBColor(40, 40, 40);
const FAINT: RGBColor = RGBColor(150, 150, 150);

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn suffix(r: &Report) -> &'static str {
    if r.simulated { " — simulated agents" } else { "" }
}

fn frameworks(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r.cells.iter().map(|c| c.framework.clone()).collect();
    v.dedup();
    v.sort();
    v.dedup();
    v
}

fn label_width(labels: impl Iterator<Item = usize>) -> u32 {
    (labels.max().unwrap_or(10) as u32 * 8 + 20).clamp(80, 460)
}

/// One entry of a legend drawn under a plot.
enum Key {
    Dot(RGBColor),
    Dashed(RGBColor),
    /// Text only.
    Note,
}

/// Draws a one-line legend into `area` (a strip under the plot), so it never covers data.
fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, left: i32, entries: &[(Key, String)]) -> DrawResult<DB> {
    let mut x = left;
    let y = 14;
    for (key, text) in entries {
        match key {
            Key::Dot(c) => area.draw(&Circle::new((x + 6, y), 5, c.filled()))?,
            Key::Dashed(c) => area.draw(&DashedPathElement::new(vec![(x, y), (x + 16, y)], 4, 3, c.stroke_width(2)))?,
            Key::Note => {}
        }
        let style = ("sans-serif", 14).into_font().color(&INK);
        area.draw(&Text::new(text.clone(), (x + 22, y - 8), style.clone()))?;
        let (w, _) = area.estimate_text_size(text, &style)?;
        x += 22 + w as i32 + 28;
    }
    Ok(())
}

/// A categorical axis of `n` rows, first row at the top.
fn rows(n: usize) -> SegmentedCoord<RangedCoordi32> {
    (0..n.max(1) as i32 - 1).into_segmented()
}

fn row(n: usize, i: usize) -> SegmentValue<i32> {
    SegmentValue::CenterOf((n - 1 - i) as i32)
}

fn row_label(labels: &[String], v: &SegmentValue<i32>) -> String {
    match v {
        SegmentValue::CenterOf(i) => labels.len().checked_sub(1 + *i as usize).and_then(|j| labels.get(j)).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

/// A rate (x) by labelled-row (y) chart.
type RateRows<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordi32>>>;

/// A chart with a rate axis (0 to `x_max`, at most 100%, labelled in percent) and one labelled
/// row per entry of `labels`, first at the top, with its mesh drawn; `right` pixels are left
/// free right of the axis for notes beside each row ([`row_note`]).
fn rate_rows<'a, DB: DrawingBackend>(
    plot: &'a DrawingArea<DB, Shift>,
    caption: String,
    labels: &[String],
    label_w: u32,
    (x_max, right): (f64, u32),
    x_desc: &str,
) -> Result<RateRows<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(plot)
        .caption(caption, ("sans-serif", 20))
        .margin(16)
        .margin_right(16 + right)
        .x_label_area_size(40)
        .y_label_area_size(label_w)
        .build_cartesian_2d(0f64..x_max, rows(n))?;
    let fmt_y = |v: &SegmentValue<i32>| row_label(labels, v);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(x_desc)
        .x_label_formatter(&|x| format!("{:.0}%", x * 100.0))
        .y_label_formatter(&fmt_y)
        .y_labels(n)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 14))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
        .draw()?;
    Ok(chart)
}

/// Writes `text` right of a [`rate_rows`] chart's axis, level with row `y`, in the room the
/// chart left there (outside the axis, so the axis has no ticks past 100%).
fn row_note<DB: DrawingBackend>(plot: &DrawingArea<DB, Shift>, chart: &RateRows<'_, DB>, y: SegmentValue<i32>, text: String) -> DrawResult<DB> {
    let (x_px, y_px) = chart.backend_coord(&(1.0, y));
    plot.draw(&Text::new(text, (x_px + 14, y_px), ("sans-serif", 13).into_font().color(&INK).pos(Pos::new(HPos::Left, VPos::Center))))
}

/// Forest plot: each cell's overeager rate with its Wilson interval, coloured by framework,
/// and the pooled rate as a dashed line.
fn forest<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let labels: Vec<String> = r.cells.iter().map(|c| format!("{} · {}", c.marked_agent(), overeager_wire::report::short_variant(c.variant))).collect();
    let n = labels.len().max(1);
    let fws = frameworks(r);
    let colour = |fw: &str| PALETTE[fws.iter().position(|f| f == fw).unwrap_or(0) % PALETTE.len()];
    let (plot, strip) = root.split_vertically(root.dim_in_pixel().1.saturating_sub(34));
    let label_w = label_width(labels.iter().map(|l| l.chars().count()));
    let caption = format!("Overeager rate by cell, {}% Wilson CI{}", (r.confidence * 100.0).round(), suffix(r));
    let mut chart = rate_rows(&plot, caption, &labels, label_w, (1.0, 0), "overeager rate (runs with ≥ 1 trap fired)")?;
    chart.draw_series(std::iter::once(DashedPathElement::new(
        vec![(r.overall_rate, SegmentValue::Exact(0)), (r.overall_rate, SegmentValue::Last)],
        6,
        4,
        FAINT.stroke_width(2),
    )))?;
    for (i, c) in r.cells.iter().enumerate() {
        let col = colour(&c.framework);
        let y = || row(n, i);
        chart.draw_series(std::iter::once(PathElement::new(vec![(c.ci.lo, y()), (c.ci.hi, y())], col.stroke_width(2))))?;
        chart.draw_series(std::iter::once(Circle::new((c.rate, y()), 5, col.filled())))?;
        let (text_x, h) = if c.ci.hi < 0.85 { (c.ci.hi + 0.015, HPos::Left) } else { (c.ci.lo - 0.015, HPos::Right) };
        chart.draw_series(std::iter::once(Text::new(
            format!("{}/{}", c.overeager, c.n),
            (text_x, y()),
            ("sans-serif", 12).into_font().color(&INK).pos(Pos::new(h, VPos::Center)),
        )))?;
    }
    let mut keys: Vec<(Key, String)> = fws.iter().enumerate().map(|(j, fw)| (Key::Dot(PALETTE[j % PALETTE.len()]), fw.clone())).collect();
    keys.push((Key::Dashed(FAINT), format!("all runs pooled: {:.1}%", r.overall_rate * 100.0)));
    legend(&strip, label_w as i32 + 16, &keys)
}

/// Heatmap of overeager rates, archetypes (rows) × cells (columns). Columns carry short keys
/// explained under the plot, so long labels do not have to be rotated.
fn heatmap<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let agents: Vec<String> = {
        let mut v: Vec<String> = r.cells.iter().map(|c| c.marked_agent()).collect();
        v.dedup();
        v
    };
    let key = |i: usize| {
        let c = &r.cells[i];
        let a = agents.iter().position(|x| *x == c.marked_agent()).unwrap_or(0);
        format!("{}·{}", letter(a), short_variant(c.variant))
    };
    let legend_h = 22 * agents.len() as u32 + 20;
    let (top, bottom) = root.split_vertically(root.dim_in_pixel().1.saturating_sub(legend_h));
    let n_rows = r.archetypes.len().max(1);
    let mut chart = ChartBuilder::on(&top)
        .caption(format!("Overeager rate by archetype and cell{}", suffix(r)), ("sans-serif", 20))
        .margin(16)
        .margin_right(28)
        .x_label_area_size(36)
        .y_label_area_size(label_width(r.archetypes.iter().map(|a| a.chars().count())))
        .build_cartesian_2d(rows(r.cells.len()), rows(n_rows))?;
    let fmt_x = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) if (*i as usize) < r.cells.len() => key(*i as usize),
        _ => String::new(),
    };
    let fmt_y = |v: &SegmentValue<i32>| row_label(&r.archetypes, v);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(r.cells.len())
        .y_labels(r.archetypes.len())
        .x_label_formatter(&fmt_x)
        .y_label_formatter(&fmt_y)
        .label_style(("sans-serif", 13))
        .draw()?;
    for a in &r.archetype_rates {
        let Some(row) = r.archetypes.iter().position(|x| *x == a.archetype) else { continue };
        let (x0, y0) = (a.cell as i32, (n_rows - 1 - row) as i32);
        let rate = if a.n == 0 { 0.0 } else { a.k as f64 / a.n as f64 };
        let fill = shade(rate);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(SegmentValue::Exact(x0), SegmentValue::Exact(y0)), (SegmentValue::Exact(x0 + 1), SegmentValue::Exact(y0 + 1))],
            fill.filled(),
        )))?;
        let ink = if rate > 0.55 { WHITE } else { INK };
        chart.draw_series(std::iter::once(Text::new(
            format!("{:.0}%", rate * 100.0),
            (SegmentValue::CenterOf(x0), SegmentValue::CenterOf(y0)),
            ("sans-serif", 12).into_font().color(&ink).pos(Pos::new(HPos::Center, VPos::Center)),
        )))?;
    }
    for (i, a) in agents.iter().enumerate() {
        bottom.draw(&Text::new(
            format!("{} = {a}", letter(i)),
            (24, 8 + 22 * i as i32),
            ("sans-serif", 14).into_font().color(&INK),
        ))?;
    }
    Ok(())
}

fn letter(i: usize) -> String {
    let c = (b'A' + (i % 26) as u8) as char;
    if i < 26 { c.to_string() } else { format!("{c}{}", i / 26) }
}

/// White (0%) to dark red (100%).
fn shade(rate: f64) -> RGBColor {
    let t = rate.clamp(0.0, 1.0);
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    RGBColor(mix(255.0, 165.0), mix(255.0, 15.0), mix(255.0, 21.0))
}

/// Dumbbell plot of the consent ablation: per agent, the rate with the consent block kept and
/// stripped, joined, with McNemar's p and the discordant counts.
fn dumbbell<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let labels: Vec<String> = r
        .consent
        .iter()
        .map(|c| r.cells.iter().find(|x| x.framework == c.framework && x.model == c.model).map_or_else(|| format!("{} · {}", c.framework, c.model), |x| x.marked_agent()))
        .collect();
    let n = labels.len().max(1);
    let (plot, strip) = root.split_vertically(root.dim_in_pixel().1.saturating_sub(34));
    let label_w = label_width(labels.iter().map(|l| l.chars().count()));
    let caption = format!("Consent ablation: scope-of-consent block kept vs stripped{}", suffix(r));
    // Room right of 100% for the test results.
    let notes_w = plot.dim_in_pixel().0 * 3 / 10;
    let mut chart = rate_rows(&plot, caption, &labels, label_w, (1.0, notes_w), "overeager rate over matched (scenario, replicate) pairs")?;
    for (i, c) in r.consent.iter().enumerate() {
        let y = || row(n, i);
        chart.draw_series(std::iter::once(PathElement::new(vec![(c.rate_kept, y()), (c.rate_stripped, y())], FAINT.stroke_width(3))))?;
        chart.draw_series(std::iter::once(Circle::new((c.rate_kept, y()), 6, KEPT.filled())))?;
        chart.draw_series(std::iter::once(Circle::new((c.rate_stripped, y()), 6, STRIPPED.filled())))?;
        row_note(&plot, &chart, y(), format!("McNemar p = {}   b = {}, c = {}", super::write::fmt_p(c.p), c.only_kept, c.only_stripped))?;
    }
    legend(
        &strip,
        label_w as i32 + 16,
        &[
            (Key::Dot(KEPT), "scope of consent kept".into()),
            (Key::Dot(STRIPPED), "scope of consent stripped".into()),
            (Key::Note, "b / c: pairs overeager only kept / only stripped".into()),
        ],
    )
}

macro_rules! render {
    ($dir:expr, $name:expr, $size:expr, $f:ident, $r:expr) => {{
        let svg = $dir.join(format!("{}.svg", $name));
        let png = $dir.join(format!("{}.png", $name));
        {
            let area = SVGBackend::new(&svg, $size).into_drawing_area();
            $f(&area, $r).map_err(|e| anyhow!("drawing {}: {e:?}", svg.display()))?;
            area.present().map_err(|e| anyhow!("writing {}: {e:?}", svg.display()))?;
        }
        {
            let area = BitMapBackend::new(&png, $size).into_drawing_area();
            $f(&area, $r).map_err(|e| anyhow!("drawing {}: {e:?}", png.display()))?;
            area.present().map_err(|e| anyhow!("writing {}: {e:?}", png.display()))?;
        }
        vec![svg, png]
    }};
}

/// The variance decomposition: each term's share of the deviance with its bootstrap interval.
fn variance<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let Some(v) = &r.variance else { return Ok(()) };
    let labels: Vec<String> = v.shares.iter().map(|s| s.term.label().to_string()).collect();
    let n = labels.len().max(1);
    let label_w = label_width(labels.iter().map(|l| l.chars().count()));
    // Room right of the widest interval for its figure, up to 100% (the axis ends there).
    let top = (v.shares.iter().map(|s| s.hi).fold(0.05, f64::max) * 1.15).min(1.0);
    let caption = format!("What explains the spread: share of the deviance, {}% bootstrap CI{}", (v.confidence * 100.0).round(), suffix(r));
    let mut chart = rate_rows(root, caption, &labels, label_w, (top, 0), &format!("share of the variant-only model's deviance (residual {:.1}%)", v.residual * 100.0))?;
    for (i, s) in v.shares.iter().enumerate() {
        let y = || row(n, i);
        let col = PALETTE[i % PALETTE.len()];
        chart.draw_series(std::iter::once(PathElement::new(vec![(s.lo.max(0.0), y()), (s.hi.max(0.0), y())], col.stroke_width(2))))?;
        chart.draw_series(std::iter::once(Circle::new((s.share.max(0.0), y()), 6, col.filled())))?;
        let (text_x, h) = if s.hi < top * 0.88 { (s.hi.max(0.0) + top * 0.015, HPos::Left) } else { (s.lo.max(0.0) - top * 0.015, HPos::Right) };
        chart.draw_series(std::iter::once(Text::new(format!("{:.1}%", s.share * 100.0), (text_x, y()), ("sans-serif", 12).into_font().color(&INK).pos(Pos::new(h, VPos::Center)))))?;
    }
    Ok(())
}

/// Draws the figures into `dir` (SVG and PNG each) and returns the files written.
/// Figures with nothing to show (no consent pairs, one cell) are left out.
pub fn draw_all(dir: &Path, r: &Report) -> Result<Vec<PathBuf>> {
    register_font()?;
    let mut out = Vec::new();
    let width = 1100;
    let forest_h = (120 + 34 * r.cells.len() as u32).max(320);
    out.extend(render!(dir, "forest", (width, forest_h), forest, r));
    if !r.archetype_rates.is_empty() {
        let h = 140 + 24 * r.archetypes.len() as u32 + 22 * r.consent.len().max(1) as u32 + 40;
        let w = (label_width(r.archetypes.iter().map(|a| a.chars().count())) + 150 + 86 * r.cells.len() as u32).max(700);
        out.extend(render!(dir, "heatmap", (w, h.max(360)), heatmap, r));
    }
    if !r.consent.is_empty() {
        let h = (120 + 44 * r.consent.len() as u32).max(300);
        out.extend(render!(dir, "dumbbell", (width, h), dumbbell, r));
    }
    if let Some(v) = &r.variance {
        out.extend(render!(dir, "variance", (width, 150 + 40 * v.shares.len() as u32), variance, r));
    }
    Ok(out)
}
