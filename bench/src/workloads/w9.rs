//! W9 tree delete: a tree of small files (DIRS directories sharing FILES
//! files of 1 KiB) and LARGE files of 8 MiB is removed with `rm -rf` while
//! W2's spool churn runs beside it in another directory. Reports the time
//! until `rm` returns, the time until the filesystem's delete backlog has
//! drained (churnfs: `delete_backlog` in `churnfs stats`; other targets
//! say nothing of theirs), and W2's rate beside the delete (until the
//! backlog drained, or `rm` returned where there is none) against alone.
//! The tree is made durable (every file and directory fsynced) and the
//! filesystem's backlog left to drain before W2 runs alone, so that the
//! rate alone is not taken while the build is still being written out.

use crate::util::{self, cstr, Out};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Args {
    pub dir: PathBuf,
    pub files: u64,
    pub dirs: u64,
    pub large: u64,
    /// Seconds of W2 alone, for the rate beside the delete to compare with.
    pub w2_secs: f64,
}

const SMALL: usize = 1024;
const LARGE: usize = 8 << 20;
/// The longest the backlog is waited for.
const DRAIN_MAX: Duration = Duration::from_secs(600);

fn build(tree: &Path, a: &Args) -> Result<(), String> {
    let e = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let small = vec![b's'; SMALL];
    let dirs = a.dirs.max(1);
    for d in 0..dirs {
        let dir = tree.join(format!("d{d:04}"));
        std::fs::create_dir_all(&dir).map_err(|x| e(&dir, x))?;
        let n = a.files / dirs + u64::from(d < a.files % dirs);
        for f in 0..n {
            let p = dir.join(format!("f{f:06}"));
            std::fs::write(&p, &small).map_err(|x| e(&p, x))?;
        }
    }
    let big = vec![b'l'; LARGE];
    let ld = tree.join("large");
    std::fs::create_dir_all(&ld).map_err(|x| e(&ld, x))?;
    for f in 0..a.large {
        let p = ld.join(format!("l{f:04}"));
        std::fs::write(&p, &big).map_err(|x| e(&p, x))?;
    }
    Ok(())
}

/// fsyncs every file and directory under `tree`, deepest first.
fn make_durable(tree: &Path) -> Result<(), String> {
    let e = |p: &Path, e: std::io::Error| format!("fsync {}: {e}", p.display());
    for ent in std::fs::read_dir(tree).map_err(|x| e(tree, x))? {
        let p = ent.map_err(|x| e(tree, x))?.path();
        if p.is_dir() {
            make_durable(&p)?;
        } else {
            std::fs::File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(|x| e(&p, x))?;
        }
    }
    std::fs::File::open(tree)
        .and_then(|f| f.sync_all())
        .map_err(|x| e(tree, x))
}

/// Waits (up to `DRAIN_MAX`) for the delete backlog of the filesystem
/// holding `dir` to reach 0; the seconds it took, None where the
/// filesystem reports none.
fn wait_drained(dir: &Path, from: Instant) -> Option<f64> {
    while from.elapsed() < DRAIN_MAX {
        match backlog(dir) {
            Some(0) => return Some(from.elapsed().as_secs_f64()),
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
            None => return None,
        }
    }
    None
}

/// W2's cycle in `dir` until `stop`, counting cycles in `done`.
fn churn(dir: &Path, stop: &AtomicBool, done: &AtomicU64) -> Result<(), String> {
    let me = std::process::id();
    let payload = [b'q'; 100];
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let path = cstr(&dir.join(format!("s{me}-{i}")));
        crate::workloads::w2::one(&path, &payload, false)
            .map_err(|e| format!("W2 beside the delete, iteration {i}: {e}"))?;
        i += 1;
        done.store(i, Ordering::Relaxed);
    }
    Ok(())
}

/// churnfs's delete backlog at the mount holding `dir`; None for a
/// filesystem that does not report one.
fn backlog(dir: &Path) -> Option<u64> {
    let root = util::mountpoint_of(dir)?;
    let bin = std::env::var_os("CHURNFS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let t = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                        .join(".cache/churnfs-target")
                });
            t.join("release/churnfs")
        });
    let out = std::process::Command::new(bin)
        .arg("stats")
        .arg(&root)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("delete_backlog ")?.trim().parse().ok())
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    let tree = a.dir.join("tree");
    let spool = a.dir.join("spool");
    std::fs::create_dir_all(&spool).map_err(|e| format!("{}: {e}", spool.display()))?;
    let (built, build_s) = util::timed(|| build(&tree, &a));
    built?;
    out.put("files", a.files);
    out.put("large", a.large);
    out.num("build_s", build_s);
    let (durable, sync_s) = util::timed(|| make_durable(&tree));
    durable?;
    out.num("sync_s", sync_s);
    wait_drained(&a.dir, Instant::now());

    // W2 alone.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let worker = {
        let (stop, done, spool) = (stop.clone(), done.clone(), spool.clone());
        std::thread::spawn(move || churn(&spool, &stop, &done))
    };
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(a.w2_secs));
    let alone = done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64();

    // The delete, W2 still running.
    let c0 = done.load(Ordering::Relaxed);
    let t1 = Instant::now();
    let rm = std::process::Command::new("rm")
        .arg("-rf")
        .arg(&tree)
        .status()
        .map_err(|e| format!("rm: {e}"))?;
    let rm_s = t1.elapsed().as_secs_f64();
    let drained = if rm.success() {
        wait_drained(&a.dir, t1)
    } else {
        None
    };
    let beside = (done.load(Ordering::Relaxed) - c0) as f64 / t1.elapsed().as_secs_f64().max(rm_s);
    stop.store(true, Ordering::Relaxed);
    worker
        .join()
        .map_err(|_| "the W2 thread panicked".to_string())??;
    if !rm.success() {
        return Err(format!("rm -rf failed: {rm}"));
    }
    out.num("rm_s", rm_s);
    out.num("rm_files_per_s", (a.files + a.large) as f64 / rm_s);
    if let Some(d) = drained {
        out.num("drain_s", d);
    }
    out.num("w2_alone", alone);
    out.num("w2_beside", beside);
    out.num("w2_beside_ratio", beside / alone);
    Ok(out)
}
