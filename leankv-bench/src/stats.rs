//! Summaries over repeated runs: median and spread, grouping runs of the same shape, and paired
//! ratios: each variant against a baseline round by round, with a confidence interval, so that
//! the machine's drift between rounds (a tenth within minutes on shared hosts) cancels out and
//! a difference of a few percent is either shown or shown to be noise.

use crate::report::Table;

/// The median, lowest and highest of a set of measurements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Spread {
    /// The spread of `values` (all zeros when there are none).
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let Some((&min, &max)) = sorted.first().zip(sorted.last()) else {
            return Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
                runs: 0,
            };
        };
        let len = sorted.len();
        Spread {
            median: (sorted[(len - 1) / 2] + sorted[len / 2]) / 2.0,
            min,
            max,
            runs: len,
        }
    }

    /// (max − min) / median, in percent.
    pub fn range_percent(&self) -> f64 {
        if self.median > 0.0 {
            (self.max - self.min) / self.median * 100.0
        } else {
            0.0
        }
    }
}

/// `items` grouped by `key`, groups and their members in order of first appearance.
pub fn group_by<T, K: PartialEq>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> Vec<(K, Vec<T>)> {
    let mut groups: Vec<(K, Vec<T>)> = Vec::new();
    for item in items {
        let k = key(&item);
        match groups.iter_mut().find(|(other, _)| *other == k) {
            Some((_, members)) => members.push(item),
            None => groups.push((k, vec![item])),
        }
    }
    groups
}

/// Two-sided 95% quantiles of Student's t for 1 to 30 degrees of freedom. A table rather than
/// a statistics crate: one quantile does not justify their dependencies' compile time.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The 97.5% quantile of Student's t with `degrees` degrees of freedom (at least 1); beyond
/// the table, the value at the start of each range (slightly wide, never narrow).
fn t_975(degrees: usize) -> f64 {
    debug_assert!(degrees >= 1);
    match degrees {
        0 => f64::INFINITY,
        1..=30 => T_975[degrees - 1],
        31..=60 => T_975[29],
        61..=120 => 2.000,
        _ => 1.980,
    }
}

/// A variant's rates against a baseline's, paired by round.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    /// Variant ÷ baseline in each round.
    pub ratios: Vec<f64>,
    /// The variant's rates summed ÷ the baseline's summed.
    pub ratio_of_sums: f64,
    /// The geometric mean of the ratios.
    pub mean: f64,
    /// The 95% confidence interval of `mean` (Student's t on the ratios' logarithms); `None`
    /// with a single round.
    pub interval: Option<(f64, f64)>,
}

impl Paired {
    /// The comparison of `(baseline, variant)` rates, one pair per round; `None` without a
    /// pair or with a rate that is not positive (no ratio to take).
    pub fn of(pairs: &[(f64, f64)]) -> Option<Paired> {
        if pairs.is_empty() || pairs.iter().any(|&(b, v)| !(b > 0.0 && v > 0.0)) {
            return None;
        }
        let ratios: Vec<f64> = pairs.iter().map(|&(b, v)| v / b).collect();
        let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
        let n = logs.len() as f64;
        let log_mean = logs.iter().sum::<f64>() / n;
        let interval = (logs.len() > 1).then(|| {
            let variance = logs.iter().map(|l| (l - log_mean).powi(2)).sum::<f64>() / (n - 1.0);
            let half = t_975(logs.len() - 1) * (variance / n).sqrt();
            ((log_mean - half).exp(), (log_mean + half).exp())
        });
        let sum = |pick: fn(&(f64, f64)) -> f64| pairs.iter().map(pick).sum::<f64>();
        Some(Paired {
            ratios,
            ratio_of_sums: sum(|p| p.1) / sum(|p| p.0),
            mean: log_mean.exp(),
            interval,
        })
    }
}

/// One measured rate: of `variant` (an engine, a durability) in round `round` of a run of
/// shape `shape` (threads, pool, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub shape: String,
    pub variant: String,
    pub round: usize,
    pub rate: f64,
}

/// Per shape, every variant against the shape's first (its baseline), paired by round: the
/// ratio of each round, of the sums, and their geometric mean with its 95% confidence
/// interval. `None` when no shape ran two variants.
pub fn paired_table(observations: &[Observation]) -> Option<Table> {
    let mut table = Table::new(&[
        "shape",
        "variant / baseline",
        "rounds",
        "ratio per round",
        "sum / sum",
        "geo. mean",
        "95% interval",
    ]);
    let mut rows = 0;
    for (shape, runs) in group_by(observations, |o| o.shape.clone()) {
        let variants = group_by(runs, |o| o.variant.clone());
        let Some(((baseline, base_runs), others)) = variants.split_first() else {
            continue;
        };
        for (variant, runs) in others {
            let pairs: Vec<(f64, f64)> = runs
                .iter()
                .filter_map(|run| {
                    let base = base_runs.iter().find(|b| b.round == run.round)?;
                    Some((base.rate, run.rate))
                })
                .collect();
            let Some(paired) = Paired::of(&pairs) else {
                continue;
            };
            let ratios: Vec<String> = paired.ratios.iter().map(|r| format!("{r:.2}")).collect();
            table.row(vec![
                shape.clone(),
                format!("{variant} / {baseline}"),
                paired.ratios.len().to_string(),
                ratios.join(" "),
                format!("{:.3}", paired.ratio_of_sums),
                format!("{:.3}", paired.mean),
                paired
                    .interval
                    .map_or("-".into(), |(low, high)| format!("{low:.3}-{high:.3}")),
            ]);
            rows += 1;
        }
    }
    (rows > 0).then_some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_the_middle_and_the_extremes() {
        let odd = Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!((odd.median, odd.min, odd.max, odd.runs), (2.0, 1.0, 3.0, 3));
        let even = Spread::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!(even.median, 2.5);
        assert_eq!(Spread::of(&[]).runs, 0);
        assert!((odd.range_percent() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn groups_keep_the_order_of_first_appearance() {
        let groups = group_by([("a", 1), ("b", 2), ("a", 3)], |(name, _)| *name);
        assert_eq!(
            groups,
            vec![("a", vec![("a", 1), ("a", 3)]), ("b", vec![("b", 2)])]
        );
    }

    #[test]
    fn paired_ratios_cancel_a_drift_shared_by_both() {
        // The machine slows by half in round 2; the variant stays 0.8x the baseline.
        let paired = Paired::of(&[(100.0, 80.0), (50.0, 40.0), (100.0, 80.0)]).unwrap();
        assert_eq!(paired.ratios.len(), 3);
        assert!((paired.mean - 0.8).abs() < 1e-12);
        assert!((paired.ratio_of_sums - 0.8).abs() < 1e-12);
        let (low, high) = paired.interval.unwrap();
        assert!((low - 0.8).abs() < 1e-9 && (high - 0.8).abs() < 1e-9);
    }

    #[test]
    fn paired_interval_widens_with_spread_and_narrows_with_rounds() {
        let ratios = |r: &[f64]| r.iter().map(|&r| (100.0, 100.0 * r)).collect::<Vec<_>>();
        let few = Paired::of(&ratios(&[0.8, 0.9])).unwrap();
        let (low, high) = few.interval.unwrap();
        // Two rounds: t = 12.7 on a standard error of ln(0.9/0.8)/2 each side.
        let half = 12.706 * (0.9f64.ln() - 0.8f64.ln()) / 2.0;
        assert!((low.ln() - (few.mean.ln() - half)).abs() < 1e-9);
        assert!((high.ln() - (few.mean.ln() + half)).abs() < 1e-9);
        assert!(low < 0.8 && high > 0.9);
        let many = Paired::of(&ratios(&[0.8, 0.9, 0.8, 0.9, 0.8, 0.9, 0.8, 0.9])).unwrap();
        let (many_low, many_high) = many.interval.unwrap();
        assert!(many_low > low && many_high < high && many_low < 0.85 && many_high > 0.84);
        assert_eq!(Paired::of(&ratios(&[0.7])).unwrap().interval, None);
        assert_eq!(Paired::of(&[]), None);
        assert_eq!(Paired::of(&[(0.0, 1.0)]), None);
    }

    #[test]
    fn t_quantiles_fall_towards_the_normal_one() {
        assert_eq!(t_975(1), 12.706);
        assert_eq!(t_975(30), 2.042);
        assert!(t_975(45) >= 2.014 && t_975(100) >= 1.984 && t_975(1000) > 1.96);
        for degrees in 1..200 {
            assert!(t_975(degrees + 1) <= t_975(degrees));
        }
    }

    #[test]
    fn paired_table_compares_each_variant_with_the_first_of_its_shape() {
        let observation = |shape: &str, variant: &str, round, rate| Observation {
            shape: shape.into(),
            variant: variant.into(),
            round,
            rate,
        };
        let observations = [
            observation("1 thread", "off", 1, 100.0),
            observation("1 thread", "eventual", 1, 90.0),
            observation("1 thread", "off", 2, 80.0),
            observation("1 thread", "eventual", 2, 60.0),
            // A round without its baseline is left out of the pairs.
            observation("1 thread", "eventual", 3, 1.0),
            observation("2 threads", "off", 1, 200.0),
        ];
        let rendered = paired_table(&observations).unwrap().render();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), 3, "{rendered}");
        assert!(lines[2].starts_with("1 thread"), "{rendered}");
        assert!(lines[2].contains("eventual / off"), "{rendered}");
        assert!(lines[2].contains("0.90 0.75"), "{rendered}");
        assert!(lines[2].contains("0.833"), "{rendered}"); // 150 / 180
        assert!(paired_table(&observations[5..]).is_none());
    }
}
