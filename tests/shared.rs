//! Shared mode without FUSE: several mounts (`SharedFs`) of one volume on
//! an in-memory engine (`MemKv`, which injects faults) and an in-memory
//! object store. Background work (frees, the delete queue, reclaim of
//! ended sessions) runs when the harness says, so runs are deterministic.

use crate::{Rng, Target};
use churnfs_kv::mem::Faults;
use churnfs_kv::MemKv;
use churnfs_shared::check::check_volume;
use churnfs_shared::objects::{open_store, Blobs};
use churnfs_shared::{schema, MountArgs, SharedConfig, SharedFs};
use churnfs_vfs::Backend;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const VOLUME: &str = "sim";

/// A configuration for simulation: no background threads, small bounds.
pub fn sim_config() -> SharedConfig {
    SharedConfig {
        background: false,
        op_timeout: Duration::from_secs(5),
        ino_batch: 7,
        dirty_bytes_max: 256 * 1024,
        file_flush_bytes: 96 * 1024,
        object_cache_bytes: 512 * 1024,
        // The harness runs the background when it says: no waiting on the
        // clock for a chunk to go quiet.
        compact_quiet: Duration::ZERO,
        delegation: false,
        ..SharedConfig::default()
    }
}

/// The simulation's mounts with delegated directories: recalls answered
/// within a millisecond, batches committed after a few, a recalled
/// directory taken again soon, images small enough to outgrow.
pub fn sim_config_delegated() -> SharedConfig {
    SharedConfig {
        delegation: true,
        delegation_poll: Duration::from_millis(1),
        delegation_flush: Duration::from_millis(3),
        delegation_hold_off: Duration::from_millis(2),
        delegation_keys_max: 512,
        ..sim_config()
    }
}

/// Several mounts of one volume.
pub struct Cluster {
    pub kv: MemKv,
    pub data: String,
    pub cfg: SharedConfig,
    pub mounts: Vec<Arc<SharedFs>>,
    /// Inject faults into this share of operations (percent).
    pub fault_pct: u64,
    pub faults_injected: u64,
    pub crashes: u64,
    pub fences: u64,
    /// Remounts may crash (a delegated directory's last batch dies with
    /// its mount, as the contract says: the model cannot follow that).
    pub may_crash: bool,
}

fn unique_data_url() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "memory://sim-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Cluster {
    pub fn new(mounts: usize, cfg: SharedConfig) -> Cluster {
        Cluster::with_upload_window(mounts, cfg, schema::UPLOAD_WINDOW_MS)
    }

    /// As `new`, on a volume whose upload window is `window_ms`.
    pub fn with_upload_window(mounts: usize, cfg: SharedConfig, window_ms: u32) -> Cluster {
        let kv = MemKv::new();
        let data = unique_data_url();
        SharedFs::mkfs(&kv, VOLUME, &data, window_ms, 0, 0).expect("mkfs");
        let mut c = Cluster {
            kv,
            data,
            cfg,
            mounts: Vec::new(),
            fault_pct: 0,
            faults_injected: 0,
            crashes: 0,
            fences: 0,
            may_crash: true,
        };
        for _ in 0..mounts {
            let m = c.mount();
            c.mounts.push(m);
        }
        c
    }

    pub fn mount(&self) -> Arc<SharedFs> {
        SharedFs::mount(
            Arc::new(self.kv.clone()),
            MountArgs {
                volume: VOLUME,
                data_url: None,
                cfg: self.cfg.clone(),
            },
        )
        .expect("mount")
    }

    /// Runs every mount's background work until none is left.
    pub fn settle(&self) {
        for m in &self.mounts {
            m.catch_up().expect("watch");
            for s in m.ended_sessions().expect("ended sessions") {
                m.reclaim_session(s).expect("reclaim");
            }
            m.background_until_idle().expect("background work");
        }
        // A reclaim by one mount may queue work for itself: once more.
        for m in &self.mounts {
            m.background_until_idle().expect("background work");
        }
    }

    /// Mount `m` dies (no unmount): its lease expires and another mount
    /// reclaims what it left; then it mounts again.
    pub fn crash(&mut self, m: usize) {
        let dead = self.mounts[m].session_id();
        let lease = self.lease_of(dead);
        self.kv.expire(lease);
        let fresh = self.mount();
        self.mounts[m] = fresh;
        let other = (m + 1) % self.mounts.len();
        let by = &self.mounts[other];
        assert!(
            by.ended_sessions().expect("ended sessions").contains(&dead),
            "session {dead} not seen as ended"
        );
        by.reclaim_session(dead).expect("reclaim");
        self.crashes += 1;
    }

    /// The lease of session `s`, from its `E` record.
    pub fn lease_of(&self, s: u64) -> i64 {
        let keys = churnfs_shared::schema::Keys::new(VOLUME);
        let k = keys.session(s);
        let (got, _) = churnfs_kv::MetaKv::get_many(&self.kv, &[&k]).expect("read session");
        let e = got[0].as_ref().expect("session alive");
        churnfs_shared::schema::decode_session(&e.value)
            .expect("session record")
            .lease
    }

    /// Mount `m`'s lease expires while it runs (a pause, a partition): it
    /// is fenced until its renewal starts a new session, which keeps the
    /// files it holds.
    pub fn fence(&mut self, m: usize) {
        let fs = &self.mounts[m];
        let old = fs.session_id();
        self.kv.expire(self.lease_of(old));
        assert!(
            fs.renew().expect("renewal").is_some(),
            "renewal did not start a new session"
        );
        assert_ne!(fs.session_id(), old);
        self.fences += 1;
    }

    /// Faults for the next operation, with `fault_pct` chance.
    pub fn maybe_fault(&mut self, rng: &mut Rng) {
        if self.fault_pct == 0 || !rng.chance(self.fault_pct) {
            return;
        }
        let f = match rng.below(3) {
            0 => Faults {
                conflicts: 1 + rng.below(2) as u32,
                ..Faults::default()
            },
            1 => Faults {
                ambiguous: 1,
                ..Faults::default()
            },
            _ => Faults {
                lost: 1,
                ..Faults::default()
            },
        };
        self.kv.set_faults(f);
        self.faults_injected += 1;
    }

    /// Clears faults not used up.
    pub fn clear_faults(&self) {
        self.kv.set_faults(Faults::default());
    }

    /// fsck of the volume, objects included.
    pub fn fsck(&self) -> churnfs_shared::check::Report {
        let stats = Arc::new(churnfs_shared::stats::Stats::default());
        let blobs = Blobs::new(
            open_store(&self.data).expect("store"),
            &self.data,
            VOLUME,
            Duration::from_secs(5),
            stats,
        );
        let r = check_volume(&self.kv, VOLUME, Some(&blobs), &mut |_| {}).expect("fsck");
        assert!(
            r.is_clean(),
            "fsck found {} problems:\n  {}",
            r.problems.len(),
            r.problems.join("\n  ")
        );
        r
    }

    pub fn stat(&self, m: usize, name: &str) -> u64 {
        self.mounts[m]
            .stats_snapshot()
            .into_iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no stat named {name}"))
            .1
    }
}

impl Target for Cluster {
    fn settle(&self) {
        Cluster::settle(self);
    }

    fn mounts(&self) -> usize {
        self.mounts.len()
    }

    /// Mount `m`, once it has taken every change its watch can deliver
    /// (no thread follows the watch here).
    fn backend(&self, m: usize) -> Arc<dyn Backend> {
        self.mounts[m].catch_up().expect("watch");
        self.mounts[m].clone()
    }

    fn remount(&mut self, rng: &mut Rng) -> Vec<usize> {
        let m = rng.below(self.mounts.len() as u64) as usize;
        if !self.may_crash || rng.chance(50) {
            self.mounts[m].shutdown().expect("unmount");
            let fresh = self.mount();
            self.mounts[m] = fresh;
        } else {
            self.crash(m);
        }
        self.settle();
        vec![m]
    }

    fn check(&self, held: &[u64], ctx: &str) {
        self.settle();
        for (m, h) in held.iter().enumerate() {
            assert_eq!(
                self.stat(m, "unlinked_inodes"),
                *h,
                "{ctx}: mount {m}'s unlinked files"
            );
            assert_eq!(
                self.stat(m, "kernel_known_inodes"),
                *h,
                "{ctx}: mount {m} holds inodes it was not given"
            );
            assert_eq!(self.stat(m, "frees_pending"), 0, "{ctx}: frees left");
            let dirty = self.stat(m, "dirty_bytes");
            assert!(
                dirty <= self.cfg.dirty_bytes_max,
                "{ctx}: {dirty} dirty bytes, over their bound"
            );
            if *h == 0 {
                // Only held files may have data not yet committed.
                assert_eq!(dirty, 0, "{ctx}: dirty bytes left after every close");
            }
            let cache = self.stat(m, "object_cache_bytes");
            assert!(
                cache <= self.cfg.object_cache_bytes as u64,
                "{ctx}: object cache {cache} over its bound"
            );
        }
        self.fsck();
    }
}
