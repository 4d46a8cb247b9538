//! W3 truncate storm: P processes, each on its own 4 KiB file, shrink it one
//! byte at a time down to 1 byte and extend it back to 4 KiB, K rounds.
//! Wall time from a common start to the last process done.

use crate::util::{self, cstr, Out};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub const FILE_SIZE: i64 = 4096;

pub struct Args {
    pub dir: PathBuf,
    pub rounds: u64,
    pub procs: Vec<usize>,
}

pub fn run(a: Args) -> Result<Out, String> {
    let mut out = Out::default();
    out.put("rounds", a.rounds);
    let per_round = (FILE_SIZE - 1) as u64 + 1;
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let mut walls = Vec::new();
    for &p in &a.procs {
        let mut kids = Vec::new();
        for j in 0..p {
            let file = a.dir.join(format!("w3-{}-p{p}-{j}", std::process::id()));
            let mut child = Command::new(&exe)
                .arg("w3-worker")
                .arg("--file")
                .arg(&file)
                .args(["--rounds", &a.rounds.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start a worker: {e}"))?;
            let stdin = child.stdin.take().expect("piped");
            let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
            let mut line = String::new();
            stdout.read_line(&mut line).map_err(|e| e.to_string())?;
            if line.trim() != "ready" {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("worker: {}", line.trim()));
            }
            kids.push((child, stdin, stdout));
        }
        let t = Instant::now();
        for (_, stdin, _) in kids.iter_mut() {
            stdin.write_all(b"go\n").map_err(|e| e.to_string())?;
        }
        // Each worker's own time: a wall far above the slowest worker's
        // would be time lost starting them.
        let mut own = Vec::with_capacity(p);
        for (child, _, stdout) in kids.iter_mut() {
            let mut line = String::new();
            stdout.read_line(&mut line).map_err(|e| e.to_string())?;
            let _ = child.wait();
            let secs = line
                .trim()
                .strip_prefix("done secs=")
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| format!("worker: {}", line.trim()))?;
            own.push(secs);
        }
        let wall = t.elapsed().as_secs_f64();
        own.sort_by(f64::total_cmp);
        out.num(format!("p{p}_worker_secs_min"), own[0]);
        out.num(format!("p{p}_worker_secs_max"), own[own.len() - 1]);
        let truncates = a.rounds * per_round * p as u64;
        out.num(format!("p{p}_secs"), wall);
        out.num(format!("p{p}_truncates_per_s"), truncates as f64 / wall);
        walls.push((p, wall));
    }
    if let Some(&(1, base)) = walls.first() {
        for &(p, w) in &walls[1..] {
            out.num(format!("p{p}_over_p1"), w / base);
        }
    }
    Ok(out)
}

/// One process of the storm: prints `ready`, waits for `go`, runs, prints
/// `done secs=S`.
pub fn worker(file: &Path, rounds: u64) -> i32 {
    let c = cstr(file);
    // SAFETY: c is a valid C string; mode is given with O_CREAT.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_CREAT | libc::O_RDWR, 0o644) };
    if fd < 0 {
        println!("error open errno {}", util::last_errno());
        return 1;
    }
    let buf = vec![b't'; FILE_SIZE as usize];
    // SAFETY: fd is open, buf is valid.
    if unsafe { libc::pwrite(fd, buf.as_ptr().cast(), buf.len(), 0) } != FILE_SIZE as isize {
        println!("error write errno {}", util::last_errno());
        return 1;
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    let t = Instant::now();
    for _ in 0..rounds {
        let mut len = FILE_SIZE - 1;
        while len >= 1 {
            // SAFETY: fd is open.
            if unsafe { libc::ftruncate(fd, len) } != 0 {
                println!("error ftruncate errno {}", util::last_errno());
                return 1;
            }
            len -= 1;
        }
        // SAFETY: fd is open.
        if unsafe { libc::ftruncate(fd, FILE_SIZE) } != 0 {
            println!("error ftruncate errno {}", util::last_errno());
            return 1;
        }
    }
    println!("done secs={:.6}", t.elapsed().as_secs_f64());
    let _ = std::io::stdout().flush();
    // SAFETY: fd is open and closed once.
    unsafe { libc::close(fd) };
    let _ = std::fs::remove_file(file);
    0
}
