//! Extended attributes: set, get, list, remove, the CREATE/REPLACE flags, the
//! size limits, and persistence across remount.

use churnfs_engine::format::Key;
use churnfs_engine::{xattr_flags, EngineError, Ino};
use churnfs_tests::{assert_err, keys_of, Fs};

fn list(fs: &Fs, ino: Ino) -> Vec<Vec<u8>> {
    let raw = fs.e().listxattr(ino).unwrap();
    assert!(
        raw.is_empty() || raw.last() == Some(&0),
        "list not NUL-terminated"
    );
    raw.split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| n.to_vec())
        .collect()
}

fn has_xattr_key(fs: &Fs, ino: Ino) -> bool {
    keys_of(&fs.store, ino)
        .iter()
        .any(|k| matches!(k, Key::Xattr(_)))
}

#[test]
fn set_get_list_remove_and_survive_remount() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"f", b"data");
    let d = fs.mkdir(Ino::ROOT, b"d");
    assert!(list(&fs, f).is_empty());
    assert_err!(fs.e().getxattr(f, b"user.a"), EngineError::NoAttr);
    fs.e().setxattr(f, b"user.b", b"2", 0).unwrap();
    fs.e().setxattr(f, b"user.a", b"1", 0).unwrap();
    fs.e().setxattr(f, b"user.empty", b"", 0).unwrap();
    fs.e().setxattr(d, b"user.dir", &[0, 1, 2, 255], 0).unwrap();
    fs.e().setxattr(f, b"user.b", b"two", 0).unwrap();
    for round in 0..2 {
        assert_eq!(
            list(&fs, f),
            vec![
                b"user.a".to_vec(),
                b"user.b".to_vec(),
                b"user.empty".to_vec()
            ],
            "round {round}"
        );
        assert_eq!(fs.e().getxattr(f, b"user.a").unwrap(), b"1");
        assert_eq!(fs.e().getxattr(f, b"user.b").unwrap(), b"two");
        assert_eq!(fs.e().getxattr(f, b"user.empty").unwrap(), b"");
        assert_eq!(fs.e().getxattr(d, b"user.dir").unwrap(), [0, 1, 2, 255]);
        assert_eq!(fs.read_all(f), b"data", "xattrs do not touch the data");
        fs.remount();
        fs.fsck();
    }
    fs.e().removexattr(f, b"user.a").unwrap();
    assert_err!(fs.e().getxattr(f, b"user.a"), EngineError::NoAttr);
    assert_err!(fs.e().removexattr(f, b"user.a"), EngineError::NoAttr);
    assert_eq!(
        list(&fs, f),
        vec![b"user.b".to_vec(), b"user.empty".to_vec()]
    );
    fs.remount();
    assert_eq!(
        list(&fs, f),
        vec![b"user.b".to_vec(), b"user.empty".to_vec()]
    );
    assert!(has_xattr_key(&fs, f));
    // Removing the last one removes the record.
    fs.e().removexattr(f, b"user.b").unwrap();
    fs.e().removexattr(f, b"user.empty").unwrap();
    assert!(list(&fs, f).is_empty());
    fs.e().fsync().unwrap();
    assert!(!has_xattr_key(&fs, f), "an empty xattr set left its record");
    fs.remount();
    assert!(list(&fs, f).is_empty());
    assert_err!(fs.e().getxattr(f, b"user.b"), EngineError::NoAttr);
    fs.fsck();
}

#[test]
fn create_and_replace_flags() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"f", b"");
    assert_err!(
        fs.e().setxattr(f, b"user.x", b"v", xattr_flags::REPLACE),
        EngineError::NoAttr
    );
    assert!(
        list(&fs, f).is_empty(),
        "a refused REPLACE created the attribute"
    );
    fs.e()
        .setxattr(f, b"user.x", b"v1", xattr_flags::CREATE)
        .unwrap();
    assert_err!(
        fs.e().setxattr(f, b"user.x", b"v2", xattr_flags::CREATE),
        EngineError::Exists
    );
    assert_eq!(fs.e().getxattr(f, b"user.x").unwrap(), b"v1");
    fs.e()
        .setxattr(f, b"user.x", b"v3", xattr_flags::REPLACE)
        .unwrap();
    assert_eq!(fs.e().getxattr(f, b"user.x").unwrap(), b"v3");
    fs.remount();
    assert_eq!(fs.e().getxattr(f, b"user.x").unwrap(), b"v3");
    fs.fsck();
}

#[test]
fn size_limits() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"f", b"");
    let long = vec![b'n'; 256];
    let max = vec![b'm'; 255];
    assert_err!(fs.e().setxattr(f, &long, b"v", 0), EngineError::Range);
    assert_err!(fs.e().setxattr(f, b"", b"v", 0), EngineError::Range);
    assert_err!(
        fs.e().setxattr(f, b"user.big", &vec![7; 64 * 1024 + 1], 0),
        EngineError::TooBig
    );
    assert!(list(&fs, f).is_empty(), "refused sets changed something");
    fs.e().setxattr(f, &max, b"longest name", 0).unwrap();
    let big = vec![7u8; 60 * 1024];
    fs.e().setxattr(f, b"user.big", &big, 0).unwrap();
    // The per-inode total is bounded; a refusal keeps the old value.
    assert_err!(
        fs.e().setxattr(f, b"user.more", &vec![1; 8 * 1024], 0),
        EngineError::NoSpace
    );
    assert_err!(
        fs.e().setxattr(f, b"user.big", &vec![9; 64 * 1024], 0),
        EngineError::NoSpace
    );
    assert_eq!(fs.e().getxattr(f, b"user.big").unwrap(), big);
    assert_err!(fs.e().getxattr(f, b"user.more"), EngineError::NoAttr);
    fs.remount();
    assert_eq!(fs.e().getxattr(f, &max).unwrap(), b"longest name");
    assert_eq!(fs.e().getxattr(f, b"user.big").unwrap(), big);
    assert_eq!(list(&fs, f).len(), 2);
    fs.fsck();
}

#[test]
fn xattrs_go_with_the_inode() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"f", b"");
    fs.e().setxattr(f, b"user.k", b"v", 0).unwrap();
    fs.e().fsync().unwrap();
    assert!(has_xattr_key(&fs, f));
    fs.e().unlink(Ino::ROOT, b"f").unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(keys_of(&fs.store, f), vec![]);
    // Set and dropped within one commit: never stored.
    let g = fs.mkfile(Ino::ROOT, b"g", b"");
    fs.e().setxattr(g, b"user.k", b"v", 0).unwrap();
    fs.e().unlink(Ino::ROOT, b"g").unwrap();
    fs.remount();
    assert_eq!(keys_of(&fs.store, g), vec![]);
    fs.fsck();
}
