//! The local engine behind the adapter's boundary (`churnfs_vfs::Backend`):
//! each method is the engine's own operation of the same name. One mount
//! owns the store, so the kernel may cache without asking
//! (`Coherence::Exclusive`).

use crate::fs::Engine;
use crate::types::{Attr, Ctx, DirEntry, DirShape, Fh, Ino, RenameFlags, SetAttr, StatFs};
use crate::Result;
use churnfs_vfs::{Backend, Coherence, Opened, WaitHook};

impl Backend for Engine {
    fn coherence(&self) -> Coherence {
        Coherence::Exclusive
    }

    fn on_wait(&self, hook: WaitHook) {
        Engine::on_wait(self, hook)
    }

    fn lookup(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        Engine::lookup(self, parent, name)
    }

    fn forget(&self, ino: Ino, n: u64) {
        Engine::forget(self, ino, n)
    }

    fn child_attr(&self, parent: Ino, name: &[u8]) -> Result<Attr> {
        Engine::child_attr(self, parent, name)
    }

    fn name_missing(&self, parent: Ino, name: &[u8], missed_at: Option<u64>) -> Result<bool> {
        Engine::name_missing(self, parent, name, missed_at)
    }

    fn drains(&self) -> u64 {
        Engine::drains(self)
    }

    fn dir_shape(&self, ino: Ino) -> Result<DirShape> {
        Engine::dir_shape(self, ino)
    }

    fn getattr(&self, ino: Ino) -> Result<Attr> {
        Engine::getattr(self, ino)
    }

    fn setattr(&self, ino: Ino, set: SetAttr) -> Result<Attr> {
        Engine::setattr(self, ino, set)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        Engine::readlink(self, ino)
    }

    fn mknod(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        Engine::mknod(self, ctx, parent, name, mode, rdev)
    }

    fn mkdir(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Attr> {
        Engine::mkdir(self, ctx, parent, name, mode)
    }

    fn symlink(&self, ctx: Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        Engine::symlink(self, ctx, parent, name, target)
    }

    fn create(&self, ctx: Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<(Attr, Fh)> {
        Engine::create(self, ctx, parent, name, mode)
    }

    fn tmpfile(&self, ctx: Ctx, parent: Ino, mode: u32, open: bool) -> Result<(Attr, Fh)> {
        Engine::tmpfile(self, ctx, parent, mode, open)
    }

    fn unlink(&self, parent: Ino, name: &[u8]) -> Result<()> {
        Engine::unlink(self, parent, name)
    }

    fn rmdir(&self, parent: Ino, name: &[u8]) -> Result<()> {
        Engine::rmdir(self, parent, name)
    }

    fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        Engine::link(self, ino, newparent, newname)
    }

    fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        Engine::rename(self, parent, name, newparent, newname, flags)
    }

    fn open(&self, ino: Ino) -> Result<Opened> {
        Ok(Opened {
            fh: Engine::open(self, ino)?,
            keep_cache: true,
        })
    }

    fn release(&self, ino: Ino) -> Result<()> {
        Engine::release(self, ino)
    }

    fn opendir(&self, ino: Ino) -> Result<Fh> {
        Engine::opendir(self, ino)
    }

    fn readdir(
        &self,
        dir: Ino,
        offset: u64,
        plus: bool,
        emit: &mut dyn FnMut(&DirEntry<'_>) -> bool,
    ) -> Result<()> {
        Engine::readdir(self, dir, offset, plus, emit)
    }

    /// One mount's commits are in order: syncing everything covers `ino`.
    fn fsync(&self, _ino: Ino) -> Result<()> {
        Engine::fsync(self)
    }

    fn read(&self, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>> {
        Engine::read(self, ino, offset, len)
    }

    fn write(&self, ino: Ino, offset: u64, data: &[u8], kill_setid: bool) -> Result<u32> {
        Engine::write_as(self, ino, offset, data, kill_setid)
    }

    fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        Engine::fallocate(self, ino, offset, len, mode)
    }

    fn lseek(&self, ino: Ino, offset: u64, whence: i32) -> Result<u64> {
        Engine::lseek(self, ino, offset, whence)
    }

    fn setxattr(&self, ino: Ino, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        Engine::setxattr(self, ino, name, value, flags)
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        Engine::getxattr(self, ino, name)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<u8>> {
        Engine::listxattr(self, ino)
    }

    fn removexattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        Engine::removexattr(self, ino, name)
    }

    fn statfs(&self) -> Result<StatFs> {
        Engine::statfs(self)
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        Engine::stats(self)
    }

    fn stats_catalogue(&self) -> &'static [churnfs_vfs::counters::Desc] {
        crate::stats::Stats::catalogue()
    }

    fn shutdown(&self) -> Result<()> {
        Engine::shutdown(self)
    }
}
