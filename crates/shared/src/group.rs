//! Group commit: the commits of concurrent operations of one mount go to
//! the engine together, as one transaction, where they do not touch each
//! other's keys.
//!
//! The engine takes several commits at once (etcd pipelines them and
//! batches their log writes itself), so up to `LANES` commits go out side
//! by side as they come: with few writers nothing waits. A commit that
//! finds every lane busy joins a queue; whoever's commit comes back first
//! leads the queue into its lane. It takes from the queue, in order, every
//! commit that writes no key another member has a condition on (nor into a
//! range another asks empty), has no condition on a key another writes,
//! and whose conditions on keys it shares with another say the same,
//! within the engine's limits and `GROUP_MAX` members, and commits them as
//! one, in queue order.
//!
//! The engine checks every condition before it applies any write. Since no
//! member writes what another's conditions name, the conditions hold
//! together exactly when each would hold alone; a key two members write
//! without a condition on it (a directory's times, by two creates in it)
//! ends with the later member's value (a commit keeps the last write of a
//! key). So the group applies what its members would have applied one
//! after another, in one round trip. If the group's conditions fail, the
//! engine does not say whose: each member is committed again alone
//! (`group_retries_alone`). If the engine gives no answer, every member
//! gets the error (the session's slot tells an ambiguous group applied or
//! not, as for one commit). A caller leads groups until its own commit is
//! done.
//!
//! Bounds: at most `LANES` engine commits in flight, `GROUP_MAX` members
//! per engine commit; the queue holds at most one commit per thread that
//! is in `commit`.

use crate::fs::{lock, SharedFs};
use crate::stats::Stats;
use churnfs_kv::{Cond, Op, Rev, Txn};
use churnfs_vfs::{EngineError, Result, StoreError};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// Most commits in one engine commit.
pub(crate) const GROUP_MAX: usize = 64;

/// Most engine commits of one mount in flight at once. Two writers (W4)
/// commit side by side as they would without groups; past four, commits
/// wait and go together. Serving every commit from one lane made W4's two
/// fs_mark threads wait for each other: 419 files/s against 528.
pub(crate) const LANES: usize = 4;

/// One caller's commit, waiting for its outcome.
struct Member {
    txn: Txn,
    deadline: Instant,
    outcome: Mutex<Option<Result<Option<Rev>>>>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Arc<Member>>,
    /// Engine commits in flight (at most `LANES`).
    in_flight: usize,
}

#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Queue>,
    done: Condvar,
}

/// The keys a commit reads (its conditions) and writes.
struct Touch {
    writes: HashSet<Vec<u8>>,
    conds: Vec<Cond>,
    /// It deletes a range (a delegation's batch): it goes alone.
    ranged: bool,
}

impl Touch {
    fn of(t: &Txn) -> Touch {
        Touch {
            writes: t.ops.iter().map(|o| o.key().to_vec()).collect(),
            conds: t.conds.clone(),
            ranged: t.ops.iter().any(|o| matches!(o, Op::DeleteRange { .. })),
        }
    }

    /// Whether `self` and `o` may share one engine commit.
    fn apart(&self, o: &Touch) -> bool {
        if self.ranged || o.ranged {
            return false;
        }
        let hits = |writes: &HashSet<Vec<u8>>, conds: &[Cond]| {
            conds.iter().any(|c| match c {
                Cond::Rev(k, _) | Cond::Exists(k) | Cond::Absent(k) => writes.contains(k),
                Cond::Empty(a, b) => writes
                    .iter()
                    .any(|k| k.as_slice() >= a.as_slice() && k.as_slice() < b.as_slice()),
            })
        };
        // Two conditions on one key must say the same (the commit keeps
        // one of them).
        let same_key_differs = self
            .conds
            .iter()
            .any(|c| o.conds.iter().any(|d| cond_key(c) == cond_key(d) && c != d));
        !hits(&self.writes, &o.conds) && !hits(&o.writes, &self.conds) && !same_key_differs
    }

    fn absorb(&mut self, o: Touch) {
        self.ranged |= o.ranged;
        self.writes.extend(o.writes);
        self.conds.extend(o.conds);
    }
}

fn cond_key(c: &Cond) -> Vec<u8> {
    match c {
        Cond::Rev(k, _) | Cond::Exists(k) | Cond::Absent(k) => k.clone(),
        Cond::Empty(a, b) => [a.as_slice(), b.as_slice()].concat(),
    }
}

/// The same error, for another member of a group that met it.
fn echo(e: &EngineError) -> EngineError {
    match e {
        EngineError::Store(StoreError::Fenced) => EngineError::Store(StoreError::Fenced),
        EngineError::Store(StoreError::Unavailable(m)) => {
            EngineError::Store(StoreError::Unavailable(m.clone()))
        }
        other => EngineError::Store(StoreError::Engine(other.to_string())),
    }
}

impl SharedFs {
    /// Commits `txn` (see `commit_one`), with whatever other operations of
    /// this mount are committing at the same time.
    pub(crate) fn commit(&self, txn: Txn, deadline: Instant) -> Result<Option<Rev>> {
        if !self.cfg.group_commit {
            return self.commit_one(txn, deadline);
        }
        let g = &self.group;
        let mut q = lock(&g.queue);
        if q.in_flight < LANES && q.waiting.is_empty() {
            // A free lane and nobody waiting: out as it is.
            q.in_flight += 1;
            drop(q);
            let r = self.commit_one(txn, deadline);
            lock(&g.queue).in_flight -= 1;
            g.done.notify_all();
            return r;
        }
        let me = Arc::new(Member {
            txn,
            deadline,
            outcome: Mutex::new(None),
        });
        q.waiting.push_back(me.clone());
        loop {
            if let Some(r) = lock(&me.outcome).take() {
                return r;
            }
            if q.in_flight < LANES && !q.waiting.is_empty() {
                // A free lane: the queue's next group goes out in it (this
                // caller's commit in it, or in a later one it leads too).
                q.in_flight += 1;
                let batch = self.take_group(&mut q.waiting);
                drop(q);
                self.commit_group(batch);
                q = lock(&g.queue);
                q.in_flight -= 1;
                g.done.notify_all();
                continue;
            }
            q = g.done.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The next group: the first waiting commit and every later one apart
    /// from all taken so far, within the engine's limits.
    fn take_group(&self, waiting: &mut VecDeque<Arc<Member>>) -> Vec<Arc<Member>> {
        let limits = self.kv.limits();
        let mut out: Vec<Arc<Member>> = Vec::new();
        let mut seen: Option<Touch> = None;
        // Room for the session's condition and the slot's write.
        let (mut conds, mut ops, mut bytes) = (1usize, 1usize, 64usize);
        let mut keep = VecDeque::new();
        while let Some(m) = waiting.pop_front() {
            let t = Touch::of(&m.txn);
            let fits = out.len() < GROUP_MAX
                && conds + m.txn.conds.len() <= limits.max_ops
                && ops + m.txn.ops.len() <= limits.max_ops
                && bytes + m.txn.bytes() <= limits.max_bytes;
            let ok = match &seen {
                None => true,
                Some(s) => fits && s.apart(&t),
            };
            if !ok {
                keep.push_back(m);
                continue;
            }
            conds += m.txn.conds.len();
            ops += m.txn.ops.len();
            bytes += m.txn.bytes();
            match &mut seen {
                None => seen = Some(t),
                Some(s) => s.absorb(t),
            }
            out.push(m);
        }
        *waiting = keep;
        out
    }

    /// Commits `batch` as one and sets each member's outcome.
    fn commit_group(&self, batch: Vec<Arc<Member>>) {
        let set = |m: &Member, r: Result<Option<Rev>>| {
            *lock(&m.outcome) = Some(r);
        };
        if batch.len() == 1 {
            let m = &batch[0];
            set(m, self.commit_one(m.txn.clone(), m.deadline));
            return;
        }
        Stats::inc(&self.stats.group_commits);
        Stats::add(&self.stats.group_members, batch.len() as u64);
        let mut all = Txn::default();
        let mut deadline = batch[0].deadline;
        for m in &batch {
            all.conds.extend(m.txn.conds.iter().cloned());
            all.ops.extend(m.txn.ops.iter().cloned());
            deadline = deadline.min(m.deadline);
        }
        match self.commit_one(all, deadline) {
            Ok(Some(rev)) => {
                for m in &batch {
                    set(m, Ok(Some(rev)));
                }
            }
            Ok(None) => {
                // Someone's condition failed; whose, the engine does not
                // say: each alone.
                Stats::inc(&self.stats.group_retries_alone);
                for m in &batch {
                    set(m, self.commit_one(m.txn.clone(), m.deadline));
                }
            }
            Err(e) => {
                for m in &batch {
                    set(m, Err(echo(&e)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str) -> Op {
        Op::Put {
            key: k.as_bytes().to_vec(),
            value: vec![1],
            lease: None,
        }
    }

    fn txn(conds: Vec<Cond>, ops: Vec<Op>) -> Touch {
        Touch::of(&Txn { conds, ops })
    }

    #[test]
    fn commits_on_other_keys_go_together() {
        let a = txn(vec![Cond::Rev(b"d1".to_vec(), 4)], vec![put("d1/x")]);
        let b = txn(vec![Cond::Rev(b"d2".to_vec(), 7)], vec![put("d2/y")]);
        assert!(a.apart(&b) && b.apart(&a));
        // The same condition on a key both read: still apart.
        let c = txn(vec![Cond::Rev(b"d1".to_vec(), 4)], vec![put("d1/z")]);
        assert!(a.apart(&c));
        // A key both write with no condition on it (a directory's times):
        // the later write stands, as one after the other.
        let d = txn(
            vec![Cond::Rev(b"d1".to_vec(), 4)],
            vec![put("d1/z"), put("t")],
        );
        let e = txn(
            vec![Cond::Rev(b"d2".to_vec(), 9)],
            vec![put("d2/z"), put("t")],
        );
        assert!(d.apart(&e));
    }

    #[test]
    fn commits_that_touch_each_others_keys_do_not() {
        let a = txn(vec![Cond::Rev(b"d1".to_vec(), 4)], vec![put("d1/x")]);
        // Writes a key the other reads.
        let b = txn(vec![], vec![put("d1")]);
        assert!(!a.apart(&b) && !b.apart(&a));
        // Writes a key the other writes and has a condition on.
        let c = txn(vec![Cond::Absent(b"d1/x".to_vec())], vec![put("d1/x")]);
        assert!(!a.apart(&c) && !c.apart(&a));
        // Writes into a range the other asks empty.
        let d = txn(
            vec![Cond::Empty(b"d1/".to_vec(), b"d1/\xff".to_vec())],
            vec![],
        );
        assert!(!a.apart(&d) && !d.apart(&a));
        // Reads a key at another version.
        let e = txn(vec![Cond::Rev(b"d1".to_vec(), 5)], vec![put("e")]);
        assert!(!a.apart(&e));
        // Deletes a range, even of keys nobody else touches: alone.
        let f = txn(
            vec![],
            vec![Op::DeleteRange {
                start: b"d9/a".to_vec(),
                end: b"d9/b".to_vec(),
            }],
        );
        assert!(!a.apart(&f) && !f.apart(&a));
    }
}
