//! The one benchmark check CI runs: a tiny W2 on a real churnfs mount prints
//! every key the report reads. It judges no timing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The churnfs binary built beside this crate's (same profile), or the release one.
fn churnfs_bin() -> Option<PathBuf> {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_churnfs-bench"));
    let dir = bench.parent()?;
    let mut candidates = vec![dir.join("churnfs")];
    if let Some(target) = dir.parent() {
        candidates.push(target.join("release").join("churnfs"));
        candidates.push(target.join("debug").join("churnfs"));
    }
    candidates.into_iter().find(|p| p.is_file())
}

/// Unmounts on the way out, even when an assertion failed.
struct Mounted {
    mnt: PathBuf,
    pid: Option<u32>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.mnt)
            .status();
        if let Some(pid) = self.pid {
            let t = Instant::now();
            while alive(pid) && t.elapsed() < Duration::from_secs(15) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

fn have_fuse() -> bool {
    Path::new("/dev/fuse").exists()
        && Command::new("fusermount3")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
}

#[test]
fn w2_smoke_on_churnfs_prints_its_keys() {
    let churnfs =
        churnfs_bin().expect("no churnfs binary built: run `cargo build -p churnfs` first");
    assert!(
        have_fuse(),
        "no /dev/fuse or fusermount3: run scripts/install-deps.sh"
    );
    let tmp = tempfile::Builder::new()
        .prefix("churnfs-bench-smoke.")
        .tempdir_in("/tmp")
        .unwrap();
    let store = tmp.path().join("store");
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let st = Command::new(&churnfs)
        .arg("mkfs")
        .arg(&store)
        .output()
        .unwrap();
    assert!(st.status.success(), "mkfs: {st:?}");
    let out = Command::new(&churnfs)
        .arg("mount")
        .arg(&store)
        .arg(&mnt)
        .arg("--background")
        .output()
        .unwrap();
    assert!(out.status.success(), "mount: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text.split("daemon pid ").nth(1).and_then(|s| {
        s.trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .ok()
    });
    let guard = Mounted {
        mnt: mnt.clone(),
        pid,
    };

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_churnfs-bench"));
    cmd.arg("w2")
        .arg("--dir")
        .arg(&mnt)
        .args(["--iters", "300"]);
    if let Some(p) = pid {
        cmd.args(["--pid", &p.to_string()]);
    }
    let run = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "w2 failed: {stdout} {run:?}");
    let keys: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    let mut want = vec![
        "variant",
        "iters",
        "done",
        "secs",
        "rate",
        "last_over_first",
        "neg_dentries_added",
        "sreclaimable_kb_added",
        "daemon_pid",
        "rss_kb_added",
    ];
    let tenths: Vec<String> = (1..=10).map(|k| format!("tenth{k}")).collect();
    want.extend(tenths.iter().map(String::as_str));
    for k in want {
        assert!(keys.contains(&k), "key {k} missing from:\n{stdout}");
    }
    assert!(stdout.contains("done=300"), "{stdout}");
    drop(guard);
}
