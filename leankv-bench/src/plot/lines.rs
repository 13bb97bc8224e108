//! Lines: throughput over a swept parameter or the thread count, and per-second time series,
//! each with an optional second quantity dashed against a right axis.

use super::style::{number, plot_error, series_color, text, SIZE};
use crate::stats::{group_by, Spread};
use anyhow::{anyhow, Result};
use plotters::chart::DualCoordChartContext;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// x, the main value (solid line), the secondary value (dashed line, right axis).
pub type Point = (f64, f64, f64);

/// Axis descriptions and scale of a line chart.
struct Axes<'a> {
    x: &'a str,
    y: &'a str,
    secondary: &'a str,
    /// Log scale for the main axis (values spanning orders of magnitude).
    log_y: bool,
    /// Main axis labels in thousands (large values).
    y_thousands: bool,
    /// Where the legend goes (where the lines are not).
    legend: SeriesLabelPosition,
}

/// Throughput over `x_field` (one line per engine and thread count) with each line's page
/// reads per second dashed against the right axis.
pub fn lines(
    records: &[Value],
    title: &str,
    x_field: &str,
    x_desc: &str,
    path: &Path,
) -> Result<()> {
    let mut groups: Vec<(String, Vec<Point>)> = Vec::new();
    for record in records {
        let name = format!("{} {}T", text(record, "engine"), number(record, "threads"));
        let point = (
            number(record, x_field),
            number(record, "ops_per_s"),
            number(record, "page_reads_per_s"),
        );
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, points)) => points.push(point),
            None => groups.push((name, vec![point])),
        }
    }
    if groups.is_empty() {
        return Err(anyhow!("no records to plot"));
    }
    for (_, points) in &mut groups {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let axes = Axes {
        x: x_desc,
        y: "operations per second (solid, log scale)",
        secondary: "page reads per second (dashed)",
        log_y: true,
        y_thousands: true,
        legend: SeriesLabelPosition::UpperRight,
    };
    draw_lines(&groups, title, &axes, path)
}

/// Throughput over the thread count, one line per engine, log scale (see [`thread_medians`]).
pub fn threads(records: &[Value], title: &str, field: &str, path: &Path) -> Result<()> {
    let groups = thread_medians(records, field);
    if groups.is_empty() {
        return Err(anyhow!("no records to plot"));
    }
    let axes = Axes {
        x: "worker threads",
        y: "throughput per second (median of rounds, log scale)",
        secondary: "",
        log_y: true,
        y_thousands: true,
        legend: SeriesLabelPosition::UpperLeft,
    };
    draw_lines(&groups, title, &axes, path)
}

/// Per engine (in order of appearance), the median of `field` over the records of each
/// thread count, by ascending thread count.
pub(super) fn thread_medians(records: &[Value], field: &str) -> Vec<(String, Vec<Point>)> {
    group_by(records, |record| text(record, "engine"))
        .into_iter()
        .map(|(engine, runs)| {
            let mut by_threads = group_by(runs, |record| number(record, "threads"));
            by_threads.sort_by(|a, b| a.0.total_cmp(&b.0));
            let points = by_threads
                .into_iter()
                .map(|(threads, same)| {
                    let values: Vec<f64> = same.iter().map(|r| number(r, field)).collect();
                    (threads, Spread::of(&values).median, 0.0)
                })
                .collect();
            (engine, points)
        })
        .collect()
}

/// The points of `record`'s per-second `series`: (second, `main`, `secondary`) per sample.
pub fn series_points(record: &Value, main: &str, secondary: &str) -> Vec<Point> {
    record["series"]
        .as_array()
        .map(|series| {
            series
                .iter()
                .map(|sample| {
                    (
                        number(sample, "second"),
                        number(sample, main),
                        number(sample, secondary),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Named lines over seconds (from [`series_points`]): the main values solid against the left
/// axis, the secondary ones dashed against the right axis (lines whose secondary values are
/// all zero draw none).
pub fn time_series(
    lines: &[(String, Vec<Point>)],
    title: &str,
    y_desc: &str,
    secondary_desc: &str,
    path: &Path,
) -> Result<()> {
    if lines.iter().all(|(_, points)| points.is_empty()) {
        return Err(anyhow!("no time series to plot"));
    }
    let top = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let axes = Axes {
        x: "seconds",
        y: y_desc,
        secondary: secondary_desc,
        log_y: false,
        y_thousands: top >= 10_000.0,
        legend: SeriesLabelPosition::UpperRight,
    };
    draw_lines(lines, title, &axes, path)
}

/// TPC-C runs (of the first round): tps per second, MiB/s written dashed (Fig. 9).
pub fn tpcc_series(records: &[Value], title: &str, path: &Path) -> Result<()> {
    let lines: Vec<(String, Vec<Point>)> = records
        .iter()
        .filter(|record| number(record, "round") <= 1.0)
        .map(|record| {
            // Results from before the log have no durability.
            let durability = record["durability"].as_str().unwrap_or_default();
            let name = format!(
                "{} {durability} {}T pool {} MiB",
                text(record, "engine"),
                number(record, "threads"),
                number(record, "pool_bytes") as u64 >> 20
            );
            (name, series_points(record, "tps", "mib_written_per_s"))
        })
        .collect();
    time_series(
        &lines,
        title,
        "transactions per second (solid)",
        "MiB/s written (dashed)",
        path,
    )
}

/// Scan runs with the deepest read-ahead among them: each tree's scan MiB/s per second, the
/// large scan's read MiB/s dashed (Fig. 12).
pub fn scan_series(records: &[Value], title: &str, path: &Path) -> Result<()> {
    let deepest = records
        .iter()
        .map(|record| number(record, "prefetch"))
        .fold(0.0, f64::max);
    let mut lines = Vec::new();
    for record in records.iter().filter(|r| number(r, "prefetch") == deepest) {
        let run = format!(
            "pool {} MiB ({:.2}x data)",
            number(record, "pool_bytes") as u64 >> 20,
            number(record, "pool_to_data")
        );
        lines.push((
            format!("large, {run}"),
            series_points(record, "large_mib_per_s", "read_mib_per_s"),
        ));
        lines.push((
            format!("small, {run}"),
            series_points(record, "small_mib_per_s", "none"),
        ));
    }
    time_series(
        &lines,
        &format!("{title} (read-ahead {deepest})"),
        "MiB/s scanned (solid)",
        "MiB/s read from storage (dashed, large scan)",
        path,
    )
}

fn draw_lines(
    groups: &[(String, Vec<Point>)],
    title: &str,
    axes: &Axes<'_>,
    path: &Path,
) -> Result<()> {
    let all = || groups.iter().flat_map(|(_, points)| points.iter());
    let x_min = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_max = all().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let x_range = if x_max > x_min {
        x_min..x_max
    } else {
        x_min - 1.0..x_max + 1.0
    };
    let ops_top = all().map(|p| p.1).fold(0.0, f64::max);
    let ops_bottom = all().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let reads_top = all().map(|p| p.2).fold(0.0, f64::max) * 1.1 + 1.0;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .right_y_label_area_size(80);
    if axes.log_y {
        let y_range = ((ops_bottom / 2.0).max(1.0)..ops_top * 2.0 + 1.0).log_scale();
        let mut chart = builder
            .build_cartesian_2d(x_range.clone(), y_range)
            .map_err(plot_error)?
            .set_secondary_coord(x_range, 0f64..reads_top);
        fill_chart(&mut chart, axes, groups)?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(x_range.clone(), 0f64..ops_top * 1.1 + 1.0)
            .map_err(plot_error)?
            .set_secondary_coord(x_range, 0f64..reads_top);
        fill_chart(&mut chart, axes, groups)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// Draws the axes, each group's main line (with points) and, if non-zero, its secondary line
/// dashed, and the legend.
fn fill_chart<'a, X, Y>(
    chart: &mut DualCoordChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<X, Y>,
        Cartesian2d<RangedCoordf64, RangedCoordf64>,
    >,
    axes: &Axes<'_>,
    groups: &[(String, Vec<Point>)],
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let thousands = |y: &f64| format!("{:.0}K", y / 1000.0);
    let plain = |y: &f64| format!("{y:.0}");
    let main: &dyn Fn(&f64) -> String = if axes.y_thousands { &thousands } else { &plain };
    chart
        .configure_mesh()
        .x_desc(axes.x)
        .y_desc(axes.y)
        .y_label_formatter(&main)
        .draw()
        .map_err(plot_error)?;
    // Read rates are thousands per second, write rates a few MiB per second.
    let secondary: &dyn Fn(&f64) -> String = if axes.log_y { &thousands } else { &plain };
    if groups
        .iter()
        .any(|(_, points)| points.iter().any(|p| p.2 > 0.0))
    {
        chart
            .configure_secondary_axes()
            .y_desc(axes.secondary)
            .y_label_formatter(&secondary)
            .draw()
            .map_err(plot_error)?;
    }
    for (index, (name, points)) in groups.iter().enumerate() {
        let color = series_color(index);
        chart
            .draw_series(LineSeries::new(
                points.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))
            .map_err(plot_error)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.0, p.1), 3, color.filled())),
            )
            .map_err(plot_error)?;
        if points.iter().any(|p| p.2 > 0.0) {
            chart
                .draw_secondary_series(DashedLineSeries::new(
                    points.iter().map(|p| (p.0, p.2)),
                    6,
                    4,
                    color.stroke_width(1),
                ))
                .map_err(plot_error)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(axes.legend.clone())
        .draw()
        .map_err(plot_error)?;
    Ok(())
}
