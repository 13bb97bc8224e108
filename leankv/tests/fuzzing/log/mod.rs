//! Target `log`: the write-ahead log of a crashed database, edited; recovery must cope.
//!
//! The images ([`images::log_images`], built once per process): a deterministic workload of
//! puts, removes and multi-key batches (values that name their write) under every durability
//! level, with checkpoints now and then and a second tree created on the way, on a
//! [`CrashSimulator`] that crashes it mid-way; the devices are then recovered with a seed
//! (unsynced writes dropped, reordered or torn). One image crashes, recovers, runs on and
//! crashes again, so its log holds frames of two generations. Each image is a page file and two
//! log files.
//!
//! The input edits the LOG files (and now and then the superblock's checkpoint reference):
//! * raw (first byte % 4 == 0; [`byte_edits`]): bit flips, overwritten ranges, truncation,
//!   extension, byte ranges copied within and between the files, the files swapped or emptied;
//!   checksums are left as they are;
//! * structured (else; [`frame_edits`], [`superblock_edits`]): fields of frames rewritten
//!   (payload length, LSN, generation, kind, header padding; page counts, free and freed page
//!   ids, image counts, page ids and lengths, tree and batch ids, key/value/before-image lengths
//!   and tags) with interesting values, key/value bytes and page images edited
//!   (`nodes::edit_node`), frames copied over others or appended, dropped, duplicated or swapped
//!   with their successor (later LSNs fixed up), the file truncated; every touched frame's
//!   CRC-32C is recomputed, so edits get past it; the superblock's checkpoint reference (mark,
//!   LSN, offset, file, generation, log end) pointed elsewhere with its CRC recomputed.
//!
//! Then the database opens with `Db::open_with_files` over memory storages (bounded: a record
//! may name any page id, and beyond [`storage::STORAGE_LIMIT`] the storage answers as a full
//! disk would), and every tree is scanned, keys looked up, a range read, `check_integrity` run;
//! sometimes the case writes, closes (or crashes again through a `CrashSimulator` and recovers
//! with a seed from the input), reopens and reads everything again.
//!
//! The oracle: no panic, no hang, errors are `leankv::Error` values (the API's type), and
//! every pair returned was written by the workload or the case, or is claimed by the edited
//! log itself: a frame whose checksum holds (at any position the reader could look at) whose
//! put or before-image carries it, or a page image in such a frame, or a page of the page
//! file, that `nodes::parse_node` accepts as a well-formed leaf. (A structured edit makes a
//! frame that is as genuine as any other to the reader; what no valid frame and no well-formed
//! page holds is invented.)
//!
//! [`format`] finds and decodes frames as the engine's reader would (more leniently), for the
//! edits and the oracle; [`check`] holds the oracle's log side and the reads it checks.

mod byte_edits;
mod check;
mod format;
mod frame_edits;
mod images;
mod storage;
mod superblock_edits;

use super::input::Input;
use super::nodes::get_u64;
use super::read_back::read_everything;
use super::{lock_dir, Allowed, CaseResult, Oracle, Summary};
use byte_edits::raw_edit;
use check::{log_pairs, LOG_READS};
use format::SB_CHECKPOINT_OFFSET;
use frame_edits::structured_edit;
use images::log_images;
use leankv::testing::{CrashSimulator, Storage};
use leankv::{Db, Durability, Options, WriteBatch};
use std::sync::Arc;
use std::time::Duration;
use storage::Bounded;

/// The crash domain's file names.
pub const FILES: [&str; 3] = ["pages", "wal-0", "wal-1"];
pub const PAGE_SIZE: usize = 4096;
/// The engine's eviction picks pages with the thread's `fastrand` generator: seeded, a case
/// (and the build of the images) does the same thing every time.
const FASTRAND_SEED: u64 = 0x01ea_f106;

/// The options of every open: small pool, checkpoints only where the workload flushes, an
/// `Eventual` sync that never comes on its own (the writer thread writes only when asked, so
/// the order of I/O is the same every time).
pub fn options() -> Options {
    Options::default()
        .page_size(PAGE_SIZE)
        .pool_size(24 * (PAGE_SIZE + 512))
        .checkpoint_every(1 << 30)
        .eventual_sync_delay(Duration::from_secs(10))
        .background_writer(false)
        .open_after_crash(true)
}

pub fn run(data: &[u8]) -> CaseResult {
    let images = log_images();
    fastrand::seed(FASTRAND_SEED);
    let mut input = Input::new(data);
    let mut summary = Summary::default();
    let mode = input.u8();
    let image = &images[input.below(images.len())];
    let mut pages = image.pages.clone();
    let mut logs = image.logs.clone();
    let mut context = format!("image {:?}, edits:", image.name);
    let edits = 1 + input.below(6);
    for _ in 0..edits {
        let note = if mode.is_multiple_of(4) {
            summary.tag("raw");
            raw_edit(&mut logs, &mut input)
        } else {
            summary.tag("structured");
            structured_edit(image, &mut pages, &mut logs, &mut input, &mut summary)
        };
        context.push_str(&format!(" {note};"));
        if input.is_empty() {
            break;
        }
    }
    let mut global = Allowed::new(image.all.clone());
    let residue = get_u64(&pages, SB_CHECKPOINT_OFFSET) as usize;
    let base = image.all.clone();
    log_pairs(
        &logs,
        residue,
        |key| base.values(key),
        |key, value| global.add(key, value),
    );
    let mut oracle = Oracle {
        global,
        tree: None,
        context,
    };
    if super::verbose() {
        eprintln!("case: {}", oracle.context);
    }
    let crash_again = input.chance(1, 4);
    let dir = lock_dir();
    let open = |storages: [Arc<dyn Storage>; 3], summary: &mut Summary| {
        let [p, l0, l1] = storages;
        summary.calls += 1;
        match Db::open_with_files(dir.path(), options(), p, [l0, l1]) {
            Ok(db) => Some(db),
            Err(error) => {
                summary.error(&error);
                None
            }
        }
    };
    if crash_again {
        // On a crash domain whose files start as the edited images, durable.
        summary.tag("crash again");
        let sim = CrashSimulator::new();
        for (name, bytes) in FILES.iter().zip([&pages, &logs[0], &logs[1]]) {
            let storage = sim.storage(name);
            if !bytes.is_empty() {
                storage.write_at(bytes, 0).expect("simulated write");
            }
            storage.sync().expect("simulated sync");
        }
        let bounded = FILES.map(|name| {
            Arc::new(Bounded(sim.storage(name) as Arc<dyn Storage>)) as Arc<dyn Storage>
        });
        let Some(db) = open(bounded, &mut summary) else {
            return Ok(summary);
        };
        summary.opened = true;
        read_everything(
            &db,
            &oracle,
            &mut input,
            &image.keys,
            LOG_READS,
            &mut summary,
        )?;
        sim.crash_after(input.below(64) as u64);
        write_some(&db, &mut oracle, &mut input, &mut summary);
        sim.crash();
        drop(db);
        let recovered = sim.recover(input.u64());
        let storages = FILES.map(|name| {
            Arc::new(Bounded(recovered.storage(name) as Arc<dyn Storage>)) as Arc<dyn Storage>
        });
        if let Some(db) = open(storages, &mut summary) {
            summary.tag("reopened");
            read_everything(
                &db,
                &oracle,
                &mut input,
                &image.keys,
                LOG_READS,
                &mut summary,
            )?;
        }
        return Ok(summary);
    }
    let storages = [&pages, &logs[0], &logs[1]].map(|bytes| Bounded::memory(bytes));
    let dyn_storages = || storages.clone().map(|s| s as Arc<dyn Storage>);
    let Some(db) = open(dyn_storages(), &mut summary) else {
        return Ok(summary);
    };
    summary.opened = true;
    read_everything(
        &db,
        &oracle,
        &mut input,
        &image.keys,
        LOG_READS,
        &mut summary,
    )?;
    if input.is_empty() || input.chance(1, 2) {
        return Ok(summary);
    }
    write_some(&db, &mut oracle, &mut input, &mut summary);
    summary.calls += 1;
    if let Err(error) = db.close() {
        summary.error(&error);
    }
    if let Some(db) = open(dyn_storages(), &mut summary) {
        summary.tag("reopened");
        read_everything(
            &db,
            &oracle,
            &mut input,
            &image.keys,
            LOG_READS,
            &mut summary,
        )?;
    }
    Ok(summary)
}

/// A few writes with known values (single operations and a batch).
fn write_some(db: &Db, oracle: &mut Oracle, input: &mut Input<'_>, summary: &mut Summary) {
    summary.tag("written");
    let names = db.tree_names().unwrap_or_default();
    let name = input.pick(&names).cloned().unwrap_or_else(|| "t".into());
    oracle
        .global
        .add(name.as_bytes(), b"(tree created by the case)");
    let Ok(tree) = db.open_tree(&name) else {
        return;
    };
    let mut batch = WriteBatch::new();
    for n in 0..1 + input.below(12) {
        let key = format!("t{:04}", input.below(420)).into_bytes();
        let value = format!("case-value-{n}").into_bytes();
        oracle.add(&key, &value);
        summary.calls += 1;
        let result = match input.below(4) {
            0 => tree.insert(&key, &value),
            1 => tree.remove(&key).map(|_| ()),
            2 => {
                batch.insert(&tree, &key, &value);
                Ok(())
            }
            _ => {
                batch.remove(&tree, &key);
                Ok(())
            }
        };
        if let Err(error) = result {
            summary.error(&error);
        }
    }
    let durability = [
        Durability::Immediate,
        Durability::Eventual,
        Durability::None,
    ][input.below(3)];
    if !batch.is_empty() {
        summary.calls += 1;
        if let Err(error) = db.write_with(batch, durability) {
            summary.error(&error);
        }
    }
    if input.chance(1, 2) {
        summary.calls += 1;
        if let Err(error) = db.flush() {
            summary.error(&error);
        }
    }
}
