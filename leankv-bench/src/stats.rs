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
/// the table, the value at the end of the range before (slightly wide, never narrow).
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

/// `items` with their indexes in the order round `round` (from 1) runs them: as listed in odd
/// rounds, reversed in even ones, so that no variant always runs first (right after a load,
/// or after the one before it flushed), whose effect pairing by round could not remove.
pub fn round_order<T: Copy>(items: &[T], round: usize) -> Vec<(usize, T)> {
    let mut ordered: Vec<(usize, T)> = items.iter().copied().enumerate().collect();
    if round.is_multiple_of(2) {
        ordered.reverse();
    }
    ordered
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

/// One measured rate: of `engine` at `setting` (a durability) in round `round` of a run of
/// shape `shape` (threads, pool, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub shape: String,
    pub engine: String,
    pub setting: String,
    pub round: usize,
    pub rate: f64,
}

/// Per shape, each engine at each setting against the same engine at the shape's first
/// setting (what the setting costs) and against the shape's first engine at the same setting
/// (engine against engine), paired by round: the ratio of each round, of the sums, and their
/// geometric mean with its 95% confidence interval. A round missing either side, or with a
/// rate that is not positive, is left out; a second run of the same engine, setting and round
/// (a value listed twice) is ignored. `None` when nothing pairs.
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
        let (Some(first_engine), Some(first_setting)) = (
            runs.first().map(|o| o.engine.as_str()),
            runs.first().map(|o| o.setting.as_str()),
        ) else {
            continue;
        };
        let variants = group_by(runs.iter().copied(), |o| {
            (o.engine.clone(), o.setting.clone())
        });
        let runs_of = |engine: &str, setting: &str| {
            variants
                .iter()
                .find(|((e, s), _)| e == engine && s == setting)
                .map(|(_, runs)| runs.as_slice())
        };
        for ((engine, setting), variant_runs) in &variants {
            let mut baselines = Vec::new();
            if setting != first_setting {
                baselines.push((engine.as_str(), first_setting));
            }
            if engine != first_engine {
                baselines.push((first_engine, setting.as_str()));
            }
            for (base_engine, base_setting) in baselines {
                let Some(base_runs) = runs_of(base_engine, base_setting) else {
                    continue;
                };
                let Some(paired) = Paired::of(&pairs_by_round(base_runs, variant_runs)) else {
                    continue;
                };
                let ratios: Vec<String> = paired.ratios.iter().map(|r| format!("{r:.2}")).collect();
                table.row(vec![
                    shape.clone(),
                    format!("{engine} {setting} / {base_engine} {base_setting}"),
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
    }
    (rows > 0).then_some(table)
}

/// `(baseline, variant)` rates of the rounds both ran with positive rates, each round once.
fn pairs_by_round(baseline: &[&Observation], variant: &[&Observation]) -> Vec<(f64, f64)> {
    let mut pairs = Vec::new();
    let mut rounds_seen = Vec::new();
    for run in variant {
        if rounds_seen.contains(&run.round) {
            continue;
        }
        rounds_seen.push(run.round);
        if let Some(base) = baseline.iter().find(|b| b.round == run.round) {
            if base.rate > 0.0 && run.rate > 0.0 {
                pairs.push((base.rate, run.rate));
            }
        }
    }
    pairs
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
    fn even_rounds_run_in_reverse() {
        assert_eq!(round_order(&['a', 'b'], 1), [(0, 'a'), (1, 'b')]);
        assert_eq!(round_order(&['a', 'b'], 2), [(1, 'b'), (0, 'a')]);
        assert_eq!(round_order(&['a', 'b'], 3), [(0, 'a'), (1, 'b')]);
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
    fn paired_table_compares_settings_within_an_engine_and_engines_within_a_setting() {
        let observation = |shape: &str, engine: &str, setting: &str, round, rate| Observation {
            shape: shape.into(),
            engine: engine.into(),
            setting: setting.into(),
            round,
            rate,
        };
        let observations = [
            observation("1T", "leankv", "off", 1, 100.0),
            observation("1T", "rocksdb", "off", 1, 50.0),
            observation("1T", "leankv", "eventual", 1, 90.0),
            observation("1T", "rocksdb", "eventual", 1, 20.0),
            observation("1T", "leankv", "off", 2, 80.0),
            observation("1T", "rocksdb", "off", 2, 40.0),
            observation("1T", "leankv", "eventual", 2, 60.0),
            observation("1T", "rocksdb", "eventual", 2, 20.0),
            // A round without its baseline is left out, and a run listed twice counts once.
            observation("1T", "leankv", "eventual", 3, 1.0),
            observation("1T", "leankv", "eventual", 2, 1.0),
            observation("2T", "leankv", "off", 1, 200.0),
        ];
        let rendered = paired_table(&observations).unwrap().render();
        let rows: Vec<Vec<&str>> = rendered
            .lines()
            .skip(2)
            .map(|line| line.split_whitespace().collect())
            .collect();
        let expect = |variant: &str, ratios: &str, of_sums: &str| {
            let row = rows
                .iter()
                .find(|row| row[1..6].join(" ") == variant)
                .unwrap_or_else(|| panic!("no row {variant}:\n{rendered}"));
            assert_eq!(row[6], "2", "{rendered}");
            assert_eq!(row[7..9].join(" "), ratios, "{rendered}");
            assert_eq!(row[9], of_sums, "{rendered}");
        };
        // Engine against engine at each setting; each setting against off within each engine,
        // never rocksdb at eventual against leankv at off.
        expect("rocksdb off / leankv off", "0.50 0.50", "0.500");
        expect("leankv eventual / leankv off", "0.90 0.75", "0.833");
        expect("rocksdb eventual / leankv eventual", "0.22 0.33", "0.267");
        expect("rocksdb eventual / rocksdb off", "0.40 0.50", "0.444");
        assert_eq!(rows.len(), 4, "{rendered}");
        assert!(paired_table(&observations[10..]).is_none());
    }
}
