//! Delegated directories (docs/design.md §15, "Delegated directories").
//!
//! A directory that one mount alone is changing is delegated to it: the
//! key `Y dir` names the mount's session and is attached to its lease.
//! While it holds the delegation the mount keeps an image of the keys the
//! delegation owns — the directory's entries (all of them: a directory is
//! delegated only when its entries fit the bound), its times key, and
//! every key of the inodes created in it since the image last went to the
//! engine — and an operation whose reads and writes stay within those
//! keys is applied to the image, not sent to the engine. The image goes to
//! the engine in one commit conditioned on the delegation (its changes
//! since the last one, every `delegation_flush`, at fsync, when it holds
//! `FLUSH_KEYS` changes, and when the delegation ends): a file created
//! and removed between two flushes never reaches the engine.
//!
//! A file created in the directory since the last batch and closed with
//! data in the buffer keeps it there (`defer_close`); the delegation
//! thread uploads the data of all such files at once before their
//! directory's batch, which then names the objects (`flush_deferred`).
//!
//! The removal of the last name of a file that existed before is applied
//! to the image too: its free goes with the batch, conditioned on the
//! file's record as read (a `Guard`), and is worked out again if another
//! mount wrote through a handle meanwhile. Any other operation that also
//! touches keys the delegation does not own (the delete queue of an open
//! file, an upload) is committed to the engine under the image's lock,
//! with the image's pending changes in the same commit, its conditions on
//! owned keys checked against the image and the delegation's key as a
//! condition.
//!
//! Every other mount reads `Y dir` in the same request as the entries it
//! looks up (and before a listing), and every commit of theirs that
//! touches a directory's entries or times is conditioned on `Y dir`
//! absent; one that finds it asks the holder to give it back (`R dir`),
//! and waits for `Y dir` to go. The holder's thread looks for recalls
//! every `delegation_poll`, commits the image with the delegation's end
//! and leaves the directory alone for `delegation_hold_off` (doubling
//! while it keeps being recalled). A holder that dies takes its
//! delegations with its lease; what its images had not committed is lost,
//! as a local filesystem loses what its journal had not committed.
//!
//! Locks: the table is a leaf taken after an image's lock, never before.

use crate::fs::{lock, SharedFs, Tx};
use crate::schema::{self, Key};
use crate::stats::Stats;
use churnfs_kv::{Cond, Entry, Op, Rev, Txn};
use churnfs_vfs::{EngineError, Ino, Result, StoreError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Versions of changes applied to images: above any engine revision, so
/// that a condition read from an image never matches the engine.
pub(crate) const LOCAL_REV_BASE: Rev = 1 << 62;
/// Most writes an image's pending changes take (a run of removed entries
/// is one, `Image::walk`): a flush is one commit, within the engine's 128
/// writes. Past the bound go one operation's writes (the operation that
/// reaches it commits the batch), the delegation's own keys and the
/// session's slot.
pub const FLUSH_KEYS: usize = 112;
/// Most guards of one image: each is a condition, and the engine's 128
/// conditions also hold the delegation's, the session's and a passing
/// operation's own. A removed file that existed before is one guard.
pub const GUARDS_MAX: usize = 96;
/// Pending changes at which the delegation thread is asked to commit an
/// image now (with the data of the files closed in it, which an
/// operation's own flush at `FLUSH_KEYS` leaves behind).
const FLUSH_SOON: usize = 48;
/// How many times a batch is worked out again after a guarded file
/// changed under it.
const GUARD_RETRIES: usize = 8;
/// Most directories delegated to one mount at once.
pub const HELD_MAX: usize = 1024;
/// Most files closed in delegated directories whose data waits for the
/// next batch (past it, a close uploads and commits at once).
pub const DEFERRED_MAX: usize = 4096;
/// Most directories remembered as recently recalled.
const HOLD_OFF_MAX: usize = 4096;
/// The longest a recalled directory is left alone.
const HOLD_OFF_LONGEST: Duration = Duration::from_secs(64);

/// Is one of `conds` (bound for the engine) a version read from an image?
/// On a key the image no longer owns (a batch went to the engine since it
/// was read) it never matches the engine: the operation reads again rather
/// than send a commit bound to fail.
fn read_from_image(conds: &[Cond]) -> bool {
    conds
        .iter()
        .any(|c| matches!(c, Cond::Rev(_, r) if *r >= LOCAL_REV_BASE))
}

/// One write of an image's pending changes (`Image::walk`).
enum Write<'a> {
    /// The key's change as the slot has it.
    One(&'a [u8], &'a Slot),
    /// A removed entry.
    Delete(&'a [u8]),
    /// Removed entries, first to last, and no other key between them.
    Range(&'a [u8], &'a [u8]),
}

/// One owned key in an image.
struct Slot {
    /// None: deleted here (and present in the engine until the next flush).
    value: Option<Vec<u8>>,
    rev: Rev,
    /// Changed here since the image last went to the engine.
    dirty: bool,
    /// The engine has the key (as of the last flush).
    in_engine: bool,
}

/// A file that existed before its directory was delegated, unlinked here
/// (its last link) and freed with the next batch: the batch is
/// conditioned on the file's record as read; if another mount changed the
/// record meanwhile (a write through a handle it held open), the free is
/// worked out again from the record as it is (`recheck_guards`).
struct Guard {
    ino: Ino,
    rev: Rev,
    /// The delete-queue item that frees its data, if it has any.
    queue: Option<Vec<u8>>,
}

struct Image {
    /// False once the delegation ended: whoever waited on the lock reads
    /// from the engine again.
    live: bool,
    keys: BTreeMap<Vec<u8>, Slot>,
    /// How many of `keys` the mount's total (`Delegations::keys`) counts.
    counted: usize,
    guards: Vec<Guard>,
    dirty: usize,
    /// The directory's entry keys, `[start, end)`.
    entries: (Vec<u8>, Vec<u8>),
    /// Writes fewer than `dirty` that the pending changes take, as last
    /// counted (`count_writes`): removed entries that are neighbours go
    /// as one range deletion. Between counts `dirty - saved` is an upper
    /// bound: a put may split a range (so it counts nothing saved until
    /// the next count), and any other change only joins ranges or drops
    /// writes.
    saved: usize,
    dirty_since: Option<Instant>,
    /// When the upload of the oldest object a pending change names
    /// started: the batch reaches the engine within the volume's upload
    /// window of it, or not at all (gc's grace rests on it).
    uploaded_at: Option<Instant>,
    /// Past `FLUSH_SOON`: due at the delegation thread's next round.
    urgent: bool,
    /// A file closed here since the last batch left its data for it.
    deferring: bool,
    used: Instant,
}

pub(crate) struct Deleg {
    dir: Ino,
    /// The session that holds it, and the version of `Y dir`.
    sid: u64,
    y_rev: Rev,
    img: Mutex<Image>,
}

/// Inodes by the delegated directory whose image they belong to, indexed
/// both ways: a batch of one directory works on that directory's inodes
/// alone, so its cost does not grow with what the mount's other
/// delegations hold.
#[derive(Default)]
struct ByDir {
    dir_of: HashMap<Ino, Ino>,
    of_dir: HashMap<Ino, HashSet<Ino>>,
}

impl ByDir {
    fn get(&self, ino: &Ino) -> Option<&Ino> {
        self.dir_of.get(ino)
    }

    fn contains_key(&self, ino: &Ino) -> bool {
        self.dir_of.contains_key(ino)
    }

    fn len(&self) -> usize {
        self.dir_of.len()
    }

    fn is_empty(&self) -> bool {
        self.dir_of.is_empty()
    }

    fn insert(&mut self, ino: Ino, dir: Ino) {
        if let Some(old) = self.dir_of.insert(ino, dir) {
            self.unindex(ino, old);
        }
        self.of_dir.entry(dir).or_default().insert(ino);
    }

    fn remove(&mut self, ino: &Ino) -> Option<Ino> {
        let dir = self.dir_of.remove(ino)?;
        self.unindex(*ino, dir);
        Some(dir)
    }

    fn unindex(&mut self, ino: Ino, dir: Ino) {
        if let Some(set) = self.of_dir.get_mut(&dir) {
            set.remove(&ino);
            if set.is_empty() {
                self.of_dir.remove(&dir);
            }
        }
    }

    /// The inodes of `dir`.
    fn in_dir(&self, dir: Ino) -> impl Iterator<Item = Ino> + '_ {
        self.of_dir.get(&dir).into_iter().flatten().copied()
    }

    fn any_in(&self, dir: Ino) -> bool {
        self.of_dir.contains_key(&dir)
    }

    /// Keeps of `dir`'s inodes those `keep` picks.
    fn retain_in(&mut self, dir: Ino, keep: impl Fn(Ino) -> bool) {
        let Some(set) = self.of_dir.get_mut(&dir) else {
            return;
        };
        set.retain(|i| {
            keep(*i) || {
                self.dir_of.remove(i);
                false
            }
        });
        if set.is_empty() {
            self.of_dir.remove(&dir);
        }
    }

    /// Drops every inode of `dir`.
    fn forget_dir(&mut self, dir: Ino) {
        for i in self.of_dir.remove(&dir).into_iter().flatten() {
            self.dir_of.remove(&i);
        }
    }

    fn iter(&self) -> impl Iterator<Item = (Ino, Ino)> + '_ {
        self.dir_of.iter().map(|(i, d)| (*i, *d))
    }
}

#[derive(Default)]
struct Table {
    held: HashMap<Ino, Arc<Deleg>>,
    /// Inodes created in a delegated directory since its image last went
    /// to the engine: their keys are the image's.
    fresh: ByDir,
    /// Files freed by a pending batch (`Guard`): their record and xattrs
    /// are read from the image (gone) until the batch is committed.
    guarded: ByDir,
    /// Files created in a delegated directory and closed with their data
    /// still in this mount's buffer (at most `DEFERRED_MAX`), by
    /// directory: the data goes to the object store and into the image
    /// before the directory's next batch, and before the delegation ends.
    deferred: ByDir,
    /// Directories recently recalled: until when they are left alone, and
    /// for how long the next time.
    hold_off: HashMap<Ino, (Instant, Duration)>,
}

/// This mount's delegations.
#[derive(Default)]
pub(crate) struct Delegations {
    table: Mutex<Table>,
    held: AtomicUsize,
    keys: AtomicUsize,
    local_rev: AtomicU64,
    /// Recalls the watch saw (at most `HELD_MAX`), for the delegation
    /// thread, which it wakes.
    asked: Mutex<Vec<Ino>>,
    wake: std::sync::Condvar,
    /// When the thread last listed the recalls itself.
    polled: Mutex<Option<Instant>>,
}

impl Delegations {
    /// The watch saw another mount ask for `dir`.
    pub(crate) fn recalled(&self, dir: Ino) {
        if self.held.load(Relaxed) == 0 {
            return;
        }
        let mut a = lock(&self.asked);
        if a.len() < HELD_MAX && !a.contains(&dir) {
            a.push(dir);
        }
        drop(a);
        self.wake.notify_all();
    }

    /// Waits up to `d`, or until a recall arrives.
    fn nap(&self, d: Duration) {
        let a = lock(&self.asked);
        if a.is_empty() {
            let _ = self.wake.wait_timeout(a, d);
        }
    }
}

/// Why a delegation ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
    /// Another mount asked for the directory.
    Recalled,
    /// This mount needs the directory in the engine (a move of it, its
    /// removal, an operation on two delegated directories), or room.
    Here,
    /// The directory outgrew the bound.
    TooBig,
    /// Unmount.
    Unmount,
}

fn held_dir_of(keys: &schema::Keys, k: &[u8]) -> Option<Ino> {
    match keys.decode(k)? {
        Key::Dentry { parent, .. } => Some(parent),
        Key::DirTimes(d) => Some(d),
        _ => None,
    }
}

/// The inode a key belongs to, for the keys an inode created in a
/// delegated directory owns (record, times, xattrs, chunks, a session's
/// open record).
fn inode_in(key: &Key) -> Option<Ino> {
    match *key {
        Key::Inode(i) | Key::DirTimes(i) | Key::Xattr(i) | Key::Chunk(i, _) | Key::Open(_, i) => {
            Some(i)
        }
        _ => None,
    }
}

fn owned_inode(keys: &schema::Keys, k: &[u8]) -> Option<Ino> {
    inode_in(&keys.decode(k)?)
}

/// As `owned_inode`, without open records.
fn inode_of(keys: &schema::Keys, k: &[u8]) -> Option<Ino> {
    match keys.decode(k)? {
        Key::Open(..) => None,
        key => inode_in(&key),
    }
}

fn cond_key(c: &Cond) -> &[u8] {
    match c {
        Cond::Rev(k, _) | Cond::Exists(k) | Cond::Absent(k) => k,
        Cond::Empty(a, _) => a,
    }
}

impl Image {
    /// A live image of the directory whose entry keys are `entries`,
    /// holding `keys` as the engine has them.
    fn new(entries: (Vec<u8>, Vec<u8>), keys: BTreeMap<Vec<u8>, Slot>) -> Image {
        Image {
            live: true,
            counted: keys.len(),
            keys,
            guards: Vec::new(),
            dirty: 0,
            entries,
            saved: 0,
            dirty_since: None,
            uploaded_at: None,
            urgent: false,
            deferring: false,
            used: Instant::now(),
        }
    }

    fn get(&self, k: &[u8]) -> Option<&Slot> {
        self.keys.get(k).filter(|s| s.value.is_some())
    }

    /// Does `c` hold in the image?
    fn holds(&self, c: &Cond) -> bool {
        match c {
            Cond::Rev(k, r) => self.get(k).is_some_and(|s| s.rev == *r),
            Cond::Exists(k) => self.get(k).is_some(),
            Cond::Absent(k) => self.get(k).is_none(),
            Cond::Empty(a, b) => !self
                .keys
                .range(a.clone()..b.clone())
                .any(|(_, s)| s.value.is_some()),
        }
    }

    /// Applies `op` at `rev`: a change pending for the engine (`dirty`), or
    /// one the engine has just committed.
    fn apply(&mut self, op: &Op, rev: Rev, dirty: bool) {
        let now = Instant::now();
        match op {
            Op::DeleteRange { start, end } => {
                let gone: Vec<Vec<u8>> = self
                    .keys
                    .range(start.clone()..end.clone())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in gone {
                    self.apply(&Op::Delete(k), rev, dirty);
                }
                return;
            }
            Op::Put { key, value, .. } => match self.keys.get_mut(key.as_slice()) {
                Some(s) => {
                    if dirty && !s.dirty {
                        self.dirty += 1;
                    }
                    self.saved = 0;
                    s.value = Some(value.clone());
                    s.rev = rev;
                    s.dirty |= dirty;
                    if !dirty {
                        s.in_engine = true;
                    }
                }
                None => {
                    if dirty {
                        self.dirty += 1;
                    }
                    self.saved = 0;
                    self.keys.insert(
                        key.clone(),
                        Slot {
                            value: Some(value.clone()),
                            rev,
                            dirty,
                            in_engine: !dirty,
                        },
                    );
                }
            },
            Op::Delete(key) => {
                let Some(s) = self.keys.get_mut(key.as_slice()) else {
                    return;
                };
                if dirty && s.in_engine {
                    if !s.dirty {
                        self.dirty += 1;
                    }
                    s.value = None;
                    s.rev = rev;
                    s.dirty = true;
                } else {
                    if s.dirty {
                        self.dirty -= 1;
                    }
                    self.keys.remove(key.as_slice());
                }
            }
        }
        if self.dirty > 0 && self.dirty_since.is_none() {
            self.dirty_since = Some(now);
        }
        if self.dirty == 0 {
            self.dirty_since = None;
        }
    }

    /// Applies a change to a key the image does not own (a guarded
    /// file's record, xattrs, delete-queue item): the engine has it, so a
    /// delete stays as a pending deletion.
    fn apply_foreign(&mut self, op: &Op, rev: Rev) {
        if let Op::Delete(key) = op {
            if !self.keys.contains_key(key.as_slice()) {
                self.keys.insert(
                    key.clone(),
                    Slot {
                        value: Some(Vec::new()),
                        rev,
                        dirty: false,
                        in_engine: true,
                    },
                );
            }
        }
        self.apply(op, rev, true);
    }

    /// Drops a pending change to a key the image does not own.
    fn forget(&mut self, key: &[u8]) {
        if let Some(s) = self.keys.remove(key) {
            if s.dirty {
                self.dirty -= 1;
            }
        }
        if self.dirty == 0 {
            self.dirty_since = None;
        }
    }

    /// The writes the pending changes take, at most (exact just after
    /// `count_writes`).
    fn writes(&self) -> usize {
        self.dirty.saturating_sub(self.saved)
    }

    /// Would `extra` more writes, and as many conditions, take the next
    /// commit past `FLUSH_KEYS` writes or `GUARDS_MAX` guards? The writes
    /// are counted again first when their bound says so.
    fn over(&mut self, extra: usize) -> bool {
        let past =
            |i: &Image| i.writes() + extra > FLUSH_KEYS || i.guards.len() + extra > GUARDS_MAX;
        if past(self) {
            self.count_writes();
        }
        past(self)
    }

    fn count_writes(&mut self) {
        let mut n = 0;
        self.walk(&[], |_| n += 1);
        debug_assert!(n <= self.dirty, "{n} writes from {} changes", self.dirty);
        self.saved = self.dirty - n.min(self.dirty);
    }

    /// The pending changes in key order, as writes: a run of two or more
    /// entries removed here with no other key of the image between them
    /// goes as one `Write::Range`. The image holds every entry the engine
    /// has (they are loaded whole at the delegation's start and nobody
    /// else changes them while it lasts), so such a range deletes exactly
    /// the run in the engine. `others` are the writes the same commit
    /// carries besides: no range covers one of their keys.
    fn walk<'a>(&'a self, others: &[Op], mut f: impl FnMut(Write<'a>)) {
        let (lo, hi) = (&self.entries.0, &self.entries.1);
        // Another write of the commit strictly between `a` and `b`.
        let other_between = |a: &[u8], b: &[u8]| {
            others.iter().any(|o| {
                let k = o.key();
                a < k && k < b
            })
        };
        type Run<'a> = Option<(&'a [u8], &'a [u8], usize)>;
        fn end_run<'a>(run: &mut Run<'a>, f: &mut impl FnMut(Write<'a>)) {
            match run.take() {
                Some((a, _, 1)) => f(Write::Delete(a)),
                Some((a, b, _)) => f(Write::Range(a, b)),
                None => {}
            }
        }
        // First key, last key, length.
        let mut run: Run<'a> = None;
        for (k, s) in self.keys.range(lo.clone()..hi.clone()) {
            let removed = s.dirty && s.value.is_none();
            let free = removed && !others.iter().any(|o| o.key() == k.as_slice());
            let joins = free && run.is_some_and(|(_, last, _)| !other_between(last, k));
            if joins {
                if let Some(r) = run.as_mut() {
                    r.1 = k;
                    r.2 += 1;
                }
                continue;
            }
            end_run(&mut run, &mut f);
            if free {
                run = Some((k, k, 1));
            } else if s.dirty {
                f(Write::One(k, s));
            }
        }
        end_run(&mut run, &mut f);
        for (k, s) in self
            .keys
            .range(..lo.clone())
            .chain(self.keys.range(hi.clone()..))
            .filter(|(_, s)| s.dirty)
        {
            f(Write::One(k, s));
        }
    }

    /// The conditions a batch carries for its guarded files.
    fn guard_conds(&self, keys: &schema::Keys) -> Vec<Cond> {
        self.guards
            .iter()
            .map(|g| Cond::Rev(keys.inode(g.ino), g.rev))
            .collect()
    }

    /// The pending changes, as the engine's writes (`walk`), in a commit
    /// that also carries `others`.
    fn pending(&self, others: &[Op]) -> Vec<Op> {
        let mut out = Vec::with_capacity(self.dirty.saturating_sub(self.saved));
        self.walk(others, |w| {
            out.push(match w {
                Write::One(k, s) => match &s.value {
                    Some(v) => Op::Put {
                        key: k.to_vec(),
                        value: v.clone(),
                        lease: None,
                    },
                    None => Op::Delete(k.to_vec()),
                },
                Write::Delete(k) => Op::Delete(k.to_vec()),
                Write::Range(a, b) => Op::DeleteRange {
                    start: a.to_vec(),
                    end: churnfs_kv::key_after(b),
                },
            })
        });
        out
    }

    /// The pending changes were committed at `rev`.
    fn committed(&mut self, rev: Rev) {
        self.keys.retain(|_, s| {
            if s.dirty {
                s.dirty = false;
                s.rev = rev;
                s.in_engine = s.value.is_some();
            }
            s.value.is_some()
        });
        self.dirty = 0;
        self.saved = 0;
        self.dirty_since = None;
        self.uploaded_at = None;
        self.urgent = false;
        self.deferring = false;
        self.guards.clear();
    }
}

impl Delegations {
    fn table(&self) -> MutexGuard<'_, Table> {
        lock(&self.table)
    }

    fn next_rev(&self) -> Rev {
        LOCAL_REV_BASE + self.local_rev.fetch_add(1, Relaxed)
    }

    fn held(&self, d: Ino) -> Option<Arc<Deleg>> {
        if self.held.load(Relaxed) == 0 {
            return None;
        }
        self.table().held.get(&d).cloned()
    }

    /// The delegation owning key `k`, if this mount holds one.
    /// Does `d` own `k`? (Asked again once its image is locked: the
    /// owner can change only under that lock.)
    fn owns(&self, keys: &schema::Keys, k: &[u8], d: &Deleg) -> bool {
        self.owner(keys, k).is_some_and(|o| std::ptr::eq(&*o, d))
    }

    fn owner(&self, keys: &schema::Keys, k: &[u8]) -> Option<Arc<Deleg>> {
        if self.held.load(Relaxed) == 0 {
            return None;
        }
        // One decode: this runs for every key of every operation.
        let key = keys.decode(k)?;
        let t = self.table();
        if let Key::Dentry { parent: d, .. } | Key::DirTimes(d) = key {
            if let Some(h) = t.held.get(&d) {
                return Some(h.clone());
            }
        }
        let i = inode_in(&key)?;
        if let Some(d) = t.fresh.get(&i) {
            return t.held.get(d).cloned();
        }
        match key {
            Key::Inode(_) | Key::Xattr(_) => t.held.get(t.guarded.get(&i)?).cloned(),
            _ => None,
        }
    }
}

impl SharedFs {
    fn deleg_stats(&self) {
        Stats::set(
            &self.stats.delegations_held,
            self.delegs.held.load(Relaxed) as u64,
        );
        Stats::set(
            &self.stats.delegation_keys,
            self.delegs.keys.load(Relaxed) as u64,
        );
    }

    /// Is the session's lease known alive for long enough to answer from
    /// an image? (A mount whose renewals fail stops doing so well before
    /// the engine could expire its delegations.)
    fn lease_fresh(&self, sid: u64) -> bool {
        match self.session.current() {
            Ok((now, _)) if now == sid => {
                !self.cfg.background || self.session.renewed_within(self.cfg.session_ttl / 2)
            }
            _ => false,
        }
    }

    // ---- reads --------------------------------------------------------------

    /// `get_many` with the keys a delegation of this mount owns read from
    /// its image, and the delegations of the directories whose entries
    /// are read checked in the same request (recalled when another mount
    /// holds one).
    pub(crate) fn deleg_get_many(&self, keys: &[&[u8]]) -> Result<(Vec<Option<Entry>>, Rev)> {
        'again: loop {
            let mut owners: Vec<Option<Arc<Deleg>>> = Vec::with_capacity(keys.len());
            let mut ask: Vec<Vec<u8>> = Vec::new();
            let mut dirs: Vec<Ino> = Vec::new();
            for k in keys {
                let o = self.delegs.owner(&self.keys, k);
                if o.is_none() {
                    if let Some(Key::Dentry { parent, .. }) = self.keys.decode(k) {
                        if !dirs.contains(&parent) {
                            dirs.push(parent);
                        }
                    }
                    ask.push(k.to_vec());
                }
                owners.push(o);
            }
            let nask = ask.len();
            ask.extend(dirs.iter().map(|d| self.keys.deleg(*d)));
            let (got, rev) = if ask.is_empty() {
                (Vec::new(), 0)
            } else {
                let refs: Vec<&[u8]> = ask.iter().map(Vec::as_slice).collect();
                self.kv_get_many(&refs)?
            };
            for (n, d) in dirs.iter().enumerate() {
                if let Some(e) = &got[nask + n] {
                    let holder = schema::decode_u64(&e.value, "delegation")?;
                    if self.blocked_by(*d, holder)? {
                        continue 'again;
                    }
                }
            }
            let mut out = Vec::with_capacity(keys.len());
            let mut from_engine = got.into_iter();
            for (k, o) in keys.iter().zip(owners) {
                match o {
                    None => out.push(from_engine.next().flatten()),
                    Some(d) => {
                        let img = lock(&d.img);
                        // A batch committed since the owner was found
                        // hands the key to the engine: read again.
                        if !img.live || !self.delegs.owns(&self.keys, k, &d) {
                            continue 'again;
                        }
                        out.push(img.get(k).map(|s| Entry {
                            key: k.to_vec(),
                            value: s.value.clone().unwrap_or_default(),
                            rev: s.rev,
                        }));
                    }
                }
            }
            return Ok((out, rev));
        }
    }

    /// `scan` with what delegations own read from their images: a
    /// delegated directory's entries, the records of an inode created in
    /// one, a delegated directory's times. Before the entries of a
    /// directory another mount holds are read, the delegation is recalled.
    pub(crate) fn deleg_scan(
        &self,
        range: &(Vec<u8>, Vec<u8>),
        limit: usize,
    ) -> Result<Vec<Entry>> {
        loop {
            if let Some(dir) = self.keys.entries_range_dir(&range.0) {
                if let Some(d) = self.delegs.held(dir) {
                    match self.image_range(&d, range, limit) {
                        Some(v) => return Ok(v),
                        None => continue,
                    }
                }
                let (got, _) = self.kv_get_many(&[&self.keys.deleg(dir)])?;
                if let Some(e) = &got[0] {
                    let holder = schema::decode_u64(&e.value, "delegation")?;
                    if self.blocked_by(dir, holder)? {
                        continue;
                    }
                }
                return self.kv_scan(range, limit);
            }
            let Some(i) = inode_of(&self.keys, &range.0) else {
                return self.kv_scan(range, limit);
            };
            let d = match self.delegs.held(i) {
                Some(d) => d,
                None => match self.delegs.owner(&self.keys, &range.0) {
                    // An inode created in the delegated directory: all its
                    // keys are the image's.
                    Some(d) => match self.image_range(&d, range, limit) {
                        Some(v) => return Ok(v),
                        None => continue,
                    },
                    None => return self.kv_scan(range, limit),
                },
            };
            // The delegated directory's own record and times: the record
            // from the engine, the times from the image.
            let mut v = self.kv_scan(range, limit)?;
            let tk = self.keys.dir_times(i);
            let img = lock(&d.img);
            if !img.live {
                continue;
            }
            v.retain(|e| e.key != tk);
            if tk >= range.0 && tk < range.1 {
                if let Some(s) = img.get(&tk) {
                    v.push(Entry {
                        key: tk.clone(),
                        value: s.value.clone().unwrap_or_default(),
                        rev: s.rev,
                    });
                }
            }
            v.sort_by(|a, b| a.key.cmp(&b.key));
            v.truncate(limit);
            return Ok(v);
        }
    }

    /// Keys of `range` from an image; None when the delegation ended or
    /// a batch committed since handed the range to the engine.
    fn image_range(
        &self,
        d: &Deleg,
        range: &(Vec<u8>, Vec<u8>),
        limit: usize,
    ) -> Option<Vec<Entry>> {
        let img = lock(&d.img);
        // A directory's entries are the image's while it is live; an
        // inode's keys until a batch takes them.
        let entries = self.keys.entries_range_dir(&range.0).is_some();
        if !img.live || (!entries && !self.delegs.owns(&self.keys, &range.0, d)) {
            return None;
        }
        Some(
            img.keys
                .range(range.0.clone()..range.1.clone())
                .filter_map(|(k, s)| {
                    s.value.as_ref().map(|v| Entry {
                        key: k.clone(),
                        value: v.clone(),
                        rev: s.rev,
                    })
                })
                .take(limit)
                .collect(),
        )
    }

    /// `dir` is delegated to session `holder`: recalled when that is
    /// another mount; this mount's own delegation being set up by another
    /// thread is waited for a moment. True: read again.
    fn blocked_by(&self, dir: Ino, holder: u64) -> Result<bool> {
        if holder == self.session.id() {
            if self.delegs.held(dir).is_some() {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(1));
            return Ok(true);
        }
        self.recall(dir, holder)?;
        Ok(true)
    }

    /// Asks the mount holding `dir` (session `holder`) to give it back and
    /// waits until it has, or its session is gone.
    fn recall(&self, dir: Ino, holder: u64) -> Result<()> {
        Stats::inc(&self.stats.recalls_made);
        let started = Instant::now();
        let deadline = started + self.cfg.op_timeout;
        let (sid, lease) = self.session.current()?;
        let rk = self.keys.recall(dir);
        let mut t = Tx::default();
        t.put_leased(rk.clone(), schema::encode_u64(sid), lease);
        self.commit_one(t.txn, deadline)?;
        let yk = self.keys.deleg(dir);
        let mut pause = Duration::from_millis(1);
        loop {
            let (got, _) = self.kv_get_many(&[&yk])?;
            if got[0].is_none() {
                break;
            }
            if Instant::now() >= deadline {
                Stats::inc(&self.stats.op_timeouts);
                return Err(EngineError::Store(StoreError::Unavailable(format!(
                    "directory {dir} is delegated to session {holder}, which did not give it back"
                ))));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        // Records this mount read before the holder's last batch may be
        // older than it, and the watch may not have said so yet: the inode
        // cache starts again (recalls are rare: a directory is held again
        // only after its hold-off).
        self.icache.clear();
        let mut t = Tx::default();
        t.del(rk);
        if let Err(e) = self.commit_one(t.txn, deadline) {
            tracing::debug!("recall of {dir} left its key ({e}); it goes with the session");
        }
        Stats::add(
            &self.stats.recall_wait_us,
            started.elapsed().as_micros() as u64,
        );
        Ok(())
    }

    // ---- commits --------------------------------------------------------------------

    /// Commits a transaction: to an image when a delegation of this mount
    /// owns every key it touches, else to the engine (with a delegation's
    /// pending changes when it touches owned keys; conditioned on the
    /// delegations of the directories it changes being absent when it
    /// touches none of ours). `uploads`: when the upload of the oldest
    /// object it names started (those go to the engine within the upload
    /// window).
    pub(crate) fn route(
        &self,
        txn: Txn,
        until: Instant,
        uploads: Option<Instant>,
    ) -> Result<Option<Rev>> {
        if !self.cfg.delegation {
            return self.commit(txn, until);
        }
        let mut dirs: Vec<Ino> = Vec::new();
        let ranges = txn.conds.iter().filter_map(|c| match c {
            Cond::Empty(a, _) => self.keys.entries_range_dir(a),
            _ => None,
        });
        let keyed = txn
            .conds
            .iter()
            .map(cond_key)
            .chain(txn.ops.iter().map(Op::key))
            .filter_map(|k| held_dir_of(&self.keys, k));
        for d in ranges.chain(keyed) {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        let mut mine: Vec<Arc<Deleg>> = Vec::new();
        for k in txn
            .conds
            .iter()
            .map(cond_key)
            .chain(txn.ops.iter().map(Op::key))
        {
            if let Some(d) = self.delegs.owner(&self.keys, k) {
                if !mine.iter().any(|m| m.dir == d.dir) {
                    mine.push(d);
                }
            }
        }
        for d in &dirs {
            if let Some(h) = self.delegs.held(*d) {
                if !mine.iter().any(|m| m.dir == h.dir) {
                    mine.push(h);
                }
            }
        }
        if mine.is_empty() {
            if let Some(d) = self.wants(&txn, &dirs) {
                if let Some(h) = self.acquire(d, until)? {
                    return self.commit_held(&h, txn, until, uploads, &dirs);
                }
            }
            return self.commit_plain(txn, until, &dirs);
        }
        // The directory itself removed, or an operation across two
        // delegated directories: they end first, and it runs again.
        let removes_dir = |d: Ino| {
            txn.ops.iter().any(|o| {
                matches!(o, Op::Delete(k) if *k == self.keys.dir_times(d) || *k == self.keys.inode(d))
            })
        };
        // A commit changing the entries of two delegated directories (a
        // rename between them) or removing one: they end first. One that
        // only touches inodes created in other delegated directories (a
        // batch of frees): those images go to the engine, and the inodes
        // with them. Then it runs again.
        let names = |d: Ino| {
            txn.conds
                .iter()
                .map(cond_key)
                .chain(txn.ops.iter().map(Op::key))
                .any(|k| held_dir_of(&self.keys, k) == Some(d))
        };
        let ending: Vec<&Arc<Deleg>> = mine.iter().filter(|d| removes_dir(d.dir)).collect();
        let naming = mine.iter().filter(|d| names(d.dir)).count();
        if ending.len() == 1 && mine.len() == 1 && naming == 1 {
            if let Some(rev) = self.remove_held(&mine[0], &txn, until, &dirs)? {
                return Ok(Some(rev));
            }
        }
        if !ending.is_empty() || naming > 1 {
            for d in &mine {
                if names(d.dir) {
                    self.end(d, End::Here)?;
                }
            }
            return Ok(None);
        }
        if mine.len() > 1 {
            // The files it touches go to the engine with their images
            // (a link into another delegated directory).
            let touched: HashSet<Ino> = txn
                .conds
                .iter()
                .map(cond_key)
                .chain(txn.ops.iter().map(Op::key))
                .filter_map(|k| owned_inode(&self.keys, k))
                .collect();
            let deadline = Instant::now() + self.cfg.op_timeout;
            for d in mine.iter().filter(|d| !names(d.dir)) {
                // A file left (its close deferred again): the next
                // attempt comes back here.
                self.hand_over(d, &touched, deadline)?;
            }
            return Ok(None);
        }
        self.commit_held(&mine[0], txn, until, uploads, &dirs)
    }

    /// The removal of a directory delegated here (rmdir), when its image
    /// holds no entry and no file closed in it waits for a batch: what the
    /// image has pending, the removal and the delegation's end go in one
    /// commit, not an end in one and the removal, read again, in another.
    /// None when that does not apply or a condition failed: the caller
    /// ends the delegation and the operation runs again.
    fn remove_held(
        &self,
        d: &Arc<Deleg>,
        txn: &Txn,
        until: Instant,
        dirs: &[Ino],
    ) -> Result<Option<Rev>> {
        let mut img = lock(&d.img);
        if !img.live || self.delegs.table().deferred.any_in(d.dir) {
            return Ok(None);
        }
        let mut conds = Vec::new();
        for c in &txn.conds {
            let here = match c {
                Cond::Empty(a, _) => self.keys.entries_range_dir(a) == Some(d.dir),
                _ => held_dir_of(&self.keys, cond_key(c)) == Some(d.dir),
            };
            if !here {
                conds.push(c.clone());
            } else if !img.holds(c) {
                Stats::inc(&self.stats.delegation_conflicts);
                return Ok(None);
            }
        }
        if read_from_image(&conds) {
            return Ok(None);
        }
        // Room in one commit for the removal and the delegation's keys.
        let Some(until) = self.room_for(d, &mut img, txn.ops.len() + 2, until)? else {
            return Ok(None);
        };
        let end = [
            Op::Delete(self.keys.deleg(d.dir)),
            Op::Delete(self.keys.recall(d.dir)),
        ];
        let t = self.with_pending(d, &img, conds, txn.ops.iter().cloned().chain(end), dirs);
        Stats::inc(&self.stats.delegation_passed);
        match self.commit_one(t, until)? {
            Some(rev) => {
                Stats::inc(&self.stats.delegation_flushes);
                self.drop_image(d, &mut img);
                drop(img);
                Stats::inc(&self.stats.delegations_ended);
                Ok(Some(rev))
            }
            None => {
                if self.check_still_held(d, &mut img)? {
                    self.recheck_guards(&mut img)?;
                }
                Ok(None)
            }
        }
    }

    /// Makes room in one commit for `img`'s pending changes and `extra`
    /// more writes (its batch goes first when they do not fit) and says by
    /// when that commit must reach the engine (the upload window); None
    /// when the image is gone or its batch was given up.
    fn room_for(
        &self,
        d: &Deleg,
        img: &mut Image,
        extra: usize,
        until: Instant,
    ) -> Result<Option<Instant>> {
        if img.over(extra) {
            self.flush_image(d, img, None, until)?;
            if !img.live {
                return Ok(None);
            }
        }
        let until = self.batch_until(img, until);
        if until.is_none() {
            self.abandon(d, img);
        }
        Ok(until)
    }

    /// A commit of `img`'s pending changes and `ops`, conditioned on
    /// `conds`, the image's guards, the delegation, and the other `dirs`
    /// being delegated to nobody.
    fn with_pending(
        &self,
        d: &Deleg,
        img: &Image,
        mut conds: Vec<Cond>,
        ops: impl Iterator<Item = Op>,
        dirs: &[Ino],
    ) -> Txn {
        conds.extend(img.guard_conds(&self.keys));
        conds.push(Cond::Rev(self.keys.deleg(d.dir), d.y_rev));
        for p in dirs.iter().filter(|p| **p != d.dir) {
            conds.push(Cond::Absent(self.keys.deleg(*p)));
        }
        let ops: Vec<Op> = ops.collect();
        let mut all = img.pending(&ops);
        all.extend(ops);
        Txn { conds, ops: all }
    }

    /// A commit touching no delegation of this mount: conditioned on the
    /// directories it changes being delegated to nobody; when it fails on
    /// one, that delegation is recalled before the operation runs again.
    fn commit_plain(&self, mut txn: Txn, until: Instant, dirs: &[Ino]) -> Result<Option<Rev>> {
        for d in dirs {
            txn.conds.push(Cond::Absent(self.keys.deleg(*d)));
        }
        let r = self.commit(txn, until)?;
        if r.is_none() {
            self.recall_blockers(dirs)?;
        }
        Ok(r)
    }

    /// After a commit conditioned on `dirs` being delegated to nobody
    /// failed: recalls those another mount holds.
    fn recall_blockers(&self, dirs: &[Ino]) -> Result<()> {
        if !dirs.is_empty() {
            let ks: Vec<Vec<u8>> = dirs.iter().map(|d| self.keys.deleg(*d)).collect();
            let refs: Vec<&[u8]> = ks.iter().map(Vec::as_slice).collect();
            let (got, _) = self.kv_get_many(&refs)?;
            for (d, e) in dirs.iter().zip(got) {
                if let Some(e) = e {
                    let holder = schema::decode_u64(&e.value, "delegation")?;
                    self.blocked_by(*d, holder)?;
                }
            }
        }
        Ok(())
    }

    /// Should this commit take the delegation of a directory first? When
    /// it adds or removes names in exactly one directory that has not
    /// been recalled lately, and there is room.
    fn wants(&self, txn: &Txn, dirs: &[Ino]) -> Option<Ino> {
        let mut named = txn
            .ops
            .iter()
            .filter_map(|o| match self.keys.decode(o.key()) {
                Some(Key::Dentry { parent, .. }) => Some(parent),
                _ => None,
            });
        let d = named.next()?;
        if named.any(|p| p != d) {
            return None;
        }
        // Besides `d`, only directories this commit creates (a mkdir's
        // new times key).
        let created = |x: Ino| {
            txn.conds
                .iter()
                .any(|c| matches!(c, Cond::Absent(k) if *k == self.keys.inode(x)))
        };
        if dirs.iter().any(|x| *x != d && !created(*x)) {
            return None;
        }
        if self.delegs.keys.load(Relaxed) >= self.cfg.delegation_keys_max {
            return None;
        }
        let t = self.delegs.table();
        if let Some((until, _)) = t.hold_off.get(&d) {
            if Instant::now() < *until {
                return None;
            }
        }
        Some(d)
    }

    /// Takes the delegation of `dir`: one commit, then its entries and
    /// times read into an image. None when another mount holds or asks
    /// for it, or the directory is too large to hold.
    fn acquire(&self, dir: Ino, until: Instant) -> Result<Option<Arc<Deleg>>> {
        let (sid, lease) = self.session.current()?;
        if !self.lease_fresh(sid) {
            return Ok(None);
        }
        if self.delegs.held.load(Relaxed) >= HELD_MAX {
            // Room: the one used longest ago goes.
            let all: Vec<Arc<Deleg>> = self.delegs.table().held.values().cloned().collect();
            let oldest = all.iter().min_by_key(|d| lock(&d.img).used).cloned();
            if let Some(d) = oldest {
                self.end(&d, End::Here)?;
            }
        }
        let yk = self.keys.deleg(dir);
        let mut t = Tx::default();
        t.absent(yk.clone())
            .absent(self.keys.recall(dir))
            .exists(self.keys.inode(dir))
            .put_leased(yk.clone(), schema::encode_u64(sid), lease);
        let Some(y_rev) = self.commit_one(t.txn, until)? else {
            self.hold_off(dir, false);
            return Ok(None);
        };
        // Nobody changes the directory's entries from here on: what the
        // engine has now is the image.
        let per_dir = self.per_dir_max();
        let tk = self.keys.dir_times(dir);
        let loaded = self
            .kv_scan(&self.keys.dentries(dir), per_dir + 1)
            .and_then(|e| Ok((e, self.kv_get_many(&[&tk])?.0)));
        let (entries, times) = match loaded {
            Ok(v) => v,
            Err(e) => {
                // Given back untouched (or it goes with the session).
                let mut t = Tx::default();
                t.rev(yk.clone(), y_rev).del(yk);
                let _ = self.commit_one(t.txn, until);
                return Err(e);
            }
        };
        let mut keys = BTreeMap::new();
        for e in entries.into_iter().chain(times.into_iter().flatten()) {
            keys.insert(
                e.key,
                Slot {
                    value: Some(e.value),
                    rev: e.rev,
                    dirty: false,
                    in_engine: true,
                },
            );
        }
        let n = keys.len();
        let d = Arc::new(Deleg {
            dir,
            sid,
            y_rev,
            img: Mutex::new(Image::new(self.keys.dentries(dir), keys)),
        });
        {
            let mut t = self.delegs.table();
            t.held.insert(dir, d.clone());
            self.delegs.held.store(t.held.len(), Relaxed);
        }
        self.delegs.keys.fetch_add(n, Relaxed);
        Stats::inc(&self.stats.delegations_taken);
        self.deleg_stats();
        if n > per_dir {
            self.end(&d, End::TooBig)?;
            return Ok(None);
        }
        Ok(Some(d))
    }

    /// Commits `txn`, which touches keys of delegation `d`: into the image
    /// when it touches nothing else, else to the engine with the image's
    /// pending changes.
    fn commit_held(
        &self,
        d: &Arc<Deleg>,
        txn: Txn,
        until: Instant,
        uploads: Option<Instant>,
        dirs: &[Ino],
    ) -> Result<Option<Rev>> {
        let mut img = lock(&d.img);
        if !img.live {
            return Ok(None);
        }
        img.used = Instant::now();
        // Inodes this commit creates (their key is checked absent: inode
        // numbers are never reused, so nobody else can know them).
        let created: HashSet<Ino> = txn
            .conds
            .iter()
            .filter_map(|c| match c {
                Cond::Absent(k) => match self.keys.decode(k) {
                    Some(Key::Inode(i)) => Some(i),
                    _ => None,
                },
                _ => None,
            })
            .filter(|i| {
                txn.ops
                    .iter()
                    .any(|o| matches!(o, Op::Put { key, .. } if *key == self.keys.inode(*i)))
            })
            .collect();
        let dir_rec = self.keys.inode(d.dir);
        let owned = |k: &[u8], t: &Table| -> bool {
            if held_dir_of(&self.keys, k) == Some(d.dir) {
                return true;
            }
            // This session's record keeping an inode created here open
            // after its last name went (unlink while open).
            if let Some(Key::Open(s, i)) = self.keys.decode(k) {
                return s == d.sid && (created.contains(&i) || t.fresh.get(&i) == Some(&d.dir));
            }
            match inode_of(&self.keys, k) {
                Some(i) => created.contains(&i) || t.fresh.get(&i) == Some(&d.dir),
                None => false,
            }
        };
        let (own_conds, other_conds, all_owned, deferred) = {
            let t = self.delegs.table();
            let mut own_conds = Vec::new();
            let mut other_conds = Vec::new();
            for c in &txn.conds {
                let k = cond_key(c);
                let empty_here = matches!(c, Cond::Empty(a, _)
                    if self.keys.entries_range_dir(a) == Some(d.dir));
                if empty_here || (!matches!(c, Cond::Empty(..)) && owned(k, &t)) {
                    own_conds.push(c);
                } else if matches!(c, Cond::Exists(k) if *k == dir_rec) {
                    // The directory stays while it is delegated (its
                    // removal ends the delegation first).
                } else {
                    other_conds.push(c.clone());
                }
            }
            // Besides owned keys, items of this session's delete queue
            // (the data of a file born here and freed, or cut) may go
            // with the batch: nobody else takes them, and the objects
            // they free stay until then.
            let ops_owned = txn
                .ops
                .iter()
                .all(|o| owned(o.key(), &t) || self.own_queue_put(o, d.sid));
            let all = other_conds.is_empty() && ops_owned;
            let deferred = if all {
                None
            } else {
                self.deferrable(&txn, &other_conds, |k| owned(k, &t))
            };
            (own_conds, other_conds, all, deferred)
        };
        if read_from_image(&other_conds) || !own_conds.iter().all(|c| img.holds(c)) {
            Stats::inc(&self.stats.delegation_conflicts);
            return Ok(None);
        }
        // Objects just uploaded may be named from the image while its
        // batch has most of the upload window left.
        let recent = uploads.is_none_or(|at| at.elapsed() < self.upload_window() / 4);
        if all_owned && recent && self.lease_fresh(d.sid) {
            let rev = self.delegs.next_rev();
            for op in &txn.ops {
                if self.own_queue_put(op, d.sid) {
                    img.apply_foreign(op, rev);
                } else {
                    img.apply(op, rev, true);
                }
            }
            if let Some(at) = uploads {
                img.uploaded_at = Some(img.uploaded_at.map_or(at, |o| o.min(at)));
            }
            self.recount(&mut img);
            if !created.is_empty() {
                let mut t = self.delegs.table();
                for i in &created {
                    t.fresh.insert(*i, d.dir);
                }
            }
            self.cache_ops(&txn, rev, false);
            Stats::inc(&self.stats.delegation_local_ops);
            let pending = img.dirty;
            self.soon(&mut img, pending);
            if img.over(1) {
                if let Err(e) = self.flush_image(d, &mut img, None, until) {
                    tracing::warn!("directory {}: batch not committed yet: {e}", d.dir);
                }
            }
            let too_big = img.keys.len() > self.per_dir_max();
            drop(img);
            if too_big {
                self.end(d, End::TooBig)?;
            }
            return Ok(Some(rev));
        }
        if let Some((x, r, queue)) =
            deferred.filter(|_| uploads.is_none() && self.lease_fresh(d.sid))
        {
            // The last link of a file that existed before: freed with the
            // next batch, conditioned on its record as read here.
            let rev = self.delegs.next_rev();
            let dir = d.dir;
            for op in &txn.ops {
                let mine = held_dir_of(&self.keys, op.key()) == Some(dir);
                if mine {
                    img.apply(op, rev, true);
                } else {
                    img.apply_foreign(op, rev);
                }
            }
            img.guards.push(Guard {
                ino: x,
                rev: r,
                queue,
            });
            self.recount(&mut img);
            self.delegs.table().guarded.insert(x, dir);
            self.cache_ops(&txn, rev, false);
            Stats::inc(&self.stats.delegation_local_ops);
            Stats::inc(&self.stats.delegation_deferred_frees);
            let pending = img.writes().max(img.guards.len());
            self.soon(&mut img, pending);
            if img.over(1) {
                if let Err(e) = self.flush_image(d, &mut img, None, until) {
                    tracing::warn!("directory {dir}: batch not committed yet: {e}");
                }
            }
            return Ok(Some(rev));
        }
        // To the engine, with what the image has pending.
        let Some(until) = self.room_for(d, &mut img, txn.ops.len(), until)? else {
            return Ok(None);
        };
        let t = self.with_pending(d, &img, other_conds, txn.ops.iter().cloned(), dirs);
        Stats::inc(&self.stats.delegation_passed);
        match self.commit_one(t, until)? {
            Some(rev) => {
                img.committed(rev);
                let mut t = self.delegs.table();
                // A file named outside the directory now (a link, a move
                // out) is the engine's from now on: other mounts may
                // find it.
                for op in &txn.ops {
                    if let (Op::Put { value, .. }, Some(Key::Dentry { parent, .. })) =
                        (op, self.keys.decode(op.key()))
                    {
                        if parent != d.dir {
                            if let Ok((i, _)) = schema::decode_dentry(parent, value) {
                                if t.fresh.get(&i) == Some(&d.dir) {
                                    t.fresh.remove(&i);
                                }
                            }
                        }
                    }
                }
                for op in &txn.ops {
                    // The directory's own keys stay, and those of the
                    // files born in it that stay the image's.
                    let k = op.key();
                    let mine = held_dir_of(&self.keys, k) == Some(d.dir)
                        || owned_inode(&self.keys, k)
                            .is_some_and(|i| t.fresh.get(&i) == Some(&d.dir));
                    if mine {
                        img.apply(op, rev, false);
                    }
                }
                drop(t);
                self.settle_fresh(d, &mut img);
                Ok(Some(rev))
            }
            None => {
                if self.check_still_held(d, &mut img)? {
                    self.recheck_guards(&mut img)?;
                }
                drop(img);
                let others: Vec<Ino> = dirs.iter().copied().filter(|p| *p != d.dir).collect();
                self.recall_blockers(&others)?;
                Ok(None)
            }
        }
    }

    /// Asks the delegation thread to commit `img` now once `pending`
    /// reaches `FLUSH_SOON`, when files closed in it wait for the batch
    /// (else the operation at `FLUSH_KEYS` commits a larger one itself).
    fn soon(&self, img: &mut Image, pending: usize) {
        if pending >= FLUSH_SOON && img.deferring && !img.urgent {
            img.urgent = true;
            self.delegs.wake.notify_all();
        }
    }

    /// Most keys one directory's image may hold.
    fn per_dir_max(&self) -> usize {
        (self.cfg.delegation_keys_max / 8).max(64)
    }

    /// Brings the mount's count of image keys up to date with `img`.
    fn recount(&self, img: &mut Image) {
        let now = img.keys.len();
        if now >= img.counted {
            self.delegs.keys.fetch_add(now - img.counted, Relaxed);
        } else {
            self.delegs.keys.fetch_sub(img.counted - now, Relaxed);
        }
        img.counted = now;
        self.deleg_stats();
    }

    /// After the image went to the engine: which inodes created in the
    /// directory stay the image's. Files born under this delegation stay
    /// (no other mount can know their numbers before the delegation ends:
    /// a lookup or listing recalls it, a second name elsewhere or a move
    /// out hands the file to the engine first), newest first, while the
    /// image keeps within half its bound and the mount within half its
    /// own: their opens read no engine, their next closes wait for a
    /// batch too. Files whose closes wait for a batch always stay: their
    /// data then goes to the image, not to the engine one file at a time.
    /// Directories go to the engine (a create in one delegates it).
    fn settle_fresh(&self, d: &Deleg, img: &mut Image) {
        let mut per_ino: HashMap<Ino, usize> = HashMap::new();
        let mut dir_keys = 0;
        for k in img.keys.keys() {
            if held_dir_of(&self.keys, k) == Some(d.dir) {
                dir_keys += 1;
            } else if let Some(i) = owned_inode(&self.keys, k) {
                *per_ino.entry(i).or_default() += 1;
            }
        }
        let mut t = self.delegs.table();
        let waiting: HashSet<Ino> = t
            .deferred
            .in_dir(d.dir)
            .filter(|f| t.fresh.get(f) == Some(&d.dir))
            .collect();
        let mut born: Vec<Ino> = t
            .fresh
            .in_dir(d.dir)
            .filter(|i| !waiting.contains(i) && !img.keys.contains_key(&self.keys.dir_times(*i)))
            .collect();
        born.sort_unstable_by(|a, b| b.cmp(a));
        let mut room = if self.delegs.keys.load(Relaxed) < self.cfg.delegation_keys_max / 2 {
            (self.per_dir_max() / 2).saturating_sub(dir_keys)
        } else {
            0
        };
        let mut keep = waiting;
        for i in &keep {
            room = room.saturating_sub(per_ino.get(i).copied().unwrap_or(0));
        }
        for i in born {
            let n = per_ino.get(&i).copied().unwrap_or(0);
            if n > room {
                break;
            }
            room -= n;
            keep.insert(i);
        }
        t.fresh.retain_in(d.dir, |i| keep.contains(&i));
        t.guarded.forget_dir(d.dir);
        drop(t);
        img.keys.retain(|k, _| {
            held_dir_of(&self.keys, k) == Some(d.dir)
                || owned_inode(&self.keys, k).is_some_and(|i| keep.contains(&i))
        });
        self.recount(img);
    }

    /// Is `op` an item put on session `sid`'s delete queue?
    fn own_queue_put(&self, op: &Op, sid: u64) -> bool {
        matches!(op, Op::Put { key, .. }
            if matches!(self.keys.decode(key), Some(Key::Queue(s, _)) if s == sid))
    }

    /// A commit conditioned on the delegation failed: if the delegation is
    /// gone (the session expired), what the image had pending is lost.
    fn check_still_held(&self, d: &Deleg, img: &mut Image) -> Result<bool> {
        let (got, _) = self.kv_get_many(&[&self.keys.deleg(d.dir)])?;
        if got[0].as_ref().is_some_and(|e| e.rev == d.y_rev) {
            return Ok(true);
        }
        Stats::inc(&self.stats.delegations_lost);
        tracing::error!(
            "directory {}: delegation lost with its session; {} changes of the last batch are not in the volume",
            d.dir,
            img.dirty
        );
        self.drop_image(d, img);
        Ok(false)
    }

    /// The latest a batch of `img` may reach the engine: within the upload
    /// window of the oldest upload it names. Past half the window, the
    /// objects it names are stored again first (`refresh_uploads`), which
    /// restarts the window; None only when that failed or the window had
    /// passed (gc may have taken an object then).
    fn batch_until(&self, img: &mut Image, until: Instant) -> Option<Instant> {
        let window = self.upload_window();
        match img.uploaded_at {
            None => Some(until),
            Some(at) if at.elapsed() < window / 2 => Some(until.min(at + window)),
            Some(at) if at.elapsed() < window => match self.refresh_uploads(img, at + window) {
                Ok(start) => Some(until.min(start + window)),
                Err(e) => {
                    tracing::warn!("objects of a batch not stored again: {e}");
                    None
                }
            },
            Some(_) => None,
        }
    }

    /// Stores again, under the same names, the objects named by the chunk
    /// records `img` has pending (a batch the delegation thread reached
    /// late: a loaded machine, a slow store), so that their times in the
    /// store are no older than this call; returns when it started. The
    /// bytes come from the read cache where it has them; objects the
    /// engine named already are stored again too (the same bytes).
    fn refresh_uploads(&self, img: &mut Image, deadline: Instant) -> Result<Instant> {
        let start = Instant::now();
        let mut objs = Vec::new();
        for (k, s) in img.keys.iter().filter(|(_, s)| s.dirty) {
            let (Some(v), Some(Key::Chunk(ino, chunk))) = (&s.value, self.keys.decode(k)) else {
                continue;
            };
            for r in schema::decode_chunk(ino, v)?
                .slices
                .iter()
                .filter_map(|s| s.obj.as_ref())
            {
                if Instant::now() >= deadline {
                    return Err(EngineError::Store(StoreError::Unavailable(
                        "the upload window passed while objects were read".into(),
                    )));
                }
                let b = match self.cache.get(r.id) {
                    Some(b) => b,
                    None => self.blobs.get(ino, chunk, r)?,
                };
                objs.push((self.blobs.path(ino, chunk, r.id), b));
            }
        }
        objs.sort_by(|a, b| a.0.cmp(&b.0));
        objs.dedup_by(|a, b| a.0 == b.0);
        Stats::add(&self.stats.upload_refreshes, objs.len() as u64);
        self.blobs.put_many(objs)?;
        if Instant::now() >= deadline {
            return Err(EngineError::Store(StoreError::Unavailable(
                "the upload window passed while objects were stored again".into(),
            )));
        }
        img.uploaded_at = Some(start);
        Ok(start)
    }

    /// Gives up a batch that can no longer reach the engine safely (its
    /// commits kept failing for half the upload window): the delegation
    /// ends without it, as a crash would have ended it.
    fn abandon(&self, d: &Deleg, img: &mut Image) {
        Stats::inc(&self.stats.delegations_lost);
        tracing::error!(
            "directory {}: a batch naming objects uploaded an upload window ago (or that could not be stored again) was not committed; its {} changes are not in the volume",
            d.dir,
            img.dirty
        );
        let mut t = Tx::default();
        t.rev(self.keys.deleg(d.dir), d.y_rev)
            .del(self.keys.deleg(d.dir))
            .del(self.keys.recall(d.dir));
        if let Err(e) = self.commit_one(t.txn, Instant::now() + self.cfg.op_timeout) {
            tracing::debug!("delegation of {} left to its session: {e}", d.dir);
        }
        self.drop_image(d, img);
    }

    fn drop_image(&self, d: &Deleg, img: &mut Image) {
        img.live = false;
        img.keys.clear();
        img.guards.clear();
        img.dirty = 0;
        img.saved = 0;
        img.dirty_since = None;
        img.uploaded_at = None;
        self.recount(img);
        let mut t = self.delegs.table();
        t.fresh.forget_dir(d.dir);
        t.guarded.forget_dir(d.dir);
        if t.held.get(&d.dir).is_some_and(|h| std::ptr::eq(&**h, d)) {
            t.held.remove(&d.dir);
        }
        self.delegs.held.store(t.held.len(), Relaxed);
        drop(t);
        self.deleg_stats();
        // Whatever this kernel was told of the directory's inodes came from
        // the image: read it again.
        self.icache.forget(d.dir);
    }

    /// Commits an image's pending changes (and, with `end`, the end of the
    /// delegation), in one commit conditioned on the delegation.
    fn flush_image(
        &self,
        d: &Deleg,
        img: &mut Image,
        end: Option<Ino>,
        until: Instant,
    ) -> Result<()> {
        if img.dirty == 0 && end.is_none() {
            return Ok(());
        }
        let Some(until) = self.batch_until(img, until) else {
            self.abandon(d, img);
            return Err(EngineError::Store(StoreError::Unavailable(format!(
                "directory {}: its last batch was given up",
                d.dir
            ))));
        };
        for _ in 0..GUARD_RETRIES {
            let mut t = Txn {
                conds: img.guard_conds(&self.keys),
                ops: img.pending(&[]),
            };
            t.conds.push(Cond::Rev(self.keys.deleg(d.dir), d.y_rev));
            if let Some(dir) = end {
                t.ops.push(Op::Delete(self.keys.deleg(dir)));
                t.ops.push(Op::Delete(self.keys.recall(dir)));
            }
            if let Some(rev) = self.commit_one(t, until)? {
                Stats::inc(&self.stats.delegation_flushes);
                img.committed(rev);
                self.settle_fresh(d, img);
                return Ok(());
            }
            if !self.check_still_held(d, img)? {
                return Ok(());
            }
            // A guarded file changed under the batch: worked out again.
            self.recheck_guards(img)?;
        }
        Err(EngineError::Store(StoreError::Unavailable(format!(
            "directory {}: the batch kept conflicting with other writers",
            d.dir
        ))))
    }

    /// Works out again the frees of guarded files whose record changed
    /// since it was read (another mount wrote through a handle it held, or
    /// linked it through one): one link less of the record as it is now.
    fn recheck_guards(&self, img: &mut Image) -> Result<()> {
        if img.guards.is_empty() {
            return Ok(());
        }
        let ks: Vec<Vec<u8>> = img.guards.iter().map(|g| self.keys.inode(g.ino)).collect();
        let refs: Vec<&[u8]> = ks.iter().map(Vec::as_slice).collect();
        let (got, _) = self.kv_get_many(&refs)?;
        let rev = self.delegs.next_rev();
        let mut guards = std::mem::take(&mut img.guards);
        let mut keep = Vec::with_capacity(guards.len());
        for (g, e) in guards.drain(..).zip(got) {
            let (ik, xk) = (self.keys.inode(g.ino), self.keys.xattrs(g.ino));
            match e {
                Some(e) if e.rev == g.rev => keep.push(g),
                None => {
                    // Freed by someone else: nothing left to do.
                    img.forget(&ik);
                    img.forget(&xk);
                    if let Some(q) = &g.queue {
                        img.forget(q);
                    }
                }
                Some(e) => {
                    Stats::inc(&self.stats.delegation_guard_rechecks);
                    let mut i = schema::decode_inode(g.ino, &e.value)?;
                    img.forget(&ik);
                    img.forget(&xk);
                    let mut queue = g.queue.clone();
                    if i.nlink > 1 {
                        i.nlink -= 1;
                        i.ctime = churnfs_vfs::Timespec::now();
                        img.apply_foreign(
                            &Op::Put {
                                key: ik,
                                value: schema::encode_inode(g.ino, &i),
                                lease: None,
                            },
                            rev,
                        );
                        if let Some(q) = queue.take() {
                            img.forget(&q);
                        }
                    } else {
                        img.apply_foreign(&Op::Delete(ik), rev);
                        if i.has_xattrs {
                            img.apply_foreign(&Op::Delete(xk), rev);
                        }
                        if !i.inline || i.garbage.is_some() {
                            let q = match queue.take() {
                                Some(q) => q,
                                None => self.queue_key()?,
                            };
                            img.apply_foreign(
                                &Op::Put {
                                    key: q.clone(),
                                    value: schema::encode_work(&schema::Work::Chunks {
                                        ino: g.ino,
                                        from: 0,
                                        to: u64::MAX,
                                        stamp: u64::MAX,
                                    }),
                                    lease: None,
                                },
                                rev,
                            );
                            queue = Some(q);
                        } else if let Some(q) = queue.take() {
                            img.forget(&q);
                        }
                    }
                    keep.push(Guard {
                        ino: g.ino,
                        rev: e.rev,
                        queue,
                    });
                }
            }
        }
        img.guards = keep;
        self.recount(img);
        Ok(())
    }

    /// Is this commit the free of a file that existed before, by the
    /// removal of its last name in the delegated directory? Its one
    /// condition on a key the image does not own is the file's record;
    /// its writes there delete the record (and xattrs) and queue the
    /// data. Returns the file, the record's version and the queue item.
    fn deferrable(
        &self,
        txn: &Txn,
        other: &[Cond],
        owned: impl Fn(&[u8]) -> bool,
    ) -> Option<(Ino, Rev, Option<Vec<u8>>)> {
        let [Cond::Rev(k, r)] = other else {
            return None;
        };
        let Some(Key::Inode(x)) = self.keys.decode(k) else {
            return None;
        };
        let sid = self.session.current().ok()?.0;
        let (mut frees, mut removes_name, mut queue) = (false, false, None);
        for op in &txn.ops {
            let key = op.key();
            let decoded = self.keys.decode(key);
            if owned(key) {
                if matches!((op, &decoded), (Op::Delete(_), Some(Key::Dentry { .. }))) {
                    removes_name = true;
                }
                continue;
            }
            match (decoded, op) {
                (Some(Key::Inode(i)), Op::Delete(_)) if i == x => frees = true,
                (Some(Key::Xattr(i)), Op::Delete(_)) if i == x => {}
                (Some(Key::Queue(s, _)), Op::Put { .. }) if s == sid && queue.is_none() => {
                    queue = Some(key.to_vec());
                }
                _ => return None,
            }
        }
        (frees && removes_name).then_some((x, *r, queue))
    }

    /// Ends a delegation: its image committed with the end, in one commit.
    fn end(&self, d: &Arc<Deleg>, why: End) -> Result<()> {
        // The data of files closed in it goes first: once the delegation
        // is gone, other mounts may open them. With the image locked and
        // none waiting, no close can add one (`defer_close`).
        let mut tries = 0;
        let mut img = loop {
            let r = self.flush_deferred(|_, x| x == d.dir);
            let img = lock(&d.img);
            let waiting = self.delegs.table().deferred.any_in(d.dir);
            match r {
                Err(e) if why != End::Unmount => return Err(e),
                Err(e) => {
                    tracing::error!("directory {}: data of closed files not flushed: {e}", d.dir);
                    break img;
                }
                Ok(()) if !waiting || tries >= GUARD_RETRIES => break img,
                Ok(()) => tries += 1,
            }
        };
        if !img.live {
            return Ok(());
        }
        let deadline = Instant::now() + self.cfg.op_timeout;
        let r = self.flush_image(d, &mut img, Some(d.dir), deadline);
        if let Err(e) = r {
            if why != End::Unmount {
                return Err(e);
            }
            tracing::error!("directory {}: batch not committed at unmount: {e}", d.dir);
        }
        self.drop_image(d, &mut img);
        drop(img);
        match why {
            End::Recalled => {
                Stats::inc(&self.stats.delegations_recalled);
                self.hold_off(d.dir, true);
            }
            End::TooBig => {
                let mut t = self.delegs.table();
                t.hold_off
                    .insert(d.dir, (Instant::now() + HOLD_OFF_LONGEST, HOLD_OFF_LONGEST));
            }
            End::Here | End::Unmount => Stats::inc(&self.stats.delegations_ended),
        }
        Ok(())
    }

    /// Leaves `dir` alone for a while: the hold-off doubles while it keeps
    /// being recalled (`longer`).
    fn hold_off(&self, dir: Ino, longer: bool) {
        let base = self.cfg.delegation_hold_off;
        let mut t = self.delegs.table();
        if t.hold_off.len() >= HOLD_OFF_MAX {
            let now = Instant::now();
            t.hold_off.retain(|_, (u, _)| now < *u);
            if t.hold_off.len() >= HOLD_OFF_MAX {
                t.hold_off.clear();
            }
        }
        let next = match t.hold_off.get(&dir) {
            Some((u, d)) if longer && Instant::now() < *u + *d * 2 => {
                (*d * 2).min(HOLD_OFF_LONGEST)
            }
            _ => base,
        };
        t.hold_off.insert(dir, (Instant::now() + next, next));
    }

    /// The keys of `ino` that `img` holds.
    fn keys_of(&self, img: &Image, ino: Ino, sid: u64) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = [
            self.keys.inode(ino),
            self.keys.dir_times(ino),
            self.keys.xattrs(ino),
            self.keys.open(sid, ino),
        ]
        .into_iter()
        .filter(|k| img.keys.contains_key(k))
        .collect();
        let (a, b) = self.keys.chunks(ino, 0, u64::MAX);
        v.extend(img.keys.range(a..b).map(|(k, _)| k.clone()));
        v
    }

    /// Hands files born in `d`'s directory to the engine: what the image
    /// has pending for them (their data first) goes to the engine, then
    /// their keys leave the image. False when one of them is left (a
    /// close deferred its data again meanwhile).
    fn hand_over(&self, d: &Deleg, inos: &HashSet<Ino>, until: Instant) -> Result<bool> {
        self.flush_deferred(|f, x| x == d.dir && inos.contains(&f))?;
        let mut img = lock(&d.img);
        if !img.live {
            return Ok(true);
        }
        let mut t = self.delegs.table();
        let mine: Vec<Ino> = inos
            .iter()
            .copied()
            .filter(|i| t.fresh.get(i) == Some(&d.dir))
            .collect();
        let gone: Vec<Ino> = mine
            .iter()
            .copied()
            .filter(|i| !t.deferred.contains_key(i))
            .collect();
        let all = gone.len() == mine.len();
        drop(t);
        let keys: Vec<Vec<u8>> = gone
            .iter()
            .flat_map(|i| self.keys_of(&img, *i, d.sid))
            .collect();
        if keys
            .iter()
            .any(|k| img.keys.get(k).is_some_and(|s| s.dirty))
        {
            self.flush_image(d, &mut img, None, until)?;
            if !img.live {
                return Ok(true);
            }
        }
        t = self.delegs.table();
        for i in &gone {
            t.fresh.remove(i);
        }
        drop(t);
        for k in &keys {
            // Committed (flushed above): the engine has the same.
            if img.keys.get(k).is_some_and(|s| !s.dirty) {
                img.keys.remove(k);
            }
        }
        self.recount(&mut img);
        Ok(all)
    }

    /// The delete queue is about to work on `ino` in the engine: a file
    /// born in a directory delegated here hands its keys over first (its
    /// chunk records are read and removed there). False: not yet (the
    /// item waits for the next round).
    pub(crate) fn release_born(&self, ino: Ino) -> Result<bool> {
        if self.delegs.held.load(Relaxed) == 0 {
            return Ok(true);
        }
        let d = {
            let t = self.delegs.table();
            let Some(dir) = t.fresh.get(&ino).copied() else {
                return Ok(true);
            };
            t.held.get(&dir).cloned()
        };
        let until = Instant::now() + self.cfg.op_timeout;
        match d {
            Some(d) => self.hand_over(&d, &HashSet::from([ino]), until),
            None => Ok(true),
        }
    }

    /// Sends a delegation's image to the engine now.
    fn flush_deleg(&self, d: &Deleg, until: Instant) -> Result<()> {
        let mut img = lock(&d.img);
        if img.live {
            self.flush_image(d, &mut img, None, until)?;
        }
        Ok(())
    }

    /// fsync of `ino` (a file created in a delegated directory, or the
    /// directory): its delegation's image goes to the engine now, with
    /// the data of the files closed in it (a directory's fsync).
    pub(crate) fn deleg_sync(&self, ino: Ino) -> Result<()> {
        if self.delegs.held.load(Relaxed) == 0 {
            return Ok(());
        }
        let d = {
            let t = self.delegs.table();
            let dir = t.fresh.get(&ino).copied().unwrap_or(ino);
            t.held.get(&dir).cloned()
        };
        if let Some(d) = d {
            if d.dir == ino {
                self.flush_deferred(|_, d| d == ino)?;
            }
            self.flush_deleg(&d, Instant::now() + self.cfg.op_timeout)?;
        }
        Ok(())
    }

    /// A file created in a delegated directory since its last batch is
    /// closed with data in this mount's buffer: the data may wait for the
    /// directory's next batch, since no other mount can open the file
    /// before that batch or the delegation's end, and both take the data
    /// first. Called with the file's lock held; true when it waits.
    pub(crate) fn defer_close(&self, ino: Ino) -> bool {
        if !self.cfg.delegation || self.delegs.held.load(Relaxed) == 0 {
            return false;
        }
        if self.dirty_total.load(Relaxed) > self.cfg.dirty_bytes_max / 2 {
            return false;
        }
        let d = {
            let t = self.delegs.table();
            let Some(dir) = t.fresh.get(&ino).copied() else {
                return false;
            };
            t.held.get(&dir).cloned()
        };
        let Some(d) = d else {
            return false;
        };
        // Under the image's lock: a delegation ending takes the files
        // waiting in it once it holds the lock, so none is left behind.
        let mut img = lock(&d.img);
        if !img.live || !self.lease_fresh(d.sid) {
            return false;
        }
        // Freed already (an unlink overtook the close): nothing waits.
        if img.get(&self.keys.inode(ino)).is_none() {
            return false;
        }
        let mut t = self.delegs.table();
        if t.fresh.get(&ino) != Some(&d.dir)
            || (!t.deferred.contains_key(&ino) && t.deferred.len() >= DEFERRED_MAX)
        {
            return false;
        }
        t.deferred.insert(ino, d.dir);
        img.deferring = true;
        Stats::set(
            &self.stats.delegation_deferred_files,
            t.deferred.len() as u64,
        );
        Stats::inc(&self.stats.delegation_deferred_closes);
        true
    }

    /// Was `ino` created in a directory delegated here since its last
    /// batch?
    pub(crate) fn is_fresh(&self, ino: Ino) -> bool {
        self.delegs.held.load(Relaxed) > 0 && self.delegs.table().fresh.contains_key(&ino)
    }

    /// An unlink freed `ino`: data its close left for a batch goes.
    pub(crate) fn drop_deferred(&self, ino: Ino) {
        let was = {
            let mut t = self.delegs.table();
            let was = t.deferred.remove(&ino).is_some();
            Stats::set(
                &self.stats.delegation_deferred_files,
                t.deferred.len() as u64,
            );
            was
        };
        if was {
            self.discard_file(ino);
        }
    }

    /// Uploads and commits the data of the files whose closes were
    /// deferred, those `pick(file, dir)` picks.
    pub(crate) fn flush_deferred(&self, pick: impl Fn(Ino, Ino) -> bool) -> Result<()> {
        let files: Vec<(Ino, Ino)> = {
            let mut t = self.delegs.table();
            if t.deferred.is_empty() {
                return Ok(());
            }
            let v: Vec<(Ino, Ino)> = t.deferred.iter().filter(|(f, d)| pick(*f, *d)).collect();
            for (f, _) in &v {
                t.deferred.remove(f);
            }
            Stats::set(
                &self.stats.delegation_deferred_files,
                t.deferred.len() as u64,
            );
            v
        };
        if files.is_empty() {
            return Ok(());
        }
        let inos: Vec<Ino> = files.iter().map(|(f, _)| *f).collect();
        let (failed, err) = self.flush_files(&inos);
        if failed.is_empty() {
            return Ok(());
        }
        // Tried again with the next batch (or at unmount).
        let mut t = self.delegs.table();
        for (f, d) in files.into_iter().filter(|(f, _)| failed.contains(f)) {
            t.deferred.insert(f, d);
        }
        Stats::set(
            &self.stats.delegation_deferred_files,
            t.deferred.len() as u64,
        );
        Err(err.unwrap_or_else(|| {
            EngineError::Store(StoreError::Unavailable("deferred data not flushed".into()))
        }))
    }

    /// One round of the delegation thread: gives back what other mounts
    /// asked for, commits images whose changes waited `delegation_flush`.
    pub fn delegation_round(&self) -> Result<()> {
        let mut asked: Vec<Ino> = std::mem::take(&mut *lock(&self.delegs.asked));
        if self.delegs.held.load(Relaxed) == 0 {
            // Files left waiting by a delegation that ended without them
            // (it was lost): their data goes on its own.
            return self.flush_deferred(|_, _| true);
        }
        // The watch says at once who asked for what; the list is read here
        // too, every `delegation_poll`, for a watch that fell behind.
        let poll = {
            let mut p = lock(&self.delegs.polled);
            let due = p.is_none_or(|t| t.elapsed() >= self.cfg.delegation_poll);
            if due {
                *p = Some(Instant::now());
            }
            due
        };
        if poll {
            for e in self.kv_scan(&self.keys.recalls(), HELD_MAX)? {
                if let Some(Key::Recall(dir)) = self.keys.decode(&e.key) {
                    asked.push(dir);
                }
            }
        }
        for dir in asked {
            if let Some(d) = self.delegs.held(dir) {
                self.end(&d, End::Recalled)?;
            }
        }
        let mut all: Vec<Arc<Deleg>> = self.delegs.table().held.values().cloned().collect();
        all.sort_by_key(|d| d.dir);
        let me = self.session.current().map(|(s, _)| s).ok();
        let mut due = Vec::new();
        for d in all {
            let mut img = lock(&d.img);
            if !img.live {
                continue;
            }
            if me != Some(d.sid) {
                // The session changed: this delegation went with the old
                // one (commits conditioned on it fail).
                self.check_still_held(&d, &mut img)?;
                continue;
            }
            if img.urgent
                || img
                    .dirty_since
                    .is_some_and(|t| t.elapsed() >= self.cfg.delegation_flush)
            {
                drop(img);
                due.push(d);
            }
        }
        // The data of files closed in the directories due goes first:
        // their batches name it.
        let held = self
            .delegs
            .table()
            .held
            .keys()
            .copied()
            .collect::<HashSet<Ino>>();
        let due_dirs: HashSet<Ino> = due.iter().map(|d| d.dir).collect();
        if let Err(e) = self.flush_deferred(|_, d| due_dirs.contains(&d) || !held.contains(&d)) {
            tracing::warn!("data of closed files not flushed yet: {e}");
        }
        self.flush_together(&due)
    }

    /// Commits the images of several directories, as many in one commit
    /// as fit (`FLUSH_KEYS` changes): a mount changing many directories
    /// at once (fs_mark's hundred) sends a few commits per interval, not
    /// one per directory. Images are locked in directory order (no other
    /// thread holds two).
    fn flush_together(&self, due: &[Arc<Deleg>]) -> Result<()> {
        let deadline = Instant::now() + self.cfg.op_timeout;
        let mut at = 0;
        while at < due.len() {
            let mut held: Vec<(&Deleg, MutexGuard<'_, Image>)> = Vec::new();
            let mut t = Txn::default();
            let mut until = deadline;
            while at < due.len() {
                let d = &due[at];
                let mut img = lock(&d.img);
                if !img.live || img.dirty == 0 {
                    at += 1;
                    continue;
                }
                let Some(u) = self.batch_until(&mut img, deadline) else {
                    self.abandon(d, &mut img);
                    at += 1;
                    continue;
                };
                // Images of other directories: no key of one is another's.
                let ops = img.pending(&[]);
                if !held.is_empty()
                    && (t.ops.len() + ops.len() > FLUSH_KEYS
                        || t.conds.len() + img.guards.len() + 1 > GUARDS_MAX)
                {
                    break;
                }
                until = until.min(u);
                t.conds.push(Cond::Rev(self.keys.deleg(d.dir), d.y_rev));
                t.conds.extend(img.guard_conds(&self.keys));
                t.ops.extend(ops);
                held.push((d, img));
                at += 1;
            }
            match held.len() {
                0 => {}
                1 => {
                    let (d, mut img) = held.pop().expect("one image");
                    self.flush_image(d, &mut img, None, deadline)?;
                }
                _ => match self.commit_one(t, until)? {
                    Some(rev) => {
                        for (d, img) in held.iter_mut() {
                            img.committed(rev);
                            self.settle_fresh(d, img);
                            Stats::inc(&self.stats.delegation_flushes);
                        }
                    }
                    // One of them is lost: each alone says which.
                    None => {
                        for (d, img) in held.iter_mut() {
                            self.flush_image(d, img, None, deadline)?;
                        }
                    }
                },
            }
        }
        Ok(())
    }

    /// Ends every delegation (unmount).
    pub(crate) fn end_all_delegations(&self) {
        let all: Vec<Arc<Deleg>> = self.delegs.table().held.values().cloned().collect();
        for d in all {
            if let Err(e) = self.end(&d, End::Unmount) {
                tracing::error!("directory {}: delegation not ended: {e}", d.dir);
            }
        }
    }

    /// Directories delegated to this mount (tests, stats).
    pub fn delegated(&self) -> Vec<Ino> {
        let mut v: Vec<Ino> = self.delegs.table().held.keys().copied().collect();
        v.sort();
        v
    }
}

/// Starts the delegation thread: recalls answered within
/// `delegation_poll`, batches committed after `delegation_flush`.
pub(crate) fn start(fs: &Arc<SharedFs>) -> Result<()> {
    let weak: Weak<SharedFs> = Arc::downgrade(fs);
    let every = (fs.cfg.delegation_flush / 2).min(fs.cfg.delegation_poll);
    let h = std::thread::Builder::new()
        .name("churnfs-deleg".into())
        .spawn(move || loop {
            let Some(fs) = weak.upgrade() else { return };
            if fs.stopping.load(Relaxed) {
                return;
            }
            if let Err(e) = fs.delegation_round() {
                tracing::warn!("delegations: {e}");
            }
            fs.delegs.nap(every);
        })
        .map_err(|e| EngineError::Store(StoreError::Engine(format!("thread: {e}"))))?;
    lock(&fs.threads).push(h);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: Ino = Ino(9);

    /// An image of `DIR` holding `n` entries as the engine has them, and
    /// their keys in order.
    fn image(keys: &schema::Keys, n: usize) -> (Image, Vec<Vec<u8>>) {
        let mut names: Vec<Vec<u8>> = (0..n)
            .map(|i| keys.dentry(DIR, format!("f{i}").as_bytes()))
            .collect();
        names.sort();
        let slots = names
            .iter()
            .map(|k| {
                let s = Slot {
                    value: Some(vec![1]),
                    rev: 5,
                    dirty: false,
                    in_engine: true,
                };
                (k.clone(), s)
            })
            .collect();
        (Image::new(keys.dentries(DIR), slots), names)
    }

    fn range(a: &[u8], b: &[u8]) -> Op {
        Op::DeleteRange {
            start: a.to_vec(),
            end: churnfs_kv::key_after(b),
        }
    }

    fn put(k: &[u8]) -> Op {
        Op::Put {
            key: k.to_vec(),
            value: vec![2],
            lease: None,
        }
    }

    /// Between `a` and `b` in key order, in `DIR`.
    fn name_between(keys: &schema::Keys, a: &[u8], b: &[u8]) -> Vec<u8> {
        (0..)
            .map(|i| keys.dentry(DIR, format!("n{i}").as_bytes()))
            .find(|k| a < k.as_slice() && k.as_slice() < b)
            .expect("a name")
    }

    #[test]
    fn removed_neighbours_are_one_range_and_what_lies_between_splits_it() {
        let keys = schema::Keys::new("t");
        let (mut img, k) = image(&keys, 10);
        let rev = LOCAL_REV_BASE;
        for n in &k[2..8] {
            img.apply(&Op::Delete(n.clone()), rev, true);
        }
        img.apply(&Op::Delete(k[0].clone()), rev, true);
        // k[1], kept, stands between k[0] and the run.
        assert_eq!(
            img.pending(&[]),
            vec![Op::Delete(k[0].clone()), range(&k[2], &k[7])]
        );
        assert_eq!(img.writes(), 7, "an upper bound until counted");
        img.count_writes();
        assert_eq!(img.writes(), 2);
        // A key the same commit puts inside the run (a link from
        // elsewhere), and one the commit writes itself.
        let x = name_between(&keys, &k[4], &k[5]);
        assert_eq!(
            img.pending(&[put(&x), put(&k[2])]),
            vec![
                Op::Delete(k[0].clone()),
                Op::Delete(k[2].clone()),
                range(&k[3], &k[4]),
                range(&k[5], &k[7]),
            ]
        );
        // A name made here inside the run: no longer counted as saved.
        let y = name_between(&keys, &k[6], &k[7]);
        img.apply(&put(&y), rev, true);
        let want = vec![
            Op::Delete(k[0].clone()),
            range(&k[2], &k[6]),
            put(&y),
            Op::Delete(k[7].clone()),
        ];
        assert_eq!(img.pending(&[]), want);
        assert!(img.writes() >= want.len());
        img.count_writes();
        assert_eq!(img.writes(), want.len());
        // Made and removed again within the batch: the run is whole.
        img.apply(&Op::Delete(y.clone()), rev, true);
        assert_eq!(
            img.pending(&[]),
            vec![Op::Delete(k[0].clone()), range(&k[2], &k[7])]
        );
    }

    #[test]
    fn a_batch_of_removals_is_bounded_by_its_writes_not_its_changes() {
        let keys = schema::Keys::new("t");
        let (mut img, k) = image(&keys, 400);
        for n in &k {
            img.apply(&Op::Delete(n.clone()), LOCAL_REV_BASE, true);
            // An inode record each, outside the entries.
            let ino = keys.inode(Ino(1000 + img.dirty as u64));
            img.keys.insert(
                ino.clone(),
                Slot {
                    value: Some(vec![1]),
                    rev: 5,
                    dirty: false,
                    in_engine: true,
                },
            );
            img.apply(&Op::Delete(ino), LOCAL_REV_BASE, true);
            if img.over(1) {
                break;
            }
        }
        // One range and an inode record a file: about FLUSH_KEYS files.
        let ops = img.pending(&[]);
        assert!(ops.len() <= FLUSH_KEYS, "{} writes", ops.len());
        assert_eq!(
            ops.iter()
                .filter(|o| matches!(o, Op::DeleteRange { .. }))
                .count(),
            1
        );
        assert!(img.dirty > FLUSH_KEYS + FLUSH_KEYS / 2, "{}", img.dirty);
    }
}
