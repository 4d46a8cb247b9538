//! Small helpers shared by the workloads: `key=value` output, readings from
//! /proc, descriptor limits, names as C strings.

use std::ffi::CString;
use std::io::{self, BufRead, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Exit code of a workload that cannot run on this target (it prints `skip=why`).
pub const EXIT_SKIP: i32 = 3;

/// Collects `key=value` lines and prints each at once, so a run cut short still
/// leaves what it measured.
#[derive(Default)]
pub struct Out {
    pub lines: Vec<(String, String)>,
}

impl Out {
    pub fn put(&mut self, key: impl Into<String>, value: impl ToString) {
        let (k, v) = (key.into(), value.to_string());
        println!("{k}={v}");
        let _ = io::stdout().flush();
        self.lines.push((k, v));
    }

    /// A float with enough digits for rates and seconds alike.
    pub fn num(&mut self, key: impl Into<String>, value: f64) {
        self.put(key, fmt_num(value));
    }
}

pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "nan".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.6}")
    }
}

/// Ends the workload with "cannot run here" and the reason.
pub fn skip(reason: &str) -> ! {
    println!("skip={}", reason.replace('\n', " "));
    let _ = io::stdout().flush();
    std::process::exit(EXIT_SKIP)
}

pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

pub fn last_errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Runs `f` and returns its result with the seconds it took.
/// Runs a benchmark program to its end: its standard output and the
/// seconds it took, or one line saying how it failed (`what` names it).
pub fn run_tool(cmd: &mut std::process::Command, what: &str) -> Result<(String, f64), String> {
    let (res, wall) = timed(|| cmd.output());
    let res = res.map_err(|e| format!("{what}: {e}"))?;
    let text = String::from_utf8_lossy(&res.stdout).into_owned();
    if !res.status.success() {
        let err = String::from_utf8_lossy(&res.stderr);
        let last = err.lines().chain(text.lines()).last().unwrap_or("").trim();
        return Err(format!("{what} failed ({}): {last}", res.status));
    }
    Ok((text, wall))
}

pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

/// Raises the soft descriptor limit to the hard one; returns the new soft limit.
pub fn raise_nofile() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write to and read from a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 1024;
        }
        rl.rlim_cur = rl.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl);
        }
    }
    rl.rlim_cur
}

/// The 5th field of /proc/sys/fs/dentry-state: negative dentries in the kernel.
pub fn negative_dentries() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/sys/fs/dentry-state").ok()?;
    s.split_whitespace().nth(4)?.parse().ok()
}

/// A field of /proc/meminfo in KiB (e.g. "SReclaimable").
pub fn meminfo_kb(field: &str) -> Option<u64> {
    let f = std::fs::File::open("/proc/meminfo").ok()?;
    for line in io::BufReader::new(f).lines().map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix(field) {
            if let Some(rest) = rest.strip_prefix(':') {
                return rest.split_whitespace().next()?.parse().ok();
            }
        }
    }
    None
}

/// Resident set size of a process in KiB (VmRSS of /proc/PID/status).
pub fn rss_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
}

/// The mountpoint (from /proc/self/mountinfo) that holds `path`.
pub fn mountpoint_of(path: &Path) -> Option<PathBuf> {
    let path = std::fs::canonicalize(path).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<PathBuf> = None;
    for line in info.lines() {
        let Some(mp) = line.split(' ').nth(4) else {
            continue;
        };
        let mp = PathBuf::from(unescape_mountinfo(mp));
        if path.starts_with(&mp)
            && best
                .as_ref()
                .is_none_or(|b| mp.as_os_str().len() > b.as_os_str().len())
        {
            best = Some(mp);
        }
    }
    best
}

/// Undoes mountinfo's octal escapes (`\040` is a space).
pub fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The FUSE daemon serving the mount that holds `dir`: a process with
/// /dev/fuse open whose command line names that mountpoint. Where several
/// match (a supervisor and the child that serves), the one with the largest
/// RSS is the daemon.
pub fn find_daemon(dir: &Path) -> Option<u32> {
    let mnt = mountpoint_of(dir)?;
    let want = mnt.as_os_str().as_bytes();
    let mut found: Vec<u32> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        // Some daemons rewrite their title with spaces between arguments.
        let names_mnt = cmdline.split(|&c| c == 0 || c == b' ').any(|arg| {
            arg == want
                || std::fs::canonicalize(std::ffi::OsStr::from_bytes(arg))
                    .is_ok_and(|p| p.as_os_str().as_bytes() == want)
        });
        if !names_mnt {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds_fuse = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l == Path::new("/dev/fuse")));
        if holds_fuse {
            found.push(pid);
        }
    }
    found.into_iter().max_by_key(|&p| rss_kb(p).unwrap_or(0))
}

/// The p-th percentile (0..=100) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_useful_digits() {
        assert_eq!(fmt_num(123456.7), "123457");
        assert_eq!(fmt_num(12.34567), "12.346");
        assert_eq!(fmt_num(0.0001234), "0.000123");
        assert_eq!(fmt_num(0.0), "0");
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo("/tmp/a\\040b"), "/tmp/a b");
    }

    #[test]
    fn percentiles() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&v, 50.0), 3.0);
        assert_eq!(percentile(&v, 100.0), 5.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
    }
}
