//! fsck of a shared volume: reads every key of the volume (a scan, as any
//! fsck is) and checks every invariant from the keys alone:
//!
//! - every record decodes and validates; inode numbers are below the
//!   volume's counter;
//! - every entry names an existing child of its kind in an existing
//!   directory; a directory has exactly one name (the root none), its
//!   parent pointer is where that name is, and its link count is 2 plus its
//!   subdirectories; a file's link count is its number of names, and a file
//!   with none is held by an `O` record of a registered session;
//! - every inode but the root is reachable by a name or an `O` record;
//! - xattr records and the inodes' flags agree;
//! - chunk records belong to a live file (or to a freed one whose data the
//!   delete queue holds), and every object they name exists with its size;
//! - `O` and `Q` records belong to registered sessions.
//!
//! What is legal mid-flight is not a problem: ended sessions not yet
//! reclaimed, queued deletes, objects no record names (uploads whose commit
//! never came; gc's work).

use crate::objects::Blobs;
use crate::schema::{self, Chunk, Inode, Key, Keys, Work};
use churnfs_kv::MetaKv;
use churnfs_vfs::{FileKind, Ino, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What fsck found.
#[derive(Debug, Default)]
pub struct Report {
    pub problems: Vec<String>,
    pub inodes: u64,
    pub names: u64,
    pub chunks: u64,
    pub objects: u64,
    pub sessions_live: u64,
    pub sessions_ended: u64,
    pub open_unlinked: u64,
    pub queued: u64,
    /// Objects no chunk record names (left by uploads whose commit never
    /// came; gc removes them).
    pub unreferenced_objects: u64,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Keys read per page.
const PAGE: usize = 1000;

/// Checks volume `volume`; with `blobs`, also that every object a chunk
/// names exists. `progress` is told how many keys were read so far.
pub fn check_volume(
    kv: &dyn MetaKv,
    volume: &str,
    blobs: Option<&Blobs>,
    progress: &mut dyn FnMut(u64),
) -> Result<Report> {
    let keys = Keys::new(volume);
    let mut r = Report::default();
    let mut p = |s: String| r.problems.push(s);
    let (start, end) = keys.all();
    let mut at = start;
    let mut inodes: BTreeMap<Ino, Inode> = BTreeMap::new();
    let mut times: BTreeSet<Ino> = BTreeSet::new();
    let mut names: Vec<(Ino, Vec<u8>, Ino, FileKind)> = Vec::new();
    let mut xattrs: BTreeSet<Ino> = BTreeSet::new();
    let mut chunks: Vec<(Ino, u64, Chunk)> = Vec::new();
    let mut live: BTreeSet<u64> = BTreeSet::new();
    let mut registered: BTreeSet<u64> = BTreeSet::new();
    let mut opens: Vec<(u64, Ino)> = Vec::new();
    let mut queue: Vec<(u64, Work)> = Vec::new();
    let mut delegs: Vec<(Ino, u64)> = Vec::new();
    let mut next_ino = None;
    let mut sb = false;
    let mut read = 0u64;
    loop {
        let (page, _) = kv.scan(&at, &end, PAGE).map_err(crate::fs::kv_err)?;
        let Some(last) = page.last() else { break };
        at = last.key.clone();
        at.push(0);
        read += page.len() as u64;
        progress(read);
        for e in &page {
            let show = String::from_utf8_lossy(&e.key).into_owned();
            let Some(k) = keys.decode(&e.key) else {
                p(format!("key {show:?} is not one churnfs writes"));
                continue;
            };
            let res: Result<()> = (|| {
                match k {
                    Key::Super => {
                        schema::decode_superblock(&e.value)?;
                        sb = true;
                    }
                    Key::NextIno => next_ino = Some(schema::decode_u64(&e.value, "counter")?),
                    Key::NextSession => {
                        schema::decode_u64(&e.value, "counter")?;
                    }
                    Key::Inode(i) => {
                        inodes.insert(i, schema::decode_inode(i, &e.value)?);
                    }
                    Key::DirTimes(i) => {
                        schema::decode_dir_times(i, &e.value)?;
                        times.insert(i);
                    }
                    Key::Dentry { parent, hash, name } => {
                        if hash != schema::dir_hash(&name) || schema::check_name(&name).is_err() {
                            return Err(churnfs_vfs::EngineError::corrupt(
                                Some(parent),
                                format!(
                                    "entry {:?} has a bad name or hash",
                                    String::from_utf8_lossy(&name)
                                ),
                            ));
                        }
                        let (c, kind) = schema::decode_dentry(parent, &e.value)?;
                        names.push((parent, name, c, kind));
                    }
                    Key::Xattr(i) => {
                        schema::decode_xattrs(i, &e.value)?;
                        xattrs.insert(i);
                    }
                    Key::Chunk(i, c) => chunks.push((i, c, schema::decode_chunk(i, &e.value)?)),
                    Key::Session(s) => {
                        schema::decode_session(&e.value)?;
                        live.insert(s);
                    }
                    Key::Registry(s) => {
                        schema::decode_session(&e.value)?;
                        registered.insert(s);
                    }
                    Key::Slot(..) => {}
                    Key::Open(s, i) => opens.push((s, i)),
                    Key::Queue(s, _) => queue.push((s, schema::decode_work(&e.value)?)),
                    Key::Deleg(d) => delegs.push((d, schema::decode_u64(&e.value, "delegation")?)),
                    Key::Recall(_) => {
                        schema::decode_u64(&e.value, "recall")?;
                    }
                }
                Ok(())
            })();
            if let Err(err) = res {
                p(format!("{show:?}: {err}"));
            }
        }
        if page.len() < PAGE {
            break;
        }
    }
    if !sb {
        p("no superblock".into());
    }
    let next_ino = next_ino.unwrap_or_else(|| {
        p("no inode counter".into());
        u64::MAX
    });
    r.inodes = inodes.len() as u64;
    r.names = names.len() as u64;
    r.chunks = chunks.len() as u64;
    r.sessions_live = live.len() as u64;
    r.sessions_ended = registered.difference(&live).count() as u64;
    r.open_unlinked = opens.len() as u64;
    r.queued = queue.len() as u64;

    match inodes.get(&Ino::ROOT) {
        Some(i) if i.kind == FileKind::Directory && i.parent == Ino::ROOT.0 => {}
        Some(_) => p("the root is not a directory that is its own parent".into()),
        None => p("no root directory".into()),
    }
    for (ino, i) in &inodes {
        if ino.0 >= next_ino {
            p(format!("{ino} at or past the inode counter {next_ino}"));
        }
        let dir = i.kind == FileKind::Directory;
        if dir != times.contains(ino) {
            p(format!("{ino}: directory times key and kind disagree"));
        }
        if i.has_xattrs != xattrs.contains(ino) {
            p(format!("{ino}: xattr flag and xattr record disagree"));
        }
    }
    for t in &times {
        if !inodes.contains_key(t) {
            p(format!("times key of missing {t}"));
        }
    }
    for x in &xattrs {
        if !inodes.contains_key(x) {
            p(format!("xattrs of missing {x}"));
        }
    }
    let mut links: HashMap<Ino, u32> = HashMap::new();
    let mut subdirs: HashMap<Ino, u32> = HashMap::new();
    let mut dir_names: HashMap<Ino, Vec<Ino>> = HashMap::new();
    for (parent, name, child, kind) in &names {
        let n = String::from_utf8_lossy(name);
        match inodes.get(parent) {
            Some(pi) if pi.kind == FileKind::Directory => {}
            Some(_) => p(format!("entry {n:?} in {parent}, which is not a directory")),
            None => p(format!("entry {n:?} in missing directory {parent}")),
        }
        match inodes.get(child) {
            Some(ci) if ci.kind == *kind => {}
            Some(_) => p(format!(
                "entry {n:?} in {parent}: kind differs from {child}'s"
            )),
            None => p(format!("entry {n:?} in {parent} names missing {child}")),
        }
        *links.entry(*child).or_default() += 1;
        if *kind == FileKind::Directory {
            *subdirs.entry(*parent).or_default() += 1;
            dir_names.entry(*child).or_default().push(*parent);
        }
    }
    // A delegation lives with its holder's session (the key is leased)
    // and names a directory.
    for (d, s) in &delegs {
        if !live.contains(s) {
            p(format!(
                "directory {d} delegated to session {s}, which is not alive"
            ));
        }
        match inodes.get(d) {
            Some(i) if i.kind == FileKind::Directory => {}
            _ => p(format!("delegation of {d}, which is not a directory")),
        }
    }
    let held: HashSet<Ino> = opens.iter().map(|(_, i)| *i).collect();
    for (s, i) in &opens {
        if !registered.contains(s) {
            p(format!("{i} held by unregistered session {s}"));
        }
        match inodes.get(i) {
            Some(_) => {}
            None => p(format!("{i} held by session {s} does not exist")),
        }
    }
    for (ino, i) in &inodes {
        let n = links.get(ino).copied().unwrap_or(0);
        if i.kind == FileKind::Directory {
            let want = 2 + subdirs.get(ino).copied().unwrap_or(0);
            if i.nlink != want {
                p(format!(
                    "{ino}: directory link count {} where {want}",
                    i.nlink
                ));
            }
            let parents = dir_names.get(ino).cloned().unwrap_or_default();
            if *ino == Ino::ROOT {
                if !parents.is_empty() {
                    p("the root has a name".into());
                }
            } else if parents.len() != 1 {
                p(format!("{ino}: directory with {} names", parents.len()));
            } else if parents[0].0 != i.parent {
                p(format!(
                    "{ino}: parent pointer {} but named in {}",
                    i.parent, parents[0]
                ));
            }
        } else if i.nlink != n {
            p(format!("{ino}: link count {} where {n} names", i.nlink));
        } else if n == 0 && !held.contains(ino) {
            p(format!("{ino}: no name and no session holds it"));
        }
    }
    let queued_frees: HashSet<Ino> = queue
        .iter()
        .filter_map(|(_, w)| match w {
            Work::Chunks { ino, .. } => Some(*ino),
            _ => None,
        })
        .collect();
    for (s, _) in &queue {
        if !registered.contains(s) {
            p(format!("delete queue item of unregistered session {s}"));
        }
    }
    let mut named_objects: HashMap<(Ino, u64, schema::ObjId), u32> = HashMap::new();
    for (ino, c, ch) in &chunks {
        match inodes.get(ino) {
            Some(i) if i.kind == FileKind::Regular => {
                let hidden = i.garbage.is_some_and(|g| g.hides(*c, ch.stamp));
                let past_end = i.inline || c * schema::CHUNK_SIZE >= i.size;
                if past_end && !hidden && !queued_frees.contains(ino) {
                    p(format!("{ino}: chunk record {c} past the file's data"));
                }
            }
            Some(_) => p(format!("chunk {c} of {ino}, which is not a regular file")),
            None if queued_frees.contains(ino) => {}
            None => p(format!(
                "chunk {c} of missing {ino} that no queued delete frees"
            )),
        }
        for o in ch.objects() {
            named_objects.insert((*ino, *c, o.id), o.size);
        }
    }
    if let Some(b) = blobs {
        let stored = b.list()?;
        r.objects = stored.len() as u64;
        let have: HashMap<(Ino, u64, schema::ObjId), u64> = stored
            .iter()
            .map(|o| ((o.ino, o.chunk, o.id), o.size))
            .collect();
        for ((ino, c, id), size) in &named_objects {
            match have.get(&(*ino, *c, *id)) {
                Some(s) if *s == *size as u64 => {}
                Some(s) => p(format!(
                    "{}: {s} bytes where {size}",
                    crate::SharedFs::object_name(*ino, *c, *id)
                )),
                None => p(format!(
                    "{}: missing",
                    crate::SharedFs::object_name(*ino, *c, *id)
                )),
            }
        }
        r.unreferenced_objects = have
            .keys()
            .filter(|k| !named_objects.contains_key(k))
            .count() as u64;
    }
    Ok(r)
}
