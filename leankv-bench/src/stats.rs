//! Summaries over repeated runs: median and spread, and grouping runs of the same shape.

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
}
