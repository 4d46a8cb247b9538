//! `MemKv`: the engine in memory, for simulation and tests. It keeps every
//! version's revision as etcd does, expires leases by a logical clock that
//! only the test moves, and injects faults on demand: commits that fail as
//! if conflicting, an outage (every call `Unavailable`), commits applied
//! but answered `Unavailable` (the ambiguous case a real network gives),
//! and lease expiries; and it runs a test's step between a read and what
//! the reader does next (`after_read`), to interleave two mounts exactly.
//!
//! Bound: the change history kept for watches holds at most `HISTORY_MAX`
//! events; a watch from before that answers `Compacted`, as etcd does
//! after compaction.

use crate::{
    Cond, Entry, Event, KvError, LeaseId, Limits, MetaKv, Op, Outcome, Result, Rev, Txn, WatchItem,
    WatchStream,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Most events kept for watches that start in the past.
pub const HISTORY_MAX: usize = 1 << 20;

#[derive(Clone, Debug)]
struct Val {
    value: Vec<u8>,
    rev: Rev,
    lease: Option<LeaseId>,
}

struct Lease {
    ttl: Duration,
    /// Logical time at which it expires.
    expires: Duration,
}

struct Watcher {
    prefix: Vec<u8>,
    tx: Sender<WatchItem>,
}

/// Faults to inject; each counter is used up one call at a time.
#[derive(Default, Debug, Clone)]
pub struct Faults {
    /// Every call answers `Unavailable` while set.
    pub down: bool,
    /// The next this-many commits answer `Failed` without looking.
    pub conflicts: u32,
    /// The next this-many commits are applied but answered `Unavailable`.
    pub ambiguous: u32,
    /// The next this-many commits are dropped and answered `Unavailable`.
    pub lost: u32,
    /// Every commit takes this long before it is applied (a network round
    /// trip), with the engine unlocked meanwhile.
    pub commit_delay: Duration,
}

#[derive(Default)]
struct Inner {
    data: BTreeMap<Vec<u8>, Val>,
    rev: Rev,
    leases: HashMap<LeaseId, Lease>,
    next_lease: LeaseId,
    now: Duration,
    history: VecDeque<Event>,
    /// Revision of the oldest event kept (events after it are all kept).
    compacted: Rev,
    watchers: Vec<Watcher>,
    faults: Faults,
    commits: u64,
}

/// A step to run right after a read of a given key has been answered.
type AfterRead = (Vec<u8>, Box<dyn FnOnce() + Send>);

/// An in-memory `MetaKv`.
#[derive(Clone, Default)]
pub struct MemKv {
    inner: Arc<Mutex<Inner>>,
    after_read: Arc<Mutex<Option<AfterRead>>>,
}

/// Whether `key` lies in `[start, end)`; an `end` of "\0" is unbounded.
fn in_range(key: &[u8], start: &[u8], end: &[u8]) -> bool {
    key >= start && (end == [0] || key < end)
}

impl MemKv {
    pub fn new() -> MemKv {
        MemKv::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `step` once, after the next `get_many` that reads `key` has
    /// read it and before it returns (the engine is not locked then: the
    /// step may use it).
    pub fn after_read(&self, key: Vec<u8>, step: impl FnOnce() + Send + 'static) {
        *self.after_read.lock().unwrap_or_else(|p| p.into_inner()) = Some((key, Box::new(step)));
    }

    /// Changes the faults to inject.
    pub fn set_faults(&self, f: Faults) {
        self.lock().faults = f;
    }

    pub fn faults(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// Moves the logical clock; leases not kept alive in time expire.
    pub fn advance(&self, d: Duration) {
        let mut g = self.lock();
        g.now += d;
        let now = g.now;
        let gone: Vec<LeaseId> = g
            .leases
            .iter()
            .filter(|(_, l)| l.expires <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            g.end_lease(id);
        }
    }

    /// Expires one lease now, as if its holder stopped renewing it.
    pub fn expire(&self, lease: LeaseId) {
        self.lock().end_lease(lease);
    }

    /// Every lease alive now.
    pub fn leases(&self) -> Vec<LeaseId> {
        let mut v: Vec<LeaseId> = self.lock().leases.keys().copied().collect();
        v.sort();
        v
    }

    /// Every key and value, in order.
    pub fn dump(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.lock()
            .data
            .iter()
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect()
    }

    /// Commits applied so far.
    pub fn commits(&self) -> u64 {
        self.lock().commits
    }

    /// The current revision.
    pub fn revision(&self) -> Rev {
        self.lock().rev
    }
}

impl Inner {
    fn check(&self, c: &Cond) -> bool {
        match c {
            Cond::Rev(k, r) => self.data.get(k).is_some_and(|v| v.rev == *r),
            Cond::Exists(k) => self.data.contains_key(k),
            Cond::Absent(k) => !self.data.contains_key(k),
            Cond::Empty(a, b) => !self
                .data
                .range(a.clone()..)
                .next()
                .is_some_and(|(k, _)| in_range(k, a, b)),
        }
    }

    /// Applies writes at a new revision and tells the watchers.
    fn apply(&mut self, ops: &[Op]) -> Rev {
        self.rev += 1;
        self.commits += 1;
        let rev = self.rev;
        let mut events = Vec::with_capacity(ops.len());
        for op in ops {
            match op {
                Op::Put { key, value, lease } => {
                    self.data.insert(
                        key.clone(),
                        Val {
                            value: value.clone(),
                            rev,
                            lease: *lease,
                        },
                    );
                    events.push(Event {
                        key: key.clone(),
                        value: Some(value.clone()),
                        rev,
                    });
                }
                Op::Delete(key) => {
                    if self.data.remove(key).is_some() {
                        events.push(Event {
                            key: key.clone(),
                            value: None,
                            rev,
                        });
                    }
                }
                Op::DeleteRange { start, end } => {
                    let gone: Vec<Vec<u8>> = self
                        .data
                        .range(start.clone()..)
                        .take_while(|(k, _)| in_range(k, start, end))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in gone {
                        self.data.remove(&key);
                        events.push(Event {
                            key,
                            value: None,
                            rev,
                        });
                    }
                }
            }
        }
        self.publish(events);
        rev
    }

    fn publish(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        self.watchers.retain(|w| {
            let mine: Vec<Event> = events
                .iter()
                .filter(|e| e.key.starts_with(&w.prefix))
                .cloned()
                .collect();
            mine.is_empty() || w.tx.send(WatchItem::Events(mine)).is_ok()
        });
        for e in events {
            if self.history.len() == HISTORY_MAX {
                if let Some(old) = self.history.pop_front() {
                    self.compacted = old.rev;
                }
            }
            self.history.push_back(e);
        }
    }

    fn end_lease(&mut self, id: LeaseId) {
        if self.leases.remove(&id).is_none() {
            return;
        }
        let keys: Vec<Vec<u8>> = self
            .data
            .iter()
            .filter(|(_, v)| v.lease == Some(id))
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return;
        }
        let ops: Vec<Op> = keys.into_iter().map(Op::Delete).collect();
        self.apply(&ops);
    }

    fn up(&self) -> Result<()> {
        if self.faults.down {
            return Err(KvError::Unavailable("memory engine is down".into()));
        }
        Ok(())
    }
}

impl MetaKv for MemKv {
    fn get_many(&self, keys: &[&[u8]]) -> Result<(Vec<Option<Entry>>, Rev)> {
        let g = self.lock();
        g.up()?;
        let out = keys
            .iter()
            .map(|k| {
                g.data.get(*k).map(|v| Entry {
                    key: k.to_vec(),
                    value: v.value.clone(),
                    rev: v.rev,
                })
            })
            .collect();
        let rev = g.rev;
        drop(g);
        let step = {
            let mut a = self.after_read.lock().unwrap_or_else(|p| p.into_inner());
            match a.take() {
                Some((k, f)) if keys.contains(&k.as_slice()) => Some(f),
                other => {
                    *a = other;
                    None
                }
            }
        };
        if let Some(f) = step {
            f();
        }
        Ok((out, rev))
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<(Vec<Entry>, Rev)> {
        let g = self.lock();
        g.up()?;
        let out = g
            .data
            .range(start.to_vec()..)
            .take_while(|(k, _)| in_range(k, start, end))
            .take(limit)
            .map(|(k, v)| Entry {
                key: k.clone(),
                value: v.value.clone(),
                rev: v.rev,
            })
            .collect();
        Ok((out, g.rev))
    }

    fn commit(&self, txn: &Txn) -> Result<Outcome> {
        let limits = self.limits();
        if txn.conds.len() > limits.max_ops || txn.ops.len() > limits.max_ops {
            return Err(KvError::TooLarge(format!(
                "{} conditions, {} writes",
                txn.conds.len(),
                txn.ops.len()
            )));
        }
        if txn.bytes() > limits.max_bytes {
            return Err(KvError::TooLarge(format!("{} bytes", txn.bytes())));
        }
        if crate::puts_in_a_range(txn) {
            return Err(KvError::Engine(
                "duplicate key given in txn request (a put inside a range deletion)".into(),
            ));
        }
        let delay = self.lock().faults.commit_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut g = self.lock();
        g.up()?;
        if g.faults.lost > 0 {
            g.faults.lost -= 1;
            return Err(KvError::Unavailable("commit lost in transit".into()));
        }
        if g.faults.conflicts > 0 {
            g.faults.conflicts -= 1;
            return Ok(Outcome::Failed);
        }
        for op in &txn.ops {
            if let Op::Put {
                lease: Some(id), ..
            } = op
            {
                if !g.leases.contains_key(id) {
                    return Err(KvError::LeaseExpired(*id));
                }
            }
        }
        if !txn.conds.iter().all(|c| g.check(c)) {
            return Ok(Outcome::Failed);
        }
        let rev = g.apply(&txn.ops);
        if g.faults.ambiguous > 0 {
            g.faults.ambiguous -= 1;
            return Err(KvError::Unavailable("answer lost in transit".into()));
        }
        Ok(Outcome::Committed(rev))
    }

    fn lease_grant(&self, ttl: Duration) -> Result<LeaseId> {
        let mut g = self.lock();
        g.up()?;
        g.next_lease += 1;
        let id = g.next_lease;
        let expires = g.now + ttl;
        g.leases.insert(id, Lease { ttl, expires });
        Ok(id)
    }

    fn lease_keepalive(&self, lease: LeaseId) -> Result<Duration> {
        let mut g = self.lock();
        g.up()?;
        let now = g.now;
        match g.leases.get_mut(&lease) {
            Some(l) => {
                l.expires = now + l.ttl;
                Ok(l.ttl)
            }
            None => Err(KvError::LeaseExpired(lease)),
        }
    }

    fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        let mut g = self.lock();
        g.up()?;
        g.end_lease(lease);
        Ok(())
    }

    fn watch(&self, prefix: &[u8], after: Rev) -> Result<Box<dyn WatchStream>> {
        let mut g = self.lock();
        g.up()?;
        if after < g.compacted {
            return Err(KvError::Compacted(after));
        }
        let (tx, rx) = channel();
        let past: Vec<Event> = g
            .history
            .iter()
            .filter(|e| e.rev > after && e.key.starts_with(prefix))
            .cloned()
            .collect();
        if !past.is_empty() {
            let _ = tx.send(WatchItem::Events(past));
        }
        g.watchers.push(Watcher {
            prefix: prefix.to_vec(),
            tx,
        });
        Ok(Box::new(MemWatch { rx }))
    }

    fn limits(&self) -> Limits {
        Limits {
            max_ops: 128,
            max_bytes: 1_572_864,
        }
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}

struct MemWatch {
    rx: Receiver<WatchItem>,
}

impl WatchStream for MemWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchItem>> {
        match self.rx.recv_timeout(timeout) {
            Ok(item) => Ok(Some(item)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(KvError::Unavailable("watch ended".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str) -> Op {
        Op::Put {
            key: k.into(),
            value: v.into(),
            lease: None,
        }
    }

    #[test]
    fn a_commit_applies_all_writes_only_when_every_condition_holds() {
        let kv = MemKv::new();
        let t = Txn {
            conds: vec![Cond::Absent(b"a".to_vec())],
            ops: vec![put("a", "1"), put("b", "2")],
        };
        let Outcome::Committed(r1) = kv.commit(&t).unwrap() else {
            panic!("first commit failed")
        };
        assert_eq!(kv.commit(&t).unwrap(), Outcome::Failed);
        let (got, rev) = kv.get_many(&[b"a", b"b", b"c"]).unwrap();
        assert_eq!(rev, r1);
        assert_eq!(got[0].as_ref().unwrap().rev, r1);
        assert!(got[2].is_none());
        let stale = Txn {
            conds: vec![Cond::Rev(b"a".to_vec(), r1 - 1)],
            ops: vec![Op::Delete(b"a".to_vec())],
        };
        assert_eq!(kv.commit(&stale).unwrap(), Outcome::Failed);
        let empty = Txn {
            conds: vec![Cond::Empty(b"a".to_vec(), b"c".to_vec())],
            ops: vec![],
        };
        assert_eq!(kv.commit(&empty).unwrap(), Outcome::Failed);
        let empty = Txn {
            conds: vec![Cond::Empty(b"c".to_vec(), b"d".to_vec())],
            ops: vec![],
        };
        assert!(matches!(kv.commit(&empty).unwrap(), Outcome::Committed(_)));
    }

    #[test]
    fn an_expired_lease_takes_its_keys_and_watchers_see_it() {
        let kv = MemKv::new();
        let l = kv.lease_grant(Duration::from_secs(10)).unwrap();
        let mut w = kv.watch(b"s/", kv.revision()).unwrap();
        let t = Txn {
            conds: vec![],
            ops: vec![Op::Put {
                key: b"s/1".to_vec(),
                value: b"x".to_vec(),
                lease: Some(l),
            }],
        };
        kv.commit(&t).unwrap();
        kv.advance(Duration::from_secs(5));
        kv.lease_keepalive(l).unwrap();
        kv.advance(Duration::from_secs(9));
        assert_eq!(kv.scan(b"s/", b"s0", 10).unwrap().0.len(), 1);
        kv.advance(Duration::from_secs(2));
        assert!(kv.scan(b"s/", b"s0", 10).unwrap().0.is_empty());
        assert!(matches!(
            kv.lease_keepalive(l),
            Err(KvError::LeaseExpired(_))
        ));
        let mut seen = Vec::new();
        while let Some(WatchItem::Events(ev)) = w.next(Duration::from_millis(10)).unwrap() {
            seen.extend(ev);
        }
        assert_eq!(seen.len(), 2);
        assert!(seen[1].value.is_none());
    }

    #[test]
    fn an_ambiguous_commit_is_applied_though_answered_unavailable() {
        let kv = MemKv::new();
        kv.set_faults(Faults {
            ambiguous: 1,
            ..Faults::default()
        });
        let t = Txn {
            conds: vec![],
            ops: vec![put("k", "v")],
        };
        assert!(matches!(kv.commit(&t), Err(KvError::Unavailable(_))));
        assert!(kv.get_many(&[b"k"]).unwrap().0[0].is_some());
    }

    #[test]
    fn a_range_deletion_is_one_write_and_one_change_per_key() {
        let kv = MemKv::new();
        let keys = ["d/a", "d/b", "d/c", "d/d"];
        let t = Txn {
            conds: vec![],
            ops: keys.iter().map(|k| put(k, "1")).collect(),
        };
        kv.commit(&t).unwrap();
        let mut w = kv.watch(b"d/", kv.revision()).unwrap();
        let range = Op::DeleteRange {
            start: b"d/b".to_vec(),
            end: crate::key_after(b"d/c"),
        };
        let t = Txn {
            conds: vec![],
            ops: vec![range.clone(), put("e", "2")],
        };
        assert!(matches!(kv.commit(&t).unwrap(), Outcome::Committed(_)));
        let left: Vec<Vec<u8>> = kv
            .scan(b"d/", b"d0", 10)
            .unwrap()
            .0
            .into_iter()
            .map(|e| e.key)
            .collect();
        assert_eq!(left, vec![b"d/a".to_vec(), b"d/d".to_vec()]);
        let Some(WatchItem::Events(ev)) = w.next(Duration::from_millis(10)).unwrap() else {
            panic!("no change seen")
        };
        let gone: Vec<&[u8]> = ev.iter().map(|e| e.key.as_slice()).collect();
        assert_eq!(gone, vec![b"d/b".as_slice(), b"d/c".as_slice()]);
        assert!(ev.iter().all(|e| e.value.is_none()));
        // A put inside the range in the same commit is refused, as etcd does.
        let t = Txn {
            conds: vec![],
            ops: vec![range, put("d/bb", "3")],
        };
        assert!(matches!(kv.commit(&t), Err(KvError::Engine(_))));
        assert!(kv.get_many(&[b"d/bb"]).unwrap().0[0].is_none());
    }
}
