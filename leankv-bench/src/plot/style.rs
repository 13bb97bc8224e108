//! What every plot shares: the canvas size, the palette and reading fields of records.

use plotters::prelude::*;
use serde_json::Value;

pub(super) const SIZE: (u32, u32) = (900, 540);

pub(super) fn series_color(index: usize) -> RGBColor {
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

pub(super) fn number(record: &Value, field: &str) -> f64 {
    record[field].as_f64().unwrap_or(0.0)
}

pub(super) fn text(record: &Value, field: &str) -> String {
    match &record[field] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn plot_error<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow::anyhow!("plotting: {error:?}")
}
