//! Reading an opened database back after a fuzz case, every pair checked by the oracle: shared
//! by the targets that open damaged files (`open_file`, `log`).

use super::input::Input;
use super::{finding, Finding, Kind, Oracle, Summary};
use leankv::Db;
use std::ops::Bound;

/// How much a case reads back.
#[derive(Clone, Copy)]
pub struct ReadLimits {
    /// Trees opened and read, at most.
    pub trees: usize,
    /// Keys of each tree's scan looked up again.
    pub keys_from_scan: usize,
    /// Keys the input picks and looks up in each tree.
    pub picked_keys: usize,
}

/// Reads the trees the catalog names (at most `limits.trees`), checking every pair and name:
/// a full scan of each, lookups of `limits.keys_from_scan` keys the scan returned and
/// `limits.picked_keys` keys the input picks from `keys`, a range between two of them, and
/// `check_integrity`.
pub fn read_everything(
    db: &Db,
    oracle: &Oracle,
    input: &mut Input<'_>,
    keys: &[Vec<u8>],
    limits: ReadLimits,
    summary: &mut Summary,
) -> Result<(), Finding> {
    summary.calls += 1;
    let names = match db.tree_names() {
        Ok(names) => names,
        Err(error) => {
            summary.error(&error);
            Vec::new()
        }
    };
    for name in &names {
        if !name.contains('\u{FFFD}') && !oracle.global.has_key(name.as_bytes()) {
            return Err(finding(
                Kind::Invented,
                format!(
                    "tree_names returned {name:?}, a key never written; {}",
                    oracle.context
                ),
            ));
        }
    }
    for name in names.iter().take(limits.trees) {
        summary.calls += 1;
        let tree = match db.open_tree(name) {
            Ok(tree) => tree,
            Err(error) => {
                summary.error(&error);
                continue;
            }
        };
        summary.calls += 1;
        let what = format!("tree {name:?} iter");
        let pairs = oracle.check_scan(
            &what,
            tree.iter(),
            Bound::Unbounded,
            Bound::Unbounded,
            summary,
        )?;
        let mut probes: Vec<Vec<u8>> = pairs
            .iter()
            .take(limits.keys_from_scan)
            .map(|(k, _)| k.clone())
            .collect();
        for _ in 0..limits.picked_keys {
            if let Some(key) = input.pick(keys) {
                probes.push(key.clone());
            }
        }
        for key in &probes {
            summary.calls += 1;
            match tree.get(key) {
                Ok(Some(value)) => {
                    summary.pairs += 1;
                    oracle.check_pair(&format!("tree {name:?} get"), key, &value)?;
                }
                Ok(None) => {}
                Err(error) => summary.error(&error),
            }
        }
        if probes.len() >= 2 {
            let (a, b) = (&probes[0], &probes[probes.len() - 1]);
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            summary.calls += 1;
            oracle.check_scan(
                &format!("tree {name:?} range"),
                tree.range(low.clone()..=high.clone()),
                Bound::Included(low),
                Bound::Included(high),
                summary,
            )?;
        }
    }
    summary.calls += 1;
    match db.check_integrity() {
        Ok(report) if report.is_ok() => summary.tag("integrity ok"),
        Ok(_) => summary.tag("integrity problems"),
        Err(error) => summary.error(&error),
    }
    Ok(())
}
