//! The journal: names that live and die between commits never reach the
//! store, fsync is durable, unsynced work is lost whole or not at all, the
//! committer commits on its own, and a failed store stops the engine.

use churnfs_engine::store::{Batch, KvPair};
use churnfs_engine::{Engine, EngineConfig, EngineError, Ino, KvStore, MemStore, StoreError};
use churnfs_tests::{
    assert_err, fsck_clean, keys_of, pattern, small_config, stat, stored_name, Fs, CTX,
};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[test]
fn short_lived_names_never_reach_the_store() {
    let mut fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    fs.mkfile(d, b"old", b"stored");
    fs.e().fsync().unwrap();
    let before = fs.stat("names_never_stored");
    // File and directory born and gone between two commits.
    let tmp = fs.mkfile(d, b"tmp", &pattern(1, 100_000));
    fs.e().unlink(d, b"tmp").unwrap();
    let sub = fs.mkdir(d, b"sub");
    fs.e().rmdir(d, b"sub").unwrap();
    // A stored name removed, and one created and kept.
    fs.e().unlink(d, b"old").unwrap();
    fs.mkfile(d, b"kept", b"k");
    fs.e().fsync().unwrap();
    assert_eq!(fs.stat("names_never_stored") - before, 2);
    assert!(!stored_name(&fs.store, d, b"tmp"));
    assert!(!stored_name(&fs.store, d, b"sub"));
    assert!(
        !stored_name(&fs.store, d, b"old"),
        "a removed name was left on the store"
    );
    assert!(stored_name(&fs.store, d, b"kept"));
    assert_eq!(
        keys_of(&fs.store, tmp),
        vec![],
        "a short-lived file's inode or blocks were stored"
    );
    assert_eq!(keys_of(&fs.store, sub), vec![]);
    // The same name reused many times between commits costs nothing either.
    for i in 0..50 {
        let f = fs.mkfile(d, b"churn", &pattern(i, 10));
        fs.e().unlink(d, b"churn").unwrap();
        assert_err!(fs.e().getattr(f), EngineError::NotFound);
    }
    fs.e().fsync().unwrap();
    assert!(!stored_name(&fs.store, d, b"churn"));
    // Counted once per removal of a name that never reached the store.
    assert_eq!(fs.stat("names_never_stored") - before, 2 + 50);
    fs.remount();
    let names: Vec<_> = fs.names(d).into_iter().map(|n| n.0).collect();
    assert_eq!(names, vec![b"kept".to_vec()]);
    fs.fsck();
}

#[test]
fn fsync_makes_everything_before_it_durable() {
    let mut fs = Fs::new();
    let d = fs.mkdir(Ino::ROOT, b"d");
    let small = fs.mkfile(d, b"small", b"tiny");
    let big_data = pattern(2, 300_000);
    let big = fs.mkfile(d, b"big", &big_data);
    fs.e().setxattr(big, b"user.x", b"y", 0).unwrap();
    fs.e().fsync().unwrap();
    fs.crash();
    fs.fsck();
    assert_eq!(fs.resolve("d/small").unwrap(), small);
    assert_eq!(fs.read_all(small), b"tiny");
    assert_eq!(fs.read_all(big), big_data);
    assert_eq!(fs.e().getxattr(big, b"user.x").unwrap(), b"y");
    // Changes to existing files, then fsync, then crash.
    fs.e().write(small, 2, b"NY!").unwrap();
    fs.e()
        .rename(d, b"big", Ino::ROOT, b"moved", Default::default())
        .unwrap();
    fs.e().fsync().unwrap();
    fs.crash();
    fs.fsck();
    assert_eq!(fs.read_all(small), b"tiNY!");
    assert_eq!(fs.resolve("moved").unwrap(), big);
    assert_err!(fs.resolve("d/big"), EngineError::NotFound);
}

#[test]
fn unsynced_work_is_lost_whole_or_kept_intact() {
    let fs = Fs::new();
    let base = fs.mkfile(Ino::ROOT, b"base", b"synced");
    fs.e().fsync().unwrap();
    // Enough data to make the writer commit on its own (unsynced).
    let data = pattern(3, 3 << 20);
    let (attr, _fh) = fs.e().create(CTX, Ino::ROOT, b"new", 0o644).unwrap();
    for (i, chunk) in data.chunks(200_000).enumerate() {
        fs.e().write(attr.ino, (i * 200_000) as u64, chunk).unwrap();
    }
    let batches = fs.store.unsynced_batches();
    assert!(
        batches >= 2,
        "expected throttled commits, got {batches} batches"
    );
    for keep in 0..=batches {
        let store = Arc::new(fs.store.crash_copy(keep));
        let e = Engine::mount(store.clone(), small_config()).unwrap();
        let what = format!("keeping {keep} of {batches} batches");
        match e.lookup(Ino::ROOT, b"new") {
            Err(EngineError::NotFound) => assert_eq!(keep, 0, "{what}: the file vanished"),
            Ok(a) => {
                assert!(keep > 0, "{what}: file present without its batch");
                let got = e.read(a.ino, 0, u32::MAX).unwrap();
                assert_eq!(got.len() as u64, a.size, "{what}");
                assert!(a.size > 0, "{what}: a batch holds data written before it");
                assert!(
                    got == data[..got.len()],
                    "{what}: contents are not a prefix of what was written"
                );
            }
            Err(other) => panic!("{what}: {other:?}"),
        }
        let b = e.lookup(Ino::ROOT, b"base").unwrap();
        assert_eq!(b.ino, base);
        assert_eq!(e.read(base, 0, 100).unwrap(), b"synced", "{what}");
        e.shutdown().unwrap();
        fsck_clean(&*store);
    }
}

#[test]
fn fsync_with_nothing_to_write_does_not_sync() {
    let fs = Fs::new();
    fs.mkfile(Ino::ROOT, b"f", b"x");
    fs.e().fsync().unwrap();
    let syncs = fs.stat("commit_syncs");
    assert!(syncs >= 1);
    fs.e().fsync().unwrap();
    fs.e().getattr(Ino::ROOT).unwrap();
    fs.e().fsync().unwrap();
    assert_eq!(
        fs.stat("commit_syncs"),
        syncs,
        "a clean fsync synced the store"
    );
    assert_eq!(fs.stat("fsync_requests"), 3);
}

#[test]
fn the_committer_commits_without_fsync() {
    let mut cfg = small_config();
    cfg.commit_interval_ms = 20;
    let mut fs = Fs::with_config(cfg);
    let f = fs.mkfile(Ino::ROOT, b"f", b"periodic");
    let deadline = Instant::now() + Duration::from_secs(20);
    while fs.stat("commit_syncs") == 0 || fs.store.unsynced_batches() > 0 {
        assert!(Instant::now() < deadline, "no periodic commit within 20 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    fs.crash();
    assert_eq!(fs.read_all(f), b"periodic");
    fs.fsck();
}

#[test]
fn a_failed_store_stops_the_engine() {
    let mut fs = Fs::new();
    let kept = fs.mkfile(Ino::ROOT, b"kept", b"durable");
    fs.e().fsync().unwrap();
    fs.mkfile(Ino::ROOT, b"lost", b"not durable");
    fs.store.set_fail_writes(true);
    assert!(
        fs.e().fsync().is_err(),
        "fsync succeeded on a failing store"
    );
    assert!(fs.e().is_stopped());
    assert_eq!(fs.stat("engine_stopped"), 1);
    assert_err!(fs.e().getattr(Ino::ROOT), EngineError::Stopped);
    assert_err!(fs.e().lookup(Ino::ROOT, b"kept"), EngineError::Stopped);
    assert_err!(fs.e().read(kept, 0, 10), EngineError::Stopped);
    assert_err!(fs.e().write(kept, 0, b"x"), EngineError::Stopped);
    assert_err!(
        fs.e().create(CTX, Ino::ROOT, b"n", 0o644),
        EngineError::Stopped
    );
    assert_err!(
        fs.e().mkdir(CTX, Ino::ROOT, b"n", 0o755),
        EngineError::Stopped
    );
    assert_err!(fs.e().unlink(Ino::ROOT, b"kept"), EngineError::Stopped);
    assert_err!(
        fs.e().readdir(Ino::ROOT, 0, false, &mut |_| true),
        EngineError::Stopped
    );
    assert_err!(
        fs.e().setxattr(kept, b"user.a", b"b", 0),
        EngineError::Stopped
    );
    assert_err!(fs.e().fsync(), EngineError::Stopped);
    // Still stopped once the device works again: only a remount recovers.
    fs.store.set_fail_writes(false);
    assert_err!(fs.e().getattr(kept), EngineError::Stopped);
    assert!(
        fs.e().shutdown().is_err(),
        "shutdown of a stopped engine claimed success"
    );
    fs.engine = Engine::mount(fs.store.clone(), fs.cfg.clone()).unwrap();
    fs.fsck();
    assert_eq!(fs.read_all(kept), b"durable");
    assert_err!(fs.e().lookup(Ino::ROOT, b"lost"), EngineError::NotFound);
    assert_eq!(stat(&fs.engine, "engine_stopped"), 0);
    // And the remounted engine writes again.
    fs.mkfile(Ino::ROOT, b"after", b"ok");
    fs.e().fsync().unwrap();
    fs.crash();
    assert_eq!(fs.read_all(fs.ino(Ino::ROOT, b"after").unwrap()), b"ok");
    fs.fsck();
}

#[test]
fn concurrent_fsyncs_are_all_durable() {
    let mut fs = Fs::new();
    let threads = 4;
    let files = 40;
    std::thread::scope(|s| {
        for t in 0..threads {
            let e = fs.engine.clone();
            s.spawn(move || {
                let dir = e
                    .mkdir(CTX, Ino::ROOT, format!("t{t}").as_bytes(), 0o755)
                    .unwrap()
                    .ino;
                for i in 0..files {
                    let (a, _) = e
                        .create(CTX, dir, format!("f{i}").as_bytes(), 0o644)
                        .unwrap();
                    e.write(a.ino, 0, &pattern(t * 1000 + i, 100 + 997 * i as usize))
                        .unwrap();
                    e.fsync().unwrap();
                    e.release(a.ino).unwrap();
                    e.forget(a.ino, 1);
                }
            });
        }
    });
    assert_eq!(fs.stat("fsync_requests"), threads * files);
    fs.crash();
    fs.fsck();
    for t in 0..threads {
        for i in 0..files {
            let ino = fs
                .resolve(&format!("t{t}/f{i}"))
                .unwrap_or_else(|e| panic!("t{t}/f{i} lost after its fsync returned: {e:?}"));
            assert!(
                fs.read_all(ino) == pattern(t * 1000 + i, 100 + 997 * i as usize),
                "t{t}/f{i}"
            );
        }
    }
}

/// The dirty list (with the pending names) has a bound of its own: past `dirty_items_max` the next
/// operation commits (without sync) first, so metadata churn between two
/// commit intervals cannot grow it without limit.
#[test]
fn dirty_items_stay_within_their_bound() {
    let cfg = EngineConfig {
        dirty_items_max: 100,
        ..small_config()
    };
    let mut fs = Fs::with_config(cfg);
    assert_eq!(fs.stat("dirty_items_max"), 100);
    for i in 0..2_000u32 {
        let name = format!("f{i}");
        fs.mkfile(Ino::ROOT, name.as_bytes(), b"x");
        // One operation adds a handful of items (inode, name, parent); the
        // pending names count toward the bound.
        let dirty = fs.stat("dirty_items") + fs.stat("pending_dentries");
        assert!(dirty <= 110, "{dirty}");
    }
    assert!(fs.stat("dirty_items_commits") > 0);
    fs.e().fsync().unwrap();
    fs.crash();
    assert_eq!(fs.names(Ino::ROOT).len(), 2_000);
    fs.fsck();
}

/// A store whose `apply` waits at a gate while it is closed, and says when
/// one has arrived there.
struct GatedStore {
    inner: Arc<MemStore>,
    closed: Mutex<bool>,
    opened: Condvar,
    arrived: Mutex<Option<mpsc::Sender<()>>>,
}

impl KvStore for GatedStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key)
    }
    fn scan(&self, prefix: &[u8], start: &[u8], limit: usize) -> Result<Vec<KvPair>, StoreError> {
        self.inner.scan(prefix, start, limit)
    }
    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut closed = self.closed.lock().unwrap();
        if *closed {
            if let Some(tx) = self.arrived.lock().unwrap().as_ref() {
                let _ = tx.send(());
            }
            while *closed {
                closed = self.opened.wait(closed).unwrap();
            }
        }
        self.inner.apply(batch)
    }
    fn sync(&self) -> Result<(), StoreError> {
        self.inner.sync()
    }
    fn reopens(&self) -> u64 {
        self.inner.reopens()
    }
}

/// While the store writes a commit's batch, requests go on: they read the
/// batch's records (evicted from the small caches by the commit) from the
/// batch itself, and new changes wait for the next commit.
#[test]
fn requests_are_served_while_a_commit_writes_its_batch() {
    let mem = Arc::new(MemStore::new());
    Engine::mkfs(&*mem, 0, 0).unwrap();
    let gated = Arc::new(GatedStore {
        inner: mem.clone(),
        closed: Mutex::new(false),
        opened: Condvar::new(),
        arrived: Mutex::new(None),
    });
    // Room for every file's data in one commit.
    let cfg = EngineConfig {
        dirty_bytes_max: 64 << 20,
        ..small_config()
    };
    let engine = Engine::mount(gated.clone(), cfg.clone()).unwrap();
    let fs = Fs {
        store: mem.clone(),
        engine,
        cfg,
    };
    let d = fs.mkdir(Ino::ROOT, b"d");
    // More files than the caches hold (32 inodes, 64 names), with data in
    // blocks of their own.
    let files = 100u64;
    for i in 0..files {
        fs.mkfile(d, format!("f{i}").as_bytes(), &pattern(i, 150_000));
    }
    fs.e().unlink(d, b"f0").unwrap();
    let (tx, arrived) = mpsc::channel();
    *gated.arrived.lock().unwrap() = Some(tx);
    *gated.closed.lock().unwrap() = true;
    let committer = {
        let e = fs.engine.clone();
        std::thread::spawn(move || e.fsync())
    };
    arrived
        .recv_timeout(Duration::from_secs(30))
        .expect("the commit never reached the store");
    assert!(
        !stored_name(&mem, d, b"f1"),
        "the batch is still at the gate"
    );
    let reader = {
        let e = fs.engine.clone();
        let fs2 = Fs {
            store: mem.clone(),
            engine: e,
            cfg: small_config(),
        };
        std::thread::spawn(move || {
            let names: Vec<_> = fs2.names(d).into_iter().map(|n| n.0).collect();
            let mut contents = Vec::new();
            for i in 1..files {
                let ino = fs2.ino(d, format!("f{i}").as_bytes()).unwrap();
                contents.push(fs2.read_all(ino) == pattern(i, 150_000));
            }
            let f0 = fs2.ino(d, b"f0").map(|_| ());
            // The read-only probe sees the staged batch too (most of these
            // names are out of the name cache by now).
            let probes = (1..files).all(|i| {
                !fs2.e()
                    .name_missing(d, format!("f{i}").as_bytes(), None)
                    .unwrap()
            }) && fs2.e().name_missing(d, b"f0", None).unwrap();
            fs2.mkfile(d, b"during", b"");
            // Returned, not dropped: dropping unmounts, which waits for the commit.
            (names.len(), contents, f0, probes, fs2)
        })
    };
    // File data waits for the store instead (a writer that went on would
    // only grow the next commit).
    let writer = {
        let e = fs.engine.clone();
        let ino = fs.ino(d, b"f1").unwrap();
        std::thread::spawn(move || e.write(ino, 0, b"rewritten after the gate"))
    };
    // The reader must finish while the commit is still held at the gate.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reader.is_finished() {
        assert!(
            Instant::now() < deadline,
            "requests waited for the store's write of a commit"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !committer.is_finished(),
        "the commit passed the closed gate"
    );
    let (names, contents, f0, probes, fs2) = reader.join().unwrap();
    assert!(probes, "name_missing during the commit");
    assert_eq!(names as u64, files - 1, "readdir during the commit");
    assert!(
        contents.iter().all(|&ok| ok),
        "file data read during the commit"
    );
    assert_err!(f0, EngineError::NotFound);
    *gated.closed.lock().unwrap() = false;
    gated.opened.notify_all();
    committer.join().unwrap().unwrap();
    writer.join().unwrap().unwrap();
    assert!(fs.stat("writer_apply_waits") >= 1);
    drop(fs2);
    drop(fs);
    fsck_clean(&*mem);
    let mut fs = Fs {
        store: mem.clone(),
        engine: Engine::mount(mem.clone(), small_config()).unwrap(),
        cfg: small_config(),
    };
    fs.remount();
    assert_eq!(fs.names(d).len() as u64, files);
    fs.ino(d, b"during").unwrap();
    let f1 = fs.ino(d, b"f1").unwrap();
    let mut want = pattern(1, 150_000);
    want[..24].copy_from_slice(b"rewritten after the gate");
    assert!(fs.read_all(f1) == want, "the write that waited was lost");
}
