//! The boundary between shared mode and the distributed engine that holds
//! its metadata: `MetaKv`, a narrow transactional ordered key-value store
//! with leases and a change feed. etcd implements it (`EtcdKv`), and so
//! does an in-memory engine for simulation (`MemKv`), which can inject
//! conflicts, outages, delays and lease expiries.
//!
//! The shape is what TiKV, FoundationDB and a PostgreSQL key-value table
//! can give one-to-one (docs/design.md §15, "The engine trait"):
//! - reads see one committed snapshot (`get_many`, `scan`) and report
//!   each key's version (the revision of its last change);
//! - a commit is conditions plus writes, atomic: it applies every write if
//!   every condition holds at commit time, and nothing otherwise;
//! - conditions name keys and versions (`Rev`), absence, or an empty range
//!   (what rmdir needs), never values;
//! - leases expire unless kept alive, and take the keys attached to them;
//! - a watch delivers every change under a prefix in revision order from a
//!   given revision.

pub mod etcd;
pub mod mem;

use std::time::Duration;

pub use etcd::EtcdKv;
pub use mem::MemKv;

/// A revision: the engine's commit counter. A key's version is the revision
/// of its last change; revisions only grow.
pub type Rev = u64;

/// A lease: keys put with it vanish when it expires or is revoked.
pub type LeaseId = i64;

/// A key, its value and its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub rev: Rev,
}

/// A condition a commit checks atomically with its writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// The key exists and its version is `Rev` (unchanged since read).
    Rev(Vec<u8>, Rev),
    /// The key exists, whatever its version.
    Exists(Vec<u8>),
    /// The key does not exist.
    Absent(Vec<u8>),
    /// No key lies in `[start, end)`.
    Empty(Vec<u8>, Vec<u8>),
}

/// A write of a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    },
    Delete(Vec<u8>),
    /// Deletes every key in `[start, end)`: one write of the commit, one
    /// change per key deleted for a watch. As etcd does, an engine
    /// refuses a commit that also puts a key in the range.
    DeleteRange {
        start: Vec<u8>,
        end: Vec<u8>,
    },
}

impl Op {
    /// The key written (a range: its first key).
    pub fn key(&self) -> &[u8] {
        match self {
            Op::Put { key, .. } | Op::Delete(key) => key,
            Op::DeleteRange { start, .. } => start,
        }
    }

    /// Does this write change `k`?
    pub fn covers(&self, k: &[u8]) -> bool {
        match self {
            Op::Put { key, .. } | Op::Delete(key) => key.as_slice() == k,
            // An end of "\0" is every key after the start, as for etcd.
            Op::DeleteRange { start, end } => {
                start.as_slice() <= k && (end.as_slice() == [0] || k < end.as_slice())
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Op::Put { key, value, .. } => key.len() + value.len() + 16,
            Op::Delete(key) => key.len() + 8,
            Op::DeleteRange { start, end } => start.len() + end.len() + 8,
        }
    }
}

/// A key after `k` and before any other key that starts with `k`: the end
/// of a range whose last key is `k`.
pub fn key_after(k: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(k.len() + 1);
    e.extend_from_slice(k);
    e.push(0);
    e
}

/// Does `txn` put a key that one of its range deletions covers (which
/// etcd refuses as a duplicate key)?
pub fn puts_in_a_range(txn: &Txn) -> bool {
    txn.ops.iter().any(|r| {
        matches!(r, Op::DeleteRange { .. })
            && txn
                .ops
                .iter()
                .any(|o| matches!(o, Op::Put { key, .. } if r.covers(key)))
    })
}

/// Conditions and writes, committed together or not at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    pub conds: Vec<Cond>,
    pub ops: Vec<Op>,
}

impl Txn {
    /// Bytes the request carries, roughly (for the engine's size limit).
    pub fn bytes(&self) -> usize {
        let c: usize = self
            .conds
            .iter()
            .map(|c| match c {
                Cond::Rev(k, _) | Cond::Exists(k) | Cond::Absent(k) => k.len() + 16,
                Cond::Empty(a, b) => a.len() + b.len() + 16,
            })
            .sum();
        c + self.ops.iter().map(Op::bytes).sum::<usize>()
    }
}

/// What a commit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every condition held; the writes are applied at this revision.
    Committed(Rev),
    /// A condition failed; nothing was written.
    Failed,
}

/// One change seen by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub key: Vec<u8>,
    /// None: the key was deleted.
    pub value: Option<Vec<u8>>,
    pub rev: Rev,
}

/// What a watch delivers next.
#[derive(Debug)]
pub enum WatchItem {
    /// Changes in revision order (one commit's changes stay together).
    Events(Vec<Event>),
    /// Nothing changed under the prefix up to this revision.
    Progress(Rev),
}

/// A live watch. Dropping it cancels it.
pub trait WatchStream: Send {
    /// The next item, waiting at most `timeout`; Ok(None) when nothing came.
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchItem>, KvError>;
}

/// The engine's limits on one commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most conditions, and separately most writes, in one commit.
    pub max_ops: usize,
    /// Most bytes in one request.
    pub max_bytes: usize,
}

/// A failure to talk to the engine or a refusal by it.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// No answer within the deadline, or no quorum: try again later.
    #[error("metadata engine unavailable: {0}")]
    Unavailable(String),
    /// The requested revision was compacted away (a watch must re-list).
    #[error("revision {0} was compacted")]
    Compacted(Rev),
    /// The lease is gone (expired or revoked).
    #[error("lease {0:x} expired")]
    LeaseExpired(LeaseId),
    /// The request is over the engine's limits.
    #[error("request over the metadata engine's limits: {0}")]
    TooLarge(String),
    /// The engine is out of space (etcd's quota alarm).
    #[error("metadata engine is out of space: {0}")]
    NoSpace(String),
    /// Anything else the engine said.
    #[error("metadata engine failed: {0}")]
    Engine(String),
}

pub type Result<T, E = KvError> = std::result::Result<T, E>;

/// A transactional ordered key-value engine with leases and watch.
///
/// Every call may block up to the engine's request deadline and then fail
/// with `Unavailable`; a commit that fails so may or may not have been
/// applied (callers make their commits safe to retry by conditioning them
/// on what they read).
pub trait MetaKv: Send + Sync {
    /// The values of `keys` (None where absent) in one snapshot, and that
    /// snapshot's revision. Linearizable: it sees every commit that
    /// finished before it started.
    fn get_many(&self, keys: &[&[u8]]) -> Result<(Vec<Option<Entry>>, Rev)>;

    /// Keys in `[start, end)` in order, at most `limit`, from one snapshot
    /// (linearizable), and that snapshot's revision.
    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<(Vec<Entry>, Rev)>;

    /// Applies `txn` atomically if all its conditions hold.
    fn commit(&self, txn: &Txn) -> Result<Outcome>;

    /// A new lease of `ttl`.
    fn lease_grant(&self, ttl: Duration) -> Result<LeaseId>;

    /// Renews a lease; `LeaseExpired` when it is gone. Returns the TTL left.
    fn lease_keepalive(&self, lease: LeaseId) -> Result<Duration>;

    /// Ends a lease now, deleting its keys.
    fn lease_revoke(&self, lease: LeaseId) -> Result<()>;

    /// Follows every change under `prefix` after revision `after`.
    fn watch(&self, prefix: &[u8], after: Rev) -> Result<Box<dyn WatchStream>>;

    /// What one commit may hold.
    fn limits(&self) -> Limits;

    /// A name for logs and stats ("etcd", "memory").
    fn name(&self) -> &'static str;
}

/// The first key after every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff: every key after it. etcd spells that "\0".
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_first_key_past_the_prefix() {
        assert_eq!(prefix_end(b"ab"), b"ac".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }

    #[test]
    fn a_range_covers_its_keys_and_nothing_past_its_last() {
        let r = Op::DeleteRange {
            start: b"d/a".to_vec(),
            end: key_after(b"d/c"),
        };
        assert!(r.covers(b"d/a") && r.covers(b"d/b") && r.covers(b"d/c"));
        assert!(!r.covers(b"d/") && !r.covers(b"d/c0") && !r.covers(b"d/d"));
        let rest = Op::DeleteRange {
            start: b"d/".to_vec(),
            end: vec![0],
        };
        assert!(rest.covers(b"d/") && rest.covers(b"\xff") && !rest.covers(b"c"));
        let put = |k: &[u8]| Op::Put {
            key: k.to_vec(),
            value: vec![],
            lease: None,
        };
        let t = |ops| Txn { conds: vec![], ops };
        assert!(puts_in_a_range(&t(vec![r.clone(), put(b"d/b")])));
        assert!(!puts_in_a_range(&t(vec![r, put(b"d/d")])));
    }
}
