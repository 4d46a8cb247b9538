//! Files unlinked while open: readable and writable through the handle, gone
//! at last release and FORGET, and reclaimed by recovery after a crash.

use churnfs_engine::format::Key;
use churnfs_engine::format::BLOCK_SIZE;
use churnfs_engine::unlinked::FREE_INLINE_MAX;
use churnfs_engine::{BlockNo, EngineError, Ino, SetAttr};
use churnfs_tests::{assert_err, keys_of, pattern, Fs, CTX};

/// Creates `name` holding `len` bytes, fsynced, and keeps it open and known
/// to the kernel (one handle, one lookup reference).
fn open_file(fs: &Fs, name: &[u8], len: usize) -> (Ino, Vec<u8>) {
    let data = pattern(len as u64, len);
    let (attr, _fh) = fs.e().create(CTX, Ino::ROOT, name, 0o644).unwrap();
    fs.e().write(attr.ino, 0, &data).unwrap();
    fs.e().fsync().unwrap();
    (attr.ino, data)
}

#[test]
fn data_stays_readable_until_release_and_forget() {
    for release_first in [true, false] {
        let fs = Fs::new();
        let (f, data) = open_file(&fs, b"f", 100_000);
        fs.e().unlink(Ino::ROOT, b"f").unwrap();
        assert_err!(fs.e().lookup(Ino::ROOT, b"f"), EngineError::NotFound);
        assert!(fs.names(Ino::ROOT).is_empty());
        assert_eq!(fs.e().getattr(f).unwrap().nlink, 0);
        assert_eq!(fs.stat("unlinked_inodes"), 1);
        assert_eq!(fs.read_all(f), data);
        // Still writable, and survives a commit in that state.
        fs.e().write(f, 100_000, b"tail").unwrap();
        fs.e().fsync().unwrap();
        let mut grown = data.clone();
        grown.extend_from_slice(b"tail");
        assert_eq!(fs.read_all(f), grown);
        fs.fsck();
        if release_first {
            fs.e().release(f).unwrap();
            assert!(
                fs.e().getattr(f).is_ok(),
                "the kernel still knows the inode"
            );
            fs.e().forget(f, 1);
        } else {
            fs.e().forget(f, 1);
            assert!(fs.e().getattr(f).is_ok(), "the file is still open");
            fs.e().release(f).unwrap();
        }
        assert_err!(fs.e().getattr(f), EngineError::NotFound);
        assert_eq!(fs.stat("unlinked_inodes"), 0);
        assert_eq!(fs.stat("unlinked_freed"), 1);
        fs.e().fsync().unwrap();
        assert_eq!(
            keys_of(&fs.store, f),
            vec![],
            "release_first {release_first}"
        );
        fs.fsck();
    }
}

#[test]
fn crash_while_open_and_unlinked_is_reclaimed_at_mount() {
    let mut fs = Fs::new();
    let keep = fs.mkfile(Ino::ROOT, b"keep", b"kept");
    let (f, _) = open_file(&fs, b"f", 150_000);
    assert!(
        keys_of(&fs.store, f).len() > 2,
        "blocks of the file are stored"
    );
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    fs.e().fsync().unwrap();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 1);
    assert_eq!(
        keys_of(&fs.store, f),
        vec![],
        "recovery left records of {f}"
    );
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    assert_eq!(fs.read_all(keep), b"kept");
    fs.fsck();
    // Recovery was durable: another crash finds nothing more to do.
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 0);
    fs.fsck();
}

#[test]
fn crash_before_the_unlink_was_committed_keeps_the_file() {
    let mut fs = Fs::new();
    let (f, data) = open_file(&fs, b"f", 5_000);
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 0);
    assert_eq!(fs.ino(Ino::ROOT, b"f").unwrap(), f);
    assert_eq!(fs.read_all(f), data);
    fs.fsck();
}

#[test]
fn unmount_with_open_unlinked_files_reclaims_them_at_next_mount() {
    let mut fs = Fs::new();
    // More than one recovery batch.
    let n = 300;
    let mut inos = Vec::new();
    for i in 0..n {
        let (attr, _) = fs
            .e()
            .create(CTX, Ino::ROOT, format!("t{i}").as_bytes(), 0o600)
            .unwrap();
        fs.e().write(attr.ino, 0, &pattern(i, 3000)).unwrap();
        fs.e()
            .unlink(Ino::ROOT, format!("t{i}").as_bytes())
            .unwrap();
        inos.push(attr.ino);
    }
    assert_eq!(fs.stat("unlinked_inodes"), n);
    fs.remount();
    assert_eq!(fs.stat("recovered_unlinked"), n);
    for ino in inos {
        assert_eq!(keys_of(&fs.store, ino), vec![]);
    }
    assert!(fs.names(Ino::ROOT).is_empty());
    fs.fsck();
}

#[test]
fn a_closed_file_leaves_no_unlinked_record() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"f", b"x");
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    assert_eq!(fs.stat("unlinked_inodes"), 0);
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 0);
    fs.fsck();
}

#[test]
fn removed_directory_still_known_to_the_kernel() {
    let mut fs = Fs::new();
    let d = fs.e().mkdir(CTX, Ino::ROOT, b"d", 0o755).unwrap().ino;
    fs.e().fsync().unwrap();
    fs.e().rmdir(Ino::ROOT, b"d").unwrap();
    // The kernel still holds `d`; nothing can be made in it.
    assert_eq!(fs.e().getattr(d).unwrap().nlink, 0);
    assert_err!(fs.e().create(CTX, d, b"f", 0o644), EngineError::NotFound);
    assert_err!(fs.e().mkdir(CTX, d, b"s", 0o755), EngineError::NotFound);
    assert_err!(fs.e().lookup(d, b"x"), EngineError::NotFound);
    assert_err!(
        fs.e().readdir(d, 0, false, &mut |_| true),
        EngineError::NotFound
    );
    assert_eq!(fs.stat("unlinked_inodes"), 1);
    fs.e().fsync().unwrap();
    fs.fsck();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 1);
    assert_eq!(keys_of(&fs.store, d), vec![]);
    fs.fsck();
    // Without a crash, FORGET frees it.
    let d = fs.e().mkdir(CTX, Ino::ROOT, b"d", 0o755).unwrap().ino;
    fs.e().rmdir(Ino::ROOT, b"d").unwrap();
    fs.e().forget(d, 1);
    assert_err!(fs.e().getattr(d), EngineError::NotFound);
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, d), vec![]);
    fs.fsck();
}

/// After a crash with many open-unlinked files the mount returns at once
/// and serves requests while the orphans are freed behind it; progress is in
/// the stats and the end state is clean.
#[test]
fn a_mount_serves_while_the_orphans_of_a_crash_are_freed() {
    let mut fs = Fs::new();
    let n = 3_000;
    let mut inos = Vec::new();
    for i in 0..n {
        let name = format!("t{i}");
        let (attr, _) = fs
            .e()
            .create(CTX, Ino::ROOT, name.as_bytes(), 0o600)
            .unwrap();
        // Past the inline bytes, so each leaves a block to reclaim.
        fs.e().write(attr.ino, 0, &pattern(i, 3000)).unwrap();
        fs.e().unlink(Ino::ROOT, name.as_bytes()).unwrap();
        inos.push(attr.ino);
    }
    fs.e().fsync().unwrap();
    // Power loss, then a mount that does not wait for the reclaim.
    let copy = std::sync::Arc::new(fs.store.crash_copy(0));
    let _ = fs.engine.shutdown();
    fs.store = copy;
    fs.engine = churnfs_engine::Engine::mount(fs.store.clone(), fs.cfg.clone()).unwrap();
    let f = fs.mkfile(Ino::ROOT, b"new", b"written during the reclaim");
    fs.e().fsync().unwrap();
    fs.e().wait_reclaim();
    assert_eq!(fs.stat("recovered_unlinked"), n);
    assert_eq!(fs.stat("recovery_running"), 0);
    for ino in inos {
        assert_eq!(keys_of(&fs.store, ino), vec![]);
    }
    assert_eq!(fs.read_all(f), b"written during the reclaim");
    fs.fsck();
}

/// Creates a file of 200 blocks (12.5 MiB, above `FREE_INLINE_MAX`),
/// fsynced, then unlinks, closes and forgets it and commits: the commit
/// hands it to the reclaim thread instead of deleting its blocks.
fn free_a_large_file(fs: &Fs) -> Ino {
    let blocks = 200;
    let (f, _) = open_file(fs, b"big", blocks * BLOCK_SIZE as usize);
    assert!(keys_of(&fs.store, f).len() > blocks, "blocks are stored");
    unlink_and_free(fs, b"big", f);
    f
}

/// Unlinks `name` in the root, open as `f`, then releases and forgets `f`
/// and commits: the commit frees it.
fn unlink_and_free(fs: &Fs, name: &[u8], f: Ino) {
    fs.e().unlink(Ino::ROOT, name).unwrap();
    fs.e().release(f).unwrap();
    fs.e().forget(f, 1);
    fs.e().fsync().unwrap();
}

/// A large file's data is not deleted by the commit that frees it (a commit
/// holds the state lock every request needs): the reclaim thread deletes it
/// in batches of `free_batch_keys` keys, the inode's own records last.
#[test]
fn a_large_file_is_freed_in_the_background_in_bounded_batches() {
    let fs = Fs::new();
    let f = free_a_large_file(&fs);
    assert_eq!(fs.stat("large_frees_queued"), 1);
    fs.e().wait_reclaim();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    assert_eq!(fs.stat("large_frees_done"), 1);
    assert_eq!(fs.stat("large_frees_pending"), 0);
    let batches = fs.stat("free_batches");
    assert!(
        batches >= 200 / fs.cfg.free_batch_keys as u64,
        "{batches} batches for 200 blocks at {} keys each",
        fs.cfg.free_batch_keys
    );
    fs.fsck();
}

/// A crash part way through the background deletion leaves the `U` record
/// (deleted last), and recovery at the next mount finishes the file.
#[test]
fn a_crash_while_a_large_file_is_freed_is_finished_by_recovery() {
    for keep in [0, 1, 2, 1_000] {
        let mut fs = Fs::new();
        let kept = fs.mkfile(Ino::ROOT, b"keep", b"kept");
        let f = free_a_large_file(&fs);
        // Every deletion applied, none synced: the crash keeps `keep` of
        // the reclaim thread's batches.
        fs.e().wait_reclaim();
        fs.crash_keeping(keep);
        let recovered = fs.stat("recovered_unlinked");
        if keep == 0 {
            assert_eq!(recovered, 1, "keep {keep}");
        }
        assert!(recovered <= 1, "keep {keep}: {recovered}");
        assert_eq!(keys_of(&fs.store, f), vec![], "keep {keep}");
        assert_eq!(fs.read_all(kept), b"kept");
        fs.fsck();
    }
}

/// O_TMPFILE: born without a link, so an open-unlinked file from the start.
#[test]
fn a_tmpfile_is_unlinked_from_birth_and_freed_at_last_release_and_forget() {
    let fs = Fs::new();
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let f = attr.ino;
    assert_eq!(attr.nlink, 0);
    assert!(fs.names(Ino::ROOT).is_empty(), "a tmpfile has no name");
    assert_eq!(fs.stat("unlinked_inodes"), 1);
    let data = pattern(7, 100_000);
    fs.e().write(f, 0, &data).unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(fs.read_all(f), data);
    fs.fsck();
    fs.e().release(f).unwrap();
    fs.e().forget(f, 1);
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    assert_eq!(fs.stat("unlinked_inodes"), 0);
    assert_eq!(fs.stat("unlinked_freed"), 1);
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![], "records of the tmpfile left");
    fs.fsck();
}

/// linkat of a tmpfile's descriptor gives it a name: it leaves the unlinked
/// set, outlives its release and FORGET, and a crash keeps it.
#[test]
fn a_linked_tmpfile_is_an_ordinary_file() {
    let mut fs = Fs::new();
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o640, true).unwrap();
    let f = attr.ino;
    let data = pattern(3, 9_000);
    fs.e().write(f, 0, &data).unwrap();
    fs.e().fsync().unwrap();
    let linked = fs.e().link(f, Ino::ROOT, b"named").unwrap();
    assert_eq!(linked.nlink, 1);
    assert_eq!(fs.stat("unlinked_inodes"), 0);
    fs.e().release(f).unwrap();
    // The reference of the tmpfile's reply and the link's.
    fs.e().forget(f, 2);
    fs.e().fsync().unwrap();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 0);
    assert_eq!(fs.ino(Ino::ROOT, b"named").unwrap(), f);
    assert_eq!(fs.read_all(f), data);
    assert_eq!(fs.e().getattr(f).unwrap().perm, 0o640);
    fs.fsck();
}

/// A crash while a tmpfile is open: recovery frees it.
#[test]
fn a_crash_with_a_tmpfile_open_reclaims_it_at_mount() {
    let mut fs = Fs::new();
    let keep = fs.mkfile(Ino::ROOT, b"keep", b"kept");
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let f = attr.ino;
    fs.e().write(f, 0, &pattern(1, 150_000)).unwrap();
    fs.e().fsync().unwrap();
    assert!(
        keys_of(&fs.store, f).len() > 2,
        "blocks of the tmpfile are stored"
    );
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 1);
    assert_eq!(
        keys_of(&fs.store, f),
        vec![],
        "recovery left records of {f}"
    );
    assert_eq!(fs.read_all(keep), b"kept");
    fs.fsck();
}

/// Named before its first commit: one batch writes it with its link and no
/// `U` record. Closed with FORGET first, then RELEASE.
#[test]
fn a_tmpfile_linked_before_its_first_commit_is_stored_with_its_name() {
    let mut fs = Fs::new();
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let f = attr.ino;
    fs.e().write(f, 0, b"early").unwrap();
    fs.e().link(f, Ino::ROOT, b"early").unwrap();
    fs.e().forget(f, 2);
    assert!(fs.e().getattr(f).is_ok(), "named and open");
    fs.e().release(f).unwrap();
    fs.e().fsync().unwrap();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 0);
    assert_eq!(fs.ino(Ino::ROOT, b"early").unwrap(), f);
    assert_eq!(fs.read_all(f), b"early");
    fs.fsck();
}

/// A crash after the tmpfile was stored but before its link was: recovery
/// frees it, and the name never appears.
#[test]
fn a_crash_before_a_tmpfile_link_was_committed_frees_it() {
    let mut fs = Fs::new();
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let f = attr.ino;
    fs.e().write(f, 0, &pattern(5, 20_000)).unwrap();
    fs.e().fsync().unwrap();
    fs.e().link(f, Ino::ROOT, b"late").unwrap();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 1);
    assert_err!(fs.e().lookup(Ino::ROOT, b"late"), EngineError::NotFound);
    assert_eq!(
        keys_of(&fs.store, f),
        vec![],
        "recovery left records of {f}"
    );
    fs.fsck();
}

/// Without open handles (the kernel checks permissions and sends no OPEN
/// or RELEASE), a tmpfile lives on the kernel's reference alone.
#[test]
fn a_tmpfile_without_an_open_handle_is_freed_at_forget() {
    let fs = Fs::new();
    let (attr, fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, false).unwrap();
    let f = attr.ino;
    assert_eq!(fh.0, 0);
    assert_eq!(fs.stat("open_handles"), 0);
    assert_eq!(fs.stat("unlinked_inodes"), 1);
    fs.e().write(f, 0, b"held by the kernel").unwrap();
    fs.e().fsync().unwrap();
    fs.e().forget(f, 1);
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    assert_eq!(fs.stat("unlinked_inodes"), 0);
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    fs.fsck();
}

/// Creates `name` with `len` inline bytes (committed), unlinks it while it
/// is open and commits: the store holds nothing of it any more.
fn kept_out_file(fs: &Fs, name: &[u8], len: usize) -> Ino {
    let (f, _) = open_file(fs, name, len);
    fs.e().unlink(Ino::ROOT, name).unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    f
}

/// An unlinked file whose bytes are all inline leaves the store with the
/// unlink's commit (a crash would leave nothing reachable of it), lives on
/// in memory while open, and goes back to the store, with a `U` record, once
/// it holds a stored block.
#[test]
fn an_unlinked_file_of_inline_bytes_is_kept_out_of_the_store() {
    let mut fs = Fs::new();
    let keep = fs.mkfile(Ino::ROOT, b"keep", b"kept");
    let (f, data) = open_file(&fs, b"f", 100);
    assert!(!keys_of(&fs.store, f).is_empty(), "stored while named");
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![], "unlinked and inline");
    assert_eq!(fs.stat("unlinked_unstored"), 1);
    assert_eq!(fs.stat("unlinked_inodes"), 1);
    // Still a file through its handle, inline writes included.
    assert_eq!(fs.read_all(f), data);
    fs.e().write(f, 100, b"more").unwrap();
    let mode = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    fs.e().setattr(f, mode).unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    assert_eq!(fs.stat("unlinked_unstored"), 1, "one file, counted once");
    let mut grown = data.clone();
    grown.extend_from_slice(b"more");
    assert_eq!(fs.read_all(f), grown);
    assert_eq!(fs.e().getattr(f).unwrap().perm, 0o600);
    fs.fsck();
    // A crash finds nothing to reclaim.
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 0);
    assert_err!(fs.e().lookup(Ino::ROOT, b"f"), EngineError::NotFound);
    assert_eq!(keys_of(&fs.store, f), vec![]);
    assert_eq!(fs.read_all(keep), b"kept");
    fs.fsck();

    // Grown past the inline bytes: its block, inode and `U` record are
    // written together, and a crash reclaims them.
    let f = kept_out_file(&fs, b"g", 100);
    fs.e().write(f, 0, &pattern(9, 5_000)).unwrap();
    fs.e().fsync().unwrap();
    let keys = keys_of(&fs.store, f);
    assert!(keys.contains(&Key::Inode(f)), "{keys:?}");
    assert!(keys.contains(&Key::Unlinked(f)), "{keys:?}");
    assert!(keys.contains(&Key::Block(f, BlockNo(0))), "{keys:?}");
    assert_eq!(fs.read_all(f), pattern(9, 5_000));
    fs.fsck();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 1);
    assert_eq!(keys_of(&fs.store, f), vec![]);
    fs.fsck();
}

/// An empty tmpfile never reaches the store; linked, it is stored with its
/// name, and an xattr set on an unlinked file puts it back on the store.
#[test]
fn an_empty_tmpfile_reaches_the_store_only_when_linked() {
    let mut fs = Fs::new();
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let f = attr.ino;
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    fs.e().link(f, Ino::ROOT, b"named").unwrap();
    fs.e().fsync().unwrap();
    assert!(keys_of(&fs.store, f).contains(&Key::Inode(f)));
    assert!(!keys_of(&fs.store, f).contains(&Key::Unlinked(f)));
    fs.crash();
    assert_eq!(fs.ino(Ino::ROOT, b"named").unwrap(), f);
    fs.fsck();

    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let t = attr.ino;
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, t), vec![]);
    fs.e().setxattr(t, b"user.k", b"v", 0).unwrap();
    fs.e().fsync().unwrap();
    let keys = keys_of(&fs.store, t);
    for k in [Key::Inode(t), Key::Unlinked(t), Key::Xattr(t)] {
        assert!(keys.contains(&k), "{k:?} missing from {keys:?}");
    }
    fs.fsck();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 1);
    assert_eq!(keys_of(&fs.store, t), vec![]);
    fs.fsck();
}

/// Freeing a file the store holds no block of deletes its records without
/// scanning for blocks; a file with stored blocks is scanned.
#[test]
fn a_freed_file_without_stored_blocks_is_deleted_without_a_scan() {
    let fs = Fs::new();
    let small = fs.mkfile(Ino::ROOT, b"small", b"inline bytes");
    let big = fs.mkfile(Ino::ROOT, b"big", &pattern(2, 3 * BLOCK_SIZE as usize));
    fs.e().fsync().unwrap();
    let scans = fs.stat("store_scans");
    fs.e().unlink(Ino::ROOT, b"small").unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(fs.stat("frees_unscanned"), 1);
    assert_eq!(fs.stat("store_scans"), scans, "no scan for an inline file");
    assert_eq!(keys_of(&fs.store, small), vec![]);
    fs.e().unlink(Ino::ROOT, b"big").unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(fs.stat("frees_unscanned"), 1);
    assert!(fs.stat("store_scans") > scans, "the blocks were looked for");
    assert_eq!(keys_of(&fs.store, big), vec![]);
    // A sparse file far above `FREE_INLINE_MAX` with no block written: no
    // scan, and nothing handed to the reclaim thread.
    let (sparse, _) = open_file(&fs, b"sparse", 0);
    let size = SetAttr {
        size: Some(100 * FREE_INLINE_MAX),
        ..SetAttr::default()
    };
    fs.e().setattr(sparse, size).unwrap();
    fs.e().fsync().unwrap();
    assert!(keys_of(&fs.store, sparse).contains(&Key::Inode(sparse)));
    let scans = fs.stat("store_scans");
    unlink_and_free(&fs, b"sparse", sparse);
    assert_eq!(fs.stat("frees_unscanned"), 2);
    assert_eq!(fs.stat("store_scans"), scans, "no scan for a sparse file");
    assert_eq!(fs.stat("large_frees_queued"), 0);
    assert_eq!(keys_of(&fs.store, sparse), vec![]);
    fs.fsck();
}

/// The items of one commit come in the order they were first dirtied: an
/// inode dirtied before its growth past the inline bytes, an xattr on a
/// named file unlinked while open, and a kept-out tmpfile grown and then
/// linked all leave a store that a crash recovers cleanly.
#[test]
fn a_kept_out_file_goes_back_to_the_store_whatever_the_order_of_its_items() {
    let mut fs = Fs::new();
    // The inode's item first (a chmod), then a write past the inline bytes.
    let f = kept_out_file(&fs, b"f", 10);
    let mode = SetAttr {
        mode: Some(0o640),
        ..SetAttr::default()
    };
    fs.e().setattr(f, mode).unwrap();
    fs.e()
        .write(f, 0, &pattern(4, 3 * BLOCK_SIZE as usize))
        .unwrap();
    fs.e().fsync().unwrap();
    let keys = keys_of(&fs.store, f);
    for k in [Key::Inode(f), Key::Unlinked(f), Key::Block(f, BlockNo(2))] {
        assert!(keys.contains(&k), "{k:?} missing from {keys:?}");
    }
    // An xattr on a named file unlinked while open, in the unlink's commit.
    let (g, _) = open_file(&fs, b"g", 10);
    fs.e().unlink(Ino::ROOT, b"g").unwrap();
    fs.e().setxattr(g, b"user.k", b"v", 0).unwrap();
    fs.e().fsync().unwrap();
    let keys = keys_of(&fs.store, g);
    for k in [Key::Inode(g), Key::Unlinked(g), Key::Xattr(g)] {
        assert!(keys.contains(&k), "{k:?} missing from {keys:?}");
    }
    // A kept-out tmpfile grown past the inline bytes, then linked.
    let (attr, _fh) = fs.e().tmpfile(CTX, Ino::ROOT, 0o600, true).unwrap();
    let t = attr.ino;
    fs.e().write(t, 0, b"small").unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, t), vec![]);
    fs.e().write(t, 0, &pattern(6, 5_000)).unwrap();
    fs.e().link(t, Ino::ROOT, b"linked").unwrap();
    fs.e().fsync().unwrap();
    assert!(!keys_of(&fs.store, t).contains(&Key::Unlinked(t)));
    fs.fsck();
    fs.crash();
    assert_eq!(fs.stat("recovered_unlinked"), 2, "f and g");
    assert_eq!(keys_of(&fs.store, f), vec![]);
    assert_eq!(keys_of(&fs.store, g), vec![]);
    assert_eq!(fs.ino(Ino::ROOT, b"linked").unwrap(), t);
    assert_eq!(fs.read_all(t), pattern(6, 5_000));
    fs.fsck();
}
