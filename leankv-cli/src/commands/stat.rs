//! `leankv stat DIR`: what is in a database and how much room it takes.

use crate::bytes::escape;
use crate::error::{output_error, CliError, CliResult, DAMAGED};
use crate::open::{self, with_db, OpenOptions, PAGE_FILE};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Everything `stat` reports (also its JSON form).
#[derive(Debug, Serialize)]
struct Report {
    path: String,
    format_version: u32,
    page_size: usize,
    /// Pages in the page file, the superblock included.
    pages: u64,
    free_pages: u64,
    page_file_bytes: u64,
    /// Every file in the directory: the page file, the log files, the lock file.
    files: Vec<File>,
    total_bytes: u64,
    trees: Vec<TreeInfo>,
}

#[derive(Debug, Serialize)]
struct File {
    name: String,
    bytes: u64,
}

#[derive(Debug, Serialize)]
struct TreeInfo {
    name: String,
    keys: u64,
    /// With `--pages` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pages: Option<Pages>,
}

/// A tree's room, from the walk of `--pages`.
#[derive(Debug, Serialize)]
struct Pages {
    height: u16,
    leaf: u64,
    inner: u64,
    large_value: u64,
    /// The leaves' bytes in use over their size, 0 to 1.
    leaf_fill: f64,
}

impl From<&leankv::TreeSpace> for Pages {
    fn from(space: &leankv::TreeSpace) -> Self {
        Pages {
            height: space.height,
            leaf: space.leaf_pages,
            inner: space.inner_pages,
            large_value: space.large_value_pages,
            leaf_fill: space.leaf_fill(),
        }
    }
}

/// Runs `stat`; with `pages`, walks every tree's pages too.
pub fn run(dir: &Path, json: bool, pages: bool, options: OpenOptions) -> CliResult<()> {
    let db = open::open_existing(dir, options)?;
    let report = with_db(db, |db| {
        // The walk is the integrity check's: a damaged tree's room would be a guess.
        let spaces = if pages {
            let check = db.check_integrity()?;
            if !check.is_ok() {
                return Err(CliError::new(
                    DAMAGED,
                    format!(
                        "{} is damaged: {} problem(s); `leankv check` lists them",
                        dir.display(),
                        check.problems.len()
                    ),
                ));
            }
            check.spaces
        } else {
            Vec::new()
        };
        let mut trees = Vec::new();
        for name in db.tree_names()? {
            let keys = db.open_tree(&name)?.len()?;
            let pages = spaces
                .iter()
                .find(|space| space.name == name)
                .map(Pages::from);
            trees.push(TreeInfo { name, keys, pages });
        }
        let stats = db.stats();
        // Sizes while the database is open, after what opening it wrote.
        let (files, total_bytes) = open::file_sizes(dir)?;
        let page_file_bytes = files
            .iter()
            .find(|(name, _)| name == PAGE_FILE)
            .map_or(0, |(_, bytes)| *bytes);
        Ok(Report {
            path: db.path().display().to_string(),
            format_version: stats.format_version,
            page_size: stats.page_size,
            pages: stats.page_count,
            free_pages: stats.free_pages,
            page_file_bytes,
            files: files
                .into_iter()
                .map(|(name, bytes)| File { name, bytes })
                .collect(),
            total_bytes,
            trees,
        })
    })?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(std::io::Error::from)
    } else {
        print_text(&mut out, &report)
    }
    .and_then(|()| writeln!(out))
    .and_then(|()| out.flush())
    .map_err(output_error)
}

fn print_text(out: &mut impl Write, report: &Report) -> std::io::Result<()> {
    let used = report.pages.saturating_sub(report.free_pages);
    writeln!(out, "database        {}", report.path)?;
    writeln!(out, "format version  {}", report.format_version)?;
    writeln!(out, "page size       {} bytes", report.page_size)?;
    writeln!(
        out,
        "pages           {} ({} in use, {} free: {:.1}%)",
        report.pages,
        used,
        report.free_pages,
        percent(report.free_pages, report.pages)
    )?;
    writeln!(out, "files           {} bytes in all", report.total_bytes)?;
    for file in &report.files {
        writeln!(out, "  {:<14}{:>14} bytes", file.name, file.bytes)?;
    }
    let keys: u64 = report.trees.iter().map(|tree| tree.keys).sum();
    write!(out, "trees           {} ({keys} keys)", report.trees.len())?;
    let width = report
        .trees
        .iter()
        .map(|tree| escape(tree.name.as_bytes()).chars().count())
        .max()
        .unwrap_or(0);
    for tree in &report.trees {
        let name = escape(tree.name.as_bytes());
        write!(out, "\n  {name:<width$}  {:>12} keys", tree.keys)?;
        if let Some(pages) = &tree.pages {
            write!(
                out,
                "  {:>10} pages ({} leaves {:.1}% full, {} inner, {} of large values), height {}",
                pages.leaf + pages.inner + pages.large_value,
                pages.leaf,
                pages.leaf_fill * 100.0,
                pages.inner,
                pages.large_value,
                pages.height
            )?;
        }
    }
    Ok(())
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}
