//! W6 directory after churn: a directory of L live files that has then seen C
//! create/unlink cycles, against a fresh directory of L files: list it
//! (`ls -f`: readdir only) and stat every file. The suite runs the measure
//! again after a remount (`--measure-only`).

use crate::util::Out;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Args {
    pub dir: PathBuf,
    pub live: u64,
    pub churn: u64,
    pub measure_only: bool,
    pub max_secs: Option<f64>,
}

/// Times each measure is repeated (the median is reported).
const REPEAT: usize = 3;

fn fill(dir: &Path, live: u64) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for i in 0..live {
        let p = dir.join(format!("f{i:07}"));
        std::fs::write(&p, b"live").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// `ls -f`: read every entry; returns (entries, seconds).
fn list(dir: &Path) -> Result<(Vec<std::ffi::OsString>, f64), String> {
    let t = Instant::now();
    let names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("readdir {}: {e}", dir.display()))?;
    Ok((names, t.elapsed().as_secs_f64()))
}

fn stat_all(dir: &Path, names: &[std::ffi::OsString]) -> Result<f64, String> {
    let t = Instant::now();
    for n in names {
        let p = dir.join(n);
        std::fs::symlink_metadata(&p).map_err(|e| format!("stat {}: {e}", p.display()))?;
    }
    Ok(t.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    let churned = a.dir.join("churned");
    let fresh = a.dir.join("fresh");
    if !a.measure_only {
        out.put("live", a.live);
        fill(&churned, a.live)?;
        let deadline = a.max_secs.map(Duration::from_secs_f64);
        let t = Instant::now();
        let mut done = 0;
        for i in 0..a.churn {
            let p = churned.join(format!("c{i:09}"));
            std::fs::write(&p, b"c").map_err(|e| format!("{}: {e}", p.display()))?;
            std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            done = i + 1;
            if done % 1024 == 0 && deadline.is_some_and(|d| t.elapsed() > d) {
                break;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        out.put("churn", done);
        out.num("churn_s", secs);
        out.num("churn_per_s", done as f64 / secs);
        fill(&fresh, a.live)?;
        // Both directories durable before they are measured, so that the
        // fresh one's times are not those of a commit of its creates still
        // in flight (a filesystem that delays metadata writes would
        // otherwise be measured writing them).
        for d in [&churned, &fresh] {
            std::fs::File::open(d)
                .and_then(|f| f.sync_all())
                .map_err(|e| format!("fsync {}: {e}", d.display()))?;
        }
    }
    let mut m: [Vec<f64>; 4] = Default::default();
    for _ in 0..REPEAT {
        for (k, d) in [&churned, &fresh].into_iter().enumerate() {
            let (names, ls) = list(d)?;
            if (names.len() as u64) < a.live && !a.measure_only {
                return Err(format!(
                    "{} lists {} entries, expected {}",
                    d.display(),
                    names.len(),
                    a.live
                ));
            }
            m[k].push(ls);
            m[2 + k].push(stat_all(d, &names)?);
        }
    }
    let [cl, fl, cs, fs] = m.map(median);
    out.num("churned_readdir_ms", cl * 1e3);
    out.num("fresh_readdir_ms", fl * 1e3);
    out.num("churned_stat_ms", cs * 1e3);
    out.num("fresh_stat_ms", fs * 1e3);
    out.num("readdir_ratio", cl / fl);
    out.num("stat_ratio", cs / fs);
    Ok(out)
}
