//! data: file contents. Files up to `INLINE_MAX` bytes keep their bytes in
//! the inode record (in memory: `blocks[0]`); larger files are split into
//! `BLOCK_SIZE` blocks, one store key each, a missing block or tail reading
//! as zeros.
//!
//! Invariants (asserted in debug builds):
//! - no cached block holds bytes at or beyond the file size;
//! - a file larger than `INLINE_MAX` caches only dirty blocks (clean blocks
//!   are read from the store, whose own cache is bounded);
//! - a file no larger than `INLINE_MAX` has no block items to write except
//!   deletions of keys it had while it was larger.

use crate::dirty::Item;
use crate::error::{EngineError, Result};
use crate::format::{self, Xattrs, BLOCK_SIZE, INLINE_MAX, MAX_FILE_SIZE};
use crate::fs::Engine;
use crate::perm;
use crate::state::FileCtx;
use crate::stats::Stats;
use crate::store::KvStore;
use crate::types::{falloc, BlockNo, FileKind, Ino, Timespec};

impl FileCtx<'_> {
    /// The block's bytes, from the cache or the store (empty = hole).
    fn block_bytes(&mut self, ino: Ino, n: u64) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        if let Some(b) = i.blocks.get(&n) {
            return Ok(b.clone());
        }
        if i.rec.size <= INLINE_MAX || n * BLOCK_SIZE >= i.rec.size {
            return Ok(Vec::new());
        }
        Stats::inc(&self.stats.store_gets);
        match self.store.get(&format::block_key(ino, BlockNo(n)))? {
            Some(b) => {
                format::validate_block(ino, &b)?;
                Ok(b)
            }
            None => Ok(Vec::new()),
        }
    }

    /// Caches block `n` for change and returns it.
    fn block_mut(&mut self, ino: Ino, n: u64) -> Result<&mut Vec<u8>> {
        let cached = self.inode(ino)?.blocks.contains_key(&n);
        if !cached {
            let b = self.block_bytes(ino, n)?;
            self.inode(ino)?.blocks.insert(n, b);
        }
        Ok(self
            .inode(ino)?
            .blocks
            .get_mut(&n)
            .expect("block just cached"))
    }

    /// Marks block `n` for writing, if the file is large enough to have blocks.
    fn dirty_block(&mut self, ino: Ino, n: u64) -> Result<()> {
        if self.inode(ino)?.rec.size > INLINE_MAX {
            self.dirty.add(Item::Block(ino, n), self.stats);
        }
        Ok(())
    }

    /// Sets the size; when the file crosses `INLINE_MAX` upwards, its inline
    /// bytes become block 0.
    fn set_size(&mut self, ino: Ino, size: u64) -> Result<()> {
        let old = self.inode(ino)?.rec.size;
        if size > old {
            self.reveal(ino, size)?;
        }
        let i = self.inode(ino)?;
        i.rec.size = size;
        let has0 = i.blocks.contains_key(&0);
        if old <= INLINE_MAX && size > INLINE_MAX && has0 {
            self.dirty.add(Item::Block(ino, 0), self.stats);
        }
        Ok(())
    }

    /// The file grows to `size`: blocks of a pending truncate range
    /// (orphan.rs) that it reaches become holes, deleted by the next commit,
    /// and the range starts above them. Costs the blocks revealed, no more.
    fn reveal(&mut self, ino: Ino, size: u64) -> Result<()> {
        let Some((from, to)) = self.truncates.get(ino) else {
            return Ok(());
        };
        let end = size.div_ceil(BLOCK_SIZE);
        if end <= from {
            return Ok(());
        }
        // Of the revealed numbers only those the store still holds need
        // anything (a sparse file's range may span far more).
        let found = self.stored_blocks(ino, from, end.min(to))?;
        let i = self.inode(ino)?;
        for &n in &found {
            i.blocks.insert(n, Vec::new());
        }
        for n in found {
            self.dirty.add(Item::Block(ino, n), self.stats);
        }
        if end >= to {
            self.truncates.remove(ino, self.stats);
            Stats::inc(&self.stats.truncates_done);
        } else {
            self.truncates.set(ino, end, to, self.stats);
        }
        self.dirty.add(Item::Truncate(ino), self.stats);
        Ok(())
    }

    pub(crate) fn read(&mut self, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        match i.rec.kind {
            FileKind::Regular => {}
            FileKind::Directory => return Err(EngineError::IsDir),
            _ => return Err(EngineError::Invalid("read of a special file")),
        }
        let size = i.rec.size;
        if offset >= size {
            return Ok(Vec::new());
        }
        let end = size.min(offset + len as u64);
        let mut out = vec![0u8; (end - offset) as usize];
        let mut pos = offset;
        while pos < end {
            let n = pos / BLOCK_SIZE;
            let in_block = (pos % BLOCK_SIZE) as usize;
            let take = ((BLOCK_SIZE - pos % BLOCK_SIZE).min(end - pos)) as usize;
            let b = self.block_bytes(ino, n)?;
            let dst = &mut out[(pos - offset) as usize..][..take];
            if in_block < b.len() {
                let avail = (b.len() - in_block).min(take);
                dst[..avail].copy_from_slice(&b[in_block..in_block + avail]);
            }
            pos += take as u64;
        }
        Ok(out)
    }

    pub(crate) fn write(
        &mut self,
        ino: Ino,
        offset: u64,
        data: &[u8],
        kill_setid: bool,
    ) -> Result<u32> {
        let i = self.inode(ino)?;
        match i.rec.kind {
            FileKind::Regular => {}
            FileKind::Directory => return Err(EngineError::IsDir),
            _ => return Err(EngineError::Invalid("write to a special file")),
        }
        // A write of zero bytes changes nothing, not even the size (write(2)).
        if data.is_empty() {
            return Ok(0);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(EngineError::FileTooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(EngineError::FileTooBig);
        }
        let old_size = i.rec.size;
        if end > old_size {
            self.set_size(ino, end)?;
        }
        let mut pos = offset;
        while pos < end {
            let n = pos / BLOCK_SIZE;
            let in_block = (pos % BLOCK_SIZE) as usize;
            let take = ((BLOCK_SIZE - pos % BLOCK_SIZE).min(end - pos)) as usize;
            let src = &data[(pos - offset) as usize..][..take];
            // A block wholly overwritten, or past the old end, needs no read.
            let whole = in_block == 0 && take as u64 == BLOCK_SIZE;
            if (whole || n * BLOCK_SIZE >= old_size) && !self.inode(ino)?.blocks.contains_key(&n) {
                self.inode(ino)?
                    .blocks
                    .insert(n, Vec::with_capacity(in_block + take));
            }
            let b = self.block_mut(ino, n)?;
            if b.len() < in_block + take {
                b.resize(in_block + take, 0);
            }
            b[in_block..in_block + take].copy_from_slice(src);
            self.dirty_block(ino, n)?;
            pos += take as u64;
        }
        let now = Timespec::now();
        let i = self.inode(ino)?;
        i.rec.mtime = now;
        i.rec.ctime = now;
        let cleared = kill_setid && perm::drop_setid(&mut i.rec.perm);
        self.dirty_inode(ino);
        if cleared {
            Stats::inc(&self.stats.setid_cleared);
        }
        Ok(data.len() as u32)
    }

    /// Changes the size; bytes past a shrink are gone for good, so an
    /// extension after it reads zeros.
    pub(crate) fn truncate(&mut self, ino: Ino, size: u64) -> Result<()> {
        let old = self.inode(ino)?.rec.size;
        if size >= old {
            self.set_size(ino, size)?;
            self.dirty_inode(ino);
            return Ok(());
        }
        // Blocks wholly past the new end become holes (deleted at commit).
        let first_gone = size.div_ceil(BLOCK_SIZE);
        if self.defer_truncate(ino, old, size)? {
            return Ok(());
        }
        let mut gone: Vec<u64> = self
            .inode(ino)?
            .blocks
            .range(first_gone..)
            .map(|(n, _)| *n)
            .collect();
        // The store can hold blocks past the new end only if the old size
        // reached past the start of `first_gone` (a shrink within the last
        // block needs no scan).
        if old > INLINE_MAX && old > first_gone * BLOCK_SIZE {
            gone.extend(self.stored_blocks(ino, first_gone, u64::MAX)?);
        }
        // The block holding the new end keeps only bytes before it.
        // Block items only matter for a file that had block keys (it was
        // larger than INLINE_MAX); a small file changes in memory only.
        let had_blocks = old > INLINE_MAX;
        let tail = size % BLOCK_SIZE;
        if tail != 0 {
            let n = size / BLOCK_SIZE;
            let b = self.block_mut(ino, n)?;
            b.truncate(tail as usize);
            if had_blocks {
                self.dirty.add(Item::Block(ino, n), self.stats);
            }
        }
        if size <= INLINE_MAX && old > INLINE_MAX {
            // Block 0 moves inline; its key is deleted at commit.
            if tail == 0 && size > 0 {
                self.block_mut(ino, 0)?;
            }
            self.dirty.add(Item::Block(ino, 0), self.stats);
        }
        let i = self.inode(ino)?;
        for n in &gone {
            i.blocks.insert(*n, Vec::new());
        }
        if had_blocks {
            for n in gone {
                self.dirty.add(Item::Block(ino, n), self.stats);
            }
        }
        let i = self.inode(ino)?;
        i.rec.size = size;
        if size == 0 {
            i.blocks.retain(|_, b| b.is_empty());
        }
        debug_assert!(i
            .blocks
            .iter()
            .all(|(n, b)| b.is_empty() || n * BLOCK_SIZE + b.len() as u64 <= size));
        self.dirty_inode(ino);
        Ok(())
    }

    /// Numbers of the blocks the store holds for `ino` in `from..upto`.
    fn stored_blocks(&mut self, ino: Ino, mut from: u64, upto: u64) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        loop {
            Stats::inc(&self.stats.store_scans);
            let (page, end) = block_numbers(&**self.store, ino, from, upto, 1024)?;
            if let Some(&last) = page.last() {
                from = last.saturating_add(1);
            }
            found.extend(page);
            if end {
                return Ok(found);
            }
        }
    }

    /// A shrink by more than `truncate_inline_blocks` (default
    /// `TRUNCATE_INLINE_BLOCKS`) blocks, or of a
    /// file that has a pending range already, leaves its blocks to the
    /// reclaim thread (orphan.rs) when the pending set has room. `false`:
    /// the caller deletes them itself.
    fn defer_truncate(&mut self, ino: Ino, old: u64, size: u64) -> Result<bool> {
        let on_store = self.inode(ino)?.on_store;
        let first_gone = size.div_ceil(BLOCK_SIZE);
        let old_end = old.div_ceil(BLOCK_SIZE);
        let pending = self.truncates.get(ino);
        let large = old_end.saturating_sub(first_gone) > self.truncate_inline_blocks;
        if !on_store
            || old <= INLINE_MAX
            || !(pending.is_some() || large)
            || !self.truncates.has_room(ino, self.stats)
        {
            if large {
                Stats::inc(&self.stats.truncates_inline);
            }
            return Ok(false);
        }
        // Cached blocks past the end go now (their dirty items find nothing
        // and write deletions); the stored ones are the range's.
        let i = self.inode(ino)?;
        drop(i.blocks.split_off(&first_gone));
        let tail = size % BLOCK_SIZE;
        if tail != 0 {
            let n = size / BLOCK_SIZE;
            self.block_mut(ino, n)?.truncate(tail as usize);
            self.dirty.add(Item::Block(ino, n), self.stats);
        }
        if size <= INLINE_MAX {
            // Block 0 moves inline; its key is deleted at commit.
            if tail == 0 && size > 0 {
                self.block_mut(ino, 0)?;
            }
            self.dirty.add(Item::Block(ino, 0), self.stats);
        }
        let to = pending.map_or(old_end, |(_, to)| to.max(old_end));
        if first_gone < to {
            // Queued for the reclaim thread by the commit that writes it.
            self.truncates.set(ino, first_gone, to, self.stats);
            self.dirty.add(Item::Truncate(ino), self.stats);
            // A `T` record goes with the inode's blocks when it is freed.
            self.inode(ino)?.blocks_on_store = true;
        }
        Stats::inc(&self.stats.truncates_deferred);
        let i = self.inode(ino)?;
        i.rec.size = size;
        debug_assert!(i
            .blocks
            .iter()
            .all(|(n, b)| b.is_empty() || n * BLOCK_SIZE + b.len() as u64 <= size));
        self.dirty_inode(ino);
        Ok(true)
    }

    /// Zeroes `[offset, end)` of the existing bytes (holes are already zero).
    fn zero_range(&mut self, ino: Ino, offset: u64, end: u64) -> Result<()> {
        let mut pos = offset;
        while pos < end {
            let n = pos / BLOCK_SIZE;
            let in_block = (pos % BLOCK_SIZE) as usize;
            let take = ((BLOCK_SIZE - pos % BLOCK_SIZE).min(end - pos)) as usize;
            let b = self.block_mut(ino, n)?;
            if in_block == 0 && take as u64 == BLOCK_SIZE {
                b.clear();
            } else if in_block < b.len() {
                let stop = (in_block + take).min(b.len());
                b[in_block..stop].fill(0);
            }
            self.dirty_block(ino, n)?;
            pos += take as u64;
        }
        Ok(())
    }

    pub(crate) fn xattrs(&mut self, ino: Ino) -> Result<&mut Xattrs> {
        let i = self.inode(ino)?;
        if i.xattrs.is_none() {
            let x = if i.rec.has_xattrs {
                Stats::inc(&self.stats.store_gets);
                match self.store.get(&format::xattr_key(ino))? {
                    Some(b) => format::decode_xattrs(ino, &b)?,
                    None => {
                        return Err(EngineError::corrupt(
                            Some(ino),
                            "xattr flag set but no xattr record",
                        ))
                    }
                }
            } else {
                Xattrs::new()
            };
            self.inode(ino)?.xattrs = Some(x);
        }
        Ok(self
            .inode(ino)?
            .xattrs
            .as_mut()
            .expect("xattrs just loaded"))
    }

    pub(crate) fn xattrs_changed(&mut self, ino: Ino) -> Result<()> {
        let i = self.inode(ino)?;
        i.rec.has_xattrs = i.xattrs.as_ref().is_some_and(|x| !x.is_empty());
        i.rec.ctime = Timespec::now();
        self.dirty.add(Item::Xattr(ino), self.stats);
        self.dirty_inode(ino);
        Ok(())
    }
}

/// One page of the numbers of the blocks the store holds for `ino` in
/// `from..upto`, reading at most `limit` keys; `true` when the range holds
/// no more after them.
pub(crate) fn block_numbers(
    store: &dyn KvStore,
    ino: Ino,
    from: u64,
    upto: u64,
    limit: usize,
) -> Result<(Vec<u64>, bool)> {
    let prefix = format::block_prefix(ino);
    let page = store.scan_keys(&prefix, &format::block_key(ino, BlockNo(from)), limit)?;
    let mut found = Vec::with_capacity(page.len());
    for k in &page {
        if let format::Key::Block(_, n) = format::decode_key(k)? {
            if n.0 >= upto {
                return Ok((found, true));
            }
            found.push(n.0);
        }
    }
    Ok((found, page.len() < limit))
}

impl Engine {
    pub fn read(&self, ino: Ino, offset: u64, len: u32) -> Result<Vec<u8>> {
        self.file(ino, |f| f.read(ino, offset, len))
    }

    pub fn write(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<u32> {
        self.write_as(ino, offset, data, false)
    }

    /// WRITE as the frontend received it: `kill_setid` drops the set-ID
    /// bits as `perm::without_setid` says, for a writer the kernel found
    /// without CAP_FSETID (FUSE_WRITE_KILL_SUIDGID).
    pub fn write_as(&self, ino: Ino, offset: u64, data: &[u8], kill_setid: bool) -> Result<u32> {
        // File data waits while the store writes a commit's batch (other
        // requests do not): a writer that went on would grow the next
        // commit by what it wrote meanwhile, and every fsync waits for the
        // whole of the commit after its call (docs/design.md §6).
        if self.store.staged_len() > 0 {
            self.before_wait();
            if self.store.wait_applied() {
                Stats::inc(&self.stats.writer_apply_waits);
            }
        }
        let (n, over) = self.file(ino, |f| {
            let n = f.write(ino, offset, data, kill_setid)?;
            Ok((n, f.over_dirty_bytes()))
        })?;
        self.throttle(over)?;
        Ok(n)
    }

    pub fn fallocate(&self, ino: Ino, offset: u64, len: u64, mode: i32) -> Result<()> {
        if len == 0 {
            return Err(EngineError::Invalid("fallocate of zero bytes"));
        }
        let end = offset.checked_add(len).ok_or(EngineError::FileTooBig)?;
        if end > MAX_FILE_SIZE {
            return Err(EngineError::FileTooBig);
        }
        let keep = mode & falloc::KEEP_SIZE != 0;
        self.file(ino, |s| {
            let i = s.inode(ino)?;
            match i.rec.kind {
                FileKind::Regular => {}
                FileKind::Directory => return Err(EngineError::IsDir),
                _ => return Err(EngineError::NotSupported),
            }
            let size = i.rec.size;
            match mode & !falloc::KEEP_SIZE {
                0 => {}
                falloc::PUNCH_HOLE if keep => s.zero_range(ino, offset.min(size), end.min(size))?,
                falloc::ZERO_RANGE => s.zero_range(ino, offset.min(size), end.min(size))?,
                falloc::PUNCH_HOLE => {
                    return Err(EngineError::Invalid("punch hole without keep size"))
                }
                _ => return Err(EngineError::NotSupported),
            }
            if !keep && end > size {
                s.truncate(ino, end)?;
            }
            let now = Timespec::now();
            let i = s.inode(ino)?;
            if mode != falloc::KEEP_SIZE {
                i.rec.mtime = now;
            }
            i.rec.ctime = now;
            s.dirty_inode(ino);
            Ok(())
        })
    }

    /// SEEK_DATA / SEEK_HOLE: the whole file counts as data (holes are optional).
    pub fn lseek(&self, ino: Ino, offset: u64, whence: i32) -> Result<u64> {
        let size = self.file(ino, |f| Ok(f.inode(ino)?.rec.size))?;
        match whence {
            libc::SEEK_DATA if offset < size => Ok(offset),
            libc::SEEK_HOLE if offset < size => Ok(size),
            libc::SEEK_DATA | libc::SEEK_HOLE => Err(EngineError::NoSuchOffset),
            _ => Err(EngineError::Invalid("lseek whence")),
        }
    }
}
