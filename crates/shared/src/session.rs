//! A mount's session: a number, a lease in the engine, and the session's
//! keys. `E session` (attached to the lease) says the session is alive;
//! every commit of the mount is conditioned on it, so a mount whose lease
//! expired (partitioned, paused) writes nothing more under that session.
//! `G session` (not attached) stays until everything the session left
//! (open-unlinked files, delete queue) has been reclaimed.
//!
//! States: `Alive(id, lease)` → `Fenced` when a renewal finds the lease
//! gone or a commit finds `E` gone → `Alive(new id, new lease)` once the
//! renewal thread has started a new session; meanwhile commits answer
//! `StoreError::Fenced` (EIO). The files this mount held open-unlinked
//! under the old session are moved to the new one (`O` records, one
//! conditioned commit each batch); any another mount reclaimed first are
//! gone.
//!
//! Slots: a commit carries a slot of the session (`L session slot` =
//! sequence number); after an answer lost in transit, reading the slot
//! says whether the commit was applied. A slot is held by one commit at a
//! time; `SLOTS` bound how many commit at once.

use crate::fs::{kv_err, lock, SharedConfig, SharedFs, Tx};
use crate::schema::{self, Keys, SessionInfo};
use crate::stats::Stats;
use churnfs_kv::{KvError, LeaseId, MetaKv, Outcome};
use churnfs_vfs::{EngineError, Ino, Result, StoreError, Timespec};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// Commits of one mount in flight at once.
pub const SLOTS: u16 = 256;

struct State {
    id: u64,
    lease: LeaseId,
    fenced: bool,
}

pub(crate) struct Session {
    state: Mutex<State>,
    slots: Mutex<Vec<u16>>,
    slot_free: Condvar,
    seq: AtomicU64,
    /// Wakes the renewal thread early (a commit found the session gone).
    wake: (Mutex<bool>, Condvar),
    info: SessionInfo,
    /// When the lease was last granted or renewed.
    renewed: Mutex<Instant>,
}

/// A slot held by one commit.
pub(crate) struct Slot(pub u16);

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Takes a session number, grants a lease and writes `E` and `G`; retries
/// while the engine is unavailable, up to `deadline`.
fn establish(
    kv: &dyn MetaKv,
    keys: &Keys,
    ttl: Duration,
    info: &SessionInfo,
    deadline: Duration,
) -> Result<(u64, LeaseId)> {
    let until = Instant::now() + deadline;
    let again = |e: KvError| -> Result<()> {
        match e {
            KvError::Unavailable(_) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(50));
                Ok(())
            }
            e => Err(kv_err(e)),
        }
    };
    let lease = loop {
        match kv.lease_grant(ttl) {
            Ok(l) => break l,
            Err(e) => again(e)?,
        }
    };
    let counter = keys.next_session();
    loop {
        let got = match kv.get_many(&[&counter]) {
            Ok((g, _)) => g,
            Err(e) => {
                again(e)?;
                continue;
            }
        };
        let Some(e) = &got[0] else {
            return Err(EngineError::corrupt(None, "volume has no session counter"));
        };
        let id = schema::decode_u64(&e.value, "session counter")?;
        let mut rec = info.clone();
        rec.lease = lease;
        let v = schema::encode_session(&rec);
        let mut t = Tx::default();
        t.rev(counter.clone(), e.rev)
            .put(counter.clone(), schema::encode_u64(id + 1))
            .put_leased(keys.session(id), v.clone(), lease)
            .put(keys.registry(id), v);
        match kv.commit(&t.txn) {
            Ok(Outcome::Committed(_)) => return Ok((id, lease)),
            Ok(Outcome::Failed) => continue,
            Err(e) => {
                again(e)?;
                // Applied though unanswered? Then `E id` carries our lease.
                if let Ok((g, _)) = kv.get_many(&[&keys.session(id)]) {
                    let ours = g[0]
                        .as_ref()
                        .and_then(|e| schema::decode_session(&e.value).ok())
                        .is_some_and(|s| s.lease == lease);
                    if ours {
                        return Ok((id, lease));
                    }
                }
            }
        }
    }
}

impl Session {
    pub(crate) fn start(
        kv: &dyn MetaKv,
        keys: &Keys,
        cfg: &SharedConfig,
        stats: &Stats,
    ) -> Result<Session> {
        let info = SessionInfo {
            lease: 0,
            started: Timespec::now(),
            pid: std::process::id(),
            host: hostname(),
            mountpoint: cfg.mountpoint.clone(),
            reclaimer: 0,
        };
        let (id, lease) = establish(kv, keys, cfg.session_ttl, &info, cfg.op_timeout)?;
        Stats::inc(&stats.sessions_started);
        Stats::set(&stats.session_id, id);
        Ok(Session {
            state: Mutex::new(State {
                id,
                lease,
                fenced: false,
            }),
            slots: Mutex::new((0..SLOTS).rev().collect()),
            slot_free: Condvar::new(),
            seq: AtomicU64::new(1),
            wake: (Mutex::new(false), Condvar::new()),
            info,
            renewed: Mutex::new(Instant::now()),
        })
    }

    pub(crate) fn id(&self) -> u64 {
        lock(&self.state).id
    }

    /// The live session, or `Fenced`.
    pub(crate) fn current(&self) -> Result<(u64, LeaseId)> {
        let s = lock(&self.state);
        if s.fenced {
            return Err(EngineError::Store(StoreError::Fenced));
        }
        Ok((s.id, s.lease))
    }

    /// The session is gone: commits stop until the renewal thread has a
    /// new one.
    pub(crate) fn fence(&self, stats: &Stats) {
        let mut s = lock(&self.state);
        if !s.fenced {
            s.fenced = true;
            Stats::inc(&stats.fenced);
            tracing::error!(
                "session {} expired: this mount writes nothing until it has a new one",
                s.id
            );
        }
        drop(s);
        let (m, cv) = &self.wake;
        *lock(m) = true;
        cv.notify_all();
    }

    /// Was the lease granted or renewed within `d`?
    pub(crate) fn renewed_within(&self, d: Duration) -> bool {
        lock(&self.renewed).elapsed() < d
    }

    pub(crate) fn take_slot(&self) -> Slot {
        let mut g = lock(&self.slots);
        loop {
            if let Some(s) = g.pop() {
                return Slot(s);
            }
            g = self.slot_free.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub(crate) fn put_slot(&self, s: Slot) {
        let mut g = lock(&self.slots);
        assert!(g.len() < SLOTS as usize, "a slot given back twice");
        g.push(s.0);
        drop(g);
        self.slot_free.notify_one();
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Relaxed)
    }

    /// Waits up to `d`, or until woken by `fence` or `wake_all`.
    fn nap(&self, d: Duration) {
        let (m, cv) = &self.wake;
        let mut woken = lock(m);
        if !*woken {
            woken = cv
                .wait_timeout(woken, d)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *woken = false;
    }

    pub(crate) fn wake_all(&self) {
        let (m, cv) = &self.wake;
        *lock(m) = true;
        cv.notify_all();
    }
}

impl SharedFs {
    /// One round of the renewal thread: renew the lease, or start a new
    /// session once fenced. Returns the old session number when a new
    /// session replaced it.
    pub fn renew(&self) -> Result<Option<u64>> {
        let (old, lease, fenced) = {
            let s = lock(&self.session.state);
            (s.id, s.lease, s.fenced)
        };
        if !fenced {
            match self.kv.lease_keepalive(lease) {
                Ok(_) => {
                    *lock(&self.session.renewed) = Instant::now();
                    Stats::inc(&self.stats.session_renewals);
                    return Ok(None);
                }
                Err(KvError::LeaseExpired(_)) => self.session.fence(&self.stats),
                Err(e) => {
                    Stats::inc(&self.stats.session_renewal_failures);
                    return Err(kv_err(e));
                }
            }
        }
        let (id, lease) = establish(
            &*self.kv,
            &self.keys,
            self.cfg.session_ttl,
            &self.session.info,
            self.cfg.op_timeout,
        )?;
        {
            let mut s = lock(&self.session.state);
            s.id = id;
            s.lease = lease;
            s.fenced = false;
        }
        *lock(&self.session.renewed) = Instant::now();
        Stats::inc(&self.stats.sessions_started);
        Stats::set(&self.stats.session_id, id);
        tracing::warn!("session {old} replaced by session {id}");
        self.adopt_unlinked(old);
        Ok(Some(old))
    }

    /// Moves the `O` records of the files this mount still holds
    /// open-unlinked from session `old` to the current one. A file another
    /// mount reclaimed first is gone; this mount's handles on it answer
    /// errors.
    fn adopt_unlinked(&self, old: u64) {
        let held: Vec<Ino> = lock(&self.known)
            .iter()
            .filter(|(_, k)| k.unlinked)
            .map(|(i, _)| *i)
            .collect();
        for ino in held {
            let from = self.keys.open(old, ino);
            let r = self.transact(|_| {
                let (sid, _) = self.session.current()?;
                let (got, _) = self.get_many(&[&from])?;
                let Some(e) = &got[0] else {
                    return Ok(crate::fs::Step::Done(false));
                };
                let mut t = Tx::default();
                t.rev(from.clone(), e.rev)
                    .del(from.clone())
                    .put(self.keys.open(sid, ino), vec![1]);
                Ok(t.step(true))
            });
            match r {
                Ok((true, _)) => {}
                Ok((false, _)) => {
                    tracing::warn!("{ino}: reclaimed by another mount while this one was fenced");
                    self.known_mut(ino, |k| k.unlinked = false);
                }
                Err(e) => tracing::warn!("{ino}: could not move to the new session: {e}"),
            }
        }
    }
}

/// Starts the thread that renews the session's lease every third of its
/// TTL and starts a new session when fenced.
pub(crate) fn start_renewal(fs: &Arc<SharedFs>) -> Result<()> {
    let weak: Weak<SharedFs> = Arc::downgrade(fs);
    let every = fs.cfg.session_ttl / 3;
    let h = std::thread::Builder::new()
        .name("churnfs-session".into())
        .spawn(move || loop {
            let Some(fs) = weak.upgrade() else { return };
            if fs.stopping.load(Relaxed) {
                return;
            }
            let pause = match fs.renew() {
                Ok(Some(old)) => {
                    fs.bg.reclaim_later(old);
                    every
                }
                Ok(None) => every,
                Err(e) => {
                    tracing::debug!("session renewal: {e}");
                    Duration::from_millis(200)
                }
            };
            fs.session.nap(pause);
        })
        .map_err(|e| EngineError::Store(StoreError::Io(e)))?;
    lock(&fs.threads).push(h);
    Ok(())
}
