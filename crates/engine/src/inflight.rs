//! The batch a commit is writing, visible to readers before the store has it.
//!
//! A commit drains the dirty list under the state lock and used to apply
//! the batch to the store before releasing it, so every request waited for
//! the store's write of the whole batch (docs/design.md §6). Now the commit
//! *stages* the batch here under the state lock (sorted by key, one op per
//! key, last write wins) and applies it after releasing the lock. Readers go
//! through `InFlightStore` like any store: a key the staged batch holds is
//! answered from it (a delete reads as missing), any other key from the
//! store, and scans merge the two. Once the store has applied the batch,
//! it is retired.
//!
//! The commit only *opens* the staging under
//! the state lock (`begin_stage`, which takes the slot's write lock) and
//! finishes the batch (its names, then the sort) after releasing the state
//! lock; a reader that reaches the store meanwhile waits for `publish`
//! (counted in `staging_waits`). Names do not wait: the name cache answers
//! for every name the batch writes until the commit has handed them back,
//! and a name read from the store is one the batch does not touch
//! (`get_untouched`; dcache.rs, `committing`).
//!
//! Why this is safe for readers: the batch is published, or the way to
//! the store closed until it is, before the state lock is released, and
//! retired only after the store's `apply` returned, so at every instant a
//! key reads either from the staged batch or from a store that already
//! holds it. The caches never hold the records a batch
//! carries in a state older than the batch (the drain took them from the
//! caches), so a reader that misses a cache and reads here sees the newest.
//!
//! A reader holding the state lock reads one consistent state: no other
//! batch can be staged until it lets go, so the batch it overlays is the
//! newest. The reclaim thread reads without that lock, but only keys no
//! commit writes (a freed inode's, a pending truncate's garbage) and checks
//! what it found again under the lock before it deletes.
//!
//! Ordering: one batch is staged at a time (the commit lock serialises
//! commits; asserted). Writes that do not go through a commit (the reclaim
//! of unlinked inodes) go to the store directly: they touch only inodes no
//! commit writes (reclaim.rs, `reclaim_batch`, `free_large`).

use crate::error::StoreError;
use crate::store::{self, Batch, BatchOp, KvPair, KvStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, RwLockWriteGuard, TryLockError};

/// The hook as the engine and its store keep it: one hook, called from both.
pub type SharedWaitHook = Arc<dyn Fn() + Send + Sync>;

/// A batch in key order with one op per key.
struct Staged {
    batch: Batch,
}

fn key(op: &BatchOp) -> &[u8] {
    match op {
        BatchOp::Put(k, _) | BatchOp::Delete(k) => k,
    }
}

/// The first 16 bytes of `k` as a number (zeros past its end): two keys
/// whose prefixes differ are in the order of their prefixes; equal
/// prefixes decide nothing.
fn prefix(k: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = k.len().min(16);
    b[..n].copy_from_slice(&k[..n]);
    u128::from_be_bytes(b)
}

/// `ops` sorted by key, one op per key: of two ops on one key the later
/// wins. Runs while readers that need the store wait (`Staging`), so it sorts pairs
/// of (key prefix, position) rather than the ops: most comparisons are then
/// of two numbers in one array, not of two keys behind two pointers, and
/// the elements moved are 32 bytes, not an op. The full keys are compared
/// only when the prefixes are equal, and the position breaks ties between
/// ops on one key (so an unstable sort keeps their order).
fn in_key_order(ops: Vec<BatchOp>) -> Vec<BatchOp> {
    assert!(ops.len() <= u32::MAX as usize, "a batch of 2^32 ops");
    let mut order: Vec<(u128, u32)> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| (prefix(key(op)), i as u32))
        .collect();
    order.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| key(&ops[a.1 as usize]).cmp(key(&ops[b.1 as usize])))
            .then(a.1.cmp(&b.1))
    });
    let mut slots: Vec<Option<BatchOp>> = ops.into_iter().map(Some).collect();
    let mut out: Vec<BatchOp> = Vec::with_capacity(slots.len());
    let mut last_prefix = None;
    for (p, i) in order {
        let op = slots[i as usize].take().expect("each position once");
        match out.last_mut() {
            Some(last) if last_prefix == Some(p) && key(last) == key(&op) => *last = op,
            _ => out.push(op),
        }
        last_prefix = Some(p);
    }
    out
}

impl Staged {
    fn new(batch: Batch) -> Staged {
        Staged {
            batch: Batch {
                ops: in_key_order(batch.ops),
            },
        }
    }

    /// `Some(Some(v))`: staged put; `Some(None)`: staged delete; `None`:
    /// the batch does not touch the key.
    fn get(&self, k: &[u8]) -> Option<Option<&[u8]>> {
        let ops = &self.batch.ops;
        let i = ops.binary_search_by(|op| key(op).cmp(k)).ok()?;
        Some(match &ops[i] {
            BatchOp::Put(_, v) => Some(v),
            BatchOp::Delete(_) => None,
        })
    }

    /// The staged ops with keys in `[from, to]` (`to` None: no upper end)
    /// that begin with `prefix`.
    fn range<'a>(
        &'a self,
        prefix: &'a [u8],
        from: &[u8],
        to: Option<&'a [u8]>,
    ) -> impl Iterator<Item = &'a BatchOp> + 'a {
        let ops = &self.batch.ops;
        let first = ops.partition_point(|op| key(op) < from);
        ops[first..]
            .iter()
            .take_while(move |op| key(op).starts_with(prefix))
            .take_while(move |op| to.is_none_or(|to| key(op) <= to))
    }
}

/// A batch being put together (`InFlightStore::begin_stage`): until it is
/// published, readers that reach the store wait.
pub struct Staging<'a> {
    slot: RwLockWriteGuard<'a, Option<Arc<Staged>>>,
}

impl Staging<'_> {
    /// Sorts `batch` and makes it visible to readers; an empty batch stages
    /// nothing. Either way the readers waiting go on.
    pub fn publish(mut self, batch: Batch) {
        if !batch.is_empty() {
            *self.slot = Some(Arc::new(Staged::new(batch)));
        }
    }
}

/// A store with at most one staged batch in front of it.
pub struct InFlightStore {
    base: Arc<dyn KvStore>,
    staged: RwLock<Option<Arc<Staged>>>,
    staging_waits: AtomicU64,
    /// Called before a reader waits for a batch being put together
    /// (`on_wait`): the front end lets another thread read requests.
    wait_hook: OnceLock<SharedWaitHook>,
    /// Signalled when a staged batch is retired.
    retired: (Mutex<()>, Condvar),
}

impl InFlightStore {
    pub fn new(base: Arc<dyn KvStore>) -> InFlightStore {
        InFlightStore {
            base,
            staged: RwLock::new(None),
            staging_waits: AtomicU64::new(0),
            wait_hook: OnceLock::new(),
            retired: (Mutex::new(()), Condvar::new()),
        }
    }

    /// The staged batch. While a commit is still putting its batch together
    /// (`Staging`) this waits for it, and counts the wait.
    fn current(&self) -> Option<Arc<Staged>> {
        match self.staged.try_read() {
            Ok(g) => g.clone(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().clone(),
            Err(TryLockError::WouldBlock) => {
                self.staging_waits.fetch_add(1, Ordering::Relaxed);
                if let Some(h) = self.wait_hook.get() {
                    h();
                }
                self.staged
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            }
        }
    }

    /// Sets the hook called before a reader waits for a batch being put
    /// together (once; later calls are ignored).
    pub fn on_wait(&self, hook: SharedWaitHook) {
        let _ = self.wait_hook.set(hook);
    }

    /// Makes `batch` visible to readers. The caller holds the lock that
    /// orders this batch after every change it carries (the state lock) and
    /// must call `apply_staged` next.
    pub fn stage(&self, batch: Batch) {
        self.begin_stage().publish(batch);
    }

    /// Closes the way to the store for readers until the returned
    /// `Staging` is published: a reader that reaches the store meanwhile
    /// waits. The caller holds the lock that orders the batch after every
    /// change it carries (the state lock), may let go of it once this
    /// returns, and finishes the batch (the part of it no cache holds any
    /// more) before it publishes. So the work of sorting and encoding moves
    /// out of the state lock, and only the readers that need the store
    /// wait for it (counted in `staging_waits`).
    pub fn begin_stage(&self) -> Staging<'_> {
        let g = self.staged.write().unwrap_or_else(|p| p.into_inner());
        assert!(g.is_none(), "a batch staged while another is in flight");
        Staging { slot: g }
    }

    /// Reads `key` from the store without the staged batch, and without
    /// waiting for one being put together: only for a key the caller knows
    /// the running commit's batch does not touch (a name outside
    /// `DCache::committing_of`), so the store's value is the newest.
    pub fn get_untouched(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.base.get(key)
    }

    /// The store without the staged batch, for keys no staged batch touches
    /// (a freed inode's, read by the commit that deletes them).
    pub fn base(&self) -> &dyn KvStore {
        &*self.base
    }

    /// How many store reads waited for a batch being put together.
    pub fn staging_waits(&self) -> u64 {
        self.staging_waits.load(Ordering::Relaxed)
    }

    /// Writes the staged batch to the store and retires it, also when the
    /// store fails (the engine then stops and answers nothing more).
    /// `failed` runs before a batch the store refused is retired: the
    /// engine stops there, so that requests from then on answer an error
    /// instead of reading the store without the batch as if it had never
    /// been (the names a commit writes are in no cache until it hands them
    /// back). A request already past the lock may still read either.
    pub fn apply_staged(&self, failed: impl FnOnce(&StoreError)) -> Result<(), StoreError> {
        let Some(staged) = self.current() else {
            return Ok(());
        };
        // A store that panics is a store that failed: the batch is retired
        // all the same, so writers waiting for it go on (to the engine's
        // stop, not to a wait that never ends).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.base.apply(&staged.batch)
        }))
        .unwrap_or_else(|_| Err(StoreError::Engine("the store's write panicked".into())));
        if let Err(e) = &r {
            failed(e);
        }
        *self.staged.write().unwrap_or_else(|p| p.into_inner()) = None;
        let _g = self.retired.0.lock().unwrap_or_else(|p| p.into_inner());
        self.retired.1.notify_all();
        r
    }

    /// Waits until no staged batch is being written; true if it waited.
    pub fn wait_applied(&self) -> bool {
        if self.current().is_none() {
            return false;
        }
        let (m, cv) = &self.retired;
        let mut g = m.lock().unwrap_or_else(|p| p.into_inner());
        // `apply_staged` retires the batch before it takes `m` to notify.
        while self.current().is_some() {
            g = cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        true
    }

    /// Ops of the staged batch (0 when none is in flight).
    pub fn staged_len(&self) -> usize {
        self.current().map_or(0, |s| s.batch.len())
    }
}

impl KvStore for InFlightStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(s) = self.current() {
            if let Some(v) = s.get(key) {
                return Ok(v.map(<[u8]>::to_vec));
            }
        }
        self.base.get(key)
    }

    fn scan(&self, prefix: &[u8], start: &[u8], limit: usize) -> Result<Vec<KvPair>, StoreError> {
        let Some(s) = self.current() else {
            return self.base.scan(prefix, start, limit);
        };
        let mut out: Vec<KvPair> = Vec::new();
        let mut from = if start > prefix {
            start.to_vec()
        } else {
            prefix.to_vec()
        };
        loop {
            let page = self.base.scan(prefix, &from, limit.max(1))?;
            let full = page.len() >= limit.max(1);
            // A full page covers the keys up to its last; staged keys past
            // it wait for the next page, so the merge stays in key order.
            let upto = if full {
                page.last().map(|(k, _)| k.clone())
            } else {
                None
            };
            {
                let mut staged = s.range(prefix, &from, upto.as_deref()).peekable();
                let mut base = page.into_iter().peekable();
                loop {
                    let take_staged = match (base.peek(), staged.peek()) {
                        (None, None) => break,
                        (Some(_), None) => false,
                        (None, Some(_)) => true,
                        (Some((bk, _)), Some(op)) => key(op) <= bk.as_slice(),
                    };
                    if take_staged {
                        let op = staged.next().expect("peeked");
                        if base.peek().is_some_and(|(bk, _)| bk.as_slice() == key(op)) {
                            base.next();
                        }
                        if let BatchOp::Put(k, v) = op {
                            out.push((k.clone(), v.clone()));
                        }
                    } else {
                        out.push(base.next().expect("peeked"));
                    }
                }
            }
            if out.len() >= limit || !full {
                out.truncate(limit);
                return Ok(out);
            }
            // Every pair of this page was deleted by the staged batch or
            // the page was short of `limit` after the merge: read on after it.
            let mut next = upto.expect("a full page has a last key");
            next.push(0);
            from = next;
        }
    }

    fn scan_keys(
        &self,
        prefix: &[u8],
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        if self.current().is_none() {
            return self.base.scan_keys(prefix, start, limit);
        }
        // Rare (only while a commit's batch is written): merge with values.
        Ok(store::keys(self.scan(prefix, start, limit)?))
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        self.base.apply(batch)
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.base.sync()
    }

    fn reopens(&self) -> u64 {
        self.base.reopens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemStore;

    fn batch(ops: &[(&str, Option<&str>)]) -> Batch {
        let mut b = Batch::default();
        for (k, v) in ops {
            match v {
                Some(v) => b.put(k.as_bytes().to_vec(), v.as_bytes().to_vec()),
                None => b.delete(k.as_bytes().to_vec()),
            }
        }
        b
    }

    fn keys(pairs: &[KvPair]) -> Vec<String> {
        pairs
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    String::from_utf8_lossy(v)
                )
            })
            .collect()
    }

    /// A store whose writes panic.
    struct Panicking;

    impl KvStore for Panicking {
        fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn scan(&self, _: &[u8], _: &[u8], _: usize) -> Result<Vec<KvPair>, StoreError> {
            Ok(Vec::new())
        }
        fn apply(&self, _: &Batch) -> Result<(), StoreError> {
            panic!("a bug in the store");
        }
        fn sync(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn reopens(&self) -> u64 {
            0
        }
    }

    #[test]
    fn a_store_write_that_panics_fails_and_retires_its_batch() {
        let s = InFlightStore::new(Arc::new(Panicking));
        s.stage(batch(&[("a1", Some("new"))]));
        // `failed` runs while readers still see the batch (the engine stops
        // there, before a reader could find the store without it).
        let mut seen = None;
        let r = s.apply_staged(|_| seen = Some(s.get(b"a1").unwrap()));
        assert!(matches!(r, Err(StoreError::Engine(_))));
        assert_eq!(seen, Some(Some(b"new".to_vec())));
        assert_eq!(s.staged_len(), 0);
        assert!(!s.wait_applied(), "a writer would wait for a batch gone");
        // The next batch can be staged (the engine stops first in practice).
        s.stage(batch(&[("a2", None)]));
        assert_eq!(s.staged_len(), 1);
    }

    #[test]
    fn a_reader_waits_for_a_batch_being_put_together_and_sees_it() {
        let (_base, s) = setup();
        let s = Arc::new(s);
        let staging = s.begin_stage();
        let reader = {
            let s = s.clone();
            std::thread::spawn(move || (s.get(b"a1").unwrap(), s.scan(b"a", b"a", 100).unwrap()))
        };
        // The reader found the way to the store closed and waits.
        while s.staging_waits() == 0 {
            std::thread::yield_now();
        }
        assert!(!reader.is_finished());
        let mut b = batch(&[("a1", Some("new"))]);
        b.delete(b"a2".to_vec());
        staging.publish(b);
        let (got, scanned) = reader.join().unwrap();
        assert_eq!(got, Some(b"new".to_vec()));
        let k = keys(&scanned);
        assert_eq!(k[0], "a1=new");
        assert_eq!(k[1], "a3=old");
        assert_eq!(k.len(), 8);
        assert_eq!(s.staged_len(), 2);
        // An empty batch stages nothing and lets readers go on.
        s.apply_staged(|_| ()).unwrap();
        s.begin_stage().publish(Batch::default());
        assert_eq!(s.staged_len(), 0);
        assert!(!s.wait_applied());
    }

    #[test]
    fn a_reader_about_to_wait_for_a_batch_calls_the_wait_hook_first() {
        let (_base, s) = setup();
        let s = Arc::new(s);
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        s.on_wait(Arc::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        }));
        // No batch being put together: reads do not call it.
        assert_eq!(s.get(b"a1").unwrap(), Some(b"old".to_vec()));
        assert_eq!(calls.load(Ordering::Relaxed), 0);
        let staging = s.begin_stage();
        let reader = {
            let s = s.clone();
            std::thread::spawn(move || s.get(b"a1").unwrap())
        };
        // The hook runs just after the wait is counted, before the reader
        // blocks; a reader that never calls it fails here, not hangs.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while calls.load(Ordering::Relaxed) == 0 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(calls.load(Ordering::Relaxed), 1, "the hook was not called");
        assert_eq!(s.staging_waits(), 1);
        // The batch is still being put together: the reader still waits.
        assert!(!reader.is_finished());
        staging.publish(batch(&[("a1", Some("new"))]));
        assert_eq!(reader.join().unwrap(), Some(b"new".to_vec()));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    /// A store holding a1..a9 = "old" and b1.
    fn setup() -> (Arc<MemStore>, InFlightStore) {
        let base = Arc::new(MemStore::new());
        let mut b = Batch::default();
        for i in 1..=9 {
            b.put(format!("a{i}").into_bytes(), b"old".to_vec());
        }
        b.put(b"b1".to_vec(), b"old".to_vec());
        base.apply(&b).unwrap();
        let s = InFlightStore::new(base.clone());
        (base, s)
    }

    #[test]
    fn staged_ops_shadow_the_store_until_applied() {
        let (base, s) = setup();
        s.stage(batch(&[
            ("a2", None),
            ("a3", Some("new")),
            ("a0", Some("new")),
            ("a3", Some("newer")),
        ]));
        assert_eq!(s.get(b"a2").unwrap(), None, "a staged delete reads missing");
        assert_eq!(
            s.get(b"a3").unwrap(),
            Some(b"newer".to_vec()),
            "last write wins"
        );
        assert_eq!(s.get(b"a4").unwrap(), Some(b"old".to_vec()));
        assert_eq!(base.get(b"a0").unwrap(), None, "not applied yet");
        assert_eq!(s.staged_len(), 3);
        s.apply_staged(|_| {}).unwrap();
        assert_eq!(s.staged_len(), 0);
        assert_eq!(base.get(b"a3").unwrap(), Some(b"newer".to_vec()));
        assert_eq!(base.get(b"a2").unwrap(), None);
        assert_eq!(s.get(b"a0").unwrap(), Some(b"new".to_vec()));
    }

    #[test]
    fn scans_merge_in_key_order_across_pages() {
        let (_base, s) = setup();
        // Deletes a1..a4, rewrites a6, adds a55 and a99 and c1 (outside "a").
        s.stage(batch(&[
            ("a1", None),
            ("a2", None),
            ("a3", None),
            ("a4", None),
            ("a6", Some("new")),
            ("a55", Some("new")),
            ("a99", Some("new")),
            ("c1", Some("new")),
        ]));
        let want = [
            "a5=old", "a55=new", "a6=new", "a7=old", "a8=old", "a9=old", "a99=new",
        ];
        assert_eq!(keys(&s.scan(b"a", b"", 100).unwrap()), want);
        // Paged with every limit, the pages join up to the same sequence.
        for limit in 1..=8 {
            let mut all = Vec::new();
            let mut from = Vec::new();
            loop {
                let page = s.scan(b"a", &from, limit).unwrap();
                assert!(page.len() <= limit);
                all.extend(keys(&page));
                if page.len() < limit {
                    break;
                }
                from = page.last().unwrap().0.clone();
                from.push(0);
            }
            assert_eq!(all, want, "limit {limit}");
        }
        assert_eq!(keys(&s.scan(b"b", b"", 10).unwrap()), ["b1=old"]);
        assert_eq!(keys(&s.scan(b"c", b"", 10).unwrap()), ["c1=new"]);
    }

    /// The order and the ops kept are those of a stable sort by key that
    /// keeps the last op of each key, for keys that share their first 16
    /// bytes, end in zeros, or are prefixes of each other.
    #[test]
    fn a_batch_is_put_in_key_order_with_the_last_op_of_each_key() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..50 {
            let mut ops = Vec::new();
            for i in 0..(round * 40 + 1) {
                let mut k = vec![b'D'; 16];
                k[15] = next(3) as u8;
                k.truncate(next(20) as usize);
                for _ in 0..next(3) {
                    k.push(next(2) as u8);
                }
                let v = format!("{i}").into_bytes();
                ops.push(if next(4) == 0 {
                    BatchOp::Delete(k)
                } else {
                    BatchOp::Put(k, v)
                });
            }
            let mut want = ops.clone();
            want.sort_by(|a, b| key(a).cmp(key(b)));
            let mut dedup: Vec<BatchOp> = Vec::new();
            for op in want {
                match dedup.last_mut() {
                    Some(last) if key(last) == key(&op) => *last = op,
                    _ => dedup.push(op),
                }
            }
            assert_eq!(in_key_order(ops), dedup, "round {round}");
        }
    }

    #[test]
    #[should_panic(expected = "another is in flight")]
    fn one_batch_in_flight_at_a_time() {
        let (_base, s) = setup();
        s.stage(batch(&[("a1", None)]));
        s.stage(batch(&[("a2", None)]));
    }
}
