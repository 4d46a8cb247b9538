//! mount(8) and fstab: `mount -t fuse.churnfs STORE MNT -o ...` and an
//! fstab line (`mount -a`) mount a store through the helper
//! `/sbin/mount.fuse.churnfs` (`make install` links it; here it is linked
//! to this build's binary for the test, and put back after); `umount`
//! unmounts; /proc/mounts shows type `fuse.churnfs` with the store as the
//! source.

use crate::support::{churnfs, churnfs_bin, eventually, is_mounted};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

const HELPER: &str = "/sbin/mount.fuse.churnfs";

/// One test at a time owns the helper's link.
static LINK: Mutex<()> = Mutex::new(());

/// The helper linked to this build's binary while the test runs; what was
/// there before is put back on drop.
struct HelperLink {
    previous: Option<PathBuf>,
    _held: std::sync::MutexGuard<'static, ()>,
}

impl HelperLink {
    fn install() -> HelperLink {
        let held = LINK.lock().unwrap_or_else(|e| e.into_inner());
        let previous = std::fs::read_link(HELPER).ok();
        assert!(
            previous.is_some() || !Path::new(HELPER).exists(),
            "{HELPER} exists and is not a link: not replacing it"
        );
        let _ = std::fs::remove_file(HELPER);
        std::os::unix::fs::symlink(churnfs_bin(), HELPER).expect("link the mount helper");
        HelperLink {
            previous,
            _held: held,
        }
    }
}

impl Drop for HelperLink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(HELPER);
        if let Some(p) = &self.previous {
            let _ = std::os::unix::fs::symlink(p, HELPER);
        }
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run a command")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The /proc/mounts line of `mnt`: (source, type).
fn mount_entry(mnt: &Path) -> Option<(String, String)> {
    let all = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let want = mnt.to_string_lossy().to_string();
    all.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(1) == Some(&want.as_str())).then(|| (f[0].to_string(), f[2].to_string()))
    })
}

/// The daemon's pid from the helper's "... (daemon pid N)" line.
fn daemon_pid(out: &Output) -> u32 {
    let s = text(&out.stdout);
    s.rsplit("daemon pid ")
        .next()
        .and_then(|t| t.trim().trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("no daemon pid in {s:?}"))
}

fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie has exited: its parent has not reaped it yet.
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|t| t.trim_start().starts_with('Z')),
    }
}

/// `umount`, then the daemon's exit (it commits and ends on its own).
fn umount_and_wait(mnt: &Path, pid: u32) {
    let out = run(Command::new("umount").arg(mnt));
    assert!(out.status.success(), "umount: {}", text(&out.stderr));
    assert!(!is_mounted(mnt));
    assert!(
        eventually(Duration::from_secs(60), || gone(pid)),
        "daemon {pid} still running after umount"
    );
}

fn fresh_store() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("churnfs-test-")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let store = dir.path().join("store");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mountpoint");
    let out = churnfs(&["mkfs", store.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "mkfs: {}", text(&out.stderr));
    (dir, store, mnt)
}

#[test]
fn mount_t_and_an_fstab_line_mount_a_store_and_umount_unmounts_it() {
    let _link = HelperLink::install();
    let (dir, store, mnt) = fresh_store();
    // Options for mount(8) and systemd pass through the helper unharmed;
    // churnfs's own apply.
    let out = run(Command::new("mount")
        .args(["-t", "fuse.churnfs"])
        .arg(&store)
        .arg(&mnt)
        .args([
            "-o",
            "entry_ttl_ms=50,_netdev,nofail,x-systemd.requires=network-online.target",
        ]));
    assert!(out.status.success(), "mount -t: {}", text(&out.stderr));
    let pid = daemon_pid(&out);
    assert_eq!(
        mount_entry(&mnt),
        Some((store.display().to_string(), "fuse.churnfs".to_string()))
    );
    std::fs::write(mnt.join("hello"), b"through mount(8)").expect("write");
    umount_and_wait(&mnt, pid);

    // The same store from an fstab line, by `mount -a` and by mountpoint.
    let fstab = dir.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "# a churnfs store\n{} {} fuse.churnfs defaults,_netdev,nofail,x-systemd.automount,attr_ttl_ms=100 0 0\n",
            store.display(),
            mnt.display()
        ),
    )
    .expect("fstab");
    for how in [vec!["-a"], vec![mnt.to_str().expect("utf-8 path")]] {
        let out = run(Command::new("mount").arg("-T").arg(&fstab).args(&how));
        assert!(out.status.success(), "mount {how:?}: {}", text(&out.stderr));
        assert!(is_mounted(&mnt), "mount {how:?} mounted nothing");
        assert_eq!(
            std::fs::read(mnt.join("hello")).expect("read"),
            b"through mount(8)"
        );
        umount_and_wait(&mnt, daemon_pid(&out));
    }
    let out = churnfs(&["fsck", store.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "fsck: {}", text(&out.stdout));
}

#[test]
fn a_bad_mount_line_fails_with_one_line_and_mounts_nothing() {
    let _link = HelperLink::install();
    let (dir, store, mnt) = fresh_store();
    let missing = dir.path().join("no-such-store");
    let cases: [(&Path, &str, &str); 3] = [
        (&missing, "", "no-such-store"),
        (&store, "bogus_option=1", "bogus_option"),
        (&store, "ro", "read-only"),
    ];
    for (source, opts, says) in cases {
        let mut cmd = Command::new("mount");
        cmd.args(["-t", "fuse.churnfs"]).arg(source).arg(&mnt);
        if !opts.is_empty() {
            cmd.args(["-o", opts]);
        }
        let out = run(&mut cmd);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{opts:?}: mount succeeded");
        assert!(!is_mounted(&mnt), "{opts:?}: something was mounted");
        let ours: Vec<&str> = err.lines().filter(|l| l.contains("churnfs")).collect();
        assert_eq!(ours.len(), 1, "{opts:?}: not one line: {err:?}");
        assert!(ours[0].contains(says), "{opts:?}: {err:?}");
    }
}

/// A stand-in for systemd's notification socket (Type=notify): the
/// datagrams sd_notify(3) sends.
struct NotifySocket {
    sock: std::os::unix::net::UnixDatagram,
    path: PathBuf,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).expect("notify socket");
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        NotifySocket { sock, path }
    }

    /// Starts `cmd` with NOTIFY_SOCKET naming this socket.
    fn spawn(&self, cmd: &mut Command) -> std::process::Child {
        cmd.env("NOTIFY_SOCKET", &self.path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the daemon")
    }

    /// The next datagram (within 30 s) says `state`.
    fn expect(&self, state: &str) {
        let mut buf = [0u8; 256];
        let n = self
            .sock
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("no {state} within 30 s: {e}"));
        let said = text(&buf[..n]);
        assert!(said.lines().any(|l| l == state), "{said:?}");
    }
}

#[test]
fn the_daemon_tells_the_service_manager_when_the_mount_is_ready_and_when_it_stops() {
    let (dir, store, mnt) = fresh_store();
    let notify = NotifySocket::bind(dir.path());
    let mut child = notify.spawn(
        Command::new(churnfs_bin())
            .arg("mount")
            .arg(&store)
            .arg(&mnt),
    );
    notify.expect("READY=1");
    // Ready means mounted: what starts after it finds the filesystem.
    assert!(is_mounted(&mnt), "READY=1 before the mount");
    std::fs::write(mnt.join("f"), b"x").expect("write");
    let out = run(Command::new("umount").arg(&mnt));
    assert!(out.status.success(), "umount: {}", text(&out.stderr));
    notify.expect("STOPPING=1");
    let st = child.wait().expect("daemon exit");
    assert!(st.success(), "daemon exited with {st}");
}

/// The systemd unit template (dist/churnfs@.service). systemd is not PID 1
/// on this machine, so no unit can be started for real: systemd's own
/// parser (`systemd-analyze verify`) checks an instance of it, and a
/// stand-in for the service manager runs its ExecStart as systemd would
/// (the instance's path for %f, the environment file's variables, a
/// notification socket), waits for READY=1, then stops it as systemd does
/// (KillSignal) and waits for a clean exit.
#[test]
fn the_systemd_unit_verifies_and_its_exec_start_mounts_notifies_and_stops_cleanly() {
    let (dir, store, mnt) = fresh_store();
    let bindir = churnfs_bin().parent().expect("bin dir").to_path_buf();
    let template = include_str!("../../dist/churnfs@.service")
        .replace("@BINDIR@", bindir.to_str().expect("utf-8 path"));
    let escaped = run(Command::new("systemd-escape").arg("--path").arg(&mnt));
    assert!(
        escaped.status.success(),
        "systemd-escape: {}",
        text(&escaped.stderr)
    );
    let instance = text(&escaped.stdout).trim().to_string();
    let unit = dir.path().join(format!("churnfs@{instance}.service"));
    std::fs::write(&unit, &template).expect("write the unit");
    let verify = run(Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .current_dir(dir.path()));
    assert!(
        verify.status.success() && !text(&verify.stderr).contains("churnfs@"),
        "systemd-analyze verify: {}",
        text(&verify.stderr)
    );
    // What systemd would run: ExecStart with %f and the variables of
    // /etc/churnfs/INSTANCE.conf expanded.
    let exec = template
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let vars = [
        ("${STORE}", store.to_str().expect("utf-8 path")),
        ("${OPTIONS}", "commit_interval_ms=500"),
        ("%f", mnt.to_str().expect("utf-8 path")),
    ];
    let argv: Vec<String> = exec
        .split_whitespace()
        .map(|w| vars.iter().fold(w.to_string(), |w, (k, v)| w.replace(k, v)))
        .collect();
    let notify = NotifySocket::bind(dir.path());
    let mut child = notify.spawn(Command::new(&argv[0]).args(&argv[1..]));
    notify.expect("READY=1");
    assert!(is_mounted(&mnt), "READY=1 before the mount");
    std::fs::write(mnt.join("kept"), b"committed at stop").expect("write");
    // Stop: the unit's KillSignal to the main process.
    assert!(template.lines().any(|l| l == "KillSignal=SIGTERM"));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    notify.expect("STOPPING=1");
    let st = child.wait().expect("daemon exit");
    assert!(st.success(), "ExecStart exited with {st} on SIGTERM");
    assert!(
        eventually(Duration::from_secs(5), || !is_mounted(&mnt)),
        "still mounted after the stop"
    );
    // What was written before the stop is in the store.
    let out = churnfs(&["fsck", store.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "fsck: {}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("1 names"),
        "{}",
        text(&out.stdout)
    );
}
