//! The harness: for each round, workload and target, mount the target fresh
//! (its `bench/targets/NAME.sh up`), run the workload as a child process,
//! time the unmount and the daemon's exit, tear down; then write the report
//! and the plots.

use crate::report::{self, Meta, Record, Status};
use crate::sizes::{Size, WORKLOADS};
use crate::util;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct SuiteArgs {
    /// tiny | quick | reference | long
    #[arg(long, default_value = "quick")]
    size: String,
    /// Comma-separated targets, or "all".
    #[arg(long, default_value = "all")]
    targets: String,
    /// Comma-separated workloads (w1,w1crash,w2,w2b,w3,w4,w5,w6,w7), or "all".
    #[arg(long, default_value = "all")]
    workloads: String,
    /// Runs of every workload (default: by size; 3 for short runs).
    #[arg(long)]
    runs: Option<usize>,
    /// Where the report goes (default: bench/results).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The bench/ directory (its targets/ scripts).
    #[arg(long, default_value = env!("CARGO_MANIFEST_DIR"))]
    bench_dir: PathBuf,
    /// The churnfs binary (default: beside this one).
    #[arg(long)]
    churnfs_bin: Option<PathBuf>,
    /// Kill a workload run after this many seconds (default: by size).
    #[arg(long)]
    timeout_secs: Option<f64>,
    /// Skip the PNG plots.
    #[arg(long)]
    no_plots: bool,
    /// W1's file counts instead of the size's, comma-separated (for a peer
    /// that cannot hold the size's largest N, e.g. 1000,5000).
    #[arg(long, value_delimiter = ',')]
    w1_ns: Option<Vec<u64>>,
}

/// What a target is, for the reasons a workload cannot run on it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Churnfs,
    /// churnfs in shared mode (etcd + S3).
    Shared,
    /// Another filesystem whose namespace several mounts share.
    SharedPeer,
    Kernel,
    Fuse,
    Floor,
}

/// Every target, in report order.
pub const TARGETS: &[(&str, Kind)] = &[
    ("churnfs-tmpfs", Kind::Churnfs),
    ("churnfs-disk", Kind::Churnfs),
    ("churnfs-noxattr", Kind::Churnfs),
    ("churnfs-uring", Kind::Churnfs),
    ("tmpfs", Kind::Kernel),
    ("ext4", Kind::Kernel),
    ("xfs", Kind::Kernel),
    ("passthrough_ll", Kind::Fuse),
    ("passthrough_ll-xattr", Kind::Fuse),
    ("fuse2fs", Kind::Fuse),
    ("juicefs", Kind::Fuse),
    ("churnfs-shared", Kind::Shared),
    ("juicefs-etcd", Kind::SharedPeer),
    ("seaweedfs", Kind::SharedPeer),
    ("floor", Kind::Floor),
    ("floor-spin", Kind::Floor),
    ("floor-uring", Kind::Floor),
];

pub fn kind_of(target: &str) -> Kind {
    TARGETS
        .iter()
        .find(|(n, _)| *n == target)
        .map_or(Kind::Fuse, |(_, k)| *k)
}

/// Why `workload` is not run on `target` at all, if it is not.
pub fn static_skip(workload: &str, target: &str) -> Option<&'static str> {
    match (kind_of(target), workload) {
        (Kind::Floor, "w7") => None,
        (Kind::Floor, _) => {
            Some("the floor server answers lookups only: it exists as the W7 baseline")
        }
        (Kind::Kernel, "w1crash") => Some("a kernel filesystem has no daemon to kill"),
        (Kind::Shared, "w1crash") => Some(
            "not measured yet: a killed shared mount's files are reclaimed by another mount once its lease ends",
        ),
        (Kind::Fuse | Kind::SharedPeer, "w1crash") => {
            Some("not measured: reclaim after a crash is read from churnfs's own counters")
        }
        (Kind::Shared | Kind::SharedPeer, _) => None,
        (_, "w8") => Some("one machine's filesystem: W8 needs a second mount of one namespace"),
        _ => None,
    }
}

/// How a run killed at the timeout is reported (and recognised).
const TIMED_OUT: &str = "timed out after";

/// Why `workload` is not run again on `target`: an earlier run of it timed
/// out, and the next would too (a slow peer at the reference size would
/// otherwise take the timeout once per run).
fn after_a_timeout(records: &[Record], workload: &str, target: &str) -> Option<String> {
    records
        .iter()
        .find(|r| {
            r.workload == workload
                && r.target == target
                && matches!(&r.status, Status::Failed(why) if why.starts_with(TIMED_OUT))
        })
        .map(|r| format!("run {} timed out: not run again", r.run))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn install_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

fn split_list(s: &str, all: &[&str]) -> Result<Vec<String>, String> {
    if s == "all" || s.is_empty() {
        return Ok(all.iter().map(|x| x.to_string()).collect());
    }
    let asked: Vec<&str> = s.split([',', ' ']).filter(|p| !p.is_empty()).collect();
    if let Some(p) = asked.iter().find(|p| !all.contains(p)) {
        return Err(format!("unknown '{p}' (known: {})", all.join(", ")));
    }
    // In the canonical order, whatever the order asked.
    Ok(all
        .iter()
        .filter(|a| asked.contains(a))
        .map(|a| a.to_string())
        .collect())
}

fn kv_lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.trim().is_empty() && !k.trim().contains(' '))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn get<'a>(kv: &'a [(String, String)], k: &str) -> Option<&'a str> {
    kv.iter()
        .rev()
        .find(|(a, _)| a == k)
        .map(|(_, v)| v.as_str())
}

/// A target's script and the environment it gets.
struct Script {
    path: PathBuf,
    env: Vec<(String, String)>,
}

struct ScriptOut {
    ok: bool,
    kv: Vec<(String, String)>,
    /// The last meaningful line of stderr or stdout, for a failure.
    last: String,
}

impl Script {
    fn cmd(&self, action: &str, state: &Path) -> Command {
        let mut c = Command::new("bash");
        c.arg(&self.path).arg(action).arg(state);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null());
        c
    }

    fn run(&self, action: &str, state: &Path) -> ScriptOut {
        match self.cmd(action, state).output() {
            Ok(o) => {
                let out = String::from_utf8_lossy(&o.stdout);
                let err = String::from_utf8_lossy(&o.stderr);
                let last = err
                    .lines()
                    .chain(out.lines())
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string();
                ScriptOut {
                    ok: o.status.success(),
                    kv: kv_lines(&out),
                    last: if last.is_empty() {
                        format!("{action} exited with {}", o.status)
                    } else {
                        last
                    },
                }
            }
            Err(e) => ScriptOut {
                ok: false,
                kv: Vec::new(),
                last: format!("cannot run {}: {e}", self.path.display()),
            },
        }
    }

    /// A shell command line for the W1 crash hooks.
    fn shell(&self, action: &str, state: &Path) -> String {
        let env: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}='{v}'")).collect();
        format!(
            "{} bash '{}' {action} '{}'",
            env.join(" "),
            self.path.display(),
            state.display()
        )
    }
}

fn mkdtemp(prefix: &str) -> Result<PathBuf, String> {
    let mut tmpl = format!("/tmp/churnfs-bench.{prefix}.XXXXXX\0").into_bytes();
    // SAFETY: tmpl is a writable NUL-terminated template.
    let p = unsafe { libc::mkdtemp(tmpl.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(format!("mkdtemp: errno {}", util::last_errno()));
    }
    tmpl.pop();
    Ok(PathBuf::from(String::from_utf8_lossy(&tmpl).into_owned()))
}

fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited; only its parent has not looked yet.
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Result of running one workload process.
struct Ran {
    code: Option<i32>,
    timed_out: bool,
    kv: Vec<(String, String)>,
    last_err: String,
}

fn run_workload(exe: &Path, args: &[String], state: &Path, timeout: Duration) -> Ran {
    let out_path = state.join("workload.out");
    let err_path = state.join("workload.err");
    let files = (
        std::fs::File::create(&out_path),
        std::fs::File::create(&err_path),
    );
    let (Ok(out), Ok(err)) = files else {
        return Ran {
            code: None,
            timed_out: false,
            kv: Vec::new(),
            last_err: "cannot create output files".into(),
        };
    };
    let child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return Ran {
                code: None,
                timed_out: false,
                kv: Vec::new(),
                last_err: format!("cannot start {}: {e}", exe.display()),
            }
        }
    };
    let t = Instant::now();
    let mut timed_out = false;
    let code = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st.code(),
            Ok(None) => {}
            Err(_) => break None,
        }
        let interrupted = INTERRUPTED.load(Ordering::SeqCst);
        if t.elapsed() > timeout || interrupted {
            timed_out = !interrupted;
            // The workload and its workers form the process group we made.
            // SAFETY: kill with a negative pid signals that group only.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    Ran {
        code,
        timed_out,
        kv: kv_lines(&out),
        last_err: err
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string(),
    }
}

impl Ran {
    fn status(&self, timeout: Duration) -> Status {
        if self.timed_out {
            return Status::Failed(format!("{TIMED_OUT} {:.0} s", timeout.as_secs_f64()));
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            return Status::Failed("interrupted".into());
        }
        match self.code {
            Some(0) => Status::Ok,
            Some(util::EXIT_SKIP) => Status::Skipped(
                get(&self.kv, "skip")
                    .unwrap_or("the workload cannot run here")
                    .to_string(),
            ),
            _ => Status::Failed(
                get(&self.kv, "error")
                    .map(str::to_string)
                    .unwrap_or_else(|| self.last_err.clone()),
            ),
        }
    }
}

struct Ctx {
    exe: PathBuf,
    size: Size,
    timeout: Duration,
}

/// One workload on one freshly mounted target.
fn step(
    ctx: &Ctx,
    script: &Script,
    workload: &str,
    target: &str,
) -> (Status, Vec<(String, String)>) {
    let state = match mkdtemp(target) {
        Ok(s) => s,
        Err(e) => return (Status::Failed(e), Vec::new()),
    };
    let up = script.run("up", &state);
    if !up.ok {
        let down = script.run("down", &state);
        let mut why = format!("mount failed: {}", up.last);
        if !down.ok {
            why.push_str(&format!("; teardown failed too: {}", down.last));
        }
        return (Status::Failed(why), Vec::new());
    }
    let mnt = get(&up.kv, "mnt")
        .map(PathBuf::from)
        .unwrap_or_else(|| state.join("mnt"));
    let pid = |state: &Path, fallback: Option<u32>| {
        std::fs::read_to_string(state.join("pid"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .or(fallback)
    };
    let pid0 = pid(&state, get(&up.kv, "pid").and_then(|p| p.parse().ok()));
    // A daemon that supervises a child serving the mount names the child.
    let rss_pid = std::fs::read_to_string(state.join("rss_pid"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .or(pid0);
    let dir = if kind_of(target) == Kind::Floor {
        mnt.clone()
    } else {
        let d = mnt.join("bench");
        if let Err(e) = std::fs::create_dir_all(&d) {
            let _ = script.run("down", &state);
            return (
                Status::Failed(format!("mkdir {}: {e}", d.display())),
                Vec::new(),
            );
        }
        d
    };
    let dir_s = dir.display().to_string();
    let mut args = ctx.size.args(workload, &dir_s, rss_pid);
    if workload == "w8" {
        // The same namespace mounted a second time, at STATE/mnt2.
        let m2 = script.run("mount2", &state);
        if !m2.ok {
            let _ = script.run("down", &state);
            return (
                Status::Failed(format!("second mount failed: {}", m2.last)),
                Vec::new(),
            );
        }
        let mnt2 = get(&m2.kv, "mnt2")
            .map(PathBuf::from)
            .unwrap_or_else(|| state.join("mnt2"));
        args.extend(["--other".into(), mnt2.join("bench").display().to_string()]);
    }
    if workload == "w1crash" {
        args.extend([
            "--kill-cmd".into(),
            script.shell("kill", &state),
            "--remount-cmd".into(),
            script.shell("remount", &state),
            "--reclaimed-cmd".into(),
            script.shell("reclaimed", &state),
        ]);
    }
    let ran = run_workload(&ctx.exe, &args, &state, ctx.timeout);
    let mut status = ran.status(ctx.timeout);
    let mut kv = ran.kv.clone();
    if workload == "w6" && status == Status::Ok {
        let re = script.run("remount", &state);
        if re.ok {
            let mut args = ctx.size.args(workload, &dir_s, None);
            args.push("--measure-only".into());
            let again = run_workload(&ctx.exe, &args, &state, ctx.timeout);
            status = again.status(ctx.timeout);
            kv.extend(
                again
                    .kv
                    .into_iter()
                    .map(|(k, v)| (format!("remount_{k}"), v)),
            );
            if let Some(note) = get(&re.kv, "note") {
                kv.push(("remount_note".into(), note.to_string()));
            }
        } else {
            status = Status::Failed(format!("remount failed: {}", re.last));
        }
    }
    if workload == "w8" {
        let um2 = script.run("umount2", &state);
        if !um2.ok && status == Status::Ok {
            status = Status::Failed(format!("second unmount failed: {}", um2.last));
        }
    }
    // Unmount, timed, then wait for the daemon to finish (a FUSE unmount
    // returns before the daemon has committed and exited).
    let daemon = pid(&state, pid0);
    if let Some(n) = util::negative_dentries() {
        kv.push(("neg_dentries_before_umount".into(), n.to_string()));
    }
    let t = Instant::now();
    let um = script.run("umount", &state);
    let umount_s = t.elapsed().as_secs_f64();
    if um.ok {
        kv.push(("umount_s".into(), util::fmt_num(umount_s)));
        if let Some(p) = daemon {
            while pid_alive(p) && t.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(5));
            }
            kv.push((
                "daemon_exit_s".into(),
                util::fmt_num(t.elapsed().as_secs_f64()),
            ));
        }
        if let Some(n) = util::negative_dentries() {
            kv.push(("neg_dentries_after_umount".into(), n.to_string()));
            // What the unmount freed is the mount's own: the machine-wide
            // count before and after a run also moves with everything else.
            let before = get(&kv, "neg_dentries_before_umount").and_then(|b| b.parse::<i64>().ok());
            if let Some(b) = before {
                kv.push(("neg_dentries_of_mount".into(), (b - n as i64).to_string()));
            }
        }
    } else if status == Status::Ok {
        status = Status::Failed(format!("unmount failed: {}", um.last));
    }
    let down = script.run("down", &state);
    if !down.ok {
        eprintln!(
            "churnfs-bench: teardown of {target} left {} behind: {}",
            state.display(),
            down.last
        );
    }
    (status, kv)
}

fn sh_out(cmd: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(cmd).args(args).output().ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = util::meminfo_kb("MemTotal").unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let arch = sh_out("uname", &["-m"]).unwrap_or_default();
    format!("{arch}, {cores} cores ({cpu}), {mem_gib:.1} GiB memory")
}

fn commit(repo: &Path) -> String {
    let dir = repo.display().to_string();
    let head = sh_out("git", &["-C", &dir, "rev-parse", "--short", "HEAD"])
        .unwrap_or_else(|| "none (no commit yet)".into());
    let dirty =
        sh_out("git", &["-C", &dir, "status", "--porcelain"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{head} (with uncommitted changes)")
    } else {
        head
    }
}

pub fn main(a: SuiteArgs) -> ExitCode {
    match suite(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("churnfs-bench suite: {e}");
            ExitCode::FAILURE
        }
    }
}

fn suite(a: SuiteArgs) -> Result<ExitCode, String> {
    let mut size = Size::get(&a.size)
        .ok_or_else(|| format!("unknown size '{}' (tiny, quick, reference, long)", a.size))?;
    if let Some(ns) = &a.w1_ns {
        if ns.is_empty() || ns.contains(&0) || !ns.windows(2).all(|w| w[0] < w[1]) {
            return Err("--w1-ns: give file counts above 0 in increasing order".into());
        }
        size.w1_ns = ns.clone();
    }
    let target_names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    let targets = split_list(&a.targets, &target_names).map_err(|e| format!("targets: {e}"))?;
    let workloads = split_list(&a.workloads, WORKLOADS).map_err(|e| format!("workloads: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let bin_dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let churnfs_bin = a
        .churnfs_bin
        .clone()
        .unwrap_or_else(|| bin_dir.join("churnfs"));
    let bench_dir = std::fs::canonicalize(&a.bench_dir)
        .map_err(|e| format!("{}: {e}", a.bench_dir.display()))?;
    let out_dir = a.out.clone().unwrap_or_else(|| bench_dir.join("results"));
    // The tree as the suite starts: it may change while the suite runs.
    let commit_at_start = commit(bench_dir.parent().unwrap_or(&bench_dir));
    let timeout = Duration::from_secs_f64(a.timeout_secs.unwrap_or(size.timeout_secs));
    let env = vec![
        ("CHURNFS_BIN".to_string(), churnfs_bin.display().to_string()),
        (
            "FLOOR_BIN".to_string(),
            bin_dir.join("churnfs-bench-floor").display().to_string(),
        ),
        (
            "BENCH_TOOLS".to_string(),
            bin_dir
                .parent()
                .unwrap_or(&bin_dir)
                .join("bench-tools")
                .display()
                .to_string(),
        ),
    ];
    install_signals();

    // Which targets can run here at all, and what each is.
    let mut scripts = BTreeMap::new();
    let mut target_info = Vec::new();
    for t in &targets {
        let script = Script {
            path: bench_dir.join("targets").join(format!("{t}.sh")),
            env: env.clone(),
        };
        let check = script.run("check", Path::new("/nonexistent"));
        let desc = get(&check.kv, "desc").unwrap_or(t).to_string();
        let version = get(&check.kv, "version").unwrap_or("").to_string();
        let unavailable = (!check.ok).then(|| check.last.clone());
        if let Some(why) = &unavailable {
            eprintln!("churnfs-bench: target {t} cannot run here: {why}");
        }
        target_info.push(report::TargetInfo {
            name: t.clone(),
            desc,
            version,
            unavailable,
        });
        scripts.insert(t.clone(), script);
    }

    let runs_of = |w: &str| a.runs.unwrap_or_else(|| size.runs(w)).max(1);
    let rounds = workloads.iter().map(|w| runs_of(w)).max().unwrap_or(1);
    let mut plan = Vec::new();
    for r in 0..rounds {
        for w in &workloads {
            if r >= runs_of(w) {
                continue;
            }
            for t in &targets {
                plan.push((r + 1, w.clone(), t.clone()));
            }
        }
    }
    let pb = ProgressBar::new(plan.len() as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} (eta {eta}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.enable_steady_tick(Duration::from_millis(200));
    let ctx = Ctx {
        exe: exe.clone(),
        size: size.clone(),
        timeout,
    };
    let started = Instant::now();
    let mut records = Vec::new();
    for (run, w, t) in plan {
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
        pb.set_message(format!("{w} on {t} (run {run}/{})", runs_of(&w)));
        let info = target_info.iter().find(|i| i.name == t);
        let (status, kv) = if let Some(why) = static_skip(&w, &t) {
            (Status::Skipped(why.to_string()), Vec::new())
        } else if let Some(why) = info.and_then(|i| i.unavailable.clone()) {
            (
                Status::Skipped(format!("target unavailable: {why}")),
                Vec::new(),
            )
        } else if let Some(why) = after_a_timeout(&records, &w, &t) {
            (Status::Skipped(why), Vec::new())
        } else {
            step(&ctx, &scripts[&t], &w, &t)
        };
        let line = match &status {
            Status::Ok => report::summary_line(&w, &kv),
            Status::Skipped(why) => format!("skipped: {why}"),
            Status::Failed(why) => format!("FAILED: {why}"),
        };
        if !matches!(status, Status::Skipped(_)) || run == 1 {
            let line = format!("{w:8} {t:15} run {run}: {line}");
            // A hidden bar (output not a terminal) prints nothing: log plainly.
            if pb.is_hidden() {
                eprintln!("{line}");
            } else {
                pb.println(line);
            }
        }
        records.push(Record {
            workload: w,
            target: t,
            run,
            status,
            kv,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();

    let date = sh_out("date", &["+%Y-%m-%d"]).unwrap_or_else(|| "undated".into());
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let mut stem = format!("{date}-{}", size.name);
    let mut k = 2;
    while out_dir.join(format!("{stem}.md")).exists() {
        stem = format!("{date}-{}-{k}", size.name);
        k += 1;
    }
    let commands = workloads
        .iter()
        .map(|w| {
            let mut args = size.args(w, "$MNT/bench", None);
            if w == "w1crash" {
                args.push("--kill-cmd 'targets/T.sh kill STATE' --remount-cmd 'targets/T.sh remount STATE' --reclaimed-cmd 'targets/T.sh reclaimed STATE'".into());
            }
            (w.clone(), format!("churnfs-bench {}", args.join(" ")))
        })
        .collect();
    let meta = Meta {
        date,
        size: size.clone(),
        machine: machine(),
        kernel: sh_out("uname", &["-r"]).unwrap_or_default(),
        commit: commit_at_start,
        suite_command: std::env::args().collect::<Vec<_>>().join(" "),
        commands,
        targets: target_info,
        workloads: workloads.clone(),
        elapsed_s: started.elapsed().as_secs_f64(),
        interrupted: INTERRUPTED.load(Ordering::SeqCst),
        plot_dir: stem.clone(),
    };
    let raw = report::raw(&records);
    std::fs::write(out_dir.join(format!("{stem}.kv")), raw)
        .map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let plots = if a.no_plots {
        Vec::new()
    } else {
        let dir = out_dir.join(&stem);
        match crate::plot::all(&dir, &meta, &records) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("churnfs-bench: plots not drawn: {e}");
                Vec::new()
            }
        }
    };
    let md = report::markdown(&meta, &records, &plots);
    let md_path = out_dir.join(format!("{stem}.md"));
    std::fs::write(&md_path, md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    println!("report: {}", md_path.display());
    if meta.interrupted {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_that_timed_out_on_a_target_is_not_run_there_again() {
        let rec = |w: &str, t: &str, run, status| Record {
            workload: w.into(),
            target: t.into(),
            run,
            status,
            kv: Vec::new(),
        };
        let records = vec![
            rec(
                "w3",
                "juicefs",
                1,
                Status::Failed(format!("{TIMED_OUT} 900 s")),
            ),
            rec("w3", "fuse2fs", 1, Status::Failed("exit 1".into())),
            rec("w4", "juicefs", 1, Status::Ok),
        ];
        let why = after_a_timeout(&records, "w3", "juicefs").expect("skipped");
        assert!(why.starts_with("run 1 timed out"), "{why}");
        assert_eq!(
            after_a_timeout(&records, "w3", "fuse2fs"),
            None,
            "another failure"
        );
        assert_eq!(after_a_timeout(&records, "w4", "juicefs"), None);
        assert_eq!(after_a_timeout(&records, "w3", "ext4"), None);
    }

    #[test]
    fn lists_and_skips() {
        let all = ["a", "b"];
        assert_eq!(split_list("all", &all).unwrap(), vec!["a", "b"]);
        assert_eq!(split_list("b", &all).unwrap(), vec!["b"]);
        assert_eq!(split_list("b,a", &all).unwrap(), vec!["a", "b"]);
        assert!(split_list("c", &all).is_err());
        assert!(static_skip("w7", "floor").is_none());
        assert!(static_skip("w2", "floor").is_some());
        assert!(static_skip("w1crash", "ext4").is_some());
        assert!(static_skip("w1crash", "churnfs-disk").is_none());
        assert!(static_skip("w2", "juicefs").is_none());
    }

    #[test]
    fn key_values() {
        let kv = kv_lines("a=1\nnoise\nb = x=y\nc d=3\n");
        assert_eq!(
            kv,
            vec![("a".into(), "1".into()), ("b".into(), "x=y".into())]
        );
    }
}
