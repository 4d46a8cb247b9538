//! Mistakes a user can make with the command line: one clear line, non-zero exit.

use crate::support::{churnfs, Mount};
use std::process::Output;

fn fails_with(out: Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, got success");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{err}");
    assert!(
        lines[0].contains(needle),
        "{:?} does not mention {needle:?}",
        lines[0]
    );
}

#[test]
fn mount_and_mkfs_refuse_bad_arguments() {
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let p = |s: &str| t.path().join(s).to_string_lossy().to_string();
    std::fs::create_dir(p("mnt")).unwrap();
    std::fs::create_dir(p("foreign")).unwrap();
    std::fs::write(p("foreign/file"), b"x").unwrap();
    fails_with(
        churnfs(&["mount", &p("nope"), &p("mnt")]),
        "not a churnfs store",
    );
    fails_with(
        churnfs(&["mount", &p("foreign"), &p("mnt")]),
        "not a churnfs store",
    );
    fails_with(churnfs(&["mkfs", &p("foreign")]), "not empty");
    assert!(churnfs(&["mkfs", &p("store")]).status.success());
    fails_with(
        churnfs(&["mount", &p("store"), &p("foreign")]),
        "not an empty directory",
    );
    fails_with(
        churnfs(&["mount", &p("store"), &p("nomnt")]),
        "does not exist",
    );
    fails_with(
        churnfs(&["mount", &p("store"), &p("mnt"), "-o", "frobnicate=1"]),
        "unknown mount option",
    );
}

#[test]
fn second_mount_of_a_store_is_refused() {
    let m = Mount::new("");
    let other = m.dir.path().join("mnt2");
    std::fs::create_dir(&other).unwrap();
    fails_with(
        churnfs(&["mount", m.store.to_str().unwrap(), other.to_str().unwrap()]),
        "already mounted",
    );
    fails_with(
        churnfs(&["fsck", m.store.to_str().unwrap()]),
        "already mounted",
    );
}

#[test]
fn store_of_a_future_format_version_is_refused() {
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let store = t.path().join("store");
    assert!(churnfs(&["mkfs", store.to_str().unwrap()]).status.success());
    {
        use churnfs_engine::{format, KvStore};
        let kv = churnfs_engine::FjallStore::open(&store, false, 1 << 20).unwrap();
        let mut sb =
            format::Superblock::decode(&kv.get(&format::super_key()).unwrap().unwrap()).unwrap();
        sb.version = format::FORMAT_VERSION + 1;
        let mut b = churnfs_engine::store::Batch::default();
        b.put(format::super_key(), sb.encode());
        kv.apply(&b).unwrap();
        kv.sync().unwrap();
    }
    let mnt = t.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    fails_with(
        churnfs(&["mount", store.to_str().unwrap(), mnt.to_str().unwrap()]),
        "format version 2",
    );
    fails_with(
        churnfs(&["fsck", store.to_str().unwrap()]),
        "format version 2",
    );
}
