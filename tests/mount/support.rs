//! A real churnfs mount for a test: a fresh store and mountpoint under /tmp,
//! the daemon run in the foreground as our child (so a test can kill it),
//! unmounted and reaped on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `churnfs` binary built beside this test.
pub fn churnfs_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CHURNFS_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("own path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("churnfs");
    assert!(
        bin.is_file(),
        "{} missing: build it first (cargo build -p churnfs)",
        bin.display()
    );
    bin
}

pub fn churnfs(args: &[&str]) -> Output {
    Command::new(churnfs_bin())
        .args(args)
        .output()
        .expect("run churnfs")
}

pub fn is_mounted(mnt: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = mnt.to_string_lossy().to_string();
    info.lines()
        .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

pub struct Mount {
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
    pub mnt: PathBuf,
    pub child: Option<Child>,
    pub options: String,
}

impl Mount {
    /// mkfs + mount with `options` (`-o` list, may be empty).
    pub fn new(options: &str) -> Mount {
        Mount::new_with(options, |_| {})
    }

    /// Like `new`, with `prepare(dir)` run first (e.g. to mount a small
    /// tmpfs at `dir/store`).
    pub fn new_with(options: &str, prepare: impl FnOnce(&Path)) -> Mount {
        let dir = tempfile::Builder::new()
            .prefix("churnfs-test-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        prepare(dir.path());
        let store = dir.path().join("store");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let out = churnfs(&["mkfs", store.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "mkfs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut m = Mount {
            dir,
            store,
            mnt,
            child: None,
            options: options.to_string(),
        };
        m.start();
        m
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }

    /// A mount of an existing source (a volume URL) under a fresh
    /// directory, with `options`.
    pub fn attach(source: &str, options: &str) -> Mount {
        let dir = tempfile::Builder::new()
            .prefix("churnfs-test-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mut m = Mount {
            dir,
            store: PathBuf::from(source),
            mnt,
            child: None,
            options: options.to_string(),
        };
        m.start();
        m
    }

    /// Starts the daemon and waits for the mount.
    pub fn start(&mut self) {
        assert!(self.child.is_none());
        let mut cmd = Command::new(churnfs_bin());
        cmd.arg("mount").arg(&self.store).arg(&self.mnt);
        if !self.options.is_empty() {
            cmd.arg("-o").arg(&self.options);
        }
        // The daemon's log goes to a file: a pipe nobody reads would stop
        // the daemon once it filled.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("daemon log");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn mount");
        let start = Instant::now();
        while !is_mounted(&self.mnt) {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("mount exited with {st}: {}", self.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "mount not ready after 30 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child = Some(child);
    }

    /// Where the daemon logs.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }

    /// What the daemon logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Clean unmount; waits for the daemon to commit and exit 0.
    pub fn unmount(&mut self) {
        if self.child.is_none() {
            return;
        }
        let start = Instant::now();
        loop {
            let st = Command::new("fusermount3")
                .arg("-u")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status();
            if st.map(|s| s.success()).unwrap_or(false) || !is_mounted(&self.mnt) {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "unmount kept failing"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Only now is the daemon ours to reap: if anything above panics,
        // Drop still detaches the mount and ends the daemon.
        let mut child = self.child.take().expect("daemon child");
        let st = wait_timeout(&mut child, Duration::from_secs(60))
            .expect("daemon did not exit after unmount");
        assert!(st.success(), "daemon exited with {st}");
    }

    /// Unmount and wait for the daemon, whatever its exit status.
    pub fn unmount_any(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("mounted");
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(&self.mnt)
            .status();
        wait_timeout(&mut child, Duration::from_secs(60))
            .expect("daemon did not exit after unmount")
    }

    /// SIGKILL the daemon (a crash), then detach the dead mount.
    pub fn kill9(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        child.kill().expect("kill -9");
        let _ = child.wait();
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg("-z")
            .arg(&self.mnt)
            .stderr(Stdio::null())
            .status();
        let start = Instant::now();
        while is_mounted(&self.mnt) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "dead mount still listed"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn fsck(&self) -> Output {
        churnfs(&["fsck", self.store.to_str().unwrap()])
    }

    pub fn assert_fsck_clean(&self) {
        let out = self.fsck();
        assert!(
            out.status.success(),
            "fsck found problems:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs a shell command with the mountpoint as working directory.
    pub fn sh(&self, script: &str) -> Output {
        let out = Command::new("sh")
            .arg("-ec")
            .arg(script)
            .current_dir(&self.mnt)
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "`{script}` failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

pub fn wait_timeout(child: &mut Child, d: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if start.elapsed() > d {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status();
            if wait_timeout(&mut child, Duration::from_secs(20)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One counter of `churnfs stats` for the mount.
pub fn stat_of(m: &Mount, key: &str) -> u64 {
    let out = churnfs(&["stats", m.mnt.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{key} "))
                .map(|v| v.parse().unwrap())
        })
        .unwrap_or_else(|| {
            panic!(
                "{key} missing from stats ({}):\n{text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// The daemon's threads: each one's name (`comm`) and its
/// `/proc/PID/task/TID` directory.
pub fn daemon_threads(m: &Mount) -> Vec<(String, PathBuf)> {
    let pid = m.child.as_ref().expect("daemon running").id();
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            Some((comm.trim().to_string(), t.path()))
        })
        .collect()
}

/// A shared volume on a fresh etcd cluster, its file data in a directory
/// of its own or in an S3 server of its own.
pub struct Volume {
    pub etcd: churnfs_tests::etcd::EtcdCluster,
    pub s3: Option<churnfs_tests::s3::S3Server>,
    /// Holds the file data (or the mounts' read caches); removed with the
    /// volume.
    dir: tempfile::TempDir,
    pub url: String,
}

/// Mount options for shared-mode tests: sessions noticed dead within
/// seconds, and operations that give up within seconds.
pub const SHARED_OPTS: &str = "session_ttl_ms=3000,op_timeout_ms=8000";

/// The upload window of the volumes on S3 here: gc's grace may be 8 s.
/// (A batch reached past half the window stores its objects again: at
/// 2 s, a loaded 2-core CI run would do that often.)
pub const UPLOAD_WINDOW_MS: &str = "4000";

impl Volume {
    /// A volume on a new `members`-member cluster, its data in a local
    /// directory.
    pub fn new(members: usize) -> Volume {
        Volume::make(members, false)
    }

    /// A volume on a new `members`-member cluster, its data in a new S3
    /// server.
    pub fn on_s3(members: usize) -> Volume {
        Volume::make(members, true)
    }

    fn make(members: usize, s3: bool) -> Volume {
        let etcd = churnfs_tests::etcd::EtcdCluster::start(members);
        let s3 = s3.then(churnfs_tests::s3::S3Server::start);
        let dir = tempfile::Builder::new()
            .prefix("churnfs-volume-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let url = etcd.url("test");
        let data = match &s3 {
            Some(s) => s.data_url("test"),
            None => format!("file://{}/data", dir.path().display()),
        };
        let out = churnfs(&[
            "mkfs",
            &url,
            "--data",
            &data,
            "--upload-window-ms",
            UPLOAD_WINDOW_MS,
        ]);
        assert!(
            out.status.success(),
            "mkfs of {url} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Volume { etcd, s3, dir, url }
    }

    /// A mount of the volume with `options` (added to `SHARED_OPTS`), its
    /// read cache under the volume's directory.
    pub fn mount(&self, options: &str) -> Mount {
        let mut opts = format!(
            "{SHARED_OPTS},cache_dir={}/cache",
            self.dir.path().display()
        );
        if !options.is_empty() {
            opts = format!("{opts},{options}");
        }
        Mount::attach(&self.url, &opts)
    }

    /// `churnfs gc` of the volume with `--grace SECS`: its output line.
    pub fn gc(&self, grace: u64) -> String {
        let out = churnfs(&["gc", &self.url, "--grace", &grace.to_string()]);
        assert!(
            out.status.success(),
            "gc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// fsck of the volume: its report, asserted clean.
    pub fn assert_fsck_clean(&self) -> String {
        let out = churnfs(&["fsck", &self.url]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "fsck found problems:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

/// Waits until `f` holds, up to `limit`; false if it never did.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
