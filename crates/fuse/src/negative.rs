//! The kernel's negative dentries for this mount, kept within a budget.
//!
//! The kernel keeps a dentry for every name a lookup found missing and for
//! every name we unlinked, rmdir'ed or renamed away, until memory pressure:
//! memory that grows with history (docs/design.md §8). We track those
//! names in arrival order; when more than `budget` are tracked, some are
//! handed to a side thread that makes the kernel drop them, in one of two
//! ways:
//! - a whole directory: when the directory of the name just noted holds at
//!   least an eighth of the budget, has no subdirectories and few live
//!   names, one FUSE_NOTIFY_INVAL_ENTRY for the directory's own name drops
//!   every unused dentry in it (the kernel's `d_invalidate`); see
//!   docs/design.md §9 for why and for the guards (`DirProbe`, `MountGuard`);
//! - name by name: otherwise, the oldest eighth of the budget, one
//!   FUSE_NOTIFY_INVAL_ENTRY each (also the fallback when a directory's
//!   notification is refused).
//!
//! States of a name here: `Absent → Tracked → Invalidating → Absent`.
//! - `note` (ENOENT lookup, unlink, rmdir, rename source) moves Absent →
//!   Tracked; a name already tracked stays where it is.
//! - `forget_name` (the name was created again: a positive dentry now)
//!   removes it from the set; its queue slot is skipped when popped.
//! - Beyond the budget, names leave in a batch as above.
//!
//! The notifications never come from a request handler: a handler that
//! sent one for its own directory would wait for the directory lock its own
//! request holds. The side thread only starts once the session exists.
//!
//! Bound: `budget` names tracked and `2 × budget + 64` queue slots
//! (asserted), plus at most 8 batches queued; `DIR_NAMES_MAX` learned
//! directory names. Counter `kernel_negative_compactions`: how often stale
//! slots were dropped.
//! Locking: `tracked`, then the engine (through `DirProbe`), then
//! `dir_names`; none held while notifying.

use crate::stats::Stats;
use churnfs_vfs::DirShape;
use foldhash::HashMap;
use std::collections::{HashSet, VecDeque};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};

/// A directory's node and a name in it, as the kernel was last told.
type Name = (u64, Box<[u8]>);

/// A note made after the reply: the name, and for a lookup's miss the
/// engine's count of drains read before the lookup (`DirProbe::missing`).
type Deferred = (u64, Box<[u8]>, Option<u64>);

/// A tracked name: its directory and the name, shared between the
/// directory's map and the arrival queue (one allocation per note).
type Key = (u64, Arc<[u8]>);

/// The root's node id: it has no name to invalidate.
const ROOT: u64 = 1;

/// Directory names learned from lookups and mkdirs, at most this many; the
/// map is emptied when full (a directory not in it is dropped name by name).
const DIR_NAMES_MAX: usize = 4096;

/// Directories refused for a whole-directory drop are not asked about again
/// for this many notes.
const REFUSED_NOTES: u64 = 1024;

/// Notes one request may defer: a rename notes one name, a lookup one.
const DEFERRED_MAX: usize = 8;

thread_local! {
    /// Notes this thread defers until after its reply (`defer_notes`);
    /// `None` on a thread that notes at once.
    static DEFERRED: std::cell::RefCell<Option<Vec<Deferred>>> =
        const { std::cell::RefCell::new(None) };
}

/// From now on this thread's notes wait for `note_deferred`, which it calls
/// after each reply (the /dev/fuse readers, dev.rs): the caller then does
/// not wait for them.
pub fn defer_notes() {
    DEFERRED.with(|d| *d.borrow_mut() = Some(Vec::with_capacity(DEFERRED_MAX)));
}

/// What the engine knows about directories, for the whole-directory drop.
pub trait DirProbe: Send + Sync {
    /// Where directory `dir` sits and what it holds; `None` if it is not a
    /// live directory.
    fn shape(&self, dir: u64) -> Option<DirShape>;
    /// The node `name` in `parent` names, if any.
    fn child(&self, parent: u64, name: &[u8]) -> Option<u64>;
    /// Whether `name` in `parent` is known to be missing (false when it
    /// exists or the engine cannot tell). `missed_at`: for a name a lookup
    /// found missing, the engine's count of drains read before that lookup
    /// (`Engine::name_missing`).
    fn missing(&self, parent: u64, name: &[u8], _missed_at: Option<u64>) -> bool {
        self.child(parent, name).is_none()
    }
}

/// Names in arrival order, grouped by directory. A name that leaves
/// (`forget_name`) and comes back gets a new slot with a new generation; a
/// slot is live only while its generation is the name's current one, so
/// stale slots of a name used again are dropped at compaction instead of
/// kept (kept, a spool reusing its names would make every unlink walk the
/// whole queue).
///
/// Names are grouped by directory so that a whole directory leaves in O(1)
/// (`take_dir` moves its map out): the request handler whose note
/// overflows the budget must not walk the set (walking it kept that caller
/// waiting for every name of the directory; W7, docs/design.md §9).
struct Tracked {
    order: VecDeque<(Key, u64)>,
    /// Directory → its tracked names and their generations (never empty).
    dirs: HashMap<u64, DirNames>,
    /// Names in `dirs`, all directories together.
    len: usize,
    /// Directories refused for a whole-directory drop, and the note count
    /// until which they are not asked about again (at most 64 kept).
    refused: HashMap<u64, u64>,
    /// Directories dropped whole (at most 64 kept): each one's slots with a
    /// generation below its floor are stale, known without looking their
    /// names up (the queue's front after a drop is thousands of them).
    floors: HashMap<u64, u64>,
    notes: u64,
    next_gen: u64,
}

type DirNames = HashMap<Arc<[u8]>, u64>;

impl Tracked {
    fn generation(&self, dir: u64, name: &[u8]) -> Option<u64> {
        self.dirs.get(&dir)?.get(name).copied()
    }

    /// Whether the queue slot `(key, gen)` is the name's current one.
    fn live(&self, key: &Key, gen: u64) -> bool {
        if self.floors.get(&key.0).is_some_and(|f| gen < *f) {
            return false;
        }
        self.generation(key.0, &key.1) == Some(gen)
    }

    fn count(&self, dir: u64) -> usize {
        self.dirs.get(&dir).map_or(0, HashMap::len)
    }

    fn insert(&mut self, key: Key) {
        let gen = self.next_gen;
        self.next_gen += 1;
        let old = self
            .dirs
            .entry(key.0)
            .or_default()
            .insert(key.1.clone(), gen);
        assert!(old.is_none(), "a negative name is tracked twice");
        self.len += 1;
        self.order.push_back((key, gen));
    }

    fn remove(&mut self, dir: u64, name: &[u8]) -> bool {
        let Some(names) = self.dirs.get_mut(&dir) else {
            return false;
        };
        if names.remove(name).is_none() {
            return false;
        }
        if names.is_empty() {
            self.dirs.remove(&dir);
        }
        self.len -= 1;
        true
    }

    /// Every tracked name of `dir` but `keep`, the name noted last (the
    /// newest slot), which stays tracked with its generation. O(1): the
    /// directory's map moves out. The map that takes its place is made
    /// with room for as many names as left, since a directory churned once
    /// is likely churned again (growing it would rehash it a dozen times).
    fn take_dir(&mut self, dir: u64, keep: &[u8]) -> DirNames {
        let mut names = self.dirs.remove(&dir).unwrap_or_default();
        self.len -= names.len();
        if let Some((k, g)) = names.remove_entry(keep) {
            let mut m = DirNames::with_capacity_and_hasher(names.len() + 1, Default::default());
            m.insert(k, g);
            self.dirs.insert(dir, m);
            self.len += 1;
            // Every other slot of `dir` is older than `keep`'s.
            if self.floors.len() >= 64 {
                self.floors.clear();
            }
            self.floors.insert(dir, g);
        }
        names
    }

    /// Drops stale slots at the front of the arrival queue, at most `n`.
    /// With no stale slot anywhere (one slot per tracked name) it looks at
    /// nothing: a live front slot is the oldest name, whose lookup would
    /// miss every cache.
    fn pop_stale(&mut self, n: usize) {
        for _ in 0..n {
            if self.order.len() == self.len {
                return;
            }
            match self.order.front() {
                Some((k, g)) if !self.live(k, *g) => {
                    self.order.pop_front();
                }
                _ => return,
            }
        }
    }
}

/// What the side thread is handed.
enum Batch {
    /// Invalidate each name.
    Names(Vec<Key>),
    /// Invalidate directory `dir` (named `name` in `parent`): the kernel
    /// drops every unused dentry in it, `names` (of `dir`) among them. If
    /// that is refused, `names` one by one.
    Dir {
        dir: u64,
        parent: u64,
        name: Box<[u8]>,
        names: DirNames,
        /// The directory's path below the mountpoint, when every ancestor's
        /// name is known: walked after the notification (see `start`).
        path: Option<PathBuf>,
    },
}

pub struct KernelNegatives {
    tracked: Mutex<Tracked>,
    budget: usize,
    tx: Mutex<Option<SyncSender<Batch>>>,
    stats: Arc<Stats>,
    probe: Option<Box<dyn DirProbe>>,
    /// Directory node → (its parent, its name), as the kernel last heard.
    dir_names: Mutex<HashMap<u64, Name>>,
    /// The kernel keeps the negative dentries it is asked to drop
    /// (`RefusalWatch`): misses are answered with no TTL, which the kernel
    /// drops at the last reference (its `d_delete` of an expired dentry).
    refused: Arc<AtomicBool>,
}

/// Tells a kernel that refuses to drop negative dentries from one whose
/// cache lost a few: ENOENT is the answer for a name not in the cache, and
/// also, on Linux 6.19 to 7.1.x, for a negative dentry the kernel keeps.
/// Three batches in a row of at least `MIN` names with nine in ten
/// answered ENOENT say the kernel refuses.
#[derive(Default)]
pub struct RefusalWatch {
    in_a_row: u32,
}

impl RefusalWatch {
    const MIN: usize = 32;

    /// One batch: `asked` names, `enoent` of them answered ENOENT. True
    /// once the kernel is taken to refuse.
    pub fn batch(&mut self, asked: usize, enoent: usize) -> bool {
        if asked >= Self::MIN {
            if enoent * 10 >= asked * 9 {
                self.in_a_row += 1;
            } else {
                self.in_a_row = 0;
            }
        }
        self.in_a_row >= 3
    }
}

impl KernelNegatives {
    /// `budget == 0` turns tracking off (the kernel keeps what it keeps).
    /// Without a `probe`, names are always dropped one by one.
    pub fn new(
        budget: usize,
        stats: Arc<Stats>,
        probe: Option<Box<dyn DirProbe>>,
    ) -> KernelNegatives {
        Stats::set(&stats.kernel_negative_budget, budget as u64);
        KernelNegatives {
            tracked: Mutex::new(Tracked {
                order: VecDeque::new(),
                dirs: HashMap::default(),
                len: 0,
                refused: HashMap::default(),
                floors: HashMap::default(),
                notes: 0,
                next_gen: 0,
            }),
            budget,
            tx: Mutex::new(None),
            stats,
            probe,
            dir_names: Mutex::new(HashMap::default()),
            refused: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts the side thread that sends the invalidations. `mountpoint`
    /// is where this filesystem is mounted (for `MountGuard`).
    ///
    /// `session_fd` is a duplicate of the session's descriptor: a
    /// directory's notification is written there by hand, since fuser's
    /// `Notifier` reports the kernel's ENOENT (the name is not in its
    /// cache) as success, and for a directory that answer decides whether
    /// its names must go one by one.
    pub fn start(
        &self,
        session_fd: OwnedFd,
        mountpoint: PathBuf,
        started: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<()> {
        // A few batches may wait; beyond that `note` sends nothing rather
        // than block a request handler (the names are dropped from tracking
        // and counted).
        let (tx, rx) = sync_channel::<Batch>(8);
        let stats = self.stats.clone();
        let refused = self.refused.clone();
        let mut watch = RefusalWatch::default();
        std::thread::Builder::new()
            .name("churnfs-inval".into())
            .spawn(move || {
                started();
                let mut guard = MountGuard {
                    mountpoint,
                    dev: None,
                };
                for batch in rx {
                    let names = match batch {
                        Batch::Names(names) => names,
                        Batch::Dir {
                            dir,
                            parent,
                            name,
                            names,
                            path,
                        } => {
                            if guard.clear() {
                                match inval_entry_raw(&session_fd, parent, &name) {
                                    Ok(()) => {
                                        // A caller working in the directory
                                        // by relative names keeps the
                                        // dropped dentry; a walk by its
                                        // path puts that dentry back under
                                        // its name, so the next notification
                                        // finds it.
                                        if let Some(p) = path {
                                            let _ =
                                                std::fs::symlink_metadata(guard.mountpoint.join(p));
                                        }
                                        Stats::inc(&stats.kernel_negative_dir_flushes);
                                        Stats::add(
                                            &stats.kernel_negative_invalidated,
                                            names.len() as u64,
                                        );
                                        continue;
                                    }
                                    Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
                                    // Not in the kernel's cache under that
                                    // name (ENOENT: a caller's working
                                    // directory, dropped by an earlier
                                    // notification and not looked up by
                                    // name since, still holds its
                                    // children): name by name.
                                    Err(e) => {
                                        tracing::debug!("directory {dir}: {e}");
                                    }
                                }
                            }
                            tracing::debug!("directory {dir}: its names are dropped one by one");
                            Stats::inc(&stats.kernel_negative_dir_flush_refused);
                            names.into_keys().map(|n| (dir, n)).collect()
                        }
                    };
                    let (asked, mut enoent) = (names.len(), 0);
                    for (parent, name) in names {
                        match inval_entry_raw(&session_fd, parent, &name) {
                            Ok(()) => Stats::inc(&stats.kernel_negative_invalidated),
                            // The connection is gone: unmounting.
                            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return,
                            // Not in the kernel's cache, or a kernel that
                            // keeps negative dentries it is asked to drop.
                            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                                enoent += 1;
                                Stats::inc(&stats.kernel_negative_inval_enoent);
                            }
                            Err(_) => Stats::inc(&stats.kernel_negative_inval_failed),
                        }
                    }
                    if watch.batch(asked, enoent) && !refused.swap(true, Relaxed) {
                        Stats::set(&stats.kernel_negative_refused, 1);
                        tracing::warn!(
                            "the kernel answers ENOENT to nearly every negative dentry it is asked to drop (Linux 6.19 to 7.1 keep them): misses are answered with no TTL from now on, which the kernel does not keep"
                        );
                    }
                }
            })?;
        *self.tx.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        Ok(())
    }

    /// Whether the kernel was found to keep the negative dentries it is
    /// asked to drop: misses then go without a TTL.
    pub fn refused(&self) -> bool {
        self.refused.load(Relaxed)
    }

    /// As the side thread decides when the kernel refuses (tests).
    #[cfg(test)]
    pub(crate) fn refuse(&self) {
        self.refused.store(true, Relaxed);
    }

    /// The kernel now has a dentry for directory `dir` as `parent/name`.
    pub fn learn_dir(&self, dir: u64, parent: u64, name: &[u8]) {
        if self.budget == 0 || self.probe.is_none() {
            return;
        }
        let mut m = self.dir_names.lock().unwrap_or_else(|p| p.into_inner());
        if m.get(&dir)
            .is_some_and(|(p, n)| *p == parent && **n == *name)
        {
            return;
        }
        if m.len() >= DIR_NAMES_MAX {
            m.clear();
        }
        m.insert(dir, (parent, name.into()));
    }

    /// Whether every unused dentry in `dir` may be dropped at once, and if
    /// so under which name the kernel knows `dir`. `tracked` is how many
    /// names of `dir` we track.
    fn whole_dir(&self, dir: u64, tracked: usize) -> Option<(u64, Box<[u8]>)> {
        let probe = self.probe.as_ref()?;
        if dir == ROOT {
            return None;
        }
        let shape = probe.shape(dir)?;
        // Subdirectories: the kernel would also walk them, and detach any
        // mount below. Live names: their cached dentries go too, so they
        // may be at most a quarter of what is dropped.
        if shape.subdirs > 0 || shape.entries > tracked as u64 / 4 || shape.parent.0 == dir {
            return None;
        }
        let known = self.known_name(dir, shape.parent.0);
        match known {
            Some((parent, name)) if probe.child(parent, &name) == Some(dir) => Some((parent, name)),
            _ => {
                // Renamed or removed since we learned it (or never learned).
                self.dir_names
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&dir);
                None
            }
        }
    }

    /// The learned name of directory `dir`, if it was learned under the
    /// parent the engine gives it now (`parent_now`).
    fn known_name(&self, dir: u64, parent_now: u64) -> Option<Name> {
        let m = self.dir_names.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&dir).filter(|(up, _)| *up == parent_now).cloned()
    }

    /// The kernel may now hold a negative dentry for `parent/name`. On a
    /// thread that defers its notes (`defer_notes`), the note waits for
    /// `note_deferred`, after the request's reply.
    pub fn note(&self, parent: u64, name: &[u8]) {
        self.note_miss(parent, name, None);
    }

    /// `note` for a name a lookup found missing; `missed_at` is the
    /// engine's count of drains read before the lookup
    /// (`Engine::name_missing`).
    pub fn note_miss(&self, parent: u64, name: &[u8], missed_at: Option<u64>) {
        if self.budget == 0 {
            return;
        }
        let deferred = DEFERRED.with(|d| {
            let mut d = d.borrow_mut();
            // Beyond the bound (a thread that did not take its notes) the
            // note is made at once.
            match d.as_mut() {
                Some(pending) if pending.len() < DEFERRED_MAX => {
                    pending.push((parent, name.into(), missed_at));
                    true
                }
                _ => false,
            }
        });
        if !deferred {
            self.note_now(parent, name, None);
        }
    }

    /// Notes what this thread deferred since its last call. A name that
    /// exists again by now is not noted: it was created after the reply
    /// (its `forget_name` came before this), and tracking it would one day
    /// invalidate a positive dentry, which detaches any mount on it. The
    /// check is made under the lock `forget_name` takes, so a create that
    /// the check does not see removes the name after it is noted.
    pub fn note_deferred(&self) {
        let taken = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(v) if !v.is_empty() => Some(std::mem::take(v)),
            _ => None,
        });
        let Some(mut pending) = taken else { return };
        for (parent, name, missed_at) in pending.drain(..) {
            self.note_now(parent, &name, Some(missed_at));
        }
        // The emptied list goes back, with its room.
        DEFERRED.with(|d| {
            if let Some(v) = d.borrow_mut().as_mut() {
                *v = pending;
            }
        });
    }

    /// `recheck`: the reply already went out (see `note_deferred`); with
    /// the drains counted before the lookup that missed the name, if one did.
    fn note_now(&self, parent: u64, name: &[u8], recheck: Option<Option<u64>>) {
        let batch = {
            let mut t = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
            if t.generation(parent, name).is_some() {
                return;
            }
            // Not noted unless the engine says the name is missing: a
            // note skipped costs the budget one dentry, a positive name
            // tracked could detach a mount.
            if let Some(missed_at) = recheck {
                if self
                    .probe
                    .as_ref()
                    .is_some_and(|p| !p.missing(parent, name, missed_at))
                {
                    return;
                }
            }
            let key: Key = (parent, name.into());
            t.notes += 1;
            t.insert(key.clone());
            let mut batch = None;
            if t.len > self.budget {
                batch = self.whole_dir_batch(&mut t, &key);
            }
            if t.len > self.budget && batch.is_none() {
                // Invalidate down to 7/8 of the budget, so that
                // notifications go out in batches rather than one per note.
                let target = self.budget - self.budget / 8;
                let mut names = Vec::new();
                while t.len > target {
                    let Some((old, g)) = t.order.pop_front() else {
                        break;
                    };
                    if t.live(&old, g) {
                        t.remove(old.0, &old.1);
                        names.push(old);
                    }
                }
                batch = Some(Batch::Names(names));
            }
            // Stale slots (names created again, or dropped with their
            // directory) at the front go a few per note; the rest at
            // compaction.
            t.pop_stale(4);
            if t.order.len() > 2 * self.budget + 64 {
                // What is left is one slot per tracked name: the next
                // compaction is at least `budget + 64` notes away.
                let Tracked { order, dirs, .. } = &mut *t;
                order.retain(|(n, g)| dirs.get(&n.0).and_then(|m| m.get(&n.1)) == Some(g));
                // No slot below a floor is left.
                t.floors.clear();
                Stats::inc(&self.stats.kernel_negative_compactions);
            }
            assert!(
                t.len <= self.budget,
                "tracked negative names over the budget"
            );
            assert!(
                t.order.len() <= 2 * self.budget + 64,
                "tracked negative slots over their bound"
            );
            Stats::set(&self.stats.kernel_negative_tracked, t.len as u64);
            batch
        };
        let Some(batch) = batch else { return };
        let n = match &batch {
            Batch::Names(v) => v.len() as u64,
            Batch::Dir { names, .. } => names.len() as u64,
        };
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        match tx.as_ref().map(|tx| tx.try_send(batch)) {
            Some(Ok(())) => {}
            _ => Stats::add(&self.stats.kernel_negative_dropped, n),
        }
    }

    /// Over the budget: if the directory of the name just noted (`key`)
    /// holds enough of the tracked names and may be dropped whole, its
    /// names leave the set in one `Batch::Dir`. The name just noted stays
    /// tracked: its reply may not have been sent yet (it has on a thread
    /// that defers its notes), and the kernel makes its dentry after it,
    /// possibly after the directory was dropped. (Other
    /// names in flight at that moment, at most one per worker thread, are
    /// dropped with the directory's next notification.)
    fn whole_dir_batch(&self, t: &mut Tracked, key: &Key) -> Option<Batch> {
        let dir = key.0;
        let count = t.count(dir);
        if count < (self.budget / 8).max(2) {
            return None;
        }
        if t.refused.get(&dir).is_some_and(|until| t.notes < *until) {
            return None;
        }
        let Some((parent, name)) = self.whole_dir(dir, count) else {
            if t.refused.len() >= 64 {
                t.refused.clear();
            }
            let until = t.notes + REFUSED_NOTES;
            t.refused.insert(dir, until);
            return None;
        };
        let names = t.take_dir(dir, &key.1);
        let path = self.path_of(parent, &name);
        Some(Batch::Dir {
            dir,
            parent,
            name,
            names,
            path,
        })
    }

    /// The path below the mountpoint of `name` in directory `parent`, from
    /// the learned names of `parent` and its ancestors; `None` if one is
    /// unknown, stale or the chain is deeper than 64.
    fn path_of(&self, parent: u64, name: &[u8]) -> Option<PathBuf> {
        let probe = self.probe.as_ref()?;
        let mut parts: Vec<Box<[u8]>> = vec![name.into()];
        let mut at = parent;
        while at != ROOT {
            if parts.len() > 64 {
                return None;
            }
            let (up, n) = self.known_name(at, probe.shape(at)?.parent.0)?;
            parts.push(n);
            at = up;
        }
        Some(parts.iter().rev().map(|p| OsStr::from_bytes(p)).collect())
    }

    /// `parent/name` exists again: the kernel's dentry for it is positive.
    pub fn forget_name(&self, parent: u64, name: &[u8]) {
        if self.budget == 0 {
            return;
        }
        let mut t = self.tracked.lock().unwrap_or_else(|p| p.into_inner());
        if t.remove(parent, name) {
            Stats::set(&self.stats.kernel_negative_tracked, t.len as u64);
        }
    }

    pub fn tracked(&self) -> usize {
        self.tracked.lock().unwrap_or_else(|p| p.into_inner()).len
    }
}

/// FUSE_NOTIFY_INVAL_ENTRY for `parent/name` (`wire::notify`), with the
/// kernel's answer: `fuse_notify_inval_entry_out` (parent, name length,
/// flags 0), then the name and a NUL.
fn inval_entry_raw(fd: &OwnedFd, parent: u64, name: &[u8]) -> std::io::Result<()> {
    use crate::proto;
    use zerocopy::IntoBytes;
    let head = proto::NotifyInvalEntryOut {
        parent,
        namelen: name.len() as u32,
        flags: 0,
    };
    let mut body = Vec::with_capacity(size_of_val(&head) + name.len() + 1);
    body.extend_from_slice(head.as_bytes());
    body.extend_from_slice(name);
    body.push(0);
    crate::wire::notify(fd, proto::notify::INVAL_ENTRY, &body)
}

/// Before a whole directory is dropped: the kernel's `d_invalidate` detaches
/// every mount on a dentry below the directory, in every mount namespace.
/// Directories with subdirectories are never dropped whole; a mount on the
/// directory itself or on a file in it is found here: the guard refuses
/// while any mount namespace it can see through `/proc` has a mount whose
/// parent is a mount of this filesystem. Checked before every drop.
struct MountGuard {
    mountpoint: PathBuf,
    /// This filesystem's device number, read once.
    dev: Option<u64>,
}

impl MountGuard {
    fn clear(&mut self) -> bool {
        let dev = match self.dev {
            Some(d) => d,
            None => match std::fs::metadata(&self.mountpoint) {
                Ok(m) => *self.dev.insert(m.dev()),
                Err(_) => return false,
            },
        };
        let r = mounts_on(dev);
        match r {
            Ok(found) => !found,
            Err(e) => {
                tracing::debug!("mount check failed: {e}");
                false
            }
        }
    }
}

/// Whether a mount sits on a dentry of the filesystem with device `dev` in
/// any mount namespace of the processes in `/proc`.
fn mounts_on(dev: u64) -> std::io::Result<bool> {
    let want = (libc::major(dev), libc::minor(dev));
    let mut seen = HashSet::new();
    // Our own namespace first: it is where a mount is most likely.
    let mut tables = vec![PathBuf::from("/proc/self/mountinfo")];
    if let Ok(ns) = std::fs::read_link("/proc/self/ns/mnt") {
        seen.insert(ns);
    }
    for e in std::fs::read_dir("/proc")?.flatten() {
        let pid = e.file_name();
        if !pid.as_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let p = e.path();
        // A process that exits meanwhile, or a kernel thread, has none.
        if let Ok(ns) = std::fs::read_link(p.join("ns/mnt")) {
            if seen.insert(ns) {
                tables.push(p.join("mountinfo"));
            }
        }
    }
    for t in tables {
        let Ok(text) = std::fs::read_to_string(&t) else {
            continue;
        };
        if mount_on_dev(&text, want) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// In one mountinfo table: does a mount have, as its parent, a mount of
/// device `want` (major, minor)?
fn mount_on_dev(mountinfo: &str, want: (u32, u32)) -> bool {
    let mut ours = HashSet::new();
    let mut lines = Vec::new();
    for line in mountinfo.lines() {
        let mut f = line.split(' ');
        let (Some(id), Some(parent), Some(dev)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let Some((maj, min)) = dev.split_once(':') else {
            continue;
        };
        let (Ok(maj), Ok(min)) = (maj.parse::<u32>(), min.parse::<u32>()) else {
            continue;
        };
        if (maj, min) == want {
            ours.insert(id);
        }
        lines.push((id, parent));
    }
    // (A namespace's root mount is its own parent.)
    lines
        .iter()
        .any(|(id, parent)| ours.contains(parent) && id != parent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn tracking_stays_within_the_budget_and_skips_recreated_names() {
        let stats = Arc::new(Stats::default());
        let k = KernelNegatives::new(16, stats.clone(), None);
        for i in 0..100u32 {
            k.note(1, &i.to_le_bytes());
            assert!(k.tracked() <= 16);
        }
        // No side thread: every batch beyond the budget was counted as dropped.
        assert_eq!(
            stats.kernel_negative_dropped.load(Relaxed) + k.tracked() as u64,
            100
        );
        k.note(1, b"again");
        let before = k.tracked();
        k.note(1, b"again");
        assert_eq!(k.tracked(), before, "a name is tracked once");
        k.forget_name(1, b"again");
        assert_eq!(k.tracked(), before - 1);
    }

    /// A spool that reuses its names: each name is noted (unlinked),
    /// forgotten (created again), noted again, over and over. The queue
    /// stays within its bound and is compacted once per `budget + 64`
    /// notes at most, not at every note.
    #[test]
    fn names_used_again_leave_no_stale_slots_behind() {
        let stats = Arc::new(Stats::default());
        let k = KernelNegatives::new(16, stats.clone(), None);
        let rounds = 1_000u32;
        for _ in 0..rounds {
            for i in 0..10u32 {
                k.forget_name(1, &i.to_le_bytes());
                k.note(1, &i.to_le_bytes());
            }
        }
        assert_eq!(k.tracked(), 10);
        let slots = k.tracked.lock().unwrap().order.len();
        assert!(slots <= 2 * 16 + 64, "{slots} slots");
        let compactions = stats.kernel_negative_compactions.load(Relaxed);
        assert!(
            compactions <= u64::from(rounds) * 10 / (16 + 64),
            "{compactions} compactions for {} notes",
            rounds * 10
        );
        // Nothing over the budget: nothing was invalidated or dropped.
        assert_eq!(stats.kernel_negative_dropped.load(Relaxed), 0);
    }

    /// A fake engine: directory 5 named "d" in the root, holding
    /// `entries` names and `subdirs` directories.
    struct Dirs {
        entries: u64,
        subdirs: u32,
        named: u64,
    }

    impl DirProbe for Dirs {
        fn shape(&self, dir: u64) -> Option<DirShape> {
            (dir == 5).then_some(DirShape {
                parent: churnfs_vfs::Ino(1),
                entries: self.entries,
                subdirs: self.subdirs,
            })
        }
        fn child(&self, parent: u64, name: &[u8]) -> Option<u64> {
            (parent == 1 && name == b"d").then_some(self.named)
        }
    }

    /// Notes 17 names in directory 5 with a budget of 16; returns how many
    /// stay tracked (1 when the directory went whole, 14 when the oldest
    /// eighth went name by name).
    fn left_after_overflow(probe: Dirs, learn: bool) -> usize {
        let k = KernelNegatives::new(16, Arc::new(Stats::default()), Some(Box::new(probe)));
        if learn {
            k.learn_dir(5, 1, b"d");
        }
        for i in 0..17u32 {
            k.note(5, &i.to_le_bytes());
        }
        k.tracked()
    }

    #[test]
    fn a_directory_of_churned_names_goes_whole() {
        let ok = || Dirs {
            entries: 3,
            subdirs: 0,
            named: 5,
        };
        // All but the name just noted (its reply is still on its way).
        assert_eq!(left_after_overflow(ok(), true), 1);
        // The refusals: a subdirectory, too many live names, a name we
        // never heard, a name that now means another directory.
        assert_eq!(left_after_overflow(Dirs { subdirs: 1, ..ok() }, true), 14);
        assert_eq!(left_after_overflow(Dirs { entries: 5, ..ok() }, true), 14);
        assert_eq!(left_after_overflow(ok(), false), 14);
        assert_eq!(left_after_overflow(Dirs { named: 6, ..ok() }, true), 14);
    }

    /// Directory 5 churns past the budget again and again while directory 7
    /// (which never goes whole) holds a few old names: each overflow takes
    /// directory 5 out whole, directory 7's names stay, the queue's stale
    /// slots do not pile up, and every name noted is either still tracked
    /// or handed over (counted as dropped here: no side thread).
    #[test]
    fn a_directory_drop_leaves_other_directories_and_the_queue_bounded() {
        let stats = Arc::new(Stats::default());
        let probe = Dirs {
            entries: 0,
            subdirs: 0,
            named: 5,
        };
        let k = KernelNegatives::new(16, stats.clone(), Some(Box::new(probe)));
        k.learn_dir(5, 1, b"d");
        for i in 0..4u32 {
            k.note(7, &i.to_le_bytes());
        }
        let notes = 10_000u32;
        for i in 0..notes {
            k.note(5, &i.to_le_bytes());
            let t = k.tracked.lock().unwrap();
            assert_eq!(t.count(7), 4, "directory 7's names stay tracked");
            assert!(t.order.len() <= 2 * 16 + 64, "{} slots", t.order.len());
        }
        assert!(stats.kernel_negative_dropped.load(Relaxed) > 0);
        assert_eq!(
            stats.kernel_negative_dropped.load(Relaxed) + k.tracked() as u64,
            u64::from(notes) + 4
        );
        // A name that left with its directory is tracked again when noted.
        let first = 0u32.to_le_bytes();
        assert!(k.tracked.lock().unwrap().generation(5, &first).is_none());
        k.note(5, &first);
        assert!(k.tracked.lock().unwrap().generation(5, &first).is_some());
    }

    #[test]
    fn the_root_never_goes_whole() {
        struct Root;
        impl DirProbe for Root {
            fn shape(&self, _: u64) -> Option<DirShape> {
                Some(DirShape {
                    parent: churnfs_vfs::Ino(1),
                    entries: 0,
                    subdirs: 0,
                })
            }
            fn child(&self, _: u64, _: &[u8]) -> Option<u64> {
                Some(1)
            }
        }
        let k = KernelNegatives::new(16, Arc::new(Stats::default()), Some(Box::new(Root)));
        k.learn_dir(1, 1, b"x");
        for i in 0..17u32 {
            k.note(1, &i.to_le_bytes());
        }
        assert_eq!(k.tracked(), 14);
    }

    #[test]
    fn mounts_on_this_filesystem_are_found_in_mountinfo() {
        // 40 is this filesystem (0:50) at /mnt; 41 a bind mount of a file
        // inside it; 42 a bind mount of a subtree of it elsewhere.
        let base = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
                    40 22 0:50 / /mnt rw - fuse.churnfs /s rw\n";
        let on_ours = format!("{base}41 40 8:1 /etc/hosts /mnt/d/f rw - ext4 /dev/sda1 rw\n");
        let ours_elsewhere = format!("{base}42 22 0:50 /d /srv rw - fuse.churnfs /s rw\n");
        assert!(!mount_on_dev(base, (0, 50)));
        assert!(mount_on_dev(&on_ours, (0, 50)));
        assert!(!mount_on_dev(&ours_elsewhere, (0, 50)));
        assert!(!mount_on_dev(&on_ours, (0, 51)));
    }

    /// On a thread that defers its notes nothing is tracked until
    /// `note_deferred`; then a name still missing is, and a name that
    /// exists by then (created after the reply) is not. Other threads note
    /// at once.
    #[test]
    fn deferred_notes_skip_names_created_after_the_reply() {
        struct Made;
        impl DirProbe for Made {
            fn shape(&self, _: u64) -> Option<DirShape> {
                None
            }
            fn child(&self, _: u64, name: &[u8]) -> Option<u64> {
                (name == b"made").then_some(9)
            }
        }
        let k = KernelNegatives::new(16, Arc::new(Stats::default()), Some(Box::new(Made)));
        std::thread::scope(|s| {
            s.spawn(|| {
                defer_notes();
                k.note(1, b"missing");
                k.note(1, b"made");
                assert_eq!(k.tracked(), 0);
                k.note_deferred();
                assert_eq!(k.tracked(), 1);
                let t = k.tracked.lock().unwrap();
                assert!(t.generation(1, b"missing").is_some());
                assert!(t.generation(1, b"made").is_none());
            });
        });
        k.note(1, b"now");
        assert_eq!(k.tracked(), 2);
    }

    #[test]
    fn three_batches_answered_enoent_in_a_row_say_the_kernel_refuses() {
        // (asked, answered ENOENT, refusing after it)
        let table = [
            (64, 64, false),
            (64, 60, false),
            (64, 10, false), // a healthy batch starts the count again
            (64, 64, false),
            (10, 10, false), // too small to count either way
            (64, 58, false),
            (64, 64, true),
            (64, 0, true), // once refusing, refusing
        ];
        let mut w = RefusalWatch::default();
        let mut once = false;
        for (i, (asked, enoent, want)) in table.into_iter().enumerate() {
            once |= w.batch(asked, enoent);
            assert_eq!(once, want, "batch {i}");
        }
    }

    #[test]
    fn zero_budget_tracks_nothing() {
        let k = KernelNegatives::new(0, Arc::new(Stats::default()), None);
        k.note(1, b"x");
        assert_eq!(k.tracked(), 0);
    }
}
