//! Namespace operations of a shared volume, each one conditioned commit
//! (docs/design.md §15, "The transaction of every operation"):
//!
//! - creates check the name absent and the parent present; they write the
//!   parent's times key without a condition, so creates and removes in one
//!   directory by several mounts do not conflict (only mkdir and rmdir,
//!   which change the parent's link count, condition on its record);
//! - removes condition on the entry and the child as read;
//! - rmdir conditions on the directory's entries being empty;
//! - a directory moved to another parent conditions on the record of every
//!   directory above its new place, so two concurrent moves cannot make a
//!   loop.

use crate::fs::{attr_of, SharedFs, Step, Tx};
use crate::schema::{self, check_name, DirTimes, Inode, Work};
use churnfs_kv::Rev;
use churnfs_vfs::{Attr, Ctx, EngineError, Fh, FileKind, Ino, RenameFlags, Result, Timespec};

pub use churnfs_vfs::LINK_MAX;

/// Deepest a directory may sit for a move into it across directories: each
/// directory above is a condition of the commit.
pub const MOVE_DEPTH_MAX: usize = 100;

/// What a new inode is.
pub(crate) struct New<'a> {
    pub kind: FileKind,
    pub mode: u32,
    pub rdev: u32,
    pub target: Option<&'a [u8]>,
}

impl SharedFs {
    fn times(now: Timespec) -> Vec<u8> {
        schema::encode_dir_times(&DirTimes {
            mtime: now,
            ctime: now,
        })
    }

    /// Writes an inode's times key: after a change in it (mtime and ctime).
    fn touch(&self, t: &mut Tx, dir: Ino, now: Timespec) {
        t.put(self.keys.dir_times(dir), Self::times(now));
    }

    /// The ops that free a file whose last link went and that nobody here
    /// holds: its record, xattrs and (through the delete queue) its data.
    pub(crate) fn free_ops(&self, t: &mut Tx, ino: Ino, i: &Inode) -> Result<()> {
        t.del(self.keys.inode(ino));
        if i.has_xattrs {
            t.del(self.keys.xattrs(ino));
        }
        if !i.inline || i.garbage.is_some() {
            t.put(
                self.queue_key()?,
                schema::encode_work(&Work::Chunks {
                    ino,
                    from: 0,
                    to: u64::MAX,
                    stamp: u64::MAX,
                }),
            );
        }
        Ok(())
    }

    /// Drops one link of `ino` (read at `rev`) in `t`: the record with one
    /// link less, or, at the last link, the file freed or kept for this
    /// mount's holders (`O` record). Returns whether it became unlinked and
    /// held.
    fn drop_link(
        &self,
        t: &mut Tx,
        ino: Ino,
        mut i: Inode,
        rev: Rev,
        now: Timespec,
    ) -> Result<bool> {
        t.rev(self.keys.inode(ino), rev);
        if i.kind == FileKind::Directory {
            return Err(EngineError::IsDir);
        }
        if i.nlink > 1 {
            i.nlink -= 1;
            i.ctime = now;
            t.put(self.keys.inode(ino), schema::encode_inode(ino, &i));
            return Ok(false);
        }
        // Kept while open here. The kernel's lookup references alone do not
        // keep it: with the last name gone, only an open file (or an
        // O_PATH descriptor, which then answers ESTALE as on NFS) could
        // still reach it.
        if self.known(ino).is_some_and(|k| k.opens > 0) {
            i.nlink = 0;
            i.ctime = now;
            let (sid, _) = self.session.current()?;
            t.put(self.keys.inode(ino), schema::encode_inode(ino, &i))
                .put(self.keys.open(sid, ino), vec![1]);
            return Ok(true);
        }
        self.free_ops(t, ino, &i)?;
        Ok(false)
    }

    /// After a commit that left `ino` unlinked and held here.
    fn now_unlinked(&self, ino: Ino) {
        let first = self.known_mut(ino, |k| !std::mem::replace(&mut k.unlinked, true));
        if first {
            crate::stats::Stats::inc(&self.stats.unlinked_inodes);
        }
        // Dropped meanwhile? Then it is freed now.
        self.settle(ino);
    }

    pub(crate) fn make(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &[u8],
        new: New<'_>,
    ) -> Result<(Attr, Rev)> {
        check_name(name)?;
        let ino = self.alloc_ino()?;
        let dkey = self.keys.dentry(parent, name);
        let ((attr, _), rev) = self.transact(|n| {
            let now = Timespec::now();
            let (p, prev) = self.dir_at(parent, n)?;
            // The commit checks the name is free; a read says why it failed.
            if n > 0 && self.dentry(parent, name)?.is_some() {
                return Err(EngineError::Exists);
            }
            let is_dir = new.kind == FileKind::Directory;
            if is_dir && p.nlink >= LINK_MAX {
                return Err(EngineError::TooManyLinks);
            }
            let setgid = p.perm & libc::S_ISGID as u16 != 0;
            let mut perm = (new.mode & 0o7777) as u16;
            if is_dir && setgid {
                perm |= libc::S_ISGID as u16;
            }
            let i = Inode {
                kind: new.kind,
                perm,
                nlink: if is_dir { 2 } else { 1 },
                uid: ctx.uid,
                gid: if setgid { p.gid } else { ctx.gid },
                size: 0,
                atime: now,
                mtime: now,
                ctime: now,
                rdev: new.rdev,
                parent: if is_dir { parent.0 } else { 0 },
                has_xattrs: false,
                inline: new.kind == FileKind::Regular,
                dseq: 0,
                garbage: None,
                extra: new.target.map(<[u8]>::to_vec).unwrap_or_default(),
            };
            let mut t = Tx::default();
            // The new inode's key is absent (numbers are never reused):
            // the condition marks it as created here (deleg.rs).
            t.absent(dkey.clone())
                .absent(self.keys.inode(ino))
                .put(dkey.clone(), schema::encode_dentry(ino, new.kind))
                .put(self.keys.inode(ino), schema::encode_inode(ino, &i));
            if is_dir {
                let mut p = p;
                p.nlink += 1;
                t.rev(self.keys.inode(parent), prev)
                    .put(self.keys.inode(parent), schema::encode_inode(parent, &p))
                    .put(self.keys.dir_times(ino), Self::times(now));
            } else {
                t.exists(self.keys.inode(parent));
            }
            self.touch(&mut t, parent, now);
            let times = is_dir.then_some(DirTimes {
                mtime: now,
                ctime: now,
            });
            Ok(t.step((attr_of(ino, &i, times.as_ref()), i)))
        })?;
        self.hold(ino);
        Ok((attr, rev.expect("a create commits")))
    }

    pub fn mknod(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        let kind = FileKind::from_mode(mode).ok_or(EngineError::Invalid("unknown file type"))?;
        if matches!(kind, FileKind::Directory | FileKind::Symlink) {
            return Err(EngineError::Invalid("mknod of a directory or symlink"));
        }
        let rdev = if matches!(kind, FileKind::CharDevice | FileKind::BlockDevice) {
            rdev
        } else {
            0
        };
        let new = New {
            kind,
            mode,
            rdev,
            target: None,
        };
        Ok(self.make(ctx, parent, name, new)?.0)
    }

    pub fn mkdir(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Attr> {
        let new = New {
            kind: FileKind::Directory,
            mode,
            rdev: 0,
            target: None,
        };
        Ok(self.make(ctx, parent, name, new)?.0)
    }

    pub fn symlink(&self, ctx: Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        if target.is_empty() {
            return Err(EngineError::NotFound);
        }
        if target.len() > schema::SYMLINK_MAX {
            return Err(EngineError::NameTooLong);
        }
        let new = New {
            kind: FileKind::Symlink,
            mode: 0o777,
            rdev: 0,
            target: Some(target),
        };
        Ok(self.make(ctx, parent, name, new)?.0)
    }

    pub fn create(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<(Attr, Fh)> {
        let new = New {
            kind: FileKind::Regular,
            mode,
            rdev: 0,
            target: None,
        };
        let (attr, rev) = self.make(ctx, parent, name, new)?;
        self.opened(attr.ino, rev);
        Ok((attr, Fh(attr.ino.0)))
    }

    /// O_TMPFILE: a file born unlinked, held by this session's `O` record
    /// from the same commit.
    pub fn tmpfile(&self, ctx: Ctx, parent: Ino, mode: u32, open: bool) -> Result<(Attr, Fh)> {
        let ino = self.alloc_ino()?;
        let ((attr, _), rev) = self.transact(|n| {
            let now = Timespec::now();
            let (p, _) = self.dir_at(parent, n)?;
            let setgid = p.perm & libc::S_ISGID as u16 != 0;
            let i = Inode {
                kind: FileKind::Regular,
                perm: (mode & 0o7777) as u16,
                nlink: 0,
                uid: ctx.uid,
                gid: if setgid { p.gid } else { ctx.gid },
                size: 0,
                atime: now,
                mtime: now,
                ctime: now,
                rdev: 0,
                parent: 0,
                has_xattrs: false,
                inline: true,
                dseq: 0,
                garbage: None,
                extra: Vec::new(),
            };
            let (sid, _) = self.session.current()?;
            let mut t = Tx::default();
            t.absent(self.keys.inode(ino))
                .put(self.keys.inode(ino), schema::encode_inode(ino, &i))
                .put(self.keys.open(sid, ino), vec![1]);
            Ok(t.step((attr_of(ino, &i, None), i)))
        })?;
        self.hold(ino);
        if open {
            self.opened(ino, rev.expect("a tmpfile commits"));
        }
        self.now_unlinked(ino);
        Ok((attr, Fh(if open { ino.0 } else { 0 })))
    }

    pub fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let dkey = self.keys.dentry(parent, name);
        let (held, _) = self.transact(|n| {
            let now = Timespec::now();
            let Some((child, kind, drev)) = self.dentry(parent, name)? else {
                return Err(EngineError::NotFound);
            };
            if kind == FileKind::Directory {
                return Err(EngineError::IsDir);
            }
            let (i, irev, _) = self.inode_at(child, n)?;
            let mut t = Tx::default();
            t.rev(dkey.clone(), drev).del(dkey.clone());
            let last = i.nlink <= 1;
            let held = self.drop_link(&mut t, child, i, irev, now)?;
            self.touch(&mut t, parent, now);
            Ok(t.step((child, held, last)))
        })?;
        match held {
            (child, true, _) => self.now_unlinked(child),
            // Freed: nothing of it is flushed again.
            (child, false, true) => self.drop_deferred(child),
            _ => {}
        }
        Ok(())
    }

    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let dkey = self.keys.dentry(parent, name);
        self.transact(|n| {
            let now = Timespec::now();
            let Some((child, kind, drev)) = self.dentry(parent, name)? else {
                return Err(EngineError::NotFound);
            };
            if kind != FileKind::Directory {
                return Err(EngineError::NotDir);
            }
            let entries = self.keys.dentries(child);
            if !self.scan(&entries, 1)?.is_empty() {
                return Err(EngineError::NotEmpty);
            }
            let (c, crev, _) = self.inode_at(child, n)?;
            let (mut p, prev) = self.dir_at(parent, n)?;
            p.nlink -= 1;
            let mut t = Tx::default();
            t.rev(dkey.clone(), drev)
                .rev(self.keys.inode(child), crev)
                .rev(self.keys.inode(parent), prev)
                .empty(entries)
                .del(dkey.clone())
                .del(self.keys.inode(child))
                .del(self.keys.dir_times(child))
                .put(self.keys.inode(parent), schema::encode_inode(parent, &p));
            if c.has_xattrs {
                t.del(self.keys.xattrs(child));
            }
            self.touch(&mut t, parent, now);
            Ok(t.step(()))
        })?;
        Ok(())
    }

    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        check_name(newname)?;
        // A second name makes the file reachable outside its directory's
        // delegation: its data goes first (deleg.rs `defer_close`).
        self.flush_deferred(|f, _| f == ino)?;
        let dkey = self.keys.dentry(newparent, newname);
        let ((attr, was_unlinked), _) = self.transact(|n| {
            let now = Timespec::now();
            let (mut i, irev, _) = self.inode_at(ino, n)?;
            if i.kind == FileKind::Directory {
                return Err(EngineError::Perm);
            }
            if i.nlink >= LINK_MAX {
                return Err(EngineError::TooManyLinks);
            }
            self.dir_at(newparent, n)?;
            if n > 0 && self.dentry(newparent, newname)?.is_some() {
                return Err(EngineError::Exists);
            }
            let mut t = Tx::default();
            let was_unlinked = i.nlink == 0;
            if was_unlinked {
                // Only a tmpfile this mount holds can get a name back (the
                // kernel's I_LINKABLE); its `O` record goes.
                if !self.known(ino).is_some_and(|k| k.unlinked) {
                    return Err(EngineError::NotFound);
                }
                let (sid, _) = self.session.current()?;
                t.exists(self.keys.open(sid, ino))
                    .del(self.keys.open(sid, ino));
            }
            i.nlink += 1;
            i.ctime = now;
            t.rev(self.keys.inode(ino), irev)
                .absent(dkey.clone())
                .exists(self.keys.inode(newparent))
                .put(dkey.clone(), schema::encode_dentry(ino, i.kind))
                .put(self.keys.inode(ino), schema::encode_inode(ino, &i));
            self.touch(&mut t, newparent, now);
            Ok(t.step((attr_of(ino, &i, None), was_unlinked)))
        })?;
        if was_unlinked {
            self.known_mut(ino, |k| k.unlinked = false);
            crate::stats::Stats::sub(&self.stats.unlinked_inodes, 1);
        }
        self.hold(ino);
        Ok(attr)
    }

    /// The directories from `dir` up to the root, with their versions; an
    /// error if `moved` is among them (a directory moved under itself).
    fn ancestors(&self, dir: Ino, moved: Ino, n: u32) -> Result<Vec<(Ino, Rev)>> {
        let mut out = Vec::new();
        let mut at = dir;
        loop {
            if at == moved {
                return Err(EngineError::Invalid("a directory moved under itself"));
            }
            let (d, rev) = self.dir_at(at, n)?;
            out.push((at, rev));
            if at == Ino::ROOT {
                return Ok(out);
            }
            if out.len() > MOVE_DEPTH_MAX {
                return Err(EngineError::Invalid(
                    "a directory moved deeper than 100 levels across directories",
                ));
            }
            at = Ino(d.parent);
        }
    }

    pub fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        check_name(name)?;
        check_name(newname)?;
        if flags.noreplace && flags.exchange {
            return Err(EngineError::Invalid(
                "RENAME_NOREPLACE with RENAME_EXCHANGE",
            ));
        }
        if parent != newparent {
            // A file moving out of its directory's delegation takes its
            // data with it (deleg.rs `defer_close`).
            self.flush_deferred(|_, d| d == parent || d == newparent)?;
        }
        let skey = self.keys.dentry(parent, name);
        let dkey = self.keys.dentry(newparent, newname);
        let (held, _) = self.transact(|n| {
            let now = Timespec::now();
            let Some((src, skind, srev)) = self.dentry(parent, name)? else {
                return Err(EngineError::NotFound);
            };
            if parent == newparent && name == newname {
                return Ok(Step::Done(None));
            }
            let dst = self.dentry(newparent, newname)?;
            if flags.noreplace && dst.is_some() {
                return Err(EngineError::Exists);
            }
            if flags.exchange && dst.is_none() {
                return Err(EngineError::NotFound);
            }
            if let Some((d, _, _)) = dst {
                if d == src && !flags.exchange {
                    // Another name of the same file: nothing to do.
                    return Ok(Step::Done(None));
                }
            }
            let src_dir = skind == FileKind::Directory;
            let moves = parent != newparent;
            let mut t = Tx::default();
            t.rev(skey.clone(), srev)
                .as_read(dkey.clone(), dst.map(|d| d.2));
            // Link counts of the two parents, as this rename changes them.
            let mut dp: i64 = 0;
            let mut dnp: i64 = 0;
            let (s, s_rev, s_times) = self.inode_at(src, n)?;
            let mut held = None;
            if flags.exchange {
                let (d, dkind, drev) = dst.expect("exchange checked its target");
                let dst_dir = dkind == FileKind::Directory;
                let (di, di_rev, d_times) = self.inode_at(d, n)?;
                t.put(skey.clone(), schema::encode_dentry(d, dkind))
                    .put(dkey.clone(), schema::encode_dentry(src, skind));
                let _ = drev;
                if moves {
                    if src_dir {
                        self.guard_move(&mut t, newparent, src, n)?;
                        dp -= 1;
                        dnp += 1;
                    }
                    if dst_dir {
                        self.guard_move(&mut t, parent, d, n)?;
                        dp += 1;
                        dnp -= 1;
                    }
                }
                let mut s2 = s.clone();
                s2.ctime = now;
                if src_dir {
                    s2.parent = newparent.0;
                }
                let mut d2 = di.clone();
                d2.ctime = now;
                if dst_dir {
                    d2.parent = parent.0;
                }
                t.rev(self.keys.inode(src), s_rev)
                    .put(self.keys.inode(src), schema::encode_inode(src, &s2))
                    .rev(self.keys.inode(d), di_rev)
                    .put(self.keys.inode(d), schema::encode_inode(d, &d2));
                self.moved_times(&mut t, src, s_times, now);
                self.moved_times(&mut t, d, d_times, now);
            } else {
                if let Some((d, dkind, _)) = dst {
                    let dst_dir = dkind == FileKind::Directory;
                    if src_dir && !dst_dir {
                        return Err(EngineError::NotDir);
                    }
                    if !src_dir && dst_dir {
                        return Err(EngineError::IsDir);
                    }
                    let (di, di_rev, _) = self.inode_at(d, n)?;
                    if dst_dir {
                        let entries = self.keys.dentries(d);
                        if !self.scan(&entries, 1)?.is_empty() {
                            return Err(EngineError::NotEmpty);
                        }
                        t.empty(entries)
                            .rev(self.keys.inode(d), di_rev)
                            .del(self.keys.inode(d))
                            .del(self.keys.dir_times(d));
                        if di.has_xattrs {
                            t.del(self.keys.xattrs(d));
                        }
                        dnp -= 1;
                    } else if self.drop_link(&mut t, d, di, di_rev, now)? {
                        held = Some(d);
                    }
                }
                if src_dir && moves {
                    self.guard_move(&mut t, newparent, src, n)?;
                    dp -= 1;
                    dnp += 1;
                }
                let mut s2 = s.clone();
                s2.ctime = now;
                if src_dir {
                    s2.parent = newparent.0;
                }
                t.del(skey.clone())
                    .put(dkey.clone(), schema::encode_dentry(src, skind))
                    .rev(self.keys.inode(src), s_rev)
                    .put(self.keys.inode(src), schema::encode_inode(src, &s2));
                self.moved_times(&mut t, src, s_times, now);
            }
            // Parents: their link counts when they change (conditioned on
            // their records), their times always.
            if parent == newparent {
                dp += dnp;
                dnp = 0;
            }
            for (dir, delta) in [(parent, dp), (newparent, dnp)] {
                if delta != 0 {
                    let (mut p, prev) = self.dir_at(dir, n)?;
                    let n = p.nlink as i64 + delta;
                    if n < 2 {
                        return Err(EngineError::corrupt(Some(dir), "link count below 2"));
                    }
                    if n > LINK_MAX as i64 {
                        return Err(EngineError::TooManyLinks);
                    }
                    p.nlink = n as u32;
                    t.rev(self.keys.inode(dir), prev)
                        .put(self.keys.inode(dir), schema::encode_inode(dir, &p));
                } else {
                    t.exists(self.keys.inode(dir));
                }
            }
            self.touch(&mut t, parent, now);
            if moves {
                self.touch(&mut t, newparent, now);
            }
            Ok(t.step(held))
        })?;
        if let Some(d) = held {
            self.now_unlinked(d);
        }
        Ok(())
    }

    /// A renamed directory's ctime, in its times key (where a directory's
    /// times live); nothing for anything else.
    fn moved_times(&self, t: &mut Tx, ino: Ino, times: Option<DirTimes>, now: Timespec) {
        if let Some(mut tm) = times {
            tm.ctime = now;
            t.put(self.keys.dir_times(ino), schema::encode_dir_times(&tm));
        }
    }

    /// Conditions a move of directory `moved` into `into` on every
    /// directory above `into` (none may be `moved`).
    fn guard_move(&self, t: &mut Tx, into: Ino, moved: Ino, n: u32) -> Result<()> {
        for (a, rev) in self.ancestors(into, moved, n)? {
            t.rev(self.keys.inode(a), rev);
        }
        Ok(())
    }
}
