//! The adapter's operations, free of any transport: each takes the caller
//! and the request's decoded arguments and returns what to reply. wire.rs
//! decodes requests and encodes these values for both transports: the
//! /dev/fuse readers (dev.rs) and FUSE over io_uring (ring.rs,
//! docs/design.md §12).
//!
//! What stays with the transport: counting the request (`Stats::op_*`),
//! the worker gate (workers.rs) and encoding the reply. Everything that
//! must happen before the reply (directories learnt) happens here, before
//! the value is returned; so do the notes for the kernel's negative-dentry
//! budget, except on a thread that defers them until after its reply
//! (negative.rs, `defer_notes`).

use crate::{convert, errno, open_mask_bits, Core, GEN};
use churnfs_vfs::perm::{self, MAY_EXEC, MAY_WRITE};
use churnfs_vfs::{Ctx, EngineError, FileKind, Ino, RenameFlags as ERenameFlags, SetAttr, SetTime};
use fuser::{Errno, FileAttr, FileType, FopenFlags, Generation, TimeOrNow};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};

pub(crate) type Res<T> = Result<T, Errno>;

/// Who asks: the request's credentials.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Who {
    fn ctx(&self) -> Ctx {
        Ctx {
            uid: self.uid,
            gid: self.gid,
            pid: self.pid,
        }
    }
}

/// A name's answer: attributes with their TTLs. A node id of 0 is the
/// protocol's negative entry.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub attr: FileAttr,
    pub attr_ttl: Duration,
    pub entry_ttl: Duration,
    pub generation: Generation,
}

/// Attributes and how long the kernel may keep them.
#[derive(Clone, Debug)]
pub(crate) struct AttrOut {
    pub attr: FileAttr,
    pub ttl: Duration,
}

/// An open handle and its open flags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Opened {
    pub fh: u64,
    pub flags: FopenFlags,
}

/// A created file: its entry and its open handle.
#[derive(Clone, Debug)]
pub(crate) struct Created {
    pub entry: Entry,
    pub opened: Opened,
}

/// The answer to GETXATTR and LISTXATTR: the size the caller must provide
/// (it asked with size 0), or the value.
#[derive(Clone, Debug)]
pub(crate) enum Xattr {
    Size(u32),
    Data(Vec<u8>),
}

/// SETATTR's arguments, as the kernel gives them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SetattrIn {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
    pub ctime: Option<SystemTime>,
    pub fh: Option<u64>,
    /// FATTR_KILL_SUIDGID: with FUSE_HANDLE_KILLPRIV_V2 the kernel sets it
    /// on a truncate by a caller without CAP_FSETID.
    pub kill_suidgid: bool,
}

/// One directory entry for READDIR (`entry` is None) or READDIRPLUS.
pub(crate) struct DirItem<'a> {
    pub ino: u64,
    pub offset: u64,
    pub kind: FileType,
    pub name: &'a OsStr,
    pub entry: Option<Entry>,
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(st) => SetTime::At(convert::timespec(st)),
    }
}

fn res<T>(r: churnfs_vfs::Result<T>) -> Res<T> {
    r.map_err(|e| {
        let n = errno(&e);
        if n == Errno::EIO {
            // The caller sees only EIO: the log says why.
            tracing::warn!("EIO: {e}");
        }
        n
    })
}

impl Core {
    fn entry_of(&self, a: &churnfs_vfs::Attr) -> Entry {
        Entry {
            attr: convert::attr(a),
            attr_ttl: self.cfg.attr_ttl,
            entry_ttl: self.cfg.entry_ttl,
            generation: GEN,
        }
    }

    /// The entry CREATE and READDIRPLUS answer: both keep attributes as
    /// long as the name (as when fuser encoded them, with one TTL each).
    fn entry_one_ttl(&self, a: &churnfs_vfs::Attr) -> Entry {
        Entry {
            attr_ttl: self.cfg.entry_ttl,
            ..self.entry_of(a)
        }
    }

    fn attr_of(&self, a: &churnfs_vfs::Attr) -> AttrOut {
        AttrOut {
            attr: convert::attr(a),
            ttl: self.cfg.attr_ttl,
        }
    }

    /// A lookup that found nothing: a negative entry the kernel may keep
    /// for `negative_ttl` (counted against the budget), or ENOENT.
    ///
    /// The name is noted before the reply on the ring: a create of it can
    /// only come after the reply, so its `forget_name` always follows the
    /// note and no name the kernel holds as positive stays tracked. That
    /// matters: an invalidation of a positive dentry detaches any mount on
    /// it. The /dev/fuse readers note it after the reply, checking then
    /// that the name is still missing (`KernelNegatives::note_deferred`).
    /// A lookup found nothing; `drains` is `Engine::drains` read before it.
    fn negative(&self, parent: u64, name: &OsStr, drains: u64) -> Res<Entry> {
        self.negatives
            .note_miss(parent, name.as_bytes(), Some(drains));
        if self.cfg.negative_ttl.is_zero() || self.negatives.refused() {
            return Err(Errno::ENOENT);
        }
        Ok(Entry {
            attr: convert::negative_attr(),
            attr_ttl: Duration::ZERO,
            entry_ttl: self.cfg.negative_ttl,
            generation: GEN,
        })
    }

    /// A lookup or mkdir answered with a directory: remember its name, so
    /// that its cached names can be dropped with one notification.
    fn learn_dir(&self, a: &churnfs_vfs::Attr, parent: u64, name: &OsStr) {
        // "." and ".." are not names the kernel caches.
        if a.kind == FileKind::Directory && name != "." && name != ".." {
            self.negatives.learn_dir(a.ino.0, parent, name.as_bytes());
        }
    }

    /// A name was created: the kernel's dentry for it is positive now.
    fn created(&self, parent: u64, name: &OsStr) {
        self.negatives.forget_name(parent, name.as_bytes());
    }

    /// What a create-like call answers, after noting the new name.
    fn made(
        &self,
        parent: u64,
        name: &OsStr,
        r: churnfs_vfs::Result<churnfs_vfs::Attr>,
    ) -> Res<Entry> {
        let a = res(r)?;
        self.created(parent, name);
        Ok(self.entry_of(&a))
    }

    pub(crate) fn do_lookup(&self, who: Who, parent: u64, name: &OsStr) -> Res<Entry> {
        self.permit(who, |c| perm::access(c, &self.attr(parent)?, MAY_EXEC))?;
        // Before the lookup, so that a drain after it is seen (`negative`).
        let drains = self.backend.drains();
        match self.backend.lookup(Ino(parent), name.as_bytes()) {
            Err(EngineError::NotFound) => self.negative(parent, name, drains),
            Err(e) => Err(errno(&e)),
            Ok(a) => {
                self.learn_dir(&a, parent, name);
                Ok(self.entry_of(&a))
            }
        }
    }

    pub(crate) fn do_forget(&self, i: u64, nlookup: u64) {
        self.kernel_inodes.forget(i);
        self.backend.forget(Ino(i), nlookup);
    }

    pub(crate) fn do_getattr(&self, i: u64) -> Res<AttrOut> {
        Ok(self.attr_of(&res(self.backend.getattr(Ino(i)))?))
    }

    pub(crate) fn do_setattr(&self, who: Who, i: u64, s: SetattrIn) -> Res<AttrOut> {
        let given = |t: &Option<TimeOrNow>| matches!(t, Some(TimeOrNow::SpecificTime(_)));
        let times_given = given(&s.atime) || given(&s.mtime);
        let change = perm::Change {
            mode: s.mode,
            uid: s.uid,
            gid: s.gid,
            size: s.size.is_some(),
            times_given,
            times_now: !times_given && (s.atime.is_some() || s.mtime.is_some()),
            through_handle: s.fh.is_some() && s.size.is_some(),
        };
        let mut mode = s.mode;
        self.permit(who, |c| {
            let a = self.attr(i)?;
            mode = perm::setattr(c, &a, &change)?;
            Ok(())
        })?;
        let kill_setid = self.kill_setid(&change, s.size, s.kill_suidgid);
        let set = SetAttr {
            mode,
            uid: s.uid,
            gid: s.gid,
            size: s.size,
            atime: s.atime.map(set_time),
            mtime: s.mtime.map(set_time),
            ctime: s.ctime.map(convert::timespec),
            kill_setid,
        };
        Ok(self.attr_of(&res(self.backend.setattr(Ino(i), set))?))
    }

    pub(crate) fn do_readlink(&self, i: u64) -> Res<Vec<u8>> {
        res(self.backend.readlink(Ino(i)))
    }

    pub(crate) fn do_mknod(
        &self,
        who: Who,
        parent: u64,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> Res<Entry> {
        self.permit(who, |c| self.may_create(c, parent))?;
        let r = self
            .backend
            .mknod(who.ctx(), Ino(parent), name.as_bytes(), mode, rdev);
        self.made(parent, name, r)
    }

    pub(crate) fn do_mkdir(&self, who: Who, parent: u64, name: &OsStr, mode: u32) -> Res<Entry> {
        self.permit(who, |c| self.may_create(c, parent))?;
        let a = res(self
            .backend
            .mkdir(who.ctx(), Ino(parent), name.as_bytes(), mode))?;
        self.created(parent, name);
        self.learn_dir(&a, parent, name);
        Ok(self.entry_of(&a))
    }

    pub(crate) fn do_unlink(&self, who: Who, parent: u64, name: &OsStr) -> Res<()> {
        self.permit(who, |c| self.may_delete(c, parent, name))?;
        res(self.backend.unlink(Ino(parent), name.as_bytes()))?;
        // Noted like a missing name (see `negative`).
        self.negatives.note(parent, name.as_bytes());
        Ok(())
    }

    pub(crate) fn do_rmdir(&self, who: Who, parent: u64, name: &OsStr) -> Res<()> {
        self.permit(who, |c| self.may_delete(c, parent, name))?;
        res(self.backend.rmdir(Ino(parent), name.as_bytes()))?;
        // Noted like a missing name (see `negative`).
        self.negatives.note(parent, name.as_bytes());
        Ok(())
    }

    pub(crate) fn do_symlink(
        &self,
        who: Who,
        parent: u64,
        name: &OsStr,
        target: &[u8],
    ) -> Res<Entry> {
        self.permit(who, |c| self.may_create(c, parent))?;
        let r = self
            .backend
            .symlink(who.ctx(), Ino(parent), name.as_bytes(), target);
        self.made(parent, name, r)
    }

    /// RENAME and RENAME2; `flags` are renameat2's.
    pub(crate) fn do_rename(
        &self,
        who: Who,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> Res<()> {
        if flags & libc::RENAME_WHITEOUT != 0 {
            return Err(Errno::EINVAL);
        }
        let f = ERenameFlags {
            noreplace: flags & libc::RENAME_NOREPLACE != 0,
            exchange: flags & libc::RENAME_EXCHANGE != 0,
        };
        self.permit(who, |c| {
            let src = self.backend.child_attr(Ino(parent), name.as_bytes())?;
            perm::may_delete(c, &self.attr(parent)?, &mut || Ok(src))?;
            let moves = parent != newparent;
            match self.backend.child_attr(Ino(newparent), newname.as_bytes()) {
                Ok(dst) => {
                    perm::may_delete(c, &self.attr(newparent)?, &mut || Ok(dst))?;
                    // An exchanged directory changes its "..", too.
                    if f.exchange && moves && dst.kind == FileKind::Directory {
                        perm::access(c, &dst, MAY_WRITE)?;
                    }
                }
                Err(EngineError::NotFound) => self.may_create(c, newparent)?,
                Err(e) => return Err(e),
            }
            if moves && src.kind == FileKind::Directory {
                perm::access(c, &src, MAY_WRITE)?;
            }
            Ok(())
        })?;
        res(self.backend.rename(
            Ino(parent),
            name.as_bytes(),
            Ino(newparent),
            newname.as_bytes(),
            f,
        ))?;
        self.created(newparent, newname);
        if !f.exchange {
            self.negatives.note(parent, name.as_bytes());
        }
        Ok(())
    }

    pub(crate) fn do_link(&self, who: Who, i: u64, newparent: u64, newname: &OsStr) -> Res<Entry> {
        self.permit(who, |c| {
            perm::may_link(c, &self.attr(i)?)?;
            self.may_create(c, newparent)
        })?;
        let r = self
            .backend
            .link(Ino(i), Ino(newparent), newname.as_bytes());
        self.made(newparent, newname, r)
    }

    /// OPEN; `flags` are open(2)'s.
    pub(crate) fn do_open(&self, who: Who, i: u64, flags: i32) -> Res<Opened> {
        if !self.opens.load(Relaxed) {
            // The kernel checked the access mode; it opens without us from now on.
            return Err(Errno::ENOSYS);
        }
        self.permit(who, |c| {
            perm::access(c, &self.attr(i)?, open_mask_bits(flags))
        })?;
        let o = res(self.backend.open(Ino(i)))?;
        let mut flags = self.open_flags();
        if !o.keep_cache {
            flags.remove(FopenFlags::FOPEN_KEEP_CACHE);
        }
        Ok(Opened { fh: o.fh.0, flags })
    }

    pub(crate) fn do_read(&self, i: u64, offset: u64, size: u32) -> Res<Vec<u8>> {
        res(self.backend.read(Ino(i), offset, size))
    }

    /// WRITE; `kill` is FUSE_WRITE_KILL_SUIDGID, set only with
    /// FUSE_HANDLE_KILLPRIV_V2 for a writer without CAP_FSETID.
    pub(crate) fn do_write(&self, i: u64, offset: u64, data: &[u8], kill: bool) -> Res<u32> {
        res(self.backend.write(Ino(i), offset, data, kill))
    }

    pub(crate) fn do_flush(&self, i: u64) -> Res<()> {
        if self.shared {
            // What was written becomes visible to other mounts at close.
            return res(self.backend.flush(Ino(i)));
        }
        // Dirty pages reach us as writes before flush (the kernel writes
        // them back before it sends FLUSH), durability is fsync's job, and
        // POSIX locks are the kernel's: nothing to do. ENOSYS tells the
        // kernel to stop sending FLUSH on close for the rest of the mount.
        Err(Errno::ENOSYS)
    }

    pub(crate) fn do_release(&self, i: u64) -> Res<()> {
        if !self.opens.load(Relaxed) {
            // No open handle was handed out (see `opens`).
            return Ok(());
        }
        res(self.backend.release(Ino(i)))
    }

    /// FSYNC and FSYNCDIR.
    pub(crate) fn do_fsync(&self, i: u64) -> Res<()> {
        res(self.backend.fsync(Ino(i)))
    }

    pub(crate) fn do_opendir(&self, who: Who, i: u64, flags: i32) -> Res<Opened> {
        if !self.opens.load(Relaxed) {
            return Err(Errno::ENOSYS);
        }
        self.permit(who, |c| {
            perm::access(c, &self.attr(i)?, open_mask_bits(flags))
        })?;
        let fh = res(self.backend.opendir(Ino(i)))?;
        Ok(Opened {
            fh: fh.0,
            flags: FopenFlags::empty(),
        })
    }

    /// READDIR (`plus` false) and READDIRPLUS: `add` takes each entry from
    /// `offset` on and says whether the reply is full.
    pub(crate) fn do_readdir(
        &self,
        i: u64,
        offset: u64,
        plus: bool,
        add: &mut dyn FnMut(DirItem<'_>) -> bool,
    ) -> Res<()> {
        res(self.backend.readdir(Ino(i), offset, plus, &mut |e| {
            let entry = if plus {
                let Some(a) = &e.attr else { return false };
                Some(self.entry_one_ttl(a))
            } else {
                None
            };
            !add(DirItem {
                ino: e.ino.0,
                offset: e.offset,
                kind: convert::kind(e.kind),
                name: OsStr::from_bytes(e.name),
                entry,
            })
        }))
    }

    pub(crate) fn do_statfs(&self) -> Res<churnfs_vfs::StatFs> {
        res(self.backend.statfs())
    }

    pub(crate) fn do_setxattr(
        &self,
        who: Who,
        i: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
    ) -> Res<()> {
        if !self.cfg.xattrs {
            return Err(Errno::ENOSYS);
        }
        if position != 0 {
            return Err(Errno::EINVAL);
        }
        self.permit(who, |c| {
            perm::xattr(c, name.as_bytes(), true, &mut || self.attr(i))
        })?;
        res(self.backend.setxattr(Ino(i), name.as_bytes(), value, flags))
    }

    pub(crate) fn do_getxattr(&self, who: Who, i: u64, name: &OsStr, size: u32) -> Res<Xattr> {
        if !self.cfg.xattrs {
            return Err(Errno::ENOSYS);
        }
        self.permit(who, |c| {
            perm::xattr(c, name.as_bytes(), false, &mut || self.attr(i))
        })?;
        xattr_out(res(self.backend.getxattr(Ino(i), name.as_bytes()))?, size)
    }

    pub(crate) fn do_listxattr(&self, i: u64, size: u32) -> Res<Xattr> {
        if !self.cfg.xattrs {
            return Err(Errno::ENOSYS);
        }
        xattr_out(res(self.backend.listxattr(Ino(i)))?, size)
    }

    pub(crate) fn do_removexattr(&self, who: Who, i: u64, name: &OsStr) -> Res<()> {
        if !self.cfg.xattrs {
            return Err(Errno::ENOSYS);
        }
        self.permit(who, |c| {
            perm::xattr(c, name.as_bytes(), true, &mut || self.attr(i))
        })?;
        res(self.backend.removexattr(Ino(i), name.as_bytes()))
    }

    /// ACCESS; `mask` is access(2)'s.
    pub(crate) fn do_access(&self, who: Who, i: u64, mask: u32) -> Res<()> {
        // With default_permissions the kernel checks modes itself and asks
        // only whether the inode exists.
        let a = res(self.attr(i))?;
        self.permit(who, |c| perm::access(c, &a, mask))
    }

    pub(crate) fn do_create(&self, who: Who, parent: u64, name: &OsStr, mode: u32) -> Res<Created> {
        if !self.opens.load(Relaxed) {
            // The kernel falls back to MKNOD and an open it no longer sends.
            return Err(Errno::ENOSYS);
        }
        self.permit(who, |c| self.may_create(c, parent))?;
        let (a, fh) = res(self
            .backend
            .create(who.ctx(), Ino(parent), name.as_bytes(), mode))?;
        self.created(parent, name);
        Ok(Created {
            entry: self.entry_one_ttl(&a),
            opened: Opened {
                fh: fh.0,
                flags: self.open_flags(),
            },
        })
    }

    /// FUSE_TMPFILE (O_TMPFILE), over io_uring only (ring.rs): a file with
    /// no name, created where the caller may create. The kernel names its
    /// dentry "/"; nothing of that reaches the engine or the negative-name
    /// bookkeeping. Where the kernel sends no OPEN or RELEASE (`opens`
    /// off) there is no fallback for O_TMPFILE as MKNOD is for CREATE, so
    /// the file is made without an open handle and lives on the kernel's
    /// reference alone (the kernel's RELEASE of it is ignored, as every
    /// RELEASE is then).
    pub(crate) fn do_tmpfile(&self, who: Who, parent: u64, mode: u32) -> Res<Created> {
        self.permit(who, |c| self.may_create(c, parent))?;
        let open = self.opens.load(Relaxed);
        let (a, fh) = res(self.backend.tmpfile(who.ctx(), Ino(parent), mode, open))?;
        Ok(Created {
            entry: self.entry_one_ttl(&a),
            opened: Opened {
                fh: fh.0,
                flags: self.open_flags(),
            },
        })
    }

    pub(crate) fn do_fallocate(&self, i: u64, offset: u64, length: u64, mode: i32) -> Res<()> {
        res(self.backend.fallocate(Ino(i), offset, length, mode))
    }

    pub(crate) fn do_lseek(&self, i: u64, offset: i64, whence: i32) -> Res<i64> {
        if offset < 0 {
            return Err(Errno::ENXIO);
        }
        Ok(res(self.backend.lseek(Ino(i), offset as u64, whence))? as i64)
    }
}

fn xattr_out(v: Vec<u8>, size: u32) -> Res<Xattr> {
    if size == 0 {
        Ok(Xattr::Size(v.len() as u32))
    } else if v.len() > size as usize {
        Err(Errno::ERANGE)
    } else {
        Ok(Xattr::Data(v))
    }
}
