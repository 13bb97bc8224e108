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

mod bars;
mod lines;
mod style;

pub use bars::engines;
pub use lines::{lines, scan_series, threads, tpcc_series};

#[cfg(test)]
mod tests {
    use super::lines::{series_points, thread_medians, time_series};
    use super::style::text;
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
