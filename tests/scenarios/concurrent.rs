//! Threads at once on one engine: each data thread writes, truncates, reads
//! and fsyncs its own files (the state lock shared, one part each, docs/
//! design.md §5) while another thread creates, renames, unlinks and lists
//! names (the state lock exclusive) and commits come often. Every file then
//! holds exactly what its thread's model says, before and after a remount,
//! and fsck finds nothing wrong.

use churnfs_engine::format::BLOCK_SIZE;
use churnfs_engine::{Ctx, Ino, RenameFlags, SetAttr};
use churnfs_tests::{pattern, small_config, Fs, Rng};
use std::sync::Arc;

const DATA_THREADS: u64 = 4;
const FILES_PER_THREAD: usize = 3;
const STEPS: u64 = 300;

/// One data thread: random writes, shrinking and growing truncates, reads
/// and fsyncs on its own files, each checked against a byte model.
fn data_thread(e: Arc<churnfs_engine::Engine>, files: Vec<Ino>, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng::new(seed);
    let mut want: Vec<Vec<u8>> = vec![Vec::new(); files.len()];
    for step in 0..STEPS {
        let f = rng.below(files.len() as u64) as usize;
        let ino = files[f];
        match rng.below(10) {
            0..=3 => {
                let off = rng.below(6 * BLOCK_SIZE);
                let len = 1 + rng.below(BLOCK_SIZE + 100) as usize;
                let data = pattern(seed * 1_000_003 + step, len);
                assert_eq!(e.write(ino, off, &data).unwrap() as usize, len);
                let end = off as usize + len;
                if want[f].len() < end {
                    want[f].resize(end, 0);
                }
                want[f][off as usize..end].copy_from_slice(&data);
            }
            4..=6 => {
                // Mostly shrinks, some by many blocks (left to the reclaim
                // thread), some growing.
                let size = rng.below(7 * BLOCK_SIZE);
                let set = SetAttr {
                    size: Some(size),
                    ..SetAttr::default()
                };
                assert_eq!(e.setattr(ino, set).unwrap().size, size);
                want[f].resize(size as usize, 0);
            }
            7 | 8 => {
                let got = e.read(ino, 0, (8 * BLOCK_SIZE) as u32).unwrap();
                assert_eq!(got, want[f], "seed {seed} step {step}: file {f} differs");
                assert_eq!(e.getattr(ino).unwrap().size, want[f].len() as u64);
            }
            _ => e.fsync().unwrap(),
        }
    }
    want
}

/// The namespace thread: names come and go in a directory of their own,
/// some files are unlinked while open, and the directory is listed.
fn names_thread(e: Arc<churnfs_engine::Engine>, dir: Ino, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut open: Vec<Ino> = Vec::new();
    for step in 0..STEPS * 2 {
        let name = format!("n{}", rng.below(40));
        match rng.below(6) {
            0 | 1 => {
                if let Ok((a, _fh)) = e.create(Ctx::ROOT, dir, name.as_bytes(), 0o644) {
                    e.write(a.ino, 0, &pattern(step, 3000)).unwrap();
                    // The kernel's reference from the create; the handle
                    // keeps the inode.
                    e.forget(a.ino, 1);
                    if rng.chance(30) {
                        open.push(a.ino);
                    } else {
                        e.release(a.ino).unwrap();
                    }
                }
            }
            2 => {
                let to = format!("n{}", rng.below(40));
                let _ = e.rename(
                    dir,
                    name.as_bytes(),
                    dir,
                    to.as_bytes(),
                    RenameFlags::default(),
                );
            }
            3 => {
                let _ = e.unlink(dir, name.as_bytes());
            }
            4 => {
                if let Some(ino) = open.pop() {
                    e.release(ino).unwrap();
                }
            }
            _ => {
                let _ = e.lookup(dir, name.as_bytes()).map(|a| e.forget(a.ino, 1));
            }
        }
    }
    for ino in open {
        e.release(ino).unwrap();
    }
}

#[test]
fn data_threads_and_a_names_thread_leave_every_file_as_modelled() {
    let mut cfg = small_config();
    cfg.commit_interval_ms = 5;
    cfg.inodes_max = 8;
    cfg.dirty_items_max = 300;
    cfg.truncate_inline_blocks = 2;
    let mut fs = Fs::with_config(cfg);
    let dir = fs.mkdir(Ino::ROOT, b"names");
    let mut files = Vec::new();
    for t in 0..DATA_THREADS {
        let mine: Vec<Ino> = (0..FILES_PER_THREAD)
            .map(|i| fs.mkfile(Ino::ROOT, format!("t{t}f{i}").as_bytes(), b""))
            .collect();
        files.push(mine);
    }
    let names = {
        let e = fs.engine.clone();
        std::thread::spawn(move || names_thread(e, dir, 99))
    };
    let workers: Vec<_> = files
        .iter()
        .cloned()
        .enumerate()
        .map(|(t, mine)| {
            let e = fs.engine.clone();
            std::thread::spawn(move || data_thread(e, mine, t as u64 + 1))
        })
        .collect();
    let wants: Vec<Vec<Vec<u8>>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    names.join().unwrap();
    let check = |fs: &Fs, when: &str| {
        for (t, want) in wants.iter().enumerate() {
            for (i, w) in want.iter().enumerate() {
                let ino = fs.ino(Ino::ROOT, format!("t{t}f{i}").as_bytes()).unwrap();
                assert_eq!(&fs.read_all(ino), w, "{when}: t{t}f{i}");
            }
        }
    };
    check(&fs, "live");
    assert_eq!(fs.stat("unlinked_inodes"), 0);
    fs.remount();
    check(&fs, "after remount");
    assert_eq!(fs.stat("truncates_pending"), 0);
    fs.fsck();
}

/// One namespace thread with a model: the only thread that changes names in
/// `dir`, so every lookup and create must agree with what it did, whenever
/// a commit runs. A commit takes the pending names out of every cache and
/// puts them into its batch after it let go of the state lock (journal.rs,
/// `put_names`); a lookup in that window must wait for the batch rather
/// than find the store without it.
fn modelled_names_thread(e: Arc<churnfs_engine::Engine>, dir: Ino, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut model: std::collections::HashMap<String, Ino> = Default::default();
    for step in 0..STEPS * 20 {
        let name = format!("m{}", rng.below(200));
        match rng.below(5) {
            0 | 1 => match e.create(Ctx::ROOT, dir, name.as_bytes(), 0o644) {
                Ok((a, _fh)) => {
                    assert!(!model.contains_key(&name), "step {step}: {name} made twice");
                    e.forget(a.ino, 1);
                    e.release(a.ino).unwrap();
                    model.insert(name, a.ino);
                }
                Err(err) => assert!(
                    model.contains_key(&name),
                    "step {step}: create of {name}, which is missing: {err}"
                ),
            },
            2 => {
                let to = format!("m{}", rng.below(200));
                let r = e.rename(
                    dir,
                    name.as_bytes(),
                    dir,
                    to.as_bytes(),
                    RenameFlags::default(),
                );
                assert_eq!(
                    r.is_ok(),
                    model.contains_key(&name),
                    "step {step}: rename {name}"
                );
                if r.is_ok() && name != to {
                    let ino = model.remove(&name).unwrap();
                    model.insert(to, ino);
                }
            }
            3 => {
                let r = e.unlink(dir, name.as_bytes());
                assert_eq!(
                    r.is_ok(),
                    model.remove(&name).is_some(),
                    "step {step}: unlink {name}"
                );
            }
            _ => {
                let got = e.lookup(dir, name.as_bytes()).map(|a| {
                    e.forget(a.ino, 1);
                    a.ino
                });
                assert_eq!(
                    got.ok(),
                    model.get(&name).copied(),
                    "step {step}: lookup {name}"
                );
            }
        }
    }
}

#[test]
fn lookups_during_commits_agree_with_the_names_made() {
    let mut cfg = small_config();
    cfg.dentries_max = 16;
    cfg.negative_entries_max = 4;
    let mut fs = Fs::with_config(cfg);
    let dirs = [fs.mkdir(Ino::ROOT, b"a"), fs.mkdir(Ino::ROOT, b"b")];
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let committer = {
        let (e, done) = (fs.engine.clone(), done.clone());
        std::thread::spawn(move || {
            let mut commits = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                e.fsync().unwrap();
                commits += 1;
            }
            commits
        })
    };
    let threads: Vec<_> = dirs
        .iter()
        .enumerate()
        .map(|(t, &dir)| {
            let e = fs.engine.clone();
            std::thread::spawn(move || modelled_names_thread(e, dir, 7 + t as u64))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(committer.join().unwrap() > 10);
    fs.remount();
    fs.fsck();
}
