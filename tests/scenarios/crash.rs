//! Crash test: seeded random operations with occasional fsync, then a power
//! loss that keeps the synced state plus a random prefix of the batches
//! applied since (`MemStore::crash_copy(k)`). After mounting what is left:
//! fsck is clean, every file fsynced and not changed since reads back what was
//! fsynced, and the whole tree equals the reference model as it stood when
//! the last kept batch was written: the state is a prefix of the history.
//! The workload includes hard links, xattrs and files unlinked while open
//! (which recovery must reclaim). Each seed crashes three times in a row,
//! continuing on the recovered tree.
//!
//! Replay one seed with `CHURNFS_CRASH_SEED=<seed>`.

use churnfs_engine::EngineConfig;
use churnfs_tests::reference::{compare_tree, seeds, Driver, Model, Op};
use churnfs_tests::{small_config, Fs, SeedGuard};

/// Seeds run by default (CI); `CHURNFS_CRASH_SEEDS=N` runs N (`make crash-long`).
const SEEDS: u64 = 300;
const ROUNDS: usize = 3;

/// Writers commit (without sync) once two blocks are dirty, so a round
/// leaves many unsynced batches to cut between. Odd seeds also run with tiny
/// caches, so that recovery and later operations read from the store.
fn config(seed: u64) -> EngineConfig {
    let cfg = EngineConfig {
        dirty_bytes_max: 2 * 65_536,
        ..small_config()
    };
    if seed % 2 == 1 {
        EngineConfig {
            inodes_max: 3,
            dentries_max: 3,
            negative_entries_max: 2,
            ..cfg
        }
    } else {
        cfg
    }
}

/// What a seed's crashes exercised.
#[derive(Default)]
struct Exercised {
    kept_batches: usize,
    recovered_unlinked: u64,
    tmpfiles_linked: u64,
}

/// Files of `durable` whose contents no later state changed, with those contents.
fn untouched_files(durable: &Model, later: &[&Model]) -> Vec<(String, Vec<u8>)> {
    durable
        .nodes
        .keys()
        .filter_map(|p| {
            let f = durable.file(p)?;
            let kept = later
                .iter()
                .all(|m| m.file(p).map(|g| &g.data) == Some(&f.data));
            kept.then(|| (p.clone(), f.data.clone()))
        })
        .collect()
}

fn run(seed: u64) -> Exercised {
    let _guard = SeedGuard {
        what: "crash",
        var: "CHURNFS_CRASH_SEED",
        seed,
    };
    let mut fs = Fs::with_config(config(seed));
    let mut d = Driver::new(seed);
    let mut done = Exercised::default();
    for round in 0..ROUNDS {
        // The model as of the last sync, and after each batch applied since.
        let mut durable = d.model.clone();
        let mut batches: Vec<Model> = Vec::new();
        let steps = 20 + d.rng.below(100);
        for step in 0..steps {
            // Fewer fsyncs than the model test, so crashes find more
            // unsynced batches to cut between.
            let op = loop {
                let op = d.random_op(false);
                if !matches!(op, Op::Fsync) || d.rng.chance(40) {
                    break op;
                }
            };
            let ctx = format!("seed {seed} round {round} step {step} {op:?}");
            let before = fs.store.unsynced_batches();
            d.apply(&mut fs, &op, &ctx);
            let after = fs.store.unsynced_batches();
            if matches!(op, Op::Fsync) {
                assert_eq!(after, 0, "{ctx}: fsync left unsynced batches");
                durable = d.model.clone();
                batches.clear();
            } else {
                assert!(
                    after == before || after == before + 1,
                    "{ctx}: {before} -> {after} batches"
                );
                if after > before {
                    batches.push(d.model.clone());
                }
            }
        }
        assert_eq!(batches.len(), fs.store.unsynced_batches());
        let keep = d.rng.below(batches.len() as u64 + 1) as usize;
        done.kept_batches += keep;
        let ctx = format!(
            "seed {seed} round {round}: crash keeping {keep} of {} batches",
            batches.len()
        );
        let mut later: Vec<&Model> = batches.iter().collect();
        later.push(&d.model);
        let untouched = untouched_files(&durable, &later);
        let expected = if keep == 0 {
            durable
        } else {
            batches[keep - 1].clone()
        };

        fs.crash_keeping(keep);
        done.recovered_unlinked += fs.stat("recovered_unlinked");
        fs.fsck();
        for (path, data) in &untouched {
            let ino = fs
                .resolve(path)
                .unwrap_or_else(|e| panic!("{ctx}: fsynced /{path} is gone: {e:?}"));
            assert!(
                fs.read_all(ino) == *data,
                "{ctx}: fsynced /{path} lost its contents"
            );
        }
        compare_tree(&*fs.engine, &expected, &ctx);
        d.model = expected;
        d.drop_held_after_crash(&fs, &ctx);
    }
    done.tmpfiles_linked = d.tmpfiles_linked;
    fs.remount();
    fs.fsck();
    compare_tree(
        &*fs.engine,
        &d.model,
        &format!("seed {seed}: remount after the last crash"),
    );
    done
}

#[test]
fn crashes_keep_a_prefix_of_history() {
    let count = std::env::var("CHURNFS_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let all = seeds("CHURNFS_CRASH_SEED", count);
    let mut total = Exercised::default();
    for &seed in &all {
        let done = run(seed);
        total.kept_batches += done.kept_batches;
        total.recovered_unlinked += done.recovered_unlinked;
        total.tmpfiles_linked += done.tmpfiles_linked;
    }
    println!(
        "crash simulation: {} seeds, {} crashes, {} unsynced batches kept across them, \
         {} open-unlinked inodes recovered, {} tmpfiles linked, 0 violations",
        all.len(),
        all.len() * ROUNDS,
        total.kept_batches,
        total.recovered_unlinked,
        total.tmpfiles_linked
    );
    // The run is only meaningful if crashes cut between unsynced batches and
    // left open-unlinked files for recovery.
    if all.len() as u64 == count {
        assert!(
            total.kept_batches > 0,
            "no crash ever kept an unsynced batch"
        );
        assert!(
            total.recovered_unlinked > 0,
            "no crash ever left an unlinked inode to recover"
        );
        assert!(total.tmpfiles_linked > 0, "no tmpfile was ever linked");
    }
}
