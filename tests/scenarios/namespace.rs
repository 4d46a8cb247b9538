//! Names: create, mkdir, lookup, readdir (plain and plus, paged by cookie),
//! the error answers, directory link counts and parent timestamps.

use churnfs_engine::{EngineError, FileKind, Ino, RenameFlags, SetAttr, SetTime, Timespec};
use churnfs_tests::{assert_err, Fs, CTX};
use std::collections::BTreeSet;

#[test]
fn create_mkdir_lookup_and_getattr_agree() {
    let mut fs = Fs::new();
    let (attr, _fh) = fs.e().create(CTX, Ino::ROOT, b"f", 0o640).unwrap();
    assert_eq!(attr.kind, FileKind::Regular);
    assert_eq!(attr.nlink, 1);
    assert_eq!(attr.size, 0);
    assert_eq!(attr.perm, 0o640);
    fs.e().release(attr.ino).unwrap();
    fs.e().forget(attr.ino, 1);
    let d = fs.e().mkdir(CTX, Ino::ROOT, b"d", 0o750).unwrap();
    fs.e().forget(d.ino, 1);
    assert_eq!(d.kind, FileKind::Directory);
    assert_eq!(d.nlink, 2);
    assert_eq!(d.perm, 0o750);
    assert_ne!(attr.ino, d.ino);
    for _ in 0..2 {
        assert_eq!(fs.ino(Ino::ROOT, b"f").unwrap(), attr.ino);
        assert_eq!(fs.ino(Ino::ROOT, b"d").unwrap(), d.ino);
        assert_eq!(fs.ino(d.ino, b".").unwrap(), d.ino);
        assert_eq!(fs.ino(d.ino, b"..").unwrap(), Ino::ROOT);
        assert_eq!(fs.ino(Ino::ROOT, b"..").unwrap(), Ino::ROOT);
        let g = fs.e().getattr(attr.ino).unwrap();
        assert_eq!((g.kind, g.perm, g.nlink), (FileKind::Regular, 0o640, 1));
        assert_eq!(
            fs.names(Ino::ROOT),
            vec![
                (b"d".to_vec(), d.ino, FileKind::Directory),
                (b"f".to_vec(), attr.ino, FileKind::Regular)
            ]
        );
        fs.remount();
    }
    fs.fsck();
}

#[test]
fn symlink_and_mknod_survive_remount() {
    let mut fs = Fs::new();
    let s = fs.e().symlink(CTX, Ino::ROOT, b"l", b"some/where").unwrap();
    fs.e().forget(s.ino, 1);
    assert_eq!(s.kind, FileKind::Symlink);
    assert_eq!(s.size, 10);
    let p = fs
        .e()
        .mknod(CTX, Ino::ROOT, b"p", libc::S_IFIFO | 0o600, 0)
        .unwrap();
    fs.e().forget(p.ino, 1);
    assert_err!(
        fs.e().symlink(CTX, Ino::ROOT, b"e", b""),
        EngineError::NotFound
    );
    assert_err!(
        fs.e().mknod(CTX, Ino::ROOT, b"x", libc::S_IFDIR | 0o700, 0),
        EngineError::Invalid(_)
    );
    fs.remount();
    assert_eq!(fs.e().readlink(s.ino).unwrap(), b"some/where");
    assert_eq!(fs.e().getattr(p.ino).unwrap().kind, FileKind::Fifo);
    assert_err!(fs.e().readlink(p.ino), EngineError::Invalid(_));
    fs.fsck();
}

#[test]
fn error_answers() {
    let fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"file", b"x");
    let d = fs.mkdir(Ino::ROOT, b"dir");
    fs.mkfile(d, b"inner", b"");

    assert_err!(fs.e().lookup(Ino::ROOT, b"missing"), EngineError::NotFound);
    assert_err!(fs.e().lookup(d, b"missing"), EngineError::NotFound);
    assert_err!(
        fs.e().create(CTX, Ino::ROOT, b"file", 0o644),
        EngineError::Exists
    );
    assert_err!(
        fs.e().create(CTX, Ino::ROOT, b"dir", 0o644),
        EngineError::Exists
    );
    assert_err!(
        fs.e().mkdir(CTX, Ino::ROOT, b"file", 0o755),
        EngineError::Exists
    );
    assert_err!(
        fs.e().mkdir(CTX, Ino::ROOT, b"dir", 0o755),
        EngineError::Exists
    );
    assert_err!(
        fs.e().symlink(CTX, Ino::ROOT, b"dir", b"t"),
        EngineError::Exists
    );
    // A file used as a directory.
    assert_err!(fs.e().lookup(f, b"x"), EngineError::NotDir);
    assert_err!(fs.e().create(CTX, f, b"x", 0o644), EngineError::NotDir);
    assert_err!(fs.e().mkdir(CTX, f, b"x", 0o755), EngineError::NotDir);
    assert_err!(fs.e().unlink(f, b"x"), EngineError::NotDir);
    assert_err!(
        fs.e().readdir(f, 0, false, &mut |_| true),
        EngineError::NotDir
    );
    assert_err!(fs.e().opendir(f), EngineError::NotDir);
    // Kind mismatches.
    assert_err!(fs.e().unlink(Ino::ROOT, b"dir"), EngineError::IsDir);
    assert_err!(fs.e().rmdir(Ino::ROOT, b"file"), EngineError::NotDir);
    assert_err!(fs.e().rmdir(Ino::ROOT, b"dir"), EngineError::NotEmpty);
    assert_err!(fs.e().open(d), EngineError::IsDir);
    assert_err!(fs.e().read(d, 0, 10), EngineError::IsDir);
    assert_err!(fs.e().write(d, 0, b"x"), EngineError::IsDir);
    assert_err!(fs.e().link(d, Ino::ROOT, b"dirlink"), EngineError::Perm);
    // Missing names.
    assert_err!(fs.e().unlink(Ino::ROOT, b"missing"), EngineError::NotFound);
    assert_err!(fs.e().rmdir(Ino::ROOT, b"missing"), EngineError::NotFound);
    assert_err!(fs.e().getattr(Ino(999_999)), EngineError::NotFound);
    // Bad names.
    assert_err!(
        fs.e().create(CTX, Ino::ROOT, b"a/b", 0o644),
        EngineError::Invalid(_)
    );
    assert_err!(
        fs.e().create(CTX, Ino::ROOT, b"", 0o644),
        EngineError::Invalid(_)
    );
    assert_err!(
        fs.e().mkdir(CTX, Ino::ROOT, b".", 0o755),
        EngineError::Invalid(_)
    );
    assert_err!(fs.e().rmdir(d, b"."), EngineError::Invalid(_));
    assert_err!(fs.e().rmdir(d, b".."), EngineError::NotEmpty);
    // Nothing above changed the tree.
    let names: Vec<_> = fs.names(Ino::ROOT).into_iter().map(|n| n.0).collect();
    assert_eq!(names, vec![b"dir".to_vec(), b"file".to_vec()]);
    assert_eq!(fs.e().getattr(Ino::ROOT).unwrap().nlink, 3);
    assert_eq!(fs.e().getattr(f).unwrap().nlink, 1);
    fs.e().fsync().unwrap();
    fs.fsck();
}

#[test]
fn names_over_255_bytes_are_refused() {
    let mut fs = Fs::new();
    let long = vec![b'n'; 256];
    let max = vec![b'm'; 255];
    let f = fs.mkfile(Ino::ROOT, b"f", b"data");
    assert_err!(
        fs.e().create(CTX, Ino::ROOT, &long, 0o644),
        EngineError::NameTooLong
    );
    assert_err!(
        fs.e().mkdir(CTX, Ino::ROOT, &long, 0o755),
        EngineError::NameTooLong
    );
    assert_err!(
        fs.e().symlink(CTX, Ino::ROOT, &long, b"t"),
        EngineError::NameTooLong
    );
    assert_err!(
        fs.e()
            .mknod(CTX, Ino::ROOT, &long, libc::S_IFIFO | 0o644, 0),
        EngineError::NameTooLong
    );
    assert_err!(fs.e().lookup(Ino::ROOT, &long), EngineError::NameTooLong);
    assert_err!(fs.e().unlink(Ino::ROOT, &long), EngineError::NameTooLong);
    assert_err!(fs.e().rmdir(Ino::ROOT, &long), EngineError::NameTooLong);
    assert_err!(fs.e().link(f, Ino::ROOT, &long), EngineError::NameTooLong);
    assert_err!(
        fs.e()
            .rename(Ino::ROOT, b"f", Ino::ROOT, &long, RenameFlags::default()),
        EngineError::NameTooLong
    );
    // 255 bytes is the longest name and works everywhere.
    let m = fs.mkfile(Ino::ROOT, &max, b"max");
    assert_eq!(fs.ino(Ino::ROOT, &max).unwrap(), m);
    fs.remount();
    assert_eq!(fs.ino(Ino::ROOT, &max).unwrap(), m);
    let names: Vec<_> = fs.names(Ino::ROOT).into_iter().map(|n| n.0).collect();
    assert_eq!(names, vec![b"f".to_vec(), max.clone()]);
    assert_eq!(fs.read_all(m), b"max");
    fs.fsck();
}

#[test]
fn directory_link_counts() {
    let mut fs = Fs::new();
    let nlink = |fs: &Fs, ino| fs.e().getattr(ino).unwrap().nlink;
    assert_eq!(nlink(&fs, Ino::ROOT), 2);
    let a = fs.mkdir(Ino::ROOT, b"a");
    assert_eq!(nlink(&fs, Ino::ROOT), 3);
    let b = fs.mkdir(a, b"b");
    fs.mkdir(Ino::ROOT, b"c");
    fs.mkfile(Ino::ROOT, b"f", b"");
    fs.mkfile(a, b"g", b"");
    assert_eq!(
        nlink(&fs, Ino::ROOT),
        4,
        "files do not count in a directory's nlink"
    );
    assert_eq!(nlink(&fs, a), 3);
    assert_eq!(nlink(&fs, b), 2);
    fs.remount();
    assert_eq!(
        (nlink(&fs, Ino::ROOT), nlink(&fs, a), nlink(&fs, b)),
        (4, 3, 2)
    );
    fs.e().rmdir(Ino::ROOT, b"c").unwrap();
    assert_eq!(nlink(&fs, Ino::ROOT), 3);
    fs.e().rmdir(a, b"b").unwrap();
    assert_eq!(nlink(&fs, a), 2);
    assert_err!(fs.e().getattr(b), EngineError::NotFound);
    fs.remount();
    assert_eq!((nlink(&fs, Ino::ROOT), nlink(&fs, a)), (3, 2));
    fs.fsck();
}

#[test]
fn parent_times_change_on_create_and_unlink() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let changed = |what: &str| {
        let a = fs.e().getattr(d).unwrap();
        assert!(
            a.mtime.sec > 1000,
            "{what}: parent mtime not updated: {:?}",
            a.mtime
        );
        assert!(
            a.ctime.sec > 1000,
            "{what}: parent ctime not updated: {:?}",
            a.ctime
        );
        fs.age(d, 1000);
        let a = fs.e().getattr(d).unwrap();
        assert_eq!((a.mtime.sec, a.ctime.sec), (1000, 1000));
    };
    fs.age(d, 1000);
    let f = fs.mkfile(d, b"f", b"");
    changed("create");
    fs.e().unlink(d, b"f").unwrap();
    changed("unlink");
    fs.mkdir(d, b"sub");
    changed("mkdir");
    fs.e().rmdir(d, b"sub").unwrap();
    changed("rmdir");
    let g = fs.mkfile(Ino::ROOT, b"g", b"");
    fs.e().link(g, d, b"g2").unwrap();
    fs.e().forget(g, 1);
    changed("link");
    // A failed operation leaves the times alone.
    assert_err!(fs.e().unlink(d, b"f"), EngineError::NotFound);
    assert_eq!(fs.e().getattr(d).unwrap().mtime.sec, 1000);
    assert_err!(fs.e().getattr(f), EngineError::NotFound);
    fs.e().fsync().unwrap();
    fs.fsck();
}

/// Lists `dir` in every way and checks each against `want`.
fn check_listing(fs: &Fs, dir: Ino, want: &BTreeSet<Vec<u8>>, what: &str) {
    let full = fs.list(dir, false, 100_000);
    let order: Vec<Vec<u8>> = full.iter().map(|e| e.name.clone()).collect();
    let got: BTreeSet<Vec<u8>> = order.iter().cloned().collect();
    assert_eq!(&got, want, "{what}: listing differs");
    assert!(
        full.windows(2).all(|w| w[0].offset < w[1].offset),
        "{what}: cookies not increasing"
    );
    for per_call in [1, 7, 128, 129] {
        for plus in [false, true] {
            let paged: Vec<Vec<u8>> = fs
                .list(dir, plus, per_call)
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert_eq!(
                paged, order,
                "{what}: paged by {per_call} (plus {plus}) differs"
            );
        }
    }
    // readdirplus references were all dropped by `list`; none was taken for
    // an entry the caller refused.
    assert_eq!(
        fs.stat("kernel_known_inodes"),
        0,
        "{what}: readdirplus took references it did not return"
    );
    // Resuming from any entry's cookie returns exactly the entries after it.
    for i in [
        0,
        1,
        127,
        128,
        129,
        full.len() / 2,
        full.len() - 2,
        full.len() - 1,
    ] {
        let mut rest = Vec::new();
        fs.e()
            .readdir(dir, full[i].offset, false, &mut |e| {
                rest.push(e.name.to_vec());
                true
            })
            .unwrap();
        assert_eq!(
            rest,
            order[i + 1..].to_vec(),
            "{what}: resume after entry {i}"
        );
    }
    // Every listed name looks up to the listed inode.
    for e in full.iter().step_by(17) {
        assert_eq!(
            fs.ino(dir, &e.name).unwrap(),
            e.ino,
            "{what}: lookup of {:?}",
            e.name
        );
    }
}

#[test]
fn readdir_pages_through_large_directories() {
    let mut fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"big");
    let mut want = BTreeSet::new();
    for i in 0..300 {
        let name = format!("file-{i:04}").into_bytes();
        if i % 10 == 0 {
            fs.mkdir(d, &name);
        } else {
            fs.mkfile(d, &name, b"");
        }
        want.insert(name);
    }
    check_listing(&fs, d, &want, "uncommitted");
    fs.e().fsync().unwrap();
    check_listing(&fs, d, &want, "committed");
    fs.remount();
    check_listing(&fs, d, &want, "after remount");
    // Mixed: stored names removed, new names pending.
    for i in (1..300).step_by(6) {
        let name = format!("file-{i:04}").into_bytes();
        fs.e().unlink(d, &name).unwrap();
        want.remove(&name);
    }
    for i in 0..60 {
        let name = format!("new-{i:04}").into_bytes();
        fs.mkfile(d, &name, b"");
        want.insert(name);
    }
    check_listing(&fs, d, &want, "mixed");
    let attr = fs.e().getattr(d).unwrap();
    assert_eq!(attr.nlink, 2 + 30);
    fs.remount();
    check_listing(&fs, d, &want, "mixed after remount");
    fs.fsck();
}

#[test]
fn readdir_kinds_and_dots() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let f = fs.mkfile(d, b"f", b"");
    let s = fs.e().symlink(CTX, d, b"s", b"f").unwrap().ino;
    fs.e().forget(s, 1);
    let mut all = Vec::new();
    fs.e()
        .readdir(d, 0, false, &mut |e| {
            all.push((e.name.to_vec(), e.ino, e.kind));
            true
        })
        .unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[0], (b".".to_vec(), d, FileKind::Directory));
    assert_eq!(all[1], (b"..".to_vec(), Ino::ROOT, FileKind::Directory));
    let mut rest = all[2..].to_vec();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        rest,
        vec![
            (b"f".to_vec(), f, FileKind::Regular),
            (b"s".to_vec(), s, FileKind::Symlink)
        ]
    );
}

#[test]
fn negative_lookups_do_not_hide_later_creates() {
    let mut fs = Fs::new();
    // Far more misses than the negative cache holds, then create them all.
    for i in 0..100 {
        let name = format!("n{i}").into_bytes();
        assert_err!(fs.e().lookup(Ino::ROOT, &name), EngineError::NotFound);
    }
    for i in 0..100 {
        fs.mkfile(Ino::ROOT, format!("n{i}").as_bytes(), b"");
    }
    for i in 0..100 {
        fs.ino(Ino::ROOT, format!("n{i}").as_bytes()).unwrap();
    }
    fs.e().fsync().unwrap();
    for i in 0..100 {
        fs.e()
            .unlink(Ino::ROOT, format!("n{i}").as_bytes())
            .unwrap();
    }
    for i in 0..100 {
        assert_err!(
            fs.e().lookup(Ino::ROOT, format!("n{i}").as_bytes()),
            EngineError::NotFound
        );
    }
    assert!(
        fs.stat("dcache_negative") <= 16,
        "negative entries over their bound"
    );
    fs.remount();
    assert!(fs.names(Ino::ROOT).is_empty());
    fs.fsck();
}

#[test]
fn setattr_changes_persist() {
    let mut fs = Fs::new();
    let f = fs.mkfile(Ino::ROOT, b"f", b"0123456789");
    let t = Timespec {
        sec: 1_234_567,
        nsec: 890,
    };
    let a = fs
        .e()
        .setattr(
            f,
            SetAttr {
                mode: Some(0o4711),
                uid: Some(1000),
                gid: Some(100),
                atime: Some(SetTime::At(t)),
                mtime: Some(SetTime::At(t)),
                ..SetAttr::default()
            },
        )
        .unwrap();
    assert_eq!((a.perm, a.uid, a.gid), (0o4711, 1000, 100));
    assert!(a.ctime.sec > t.sec, "setattr sets ctime to now");
    for _ in 0..2 {
        let a = fs.e().getattr(f).unwrap();
        assert_eq!((a.perm, a.uid, a.gid, a.size), (0o4711, 1000, 100, 10));
        assert_eq!((a.atime, a.mtime), (t, t));
        fs.remount();
    }
    let s = fs.e().statfs().unwrap();
    assert_eq!(s.namelen, 255);
    assert!(s.bsize > 0 && s.blocks >= s.bfree && s.bfree >= s.bavail);
    fs.fsck();
}

#[test]
fn readdir_resumes_across_changes() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let stable: BTreeSet<Vec<u8>> = (0..200).map(|i| format!("s{i}").into_bytes()).collect();
    for n in &stable {
        fs.mkfile(d, n, b"");
    }
    let churn: Vec<Vec<u8>> = (0..200).map(|i| format!("c{i}").into_bytes()).collect();
    for n in churn.iter().step_by(2) {
        fs.mkfile(d, n, b"");
    }
    fs.e().fsync().unwrap();
    // List 40 entries at a time; between calls, remove and add churn names
    // (stored and pending alike) and sometimes commit.
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut offset = 0;
    let mut round = 0;
    loop {
        let mut batch = Vec::new();
        fs.e()
            .readdir(d, offset, false, &mut |e| {
                if batch.len() == 40 {
                    return false;
                }
                batch.push((e.name.to_vec(), e.offset));
                true
            })
            .unwrap();
        let Some((_, last)) = batch.last() else { break };
        offset = *last;
        let done = batch.len() < 40;
        seen.extend(
            batch
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| n != b"." && n != b".."),
        );
        if done {
            break;
        }
        for (i, n) in churn.iter().enumerate() {
            if (i + round) % 5 == 0 {
                let _ = fs.e().unlink(d, n);
            } else if (i + round) % 5 == 1 && fs.ino(d, n).is_err() {
                fs.mkfile(d, n, b"");
            }
        }
        if round % 2 == 1 {
            fs.e().fsync().unwrap();
        }
        round += 1;
    }
    assert!(round >= 4, "the listing should span several calls");
    let unique: BTreeSet<&Vec<u8>> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a name was returned twice");
    for n in &stable {
        assert!(
            unique.contains(n),
            "{} was never listed",
            String::from_utf8_lossy(n)
        );
    }
    for n in &seen {
        assert!(
            stable.contains(n) || churn.contains(n),
            "unknown name {}",
            String::from_utf8_lossy(n)
        );
    }
    fs.e().fsync().unwrap();
    fs.fsck();
}

/// `name_missing` (the probe the adapter makes after a reply, under the
/// shared lock) agrees with lookups whether the name is pending in memory,
/// committed, cached or only in the store, and changes no cache.
#[test]
fn name_missing_agrees_with_lookup_everywhere_a_name_can_be() {
    let mut fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    assert!(fs.e().name_missing(d, b"f", None).unwrap());
    let f = fs.mkfile(d, b"f", b"x");
    assert!(
        !fs.e().name_missing(d, b"f", None).unwrap(),
        "pending create"
    );
    fs.e().fsync().unwrap();
    assert!(!fs.e().name_missing(d, b"f", None).unwrap(), "committed");
    fs.remount();
    let hits = fs.stat("dcache_hits") + fs.stat("dcache_misses");
    assert!(
        !fs.e().name_missing(d, b"f", None).unwrap(),
        "only in the store"
    );
    assert!(fs.e().name_missing(d, b"g", None).unwrap(), "never made");
    assert_eq!(fs.stat("dcache_hits") + fs.stat("dcache_misses"), hits);
    fs.e().unlink(d, b"f").unwrap();
    assert!(
        fs.e().name_missing(d, b"f", None).unwrap(),
        "pending unlink"
    );
    assert_err!(fs.e().lookup(d, b"f"), EngineError::NotFound);
    fs.e().fsync().unwrap();
    assert!(
        fs.e().name_missing(d, b"f", None).unwrap(),
        "committed unlink"
    );
    assert!(
        fs.e().name_missing(Ino(f.0 + 1000), b"f", None).unwrap(),
        "no such parent"
    );
    assert_err!(
        fs.e().name_missing(d, b"a/b", None),
        EngineError::Invalid(_)
    );
    fs.fsck();
}

/// A name a lookup found missing is rechecked from memory alone while no
/// commit has drained since (`missed_at`, the drains counted before the
/// lookup): a create made since is pending, so it is seen; once a drain has
/// run, the name may have reached the store and left every cache, so the
/// store is read. dentries_max is 64 here, so 100 more names push a
/// committed name out of the cache.
#[test]
fn a_missed_name_is_rechecked_from_memory_until_the_next_drain() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    fs.e().fsync().unwrap();
    let at = fs.e().drains();
    assert_err!(fs.e().lookup(d, b"g"), EngineError::NotFound);
    let gets = fs.stat("store_gets");
    assert!(fs.e().name_missing(d, b"g", Some(at)).unwrap());
    assert_eq!(fs.stat("store_gets"), gets, "no store read before a drain");
    assert_eq!(fs.stat("names_missing_unread"), 1);
    fs.mkfile(d, b"g", b"x");
    assert!(!fs.e().name_missing(d, b"g", Some(at)).unwrap(), "pending");
    // Committed, then out of the name cache: only the store knows it.
    fs.e().fsync().unwrap();
    for i in 0..100 {
        fs.mkfile(d, format!("o{i}").as_bytes(), b"");
    }
    fs.e().fsync().unwrap();
    assert!(fs.e().drains() > at);
    let gets = fs.stat("store_gets");
    assert!(
        !fs.e().name_missing(d, b"g", Some(at)).unwrap(),
        "a drain since the miss: the store is read"
    );
    assert_eq!(fs.stat("store_gets"), gets + 1);
    assert_eq!(fs.stat("names_missing_unread"), 1);
    fs.fsck();
}

/// After a commit the names it wrote are cached again (after the commit
/// let go of the state lock): looking one up reads no store.
#[test]
fn names_a_commit_wrote_are_cached_again_after_it() {
    let fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let f = fs.mkfile(d, b"f", b"x");
    fs.mkfile(d, b"g", b"y");
    fs.e().fsync().unwrap();
    // A removal of a stored name comes back as a negative entry.
    fs.e().unlink(d, b"g").unwrap();
    fs.e().fsync().unwrap();
    let gets = fs.stat("store_gets");
    assert_eq!(fs.e().lookup(d, b"f").unwrap().ino, f);
    assert_err!(fs.e().lookup(d, b"g"), EngineError::NotFound);
    assert_eq!(
        fs.stat("store_gets"),
        gets,
        "both answered from the name cache"
    );
}
