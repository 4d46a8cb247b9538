//! File contents: block boundaries, holes, truncation, the inline/block
//! switch at 2048 bytes, fallocate, SEEK_DATA/SEEK_HOLE and the size limit.
//! Every check runs on the live engine, after a commit and after a remount.

use churnfs_engine::format::{Key, BLOCK_SIZE, INLINE_MAX, MAX_FILE_SIZE};
use churnfs_engine::{falloc, EngineError, Ino, SetAttr};
use churnfs_tests::{assert_err, keys_of, pattern, Fs};

const B: u64 = BLOCK_SIZE;

/// A file and what it must hold.
struct File {
    ino: Ino,
    want: Vec<u8>,
}

impl File {
    fn new(fs: &Fs, name: &[u8]) -> File {
        File {
            ino: fs.mkfile(Ino::ROOT, name, b""),
            want: Vec::new(),
        }
    }

    fn write(&mut self, fs: &Fs, off: u64, data: &[u8]) {
        assert_eq!(
            fs.e().write(self.ino, off, data).unwrap() as usize,
            data.len()
        );
        let end = off as usize + data.len();
        if self.want.len() < end {
            self.want.resize(end, 0);
        }
        self.want[off as usize..end].copy_from_slice(data);
    }

    fn truncate(&mut self, fs: &Fs, size: u64) {
        let a = fs
            .e()
            .setattr(
                self.ino,
                SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                },
            )
            .unwrap();
        assert_eq!(a.size, size);
        self.want.resize(size as usize, 0);
    }

    fn check(&self, fs: &Fs, what: &str) {
        let a = fs.e().getattr(self.ino).unwrap();
        assert_eq!(a.size, self.want.len() as u64, "{what}: size");
        let got = fs.read_all(self.ino);
        if got != self.want {
            let i = got
                .iter()
                .zip(&self.want)
                .position(|(a, b)| a != b)
                .expect("sizes checked");
            panic!(
                "{what}: first difference at byte {i}: {} != {}",
                got[i], self.want[i]
            );
        }
        // Reads that straddle block boundaries and the end of file.
        for off in [B - 3, 2 * B - 1, (self.want.len() as u64).saturating_sub(1)] {
            if off < self.want.len() as u64 {
                let r = fs.e().read(self.ino, off, 10).unwrap();
                let end = (off as usize + 10).min(self.want.len());
                assert_eq!(r, &self.want[off as usize..end], "{what}: read at {off}");
            }
        }
    }

    /// Checks now, after a commit, and after a remount.
    fn check_everywhere(&self, fs: &mut Fs, what: &str) {
        self.check(fs, &format!("{what} (live)"));
        fs.e().fsync().unwrap();
        self.check(fs, &format!("{what} (committed)"));
        fs.remount();
        self.check(fs, &format!("{what} (remounted)"));
        fs.fsck();
    }

    fn stored_blocks(&self, fs: &Fs) -> Vec<u64> {
        keys_of(&fs.store, self.ino)
            .into_iter()
            .filter_map(|k| match k {
                Key::Block(_, n) => Some(n.0),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn writes_across_block_boundaries() {
    let mut fs = Fs::new();
    let mut f = File::new(&fs, b"f");
    f.write(&fs, 0, &pattern(1, 3 * B as usize + 100));
    f.check_everywhere(&mut fs, "initial");
    for (i, off) in [B - 10, 2 * B - 1, 3 * B, B / 2].into_iter().enumerate() {
        f.write(&fs, off, &pattern(10 + i as u64, 20));
    }
    // One write covering three blocks, starting and ending mid-block.
    f.write(&fs, B / 3, &pattern(20, 2 * B as usize));
    f.check_everywhere(&mut fs, "overwrites");
    assert_eq!(f.stored_blocks(&fs), vec![0, 1, 2, 3]);
}

#[test]
fn sparse_files_read_zeros_and_store_no_holes() {
    let mut fs = Fs::new();
    let mut f = File::new(&fs, b"sparse");
    f.write(&fs, 4 * B + 7, b"far away");
    f.check_everywhere(&mut fs, "sparse");
    assert_eq!(f.stored_blocks(&fs), vec![4], "holes must not be stored");
    f.write(&fs, 100, b"near");
    f.write(&fs, 10 * B, b"farther");
    f.check_everywhere(&mut fs, "sparse, more");
    assert_eq!(f.stored_blocks(&fs), vec![0, 4, 10]);
}

#[test]
fn truncate_shrink_then_extend_reads_zeros() {
    let mut fs = Fs::new();
    // Shrink and extend inside one commit.
    let mut f = File::new(&fs, b"a");
    f.write(&fs, 0, &pattern(2, 3 * B as usize));
    f.check_everywhere(&mut fs, "full");
    f.truncate(&fs, B + 100);
    f.truncate(&fs, 3 * B + 5);
    f.check_everywhere(&mut fs, "shrink+extend in one commit");
    // Shrink, commit, extend.
    f.truncate(&fs, 50);
    fs.e().fsync().unwrap();
    f.check(&fs, "shrunk to inline");
    f.truncate(&fs, 2 * B);
    f.check_everywhere(&mut fs, "extended after commit");
    // Extend by writing past the end after a shrink.
    f.truncate(&fs, 10);
    f.write(&fs, B + 1, b"x");
    f.check_everywhere(&mut fs, "write after shrink");
    // Shrink to exactly a block boundary, and to zero.
    f.write(&fs, 0, &pattern(3, 2 * B as usize + 10));
    f.truncate(&fs, B);
    f.check_everywhere(&mut fs, "block boundary");
    assert_eq!(f.stored_blocks(&fs), vec![0]);
    f.truncate(&fs, 0);
    f.truncate(&fs, 3000);
    f.check_everywhere(&mut fs, "zero then extend");
}

#[test]
fn small_files_live_inline_and_move_to_blocks_and_back() {
    let mut fs = Fs::new();
    let mut f = File::new(&fs, b"small");
    f.write(&fs, 0, &pattern(4, 1000));
    f.check_everywhere(&mut fs, "1000 bytes");
    assert!(
        f.stored_blocks(&fs).is_empty(),
        "an inline file has no block keys"
    );
    f.write(&fs, 1000, &pattern(5, INLINE_MAX as usize - 1000));
    f.check_everywhere(&mut fs, "exactly INLINE_MAX");
    assert!(f.stored_blocks(&fs).is_empty());
    f.write(&fs, INLINE_MAX, b"!");
    f.check_everywhere(&mut fs, "INLINE_MAX + 1");
    assert_eq!(f.stored_blocks(&fs), vec![0]);
    f.write(&fs, 5000, &pattern(6, 100));
    f.check_everywhere(&mut fs, "grown");
    f.truncate(&fs, 1500);
    f.check_everywhere(&mut fs, "shrunk back");
    assert!(f.stored_blocks(&fs).is_empty(), "block 0 moves back inline");
    // Grow and shrink back within one commit, from a large file too.
    f.write(&fs, 1400, &pattern(7, 3000));
    f.truncate(&fs, 1800);
    f.check_everywhere(&mut fs, "grow+shrink in one commit");
    assert!(f.stored_blocks(&fs).is_empty());
    f.write(&fs, 0, &pattern(8, 2 * B as usize));
    fs.e().fsync().unwrap();
    f.truncate(&fs, 700);
    f.write(&fs, 700, b"tail");
    f.check_everywhere(&mut fs, "large to inline");
    assert!(f.stored_blocks(&fs).is_empty());
    // Extension of an inline file by truncate past the limit.
    f.truncate(&fs, INLINE_MAX + 10);
    f.check_everywhere(&mut fs, "extended by truncate");
}

#[test]
fn fallocate_modes() {
    let mut fs = Fs::new();
    let mut f = File::new(&fs, b"f");
    f.write(&fs, 0, &pattern(9, 100));
    // Mode 0 extends with zeros.
    fs.e().fallocate(f.ino, 0, 3 * B, 0).unwrap();
    f.want.resize(3 * B as usize, 0);
    f.check(&fs, "mode 0 extends");
    // Mode 0 inside the file changes nothing.
    fs.e().fallocate(f.ino, 10, 20, 0).unwrap();
    f.check(&fs, "mode 0 inside");
    // KEEP_SIZE past the end leaves the size.
    fs.e()
        .fallocate(f.ino, 2 * B, 4 * B, falloc::KEEP_SIZE)
        .unwrap();
    f.check(&fs, "keep size");
    f.write(&fs, 0, &pattern(10, 3 * B as usize));
    f.check_everywhere(&mut fs, "filled");
    // PUNCH_HOLE|KEEP_SIZE zeroes a range crossing a whole block, size unchanged.
    fs.e()
        .fallocate(
            f.ino,
            B / 2,
            3 * B / 2 + 100,
            falloc::PUNCH_HOLE | falloc::KEEP_SIZE,
        )
        .unwrap();
    f.want[(B / 2) as usize..(2 * B + 100) as usize].fill(0);
    f.check_everywhere(&mut fs, "punched");
    // Punch reaching past the end only zeroes up to the end.
    fs.e()
        .fallocate(f.ino, 3 * B - 10, B, falloc::PUNCH_HOLE | falloc::KEEP_SIZE)
        .unwrap();
    f.want[(3 * B - 10) as usize..].fill(0);
    f.check(&fs, "punched tail");
    // ZERO_RANGE without KEEP_SIZE zeroes and extends.
    fs.e()
        .fallocate(f.ino, 10, 3 * B + 10, falloc::ZERO_RANGE)
        .unwrap();
    f.want[10..].fill(0);
    f.want.resize(3 * B as usize + 20, 0);
    f.check_everywhere(&mut fs, "zero range");
    // Refusals.
    assert_err!(
        fs.e().fallocate(f.ino, 0, 10, falloc::PUNCH_HOLE),
        EngineError::Invalid(_)
    );
    assert_err!(fs.e().fallocate(f.ino, 0, 0, 0), EngineError::Invalid(_));
    assert_err!(
        fs.e().fallocate(f.ino, MAX_FILE_SIZE, 1, 0),
        EngineError::FileTooBig
    );
    assert_err!(
        fs.e().fallocate(f.ino, u64::MAX, 2, 0),
        EngineError::FileTooBig
    );
    assert_err!(fs.e().fallocate(Ino::ROOT, 0, 1, 0), EngineError::IsDir);
    f.check(&fs, "after refusals");
    // Punching an inline file.
    let mut g = File::new(&fs, b"g");
    g.write(&fs, 0, &pattern(11, 1000));
    fs.e()
        .fallocate(g.ino, 100, 200, falloc::PUNCH_HOLE | falloc::KEEP_SIZE)
        .unwrap();
    g.want[100..300].fill(0);
    g.check_everywhere(&mut fs, "inline punch");
}

#[test]
fn seek_data_and_hole() {
    let fs = Fs::new();
    let mut f = File::new(&fs, b"f");
    f.write(&fs, 2 * B, b"data");
    let size = 2 * B + 4;
    // Reporting holes is optional: SEEK_DATA may answer the offset itself
    // (everything is data) or the start of the data after the hole.
    let d = fs.e().lseek(f.ino, 0, libc::SEEK_DATA).unwrap();
    assert!(d == 0 || d == 2 * B, "SEEK_DATA from 0 gave {d}");
    let d = fs.e().lseek(f.ino, 5, libc::SEEK_DATA).unwrap();
    assert!(d == 5 || d == 2 * B, "SEEK_DATA from 5 gave {d}");
    assert_eq!(
        fs.e().lseek(f.ino, 2 * B + 1, libc::SEEK_DATA).unwrap(),
        2 * B + 1
    );
    let h = fs.e().lseek(f.ino, 2 * B + 1, libc::SEEK_HOLE).unwrap();
    assert_eq!(
        h, size,
        "the only hole after the last data is the end of file"
    );
    let h = fs.e().lseek(f.ino, 0, libc::SEEK_HOLE).unwrap();
    assert!(h == 0 || h == size, "SEEK_HOLE from 0 gave {h}");
    assert_err!(
        fs.e().lseek(f.ino, size, libc::SEEK_DATA),
        EngineError::NoSuchOffset
    );
    assert_err!(
        fs.e().lseek(f.ino, size, libc::SEEK_HOLE),
        EngineError::NoSuchOffset
    );
    assert_err!(
        fs.e().lseek(f.ino, size + 100, libc::SEEK_DATA),
        EngineError::NoSuchOffset
    );
    assert_err!(fs.e().lseek(f.ino, 0, 99), EngineError::Invalid(_));
    let empty = fs.mkfile(Ino::ROOT, b"empty", b"");
    assert_err!(
        fs.e().lseek(empty, 0, libc::SEEK_DATA),
        EngineError::NoSuchOffset
    );
}

#[test]
fn sizes_past_16_tib_are_refused() {
    let mut fs = Fs::new();
    let mut f = File::new(&fs, b"big");
    assert_err!(
        fs.e().write(f.ino, MAX_FILE_SIZE, b"x"),
        EngineError::FileTooBig
    );
    assert_err!(
        fs.e().write(f.ino, MAX_FILE_SIZE - 1, b"xy"),
        EngineError::FileTooBig
    );
    assert_err!(
        fs.e().write(f.ino, u64::MAX - 1, b"xy"),
        EngineError::FileTooBig
    );
    assert_err!(
        fs.e().setattr(
            f.ino,
            SetAttr {
                size: Some(MAX_FILE_SIZE + 1),
                ..SetAttr::default()
            }
        ),
        EngineError::FileTooBig
    );
    assert_eq!(
        fs.e().getattr(f.ino).unwrap().size,
        0,
        "refusals change nothing"
    );
    // The last byte below the limit is writable, and the file stays sparse.
    fs.e().write(f.ino, MAX_FILE_SIZE - 1, b"z").unwrap();
    fs.e().write(f.ino, 0, b"a").unwrap();
    let check = |fs: &Fs| {
        assert_eq!(fs.e().getattr(f.ino).unwrap().size, MAX_FILE_SIZE);
        assert_eq!(fs.e().read(f.ino, MAX_FILE_SIZE - 2, 10).unwrap(), b"\0z");
        assert_eq!(fs.e().read(f.ino, 0, 2).unwrap(), b"a\0");
        assert_eq!(fs.e().read(f.ino, 1 << 40, 4).unwrap(), vec![0; 4]);
    };
    check(&fs);
    fs.remount();
    check(&fs);
    assert_eq!(f.stored_blocks(&fs), vec![0, (MAX_FILE_SIZE - 1) / B]);
    fs.fsck();
    f.truncate(&fs, 0);
    // Growing to the limit again reveals no garbage and costs the blocks
    // the store holds, not the numbers in between.
    let grow = SetAttr {
        size: Some(MAX_FILE_SIZE),
        ..SetAttr::default()
    };
    fs.e().setattr(f.ino, grow).unwrap();
    assert_eq!(fs.e().read(f.ino, MAX_FILE_SIZE - 2, 10).unwrap(), b"\0\0");
    f.truncate(&fs, 0);
    // The commit queues the range; then the background deletes it.
    fs.e().fsync().unwrap();
    fs.e().wait_reclaim();
    assert!(f.stored_blocks(&fs).is_empty());
    f.check_everywhere(&mut fs, "truncated");
}

#[test]
fn large_writes_are_throttled_and_intact() {
    let mut fs = Fs::new();
    let mut f = File::new(&fs, b"f");
    let chunk = 256 * 1024;
    for i in 0..16u64 {
        f.write(&fs, i * chunk as u64, &pattern(100 + i, chunk));
        let dirty = fs.stat("dirty_blocks") * B;
        assert!(
            dirty <= fs.cfg.dirty_bytes_max + chunk as u64 + B,
            "dirty data {dirty} beyond its bound"
        );
    }
    assert!(
        fs.stat("writer_throttles") > 0,
        "4 MiB of writes never hit a 1 MiB bound"
    );
    f.check_everywhere(&mut fs, "4 MiB");
}

#[test]
fn empty_writes_and_reads_change_nothing() {
    let fs = Fs::new();
    let mut f = File::new(&fs, b"f");
    f.write(&fs, 0, b"abc");
    assert_eq!(fs.e().write(f.ino, 10_000, b"").unwrap(), 0);
    assert_eq!(fs.e().read(f.ino, 0, 0).unwrap(), b"");
    assert_eq!(fs.e().read(f.ino, 1 << 40, 10).unwrap(), b"");
    f.check(&fs, "after empty write");
}

// ---- large shrinking truncates: blocks deleted in the background ---------

fn has_truncate_record(fs: &Fs, f: &File) -> bool {
    keys_of(&fs.store, f.ino)
        .iter()
        .any(|k| matches!(k, Key::Truncate(_)))
}

/// A file of `blocks` full blocks, committed.
fn big_file(fs: &Fs, name: &[u8], blocks: u64) -> File {
    let mut f = File::new(fs, name);
    f.write(fs, 0, &pattern(blocks, (blocks * B) as usize));
    fs.e().fsync().unwrap();
    f
}

#[test]
fn a_large_shrink_leaves_its_blocks_to_the_background() {
    let mut fs = Fs::new();
    let mut f = big_file(&fs, b"big", 200);
    f.truncate(&fs, 100_000);
    assert_eq!(fs.stat("truncates_deferred"), 1);
    f.check(&fs, "after the shrink, blocks perhaps not deleted yet");
    // Growing again reads zeros past the old end, deleted or not.
    f.truncate(&fs, 40 * B + 5);
    f.check(&fs, "grown back");
    // The commit queues the range; then the background deletes it.
    fs.e().fsync().unwrap();
    fs.e().wait_reclaim();
    f.check(&fs, "after the background deletion");
    assert_eq!(f.stored_blocks(&fs), vec![0, 1]);
    assert!(!has_truncate_record(&fs, &f));
    assert_eq!(fs.stat("truncates_pending"), 0);
    assert!(
        fs.stat("truncate_batches") >= 2,
        "158 blocks in batches of 64 keys: {}",
        fs.stat("truncate_batches")
    );
    f.check_everywhere(&mut fs, "remounted");
}

#[test]
fn writes_after_a_large_shrink_survive_the_background_deletion() {
    let mut fs = Fs::new();
    // The write lands before, during or after the deletion of its block.
    for (round, at) in [0u64, 1, 63, 64, 65, 150, 299].into_iter().enumerate() {
        let name = format!("f{round}");
        let mut f = big_file(&fs, name.as_bytes(), 300);
        f.truncate(&fs, 0);
        f.write(&fs, at * B + 10, &pattern(round as u64, 3 * B as usize));
        f.check(&fs, &format!("write at block {at}"));
        fs.e().fsync().unwrap();
        fs.e().wait_reclaim();
        f.check(&fs, &format!("write at block {at}, after the deletion"));
        let want: Vec<u64> = (at..at + 4).collect();
        assert_eq!(f.stored_blocks(&fs), want, "write at block {at}");
        assert!(!has_truncate_record(&fs, &f));
        fs.fsck();
        fs.remount();
        f.check(&fs, &format!("write at block {at}, remounted"));
    }
}

#[test]
fn a_second_shrink_merges_with_the_pending_range() {
    let mut fs = Fs::new();
    let mut f = big_file(&fs, b"f", 300);
    f.truncate(&fs, 200 * B);
    // Smaller than the inline limit of a deferred shrink, but the file
    // has a pending range: it joins it.
    f.truncate(&fs, 190 * B + 7);
    f.truncate(&fs, 10 * B);
    // The middle one joins the pending range unless the background had
    // finished it already (then it is small enough to delete inline).
    assert!(fs.stat("truncates_deferred") >= 2);
    f.check(&fs, "shrunk three times");
    // The commit queues the range; then the background deletes it.
    fs.e().fsync().unwrap();
    fs.e().wait_reclaim();
    assert_eq!(f.stored_blocks(&fs), (0..10).collect::<Vec<_>>());
    f.check_everywhere(&mut fs, "merged");
}

#[test]
fn freeing_a_file_with_a_pending_range_deletes_everything() {
    let fs = Fs::new();
    let mut f = big_file(&fs, b"f", 200);
    f.truncate(&fs, B);
    fs.e().fsync().unwrap();
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    fs.e().fsync().unwrap();
    fs.e().wait_reclaim();
    assert_eq!(keys_of(&fs.store, f.ino), vec![]);
    fs.fsck();
}

/// A crash keeps the durable truncate and any prefix of the background's
/// deletion batches; the next mount queues the rest again and finishes.
#[test]
fn a_crash_while_truncated_blocks_are_deleted_is_finished_by_the_next_mount() {
    for keep in [0usize, 1, 2, 1_000] {
        let mut fs = Fs::new();
        let mut f = big_file(&fs, b"f", 300);
        f.truncate(&fs, 5 * B + 1);
        fs.e().fsync().unwrap();
        fs.e().wait_reclaim();
        assert!(fs.stat("truncate_batches") >= 4);
        fs.crash_keeping(keep);
        f.check(&fs, &format!("crash keeping {keep} batches"));
        assert_eq!(
            f.stored_blocks(&fs),
            (0..6).collect::<Vec<_>>(),
            "crash keeping {keep} batches"
        );
        assert!(!has_truncate_record(&fs, &f));
        fs.fsck();
    }
}
