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

/// `fsck --repair`: every kind of damage fsck can fix without guessing is
/// fixed in one pass, a second check is clean, and the store mounts with
/// its data where the repair says (a file that lost its name in
/// /lost+found, with its bytes).
#[test]
fn fsck_repair_leaves_a_clean_store_that_mounts_with_its_data() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let kept: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let f = fs.mkfile(d, b"f", &kept);
    let g = fs.mkfile(d, b"g", b"small");
    let sub = fs.mkdir(d, b"sub");
    fs.e().fsync().unwrap();
    fs.fsck();
    let s = fs.store.crash_copy(0);
    // A name pointing at nothing.
    let ghost = b"ghost";
    s.raw_put(
        &format::dentry_key(d, format::dir_hash(ghost), ghost),
        &format::encode_dentry(Ino(9999), FileKind::Regular),
    );
    // f loses its name (still one link): it belongs in /lost+found.
    s.raw_delete(&format::dentry_key(d, format::dir_hash(b"f"), b"f"));
    // g's link count is wrong.
    let mut rec = InodeRecord::decode(g, &s.get(&format::inode_key(g)).unwrap().unwrap()).unwrap();
    rec.nlink = 3;
    s.raw_put(&format::inode_key(g), &rec.encode(g).unwrap());
    // sub's directory count of d and its own nlink are off.
    let mut rec =
        InodeRecord::decode(sub, &s.get(&format::inode_key(sub)).unwrap().unwrap()).unwrap();
    rec.nlink = 7;
    s.raw_put(&format::inode_key(sub), &rec.encode(sub).unwrap());
    // Data and records of inodes that do not exist.
    s.raw_put(
        &format::block_key(Ino(8888), churnfs_engine::BlockNo(0)),
        &[1; 10],
    );
    s.raw_put(&format::unlinked_key(Ino(7777)), &format::encode_unlinked());
    // A leaked inode: no links, no record of it.
    s.raw_put(
        &format::inode_key(Ino(6666)),
        &file_record(0, 0).encode(Ino(6666)).unwrap(),
    );
    let before = check::check_store(&s, &mut |_| {}).unwrap();
    assert!(before.problems.len() >= 7, "{:#?}", before.problems);
    assert!(!before.fixes.is_empty());
    let lines = check::repair_store(&s, &before).unwrap();
    let said = |needle: &str| {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "no repair line with {needle:?}: {lines:#?}"
        )
    };
    said("pointed at missing ino 9999: removed");
    said(&format!("{f}: had no name: now /lost+found/#{}", f.0));
    said(&format!("{g}: link count 3 set to 1"));
    said(&format!("{sub}: link count 7 set to 2"));
    said("block 0 of missing or non-file ino 8888 removed");
    said("unlinked record of missing ino 7777 removed");
    said("ino 6666: no links and no record of it");
    said("/lost+found made");
    let after = check::check_store(&s, &mut |_| {}).unwrap();
    assert!(after.problems.is_empty(), "{:#?}", after.problems);
    // The repaired store mounts; f's bytes are in /lost+found; the leaked
    // inode is freed by the mount.
    let e = Engine::mount(Arc::new(s.crash_copy(0)), small_config()).unwrap();
    e.wait_reclaim();
    let lf = churnfs_tests::ino(&*e, Ino::ROOT, b"lost+found").unwrap();
    let found = churnfs_tests::ino(&*e, lf, format!("#{}", f.0).as_bytes()).unwrap();
    assert_eq!(found, f);
    assert_eq!(churnfs_tests::read_all(&*e, f), kept);
    e.shutdown().unwrap();
}
