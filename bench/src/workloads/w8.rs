//! W8 spool across machines: a producer on one mount creates small files in
//! a spool directory; a consumer on a second mount of the same namespace
//! lists the directory, reads every new file and unlinks it. Each file
//! carries the time its create began (one clock: both mounts are on this
//! machine), so the consumer measures create-to-visible latency: from the
//! producer's create to the consumer holding the file's whole content.
//! Files lost (produced, never consumed) and duplicated (consumed, then
//! read again after the consumer unlinked it) must both be 0.

use crate::util::Out;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct Args {
    /// The producer's directory (on the first mount).
    pub dir: PathBuf,
    /// The same directory through the second mount.
    pub other: PathBuf,
    pub files: u64,
    pub max_secs: f64,
}

/// Bytes of each file: a 20-digit time in ns, a newline, padding.
const FILE_BYTES: usize = 100;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn content(t: u128) -> Vec<u8> {
    let mut b = format!("{t:020}\n").into_bytes();
    b.resize(FILE_BYTES, b'.');
    b
}

/// The producer's time in a file's content, once the content is whole.
fn stamp(b: &[u8]) -> Option<u128> {
    if b.len() != FILE_BYTES || b[20] != b'\n' {
        return None;
    }
    std::str::from_utf8(&b[..20]).ok()?.parse().ok()
}

fn produce(dir: &Path, files: u64, stop: &AtomicBool) -> Result<u64, String> {
    for i in 0..files {
        if stop.load(Ordering::Relaxed) {
            return Ok(i);
        }
        let p = dir.join(format!("p{i:09}"));
        std::fs::write(&p, content(now_ns())).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(files)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    let spool = a.dir.join("spool");
    std::fs::create_dir_all(&spool).map_err(|e| format!("{}: {e}", spool.display()))?;
    let theirs = a.other.join("spool");
    let t0 = Instant::now();
    while !theirs.is_dir() {
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "{} never appeared on the second mount",
                theirs.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    out.num("spool_visible_s", t0.elapsed().as_secs_f64());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut producer = Some({
        let (spool, stop, files) = (spool.clone(), stop.clone(), a.files);
        std::thread::spawn(move || produce(&spool, files, &stop))
    });
    let deadline = started + Duration::from_secs_f64(a.max_secs);
    let mut consumed: HashSet<String> = HashSet::new();
    let mut lat_ms: Vec<f64> = Vec::new();
    let mut duplicated = 0u64;
    let mut last_consumed = started;
    let mut produced: Option<u64> = None;
    // Once the producer is done, the consumer keeps looking this long for
    // what it has not seen (then the rest is lost).
    let grace = Duration::from_secs(10);
    let mut done_at: Option<Instant> = None;
    loop {
        if let Some(p) = producer.take_if(|p| p.is_finished()) {
            let n = p
                .join()
                .map_err(|_| "the producer panicked".to_string())??;
            produced = Some(n);
            done_at = Some(Instant::now());
        }
        if let Some(n) = produced {
            if consumed.len() as u64 >= n || done_at.is_some_and(|d| d.elapsed() > grace) {
                break;
            }
        }
        if Instant::now() > deadline {
            stop.store(true, Ordering::Relaxed);
        }
        let listing =
            std::fs::read_dir(&theirs).map_err(|e| format!("{}: {e}", theirs.display()))?;
        let mut names: Vec<String> = listing
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        let mut got = 0;
        for name in names {
            let p = theirs.join(&name);
            if consumed.contains(&name) {
                // A name this consumer removed: seen again only if the
                // file can still be read.
                if std::fs::read(&p).is_ok() {
                    duplicated += 1;
                }
                continue;
            }
            let Ok(b) = std::fs::read(&p) else { continue };
            let Some(t) = stamp(&b) else { continue };
            let now = now_ns();
            lat_ms.push(now.saturating_sub(t) as f64 / 1e6);
            std::fs::remove_file(&p).map_err(|e| format!("unlink {}: {e}", p.display()))?;
            consumed.insert(name);
            last_consumed = Instant::now();
            got += 1;
        }
        if got == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let produced = produced.unwrap_or(0);
    let secs = last_consumed.duration_since(started).as_secs_f64();
    lat_ms.sort_by(f64::total_cmp);
    out.put("files", produced);
    out.put("consumed", consumed.len());
    out.num("secs", secs);
    out.num("files_per_s", consumed.len() as f64 / secs.max(1e-9));
    out.num("visible_p50_ms", percentile(&lat_ms, 0.5));
    out.num("visible_p99_ms", percentile(&lat_ms, 0.99));
    out.num("visible_max_ms", lat_ms.last().copied().unwrap_or(f64::NAN));
    out.put("lost", produced.saturating_sub(consumed.len() as u64));
    out.put("duplicated", duplicated);
    if produced < a.files {
        out.put("capped", "1");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_reads_back_only_from_whole_content() {
        let b = content(1_234_567_890_123);
        assert_eq!(stamp(&b), Some(1_234_567_890_123));
        assert_eq!(stamp(&b[..50]), None);
        assert_eq!(stamp(b""), None);
    }

    #[test]
    fn percentiles_of_a_sorted_list() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 51.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert!(percentile(&[], 0.5).is_nan());
    }
}
