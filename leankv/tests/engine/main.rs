//! leankv's integration tests that share a process without disturbing one another, as modules
//! of one test binary: linking each as a binary of its own took about two minutes of CI's
//! test build on two cores. Run one subject with its module path, e.g.
//! `cargo test -p leankv --test engine -- crash_recovery::`.
//!
//! Tests that watch the whole process stay binaries of their own: `allocations` (counts a
//! thread's allocations), `failed_open_threads` (counts the process's threads), `fuzz_fallback`
//! (installs a panic hook), `kill_loop` and `unclean_shutdown` (run their own binary as a
//! child).

#[path = "../common/mod.rs"]
mod common;

mod adversarial_pages;
mod api_surface;
mod checkpoint_failures;
mod concurrency;
mod crash_recovery;
mod crash_simulator;
mod differential;
mod drop_tree;
mod errors;
mod get_many;
mod key_count;
mod large_values;
mod log_files;
mod many_trees;
mod node_fill;
mod remove_range;
mod reverse_scans;
mod scans;
mod size_limits;
mod staged_records;
mod transactions;
