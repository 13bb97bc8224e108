//! Bars: throughput per engine and thread count, medians with min-max whiskers.

use super::style::{number, plot_error, series_color, SIZE};
use crate::stats::{group_by, Spread};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// One horizontal bar per distinct `bar_label(record)`: the median `ops_per_s` of its records,
/// with a whisker from the lowest to the highest when there are several (repeated rounds).
/// Records with the data in memory and those beyond memory (`pool_to_data` < 1) get separate
/// panels, each with its own scale, so that the slower beyond-memory bars stay readable.
pub fn engines(
    records: &[Value],
    title: &str,
    bar_label: impl Fn(&Value) -> String,
    path: &Path,
) -> Result<()> {
    if records.is_empty() {
        return Err(anyhow!("no records to plot"));
    }
    let in_memory = |record: &&Value| record["pool_to_data"].as_f64().is_none_or(|p| p >= 1.0);
    let panels: Vec<(bool, Vec<Bar>)> = group_by(records, in_memory)
        .into_iter()
        .map(|(memory, members)| {
            let bars = group_by(members, |record| bar_label(record))
                .into_iter()
                .map(|(label, runs)| {
                    let ops: Vec<f64> = runs.iter().map(|r| number(r, "ops_per_s")).collect();
                    (label, Spread::of(&ops))
                })
                .collect();
            (memory, bars)
        })
        .collect();
    let panel_height = |bars: &[Bar]| 90 + 28 * bars.len() as u32;
    let height = 40 + panels.iter().map(|(_, b)| panel_height(b)).sum::<u32>();
    let root = SVGBackend::new(path, (SIZE.0, height.max(300))).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut rest = root.titled(title, ("sans-serif", 20)).map_err(plot_error)?;
    let split = panels.len() > 1;
    for (memory, bars) in &panels {
        let (area, below) = rest.split_vertically(panel_height(bars));
        let caption = match (split, memory) {
            (false, _) => "",
            (true, true) => "data in memory",
            (true, false) => "beyond memory (pool smaller than the data; own scale)",
        };
        bar_panel(&area, caption, bars)?;
        rest = below;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// A bar's label and the spread of its runs.
type Bar = (String, Spread);

/// Thousands with a K (one decimal below ten thousand), or the plain number below a thousand.
fn kilo(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}K", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.1}K", x / 1000.0)
    } else {
        format!("{x:.0}")
    }
}

/// Horizontal bars (first on top) of the medians, whiskers from min to max, values as text.
fn bar_panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    bars: &[Bar],
) -> Result<()> {
    let longest = bars.iter().map(|(_, s)| s.max).fold(0.0, f64::max).max(1.0) * 1.35;
    let count = bars.len();
    let mut chart = ChartBuilder::on(area);
    chart
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(230);
    if !caption.is_empty() {
        chart.caption(caption, ("sans-serif", 16));
    }
    let mut chart = chart
        .build_cartesian_2d(0f64..longest, 0f64..count as f64)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(count * 2 + 1)
        .y_label_formatter(&|y| {
            // Bar i spans [count - i - 1, count - i): the first bar on top.
            let slot = y.floor() as usize;
            if (y - slot as f64 - 0.5).abs() < 1e-6 && slot < count {
                bars[count - 1 - slot].0.clone()
            } else {
                String::new()
            }
        })
        .x_desc("operations per second")
        .x_label_formatter(&|x| kilo(*x))
        .draw()
        .map_err(plot_error)?;
    let slot = |i: usize| (count - 1 - i) as f64;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, spread))| {
            Rectangle::new(
                [(0.0, slot(i) + 0.15), (spread.median, slot(i) + 0.85)],
                series_color(i).filled(),
            )
        }))
        .map_err(plot_error)?;
    let whiskers = bars.iter().enumerate().filter(|(_, (_, s))| s.runs > 1);
    chart
        .draw_series(whiskers.flat_map(|(i, (_, spread))| {
            let middle = slot(i) + 0.5;
            [
                PathElement::new([(spread.min, middle), (spread.max, middle)], BLACK),
                PathElement::new(
                    [(spread.min, middle - 0.2), (spread.min, middle + 0.2)],
                    BLACK,
                ),
                PathElement::new(
                    [(spread.max, middle - 0.2), (spread.max, middle + 0.2)],
                    BLACK,
                ),
            ]
        }))
        .map_err(plot_error)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, spread))| {
            let value = if spread.runs > 1 {
                format!(
                    "{} ({}-{}, {} runs)",
                    kilo(spread.median),
                    kilo(spread.min),
                    kilo(spread.max),
                    spread.runs
                )
            } else {
                kilo(spread.median)
            };
            Text::new(
                value,
                (spread.max + longest * 0.01, slot(i) + 0.7),
                ("sans-serif", 12),
            )
        }))
        .map_err(plot_error)?;
    Ok(())
}
