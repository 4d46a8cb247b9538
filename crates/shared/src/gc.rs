//! gc of a volume's objects: removes objects that no chunk record names and
//! that are older than the grace period. Safe while every mount writes:
//!
//! - an object is named, if ever, by the commit that follows its upload,
//!   and a mount commits that within the volume's upload window of the
//!   upload's start or not at all (`fs::note_upload`, `transact`);
//! - an object is never named again once a commit stopped naming it (an
//!   overwrite or a compaction writes new objects);
//! - gc's grace is at least twice the window, so an object older than the
//!   grace whose chunk record (read after the listing, linearizably) does
//!   not name it will never be named: deleting it loses nothing.
//!
//! The clocks of the store (an object's time) and of gc's machine must
//! agree to within the window. What the delete queue will delete anyway
//! may be deleted here first; the queue takes a missing object as deleted.

use crate::objects::{Blobs, Listed};
use crate::schema::{self, Keys, Superblock};
use churnfs_kv::MetaKv;
use churnfs_vfs::{EngineError, Ino, Result};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// What one gc run found and did.
#[derive(Debug, Default, Clone)]
pub struct GcReport {
    pub objects: u64,
    pub bytes: u64,
    /// Named by a chunk record.
    pub named: u64,
    /// Unnamed but younger than the grace: maybe an upload in flight.
    pub young: u64,
    /// Unnamed and older than the grace: removed (or, dry, would be).
    pub removed: u64,
    pub removed_bytes: u64,
}

/// Chunk records read per request, and objects deleted per call.
const BATCH: usize = 100;
const DELETE_BATCH: usize = 1000;

/// The least grace gc accepts on a volume: twice its upload window.
pub fn min_grace(sb: &Superblock) -> Duration {
    Duration::from_millis(sb.upload_window_ms as u64 * 2)
}

/// Runs gc on `volume`. `progress(done, total)` is told how far through
/// the listing it is.
pub fn collect(
    kv: &dyn MetaKv,
    volume: &str,
    blobs: &Blobs,
    grace: Duration,
    dry_run: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<GcReport> {
    let sb = crate::SharedFs::read_superblock(kv, volume)?;
    if grace < min_grace(&sb) {
        return Err(EngineError::Invalid(
            "gc's grace is under twice the volume's upload window",
        ));
    }
    let keys = Keys::new(volume);
    let listed = blobs.list()?;
    let now = chrono::Utc::now();
    let grace_c = chrono::Duration::from_std(grace)
        .map_err(|_| EngineError::Invalid("gc's grace is too long"))?;
    let mut r = GcReport {
        objects: listed.len() as u64,
        bytes: listed.iter().map(|o| o.size).sum(),
        ..GcReport::default()
    };
    // Old objects by chunk: only their chunks' records are read.
    let mut old: BTreeMap<(Ino, u64), Vec<&Listed>> = BTreeMap::new();
    for o in &listed {
        if now.signed_duration_since(o.modified) > grace_c {
            old.entry((o.ino, o.chunk)).or_default().push(o);
        } else {
            r.young += 1;
        }
    }
    let total = listed.len() as u64;
    let mut done = r.young;
    progress(done, total);
    let mut doomed: Vec<&Listed> = Vec::new();
    let groups: Vec<(&(Ino, u64), &Vec<&Listed>)> = old.iter().collect();
    for part in groups.chunks(BATCH.min(kv.limits().max_ops)) {
        let ckeys: Vec<Vec<u8>> = part
            .iter()
            .map(|((ino, c), _)| keys.chunk(*ino, *c))
            .collect();
        let refs: Vec<&[u8]> = ckeys.iter().map(Vec::as_slice).collect();
        let (got, _) = kv.get_many(&refs).map_err(crate::fs::kv_err)?;
        for (((ino, _), objs), rec) in part.iter().zip(got) {
            let named: HashSet<schema::ObjId> = match rec {
                Some(e) => schema::decode_chunk(*ino, &e.value)?
                    .objects()
                    .iter()
                    .map(|o| o.id)
                    .collect(),
                None => HashSet::new(),
            };
            for o in objs.iter() {
                if named.contains(&o.id) {
                    r.named += 1;
                } else {
                    doomed.push(o);
                }
            }
            done += objs.len() as u64;
        }
        progress(done, total);
    }
    r.removed = doomed.len() as u64;
    r.removed_bytes = doomed.iter().map(|o| o.size).sum();
    if !dry_run {
        for part in doomed.chunks(DELETE_BATCH) {
            blobs.delete_many(
                part.iter()
                    .map(|o| blobs.path(o.ino, o.chunk, o.id))
                    .collect(),
            )?;
        }
    }
    Ok(r)
}
