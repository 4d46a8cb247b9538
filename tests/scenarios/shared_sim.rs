//! Shared-mode simulation: seeded random operations (the model test's)
//! go to several mounts of one volume at random, on an engine that
//! injects conflicts, answers lost in transit and commits lost in transit;
//! mounts are unmounted, crash (their lease expires and another mount
//! reclaims what they left) and are fenced (their lease expires while
//! they run). After every step the tree as every mount sees it equals the
//! reference model, held files keep their contents, every bound holds and
//! fsck is clean.
//!
//! Replay one seed with `CHURNFS_SHARED_SEED=<seed>`;
//! `CHURNFS_SHARED_SEEDS=N` runs N seeds (`make shared-long`).

use churnfs_tests::reference::{seeds, Driver, Op};
use churnfs_tests::shared::{sim_config, sim_config_delegated, Cluster};
use churnfs_tests::{SeedGuard, Target};

const SEEDS: u64 = 200;
const STEPS: usize = 150;

struct Exercised {
    faults: u64,
    crashes: u64,
    fences: u64,
    steps: u64,
    /// Operations answered from a delegated directory's image, and
    /// delegations given back to another mount (mounts at the end).
    local_ops: u64,
    recalled: u64,
}

fn run(seed: u64) -> Exercised {
    let _guard = SeedGuard {
        what: "shared simulation",
        var: "CHURNFS_SHARED_SEED",
        seed,
    };
    let mounts = 2 + (seed % 2) as usize;
    // One seed in two runs with delegated directories; those mounts
    // unmount but neither crash nor lose their lease (either would lose
    // the last batch, which the model does not know).
    let delegated = seed % 4 >= 2;
    let cfg = if delegated {
        sim_config_delegated()
    } else {
        sim_config()
    };
    let mut c = Cluster::new(mounts, cfg);
    c.may_crash = !delegated;
    c.fault_pct = 20;
    let mut d = Driver::new(seed);
    for step in 0..STEPS {
        let op = d.random_op(true);
        let ctx = format!("seed {seed} step {step} {op:?}");
        c.maybe_fault(&mut d.rng);
        d.apply(&mut c, &op, &ctx);
        c.clear_faults();
        // Now and then a running mount loses its lease and gets a new
        // session (not on a step that remounted).
        if !delegated && !matches!(op, Op::Remount) && d.rng.chance(3) {
            let m = d.rng.below(c.mounts() as u64) as usize;
            c.fence(m);
        }
        d.compare(&c, &ctx);
    }
    let ctx = format!("seed {seed} at the end");
    let (mut local_ops, mut recalled) = (0, 0);
    for m in 0..c.mounts.len() {
        local_ops += c.stat(m, "delegation_local_ops");
        recalled += c.stat(m, "delegations_recalled");
    }
    for m in 0..c.mounts.len() {
        c.mounts[m].shutdown().expect("unmount");
    }
    let fresh = c.mount();
    c.mounts = vec![fresh];
    c.settle();
    d.forget_held(&c, &(0..mounts).collect::<Vec<_>>(), &ctx);
    d.compare(&c, &ctx);
    let r = c.fsck();
    assert_eq!(r.open_unlinked, 0, "{ctx}: open-unlinked records left");
    assert_eq!(
        r.sessions_ended, 0,
        "{ctx}: ended sessions left unreclaimed"
    );
    Exercised {
        faults: c.faults_injected,
        crashes: c.crashes,
        fences: c.fences,
        steps: STEPS as u64,
        local_ops,
        recalled,
    }
}

#[test]
fn mounts_of_one_volume_match_the_reference_model() {
    let count = std::env::var("CHURNFS_SHARED_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let all = seeds("CHURNFS_SHARED_SEED", count);
    let mut t = Exercised {
        faults: 0,
        crashes: 0,
        fences: 0,
        steps: 0,
        local_ops: 0,
        recalled: 0,
    };
    for &seed in &all {
        let e = run(seed);
        t.faults += e.faults;
        t.crashes += e.crashes;
        t.fences += e.fences;
        t.steps += e.steps;
        t.local_ops += e.local_ops;
        t.recalled += e.recalled;
    }
    println!(
        "shared simulation: {} seeds, {} steps, {} faults injected, {} mounts crashed, {} fenced, {} operations in delegated directories, {} delegations recalled, 0 violations",
        all.len(),
        t.steps,
        t.faults,
        t.crashes,
        t.fences,
        t.local_ops,
        t.recalled
    );
    if all.len() as u64 == count {
        assert!(
            t.faults > 0 && t.crashes > 0 && t.fences > 0,
            "nothing was injected"
        );
        assert!(
            t.local_ops > 0 && t.recalled > 0,
            "no directory was delegated and recalled"
        );
    }
}

/// A new empty file "f" in the root, through mount `m`.
fn new_file(m: &churnfs_shared::SharedFs) -> churnfs_vfs::Ino {
    let (attr, _) = m
        .create(churnfs_tests::CTX, churnfs_vfs::Ino::ROOT, b"f", 0o644)
        .expect("create");
    attr.ino
}

/// A chunk record an open file holds, read while a truncate's garbage range
/// hid it, is not used once the background has freed that chunk and
/// cleared the range (fsx on a 64 MiB file found it: a read named an object
/// the delete queue had removed).
#[test]
fn chunk_records_held_open_are_dropped_when_the_inode_changes_under_them() {
    use churnfs_vfs::SetAttr;
    const MB: u64 = 1 << 20;
    let c = Cluster::new(1, sim_config());
    let m = &c.mounts[0];
    let ino = new_file(m);
    let size = |n: u64| SetAttr {
        size: Some(n),
        ..SetAttr::default()
    };
    for i in 0..12 {
        m.write(ino, i * MB, &vec![7u8; MB as usize], false)
            .expect("write");
    }
    m.flush(ino).expect("flush");
    m.setattr(ino, size(MB)).expect("truncate down");
    m.setattr(ino, size(12 * MB)).expect("extend");
    // Reads chunk 2's record, hidden by the garbage range: zeros.
    assert_eq!(m.read(ino, 9 * MB, 4096).expect("read"), vec![0u8; 4096]);
    // The background frees chunks 1-2 and clears the range.
    c.settle();
    m.write(ino, 0, b"x", false).expect("write");
    m.flush(ino).expect("flush");
    assert_eq!(
        m.read(ino, 9 * MB, 4096)
            .expect("read after the range was freed"),
        vec![0u8; 4096]
    );
    m.release(ino).expect("release");
    let report = c.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A file leaving its inline record keeps the bytes written over the inline
/// ones: the inline bytes and a new piece of the same offset and length are
/// different objects (one flush once named the old bytes' object for both).
#[test]
fn a_file_leaving_inline_keeps_the_bytes_written_over_it() {
    let c = Cluster::new(1, sim_config());
    let m = &c.mounts[0];
    let ino = new_file(m);
    m.write(ino, 0, &[1u8; 1000], false).expect("write");
    m.flush(ino).expect("flush inline");
    m.write(ino, 0, &[2u8; 1000], false).expect("overwrite");
    m.write(ino, 8192, &[3u8; 100], false)
        .expect("write past inline");
    m.flush(ino).expect("flush out of inline");
    let mut want = vec![0u8; 8292];
    want[..1000].fill(2);
    want[8192..].fill(3);
    for reader in [0, 1] {
        if reader == 1 {
            m.release(ino).expect("release");
            c.settle();
        }
        assert_eq!(m.read(ino, 0, 9000).expect("read"), want, "reader {reader}");
    }
    let report = c.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A flush that rewrites a chunk full of slices meets objects that another
/// mount's compaction has replaced and deleted since the flush read the
/// chunk's record: it reads the record again and commits, with every byte
/// (fsx over S3 once failed here: "object of chunk 0 is missing").
#[test]
fn a_flush_racing_a_compaction_reads_the_chunk_again() {
    use churnfs_shared::schema::{Keys, SLICES_MAX};
    let c = Cluster::new(2, sim_config());
    let (a, b) = (c.mounts[0].clone(), c.mounts[1].clone());
    let ino = new_file(&b);
    let mut want = vec![0u8; 0];
    let mut put = |m: &churnfs_shared::SharedFs, off: usize, n: usize, v: u8| {
        m.write(ino, off as u64, &vec![v; n], false).expect("write");
        m.flush(ino).expect("flush");
        if want.len() < off + n {
            want.resize(off + n, 0);
        }
        want[off..off + n].fill(v);
    };
    // Mount b leaves chunk 0 one slice short of a rewrite (its compaction
    // queued, not run).
    for n in 0..SLICES_MAX - 1 {
        put(&b, n * 6000, 5000, n as u8 + 1);
    }
    a.open(ino).expect("open");
    put(&a, 200_000, 100, 100);
    // a's next flush rewrites the chunk; right after it has read the
    // chunk's record, b compacts the chunk and deletes its objects.
    let b2 = b.clone();
    c.kv.after_read(
        Keys::new(churnfs_tests::shared::VOLUME).chunk(ino, 0),
        move || {
            b2.background_until_idle().expect("b's compaction");
        },
    );
    put(&a, 3, 10, 200);
    assert!(
        c.stat(1, "background_compactions") >= 1,
        "b compacted nothing"
    );
    for m in [&a, &b] {
        assert_eq!(m.read(ino, 0, want.len() as u32).expect("read"), want);
    }
    a.release(ino).expect("release");
    b.release(ino).expect("release");
    c.settle();
    let report = c.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A chunk that flushes left in many slices is rewritten as one object in
/// the background; its bytes stay what they were.
#[test]
fn fragmented_chunks_are_compacted_in_the_background() {
    let c = Cluster::new(1, sim_config());
    let m = &c.mounts[0];
    let ino = new_file(m);
    let mut want = vec![0u8; 300_000];
    for n in 0..20u8 {
        let off = n as usize * 14_000 + 100;
        let piece = vec![n + 1; 9_000];
        m.write(ino, off as u64, &piece, false).expect("write");
        m.flush(ino).expect("flush");
        want[off..off + piece.len()].copy_from_slice(&piece);
    }
    want.truncate(19 * 14_000 + 100 + 9_000);
    c.settle();
    assert!(
        c.stat(0, "background_compactions") >= 1,
        "nothing compacted"
    );
    assert_eq!(m.read(ino, 0, want.len() as u32 + 10).expect("read"), want);
    m.release(ino).expect("release");
    c.settle();
    let report = c.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.unreferenced_objects, 0, "old objects left behind");
}

/// Operations of many threads of one mount, each commit taking a round
/// trip: they are committed together (group commit) where they touch
/// different keys, and every one applies as if alone, in directories of
/// their own and in one they share.
#[test]
fn concurrent_operations_of_one_mount_commit_together_and_each_applies() {
    use churnfs_kv::mem::Faults;
    use churnfs_vfs::Ino;
    use std::collections::BTreeSet;
    const THREADS: usize = 6;
    const FILES: usize = 40;
    let c = Cluster::new(1, sim_config());
    c.kv.set_faults(Faults {
        commit_delay: std::time::Duration::from_millis(2),
        ..Faults::default()
    });
    let m = c.mounts[0].clone();
    let shared = m
        .mkdir(churnfs_tests::CTX, Ino::ROOT, b"shared", 0o755)
        .expect("mkdir")
        .ino;
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                let own = m
                    .mkdir(
                        churnfs_tests::CTX,
                        Ino::ROOT,
                        format!("d{t}").as_bytes(),
                        0o755,
                    )
                    .expect("mkdir")
                    .ino;
                let mut kept = BTreeSet::new();
                for i in 0..FILES {
                    let name = format!("f{i}");
                    let (a, _) = m
                        .create(churnfs_tests::CTX, own, name.as_bytes(), 0o644)
                        .expect("create");
                    m.write(a.ino, 0, format!("{t}/{i}").as_bytes(), false)
                        .expect("write");
                    m.flush(a.ino).expect("flush");
                    m.release(a.ino).expect("release");
                    kept.insert(name);
                    if i % 3 == 2 {
                        let gone = format!("f{}", i - 1);
                        m.unlink(own, gone.as_bytes()).expect("unlink");
                        kept.remove(&gone);
                    }
                    let (b, _) = m
                        .create(
                            churnfs_tests::CTX,
                            shared,
                            format!("t{t}-{i}").as_bytes(),
                            0o644,
                        )
                        .expect("create in the shared directory");
                    m.release(b.ino).expect("release");
                }
                (own, kept)
            })
        })
        .collect();
    let done: Vec<_> = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();
    c.kv.set_faults(Faults::default());
    let names = |dir: Ino| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut off = 0;
        loop {
            let mut got = 0;
            m.readdir(dir, off, false, &mut |e| {
                if e.name != b"." && e.name != b".." {
                    out.insert(String::from_utf8(e.name.to_vec()).expect("utf-8"));
                }
                off = e.offset;
                got += 1;
                true
            })
            .expect("readdir");
            if got == 0 {
                return out;
            }
        }
    };
    for (t, (own, kept)) in done.iter().enumerate() {
        assert_eq!(&names(*own), kept, "directory d{t}");
        for name in kept {
            let i: usize = name[1..].parse().expect("a number");
            let a = m.lookup(*own, name.as_bytes()).expect("lookup");
            let want = format!("{t}/{i}");
            assert_eq!(
                m.read(a.ino, 0, 64).expect("read"),
                want.as_bytes(),
                "d{t}/{name}"
            );
        }
    }
    assert_eq!(names(shared).len(), THREADS * FILES, "the shared directory");
    assert!(
        c.stat(0, "group_commits") > 0,
        "nothing was committed together"
    );
    assert!(c.stat(0, "group_members") >= 2 * c.stat(0, "group_commits"));
    c.settle();
    let report = c.fsck();
    assert!(report.is_clean(), "{:?}", report.problems);
}
