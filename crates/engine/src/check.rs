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
    pub inodes: u64,
    pub dentries: u64,
    pub blocks: u64,
    pub keys: u64,
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
        match inodes.get_mut(parent) {
            Some(p) if p.kind == FileKind::Directory => {
                p.children += 1;
                if *kind == FileKind::Directory {
                    p.subdirs += 1;
                }
            }
            _ => r.problems.push(format!(
                "name {shown:?} in {parent}, which is not a directory"
            )),
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
            }
            None => r.problems.push(format!(
                "name {shown:?} in {parent} points at missing {child}"
            )),
        }
    }
    let mut max_ino = 0;
    for (ino, s) in &inodes {
        max_ino = max_ino.max(ino.0);
        let listed = unlinked.contains(ino);
        if s.kind == FileKind::Directory {
            if *ino == Ino::ROOT {
                if s.names != 0 {
                    r.problems.push("root directory has a name".into());
                }
            } else if s.nlink > 0 {
                if s.names != 1 {
                    r.problems
                        .push(format!("directory {ino} has {} names (must be 1)", s.names));
                } else if s.first_parent != Some(s.parent) {
                    r.problems.push(format!(
                        "directory {ino} records parent {} but is named in {:?}",
                        s.parent, s.first_parent
                    ));
                }
            }
            if s.nlink > 0 && s.nlink as u64 != 2 + s.subdirs {
                r.problems.push(format!(
                    "directory {ino} has nlink {} but {} subdirectories",
                    s.nlink, s.subdirs
                ));
            }
            if s.entries != s.children {
                r.problems.push(format!(
                    "directory {ino} counts {} entries but holds {}",
                    s.entries, s.children
                ));
            }
        } else if s.nlink as u64 != s.names {
            r.problems
                .push(format!("{ino} has nlink {} but {} names", s.nlink, s.names));
        }
        if s.nlink == 0 && !listed {
            r.problems.push(format!(
                "{ino} has no links and no unlinked record (leaked)"
            ));
        }
        if s.has_xattrs != xattrs.contains(ino) {
            r.problems
                .push(format!("{ino} xattr flag disagrees with its xattr record"));
        }
    }
    for ino in &unlinked {
        match inodes.get(ino) {
            Some(s) if s.nlink == 0 => {}
            Some(_) => r
                .problems
                .push(format!("{ino} has an unlinked record but still has names")),
            None => r
                .problems
                .push(format!("unlinked record for missing {ino}")),
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
            _ => r
                .problems
                .push(format!("truncate record of missing or non-file {ino}")),
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
        match inodes.get(ino) {
            Some(s) if s.kind == FileKind::Regular => {
                if s.size <= INLINE_MAX {
                    r.problems
                        .push(format!("{ino} is inline but has block {n}"));
                } else if n * BLOCK_SIZE + *len as u64 > s.size {
                    r.problems.push(format!(
                        "{ino} block {n} holds bytes past the file size {}",
                        s.size
                    ));
                }
            }
            _ => r
                .problems
                .push(format!("block {n} of missing or non-file {ino}")),
        }
    }
    for ino in &xattrs {
        if !inodes.contains_key(ino) {
            r.problems.push(format!("xattrs of missing {ino}"));
        }
    }
    if sb.next_ino <= max_ino {
        r.problems.push(format!(
            "superblock next_ino {} not above the largest inode {max_ino}",
            sb.next_ino
        ));
    }
    Ok(r)
}
