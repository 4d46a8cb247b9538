//! The shared-mode engine behind the adapter's boundary: names and
//! attributes read from the engine at each request (the kernel's TTLs are
//! the only cache of them), close-to-open data (data.rs), and the kernel's
//! caches told of other mounts' changes (watch.rs).

use crate::fs::{attr_of, lock, SharedFs, Tx};
use crate::schema::{self, check_name, Xattrs};
use crate::stats::Stats;
use churnfs_vfs::types::xattr_flags;
use churnfs_vfs::{
    Attr, Backend, Coherence, Ctx, DirEntry, DirShape, EngineError, Fh, FileKind, Ino, KernelCache,
    Opened, RenameFlags, Result, SetAttr, StatFs, Timespec,
};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Entries read from the engine per readdir page.
const DIR_PAGE: usize = 128;
/// Records read in one request when lookups walk a directory in its order.
const READ_AHEAD: usize = 64;

/// An inode's record as read, with a directory's times.
type Record = (schema::Inode, Option<schema::DirTimes>);

impl SharedFs {
    fn named(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        check_name(name)?;
        let Some((child, _, _)) = self.dentry(parent, name)? else {
            return Err(EngineError::NotFound);
        };
        if !self.icache.contains(child) {
            let hash = schema::dir_hash(name);
            if self.icache.walking(parent, hash) {
                if let Err(e) = self.read_ahead(parent, hash) {
                    tracing::debug!("directory {parent}: no read-ahead: {e}");
                }
            }
        }
        self.getattr(child)
    }

    /// Lookups that miss the cache in directory order (an `rm -rf` or a
    /// `find` that lists, then looks up each name; the kernel asks for
    /// attributes with a listing's first page only): the records of the
    /// next `READ_AHEAD` entries from `hash` on, in one request, into the
    /// cache, where the next lookups find them.
    fn read_ahead(&self, dir: Ino, hash: u64) -> Result<()> {
        let page = self.scan(&self.keys.dentries_from(dir, hash), READ_AHEAD)?;
        let mut ents = Vec::with_capacity(page.len());
        for e in &page {
            let (child, kind) = schema::decode_dentry(dir, &e.value)?;
            if !self.icache.contains(child) {
                ents.push((child, kind));
            }
        }
        let read = self.records(&ents)?.iter().flatten().count();
        Stats::inc(&self.stats.icache_readaheads);
        Stats::add(&self.stats.icache_readahead_records, read as u64);
        Ok(())
    }

    /// The records of `ents` (with a directory's times) in one read, put in
    /// the cache, where they may serve this mount's next operations on
    /// them within the TTL; None for one removed since it was listed.
    fn records(&self, ents: &[(Ino, FileKind)]) -> Result<Vec<Option<Record>>> {
        let mut keys = Vec::with_capacity(ents.len() * 2);
        for (c, k) in ents {
            keys.push(self.keys.inode(*c));
            if *k == FileKind::Directory {
                keys.push(self.keys.dir_times(*c));
            }
        }
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let read_at = self.icache.stamp();
        let (got, _) = self.get_many(&refs)?;
        let mut at = 0;
        let mut out = Vec::with_capacity(ents.len());
        for (c, k) in ents {
            let rec = got[at].as_ref();
            at += 1;
            let times = if *k == FileKind::Directory {
                at += 1;
                match got[at - 1].as_ref() {
                    Some(t) => Some(schema::decode_dir_times(*c, &t.value)?),
                    None => None,
                }
            } else {
                None
            };
            out.push(match rec {
                Some(r) => {
                    let i = schema::decode_inode(*c, &r.value)?;
                    if *k != FileKind::Directory || times.is_some() {
                        self.icache.put(*c, i.clone(), r.rev, times, Some(read_at));
                    }
                    Some((i, times))
                }
                None => None,
            });
        }
        Ok(out)
    }

    pub fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.check_running()?;
        let a = self.named(parent, name)?;
        self.hold(a.ino);
        Ok(a)
    }

    pub fn child_attr(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        self.named(parent, name)
    }

    pub fn forget(&self, ino: Ino, n: u64) {
        let mut k = lock(&self.known);
        if let Some(e) = k.get_mut(&ino) {
            if n > e.lookups {
                // The kernel's count, not ours to trust blindly.
                tracing::debug!("{ino}: FORGET of {n} with {} references", e.lookups);
            }
            e.lookups = e.lookups.saturating_sub(n);
        }
        drop(k);
        self.settle(ino);
    }

    pub fn getattr(&self, ino: Ino) -> Result<Attr> {
        self.check_running()?;
        let (i, _, times) = self.inode_cached(ino)?;
        let mut a = attr_of(ino, &i, times.as_ref());
        self.overlay(&mut a);
        Ok(a)
    }

    pub fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let (i, _, _) = self.inode_cached(ino)?;
        if i.kind != FileKind::Symlink {
            return Err(EngineError::Invalid("not a symlink"));
        }
        Ok(i.extra)
    }

    pub fn opendir(&self, ino: Ino) -> Result<Fh> {
        self.dir(ino)?;
        Ok(Fh(ino.0))
    }

    pub fn readdir(
        &self,
        dir: Ino,
        offset: u64,
        plus: bool,
        emit: &mut dyn FnMut(&DirEntry<'_>) -> bool,
    ) -> Result<()> {
        self.check_running()?;
        let (d, _) = self.dir(dir)?;
        // `.` and `..` carry attributes in readdirplus too (they take no
        // kernel reference).
        let dot_attr = |ino: Ino| -> Result<Option<Attr>> {
            if plus {
                Ok(Some(self.getattr(ino)?))
            } else {
                Ok(None)
            }
        };
        if offset < 1 {
            let e = DirEntry {
                ino: dir,
                offset: 1,
                kind: FileKind::Directory,
                name: b".",
                attr: dot_attr(dir)?,
            };
            if !emit(&e) {
                return Ok(());
            }
        }
        if offset < 2 {
            let e = DirEntry {
                ino: Ino(d.parent),
                offset: 2,
                kind: FileKind::Directory,
                name: b"..",
                attr: dot_attr(Ino(d.parent))?,
            };
            if !emit(&e) {
                return Ok(());
            }
        }
        let mut from = offset.max(2) + 1;
        loop {
            let range = self.keys.dentries_from(dir, from);
            let page = self.scan(&range, DIR_PAGE)?;
            if page.is_empty() {
                return Ok(());
            }
            let mut ents = Vec::with_capacity(page.len());
            for e in &page {
                let Some(schema::Key::Dentry { hash, name, .. }) = self.keys.decode(&e.key) else {
                    return Err(EngineError::corrupt(Some(dir), "entry key out of place"));
                };
                let (child, kind) = schema::decode_dentry(dir, &e.value)?;
                ents.push((hash, name, child, kind));
            }
            let attrs: Vec<Option<Attr>> = if plus {
                let kinds: Vec<(Ino, FileKind)> =
                    ents.iter().map(|(_, _, c, k)| (*c, *k)).collect();
                self.records(&kinds)?
                    .into_iter()
                    .zip(&kinds)
                    .map(|(r, (c, _))| {
                        // Removed since the page was read: skipped.
                        r.map(|(i, times)| {
                            let mut a = attr_of(*c, &i, times.as_ref());
                            self.overlay(&mut a);
                            a
                        })
                    })
                    .collect()
            } else {
                vec![None; ents.len()]
            };
            let full = page.len() < DIR_PAGE;
            for ((hash, name, child, kind), attr) in ents.iter().zip(attrs) {
                if plus && attr.is_none() {
                    continue;
                }
                let e = DirEntry {
                    ino: *child,
                    offset: *hash,
                    kind: *kind,
                    name,
                    attr,
                };
                if !emit(&e) {
                    return Ok(());
                }
                if plus {
                    self.hold(*child);
                }
                from = hash + 1;
            }
            if full {
                return Ok(());
            }
        }
    }

    fn xattrs(&self, ino: Ino) -> Result<(Xattrs, Option<churnfs_kv::Rev>)> {
        let k = self.keys.xattrs(ino);
        let (got, _) = self.get_many(&[&k])?;
        match &got[0] {
            Some(e) => Ok((schema::decode_xattrs(ino, &e.value)?, Some(e.rev))),
            None => Ok((Xattrs::new(), None)),
        }
    }

    /// Changes an inode's xattrs with `f`, with its record (ctime, flag).
    fn change_xattrs(&self, ino: Ino, f: &dyn Fn(&mut Xattrs) -> Result<()>) -> Result<()> {
        let xk = self.keys.xattrs(ino);
        self.transact(|n| {
            let (mut i, irev, times) = self.inode_at(ino, n)?;
            let (mut x, xrev) = if i.has_xattrs {
                self.xattrs(ino)?
            } else {
                (Xattrs::new(), None)
            };
            f(&mut x)?;
            let mut t = Tx::default();
            t.rev(self.keys.inode(ino), irev).as_read(xk.clone(), xrev);
            if x.is_empty() {
                if xrev.is_some() {
                    t.del(xk.clone());
                }
            } else {
                t.put(xk.clone(), schema::encode_xattrs(&x));
            }
            i.has_xattrs = !x.is_empty();
            i.ctime = Timespec::now();
            if i.kind == FileKind::Directory {
                let mut tm = times.ok_or_else(|| {
                    EngineError::corrupt(Some(ino), "directory without its times")
                })?;
                tm.ctime = i.ctime;
                t.put(self.keys.dir_times(ino), schema::encode_dir_times(&tm));
            }
            t.put(self.keys.inode(ino), schema::encode_inode(ino, &i));
            Ok(t.step(()))
        })?;
        Ok(())
    }

    pub fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        if name.is_empty() || name.len() > schema::XATTR_NAME_MAX {
            return Err(EngineError::Range);
        }
        if value.len() > schema::XATTR_VALUE_MAX {
            return Err(EngineError::TooBig);
        }
        self.change_xattrs(ino, &|x| {
            let exists = x.contains_key(name);
            if flags & xattr_flags::CREATE != 0 && exists {
                return Err(EngineError::Exists);
            }
            if flags & xattr_flags::REPLACE != 0 && !exists {
                return Err(EngineError::NoAttr);
            }
            x.insert(name.to_vec(), value.to_vec());
            if schema::xattrs_size(x) > schema::XATTR_TOTAL_MAX {
                return Err(EngineError::NoSpace);
            }
            Ok(())
        })
    }

    pub fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let (i, _, _) = self.inode_cached(ino)?;
        if !i.has_xattrs {
            return Err(EngineError::NoAttr);
        }
        self.xattrs(ino)?.0.remove(name).ok_or(EngineError::NoAttr)
    }

    pub fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        let (i, _, _) = self.inode_cached(ino)?;
        if !i.has_xattrs {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for k in self.xattrs(ino)?.0.keys() {
            out.extend_from_slice(k);
            out.push(0);
        }
        Ok(out)
    }

    pub fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.change_xattrs(ino, &|x| match x.remove(name) {
            Some(_) => Ok(()),
            None => Err(EngineError::NoAttr),
        })
    }

    pub fn statfs(&self) -> Result<StatFs> {
        // Object storage has no size to report: a large fixed capacity.
        Ok(StatFs {
            blocks: 1 << 40,
            bfree: 1 << 40,
            bavail: 1 << 40,
            files: 1 << 40,
            ffree: 1 << 40,
            bsize: 4096,
            namelen: schema::NAME_MAX as u32,
            frsize: 4096,
        })
    }

    /// Unmount: every file's data committed, frees done, the threads
    /// stopped, the session ended (its `G` key removed when it left
    /// nothing). A delete backlog stays in the queue for the next mount or
    /// any other mount: unmount does not wait for it.
    pub fn shutdown(&self) -> Result<()> {
        if self.stopped.load(Relaxed) {
            return Ok(());
        }
        let mut first_err = None;
        // Closes left for a batch first: they drop the data of files gone
        // since.
        if let Err(e) = self.flush_deferred(|_, _| true) {
            tracing::error!("data of closed files not committed at unmount: {e}");
            first_err.get_or_insert(e);
        }
        let files: Vec<Ino> = lock(&self.files).keys().copied().collect();
        for ino in files {
            if let Err(e) = self.flush(ino) {
                tracing::error!("{ino}: data not committed at unmount: {e}");
                first_err.get_or_insert(e);
            }
        }
        // What the kernel still held is let go: unlinked files are freed.
        let held: Vec<Ino> = lock(&self.known)
            .iter()
            .filter(|(_, k)| k.unlinked)
            .map(|(i, _)| *i)
            .collect();
        lock(&self.known).clear();
        if let Err(e) = self.free_unlinked(&held) {
            tracing::warn!("open-unlinked files left to the next mount's reclaim: {e}");
        }
        let frees: Vec<Ino> = lock(&self.bg.frees).drain(..).collect();
        if let Err(e) = self.free_unlinked(&frees) {
            tracing::warn!("open-unlinked files left to the next mount's reclaim: {e}");
        }
        self.end_all_delegations();
        self.stopping.store(true, Relaxed);
        self.session.wake_all();
        self.bg.wake();
        let threads: Vec<_> = lock(&self.threads).drain(..).collect();
        for h in threads {
            let _ = h.join();
        }
        if let Ok((sid, lease)) = self.session.current() {
            // The registration goes if the session leaves nothing behind;
            // otherwise whoever reclaims the ended session finishes it.
            let gk = self.keys.registry(sid);
            let left = self
                .scan(&self.keys.queue_of(sid), 1)
                .map_or(true, |q| !q.is_empty())
                || self
                    .scan(&self.keys.opens_of(sid), 1)
                    .map_or(true, |o| !o.is_empty());
            let mut gone = false;
            if !left {
                let mut t = Tx::default();
                t.exists(gk.clone())
                    .empty(self.keys.opens_of(sid))
                    .empty(self.keys.queue_of(sid))
                    .del(gk.clone());
                let deadline = Instant::now() + self.cfg.op_timeout;
                gone = matches!(self.commit(t.txn, deadline), Ok(Some(_)));
            }
            if !gone {
                tracing::info!("session {sid} leaves work to reclaim");
            }
            if let Err(e) = self.kv.lease_revoke(lease) {
                tracing::warn!("session {sid}'s lease not revoked ({e}); it expires by itself");
            }
        }
        if let Some(d) = &self.disk {
            d.remove_all();
        }
        self.stopped.store(true, Relaxed);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until nothing is queued in memory and this session's delete
    /// queue is empty, or `deadline` (tests and bench).
    pub fn wait_drained(&self, deadline: Instant) -> bool {
        loop {
            let idle = self.frees_pending() == 0 && self.queue_backlog().is_ok_and(|n| n == 0);
            if idle {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.bg.wake();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Backend for SharedFs {
    fn coherence(&self) -> Coherence {
        Coherence::CloseToOpen
    }

    fn set_kernel_cache(&self, cache: Arc<dyn KernelCache>) {
        let _ = self.kernel.set(cache);
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        SharedFs::lookup(self, parent, name)
    }

    fn forget(&self, ino: Ino, n: u64) {
        SharedFs::forget(self, ino, n)
    }

    fn child_attr(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        SharedFs::child_attr(self, parent, name)
    }

    /// Every mount may create any name at any time: a name is missing only
    /// as of a read.
    fn name_missing(&self, parent: Ino, name: &[u8], _missed_at: Option<u64>) -> Result<bool> {
        check_name(name)?;
        Ok(self.dentry(parent, name)?.is_none())
    }

    fn drains(&self) -> u64 {
        0
    }

    fn dir_shape(&self, ino: Ino) -> Result<DirShape> {
        // A directory's size is not counted in shared mode; the adapter
        // then drops its negative names one by one.
        let (d, _) = self.dir_at(ino, 0)?;
        Ok(DirShape {
            parent: Ino(d.parent),
            entries: u64::MAX,
            subdirs: d.nlink.saturating_sub(2),
        })
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        SharedFs::getattr(self, ino)
    }

    fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr> {
        SharedFs::setattr(self, ino, set)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        SharedFs::readlink(self, ino)
    }

    fn mknod(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        SharedFs::mknod(self, ctx, parent, name, mode, rdev)
    }

    fn mkdir(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Attr> {
        SharedFs::mkdir(self, ctx, parent, name, mode)
    }

    fn symlink(&self, ctx: Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        SharedFs::symlink(self, ctx, parent, name, target)
    }

    fn create(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<(Attr, Fh)> {
        SharedFs::create(self, ctx, parent, name, mode)
    }

    fn tmpfile(&self, ctx: Ctx, parent: Ino, mode: u32, open: bool) -> Result<(Attr, Fh)> {
        SharedFs::tmpfile(self, ctx, parent, mode, open)
    }

    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        SharedFs::unlink(self, parent, name)
    }

    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        SharedFs::rmdir(self, parent, name)
    }

    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        SharedFs::link(self, ino, newparent, newname)
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        SharedFs::rename(self, parent, name, newparent, newname, flags)
    }

    fn open(&self, ino: Ino) -> Result<Opened> {
        SharedFs::open(self, ino)
    }

    fn flush(&self, ino: Ino) -> Result<()> {
        SharedFs::close(self, ino)
    }

    fn release(&self, ino: Ino) -> Result<()> {
        SharedFs::release(self, ino)
    }

    fn opendir(&self, ino: Ino) -> Result<Fh> {
        SharedFs::opendir(self, ino)
    }

    fn readdir(
        &self,
        dir: Ino,
        offset: u64,
        plus: bool,
        emit: &mut dyn FnMut(&DirEntry<'_>) -> bool,
    ) -> Result<()> {
        SharedFs::readdir(self, dir, offset, plus, emit)
    }

    /// Every namespace change is durable once answered; a file's data once
    /// flushed.
    fn fsync(&self, ino: Ino) -> Result<()> {
        SharedFs::flush(self, ino)?;
        self.deleg_sync(ino)
    }

    fn read(&self, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>> {
        SharedFs::read(self, ino, offset, len)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8], kill_setid: bool) -> Result<u32> {
        SharedFs::write(self, ino, offset, data, kill_setid)
    }

    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        SharedFs::fallocate(self, ino, offset, len, mode)
    }

    fn lseek(&self, ino: Ino, offset: u64, whence: i32) -> Result<u64> {
        SharedFs::lseek(self, ino, offset, whence)
    }

    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        SharedFs::setxattr(self, ino, name, value, flags)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        SharedFs::getxattr(self, ino, name)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        SharedFs::listxattr(self, ino)
    }

    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        SharedFs::removexattr(self, ino, name)
    }

    fn statfs(&self) -> Result<StatFs> {
        SharedFs::statfs(self)
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.stats.snapshot()
    }

    fn stats_catalogue(&self) -> &'static [churnfs_vfs::counters::Desc] {
        Stats::catalogue()
    }

    fn shutdown(&self) -> Result<()> {
        SharedFs::shutdown(self)
    }
}
