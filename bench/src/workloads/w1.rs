//! W1 open-unlinked: open N files that have no name (O_TMPFILE, or create and
//! unlink while keeping the descriptor), hold them all, close them in the
//! order opened. Above one process's descriptor limit the files are spread over
//! several worker processes that open in turn and close in turn. With
//! `repeat_to`, a level smaller than that is done again (open all, close all)
//! until it has closed about that many files; its figures are the sums and
//! means over the rounds (a level of 1,000 files closes in about a
//! millisecond, too short to time once).
//!
//! The crash variant kills the daemon while every file is held, mounts again
//! and waits until the target says the orphans are reclaimed.

use crate::util::{self, cstr, Out};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Descriptors a worker keeps for itself (stdio, pipes, the directory).
const RESERVED_FDS: u64 = 32;

pub struct Args {
    pub dir: PathBuf,
    pub ns: Vec<u64>,
    pub per_proc: Option<u64>,
    pub bytes: usize,
    pub crash: Option<Crash>,
    pub max_secs: Option<f64>,
    /// Files each level closes at least, in rounds of N (0: one round).
    pub repeat_to: u64,
}

/// Shell commands of the target's script for the crash variant.
pub struct Crash {
    pub kill_cmd: String,
    pub remount_cmd: String,
    pub reclaimed_cmd: String,
    pub reclaim_timeout: Duration,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Auto,
    Tmpfile,
    CreateUnlink,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Tmpfile => "tmpfile",
            Mode::CreateUnlink => "create_unlink",
        }
    }
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "auto" => Some(Mode::Auto),
            "tmpfile" => Some(Mode::Tmpfile),
            "create_unlink" => Some(Mode::CreateUnlink),
            _ => None,
        }
    }
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    fn spawn(
        dir: &Path,
        count: u64,
        tag: &str,
        mode: Mode,
        bytes: usize,
    ) -> Result<Worker, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
        let mut child = Command::new(exe)
            .arg("w1-worker")
            .arg("--dir")
            .arg(dir)
            .args(["--count", &count.to_string(), "--tag", tag])
            .args(["--mode", mode.name(), "--bytes", &bytes.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a worker: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(Worker {
            child,
            stdin,
            stdout,
        })
    }

    /// The next `word k=v k=v` line of the worker, as pairs.
    fn expect(&mut self, word: &str) -> Result<Vec<(String, String)>, String> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = self.child.wait();
            return Err(format!("worker ended before '{word}'"));
        }
        let mut parts = line.split_whitespace();
        let head = parts.next().unwrap_or("");
        let kv: Vec<(String, String)> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if head != word {
            let why = kv
                .iter()
                .find(|(k, _)| k == "error")
                .map(|(_, v)| v.replace('_', " "))
                .unwrap_or_else(|| line.trim().to_string());
            // A worker ends after its error line; it has let go of its
            // files once it is reaped, before the target is unmounted.
            let _ = self.child.wait();
            return Err(why);
        }
        Ok(kv)
    }

    fn close(&mut self) -> Result<(), String> {
        self.stdin
            .write_all(b"close\n")
            .map_err(|e| format!("worker pipe: {e}"))
    }
}

fn get<'a>(kv: &'a [(String, String)], key: &str) -> Option<&'a str> {
    kv.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn get_f(kv: &[(String, String)], key: &str) -> f64 {
    get(kv, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Descriptors one worker may hold: the hard limit less a few.
fn per_proc_cap(asked: Option<u64>) -> u64 {
    let limit = util::raise_nofile();
    let cap = limit.saturating_sub(RESERVED_FDS).max(1);
    asked.map_or(cap, |a| a.min(cap).max(1))
}

/// Opens `n` files over as many workers as needed; returns them holding the
/// files, with the open time and the mode used.
fn open_all(
    a: &Args,
    n: u64,
    cap: u64,
    mut mode: Mode,
) -> Result<(Vec<Worker>, f64, Mode), String> {
    let mut workers = Vec::new();
    let mut left = n;
    let mut open_s = 0.0;
    let mut idx = 0;
    while left > 0 {
        let count = left.min(cap);
        let tag = format!("{}-{n}-{idx}", std::process::id());
        let opened = Worker::spawn(&a.dir, count, &tag, mode, a.bytes)
            .and_then(|mut w| w.expect("opened").map(|kv| (w, kv)));
        let (w, kv) = match opened {
            Ok(x) => x,
            Err(e) => {
                // The workers that did open let go of their files before the
                // error is reported, so that the target is left clean.
                let _ = close_all(workers);
                return Err(e);
            }
        };
        open_s += get_f(&kv, "secs");
        if let Some(m) = get(&kv, "mode").and_then(Mode::parse) {
            mode = m;
        }
        workers.push(w);
        left -= count;
        idx += 1;
    }
    Ok((workers, open_s, mode))
}

/// Closes in turn, in the order opened; returns the summed close time.
fn close_all(workers: Vec<Worker>) -> Result<f64, String> {
    let mut close_s = 0.0;
    for mut w in workers {
        w.close()?;
        let kv = w.expect("closed")?;
        close_s += get_f(&kv, "secs");
        let _ = w.child.wait();
    }
    Ok(close_s)
}

fn sh(cmd: &str) -> Result<String, String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!("'{cmd}' failed ({})", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    let cap = per_proc_cap(a.per_proc);
    out.put("per_proc", cap);
    out.put(
        "ns",
        a.ns.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
    );
    let mut mode = Mode::Auto;
    let mut costs = Vec::new();
    let start = Instant::now();
    // (N, open + close seconds of one round) of each level done, for the
    // time cap.
    let mut done: Vec<(u64, f64)> = Vec::new();
    for &n in &a.ns {
        let rounds = if a.crash.is_some() {
            1
        } else {
            (a.repeat_to / n).max(1)
        };
        if let Some(max) = a.max_secs {
            let predicted = predict_secs(&done, n) * rounds as f64;
            let spent = start.elapsed().as_secs_f64();
            if spent + predicted > max {
                out.put("capped_before_n", n);
                out.num("capped_predicted_s", predicted);
                out.num("capped_spent_s", spent);
                break;
            }
        }
        let (mut open_s, mut close_s, mut procs) = (0.0, 0.0, 0);
        for _ in 0..rounds {
            let (workers, o, m) = match open_all(&a, n, cap, mode) {
                Ok(x) => x,
                // A target that cannot hold N files (passthrough_ll keeps a
                // descriptor for every inode) keeps its smaller levels.
                Err(e) if !done.is_empty() && a.crash.is_none() => {
                    out.put("failed_at_n", n);
                    out.put("failed_why", e.replace(' ', "_"));
                    return Ok(out);
                }
                Err(e) => return Err(e),
            };
            if mode == Mode::Auto {
                out.put("mode", m.name());
            }
            mode = m;
            procs = workers.len();
            if let Some(crash) = &a.crash {
                return crash_cycle(&a, crash, workers, n, o, out);
            }
            open_s += o;
            close_s += close_all(workers)?;
        }
        let files = (n * rounds) as f64;
        out.put(format!("n{n}_procs"), procs);
        out.put(format!("n{n}_rounds"), rounds);
        out.num(format!("n{n}_open_s"), open_s);
        out.num(format!("n{n}_open_per_s"), files / open_s);
        out.num(format!("n{n}_close_s"), close_s);
        out.num(format!("n{n}_close_per_s"), files / close_s);
        let us = close_s * 1e6 / files;
        out.num(format!("n{n}_close_us_per_file"), us);
        costs.push(us);
        // One round's time, which is what the next level's prediction scales.
        done.push((n, (open_s + close_s) / rounds as f64));
    }
    // The ratio's columns name the largest and smallest N asked for.
    if costs.len() >= 2 && costs.len() == a.ns.len() {
        out.num("close_cost_ratio", costs[costs.len() - 1] / costs[0]);
    }
    Ok(out)
}

/// Seconds that opening and closing `n` files will take, extrapolated from
/// the levels done with the growth exponent of the last two (between 1,
/// linear, and 2, quadratic: some peers slow down with every file held).
fn predict_secs(done: &[(u64, f64)], n: u64) -> f64 {
    let Some(&(n1, t1)) = done.last() else {
        return 0.0;
    };
    let exp = match done.len() {
        0 | 1 => 1.0,
        len => {
            let (n0, t0) = done[len - 2];
            let e = (t1 / t0).ln() / (n1 as f64 / n0 as f64).ln();
            if e.is_nan() {
                1.0
            } else {
                e.clamp(1.0, 2.0)
            }
        }
    };
    t1 * (n as f64 / n1 as f64).powf(exp)
}

fn crash_cycle(
    a: &Args,
    crash: &Crash,
    workers: Vec<Worker>,
    n: u64,
    open_s: f64,
    mut out: Out,
) -> Result<Out, String> {
    out.put("crash_n", n);
    out.num("crash_open_s", open_s);
    // Make what is held durable: one fsync commits the journal.
    let marker = a.dir.join(format!("w1-marker-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&marker).map_err(|e| format!("marker: {e}"))?;
        f.write_all(b"marker").map_err(|e| format!("marker: {e}"))?;
        f.sync_all().map_err(|e| format!("marker fsync: {e}"))?;
    }
    let (r, kill_s) = util::timed(|| sh(&crash.kill_cmd));
    r?;
    out.num("crash_kill_s", kill_s);
    // The holders go away too, as they would when the machine fails.
    for mut w in workers {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
    let t0 = Instant::now();
    sh(&crash.remount_cmd)?;
    out.num("crash_remount_s", t0.elapsed().as_secs_f64());
    loop {
        if let Ok(text) = sh(&crash.reclaimed_cmd) {
            out.num("crash_reclaim_s", t0.elapsed().as_secs_f64());
            for line in text.lines() {
                if let Some((k, v)) = line.split_once('=') {
                    out.put(format!("crash_{}", k.trim()), v.trim());
                }
            }
            break;
        }
        if t0.elapsed() > crash.reclaim_timeout {
            return Err(format!(
                "orphans not reclaimed within {:?} of the remount",
                crash.reclaim_timeout
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(out)
}

/// The worker side: `opened secs=S mode=M`, then on `close` from the parent,
/// `closed secs=S errors=E`.
pub fn worker(dir: &Path, count: u64, tag: &str, mode: Mode, bytes: usize) -> i32 {
    util::raise_nofile();
    let dir_c = cstr(dir);
    let payload = vec![b'x'; bytes];
    let mut fds = Vec::with_capacity(count as usize);
    let mut mode = mode;
    let t = Instant::now();
    for i in 0..count {
        let fd = match open_one(&dir_c, dir, tag, i, &mut mode) {
            Ok(fd) => fd,
            Err(e) => {
                println!("error error={}", e.replace(' ', "_"));
                return 1;
            }
        };
        if !payload.is_empty() {
            // SAFETY: fd is open and payload is a valid buffer.
            let w = unsafe { libc::write(fd, payload.as_ptr().cast(), payload.len()) };
            if w < 0 {
                println!(
                    "error error=write_after_{i}_files:_errno_{}",
                    util::last_errno()
                );
                return 1;
            }
        }
        fds.push(fd);
    }
    let open_s = t.elapsed().as_secs_f64();
    println!("opened secs={open_s:.6} mode={}", mode.name());
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let t = Instant::now();
    let mut errors = 0;
    for fd in fds {
        // SAFETY: each fd was opened above and is closed once.
        if unsafe { libc::close(fd) } != 0 {
            errors += 1;
        }
    }
    let close_s = t.elapsed().as_secs_f64();
    println!("closed secs={close_s:.6} errors={errors}");
    let _ = std::io::stdout().flush();
    0
}

fn open_one(
    dir_c: &std::ffi::CStr,
    dir: &Path,
    tag: &str,
    i: u64,
    mode: &mut Mode,
) -> Result<i32, String> {
    if *mode != Mode::CreateUnlink {
        // SAFETY: dir_c is a valid C string; O_TMPFILE takes a mode argument.
        let fd = unsafe { libc::open(dir_c.as_ptr(), libc::O_TMPFILE | libc::O_RDWR, 0o600) };
        if fd >= 0 {
            *mode = Mode::Tmpfile;
            return Ok(fd);
        }
        let e = util::last_errno();
        let refused = matches!(
            e,
            libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOSYS | libc::ENOENT
        );
        if *mode == Mode::Tmpfile || !refused {
            return Err(format!("O_TMPFILE open after {i} files: errno {e}"));
        }
        *mode = Mode::CreateUnlink;
    }
    let path = cstr(&dir.join(format!("w1-{tag}-{i}")));
    // SAFETY: path is a valid C string.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR,
            0o600,
        )
    };
    if fd < 0 {
        return Err(format!(
            "create after {i} files: errno {}",
            util::last_errno()
        ));
    }
    // SAFETY: path is a valid C string.
    if unsafe { libc::unlink(path.as_ptr()) } != 0 {
        return Err(format!(
            "unlink after {i} files: errno {}",
            util::last_errno()
        ));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::predict_secs;

    #[test]
    fn prediction_follows_the_measured_growth() {
        assert_eq!(predict_secs(&[], 1000), 0.0);
        // One level: linear.
        assert!((predict_secs(&[(1000, 1.0)], 10_000) - 10.0).abs() < 1e-9);
        // Linear growth stays linear.
        let lin = predict_secs(&[(1000, 1.0), (10_000, 10.0)], 100_000);
        assert!((lin - 100.0).abs() < 1e-6, "{lin}");
        // Quadratic growth is extrapolated quadratically, and no steeper.
        let quad = predict_secs(&[(1000, 1.0), (10_000, 1000.0)], 100_000);
        assert!((quad - 100_000.0).abs() < 1e-3, "{quad}");
        // Faster than linear (a warm cache) is still taken as linear.
        let warm = predict_secs(&[(1000, 1.0), (10_000, 2.0)], 20_000);
        assert!((warm - 4.0).abs() < 1e-9, "{warm}");
    }
}
