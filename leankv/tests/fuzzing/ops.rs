//! Target `ops`: operation sequences against a `BTreeMap` model on a healthy database: keys
//! and values at the size limits (lengths 0, 1, max - 1, max, small ones; max =
//! `db.max_key_size()` / `max_inline_value_size()`), values just too long for a leaf and large
//! values of a few pages (stored outside the leaves), page sizes 4 KiB to 64 KiB, the smallest pool
//! (`MIN_POOL_FRAMES` frames), two trees; insert, remove, get, contains, range, scan,
//! update_in_place, oversize inputs, flush, reopen, check_integrity. Every result must equal
//! the model's; at the end (and after each reopen) full scans must equal it.
//!
//! Growth: the page file (after flushes) must stay within 3x the largest live data seen (keys,
//! values and an 8-byte slot per entry; a large value counts the whole pages it takes) plus 8
//! pages.

use super::input::Input;
use super::nodes::show;
use super::{finding, lock_dir, CaseResult, Finding, Kind, Summary};
use leankv::testing::{MemoryStorage, Storage};
use leankv::{Db, Error, Options, Tree, MIN_POOL_FRAMES};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

const MAX_OPS: usize = 300;
const TREES: [&str; 2] = ["t", "u"];
/// Growth allowance: this many times the live data...
pub const GROWTH_FACTOR: u64 = 3;
/// ...plus this many pages.
pub const GROWTH_PAGES: u64 = 8;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

struct Case {
    page_size: usize,
    frames: usize,
    background: bool,
    log: VecDeque<String>,
    steps: usize,
}

impl Case {
    fn note(&mut self, op: String) {
        self.steps += 1;
        if self.log.len() == 16 {
            self.log.pop_front();
        }
        self.log.push_back(format!("#{} {op}", self.steps));
    }

    fn context(&self) -> String {
        format!(
            "page size {}, {} frames, background writer {}; last ops: {}",
            self.page_size,
            self.frames,
            self.background,
            self.log.iter().cloned().collect::<Vec<_>>().join("; ")
        )
    }

    fn fail(&self, kind: Kind, what: impl Into<String>) -> Finding {
        finding(kind, format!("{}; {}", what.into(), self.context()))
    }

    fn unexpected(&self, what: &str, error: &Error) -> Finding {
        self.fail(Kind::UnexpectedError, format!("{what}: {error}"))
    }
}

fn describe(key: &[u8]) -> String {
    format!("key[{}]={}", key.len(), show(key, 12))
}

fn gen_key(input: &mut Input<'_>, max: usize, model: &Model) -> Vec<u8> {
    let long = |input: &mut Input<'_>, len: usize| {
        let mut key = vec![input.u8() % 3 + b'a'; len];
        if len >= 2 {
            key[len - 1] = input.u8() % 4;
            key[len - 2] = input.u8() % 2;
        }
        key
    };
    match input.below(10) {
        0 => Vec::new(),
        1 => vec![input.u8() % 4 + b'a'],
        2 => long(input, max - 1),
        3 => long(input, max),
        4 | 5 if !model.is_empty() => {
            let index = input.below(model.len());
            model.keys().nth(index).unwrap().clone()
        }
        6 if !model.is_empty() => {
            let index = input.below(model.len());
            let mut key = model.keys().nth(index).unwrap().clone();
            match input.below(3) {
                0 if key.len() < max => key.push(input.u8() % 4),
                1 => {
                    key.pop();
                }
                _ => {
                    if let Some(last) = key.last_mut() {
                        *last = last.wrapping_add(1);
                    }
                }
            }
            key
        }
        _ => {
            let len = 1 + input.below(16.min(max));
            (0..len).map(|_| input.u8() % 4 + b'a').collect()
        }
    }
}

/// A generated key range and the two keys its ends come from.
struct GenRange {
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    low: Vec<u8>,
    high: Vec<u8>,
}

/// A key range: two generated keys in order, each end included, excluded or open.
fn gen_bounds(input: &mut Input<'_>, max_key: usize, model: &Model) -> GenRange {
    let a = gen_key(input, max_key, model);
    let b = gen_key(input, max_key, model);
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    let start = match input.below(3) {
        0 => Bound::Included(low.clone()),
        1 => Bound::Excluded(low.clone()),
        _ => Bound::Unbounded,
    };
    let end = match input.below(3) {
        0 => Bound::Included(high.clone()),
        1 => Bound::Excluded(high.clone()),
        _ => Bound::Unbounded,
    };
    GenRange {
        start,
        end,
        low,
        high,
    }
}

impl GenRange {
    /// The model's pairs in the range (`BTreeMap::range` panics on the empty
    /// `(Excluded(x), Excluded(x))`).
    fn in_model<'m>(
        &self,
        model: &'m Model,
    ) -> Box<dyn Iterator<Item = (&'m Vec<u8>, &'m Vec<u8>)> + 'm> {
        match (&self.start, &self.end) {
            (Bound::Excluded(x), Bound::Excluded(y)) if x == y => Box::new(std::iter::empty()),
            _ => Box::new(model.range::<Vec<u8>, _>((self.start.clone(), self.end.clone()))),
        }
    }

    /// The range as the case's notes show it: whether each end is excluded, and its key.
    fn describe(&self) -> String {
        format!(
            "{:?} {} .. {:?} {}",
            matches!(self.start, Bound::Excluded(_)),
            describe(&self.low),
            matches!(self.end, Bound::Excluded(_)),
            describe(&self.high)
        )
    }
}

/// A value: mostly at most `max` (the longest a leaf holds) bytes; sometimes just longer, or
/// up to 12 times longer (several pages of their own).
fn gen_value(input: &mut Input<'_>, max: usize, serial: u64) -> Vec<u8> {
    let len = match input.below(10) {
        0 => 0,
        1 => 1,
        2 => max - 1,
        3 => max,
        4 => input.below(max / 4 + 1),
        5 => max + 1,
        6 => max + 1 + input.below(max * 11),
        _ => input.below(64),
    };
    let mut value: Vec<u8> = (0..len).map(|i| (serial as usize * 7 + i) as u8).collect();
    let tag = serial.to_le_bytes();
    let n = len.min(8);
    value[..n].copy_from_slice(&tag[..n]);
    value
}

fn live_bytes(models: &[Model], page_size: usize) -> u64 {
    // A value longer than a leaf holds takes whole pages of its own (24 bytes of each for the
    // page header).
    let stored = |len: usize| match len {
        len if len > page_size / 4 => len.div_ceil(page_size - 24) * page_size,
        len => len,
    };
    models
        .iter()
        .flat_map(|m| m.iter())
        .map(|(k, v)| (k.len() + stored(v.len()) + 8) as u64)
        .sum()
}

fn open(
    dir: &std::path::Path,
    options: &Options,
    storage: &Arc<MemoryStorage>,
) -> leankv::Result<(Db, Vec<Tree>)> {
    let db = Db::open_with_storage(dir, options.clone(), storage.clone())?;
    let trees = TREES
        .iter()
        .map(|name| db.open_tree(name))
        .collect::<leankv::Result<Vec<_>>>()?;
    Ok((db, trees))
}

fn compare_all(case: &Case, trees: &[Tree], models: &[Model], when: &str) -> Result<(), Finding> {
    for (index, tree) in trees.iter().enumerate() {
        let mut got = Vec::new();
        for item in tree.iter() {
            let pair = item.map_err(|e| {
                case.unexpected(&format!("{when}: full scan of {:?}", TREES[index]), &e)
            })?;
            got.push(pair);
            if got.len() > models[index].len() + 1 {
                break;
            }
        }
        let len = tree
            .len()
            .map_err(|e| case.unexpected(&format!("{when}: len of {:?}", TREES[index]), &e))?;
        if len != models[index].len() as u64 {
            return Err(case.fail(
                Kind::Mismatch,
                format!(
                    "{when}: len of {:?} is {len}, the model has {}",
                    TREES[index],
                    models[index].len()
                ),
            ));
        }
        let expected: Vec<(Vec<u8>, Vec<u8>)> = models[index]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if got != expected {
            let first = got.iter().zip(&expected).position(|(a, b)| a != b);
            return Err(case.fail(
                Kind::Mismatch,
                format!(
                    "{when}: full scan of {:?} returned {} pairs, the model has {} (first difference at {:?})",
                    TREES[index],
                    got.len(),
                    expected.len(),
                    first
                ),
            ));
        }
    }
    Ok(())
}

pub fn run(data: &[u8]) -> CaseResult {
    let mut input = Input::new(data);
    let mut summary = Summary::default();
    let page_size = 4096usize << input.below(5);
    let frames = MIN_POOL_FRAMES
        + if input.chance(1, 4) {
            input.below(64)
        } else {
            0
        };
    let background = input.chance(1, 4);
    let mut case = Case {
        page_size,
        frames,
        background,
        log: VecDeque::new(),
        steps: 0,
    };
    let options = Options::default()
        .page_size(page_size)
        .pool_size(frames * (page_size + 512))
        .background_writer(background);
    let storage = Arc::new(MemoryStorage::new());
    let dir = lock_dir();
    let (mut db, mut trees) =
        open(dir.path(), &options, &storage).map_err(|e| case.unexpected("open", &e))?;
    summary.opened = true;
    let (max_key, max_value) = (db.max_key_size(), db.max_inline_value_size());
    if (max_key, max_value, db.max_value_size())
        != (page_size / 16, page_size / 4, leankv::MAX_VALUE_SIZE)
    {
        return Err(case.fail(
            Kind::Mismatch,
            format!("limits {max_key}/{max_value} for page size {page_size}"),
        ));
    }
    let live_bytes = |models: &[Model]| live_bytes(models, page_size);
    let mut models: Vec<Model> = vec![Model::new(); TREES.len()];
    let mut peak_live = 0u64;
    let mut serial = 0u64;
    let growth = |case: &Case, peak_live: u64, when: &str| -> Result<(), Finding> {
        let file = storage.len().unwrap();
        let limit = GROWTH_FACTOR * peak_live + GROWTH_PAGES * page_size as u64;
        if file > limit {
            return Err(case.fail(
                Kind::Growth,
                format!(
                    "{when}: page file {file} bytes ({} pages) for at most {peak_live} live bytes \
                     (limit {limit})",
                    file / page_size as u64
                ),
            ));
        }
        Ok(())
    };
    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        summary.calls += 1;
        let t = if input.chance(1, 4) { 1 } else { 0 };
        let (tree, model) = (&trees[t], &mut models[t]);
        let name = TREES[t];
        let op = input.below(36);
        match op {
            0..=11 | 29..=31 => {
                let key = if op >= 29 {
                    let mut key = vec![b'z'; max_key];
                    key[max_key - 1] = input.u8() % 8;
                    key
                } else {
                    gen_key(&mut input, max_key, model)
                };
                serial += 1;
                let value = gen_value(&mut input, max_value, serial);
                case.note(format!(
                    "{name}.insert({}, value[{}])",
                    describe(&key),
                    value.len()
                ));
                tree.insert(&key, &value)
                    .map_err(|e| case.unexpected("insert", &e))?;
                model.insert(key, value);
            }
            12..=15 => {
                let key = gen_key(&mut input, max_key, model);
                case.note(format!("{name}.remove({})", describe(&key)));
                let removed = tree
                    .remove(&key)
                    .map_err(|e| case.unexpected("remove", &e))?;
                if removed != model.remove(&key).is_some() {
                    return Err(case.fail(Kind::Mismatch, format!("remove returned {removed}")));
                }
            }
            16..=19 => {
                let key = gen_key(&mut input, max_key, model);
                case.note(format!("{name}.get({})", describe(&key)));
                let got = tree.get(&key).map_err(|e| case.unexpected("get", &e))?;
                if got.as_ref() != model.get(&key) {
                    return Err(case.fail(
                        Kind::Mismatch,
                        format!(
                            "get returned {:?}, the model has {:?}",
                            got.map(|v| v.len()),
                            model.get(&key).map(|v| v.len())
                        ),
                    ));
                }
            }
            34 => {
                let range = gen_bounds(&mut input, max_key, model);
                let expected: Vec<Vec<u8>> =
                    range.in_model(model).map(|(key, _)| key.clone()).collect();
                case.note(format!("{name}.remove_range({})", range.describe()));
                let removed = tree
                    .remove_range((range.start, range.end))
                    .map_err(|e| case.unexpected("remove_range", &e))?;
                if removed != expected.len() as u64 {
                    return Err(case.fail(
                        Kind::Mismatch,
                        format!(
                            "remove_range removed {removed}, the model {}",
                            expected.len()
                        ),
                    ));
                }
                for key in expected {
                    model.remove(&key);
                }
            }
            20 | 21 | 28 => {
                let range = gen_bounds(&mut input, max_key, model);
                let expected: Vec<(Vec<u8>, Vec<u8>)> = range
                    .in_model(model)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut got = Vec::new();
                let visitor = op == 28;
                case.note(format!(
                    "{name}.{}({})",
                    if visitor { "scan" } else { "range" },
                    range.describe()
                ));
                let (start, end) = (range.start, range.end);
                if visitor {
                    let stop = input.below(expected.len() + 2);
                    tree.scan((start, end), |k, v| {
                        got.push((k.to_vec(), v.to_vec()));
                        got.len() != stop && got.len() <= expected.len()
                    })
                    .map_err(|e| case.unexpected("scan", &e))?;
                    let want = if stop > 0 {
                        stop.min(expected.len())
                    } else {
                        expected.len()
                    };
                    if got.len() != want || got[..] != expected[..want] {
                        return Err(case.fail(
                            Kind::Mismatch,
                            format!(
                                "scan returned {} pairs, the model {} (stop after {stop})",
                                got.len(),
                                expected.len()
                            ),
                        ));
                    }
                } else {
                    // A third of the ranges are read backwards.
                    let backward = input.chance(1, 3);
                    let range = tree.range((start, end));
                    let items: Box<dyn Iterator<Item = _>> = if backward {
                        Box::new(range.rev())
                    } else {
                        Box::new(range)
                    };
                    for item in items {
                        got.push(item.map_err(|e| case.unexpected("range", &e))?);
                        if got.len() > expected.len() {
                            break;
                        }
                    }
                    if backward {
                        got.reverse();
                    }
                    if got != expected {
                        return Err(case.fail(
                            Kind::Mismatch,
                            format!(
                                "range returned {} pairs, the model {} (backward: {backward})",
                                got.len(),
                                expected.len()
                            ),
                        ));
                    }
                }
            }
            22 => {
                // Oversize input: rejected, nothing changes. (Values beyond the limit, 4 GiB,
                // are tested in `tests/errors.rs`: fuzzers cap allocations well below it.)
                let key = vec![b'q'; max_key + 1];
                let value = vec![b'o'; 1];
                case.note(format!(
                    "{name}.insert({}, value[{}]) oversize",
                    describe(&key),
                    value.len()
                ));
                match tree.insert(&key, &value) {
                    Err(Error::KeyTooLarge { len, max })
                        if (len, max) == (max_key + 1, max_key) => {}
                    other => {
                        return Err(case.fail(
                            Kind::Mismatch,
                            format!("oversize insert returned {other:?}"),
                        ));
                    }
                }
                let got = tree.get(&key).map_err(|e| case.unexpected("get", &e))?;
                if got.as_ref() != model.get(&key) {
                    return Err(case.fail(Kind::Mismatch, "a rejected insert changed the value"));
                }
            }
            23 => {
                let key = gen_key(&mut input, max_key, model);
                serial += 1;
                let fill = serial as u8;
                let mut old = None;
                case.note(format!("{name}.update_in_place({})", describe(&key)));
                let result = tree.update_in_place(&key, |bytes| {
                    old = Some(bytes.to_vec());
                    bytes.fill(fill);
                });
                let large = model.get(&key).is_some_and(|value| value.len() > max_value);
                let result = match result {
                    // A large value is not rewritten in place.
                    Err(Error::ValueTooLarge { len, max })
                        if large && (len, max) == (model[&key].len(), max_value) =>
                    {
                        continue;
                    }
                    result => result.map_err(|e| case.unexpected("update_in_place", &e))?,
                };
                match (result, model.get_mut(&key)) {
                    (Some(()), Some(value)) if old.as_ref() == Some(value) => value.fill(fill),
                    (None, None) if old.is_none() => {}
                    (result, value) => {
                        return Err(case.fail(
                            Kind::Mismatch,
                            format!(
                                "update_in_place returned {result:?} and saw {:?}, the model has {:?}",
                                old.map(|v| v.len()),
                                value.map(|v| v.len())
                            ),
                        ));
                    }
                }
            }
            32 => {
                // Expect the current value or another one; put or remove.
                let key = gen_key(&mut input, max_key, model);
                let current = model.get(&key).cloned();
                let expected = match input.below(3) {
                    0 => current.clone(),
                    1 => None,
                    _ => Some(vec![input.u8()]),
                };
                serial += 1;
                let new = input
                    .chance(3, 4)
                    .then(|| gen_value(&mut input, max_value, serial));
                case.note(format!(
                    "{name}.compare_and_swap({}, {:?}, {:?})",
                    describe(&key),
                    expected.as_ref().map(Vec::len),
                    new.as_ref().map(Vec::len)
                ));
                let outcome = tree
                    .compare_and_swap(&key, expected.as_deref(), new.as_deref())
                    .map_err(|e| case.unexpected("compare_and_swap", &e))?;
                match (&outcome, expected == current) {
                    (Ok(()), true) => {
                        match new {
                            Some(value) => model.insert(key, value),
                            None => model.remove(&key),
                        };
                    }
                    (Err(error), false) if error.current == current && error.proposed == new => {}
                    _ => {
                        return Err(case.fail(
                            Kind::Mismatch,
                            format!(
                                "compare_and_swap returned {:?}, the model has {:?}",
                                outcome.map_err(|error| error.current.map(|v| v.len())),
                                current.map(|v| v.len())
                            ),
                        ));
                    }
                }
            }
            33 => {
                // Grow, shrink or remove the value (absent: make one up).
                let key = gen_key(&mut input, max_key, model);
                serial += 1;
                let made = gen_value(&mut input, max_value, serial);
                let how = input.below(4);
                let rewrite = |old: Option<&[u8]>| match (how, old) {
                    (0, _) => None,
                    (1, Some(old)) => Some(old[..old.len() / 2].to_vec()),
                    (_, Some(old)) => {
                        let mut value = [old, &made[..]].concat();
                        value.truncate(max_value * 12);
                        Some(value)
                    }
                    (_, None) => Some(made.clone()),
                };
                case.note(format!("{name}.fetch_update({}, {how})", describe(&key)));
                let previous = tree
                    .fetch_update(&key, rewrite)
                    .map_err(|e| case.unexpected("fetch_update", &e))?;
                if previous.as_ref() != model.get(&key) {
                    return Err(case.fail(Kind::Mismatch, "fetch_update saw another value"));
                }
                match rewrite(previous.as_deref()) {
                    Some(value) => model.insert(key, value),
                    None => model.remove(&key),
                };
            }
            35 => {
                case.note(format!("drop_tree({name}), open_tree({name})"));
                let existed = db
                    .drop_tree(name)
                    .map_err(|e| case.unexpected("drop_tree", &e))?;
                if !existed || !matches!(tree.get(b"k"), Err(leankv::Error::TreeDropped)) {
                    return Err(case.fail(
                        Kind::Mismatch,
                        format!("drop_tree returned {existed}, or the handle still works"),
                    ));
                }
                model.clear();
                trees[t] = db
                    .open_tree(name)
                    .map_err(|e| case.unexpected("open_tree", &e))?;
            }
            24 => {
                case.note("flush".into());
                db.flush().map_err(|e| case.unexpected("flush", &e))?;
                growth(&case, peak_live, "after flush")?;
            }
            25 => {
                case.note("reopen".into());
                drop(trees);
                db.close().map_err(|e| case.unexpected("close", &e))?;
                (db, trees) = open(dir.path(), &options, &storage)
                    .map_err(|e| case.unexpected("reopen", &e))?;
                growth(&case, peak_live, "after reopen")?;
                compare_all(&case, &trees, &models, "after reopen")?;
            }
            26 => {
                case.note("check_integrity".into());
                let report = db
                    .check_integrity()
                    .map_err(|e| case.unexpected("check_integrity", &e))?;
                if !report.is_ok() {
                    return Err(case.fail(Kind::Integrity, report.to_string()));
                }
            }
            _ => {
                let key = gen_key(&mut input, max_key, model);
                case.note(format!("{name}.contains_key({})", describe(&key)));
                let got = tree
                    .contains_key(&key)
                    .map_err(|e| case.unexpected("contains_key", &e))?;
                if got != model.contains_key(&key) {
                    return Err(case.fail(Kind::Mismatch, format!("contains_key returned {got}")));
                }
            }
        }
        peak_live = peak_live.max(live_bytes(&models));
    }
    case.note("end: flush, full scans, check_integrity".into());
    db.flush().map_err(|e| case.unexpected("flush", &e))?;
    growth(&case, peak_live, "at the end")?;
    compare_all(&case, &trees, &models, "at the end")?;
    let report = db
        .check_integrity()
        .map_err(|e| case.unexpected("check_integrity", &e))?;
    if !report.is_ok() {
        return Err(case.fail(Kind::Integrity, report.to_string()));
    }
    let names = db
        .tree_names()
        .map_err(|e| case.unexpected("tree_names", &e))?;
    if names != TREES {
        return Err(case.fail(Kind::Mismatch, format!("tree_names returned {names:?}")));
    }
    drop(trees);
    db.close().map_err(|e| case.unexpected("close", &e))?;
    summary.pairs = models.iter().map(|m| m.len() as u64).sum();
    Ok(summary)
}
