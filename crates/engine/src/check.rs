//! check: fsck. Verifies every invariant of a store from the store alone.
//!
//! It reads the whole keyspace once, in key order, in pages, and keeps a
//! compact summary per inode (memory proportional to the number of inodes).
//! Each problem is reported as one line naming the inode or key involved.

use crate::error::Result;
use crate::format::{self, InodeRecord, Key, BLOCK_SIZE, INLINE_MAX};
use crate::store::KvStore;
use crate::types::{FileKind, Ino};
use std::collections::HashMap;

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    pub problems: Vec<String>,
    /// What `repair_store` can fix without guessing, one per problem it
    /// fixes (problems without one are left as they are).
    pub fixes: Vec<Fix>,
    pub inodes: u64,
    pub dentries: u64,
    pub blocks: u64,
    pub keys: u64,
    /// The inode of `/lost+found`, if the root has that name.
    pub lost_found: Option<Ino>,
    pub next_ino: u64,
}

/// A repair: each follows from the store alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fix {
    /// A key nothing can use: data or xattrs of a missing inode, a
    /// truncate or unlinked record that no longer applies, a name that
    /// points at nothing, a block past its file's end.
    Delete(Vec<u8>, String),
    SetNlink(Ino, u32),
    SetEntries(Ino, u64),
    SetParent(Ino, Ino),
    SetXattrFlag(Ino, bool),
    /// No links and no unlinked record: recorded as unlinked, so the next
    /// mount frees it as it frees what a crash left.
    Unlinked(Ino),
    /// Links but no name: given one in `/lost+found` (`#INO`).
    LostFound(Ino, FileKind),
    NextIno(u64),
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

struct Seen {
    kind: FileKind,
    nlink: u32,
    parent: Ino,
    entries: u64,
    size: u64,
    has_xattrs: bool,
    names: u64,
    subdirs: u64,
    children: u64,
    first_parent: Option<Ino>,
}

const PAGE: usize = 4096;

/// Checks the store; `progress` is called with the number of keys read so far.
pub fn check_store(store: &dyn KvStore, progress: &mut dyn FnMut(u64)) -> Result<Report> {
    let mut r = Report::default();
    let mut inodes: HashMap<Ino, Seen> = HashMap::new();
    let mut dentries: Vec<(Ino, Vec<u8>, Ino, FileKind)> = Vec::new();
    let mut blocks: Vec<(Ino, u64, usize)> = Vec::new();
    let mut xattrs: Vec<Ino> = Vec::new();
    let mut unlinked: Vec<Ino> = Vec::new();
    let mut truncates: HashMap<Ino, (u64, u64)> = HashMap::new();
    let mut sb = None;
    let mut start: Vec<u8> = Vec::new();
    loop {
        let page = store.scan(b"", &start, PAGE)?;
        for (k, v) in &page {
            r.keys += 1;
            let key = match format::decode_key(k) {
                Ok(key) => key,
                Err(e) => {
                    r.problems
                        .push(format!("key {:02x?}: {e}", &k[..k.len().min(24)]));
                    continue;
                }
            };
            match key {
                Key::Super => match crate::Engine::read_superblock(store) {
                    Ok(s) => sb = Some(s),
                    Err(e) => r.problems.push(format!("superblock: {e}")),
                },
                Key::Inode(ino) => match InodeRecord::decode(ino, v) {
                    Ok(rec) => {
                        r.inodes += 1;
                        inodes.insert(
                            ino,
                            Seen {
                                kind: rec.kind,
                                nlink: rec.nlink,
                                parent: rec.parent,
                                entries: rec.entries,
                                size: rec.size,
                                has_xattrs: rec.has_xattrs,
                                names: 0,
                                subdirs: 0,
                                children: 0,
                                first_parent: None,
                            },
                        );
                    }
                    Err(e) => r.problems.push(format!("{ino}: {e}")),
                },
                Key::Dentry { parent, name, .. } => match format::decode_dentry(parent, v) {
                    Ok((child, kind)) => {
                        r.dentries += 1;
                        dentries.push((parent, name, child, kind));
                    }
                    Err(e) => r.problems.push(format!("dentry in {parent}: {e}")),
                },
                Key::Block(ino, n) => {
                    r.blocks += 1;
                    if let Err(e) = format::validate_block(ino, v) {
                        r.problems.push(format!("{ino} block {}: {e}", n.0));
                    }
                    blocks.push((ino, n.0, v.len()));
                }
                Key::Xattr(ino) => {
                    if let Err(e) = format::decode_xattrs(ino, v) {
                        r.problems.push(format!("{ino} xattrs: {e}"));
                    }
                    xattrs.push(ino);
                }
                Key::Unlinked(ino) => {
                    if let Err(e) = format::decode_unlinked(ino, v) {
                        r.problems.push(format!("{ino} unlinked record: {e}"));
                    }
                    unlinked.push(ino);
                }
                Key::Truncate(ino) => match format::decode_truncate(ino, v) {
                    Ok(range) => {
                        truncates.insert(ino, range);
                    }
                    Err(e) => r.problems.push(format!("{e}")),
                },
            }
        }
        progress(r.keys);
        match page.last() {
            Some((k, _)) if page.len() == PAGE => {
                start = k.clone();
                start.push(0);
            }
            _ => break,
        }
    }

    let Some(sb) = sb else {
        r.problems.push("superblock missing".into());
        return Ok(r);
    };
    match inodes.get(&Ino::ROOT) {
        Some(root) if root.kind == FileKind::Directory && root.parent == Ino::ROOT => {}
        Some(_) => r
            .problems
            .push("root inode is not a directory that is its own parent".into()),
        None => r.problems.push("root inode missing".into()),
    }
    for (parent, name, child, kind) in &dentries {
        let shown = String::from_utf8_lossy(name);
        let key = format::dentry_key(*parent, format::dir_hash(name), name);
        let parent_is_dir = matches!(inodes.get(parent), Some(p) if p.kind == FileKind::Directory);
        if !parent_is_dir {
            r.problems.push(format!(
                "name {shown:?} in {parent}, which is not a directory"
            ));
            r.fixes.push(Fix::Delete(
                key,
                format!("name {shown:?} in {parent}, not a directory: removed"),
            ));
            continue;
        }
        if *parent == Ino::ROOT && name.as_slice() == LOST_FOUND {
            r.lost_found = Some(*child);
        }
        match inodes.get_mut(child) {
            Some(c) => {
                c.names += 1;
                if c.kind != *kind {
                    r.problems.push(format!(
                        "name {shown:?} in {parent} says {kind:?}, {child} is {:?}",
                        c.kind
                    ));
                }
                if c.first_parent.is_none() {
                    c.first_parent = Some(*parent);
                }
                let is_dir = c.kind == FileKind::Directory;
                if let Some(p) = inodes.get_mut(parent) {
                    p.children += 1;
                    if is_dir {
                        p.subdirs += 1;
                    }
                }
            }
            None => {
                r.problems.push(format!(
                    "name {shown:?} in {parent} points at missing {child}"
                ));
                r.fixes.push(Fix::Delete(
                    key,
                    format!("name {shown:?} in {parent} pointed at missing {child}: removed"),
                ));
            }
        }
    }
    let mut max_ino = 0;
    let mut sorted: Vec<(&Ino, &Seen)> = inodes.iter().collect();
    sorted.sort_by_key(|(i, _)| **i);
    for (ino, s) in sorted {
        max_ino = max_ino.max(ino.0);
        let listed = unlinked.contains(ino);
        if s.kind == FileKind::Directory {
            if *ino == Ino::ROOT {
                if s.names != 0 {
                    r.problems.push("root directory has a name".into());
                }
            } else if s.nlink > 0 {
                if s.names == 0 {
                    r.problems.push(format!("directory {ino} has no name"));
                    r.fixes.push(Fix::LostFound(*ino, s.kind));
                } else if s.names != 1 {
                    r.problems
                        .push(format!("directory {ino} has {} names (must be 1)", s.names));
                } else if s.first_parent != Some(s.parent) {
                    r.problems.push(format!(
                        "directory {ino} records parent {} but is named in {:?}",
                        s.parent, s.first_parent
                    ));
                    if let Some(p) = s.first_parent {
                        r.fixes.push(Fix::SetParent(*ino, p));
                    }
                }
            }
            if s.nlink > 0 && s.nlink as u64 != 2 + s.subdirs {
                r.problems.push(format!(
                    "directory {ino} has nlink {} but {} subdirectories",
                    s.nlink, s.subdirs
                ));
                r.fixes.push(Fix::SetNlink(*ino, 2 + s.subdirs as u32));
            }
            if s.entries != s.children {
                r.problems.push(format!(
                    "directory {ino} counts {} entries but holds {}",
                    s.entries, s.children
                ));
                r.fixes.push(Fix::SetEntries(*ino, s.children));
            }
        } else if s.nlink as u64 != s.names {
            r.problems
                .push(format!("{ino} has nlink {} but {} names", s.nlink, s.names));
            if s.names > 0 {
                r.fixes.push(Fix::SetNlink(*ino, s.names as u32));
            } else if !listed {
                r.fixes.push(Fix::LostFound(*ino, s.kind));
            }
        }
        if s.nlink == 0 && !listed {
            r.problems.push(format!(
                "{ino} has no links and no unlinked record (leaked)"
            ));
            if s.names == 0 {
                r.fixes.push(Fix::Unlinked(*ino));
            }
        }
        if s.has_xattrs != xattrs.contains(ino) {
            r.problems
                .push(format!("{ino} xattr flag disagrees with its xattr record"));
            r.fixes.push(Fix::SetXattrFlag(*ino, xattrs.contains(ino)));
        }
    }
    for ino in &unlinked {
        match inodes.get(ino) {
            Some(s) if s.nlink == 0 => {}
            Some(_) => {
                r.problems
                    .push(format!("{ino} has an unlinked record but still has names"));
                r.fixes.push(Fix::Delete(
                    format::unlinked_key(*ino),
                    format!("{ino} has names: its unlinked record removed"),
                ));
            }
            None => {
                r.problems
                    .push(format!("unlinked record for missing {ino}"));
                r.fixes.push(Fix::Delete(
                    format::unlinked_key(*ino),
                    format!("unlinked record of missing {ino} removed"),
                ));
            }
        }
    }
    for (ino, (from, _)) in &truncates {
        match inodes.get(ino) {
            Some(s) if s.kind == FileKind::Regular => {
                if s.size > from * BLOCK_SIZE {
                    r.problems.push(format!(
                        "{ino} has a pending truncate from block {from} below its size {}",
                        s.size
                    ));
                }
            }
            _ => {
                r.problems
                    .push(format!("truncate record of missing or non-file {ino}"));
                r.fixes.push(Fix::Delete(
                    format::truncate_key(*ino),
                    format!("truncate record of missing or non-file {ino} removed"),
                ));
            }
        }
    }
    if truncates.len() > crate::orphan::TRUNCATES_PENDING_MAX {
        r.problems.push(format!(
            "{} pending truncate records, more than the bound",
            truncates.len()
        ));
    }
    for (ino, n, len) in &blocks {
        // Garbage a truncate left for the background: any size goes.
        if truncates
            .get(ino)
            .is_some_and(|&(from, to)| *n >= from && *n < to)
        {
            continue;
        }
        let key = format::block_key(*ino, crate::types::BlockNo(*n));
        match inodes.get(ino) {
            Some(s) if s.kind == FileKind::Regular => {
                if s.size <= INLINE_MAX {
                    r.problems
                        .push(format!("{ino} is inline but has block {n}"));
                    r.fixes.push(Fix::Delete(
                        key,
                        format!("{ino} is inline: its block {n} removed"),
                    ));
                } else if n * BLOCK_SIZE >= s.size {
                    r.problems.push(format!(
                        "{ino} block {n} holds bytes past the file size {}",
                        s.size
                    ));
                    r.fixes.push(Fix::Delete(
                        key,
                        format!("{ino} block {n}, past the file's end, removed"),
                    ));
                } else if n * BLOCK_SIZE + *len as u64 > s.size {
                    r.problems.push(format!(
                        "{ino} block {n} holds bytes past the file size {}",
                        s.size
                    ));
                }
            }
            _ => {
                r.problems
                    .push(format!("block {n} of missing or non-file {ino}"));
                r.fixes.push(Fix::Delete(
                    key,
                    format!("block {n} of missing or non-file {ino} removed"),
                ));
            }
        }
    }
    for ino in &xattrs {
        if !inodes.contains_key(ino) {
            r.problems.push(format!("xattrs of missing {ino}"));
            r.fixes.push(Fix::Delete(
                format::xattr_key(*ino),
                format!("xattrs of missing {ino} removed"),
            ));
        }
    }
    r.next_ino = sb.next_ino;
    if sb.next_ino <= max_ino {
        r.problems.push(format!(
            "superblock next_ino {} not above the largest inode {max_ino}",
            sb.next_ino
        ));
        r.fixes.push(Fix::NextIno(max_ino + 1));
        r.next_ino = max_ino + 1;
    }
    Ok(r)
}

/// The record of `ino` as the repair changes it, read from the store the
/// first time it is asked for.
fn record<'a>(
    store: &dyn KvStore,
    recs: &'a mut std::collections::BTreeMap<Ino, InodeRecord>,
    ino: Ino,
) -> Result<&'a mut InodeRecord> {
    use std::collections::btree_map::Entry;
    Ok(match recs.entry(ino) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            let v = store.get(&format::inode_key(ino))?.ok_or_else(|| {
                crate::error::EngineError::corrupt(Some(ino), "inode record went missing")
            })?;
            e.insert(InodeRecord::decode(ino, &v)?)
        }
    })
}

/// The root's name for files fsck found without one.
pub const LOST_FOUND: &[u8] = b"lost+found";

/// Applies `report.fixes` to `store` (unmounted) in one batch and syncs;
/// returns one line per fix. Inode records are read again and changed
/// field by field; files without a name get one in `/lost+found`, made
/// if the root has no such name.
pub fn repair_store(store: &dyn KvStore, report: &Report) -> Result<Vec<String>> {
    use crate::store::Batch;
    let mut lines = Vec::new();
    let mut recs: std::collections::BTreeMap<Ino, InodeRecord> = Default::default();
    let mut batch = Batch::default();
    let mut next_ino = report.next_ino;
    let mut lost: Vec<(Ino, FileKind)> = Vec::new();
    for f in &report.fixes {
        match f {
            Fix::Delete(k, what) => {
                batch.delete(k.clone());
                lines.push(what.clone());
            }
            Fix::SetNlink(ino, n) => {
                let r = record(store, &mut recs, *ino)?;
                lines.push(format!("{ino}: link count {} set to {n}", r.nlink));
                r.nlink = *n;
            }
            Fix::SetEntries(ino, n) => {
                let r = record(store, &mut recs, *ino)?;
                lines.push(format!(
                    "directory {ino}: entry count {} set to {n}",
                    r.entries
                ));
                r.entries = *n;
            }
            Fix::SetParent(ino, p) => {
                let r = record(store, &mut recs, *ino)?;
                lines.push(format!("directory {ino}: parent {} set to {p}", r.parent));
                r.parent = *p;
            }
            Fix::SetXattrFlag(ino, on) => {
                record(store, &mut recs, *ino)?.has_xattrs = *on;
                lines.push(format!("{ino}: xattr flag set to {on}"));
            }
            Fix::Unlinked(ino) => {
                batch.put(format::unlinked_key(*ino), format::encode_unlinked());
                lines.push(format!(
                    "{ino}: no links and no record of it: recorded as unlinked, freed at the next mount"
                ));
            }
            Fix::LostFound(ino, kind) => lost.push((*ino, *kind)),
            Fix::NextIno(n) => {
                lines.push(format!("superblock: next inode number set to {n}"));
            }
        }
    }
    if !lost.is_empty() {
        let lf = match report.lost_found {
            Some(lf) => {
                if record(store, &mut recs, lf)?.kind != FileKind::Directory {
                    return Err(crate::error::EngineError::Invalid(
                        "/lost+found is not a directory: rename it and run fsck --repair again",
                    ));
                }
                lf
            }
            None => {
                let lf = Ino(next_ino);
                next_ino += 1;
                let root = record(store, &mut recs, Ino::ROOT)?;
                root.nlink += 1;
                root.entries += 1;
                let now = crate::types::Timespec::now();
                recs.insert(lf, InodeRecord::empty_dir(0o700, 0, 0, Ino::ROOT, now));
                batch.put(
                    format::dentry_key(Ino::ROOT, format::dir_hash(LOST_FOUND), LOST_FOUND),
                    format::encode_dentry(lf, FileKind::Directory),
                );
                lines.push(format!("/lost+found made ({lf})"));
                lf
            }
        };
        for (ino, kind) in lost {
            let name = format!("#{}", ino.0).into_bytes();
            batch.put(
                format::dentry_key(lf, format::dir_hash(&name), &name),
                format::encode_dentry(ino, kind),
            );
            let r = record(store, &mut recs, ino)?;
            if kind == FileKind::Directory {
                r.parent = lf;
            } else {
                r.nlink = 1;
            }
            let l = record(store, &mut recs, lf)?;
            l.entries += 1;
            if kind == FileKind::Directory {
                l.nlink += 1;
            }
            lines.push(format!("{ino}: had no name: now /lost+found/#{}", ino.0));
        }
    }
    for (ino, r) in &recs {
        batch.put(format::inode_key(*ino), r.encode(*ino)?);
    }
    if next_ino != report.next_ino || report.fixes.iter().any(|f| matches!(f, Fix::NextIno(_))) {
        let mut sb = crate::Engine::read_superblock(store)?;
        sb.next_ino = next_ino;
        batch.put(format::super_key(), sb.encode());
    }
    if !batch.is_empty() {
        store.apply(&batch)?;
        store.sync()?;
    }
    Ok(lines)
}
