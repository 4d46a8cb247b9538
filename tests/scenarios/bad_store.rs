//! Stores that are not what they should be: mount refuses them with a clear
//! error, and fsck names forged damage (so a clean fsck elsewhere means
//! something).

use churnfs_engine::format::{self, InodeRecord};
use churnfs_engine::{check, Engine, EngineError, FileKind, Ino, KvStore, MemStore, Timespec};
use churnfs_tests::{assert_err, small_config, Fs};
use std::sync::Arc;

fn problems(store: &dyn KvStore) -> Vec<String> {
    check::check_store(store, &mut |_| {}).unwrap().problems
}

fn assert_found(store: &dyn KvStore, what: &str, needle: &str) {
    let p = problems(store);
    assert!(
        p.iter().any(|l| l.contains(needle)),
        "fsck missed {what} (wanted a line containing {needle:?}), said: {p:#?}"
    );
}

fn file_record(nlink: u32, size: u64) -> InodeRecord {
    InodeRecord {
        kind: FileKind::Regular,
        perm: 0o644,
        nlink,
        uid: 0,
        gid: 0,
        size,
        atime: Timespec::default(),
        mtime: Timespec::default(),
        ctime: Timespec::default(),
        rdev: 0,
        parent: Ino(0),
        entries: 0,
        has_xattrs: false,
        extra: if size <= format::INLINE_MAX {
            Some(vec![0; size as usize])
        } else {
            None
        },
    }
}

#[test]
fn mount_refuses_what_is_not_a_churnfs_store() {
    let empty = Arc::new(MemStore::new());
    assert_err!(
        Engine::mount(empty.clone(), small_config()).map(|_| ()),
        EngineError::NotAStore(_)
    );
    Engine::mkfs(&*empty, 0, 0).unwrap();
    assert_err!(Engine::mkfs(&*empty, 0, 0), EngineError::Exists);

    let fs = Fs::new();
    let mut sb = fs.store.get(&format::super_key()).unwrap().unwrap();
    // Version field follows the 8-byte magic.
    sb[8..12].copy_from_slice(&2u32.to_le_bytes());
    let newer = MemStore::new();
    newer.raw_put(&format::super_key(), &sb);
    match Engine::mount(Arc::new(newer), small_config()) {
        Err(EngineError::WrongVersion { found: 2, expected }) => {
            assert_eq!(expected, format::FORMAT_VERSION)
        }
        other => panic!("mount of a newer format: {:?}", other.map(|_| ())),
    }
    let garbage = MemStore::new();
    garbage.raw_put(&format::super_key(), b"not a superblock at all");
    assert_err!(
        Engine::mount(Arc::new(garbage), small_config()).map(|_| ()),
        EngineError::Corrupt { .. }
    );
}

#[test]
fn fsck_names_forged_damage() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let f = fs.mkfile(d, b"f", &[1; 100_000]);
    fs.e().fsync().unwrap();
    fs.fsck();
    let clean = fs.store.crash_copy(0);

    // A name pointing at an inode that does not exist.
    let s = clean.crash_copy(0);
    let name = b"ghost";
    s.raw_put(
        &format::dentry_key(d, format::dir_hash(name), name),
        &format::encode_dentry(Ino(9999), FileKind::Regular),
    );
    assert_found(&s, "a dangling name", "missing ino 9999");

    // An inode with no name and no unlinked record.
    let s = clean.crash_copy(0);
    s.raw_put(
        &format::inode_key(Ino(3)),
        &file_record(0, 0).encode(Ino(3)).unwrap(),
    );
    assert_found(&s, "a leaked inode", "leaked");

    // A link count that disagrees with the names.
    let s = clean.crash_copy(0);
    s.raw_put(
        &format::inode_key(f),
        &file_record(2, 100_000).encode(f).unwrap(),
    );
    assert_found(&s, "a wrong link count", "nlink 2 but 1 names");

    // A block past the end of the file.
    let s = clean.crash_copy(0);
    s.raw_put(&format::block_key(f, churnfs_engine::BlockNo(5)), &[7; 10]);
    assert_found(&s, "a block past the size", "past the file size");

    // A directory whose entry count is off.
    let s = clean.crash_copy(0);
    let name = b"extra";
    s.raw_put(
        &format::dentry_key(d, format::dir_hash(name), name),
        &format::encode_dentry(f, FileKind::Regular),
    );
    assert_found(
        &s,
        "an entry count that is off",
        "counts 1 entries but holds 2",
    );

    // The untouched copy is still clean.
    assert!(problems(&clean).is_empty());
}
