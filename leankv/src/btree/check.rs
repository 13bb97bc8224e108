//! The integrity check: walks every tree as it is on disk and reports what is wrong.
//!
//! It reads pages straight from storage (the caller flushes first), so it sees what a reopen
//! would see. Per page: checksum, page id and type, node structure (`Node::check`), level one
//! below the parent's, fence keys equal to the separators the parent routes by, and exactly one
//! reference to it across all trees and the free list. Pages of large values are claimed by
//! the tree whose leaf references them and checked too (checksum, page id, type, value id).
//! Pages referenced by nothing are reported as leaked. The walk is bounded by the page count,
//! so a corrupt cycle ends.

use super::node::Node;
use crate::blob::BlobRef;
use crate::buffer::{PageView, Swip, SwipTarget};
use crate::io::page::{self as page_format, PageType};
use crate::io::{AlignedBuf, Storage};
use std::collections::HashMap;

/// What `Db::check_integrity` found.
#[derive(Debug, Default, Clone)]
pub struct IntegrityReport {
    /// Trees walked (the catalog included).
    pub trees: usize,
    /// Pages visited.
    pub pages: u64,
    /// Key-value pairs found in leaves (catalog entries included).
    pub entries: u64,
    /// One line per problem; empty when the database is sound.
    pub problems: Vec<String>,
    /// How much room each tree walked takes, in the order walked (the catalog first).
    pub spaces: Vec<TreeSpace>,
}

/// How much room one tree takes on disk, as the integrity check found it: what `leankv stat
/// --pages` prints. A leaf's room not in use is what deletions and splits left free; a tree
/// loaded in key order fills its leaves nearly to the page size, one grown by random inserts
/// to about 70%.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TreeSpace {
    /// The tree's name (`<catalog>` for the catalog).
    pub name: String,
    /// Levels from the root to the leaves: 1 when the root is a leaf.
    pub height: u16,
    /// Inner nodes' pages.
    pub inner_pages: u64,
    /// Leaves' pages.
    pub leaf_pages: u64,
    /// Pages holding the bytes of large values (stored outside the leaves).
    pub large_value_pages: u64,
    /// Key-value pairs in the leaves.
    pub entries: u64,
    /// Bytes the leaves hold in use (headers, slots, fence keys, keys, inline values) out of
    /// `leaf_pages` times the page size.
    pub leaf_bytes_used: u64,
    /// `leaf_pages` times the page size.
    pub leaf_bytes: u64,
}

impl TreeSpace {
    /// Pages the tree takes in all.
    pub fn pages(&self) -> u64 {
        self.inner_pages + self.leaf_pages + self.large_value_pages
    }

    /// The leaves' bytes in use over their size (0.0 for a tree without leaves).
    pub fn leaf_fill(&self) -> f64 {
        if self.leaf_bytes == 0 {
            0.0
        } else {
            self.leaf_bytes_used as f64 / self.leaf_bytes as f64
        }
    }
}

impl IntegrityReport {
    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl std::fmt::Display for IntegrityReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} trees, {} pages, {} entries: ",
            self.trees, self.pages, self.entries
        )?;
        if self.is_ok() {
            return write!(f, "no problems");
        }
        writeln!(f, "{} problem(s)", self.problems.len())?;
        for problem in &self.problems {
            writeln!(f, "  {problem}")?;
        }
        Ok(())
    }
}

/// Who refers to a page.
#[derive(Clone)]
enum Owner {
    Tree(String),
    FreeList,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Tree(name) => write!(f, "tree {name:?}"),
            Owner::FreeList => f.write_str("the free list"),
        }
    }
}

pub(crate) struct Checker<'a> {
    storage: &'a dyn Storage,
    page_size: usize,
    page_count: u64,
    owners: HashMap<u64, Owner>,
    pub(crate) report: IntegrityReport,
}

struct Visit {
    page_id: u64,
    level: Option<u16>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(storage: &'a dyn Storage, page_size: usize, page_count: u64) -> Self {
        Checker {
            storage,
            page_size,
            page_count,
            owners: HashMap::new(),
            report: IntegrityReport::default(),
        }
    }

    fn claim(&mut self, page_id: u64, owner: Owner) -> bool {
        if page_id == 0 || page_id >= self.page_count {
            self.report.problems.push(format!(
                "{owner} refers to page {page_id}, outside 1..{}",
                self.page_count
            ));
            return false;
        }
        if let Some(previous) = self.owners.insert(page_id, owner.clone()) {
            self.report.problems.push(format!(
                "page {page_id} is referenced by both {previous} and {owner}"
            ));
            return false;
        }
        true
    }

    /// Records the free pages (the free-list chain's own pages included).
    pub(crate) fn free_pages(&mut self, free: &[u64]) {
        for &page_id in free {
            self.claim(page_id, Owner::FreeList);
        }
    }

    /// Walks the tree `name` rooted at `root`.
    pub(crate) fn tree(&mut self, name: &str, root: u64) {
        self.report.trees += 1;
        let mut space = TreeSpace {
            name: name.to_string(),
            ..TreeSpace::default()
        };
        self.walk(name, root, &mut space);
        self.report.spaces.push(space);
    }

    /// Walks the tree `name` rooted at `root`, counting its room into `space`.
    fn walk(&mut self, name: &str, root: u64, space: &mut TreeSpace) {
        let owner = Owner::Tree(name.to_string());
        if !self.claim(root, owner.clone()) {
            return;
        }
        let mut image = AlignedBuf::new(self.page_size);
        let mut stack = vec![Visit {
            page_id: root,
            level: None,
            lower: None,
            upper: None,
        }];
        while let Some(visit) = stack.pop() {
            if self.report.pages > self.page_count {
                self.report
                    .problems
                    .push(format!("tree {name:?}: more pages than the file holds"));
                return;
            }
            self.report.pages += 1;
            let page_id = visit.page_id;
            let problem = |what: String| format!("tree {name:?}, page {page_id}: {what}");
            match self.read(&mut image, page_id) {
                Ok(PageType::BTreeLeaf | PageType::BTreeInner) => {}
                Ok(other) => {
                    self.report
                        .problems
                        .push(problem(format!("is a {other:?} page, not a B-tree node")));
                    continue;
                }
                Err(reason) => {
                    self.report.problems.push(problem(reason));
                    continue;
                }
            }
            let node = Node::new(PageView::from_slice(&image));
            if let Err(reason) = node.check_on_disk() {
                self.report.problems.push(problem(reason));
                continue;
            }
            if let Some(level) = visit.level {
                if node.level() != level {
                    self.report.problems.push(problem(format!(
                        "level {} where the parent implies {level}",
                        node.level()
                    )));
                    continue;
                }
            }
            if node.lower_fence() != visit.lower.as_deref()
                || node.upper_fence() != visit.upper.as_deref()
            {
                self.report.problems.push(problem(
                    "fence keys differ from the parent's separators".into(),
                ));
            }
            let count = node.count();
            if visit.level.is_none() {
                space.height = node.level() + 1;
            }
            if node.is_leaf() {
                self.report.entries += count as u64;
                space.entries += count as u64;
                space.leaf_pages += 1;
                space.leaf_bytes += self.page_size as u64;
                space.leaf_bytes_used += node.used_space() as u64;
                for index in (0..count).filter(|&index| node.is_blob(index)) {
                    // `check_on_disk` decoded it already.
                    if let Ok(blob) = BlobRef::decode(node.value(index), self.page_size) {
                        space.large_value_pages += self.large_value(name, page_id, &blob);
                    }
                }
                continue;
            }
            space.inner_pages += 1;
            for index in 0..=count {
                let lower = if index == 0 {
                    visit.lower.clone()
                } else {
                    Some(node.key(index - 1).to_vec())
                };
                let upper = if index == count {
                    visit.upper.clone()
                } else {
                    Some(node.key(index).to_vec())
                };
                match Swip::decode(node.child_word(index), u32::MAX) {
                    Some(SwipTarget::Page(child)) => {
                        if self.claim(child, owner.clone()) {
                            stack.push(Visit {
                                page_id: child,
                                level: Some(node.level() - 1),
                                lower,
                                upper,
                            });
                        }
                    }
                    _ => self
                        .report
                        .problems
                        .push(problem(format!("child {index} is not a page id on disk"))),
                }
            }
        }
    }

    /// Reads page `page_id` into `image` and checks its header; returns its type, or what is
    /// wrong.
    fn read(&self, image: &mut [u8], page_id: u64) -> Result<PageType, String> {
        self.storage
            .read_at(image, page_id * self.page_size as u64)
            .map_err(|error| format!("unreadable: {error}"))?;
        page_format::verify(image, page_id)
    }

    /// Claims and checks the pages of the large value `blob`, referenced from page `leaf` of
    /// tree `name`; returns how many it claimed.
    fn large_value(&mut self, name: &str, leaf: u64, blob: &BlobRef) -> u64 {
        let owner = Owner::Tree(name.to_string());
        let mut image = AlignedBuf::new(self.page_size);
        let mut claimed = 0;
        for page_id in blob.page_ids() {
            if !self.claim(page_id, owner.clone()) {
                return claimed;
            }
            claimed += 1;
            let problem = |what: String| {
                format!("tree {name:?}, large value referenced from page {leaf}, page {page_id}: {what}")
            };
            match self.read(&mut image, page_id) {
                Ok(PageType::Blob) if page_format::lsn(&image) == blob.id => {}
                Ok(PageType::Blob) => {
                    self.report
                        .problems
                        .push(problem("a page of another large value".into()));
                    return claimed;
                }
                Ok(other) => {
                    self.report
                        .problems
                        .push(problem(format!("is a {other:?} page")));
                    return claimed;
                }
                Err(reason) => {
                    self.report.problems.push(problem(reason));
                    return claimed;
                }
            }
        }
        claimed
    }

    /// Reports pages that nothing refers to.
    pub(crate) fn finish(mut self) -> IntegrityReport {
        let leaked: Vec<u64> = (1..self.page_count)
            .filter(|page_id| !self.owners.contains_key(page_id))
            .collect();
        if !leaked.is_empty() {
            let shown: Vec<String> = leaked.iter().take(10).map(u64::to_string).collect();
            self.report.problems.push(format!(
                "{} page(s) referenced by nothing (leaked): {}{}",
                leaked.len(),
                shown.join(", "),
                if leaked.len() > 10 { ", ..." } else { "" }
            ));
        }
        self.report
    }
}
