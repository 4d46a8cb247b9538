//! W7 FUSE floor: stat() of a name that does not exist and of a file that
//! does, each in a loop for a fixed time; operations per second. Then stat()
//! of a new missing name each time (`first_missing`): every call is a first
//! miss, which no negative cache can answer.
//!
//! Two figures for first misses: `fresh_missing_us`, the first
//! `FRESH_NAMES` new names after the mount (fewer than churnfs's default
//! budget of kernel negative dentries, so none is invalidated to make room),
//! and `first_missing_us`, new names for `secs`, past any such budget (on
//! churnfs every miss then also costs one invalidation; docs/design.md §9).
//!
//! The fresh names come after a second's sleep. The loops before them keep
//! this process on the CPU without a pause wherever the kernel answers them
//! from its caches (churnfs's TTLs), but half asleep on a server that sees
//! every call (the floors' zero TTLs), and a process that has just run
//! flat out is moved to the idle CPU at each wake-up for its first thousand
//! or so requests, away from the queue thread polling for it: on churnfs
//! and on the io_uring floor alike, the first 1,000 misses then took 1.5 to
//! 3 times as long (`bench/results/2026-11-26-w7-rest/`). The sleep gives
//! every target the same start.

use crate::util::{self, cstr, Out};
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// New names looked up once each before the timed stream of first misses.
const FRESH_NAMES: usize = 5_000;

pub struct Args {
    pub dir: PathBuf,
    pub secs: f64,
}

/// What `spin` stats: one path each time, or a new name in a directory
/// each time (`w7-miss-N`, N counting from the second field).
enum Target<'a> {
    Same(&'a CStr),
    New(&'a Path, u64),
}

/// Stats `target` for about `secs`; returns (calls, seconds, calls that
/// failed with an errno other than the one expected).
fn spin(target: &Target, secs: f64, expect_missing: bool) -> (u64, f64, u64) {
    let limit = Duration::from_secs_f64(secs);
    // SAFETY: an all-zero stat is a valid buffer for stat() to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let mut calls = 0u64;
    let mut wrong = 0u64;
    let t = Instant::now();
    loop {
        // New names are made a round at a time (well under a µs each,
        // against a round trip of tens of µs; the time includes them).
        let new: Vec<_> = match target {
            Target::Same(_) => Vec::new(),
            Target::New(dir, start) => (0..256u64)
                .map(|i| cstr(&dir.join(format!("w7-miss-{}", start + calls + i))))
                .collect(),
        };
        for i in 0..256 {
            let path = match (target, new.get(i)) {
                (_, Some(n)) => n.as_c_str(),
                (Target::Same(p), None) => p,
                (Target::New(..), None) => unreachable!("256 new names per round"),
            };
            // SAFETY: path is a valid C string and st a valid buffer.
            let r = unsafe { libc::stat(path.as_ptr(), &mut st) };
            let ok = if expect_missing {
                r != 0 && util::last_errno() == libc::ENOENT
            } else {
                r == 0
            };
            if !ok {
                wrong += 1;
            }
        }
        calls += 256;
        if t.elapsed() >= limit {
            break;
        }
    }
    (calls, t.elapsed().as_secs_f64(), wrong)
}

/// A file to stat: one made here, or, where the target refuses to create
/// (the floor server), the first regular file the directory lists.
fn existing(dir: &Path) -> Result<PathBuf, String> {
    let p = dir.join("w7-existing");
    if std::fs::write(&p, b"w7").is_ok() {
        return Ok(p);
    }
    std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .find(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .ok_or_else(|| format!("cannot create or find a file in {}", dir.display()))
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    let missing = a.dir.join("w7-no-such-name");
    if missing.symlink_metadata().is_ok() {
        return Err(format!("{} exists", missing.display()));
    }
    let existing = existing(&a.dir)?;
    for (label, path, miss) in [("missing", missing, true), ("existing", existing, false)] {
        let c = cstr(&path);
        spin(&Target::Same(&c), 0.05, miss);
        let (calls, secs, wrong) = spin(&Target::Same(&c), a.secs, miss);
        if wrong > 0 {
            return Err(format!(
                "stat of the {label} name gave an unexpected answer {wrong} times"
            ));
        }
        out.num(format!("{label}_per_s"), calls as f64 / secs);
        out.num(format!("{label}_us"), secs * 1e6 / calls as f64);
    }
    std::thread::sleep(Duration::from_secs(1));
    let fresh: Vec<_> = (0..FRESH_NAMES)
        .map(|i| cstr(&a.dir.join(format!("w7-fresh-{i}"))))
        .collect();
    // SAFETY: an all-zero stat is a valid buffer for stat() to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let t = Instant::now();
    for p in &fresh {
        // SAFETY: p is a valid C string and st a valid buffer.
        let r = unsafe { libc::stat(p.as_ptr(), &mut st) };
        if r == 0 || util::last_errno() != libc::ENOENT {
            return Err(format!("stat of {p:?} did not answer ENOENT"));
        }
    }
    let secs = t.elapsed().as_secs_f64();
    out.num("fresh_missing_per_s", FRESH_NAMES as f64 / secs);
    out.num("fresh_missing_us", secs * 1e6 / FRESH_NAMES as f64);
    let (warm, _, _) = spin(&Target::New(&a.dir, 0), 0.05, true);
    let (calls, secs, wrong) = spin(&Target::New(&a.dir, warm), a.secs, true);
    if wrong > 0 {
        return Err(format!(
            "stat of a new missing name gave an unexpected answer {wrong} times"
        ));
    }
    out.num("first_missing_per_s", calls as f64 / secs);
    out.num("first_missing_us", secs * 1e6 / calls as f64);
    Ok(out)
}

pub struct PairArgs {
    pub dir: PathBuf,
    pub against: PathBuf,
    pub secs: f64,
    pub slice_ms: u64,
    pub warm_secs: f64,
}

/// First misses in `dir` and in `against` (the floor), in alternating
/// slices of `slice_ms` for `secs` in all: a ratio taken pair by pair, so
/// that the machine's drift from minute to minute (on this project's VM,
/// ±10% between runs of one build) falls on both sides alike. Each side
/// first looks up new names for `warm_secs`, past any budget of cached
/// misses. Within a pair the order alternates. Reports the median of the
/// per-pair ratios and of each side's µs per miss.
pub fn run_pair(a: PairArgs) -> Result<Out, String> {
    let dirs = [&a.dir, &a.against];
    let mut next = [0u64; 2];
    for (i, d) in dirs.iter().enumerate() {
        let (calls, _, wrong) = spin(&Target::New(d, 0), a.warm_secs, true);
        if wrong > 0 {
            return Err(format!("{}: a new missing name was found", d.display()));
        }
        next[i] = calls;
    }
    let slice = a.slice_ms as f64 / 1e3;
    let pairs = ((a.secs / (2.0 * slice)).ceil() as usize).max(1);
    let mut us = [Vec::with_capacity(pairs), Vec::with_capacity(pairs)];
    let mut ratios = Vec::with_capacity(pairs);
    for p in 0..pairs {
        let mut pair = [0.0f64; 2];
        for k in 0..2 {
            let i = if p % 2 == 0 { k } else { 1 - k };
            let (calls, secs, wrong) = spin(&Target::New(dirs[i], next[i]), slice, true);
            if wrong > 0 {
                return Err(format!(
                    "{}: a new missing name was found",
                    dirs[i].display()
                ));
            }
            next[i] += calls;
            pair[i] = secs * 1e6 / calls as f64;
        }
        us[0].push(pair[0]);
        us[1].push(pair[1]);
        ratios.push(pair[0] / pair[1]);
    }
    for v in us.iter_mut().chain([&mut ratios]) {
        v.sort_by(f64::total_cmp);
    }
    let mut out = Out::default();
    out.put("pairs", pairs);
    out.num("first_missing_us", util::percentile(&us[0], 50.0));
    out.num("against_first_missing_us", util::percentile(&us[1], 50.0));
    out.num("first_missing_ratio", util::percentile(&ratios, 50.0));
    out.num("first_missing_ratio_p25", util::percentile(&ratios, 25.0));
    out.num("first_missing_ratio_p75", util::percentile(&ratios, 75.0));
    Ok(out)
}
