//! The one boundary between the FUSE adapter and a filesystem: `Backend`.
//! The local engine (`churnfs-engine`, one machine, one mount) and the
//! shared-mode engine (`churnfs-shared`, many mounts of one volume)
//! implement it; the adapter holds an `Arc<dyn Backend>` and never learns
//! which one serves it.
//!
//! The shape follows the kernel's requests, one method per operation, with
//! inode numbers and names rather than paths, because that is what the
//! kernel hands the adapter and what both engines index by. What differs
//! between a private and a shared namespace is said once, by `coherence`,
//! and the adapter derives its cache policy from it (docs/design.md §2).

use crate::error::Result;
use crate::types::{Attr, Ctx, DirEntry, DirShape, Fh, Ino, RenameFlags, SetAttr, StatFs};
use std::sync::Arc;

/// A hook a backend calls before a request blocks on work that another
/// thread does (a commit): the adapter uses it to keep a spare reader.
pub type WaitHook = Box<dyn Fn() + Send + Sync>;

/// How far the kernel's caches may trust what a backend answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coherence {
    /// This mount is the only writer: cached pages stay valid across opens,
    /// the kernel may skip OPEN and FLUSH, and names and attributes change
    /// only through this mount's own requests.
    Exclusive,
    /// Other mounts change the namespace too (close-to-open, as NFS): every
    /// open asks the backend, which says whether cached pages are still
    /// valid; close sends FLUSH, which publishes the file's data; the
    /// backend reports other mounts' changes through `KernelCache`.
    CloseToOpen,
}

/// An open handle and whether the kernel may keep the file's cached pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    pub fh: Fh,
    /// False when the file changed elsewhere since this mount last read it.
    pub keep_cache: bool,
}

/// What a backend may ask of the kernel's caches: drop a name, or an
/// inode's attributes and pages. Calls must not block on the backend (the
/// adapter queues them for a thread of its own) and may be refused.
pub trait KernelCache: Send + Sync {
    /// The kernel's entry for `name` in `parent` is stale.
    fn inval_entry(&self, parent: Ino, name: &[u8]);
    /// The kernel's attributes and cached pages of `ino` are stale.
    fn inval_inode(&self, ino: Ino);
    /// The kernel's attributes of `ino` are stale, said before this call
    /// returns: for a handler (OPEN) that must not reply before the kernel
    /// has dropped them. Never blocks on a request.
    fn inval_attr_now(&self, ino: Ino);
}

/// A filesystem the adapter serves. Every method is called from the
/// adapter's serving threads, several at once.
///
/// Names are 1..=255 bytes without '/' or NUL; the backend checks them.
/// Methods that return an `Attr` for a name (`lookup`, the creates, `link`)
/// take one kernel reference on the inode, which `forget` gives back.
pub trait Backend: Send + Sync {
    /// How far the kernel may cache (see `Coherence`).
    fn coherence(&self) -> Coherence;

    /// Hands the backend a way to invalidate the kernel's caches, once the
    /// session exists. Backends with `Coherence::Exclusive` ignore it.
    fn set_kernel_cache(&self, _cache: Arc<dyn KernelCache>) {}

    /// Sets the hook called before a request waits for another thread's
    /// work (once; later calls are ignored).
    fn on_wait(&self, _hook: WaitHook) {}

    // ---- names ----
    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr>;
    /// Drops `n` kernel references.
    fn forget(&self, ino: Ino, n: u64);
    /// A name's attributes without taking a kernel reference (permission
    /// checks, the negative-dentry budget).
    fn child_attr(&self, parent: Ino, name: &[u8]) -> Result<Attr>;
    /// Whether `name` is known missing in `parent`; `missed_at` is what
    /// `drains` returned before the lookup that found it missing.
    fn name_missing(&self, parent: Ino, name: &[u8], missed_at: Option<u64>) -> Result<bool>;
    /// A counter that moves whenever a missing name may have appeared
    /// without passing through this adapter's replies.
    fn drains(&self) -> u64;
    /// A directory's parent and size.
    fn dir_shape(&self, ino: Ino) -> Result<DirShape>;

    // ---- attributes ----
    fn getattr(&self, ino: Ino) -> Result<Attr>;
    fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr>;
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;

    // ---- namespace changes ----
    fn mknod(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr>;
    fn mkdir(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Attr>;
    fn symlink(&self, ctx: Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr>;
    /// Creates and opens a regular file.
    fn create(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<(Attr, Fh)>;
    /// A file with no name (O_TMPFILE); opened when `open`, else it lives
    /// on the kernel's reference alone.
    fn tmpfile(&self, ctx: Ctx, parent: Ino, mode: u32, open: bool) -> Result<(Attr, Fh)>;
    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()>;
    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()>;
    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr>;
    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()>;

    // ---- open files and directories ----
    fn open(&self, ino: Ino) -> Result<Opened>;
    /// A close of one descriptor of `ino` (FLUSH): publishes what was
    /// written through it where other mounts read.
    fn flush(&self, _ino: Ino) -> Result<()> {
        Ok(())
    }
    /// The last close of an open handle.
    fn release(&self, ino: Ino) -> Result<()>;
    fn opendir(&self, ino: Ino) -> Result<Fh>;
    /// Entries of `dir` after cookie `offset`; `emit` takes each one and
    /// returns false when the reply is full (that entry not taken). With
    /// `plus`, every entry carries its attributes, and every one taken but
    /// `.` and `..` takes a kernel reference.
    fn readdir(
        &self,
        dir: Ino,
        offset: u64,
        plus: bool,
        emit: &mut dyn FnMut(&DirEntry<'_>) -> bool,
    ) -> Result<()>;
    /// fsync, fdatasync and fsyncdir of `ino`: returns once its changes
    /// are durable.
    fn fsync(&self, ino: Ino) -> Result<()>;

    // ---- data ----
    fn read(&self, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>>;
    /// Writes `data` at `offset`; `kill_setid` drops the set-ID bits (an
    /// unprivileged writer).
    fn write(&self, ino: Ino, offset: u64, data: &[u8], kill_setid: bool) -> Result<u32>;
    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()>;
    fn lseek(&self, ino: Ino, offset: u64, whence: i32) -> Result<u64>;

    // ---- extended attributes ----
    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()>;
    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>>;
    /// Names, each followed by a NUL.
    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>>;
    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()>;

    // ---- the whole filesystem ----
    fn statfs(&self) -> Result<StatFs>;
    /// Every counter and gauge of the backend, as `(name, value)`.
    fn stats(&self) -> Vec<(&'static str, u64)>;
    /// What each of `stats`'s names is (its part, help and kind), in the
    /// same order.
    fn stats_catalogue(&self) -> &'static [crate::counters::Desc];
    /// Makes everything durable and stops; later calls answer an error.
    fn shutdown(&self) -> Result<()>;
}
