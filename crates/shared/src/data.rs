//! File data of a shared volume (docs/design.md §15, "Data layout"):
//!
//! - a file whose data ends within `INLINE_MAX` keeps it in its inode record;
//! - a larger file's data is cut into chunks of `CHUNK_SIZE`; a chunk's
//!   record lists slices, each naming a range of an immutable object; a
//!   write adds slices over the older ones (no object is ever rewritten, so
//!   two mounts never read-modify-write one object); a chunk past
//!   `SLICES_MAX` slices is rewritten as one object by the flush that would
//!   pass the bound;
//! - writes gather in the mount's buffer (`FileData::dirty`) and are
//!   uploaded and committed at close (FLUSH), fsync, or when the file's or
//!   the mount's dirty bytes reach their bounds: other mounts see them after
//!   the close (close-to-open). A file created in a directory delegated to
//!   this mount since its last batch keeps its data past the close, until
//!   that batch (deleg.rs `defer_close`): no other mount can open it before;
//! - a shrink commits at once: the file's size, a hole over the rest of the
//!   chunk at the new end, and a garbage range over the chunks past it that
//!   the delete queue removes (reads of a hidden chunk see a hole, so a
//!   later extension never shows old bytes).
//!
//! Lifecycle of a `FileState`: made by the first open (or a write with no
//! open), holds the record as last read (`base`), the chunk records read
//! for it, and the dirty extents; dropped at the last release once clean.
//! Its mutex serializes the file's writes, reads, flushes and truncates on
//! this mount and is held across their engine and object store calls.

use crate::fs::{attr_of, lock, SharedFs, Tx};
use crate::objects::fmt_id;
use crate::schema::{
    self, Chunk, Garbage, Inode, ObjId, ObjRef, Slice, Work, CHUNK_SIZE, INLINE_MAX, MAX_FILE_SIZE,
    SLICES_MAX,
};
use crate::stats::Stats;
use bytes::Bytes;
use churnfs_kv::Rev;
use churnfs_vfs::types::falloc;
use churnfs_vfs::{
    perm, Attr, EngineError, FileKind, Ino, Opened, Result, SetAttr, SetTime, Timespec,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};

/// Most dirty bytes of a file whose close may wait for its directory's
/// batch (`may_defer`).
const DEFER_FILE_MAX: u64 = 1 << 20;
/// Most chunk records one commit of a flush or a hole writes.
const CHUNKS_PER_COMMIT: usize = 48;

/// Objects a flush uploaded, by piece (chunk, offset, length), with when
/// their upload started.
type Uploaded = HashMap<(u64, u32, u32), (ObjRef, std::time::Instant)>;

/// A file open (or being written) on this mount.
#[derive(Default)]
pub(crate) struct FileState {
    inner: Mutex<FileData>,
}

#[derive(Default)]
pub(crate) struct FileData {
    /// The record as last read or written here, and its version.
    base: Option<(Inode, Rev)>,
    /// Chunk records read for `base` (None: no record).
    chunks: HashMap<u64, Option<(Chunk, Rev)>>,
    /// Written here and not yet committed: offset → bytes, disjoint and
    /// never touching.
    dirty: BTreeMap<u64, Vec<u8>>,
    dirty_bytes: u64,
    /// The file's size as this mount sees it (with the dirty extents).
    size: u64,
    mtime: Option<Timespec>,
}

impl FileData {
    fn end_of_dirty(&self) -> u64 {
        self.dirty
            .iter()
            .next_back()
            .map_or(0, |(o, v)| o + v.len() as u64)
    }
}

/// Puts `data` at `off` into `dirty`, merging what it touches; returns how
/// many bytes the extents grew by.
fn insert_extent(dirty: &mut BTreeMap<u64, Vec<u8>>, off: u64, data: &[u8]) -> u64 {
    let end = off + data.len() as u64;
    // Appending to the extent that ends where this write starts, with
    // nothing after it that the write reaches: the common sequential case.
    if let Some((&s, v)) = dirty.range_mut(..=off).next_back() {
        let v_end = s + v.len() as u64;
        if v_end == off && dirty.range(off + 1..=end).next().is_none() {
            let v = dirty.get_mut(&s).expect("just found");
            v.extend_from_slice(data);
            return data.len() as u64;
        }
    }
    let touching: Vec<u64> = dirty
        .range(..=end)
        .filter(|(s, v)| *s + v.len() as u64 >= off)
        .map(|(s, _)| *s)
        .collect();
    let mut start = off;
    let mut stop = end;
    let mut old = 0u64;
    for s in &touching {
        let n = dirty[s].len() as u64;
        start = start.min(*s);
        stop = stop.max(s + n);
        old += n;
    }
    let mut buf = vec![0u8; (stop - start) as usize];
    for s in touching {
        let v = dirty.remove(&s).expect("listed above");
        let at = (s - start) as usize;
        buf[at..at + v.len()].copy_from_slice(&v);
    }
    let at = (off - start) as usize;
    buf[at..at + data.len()].copy_from_slice(data);
    let grew = buf.len() as u64 - old;
    dirty.insert(start, buf);
    grew
}

/// A piece of data to commit inside one chunk.
#[derive(Clone)]
struct Piece {
    chunk: u64,
    off: u32,
    bytes: Bytes,
    /// Dirty data, fixed for the whole flush: an object an earlier attempt
    /// uploaded for the same (chunk, offset, length) holds these bytes.
    /// Not so for the bytes of an inline record, read again each attempt.
    reusable: bool,
}

/// Cuts extents at chunk boundaries.
fn pieces(extents: &[(u64, Bytes)]) -> Vec<Piece> {
    let mut out = Vec::new();
    for (off, b) in extents {
        let mut at = 0usize;
        while at < b.len() {
            let pos = off + at as u64;
            let chunk = pos / CHUNK_SIZE;
            let in_chunk = pos % CHUNK_SIZE;
            let n = ((CHUNK_SIZE - in_chunk) as usize).min(b.len() - at);
            out.push(Piece {
                chunk,
                off: in_chunk as u32,
                bytes: b.slice(at..at + n),
                reusable: true,
            });
            at += n;
        }
    }
    out
}

impl SharedFs {
    fn file_state(&self, ino: Ino) -> Option<Arc<FileState>> {
        lock(&self.files).get(&ino).cloned()
    }

    fn file_state_or_new(&self, ino: Ino) -> (Arc<FileState>, bool) {
        let mut f = lock(&self.files);
        let mut made = false;
        let st = f
            .entry(ino)
            .or_insert_with(|| {
                made = true;
                Arc::default()
            })
            .clone();
        Stats::set(&self.stats.open_files, f.len() as u64);
        (st, made)
    }

    fn new_obj_id(&self) -> Result<ObjId> {
        let (sid, _) = self.session.current()?;
        Ok(ObjId {
            session: sid,
            seq: self.queue_seq.fetch_add(1, Relaxed),
        })
    }

    /// The file's record into `fd.base` if not there yet.
    fn load<'a>(&self, ino: Ino, fd: &'a mut FileData) -> Result<&'a (Inode, Rev)> {
        if fd.base.is_none() {
            let (i, rev, _) = self.inode(ino)?;
            match i.kind {
                FileKind::Regular => {}
                FileKind::Directory => return Err(EngineError::IsDir),
                _ => return Err(EngineError::Invalid("not a regular file")),
            }
            fd.size = fd.size.max(i.size).max(fd.end_of_dirty());
            if fd.dirty.is_empty() {
                fd.size = i.size;
            }
            fd.chunks.clear();
            fd.base = Some((i, rev));
        }
        Ok(fd.base.as_ref().expect("loaded above"))
    }

    /// A file just created or opened here: one more open handle, its state
    /// at `rev` known from the commit that made it.
    pub(crate) fn opened(&self, ino: Ino, rev: Rev) {
        let (st, _) = self.file_state_or_new(ino);
        let mut fd = lock(&st.inner);
        if fd.base.is_none() {
            if let Ok((i, r, _)) = self.inode_cached(ino) {
                fd.size = i.size;
                fd.base = Some((i, r));
            }
        }
        drop(fd);
        self.known_mut(ino, |k| {
            k.opens += 1;
            k.page_rev = Some(rev);
        });
    }

    /// OPEN: close-to-open. The record is read fresh; if the file changed
    /// since this kernel cached its pages and attributes, both are dropped
    /// before the reply.
    pub fn open(&self, ino: Ino) -> Result<Opened> {
        self.check_running()?;
        let (i, rev, _) = self.inode(ino)?;
        if i.kind == FileKind::Regular {
            let (st, _) = self.file_state_or_new(ino);
            let mut fd = lock(&st.inner);
            if fd.dirty.is_empty() {
                fd.size = i.size;
            } else {
                fd.size = fd.size.max(i.size);
            }
            if fd.base.as_ref().map(|b| b.1) != Some(rev) {
                fd.chunks.clear();
            }
            fd.base = Some((i, rev));
        }
        let keep = self.known_mut(ino, |k| {
            k.opens += 1;
            let keep = k.page_rev == Some(rev);
            k.page_rev = Some(rev);
            keep
        });
        if !keep {
            Stats::inc(&self.stats.pages_dropped_at_open);
            if let Some(k) = self.kernel() {
                k.inval_attr_now(ino);
            }
        }
        Ok(Opened {
            fh: churnfs_vfs::Fh(ino.0),
            keep_cache: keep,
        })
    }

    /// The last close of a handle: flushes, and forgets the file's state
    /// once no handle is left.
    pub fn release(&self, ino: Ino) -> Result<()> {
        let (left, unlinked) = self.known_mut(ino, |k| {
            k.opens = k.opens.saturating_sub(1);
            (k.opens, k.unlinked)
        });
        let mut r = Ok(());
        if left == 0 && unlinked {
            // The last handle of a file without a name: nobody reads its
            // data again (its free follows), so none of it is uploaded.
            self.drop_deferred(ino);
            self.discard_file(ino);
        } else if left == 0 {
            if let Some(st) = self.file_state(ino) {
                let mut fd = lock(&st.inner);
                if !self.may_defer(&fd) || !self.defer_close(ino) {
                    r = self.flush_locked(ino, &mut fd);
                    if matches!(r, Err(EngineError::NotFound)) {
                        // Freed by an unlink that overtook this release:
                        // its data goes with it.
                        self.discard_dirty(&mut fd);
                        r = Ok(());
                    }
                }
                if fd.dirty.is_empty() {
                    drop(fd);
                    let mut f = lock(&self.files);
                    f.remove(&ino);
                    Stats::set(&self.stats.open_files, f.len() as u64);
                }
            }
        }
        self.settle(ino);
        r
    }

    /// fsync (and unmount): the file's dirty data uploaded and committed.
    pub fn flush(&self, ino: Ino) -> Result<()> {
        let Some(st) = self.file_state(ino) else {
            return Ok(());
        };
        let mut fd = lock(&st.inner);
        self.flush_locked(ino, &mut fd)
    }

    /// FLUSH (a close): as `flush`, except for a file created in a
    /// directory delegated to this mount since its last batch, whose data
    /// may go with that directory's next batch (deleg.rs `defer_close`):
    /// no other mount can open it before then.
    pub fn close(&self, ino: Ino) -> Result<()> {
        let Some(st) = self.file_state(ino) else {
            return Ok(());
        };
        let mut fd = lock(&st.inner);
        if fd.dirty.is_empty() || (self.may_defer(&fd) && self.defer_close(ino)) {
            return Ok(());
        }
        self.flush_locked(ino, &mut fd)
    }

    /// May this file's close leave its data for the batch? A small file's
    /// (at most `DEFER_FILE_MAX` dirty bytes): a large one gains little
    /// from waiting, and uploads at its close as anywhere else.
    fn may_defer(&self, fd: &FileData) -> bool {
        !fd.dirty.is_empty() && fd.dirty_bytes <= DEFER_FILE_MAX
    }

    /// Flushes files whose closes were deferred, together: the pieces of
    /// all of them uploaded in one parallel batch, then each committed (to
    /// its directory's image while it is fresh there). A file unlinked
    /// with no handle left drops its data. Returns the files not flushed,
    /// with the first error.
    pub(crate) fn flush_files(&self, inos: &[Ino]) -> (Vec<Ino>, Option<EngineError>) {
        if inos.is_empty() {
            return (Vec::new(), None);
        }
        let mut inos = inos.to_vec();
        inos.sort();
        inos.dedup();
        let states: Vec<(Ino, Arc<FileState>)> = inos
            .iter()
            .filter_map(|i| self.file_state(*i).map(|s| (*i, s)))
            .collect();
        // Locked in inode order; no other thread holds two.
        let mut fds: Vec<(Ino, MutexGuard<'_, FileData>)> =
            states.iter().map(|(i, s)| (*i, lock(&s.inner))).collect();
        let mut failed = Vec::new();
        let mut first = None;
        let mut live = Vec::with_capacity(fds.len());
        for (n, (ino, fd)) in fds.iter_mut().enumerate() {
            if fd.dirty.is_empty() {
                continue;
            }
            // Unlinked with no handle left: nobody reads it again. Whether
            // it is gone is asked of the image only (a file still fresh
            // there); the engine tells the others at their flush.
            if self.known(*ino).is_some_and(|k| k.unlinked && k.opens == 0) {
                self.discard_dirty(fd);
                continue;
            }
            if self.is_fresh(*ino) {
                match self.inode(*ino) {
                    Err(EngineError::NotFound) => {
                        self.discard_dirty(fd);
                        continue;
                    }
                    Ok((i, _, _))
                        if i.nlink == 0 && self.known(*ino).is_none_or(|k| k.opens == 0) =>
                    {
                        self.discard_dirty(fd);
                        continue;
                    }
                    _ => {}
                }
            }
            live.push(n);
        }
        // One parallel upload for every piece that will not stay inline.
        let started = std::time::Instant::now();
        let mut batch = Vec::new();
        let mut maps: Vec<Uploaded> = vec![HashMap::new(); fds.len()];
        let mut fresh = Vec::new();
        for &n in &live {
            let (ino, fd) = &fds[n];
            if fd.end_of_dirty() <= INLINE_MAX {
                continue;
            }
            let extents: Vec<(u64, Bytes)> = fd
                .dirty
                .iter()
                .map(|(o, v)| (*o, Bytes::copy_from_slice(v)))
                .collect();
            for p in pieces(&extents) {
                let id = match self.new_obj_id() {
                    Ok(id) => id,
                    Err(e) => {
                        first.get_or_insert(e);
                        continue;
                    }
                };
                let r = ObjRef {
                    id,
                    size: p.bytes.len() as u32,
                    sum: xxhash_rust::xxh3::xxh3_64(&p.bytes),
                };
                batch.push((self.blobs.path(*ino, p.chunk, id), p.bytes.clone()));
                fresh.push((n, (p.chunk, p.off, p.bytes.len() as u32), r, p.bytes));
            }
        }
        match self.blobs.put_many(batch) {
            Ok(()) => {
                for (n, k, r, b) in fresh {
                    self.cache.put(r.id, b);
                    maps[n].insert(k, (r, started));
                }
            }
            // Each file uploads its own pieces again below.
            Err(e) => tracing::debug!("batched upload of deferred closes: {e}"),
        }
        let mut down = false;
        for n in live {
            let uploaded = std::mem::take(&mut maps[n]);
            let (ino, fd) = &mut fds[n];
            if down {
                // The engine did not answer the last one: the rest wait
                // for the next round rather than for a deadline each.
                failed.push(*ino);
                continue;
            }
            match self.flush_with(*ino, fd, uploaded) {
                Ok(()) => {}
                Err(EngineError::NotFound) => self.discard_dirty(fd),
                Err(e) => {
                    down = crate::fs::is_unavailable(&e);
                    failed.push(*ino);
                    first.get_or_insert(e);
                }
            }
        }
        let clean: Vec<Ino> = fds
            .iter()
            .filter(|(_, fd)| fd.dirty.is_empty())
            .map(|(i, _)| *i)
            .collect();
        drop(fds);
        self.forget_closed(&clean);
        (failed, first)
    }

    /// Forgets the state of files that no handle holds any more.
    fn forget_closed(&self, inos: &[Ino]) {
        let mut f = lock(&self.files);
        for ino in inos {
            if self.known(*ino).is_none_or(|k| k.opens == 0) {
                f.remove(ino);
            }
        }
        Stats::set(&self.stats.open_files, f.len() as u64);
    }

    /// Drops the dirty data of a file that is gone, and its state once no
    /// handle holds it.
    pub(crate) fn discard_file(&self, ino: Ino) {
        let Some(st) = self.file_state(ino) else {
            return;
        };
        let mut fd = lock(&st.inner);
        self.discard_dirty(&mut fd);
        drop(fd);
        self.forget_closed(&[ino]);
    }

    /// Drops a file's dirty data (its file is gone).
    fn discard_dirty(&self, fd: &mut FileData) {
        let bytes = fd.dirty_bytes;
        fd.dirty.clear();
        fd.dirty_bytes = 0;
        fd.mtime = None;
        let total = self.dirty_total.fetch_sub(bytes, Relaxed) - bytes;
        Stats::set(&self.stats.dirty_bytes, total);
    }

    pub fn write(&self, ino: Ino, off: u64, data: &[u8], kill_setid: bool) -> Result<u32> {
        self.check_running()?;
        let end = off
            .checked_add(data.len() as u64)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or(EngineError::FileTooBig)?;
        let (st, made) = self.file_state_or_new(ino);
        let mut fd = lock(&st.inner);
        self.load(ino, &mut fd)?;
        if kill_setid {
            let setid = fd
                .base
                .as_ref()
                .is_some_and(|b| perm::without_setid(b.0.perm) != b.0.perm);
            if setid {
                drop(fd);
                self.setattr(
                    ino,
                    SetAttr {
                        kill_setid: true,
                        ..SetAttr::default()
                    },
                )?;
                fd = lock(&st.inner);
                self.load(ino, &mut fd)?;
            }
        }
        if data.is_empty() {
            return Ok(0);
        }
        let grew = insert_extent(&mut fd.dirty, off, data);
        fd.dirty_bytes += grew;
        fd.size = fd.size.max(end);
        fd.mtime = Some(Timespec::now());
        let total = self.dirty_total.fetch_add(grew, Relaxed) + grew;
        Stats::set(&self.stats.dirty_bytes, total);
        let over = total > self.cfg.dirty_bytes_max;
        if made || over || fd.dirty_bytes >= self.cfg.file_flush_bytes {
            if over {
                Stats::inc(&self.stats.writer_flushes);
            }
            self.flush_locked(ino, &mut fd)?;
        }
        if made && fd.dirty.is_empty() && self.known(ino).is_none_or(|k| k.opens == 0) {
            drop(fd);
            lock(&self.files).remove(&ino);
        }
        Ok(data.len() as u32)
    }

    /// Uploads and commits the file's dirty extents.
    fn flush_locked(&self, ino: Ino, fd: &mut FileData) -> Result<()> {
        self.flush_with(ino, fd, HashMap::new())
    }

    /// `flush_locked`, with pieces already uploaded (`flush_files`).
    fn flush_with(&self, ino: Ino, fd: &mut FileData, mut uploaded: Uploaded) -> Result<()> {
        if fd.dirty.is_empty() {
            return Ok(());
        }
        Stats::inc(&self.stats.flushes);
        let extents: Vec<(u64, Bytes)> = fd
            .dirty
            .iter()
            .map(|(o, v)| (*o, Bytes::copy_from_slice(v)))
            .collect();
        let dirty_end = fd.end_of_dirty();
        let mtime = fd.mtime.unwrap_or_else(Timespec::now);
        let prev_rev = fd.base.as_ref().map(|b| b.1);
        let mut changed_under = false;
        // Objects uploaded by an earlier attempt (or by `flush_files`), by
        // piece (chunk, offset, length), reused when a conflict makes the
        // commit run again. With when their upload started: past half the
        // upload window they are not named any more (fs.rs `note_upload`).
        let half_window = self.upload_window() / 2;
        let all = pieces(&extents);
        let mut by_chunk: BTreeMap<u64, Vec<Piece>> = BTreeMap::new();
        for p in all {
            by_chunk.entry(p.chunk).or_default().push(p);
        }
        if uploaded.is_empty() {
            self.upload_all(ino, &by_chunk, dirty_end, &mut uploaded)?;
        }
        let groups: Vec<Vec<u64>> = by_chunk
            .keys()
            .copied()
            .collect::<Vec<_>>()
            .chunks(CHUNKS_PER_COMMIT)
            .map(<[u64]>::to_vec)
            .collect();
        let mut last: Option<(Inode, Rev)> = None;
        let ngroups = groups.len();
        for (gi, group) in groups.into_iter().enumerate() {
            // The size and times go with the last group: a reader on
            // another mount sees the new size only with all its data.
            let final_group = gi + 1 == ngroups;
            let ((i, chunks, read_rev), rev) = self.transact(|attempt| {
                uploaded.retain(|_, (_, at)| at.elapsed() < half_window);
                let (mut i, irev, _) = self.inode_at(ino, attempt)?;
                let ikey = self.keys.inode(ino);
                let mut t = Tx::default();
                t.rev(ikey.clone(), irev);
                let new_size = if final_group {
                    i.size.max(dirty_end)
                } else {
                    i.size
                };
                let mut done_chunks = Vec::new();
                if i.inline && new_size <= INLINE_MAX && final_group && ngroups == 1 {
                    // Stays inline: the bytes go into the record.
                    let mut buf = i.extra.clone();
                    buf.resize(new_size as usize, 0);
                    for (o, b) in &extents {
                        let o = *o as usize;
                        buf[o..o + b.len()].copy_from_slice(b);
                    }
                    i.extra = buf;
                } else {
                    let mut inline_piece = None;
                    if i.inline {
                        // Leaves the record: its bytes become the first
                        // piece of chunk 0, under the new ones.
                        if !i.extra.is_empty() {
                            inline_piece = Some(Piece {
                                chunk: 0,
                                off: 0,
                                bytes: Bytes::from(std::mem::take(&mut i.extra)),
                                reusable: false,
                            });
                        }
                        i.inline = false;
                    }
                    let ckeys: Vec<Vec<u8>> =
                        group.iter().map(|c| self.keys.chunk(ino, *c)).collect();
                    let refs: Vec<&[u8]> = ckeys.iter().map(Vec::as_slice).collect();
                    let (got, _) = self.get_many(&refs)?;
                    for (n, c) in group.iter().enumerate() {
                        let mut ps: Vec<Piece> = Vec::new();
                        if *c == 0 {
                            if let Some(p) = inline_piece.take() {
                                ps.push(p);
                            }
                        }
                        ps.extend(by_chunk[c].iter().cloned());
                        let old = match &got[n] {
                            Some(e) => Some((schema::decode_chunk(ino, &e.value)?, e.rev)),
                            None => None,
                        };
                        let chunk =
                            self.write_chunk(&mut t, ino, &i, *c, old, &ps, &mut uploaded)?;
                        done_chunks.push((*c, chunk));
                    }
                    if let Some(p) = inline_piece {
                        // Chunk 0 not in this group: commit the inline
                        // bytes into it too.
                        let k = self.keys.chunk(ino, 0);
                        let (g0, _) = self.get_many(&[&k])?;
                        let old = match &g0[0] {
                            Some(e) => Some((schema::decode_chunk(ino, &e.value)?, e.rev)),
                            None => None,
                        };
                        let chunk =
                            self.write_chunk(&mut t, ino, &i, 0, old, &[p], &mut uploaded)?;
                        done_chunks.push((0, chunk));
                    }
                }
                i.size = new_size;
                if final_group {
                    i.mtime = mtime;
                    i.ctime = mtime;
                }
                t.put(ikey, schema::encode_inode(ino, &i));
                Ok(t.step((i, done_chunks, irev)))
            })?;
            let rev = rev.expect("a flush commits");
            // The record changed since this mount last read or wrote it (by
            // another mount, or by the background clearing a garbage range
            // whose chunks it freed): the chunk records held may name
            // objects that are gone.
            if Some(read_rev) != fd.base.as_ref().map(|b| b.1) {
                fd.chunks.clear();
                changed_under = true;
            }
            for (c, chunk) in chunks {
                if chunk.slices.len() > crate::reclaim::COMPACT_AT {
                    self.compact_later(ino, c);
                }
                fd.chunks.insert(c, Some((chunk, rev)));
            }
            fd.base = Some((i.clone(), rev));
            last = Some((i, rev));
        }
        let (i, rev) = last.expect("at least one group");
        fd.size = fd.size.max(i.size);
        self.discard_dirty(fd);
        // This kernel's pages hold what was just written; they stay valid
        // if they were valid before. (An inode the kernel let go since a
        // deferred close is not known again for it.)
        self.known_if(ino, |k| {
            if !changed_under && k.page_rev.is_some() && k.page_rev == prev_rev {
                k.page_rev = Some(rev);
            } else {
                k.page_rev = None;
            }
        });
        Ok(())
    }

    /// Uploads every piece of a flush at once (the store takes several
    /// requests in parallel; one at a time, a large write went at one
    /// round trip per 4 MiB), before the commits that name them, which
    /// find them in `uploaded`. Not for data that may stay inline.
    fn upload_all(
        &self,
        ino: Ino,
        by_chunk: &BTreeMap<u64, Vec<Piece>>,
        dirty_end: u64,
        uploaded: &mut Uploaded,
    ) -> Result<()> {
        let n: usize = by_chunk.values().map(Vec::len).sum();
        if n < 2 || dirty_end <= INLINE_MAX {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let mut batch = Vec::with_capacity(n);
        let mut done = Vec::with_capacity(n);
        for p in by_chunk.values().flatten() {
            let r = ObjRef {
                id: self.new_obj_id()?,
                size: p.bytes.len() as u32,
                sum: xxhash_rust::xxh3::xxh3_64(&p.bytes),
            };
            batch.push((self.blobs.path(ino, p.chunk, r.id), p.bytes.clone()));
            done.push(((p.chunk, p.off, p.bytes.len() as u32), r, p.bytes.clone()));
        }
        self.blobs.put_many(batch)?;
        for (k, r, b) in done {
            self.cache.put(r.id, b);
            uploaded.insert(k, (r, started));
        }
        Ok(())
    }

    /// Adds `ps` to chunk `c` (its record as read: `old`) in `t`, uploading
    /// each piece as an object (or the whole chunk as one, past
    /// `SLICES_MAX`). Returns the chunk's new record.
    #[allow(clippy::too_many_arguments)]
    fn write_chunk(
        &self,
        t: &mut Tx,
        ino: Ino,
        i: &Inode,
        c: u64,
        old: Option<(Chunk, Rev)>,
        ps: &[Piece],
        uploaded: &mut Uploaded,
    ) -> Result<Chunk> {
        let key = self.keys.chunk(ino, c);
        t.as_read(key.clone(), old.as_ref().map(|o| o.1));
        let mut chunk = match old {
            Some((ch, _)) if i.garbage.is_some_and(|g| g.hides(c, ch.stamp)) => {
                // Garbage a shrink left: its objects go, it starts empty.
                self.queue_objects(t, ino, c, ch.objects().iter().map(|o| o.id).collect())?;
                Chunk::default()
            }
            Some((ch, _)) => ch,
            None => Chunk::default(),
        };
        chunk.stamp = i.dseq;
        if chunk.slices.len() + ps.len() > SLICES_MAX {
            // Rewrite the chunk as one object (the background compacts
            // chunks before this, unless its queue was full).
            Stats::inc(&self.stats.chunk_compactions);
            let mut buf = self.chunk_bytes(ino, c, &chunk)?;
            for p in ps {
                let end = p.off as usize + p.bytes.len();
                if buf.len() < end {
                    buf.resize(end, 0);
                }
                buf[p.off as usize..end].copy_from_slice(&p.bytes);
            }
            let mut dropped: Vec<ObjId> = chunk.objects().iter().map(|o| o.id).collect();
            // This chunk's pieces an earlier attempt uploaded are not
            // needed now (other chunks' stay: this attempt names them).
            let mine: Vec<(u64, u32, u32)> =
                uploaded.keys().filter(|k| k.0 == c).copied().collect();
            for k in mine {
                if let Some((o, _)) = uploaded.remove(&k) {
                    dropped.push(o.id);
                }
            }
            let r = self.upload(ino, c, Bytes::from(buf))?;
            self.queue_objects(t, ino, c, dropped)?;
            chunk.slices = vec![Slice::object_at(0, r)];
        } else {
            for p in ps {
                let k = (c, p.off, p.bytes.len() as u32);
                let r = if !p.reusable {
                    // An earlier attempt's object of it is gc's to collect.
                    self.upload(ino, c, p.bytes.clone())?
                } else if let Some((r, at)) = uploaded.get(&k) {
                    crate::fs::note_upload(*at);
                    *r
                } else {
                    let at = std::time::Instant::now();
                    let r = self.upload(ino, c, p.bytes.clone())?;
                    uploaded.insert(k, (r, at));
                    r
                };
                chunk.slices.push(Slice::object_at(p.off, r));
            }
        }
        t.put(key, schema::encode_chunk(ino, &chunk));
        Ok(chunk)
    }

    /// The chunk as one new object, in `t`: its old objects go to the
    /// delete queue. Returns the record to write (same stamp).
    pub(crate) fn rewrite_chunk(&self, t: &mut Tx, ino: Ino, c: u64, ch: &Chunk) -> Result<Chunk> {
        let mut buf = self.chunk_bytes(ino, c, ch)?;
        // Bytes no slice covers read as zeros: a zero tail (a hole to the
        // chunk's end, left by a shrink) need not be stored.
        let keep = buf.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
        buf.truncate(keep);
        let dropped: Vec<ObjId> = ch.objects().iter().map(|o| o.id).collect();
        self.queue_objects(t, ino, c, dropped)?;
        let mut fresh = Chunk {
            stamp: ch.stamp,
            ..Chunk::default()
        };
        if !buf.is_empty() {
            let r = self.upload(ino, c, Bytes::from(buf))?;
            fresh.slices.push(Slice::object_at(0, r));
        }
        Ok(fresh)
    }

    /// Uploads one object.
    fn upload(&self, ino: Ino, c: u64, b: Bytes) -> Result<ObjRef> {
        crate::fs::note_upload(std::time::Instant::now());
        let id = self.new_obj_id()?;
        let r = ObjRef {
            id,
            size: b.len() as u32,
            sum: xxhash_rust::xxh3::xxh3_64(&b),
        };
        let path = self.blobs.path(ino, c, id);
        self.cache.put(id, b.clone());
        self.blobs.put_many(vec![(path, b)])?;
        Ok(r)
    }

    /// Deletes an object this mount uploaded and no record names (its
    /// commit failed its conditions, so applied nothing). Best effort: what
    /// it cannot delete, gc collects.
    pub(crate) fn discard_unnamed(&self, ino: Ino, c: u64, id: ObjId) {
        self.cache.forget(&[id]);
        if let Some(d) = &self.disk {
            d.forget(&[id]);
        }
        match self.blobs.delete_many(vec![self.blobs.path(ino, c, id)]) {
            Ok(()) => Stats::inc(&self.stats.objects_discarded),
            Err(e) => tracing::debug!("an unnamed object stays for gc: {e}"),
        }
    }

    /// Queues objects of a chunk that no record names any more.
    pub(crate) fn queue_objects(
        &self,
        t: &mut Tx,
        ino: Ino,
        c: u64,
        objs: Vec<ObjId>,
    ) -> Result<()> {
        for part in objs.chunks(schema::WORK_OBJECTS_MAX) {
            t.put(
                self.queue_key()?,
                schema::encode_work(&Work::Objects {
                    ino,
                    chunk: c,
                    objs: part.to_vec(),
                }),
            );
        }
        Ok(())
    }

    /// An object's bytes, from the cache or the store.
    fn object(&self, ino: Ino, c: u64, r: &ObjRef) -> Result<Bytes> {
        if let Some(b) = self.cache.get(r.id) {
            return Ok(b);
        }
        if let Some(b) = self.disk.as_ref().and_then(|d| d.get(r)) {
            self.cache.put(r.id, b.clone());
            return Ok(b);
        }
        let b = self.blobs.get(ino, c, r)?;
        self.cache.put(r.id, b.clone());
        if let Some(d) = &self.disk {
            d.put(r.id, &b);
        }
        Ok(b)
    }

    /// A chunk's bytes as its slices make them (up to its last slice's end).
    fn chunk_bytes(&self, ino: Ino, c: u64, chunk: &Chunk) -> Result<Vec<u8>> {
        let end = chunk
            .slices
            .iter()
            .map(|s| (s.off + s.len) as usize)
            .max()
            .unwrap_or(0);
        let mut buf = vec![0u8; end];
        for s in &chunk.slices {
            let dst = &mut buf[s.off as usize..(s.off + s.len) as usize];
            match &s.obj {
                Some(r) => {
                    let b = self.object(ino, c, r)?;
                    dst.copy_from_slice(&b[s.obj_off as usize..(s.obj_off + s.len) as usize]);
                }
                None => dst.fill(0),
            }
        }
        Ok(buf)
    }

    /// Copies bytes `[start, start + out.len())` of chunk `c` into `out`.
    fn read_chunk(
        &self,
        ino: Ino,
        c: u64,
        chunk: &Chunk,
        start: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let base = c * CHUNK_SIZE;
        let (a, b) = (start, start + out.len() as u64);
        for s in &chunk.slices {
            let (sa, sb) = (base + s.off as u64, base + (s.off + s.len) as u64);
            let (lo, hi) = (a.max(sa), b.min(sb));
            if lo >= hi {
                continue;
            }
            let dst = &mut out[(lo - a) as usize..(hi - a) as usize];
            match &s.obj {
                Some(r) => {
                    let bytes = self.object(ino, c, r)?;
                    let from = s.obj_off as u64 + (lo - sa);
                    dst.copy_from_slice(&bytes[from as usize..(from + hi - lo) as usize]);
                }
                None => dst.fill(0),
            }
        }
        Ok(())
    }

    pub fn read(&self, ino: Ino, off: u64, len: u32) -> Result<Vec<u8>> {
        self.check_running()?;
        let st = self.file_state(ino);
        let mut own = FileData::default();
        let mut guard: Option<MutexGuard<'_, FileData>> = None;
        let fd: &mut FileData = match &st {
            Some(s) => guard.insert(lock(&s.inner)),
            None => &mut own,
        };
        let open_here = st.is_some();
        match self.read_in(ino, fd, off, len, open_here) {
            Err(EngineError::Corrupt { .. }) => {
                // A chunk record held here may name objects that a newer
                // record replaced (another mount's overwrite or compaction)
                // and the delete queue removed: read the records again,
                // once. Only a fresh record naming a bad object is damage.
                Stats::inc(&self.stats.stale_chunk_rereads);
                fd.chunks.clear();
                if fd.dirty.is_empty() {
                    fd.base = None;
                }
                self.read_in(ino, fd, off, len, open_here)
                    .inspect_err(|e| tracing::error!("{ino}: {e}"))
            }
            r => r,
        }
    }

    fn read_in(
        &self,
        ino: Ino,
        fd: &mut FileData,
        off: u64,
        len: u32,
        open_here: bool,
    ) -> Result<Vec<u8>> {
        self.load(ino, fd)?;
        let (i, _) = fd.base.clone().expect("loaded");
        let size = fd.size;
        if off >= size || len == 0 {
            return Ok(Vec::new());
        }
        let end = size.min(off + len as u64);
        let mut out = vec![0u8; (end - off) as usize];
        if i.inline {
            let e = (i.extra.len() as u64).min(end);
            if off < e {
                out[..(e - off) as usize].copy_from_slice(&i.extra[off as usize..e as usize]);
            }
        } else {
            let first = off / CHUNK_SIZE;
            let last = (end - 1) / CHUNK_SIZE;
            let missing: Vec<u64> = (first..=last)
                .filter(|c| !fd.chunks.contains_key(c))
                .collect();
            if !missing.is_empty() {
                let keys: Vec<Vec<u8>> = missing.iter().map(|c| self.keys.chunk(ino, *c)).collect();
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let (got, _) = self.get_many(&refs)?;
                for (c, e) in missing.iter().zip(got) {
                    let v = match e {
                        Some(e) => Some((schema::decode_chunk(ino, &e.value)?, e.rev)),
                        None => None,
                    };
                    fd.chunks.insert(*c, v);
                }
            }
            for c in first..=last {
                let Some(Some((chunk, _))) = fd.chunks.get(&c) else {
                    continue;
                };
                if i.garbage.is_some_and(|g| g.hides(c, chunk.stamp)) {
                    continue;
                }
                let a = off.max(c * CHUNK_SIZE);
                let b = end.min((c + 1) * CHUNK_SIZE);
                let chunk = chunk.clone();
                self.read_chunk(
                    ino,
                    c,
                    &chunk,
                    a,
                    &mut out[(a - off) as usize..(b - off) as usize],
                )?;
            }
            // Chunk records are kept only while the file is open here.
            if !open_here {
                fd.chunks.clear();
            }
        }
        for (o, v) in fd.dirty.range(..end) {
            let (a, b) = ((*o).max(off), (o + v.len() as u64).min(end));
            if a < b {
                out[(a - off) as usize..(b - off) as usize]
                    .copy_from_slice(&v[(a - o) as usize..(b - o) as usize]);
            }
        }
        Ok(out)
    }

    /// Attributes as this mount sees them: the record, with the size and
    /// mtime of data written here and not yet committed.
    pub(crate) fn overlay(&self, a: &mut Attr) {
        if let Some(st) = self.file_state(a.ino) {
            let fd = lock(&st.inner);
            if !fd.dirty.is_empty() {
                a.size = fd.size;
                a.blocks = a.size.div_ceil(512);
                if let Some(m) = fd.mtime {
                    a.mtime = m;
                    a.ctime = m;
                }
            }
        }
    }

    /// SETATTR: mode, owner, times and size in one commit. A size change
    /// first commits what was written here.
    pub fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr> {
        self.check_running()?;
        let st = set.size.map(|_| self.file_state_or_new(ino));
        let mut guard = match &st {
            Some((s, _)) => Some(lock(&s.inner)),
            None => None,
        };
        if let Some(fd) = guard.as_deref_mut() {
            self.flush_locked(ino, fd)?;
        }
        if let Some(size) = set.size {
            if size > MAX_FILE_SIZE {
                return Err(EngineError::FileTooBig);
            }
        }
        let (attr, rev) = loop {
            let r = self.transact(|n| {
                let now = Timespec::now();
                let (mut i, rev, times) = self.inode_at(ino, n)?;
                let mut t = Tx::default();
                t.rev(self.keys.inode(ino), rev);
                if let Some(size) = set.size {
                    match i.kind {
                        FileKind::Regular => {}
                        FileKind::Directory => return Err(EngineError::IsDir),
                        _ => return Err(EngineError::Invalid("truncate of a special file")),
                    }
                    if size != i.size {
                        self.resize(&mut t, ino, &mut i, size)?;
                    }
                }
                if let Some(mode) = set.mode {
                    i.perm = (mode & 0o7777) as u16;
                }
                if let Some(uid) = set.uid {
                    i.uid = uid;
                }
                if let Some(gid) = set.gid {
                    i.gid = gid;
                }
                let cleared = set.kill_setid
                    && set.mode.is_none()
                    && i.kind != FileKind::Directory
                    && perm::drop_setid(&mut i.perm);
                let _ = cleared;
                let resolve = |t: SetTime| match t {
                    SetTime::Now => now,
                    SetTime::At(t) => t,
                };
                if let Some(a) = set.atime {
                    i.atime = resolve(a);
                }
                if let Some(m) = set.mtime {
                    i.mtime = resolve(m);
                } else if set.size.is_some() {
                    i.mtime = now;
                }
                i.ctime = set.ctime.unwrap_or(now);
                let mut times = times;
                if i.kind == FileKind::Directory {
                    // A directory's times live in its times key.
                    let old = times.expect("a directory has its times");
                    let nt = schema::DirTimes {
                        mtime: if set.mtime.is_some() {
                            i.mtime
                        } else {
                            old.mtime
                        },
                        ctime: i.ctime,
                    };
                    t.put(self.keys.dir_times(ino), schema::encode_dir_times(&nt));
                    times = Some(nt);
                }
                t.put(self.keys.inode(ino), schema::encode_inode(ino, &i));
                Ok(t.step((attr_of(ino, &i, times.as_ref()), i)))
            });
            match r {
                Err(EngineError::Invalid("garbage pending")) => {
                    // A shrink below a range still being freed: free it now.
                    self.drain_garbage(ino)?;
                }
                r => break r?,
            }
        };
        let ((mut attr, i), rev) = (attr, rev);
        if let (Some(fd), Some(rev)) = (guard.as_deref_mut(), rev) {
            fd.size = i.size;
            fd.chunks.clear();
            let prev = fd.base.as_ref().map(|b| b.1);
            fd.base = Some((i, rev));
            if set.size.is_some() {
                // The kernel applied the truncate to its own pages.
                self.known_mut(ino, |k| {
                    if k.page_rev.is_some() && k.page_rev == prev {
                        k.page_rev = Some(rev);
                    }
                });
            }
        }
        drop(guard);
        if let Some((s, made)) = st {
            if made && self.known(ino).is_none_or(|k| k.opens == 0) {
                let fd = lock(&s.inner);
                if fd.dirty.is_empty() {
                    drop(fd);
                    lock(&self.files).remove(&ino);
                }
            }
        }
        self.overlay(&mut attr);
        Ok(attr)
    }

    /// Changes a regular file's size in `t` (its record in `i`).
    fn resize(&self, t: &mut Tx, ino: Ino, i: &mut Inode, size: u64) -> Result<()> {
        let old = i.size;
        i.size = size;
        if size >= old {
            return Ok(());
        }
        if i.inline {
            i.extra.truncate(size as usize);
            return Ok(());
        }
        // Chunks wholly past the new end become garbage.
        let from = size.div_ceil(CHUNK_SIZE);
        let to = old.div_ceil(CHUNK_SIZE);
        if to > from {
            let g = match i.garbage {
                Some(g) if from <= g.from => Garbage {
                    from,
                    to: to.max(g.to),
                    stamp: i.dseq + 1,
                },
                Some(_) => return Err(EngineError::Invalid("garbage pending")),
                None => Garbage {
                    from,
                    to,
                    stamp: i.dseq + 1,
                },
            };
            i.dseq += 1;
            i.garbage = Some(g);
            t.put(
                self.queue_key()?,
                schema::encode_work(&Work::Chunks {
                    ino,
                    from: g.from,
                    to: g.to,
                    stamp: g.stamp,
                }),
            );
        }
        // The rest of the chunk the new end falls in reads as a hole.
        if !size.is_multiple_of(CHUNK_SIZE) {
            let c = size / CHUNK_SIZE;
            let k = self.keys.chunk(ino, c);
            let (got, _) = self.get_many(&[&k])?;
            if let Some(e) = &got[0] {
                let ch = schema::decode_chunk(ino, &e.value)?;
                if !i.garbage.is_some_and(|g| g.hides(c, ch.stamp)) {
                    let off = (size % CHUNK_SIZE) as u32;
                    self.hole(
                        t,
                        ino,
                        i,
                        c,
                        Some((ch, e.rev)),
                        off,
                        CHUNK_SIZE as u32 - off,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// A hole over `[off, off + len)` of chunk `c` in `t`.
    #[allow(clippy::too_many_arguments)]
    fn hole(
        &self,
        t: &mut Tx,
        ino: Ino,
        i: &Inode,
        c: u64,
        old: Option<(Chunk, Rev)>,
        off: u32,
        len: u32,
    ) -> Result<()> {
        let key = self.keys.chunk(ino, c);
        t.as_read(key.clone(), old.as_ref().map(|o| o.1));
        let Some((mut ch, _)) = old else {
            return Ok(());
        };
        ch.stamp = ch.stamp.max(i.dseq);
        if ch.slices.len() + 1 > SLICES_MAX {
            Stats::inc(&self.stats.chunk_compactions);
            let mut buf = self.chunk_bytes(ino, c, &ch)?;
            let end = (off + len) as usize;
            if buf.len() > off as usize {
                let stop = end.min(buf.len());
                buf[off as usize..stop].fill(0);
            }
            let dropped: Vec<ObjId> = ch.objects().iter().map(|o| o.id).collect();
            self.queue_objects(t, ino, c, dropped)?;
            ch.slices.clear();
            if !buf.is_empty() {
                let r = self.upload(ino, c, Bytes::from(buf))?;
                ch.slices.push(Slice::object_at(0, r));
            }
        } else {
            ch.slices.push(Slice {
                off,
                len,
                obj: None,
                obj_off: 0,
            });
        }
        if ch.slices.is_empty() {
            t.del(key);
        } else {
            t.put(key, schema::encode_chunk(ino, &ch));
        }
        Ok(())
    }

    /// Zeros `[off, end)` of a file (no size change).
    fn zero_range(&self, ino: Ino, off: u64, end: u64) -> Result<()> {
        if off >= end {
            return Ok(());
        }
        let chunks: Vec<u64> = (off / CHUNK_SIZE..=(end - 1) / CHUNK_SIZE).collect();
        for group in chunks.chunks(CHUNKS_PER_COMMIT) {
            self.transact(|_| {
                let mut keys = vec![self.keys.inode(ino)];
                keys.extend(group.iter().map(|c| self.keys.chunk(ino, *c)));
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let (got, _) = self.get_many(&refs)?;
                let Some(ie) = &got[0] else {
                    return Err(EngineError::NotFound);
                };
                let mut i = schema::decode_inode(ino, &ie.value)?;
                let mut t = Tx::default();
                t.rev(keys[0].clone(), ie.rev);
                if i.inline {
                    let stop = (end as usize).min(i.extra.len());
                    if (off as usize) < stop {
                        i.extra[off as usize..stop].fill(0);
                    }
                } else {
                    for (n, c) in group.iter().enumerate() {
                        let old = match &got[n + 1] {
                            Some(e) => {
                                let ch = schema::decode_chunk(ino, &e.value)?;
                                if i.garbage.is_some_and(|g| g.hides(*c, ch.stamp)) {
                                    t.rev(keys[n + 1].clone(), e.rev);
                                    continue;
                                }
                                Some((ch, e.rev))
                            }
                            None => None,
                        };
                        let a = off.max(c * CHUNK_SIZE) - c * CHUNK_SIZE;
                        let b = end.min((c + 1) * CHUNK_SIZE) - c * CHUNK_SIZE;
                        self.hole(&mut t, ino, &i, *c, old, a as u32, (b - a) as u32)?;
                    }
                }
                let now = Timespec::now();
                i.mtime = now;
                i.ctime = now;
                t.put(keys[0].clone(), schema::encode_inode(ino, &i));
                Ok(t.step(()))
            })?;
        }
        Ok(())
    }

    pub fn fallocate(&self, ino: Ino, off: u64, len: u64, mode: i32) -> Result<()> {
        let end = off
            .checked_add(len)
            .filter(|e| *e <= MAX_FILE_SIZE)
            .ok_or(EngineError::FileTooBig)?;
        let keep = mode & falloc::KEEP_SIZE != 0;
        let what = mode & !falloc::KEEP_SIZE;
        self.flush(ino)?;
        let size = self.getattr(ino)?.size;
        match what {
            0 => {}
            falloc::PUNCH_HOLE if keep => self.zero_range(ino, off, end.min(size))?,
            falloc::ZERO_RANGE => self.zero_range(ino, off, end.min(size))?,
            _ => return Err(EngineError::NotSupported),
        }
        if !keep && end > size {
            self.setattr(
                ino,
                SetAttr {
                    size: Some(end),
                    ..SetAttr::default()
                },
            )?;
        }
        if let Some(st) = self.file_state(ino) {
            let mut fd = lock(&st.inner);
            fd.base = None;
            fd.chunks.clear();
        }
        Ok(())
    }

    pub fn lseek(&self, ino: Ino, off: u64, whence: i32) -> Result<u64> {
        let size = self.getattr(ino)?.size;
        match whence {
            libc::SEEK_DATA if off < size => Ok(off),
            libc::SEEK_HOLE if off < size => Ok(size),
            libc::SEEK_DATA | libc::SEEK_HOLE => Err(EngineError::NoSuchOffset),
            _ => Err(EngineError::Invalid("lseek whence")),
        }
    }

    /// Frees the garbage range of `ino` now (a shrink that cannot merge its
    /// range with the pending one waits for it).
    fn drain_garbage(&self, ino: Ino) -> Result<()> {
        let (i, _, _) = self.inode(ino)?;
        if let Some(g) = i.garbage {
            self.free_chunks(ino, g.from, g.to, g.stamp)?;
        }
        Ok(())
    }

    /// Another mount changed `ino`: what this mount cached of it is read
    /// again before its next use.
    pub(crate) fn forget_cached(&self, ino: Ino) {
        if let Some(st) = self.file_state(ino) {
            let mut fd = lock(&st.inner);
            fd.chunks.clear();
            if fd.dirty.is_empty() {
                fd.base = None;
            }
        }
    }

    /// Describes an object for messages.
    pub(crate) fn object_name(ino: Ino, c: u64, id: ObjId) -> String {
        format!("{ino} chunk {c} object {}", fmt_id(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_merge_what_they_touch() {
        let mut d = BTreeMap::new();
        assert_eq!(insert_extent(&mut d, 10, b"abc"), 3);
        assert_eq!(insert_extent(&mut d, 13, b"de"), 2);
        assert_eq!(d.len(), 1);
        assert_eq!(insert_extent(&mut d, 20, b"x"), 1);
        assert_eq!(insert_extent(&mut d, 5, b"0123456"), 5);
        assert_eq!(d.len(), 2);
        assert_eq!(d[&5], b"0123456cde".to_vec());
        assert_eq!(insert_extent(&mut d, 14, b"ZZZZZZ"), 5);
        assert_eq!(d.len(), 1);
        assert_eq!(d[&5], b"0123456cdZZZZZZx".to_vec());
    }

    #[test]
    fn pieces_never_cross_a_chunk() {
        let b = Bytes::from(vec![1u8; 10]);
        let ps = pieces(&[(CHUNK_SIZE - 4, b)]);
        assert_eq!(ps.len(), 2);
        assert_eq!(
            (ps[0].chunk, ps[0].off, ps[0].bytes.len()),
            (0, (CHUNK_SIZE - 4) as u32, 4)
        );
        assert_eq!((ps[1].chunk, ps[1].off, ps[1].bytes.len()), (1, 0, 6));
    }
}
