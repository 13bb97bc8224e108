//! SVG plots of result records (plotters' SVG backend: no system fonts or libraries needed).
//!
//! * [`engines`]: throughput per engine and thread count, one horizontal bar each (median with
//!   a min-max whisker over repeated runs), in-memory and beyond-memory runs in separate
//!   panels with their own scales (the headline, Fig. 7).
//! * [`lines`]: throughput over a swept parameter (Zipf θ as in Fig. 10, cooling percentage
//!   as in Fig. 11), one line per engine and thread count, with the page-read rate of each
//!   line dashed on a second axis.
//! * [`threads`]: throughput over the thread count, one line per engine (scalability).
//! * [`time_series`]: per-second values of runs (TPC-C throughput with its write rate, Fig.
//!   9; scan speeds with the read rate, Fig. 12), a second quantity dashed on a second axis.

use crate::stats::{group_by, Spread};
use anyhow::{anyhow, Result};
use plotters::chart::DualCoordChartContext;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

const SIZE: (u32, u32) = (900, 540);

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

fn series_color(index: usize) -> RGBColor {
    const PALETTE: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    PALETTE[index % PALETTE.len()]
}

fn number(record: &Value, field: &str) -> f64 {
    record[field].as_f64().unwrap_or(0.0)
}

fn text(record: &Value, field: &str) -> String {
    match &record[field] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn plot_error<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow!("plotting: {error:?}")
}

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
fn thread_medians(records: &[Value], field: &str) -> Vec<(String, Vec<Point>)> {
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
            let name = format!(
                "{} {}T pool {} MiB",
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plots_render_to_svg_with_every_label() {
        let dir = tempfile::tempdir().unwrap();
        let records = vec![
            json!({"engine": "leankv", "threads": 1, "ops_per_s": 700000.0, "theta": 0.5, "page_reads_per_s": 0.0}),
            json!({"engine": "leankv", "threads": 1, "ops_per_s": 900000.0, "theta": 1.0, "page_reads_per_s": 100.0}),
            json!({"engine": "traditional", "threads": 1, "ops_per_s": 300000.0, "theta": 0.5, "page_reads_per_s": 50.0}),
        ];
        let bars = dir.path().join("bars.svg");
        engines(&records, "headline", |r| text(r, "engine"), &bars).unwrap();
        let svg = std::fs::read_to_string(&bars).unwrap();
        assert!(svg.contains("traditional") && svg.contains("700K"), "{svg}");
        let curve = dir.path().join("zipf.svg");
        lines(&records, "zipf", "theta", "Zipf θ", &curve).unwrap();
        let svg = std::fs::read_to_string(&curve).unwrap();
        assert!(
            svg.contains("leankv 1T") && svg.contains("<polyline"),
            "{svg}"
        );
        assert!(engines(&[], "empty", |r| text(r, "engine"), &bars).is_err());
        // Repeated runs become one bar with a whisker; beyond memory gets its own panel.
        let mut rounds = records.clone();
        rounds.push(
            json!({"engine": "leankv", "threads": 1, "ops_per_s": 20000.0, "pool_to_data": 0.2}),
        );
        rounds.push(
            json!({"engine": "leankv", "threads": 1, "ops_per_s": 26000.0, "pool_to_data": 0.2}),
        );
        engines(&rounds, "headline", |r| text(r, "engine"), &bars).unwrap();
        let svg = std::fs::read_to_string(&bars).unwrap();
        assert!(svg.contains("800K (700K-900K, 2 runs)"), "{svg}");
        assert!(svg.contains("23K (20K-26K, 2 runs)"), "{svg}");
        assert!(
            svg.contains("beyond memory") && svg.contains("data in memory"),
            "{svg}"
        );
    }

    #[test]
    fn thread_lines_take_the_median_of_each_thread_count() {
        let run = |engine: &str, threads: u32, tps: f64| json!({"engine": engine, "threads": threads, "tps": tps});
        let records = vec![
            run("leankv", 16, 260000.0),
            run("leankv", 1, 20000.0),
            run("traditional", 16, 6000.0),
            run("leankv", 16, 280000.0),
            run("leankv", 1, 17000.0),
            run("leankv", 16, 250000.0),
        ];
        let groups = thread_medians(&records, "tps");
        assert_eq!(
            groups,
            vec![
                (
                    "leankv".to_string(),
                    vec![(1.0, 18500.0, 0.0), (16.0, 260000.0, 0.0)]
                ),
                ("traditional".to_string(), vec![(16.0, 6000.0, 0.0)]),
            ]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.svg");
        threads(&records, "scaling", "tps", &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("traditional") && svg.contains("worker threads"));
        assert!(threads(&[], "empty", "tps", &path).is_err());
    }

    #[test]
    fn time_series_draw_each_run_with_its_secondary_rate() {
        let dir = tempfile::tempdir().unwrap();
        let record = json!({"series": [
            {"second": 1.0, "tps": 20000.0, "mib_written_per_s": 0.0},
            {"second": 2.0, "tps": 12000.0, "mib_written_per_s": 35.0},
        ]});
        let points = series_points(&record, "tps", "mib_written_per_s");
        assert_eq!(points, vec![(1.0, 20000.0, 0.0), (2.0, 12000.0, 35.0)]);
        let path = dir.path().join("series.svg");
        let lines = [("leankv 2T pool 512 MiB".to_string(), points)];
        time_series(&lines, "tpcc", "tps", "MiB/s written", &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("leankv 2T pool 512 MiB") && svg.contains("MiB/s written"));
        assert!(time_series(&[], "empty", "tps", "MiB/s", &path).is_err());
    }
}
