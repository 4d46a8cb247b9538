//! W2 spool churn: M times create a unique name, write ~100 bytes, close,
//! unlink (variant B unlinks before the close). Reports the rate of each tenth
//! of the run and what the run left behind: daemon RSS, kernel negative
//! dentries, reclaimable slab.

use crate::util::{self, cstr, Out};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Args {
    pub dir: PathBuf,
    pub iters: u64,
    pub unlink_first: bool,
    pub pid: Option<u32>,
    pub max_secs: Option<f64>,
    pub bytes: usize,
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    let pid = a.pid.or_else(|| util::find_daemon(&a.dir));
    out.put("variant", if a.unlink_first { "b" } else { "a" });
    out.put("iters", a.iters);
    if let Some(p) = pid {
        out.put("daemon_pid", p);
    }
    let rss0 = pid.and_then(util::rss_kb);
    let neg0 = util::negative_dentries();
    let srec0 = util::meminfo_kb("SReclaimable");

    let payload = vec![b'q'; a.bytes];
    // A mark every hundredth of the run; tenths are made from them, so a run
    // stopped by --max-secs still reports the tenths of what it did.
    let step = (a.iters / 100).max(1);
    let mut marks: Vec<(u64, f64)> = Vec::with_capacity(101);
    let deadline = a.max_secs.map(Duration::from_secs_f64);
    // The daemon's RSS once warm: after a tenth of the run, at most 100k
    // iterations, the baseline #7's memory bound is measured from.
    let warm_at = warm_at(a.iters);
    let mut rss_warm = None;
    let me = std::process::id();
    let t0 = Instant::now();
    marks.push((0, 0.0));
    let mut done = 0;
    for i in 0..a.iters {
        let path = cstr(&a.dir.join(format!("s{me}-{i}")));
        one(&path, &payload, a.unlink_first).map_err(|e| format!("iteration {i}: {e}"))?;
        done = i + 1;
        if done == warm_at {
            rss_warm = pid.and_then(util::rss_kb);
        }
        if done % step == 0 || done == a.iters {
            let now = t0.elapsed();
            marks.push((done, now.as_secs_f64()));
            if deadline.is_some_and(|d| now > d) {
                break;
            }
        }
    }
    let total = t0.elapsed().as_secs_f64();
    let rss1 = pid.and_then(util::rss_kb);
    let neg1 = util::negative_dentries();
    let srec1 = util::meminfo_kb("SReclaimable");

    out.put("done", done);
    out.num("secs", total);
    out.num("rate", done as f64 / total);
    let rates = tenths(&marks);
    for (k, r) in rates.iter().enumerate() {
        out.num(format!("tenth{}", k + 1), *r);
    }
    if rates.len() >= 2 {
        out.num("last_over_first", rates[rates.len() - 1] / rates[0]);
    }
    if let (Some(a0), Some(a1)) = (rss0, rss1) {
        out.put("rss_kb_before", a0);
        out.put("rss_kb_after", a1);
        out.put("rss_kb_added", a1 as i64 - a0 as i64);
    }
    if let (Some(w), Some(a1)) = (rss_warm, rss1) {
        out.put("rss_warm_at", warm_at);
        out.put("rss_kb_warm", w);
        out.put("rss_kb_added_after_warm", a1 as i64 - w as i64);
    }
    if let (Some(a0), Some(a1)) = (neg0, neg1) {
        out.put("neg_dentries_before", a0);
        out.put("neg_dentries_after", a1);
        out.put("neg_dentries_added", a1 as i64 - a0 as i64);
    }
    if let (Some(a0), Some(a1)) = (srec0, srec1) {
        out.put("sreclaimable_kb_before", a0);
        out.put("sreclaimable_kb_after", a1);
        out.put("sreclaimable_kb_added", a1 as i64 - a0 as i64);
    }
    Ok(out)
}

/// Rates (operations per second) of ten equal parts of the marks.
fn tenths(marks: &[(u64, f64)]) -> Vec<f64> {
    let parts = marks.len().saturating_sub(1);
    if parts == 0 {
        return Vec::new();
    }
    let group = (parts / 10).max(1);
    (0..parts / group)
        .map(|g| {
            let (a, b) = (marks[g * group], marks[(g + 1) * group]);
            (b.0 - a.0) as f64 / (b.1 - a.1).max(1e-9)
        })
        .collect()
}

pub(crate) fn one(path: &std::ffi::CStr, payload: &[u8], unlink_first: bool) -> Result<(), String> {
    // SAFETY: path is a valid C string; the mode argument is given.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err(format!("create: errno {}", util::last_errno()));
    }
    // SAFETY: fd is open, payload is a valid buffer.
    let w = unsafe { libc::write(fd, payload.as_ptr().cast(), payload.len()) };
    if w != payload.len() as isize {
        let e = util::last_errno();
        // SAFETY: fd is open.
        unsafe { libc::close(fd) };
        return Err(format!("write: errno {e}"));
    }
    let unlink = || {
        // SAFETY: path is a valid C string.
        if unsafe { libc::unlink(path.as_ptr()) } != 0 {
            Err(format!("unlink: errno {}", util::last_errno()))
        } else {
            Ok(())
        }
    };
    if unlink_first {
        unlink()?;
    }
    // SAFETY: fd is open and closed once.
    if unsafe { libc::close(fd) } != 0 {
        return Err(format!("close: errno {}", util::last_errno()));
    }
    if !unlink_first {
        unlink()?;
    }
    Ok(())
}

/// When W2 samples the daemon's RSS as warm: a tenth of the run, at most
/// 100k iterations.
fn warm_at(iters: u64) -> u64 {
    (iters / 10).clamp(1, 100_000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_warm_sample_is_a_tenth_of_the_run_at_most_100k() {
        assert_eq!(super::warm_at(10_000_000), 100_000);
        assert_eq!(super::warm_at(1_000_000), 100_000);
        assert_eq!(super::warm_at(10_000), 1_000);
        assert_eq!(super::warm_at(5), 1);
    }
}
