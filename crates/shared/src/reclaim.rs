//! Everything a shared volume frees in the background, in bounded batches,
//! by one thread per mount (`churnfs-reclaim`):
//!
//! - **frees**: files unlinked while held here, once the kernel lets go
//!   (last release or FORGET): their record, `O` record and xattrs go, and
//!   their data to the delete queue. Queued in memory (at most
//!   `frees_queued_max`; past it the caller frees inline), so a close never
//!   waits for the engine; a crash leaves the `O` records, reclaimed below.
//! - **the delete queue**: this session's `Q` items, each a range of chunks
//!   or a list of objects: objects are deleted first, then the records that
//!   named them, `CHUNK_BATCH` at a time; an item goes when its work is done.
//!   A crash between the two repeats the work (deleting an object twice is
//!   harmless).
//! - **ended sessions**: a session whose `E` key is gone (its mount died or
//!   was partitioned past its lease) while its `G` key remains. Any mount
//!   claims it (writes itself into `G`, conditioned on no live claimer),
//!   frees its `O` files and does its `Q` items, then deletes `G`. The work
//!   is proportional to what that session left, never a scan of other
//!   sessions' keys; found by the watch (the `E` delete) and, at mount, by
//!   listing `G` (one key per session not yet reclaimed).

use crate::fs::{lock, SharedFs, Step, Tx};
use crate::schema::{self, Key, ObjId, Work};
use crate::stats::Stats;
use churnfs_vfs::{EngineError, Ino, Result};
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// Inodes freed in one commit (each takes up to 4 writes).
pub const FREE_BATCH: usize = 24;
/// Chunk records deleted in one commit.
pub const CHUNK_BATCH: usize = 32;
/// Queue items read at a time.
const QUEUE_PAGE: usize = 16;
/// Writes past which a group of small queue items is committed (an item
/// adds at most `CHUNK_BATCH`: within the engine's 128).
const GROUP_OPS: usize = 64;

/// Small delete-queue items done together (`drain_queue`).
#[derive(Default)]
struct Group {
    t: Tx,
    objs: Vec<object_store::path::Path>,
    items: u64,
    chunks: u64,
}

#[derive(Default)]
pub(crate) struct Background {
    pub(crate) frees: Mutex<VecDeque<Ino>>,
    /// Chunks a flush left fragmented, to rewrite as one object once no
    /// flush has gone into them for `compact_quiet`, with when the last one
    /// did (at most `COMPACT_QUEUE_MAX`; past it a chunk waits for the
    /// flush that passes `SLICES_MAX`, which rewrites it inline).
    compact: Mutex<VecDeque<(Ino, u64, Instant)>>,
    /// Ended sessions to reclaim (at most `SESSIONS_MAX`).
    sessions: Mutex<VecDeque<u64>>,
    wake: (Mutex<bool>, Condvar),
}

/// Ended sessions waiting to be reclaimed by this mount.
const SESSIONS_MAX: usize = 4096;
/// Fragmented chunks waiting for the background rewrite.
const COMPACT_QUEUE_MAX: usize = 1024;
/// A chunk with more slices than this after a flush is compacted in the
/// background.
pub(crate) const COMPACT_AT: usize = 8;

impl Background {
    pub(crate) fn wake(&self) {
        let (m, cv) = &self.wake;
        *lock(m) = true;
        cv.notify_all();
    }

    fn nap(&self, d: Duration) {
        let (m, cv) = &self.wake;
        let mut w = lock(m);
        if !*w {
            w = cv.wait_timeout(w, d).unwrap_or_else(|p| p.into_inner()).0;
        }
        *w = false;
    }

    /// Work went into this session's delete queue.
    pub(crate) fn queued(&self) {
        self.wake();
    }

    /// Session `s` ended: reclaim it soon.
    pub(crate) fn reclaim_later(&self, s: u64) {
        let mut q = lock(&self.sessions);
        if !q.contains(&s) && q.len() < SESSIONS_MAX {
            q.push_back(s);
        }
        drop(q);
        self.wake();
    }
}

impl SharedFs {
    /// An unlinked inode the kernel let go: freed by the background, or
    /// now when its queue is full.
    pub(crate) fn queue_free(&self, ino: Ino) {
        let mut q = lock(&self.bg.frees);
        if q.len() < self.cfg.frees_queued_max {
            q.push_back(ino);
            Stats::set(&self.stats.frees_pending, q.len() as u64);
            drop(q);
            self.bg.wake();
            return;
        }
        drop(q);
        if let Err(e) = self.free_unlinked(&[ino]) {
            tracing::warn!("{ino}: free failed, left to reclaim: {e}");
        }
    }

    /// Frees unlinked inodes held by this session (their `O` records).
    pub(crate) fn free_unlinked(&self, inos: &[Ino]) -> Result<()> {
        for part in inos.chunks(FREE_BATCH) {
            let (sid, _) = self.session.current()?;
            self.free_opens(sid, part)?;
            Stats::add(&self.stats.unlinked_freed, part.len() as u64);
            Stats::sub(&self.stats.unlinked_inodes, part.len() as u64);
        }
        Ok(())
    }

    /// Frees what `O` records of session `sid` keep: each inode still
    /// unlinked is freed with its record; one linked again (a tmpfile that
    /// got a name) only loses its `O` record.
    fn free_opens(&self, sid: u64, inos: &[Ino]) -> Result<usize> {
        let (n, _) = self.transact(|attempt| {
            let okeys: Vec<Vec<u8>> = inos.iter().map(|i| self.keys.open(sid, *i)).collect();
            let mut t = Tx::default();
            let mut n = 0;
            if attempt == 0 && sid == self.session.id() {
                // This session's own records, as it wrote them; the
                // inodes from the cache.
                for (k, ino) in inos.iter().enumerate() {
                    t.exists(okeys[k].clone()).del(okeys[k].clone());
                    n += 1;
                    match self.inode_cached(*ino) {
                        Ok((i, rev, _)) => {
                            t.rev(self.keys.inode(*ino), rev);
                            if i.nlink == 0 {
                                self.free_ops(&mut t, *ino, &i)?;
                            }
                        }
                        Err(EngineError::NotFound) => {
                            t.absent(self.keys.inode(*ino));
                        }
                        Err(e) => return Err(e),
                    }
                }
                return Ok(t.step(n));
            }
            let mut keys = Vec::with_capacity(inos.len() * 2);
            for (k, ino) in inos.iter().enumerate() {
                keys.push(okeys[k].clone());
                keys.push(self.keys.inode(*ino));
            }
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let (got, _) = self.get_many(&refs)?;
            for (k, ino) in inos.iter().enumerate() {
                let Some(o) = &got[2 * k] else { continue };
                t.rev(keys[2 * k].clone(), o.rev).del(keys[2 * k].clone());
                n += 1;
                let Some(ie) = &got[2 * k + 1] else { continue };
                let i = schema::decode_inode(*ino, &ie.value)?;
                t.rev(keys[2 * k + 1].clone(), ie.rev);
                if i.nlink == 0 {
                    self.free_ops(&mut t, *ino, &i)?;
                }
            }
            if t.txn.ops.is_empty() {
                return Ok(Step::Done(0));
            }
            Ok(t.step(n))
        })?;
        Ok(n)
    }

    /// Deletes chunk records of `ino` in `[from, to)` whose stamp is below
    /// `stamp`, objects first; then clears the inode's garbage range if it
    /// is this one.
    pub(crate) fn free_chunks(&self, ino: Ino, from: u64, to: u64, stamp: u64) -> Result<()> {
        let mut at = from;
        loop {
            let range = self.keys.chunks(ino, at, to);
            let page = self.scan(&range, CHUNK_BATCH)?;
            if page.is_empty() {
                break;
            }
            let mut t = Tx::default();
            let mut objs = Vec::new();
            for e in &page {
                let Some(Key::Chunk(_, c)) = self.keys.decode(&e.key) else {
                    return Err(EngineError::corrupt(Some(ino), "chunk key out of place"));
                };
                at = c + 1;
                let ch = schema::decode_chunk(ino, &e.value)?;
                if ch.stamp >= stamp {
                    continue;
                }
                for o in ch.objects() {
                    objs.push(self.blobs.path(ino, c, o.id));
                }
                let ids: Vec<_> = ch.objects().iter().map(|o| o.id).collect();
                self.cache.forget(&ids);
                if let Some(d) = &self.disk {
                    d.forget(&ids);
                }
                t.rev(e.key.clone(), e.rev).del(e.key.clone());
            }
            let n = t.txn.ops.len() as u64;
            self.blobs.delete_many(objs)?;
            if n > 0 {
                // A record rewritten meanwhile (a write into the range)
                // fails its condition: the next scan sees it again with a
                // stamp that keeps it.
                let deadline = Instant::now() + self.cfg.op_timeout;
                if self.commit(t.txn, deadline)?.is_some() {
                    Stats::add(&self.stats.chunks_freed, n);
                } else {
                    at = from;
                }
            }
            if page.len() < CHUNK_BATCH && at != from {
                break;
            }
            if at == u64::MAX || (to != u64::MAX && at >= to) {
                break;
            }
        }
        if stamp == u64::MAX {
            // A whole file's data: its record is gone.
            return Ok(());
        }
        // The range is free: the inode stops hiding it.
        let ik = self.keys.inode(ino);
        self.transact(|_| {
            let (got, _) = self.get_many(&[&ik])?;
            let Some(e) = &got[0] else {
                return Ok(Step::Done(()));
            };
            let mut i = schema::decode_inode(ino, &e.value)?;
            match i.garbage {
                Some(g) if g.from == from && g.to == to && g.stamp == stamp => {
                    i.garbage = None;
                    let mut t = Tx::default();
                    t.rev(ik.clone(), e.rev)
                        .put(ik.clone(), schema::encode_inode(ino, &i));
                    Ok(t.step(()))
                }
                _ => Ok(Step::Done(())),
            }
        })?;
        Ok(())
    }

    /// Does the delete queue items of session `sid`, at most `max` of them;
    /// returns how many were done.
    pub(crate) fn drain_queue(&self, sid: u64, max: usize) -> Result<usize> {
        let range = self.keys.queue_of(sid);
        let items = self.scan(&range, QUEUE_PAGE.min(max.max(1)))?;
        let mut done = 0;
        // Small items (a whole small file's data, a list of objects) go
        // together: their objects in one batch of deletes, their records
        // and queue items in one commit.
        let mut group = Group::default();
        for e in items {
            if let Ok(Work::Chunks { ino, .. }) = schema::decode_work(&e.value) {
                // Its chunk records are read and removed in the engine.
                if !self.release_born(ino)? {
                    continue;
                }
            }
            match self.take_small(&e, &mut group) {
                Ok(true) => {
                    if group.t.txn.ops.len() >= GROUP_OPS {
                        done += self.finish_group(std::mem::take(&mut group))?;
                    }
                    continue;
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::error!("delete queue item skipped: {err}");
                    continue;
                }
            }
            match schema::decode_work(&e.value) {
                Ok(Work::Chunks {
                    ino,
                    from,
                    to,
                    stamp,
                }) => self.free_chunks(ino, from, to, stamp)?,
                Ok(Work::Objects { ino, chunk, objs }) => {
                    self.cache.forget(&objs);
                    if let Some(d) = &self.disk {
                        d.forget(&objs);
                    }
                    let paths = objs
                        .iter()
                        .map(|o| self.blobs.path(ino, chunk, *o))
                        .collect();
                    self.blobs.delete_many(paths)?;
                }
                Err(err) => {
                    // Not ours to guess at: fsck reports it.
                    tracing::error!("delete queue item skipped: {err}");
                    continue;
                }
            }
            let mut t = Tx::default();
            t.rev(e.key.clone(), e.rev).del(e.key.clone());
            let deadline = Instant::now() + self.cfg.op_timeout;
            if self.commit(t.txn, deadline)?.is_some() {
                done += 1;
                self.items_done(1);
            }
        }
        done += self.finish_group(group)?;
        Ok(done)
    }

    fn items_done(&self, n: u64) {
        Stats::add(&self.stats.delete_done, n);
        let queued = self.stats.delete_queued.load(Relaxed);
        let all_done = self.stats.delete_done.load(Relaxed);
        Stats::set(&self.stats.delete_backlog, queued.saturating_sub(all_done));
    }

    /// Adds queue item `e` to `g` if it is small: a list of objects, or a
    /// whole file's data in fewer than `CHUNK_BATCH` chunks. False: it is
    /// done on its own.
    fn take_small(&self, e: &churnfs_kv::Entry, g: &mut Group) -> Result<bool> {
        match schema::decode_work(&e.value)? {
            Work::Objects { ino, chunk, objs } => {
                self.forget_objects(&objs);
                g.objs
                    .extend(objs.iter().map(|o| self.blobs.path(ino, chunk, *o)));
            }
            Work::Chunks {
                ino,
                from: 0,
                to: u64::MAX,
                stamp: u64::MAX,
            } => {
                let page = self.scan(&self.keys.chunks(ino, 0, u64::MAX), CHUNK_BATCH)?;
                if page.len() >= CHUNK_BATCH {
                    return Ok(false);
                }
                for c in &page {
                    let Some(Key::Chunk(_, n)) = self.keys.decode(&c.key) else {
                        return Err(EngineError::corrupt(Some(ino), "chunk key out of place"));
                    };
                    let ch = schema::decode_chunk(ino, &c.value)?;
                    let ids: Vec<ObjId> = ch.objects().iter().map(|o| o.id).collect();
                    self.forget_objects(&ids);
                    g.objs
                        .extend(ids.iter().map(|id| self.blobs.path(ino, n, *id)));
                    g.t.rev(c.key.clone(), c.rev).del(c.key.clone());
                    g.chunks += 1;
                }
            }
            _ => return Ok(false),
        }
        g.t.rev(e.key.clone(), e.rev).del(e.key.clone());
        g.items += 1;
        Ok(true)
    }

    fn forget_objects(&self, ids: &[ObjId]) {
        self.cache.forget(ids);
        if let Some(d) = &self.disk {
            d.forget(ids);
        }
    }

    /// Deletes a group's objects, then commits the removal of its records
    /// and items. A commit that fails (a record changed meanwhile) leaves
    /// the items for the next round, which does them again.
    fn finish_group(&self, g: Group) -> Result<usize> {
        if g.items == 0 {
            return Ok(0);
        }
        self.blobs.delete_many(g.objs)?;
        let deadline = Instant::now() + self.cfg.op_timeout;
        if self.commit(g.t.txn, deadline)?.is_none() {
            return Ok(0);
        }
        Stats::add(&self.stats.chunks_freed, g.chunks);
        self.items_done(g.items);
        Ok(g.items as usize)
    }

    /// Reclaims what ended session `s` left: claims it, frees its
    /// open-unlinked files, does its delete queue, removes its `G` key.
    /// Ok(false) when it is alive or another live session reclaims it.
    pub fn reclaim_session(&self, s: u64) -> Result<bool> {
        let (me, _) = self.session.current()?;
        if s == me {
            return Ok(false);
        }
        let gk = self.keys.registry(s);
        let ek = self.keys.session(s);
        let (claimed, _) = self.transact(|_| {
            let (got, _) = self.get_many(&[&gk, &ek])?;
            let Some(g) = &got[0] else {
                return Ok(Step::Done(false));
            };
            if got[1].is_some() {
                return Ok(Step::Done(false));
            }
            let mut info = schema::decode_session(&g.value)?;
            if info.reclaimer == me {
                return Ok(Step::Done(true));
            }
            if info.reclaimer != 0 {
                let ck = self.keys.session(info.reclaimer);
                let (c, _) = self.get_many(&[&ck])?;
                if c[0].is_some() {
                    return Ok(Step::Done(false));
                }
            }
            info.reclaimer = me;
            let mut t = Tx::default();
            t.rev(gk.clone(), g.rev)
                .absent(ek.clone())
                .put(gk.clone(), schema::encode_session(&info));
            Ok(t.step(true))
        })?;
        if !claimed {
            return Ok(false);
        }
        let opens = self.keys.opens_of(s);
        loop {
            let page = self.scan(&opens, FREE_BATCH)?;
            if page.is_empty() {
                break;
            }
            let inos: Vec<Ino> = page
                .iter()
                .filter_map(|e| match self.keys.decode(&e.key) {
                    Some(Key::Open(_, ino)) => Some(ino),
                    _ => None,
                })
                .collect();
            let n = self.free_opens(s, &inos)?;
            Stats::add(&self.stats.reclaimed_inodes, n as u64);
        }
        while self.drain_queue(s, QUEUE_PAGE)? > 0 {}
        // Nothing of the session is left: its registration goes. (A
        // condition that fails here means work appeared: the next round
        // finds the session again.)
        let mut t = Tx::default();
        t.exists(gk.clone())
            .empty(self.keys.opens_of(s))
            .empty(self.keys.queue_of(s))
            .del(gk.clone());
        let deadline = Instant::now() + self.cfg.op_timeout;
        if self.commit(t.txn, deadline)?.is_none() {
            return Ok(false);
        }
        Stats::inc(&self.stats.sessions_reclaimed);
        tracing::info!("reclaimed what session {s} left");
        Ok(true)
    }

    /// Sessions registered whose `E` key is gone: one read of `G` (a key
    /// per session not yet reclaimed) and of their `E` keys.
    pub fn ended_sessions(&self) -> Result<Vec<u64>> {
        let (me, _) = self.session.current()?;
        let regs = self.scan(&self.keys.registries(), SESSIONS_MAX)?;
        let ids: Vec<u64> = regs
            .iter()
            .filter_map(|e| match self.keys.decode(&e.key) {
                Some(Key::Registry(s)) if s != me => Some(s),
                _ => None,
            })
            .collect();
        let ekeys: Vec<Vec<u8>> = ids.iter().map(|s| self.keys.session(*s)).collect();
        let refs: Vec<&[u8]> = ekeys.iter().map(Vec::as_slice).collect();
        let (got, _) = self.get_many(&refs)?;
        Ok(ids
            .into_iter()
            .zip(got)
            .filter(|(_, e)| e.is_none())
            .map(|(s, _)| s)
            .collect())
    }

    /// Queues chunk `c` of `ino` for the background rewrite.
    pub(crate) fn compact_later(&self, ino: Ino, c: u64) {
        let mut q = lock(&self.bg.compact);
        if let Some(e) = q.iter_mut().find(|e| (e.0, e.1) == (ino, c)) {
            e.2 = Instant::now();
            return;
        }
        if q.len() >= COMPACT_QUEUE_MAX {
            Stats::inc(&self.stats.compactions_dropped);
            return;
        }
        q.push_back((ino, c, Instant::now()));
        Stats::set(&self.stats.compactions_pending, q.len() as u64);
        drop(q);
        self.bg.wake();
    }

    /// Rewrites a fragmented chunk as one object: its record, conditioned
    /// on the version read, names the new object and the old ones go to
    /// the delete queue. Another writer in between wins; the chunk is then
    /// left as that writer made it.
    fn compact_chunk(&self, ino: Ino, c: u64) -> Result<()> {
        let ik = self.keys.inode(ino);
        let ck = self.keys.chunk(ino, c);
        // The object an attempt wrote, if its commit then failed: no
        // record names it (a commit that failed its conditions applied
        // nothing), so it goes now rather than wait for gc.
        let mut written: Option<ObjId> = None;
        let (did, _) = self.transact(|n| {
            if let Some(id) = written.take() {
                self.discard_unnamed(ino, c, id);
            }
            if n > 0 {
                // Lost to a write into the chunk (or met a replaced
                // object): the writer queues the chunk again if it stays
                // fragmented. A hot chunk is not rewritten over and over.
                Stats::inc(&self.stats.compactions_conflicted);
                return Ok(Step::Done(false));
            }
            let (got, _) = self.get_many(&[&ik, &ck])?;
            let (Some(ie), Some(ce)) = (&got[0], &got[1]) else {
                return Ok(Step::Done(false));
            };
            let i = schema::decode_inode(ino, &ie.value)?;
            let ch = schema::decode_chunk(ino, &ce.value)?;
            if ch.slices.len() <= 1 || i.garbage.is_some_and(|g| g.hides(c, ch.stamp)) {
                return Ok(Step::Done(false));
            }
            let mut t = Tx::default();
            let fresh = self.rewrite_chunk(&mut t, ino, c, &ch)?;
            written = fresh.objects().first().map(|o| o.id);
            t.rev(ck.clone(), ce.rev)
                .put(ck.clone(), schema::encode_chunk(ino, &fresh));
            Ok(t.step(true))
        })?;
        if did {
            Stats::inc(&self.stats.background_compactions);
            // What this mount held of the chunk names the old objects.
            self.forget_cached(ino);
        }
        Ok(())
    }

    /// One round of background work; returns whether anything was done.
    pub fn background_round(&self) -> Result<bool> {
        let mut did = false;
        let frees: Vec<Ino> = {
            let mut q = lock(&self.bg.frees);
            let n = q.len().min(FREE_BATCH * 4);
            let v = q.drain(..n).collect();
            Stats::set(&self.stats.frees_pending, q.len() as u64);
            v
        };
        if !frees.is_empty() {
            did = true;
            if let Err(e) = self.free_unlinked(&frees) {
                // Back to the queue, for the next round.
                let mut q = lock(&self.bg.frees);
                for i in frees {
                    q.push_back(i);
                }
                return Err(e);
            }
        }
        let (me, _) = self.session.current()?;
        if self.drain_queue(me, QUEUE_PAGE)? > 0 {
            did = true;
        }
        let next = {
            let mut q = lock(&self.bg.compact);
            let quiet = self.cfg.compact_quiet;
            let n = q
                .iter()
                .position(|e| e.2.elapsed() >= quiet)
                .and_then(|at| q.remove(at));
            Stats::set(&self.stats.compactions_pending, q.len() as u64);
            n
        };
        if let Some((ino, c, _)) = next {
            did = true;
            if let Err(e) = self.compact_chunk(ino, c) {
                tracing::debug!("{ino}: chunk {c} not compacted: {e}");
            }
        }
        let next = lock(&self.bg.sessions).pop_front();
        if let Some(s) = next {
            did = true;
            if let Err(e) = self.reclaim_session(s) {
                self.bg.reclaim_later(s);
                return Err(e);
            }
        }
        Ok(did)
    }

    /// Frees, drains and reclaims until nothing is left (tests, unmount).
    pub fn background_until_idle(&self) -> Result<()> {
        while self.background_round()? {}
        Ok(())
    }

    /// Items in this session's delete queue (a scan of the queue: stats).
    pub fn queue_backlog(&self) -> Result<u64> {
        let (me, _) = self.session.current()?;
        Ok(self.scan(&self.keys.queue_of(me), 100_000)?.len() as u64)
    }

    /// Frees waiting in memory.
    pub fn frees_pending(&self) -> usize {
        lock(&self.bg.frees).len()
    }
}

/// Starts the background thread: at once it looks for ended sessions, then
/// works whenever woken, and looks again every session TTL.
pub(crate) fn start(fs: &Arc<SharedFs>) -> Result<()> {
    let weak: Weak<SharedFs> = Arc::downgrade(fs);
    let every = fs.cfg.session_ttl;
    let h = std::thread::Builder::new()
        .name("churnfs-reclaim".into())
        .spawn(move || {
            let mut looked: Option<Instant> = None;
            loop {
                let Some(fs) = weak.upgrade() else { return };
                if fs.stopping.load(Relaxed) {
                    return;
                }
                if looked.is_none_or(|t| t.elapsed() >= every) {
                    match fs.ended_sessions() {
                        Ok(v) => {
                            for s in v {
                                fs.bg.reclaim_later(s);
                            }
                            looked = Some(Instant::now());
                        }
                        Err(e) => tracing::debug!("looking for ended sessions: {e}"),
                    }
                }
                let pause = match fs.background_round() {
                    Ok(true) => Duration::ZERO,
                    Ok(false) => Duration::from_secs(1),
                    Err(e) => {
                        tracing::debug!("background work: {e}");
                        Duration::from_millis(500)
                    }
                };
                if !pause.is_zero() {
                    fs.bg.nap(pause);
                }
            }
        })
        .map_err(|e| EngineError::Store(churnfs_vfs::StoreError::Io(e)))?;
    lock(&fs.threads).push(h);
    Ok(())
}
