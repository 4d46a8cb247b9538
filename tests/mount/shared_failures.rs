//! Shared mode when things fail: a member of the engine lost during churn
//! (no caller sees an error), quorum lost (operations answer EIO within
//! their deadline, nothing half-applied) and back (the mounts work again
//! without a remount); a mount paused past its lease (fenced: it writes
//! nothing under its old session, gets a new one, loses nothing it had
//! acknowledged); and bad input at mkfs and mount.

use crate::support::{churnfs, eventually, stat_of, Volume};
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// create, write, close, unlink in `dir` until `stop`; counts cycles, and
/// errors into `errors` (with the first one kept).
fn churn(dir: PathBuf, stop: Arc<AtomicBool>, cycles: Arc<AtomicU64>) -> Vec<String> {
    let mut errors = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let p = dir.join(format!("c{i}"));
        let r = (|| -> std::io::Result<()> {
            let mut f = fs::File::create(&p)?;
            f.write_all(&[b'x'; 100])?;
            drop(f);
            fs::remove_file(&p)
        })();
        match r {
            Ok(()) => {
                cycles.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => errors.push(format!("cycle {i}: {e}")),
        }
        i += 1;
    }
    errors
}

#[test]
fn engine_members_lost_and_back_cost_callers_nothing_but_the_wait() {
    let mut vol = Volume::new(3);
    let a = vol.mount("op_timeout_ms=5000");
    let b = vol.mount("op_timeout_ms=5000");
    fs::create_dir(a.path("ca")).unwrap();
    fs::create_dir(a.path("cb")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = [a.path("ca"), b.path("cb")]
        .into_iter()
        .map(|d| {
            let (stop, cycles) = (stop.clone(), cycles.clone());
            std::thread::spawn(move || churn(d, stop, cycles))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    // One member of three dies: the cluster keeps its quorum.
    vol.etcd.kill(0);
    let before = cycles.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    let errors: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        errors.is_empty(),
        "callers saw errors with one member down: {errors:?}\na's log:\n{}\nb's log:\n{}",
        a.log(),
        b.log()
    );
    let after = cycles.load(Ordering::Relaxed);
    assert!(after > before, "no cycle completed with one member down");

    // A second member dies: no quorum. An operation that needs the
    // engine waits its deadline, then answers EIO; it does not hang. In a
    // directory delegated to the mount (`ca`: a alone changes it) a change
    // is applied there and durable once its batch is committed, as on a
    // local filesystem: its fsync answers EIO until the engine is back.
    vol.etcd.kill(1);
    // The create is answered from a's image while a's lease is known
    // fresh (and its inode numbers last); else it needs the engine and
    // fails. Either way the outcome holds after the outage: a create that
    // was answered is there, one that failed is not.
    let t = Instant::now();
    let acknowledged = match fs::File::create(a.path("ca/during-outage")) {
        Ok(mut f) => {
            std::io::Write::write_all(&mut f, b"x").expect("write");
            match f.sync_all() {
                Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
                Ok(()) => panic!("an fsync without quorum succeeded"),
            }
            true
        }
        Err(e) => {
            assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
            false
        }
    };
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "the failed operation took {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    let r = fs::create_dir(a.path("during-outage"));
    let waited = t.elapsed();
    match r {
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
        Ok(()) => panic!("a mkdir without quorum succeeded"),
    }
    assert!(
        waited < Duration::from_secs(30),
        "the failed operation took {waited:?}"
    );
    // Both members back: the mounts work again, without a remount.
    vol.etcd.restart(0);
    vol.etcd.restart(1);
    vol.etcd.wait_ready(Duration::from_secs(60));
    for (m, d) in [(&a, "ca"), (&b, "cb")] {
        let p = m.path(&format!("{d}/after-outage"));
        assert!(
            eventually(Duration::from_secs(30), || fs::write(&p, b"back").is_ok()),
            "{} did not recover",
            m.mnt.display()
        );
        assert_eq!(fs::read(&p).unwrap(), b"back");
    }
    // The batch that held an answered create went in once the engine was
    // back: the other mount sees the name (and takes the directory back
    // to do so); a create that failed left nothing.
    assert_eq!(
        b.path("ca/during-outage").exists(),
        acknowledged,
        "answered: {acknowledged}\na's log:\n{}\nb's log:\n{}",
        a.log(),
        b.log()
    );
    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}

#[test]
fn a_mount_paused_past_its_lease_is_fenced_and_loses_nothing_acknowledged() {
    let vol = Volume::new(3);
    let mut a = vol.mount("");
    let b = vol.mount("");
    // Durable once fsync returns (the root is delegated to a, the only
    // mount changing it: without the fsync the create would be durable
    // within delegate_flush_ms, as on a local filesystem).
    let mut kept = fs::File::create(a.path("kept")).unwrap();
    std::io::Write::write_all(&mut kept, b"acknowledged").unwrap();
    kept.sync_all().unwrap();
    drop(kept);
    // A file held open-unlinked on a, by a process of its own: a process
    // that holds a descriptor of a mount whose daemon is stopped hangs when
    // it forks (the child's exec closes it, and a close waits for FLUSH),
    // so this test process holds none while a is stopped.
    let held_path = a.path("held");
    fs::write(&held_path, b"open").unwrap();
    let mut holder = std::process::Command::new("sleep")
        .arg("600")
        .stdin(fs::File::open(&held_path).unwrap())
        .spawn()
        .unwrap();
    fs::remove_file(&held_path).unwrap();
    assert_eq!(stat_of(&a, "unlinked_inodes"), 1);
    let first = stat_of(&a, "session_id");
    let pid = a.child.as_ref().unwrap().id() as i32;
    // SAFETY: signals to our own child, by its PID.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    // Its 3 s lease runs out; b reclaims what the session held.
    let reclaimed = eventually(Duration::from_secs(30), || {
        stat_of(&b, "sessions_reclaimed") >= 1
    });
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(reclaimed, "b never reclaimed the paused mount's session");
    // a writes again once it has a new session.
    assert!(
        eventually(Duration::from_secs(30), || fs::write(a.path("later"), b"l")
            .is_ok()),
        "the fenced mount never came back"
    );
    assert!(stat_of(&a, "fenced") >= 1, "a was never fenced");
    assert_ne!(
        stat_of(&a, "session_id"),
        first,
        "a kept its expired session"
    );
    assert_eq!(fs::read(a.path("kept")).unwrap(), b"acknowledged");
    assert_eq!(fs::read(b.path("kept")).unwrap(), b"acknowledged");
    // The held file was reclaimed while a was paused: opening it again
    // through the holder's descriptor answers an error, never other data.
    let again = fs::read(format!("/proc/{}/fd/0", holder.id()));
    assert!(again.is_err(), "a reclaimed file read back {again:?}");
    holder.kill().unwrap();
    holder.wait().unwrap();
    a.unmount();
    drop(b);
    vol.assert_fsck_clean();
}

fn fails_with(args: &[&str], what: &str) {
    let out = churnfs(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(
        err.contains(what),
        "{args:?}: {err:?} does not say {what:?}"
    );
    assert_eq!(
        err.trim().lines().count(),
        1,
        "{args:?}: not one line: {err:?}"
    );
}

#[test]
fn bad_volumes_and_urls_are_refused_with_one_line() {
    let vol = Volume::new(1);
    let mnt = tempfile::tempdir_in("/tmp").unwrap();
    let m = mnt.path().to_str().unwrap();
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    fails_with(
        &["mount", &format!("etcd://127.0.0.1:{port}/v"), m],
        "metadata engine unreachable",
    );
    let ep = vol.etcd.endpoints()[0].clone();
    fails_with(
        &["mount", &format!("etcd://{ep}/nosuch"), m],
        "not a churnfs volume",
    );
    fails_with(&["mount", &format!("etcd://{ep}"), m], "names no volume");
    fails_with(&["mount", &format!("etcd://{ep}/a/b"), m], "volume name");
    fails_with(&["mkfs", &format!("etcd://{ep}/v2")], "needs --data");
    fails_with(
        &["mkfs", &vol.url, "--data", "file:///tmp/x"],
        "exists already",
    );
    fails_with(
        &["mkfs", &format!("etcd://{ep}/v3"), "--data", "s4://bucket"],
        "is not one churnfs serves",
    );
    // A volume of another format version.
    let mut sb = b"CHURNVOL".to_vec();
    sb.extend_from_slice(&99u32.to_le_bytes());
    sb.extend_from_slice(&[0u8; 40]);
    assert!(vol.etcd.put(b"churnfs/future/S", &sb), "etcdctl put");
    fails_with(
        &["mount", &format!("etcd://{ep}/future"), m],
        "format version 99",
    );
    assert!(
        fs::read_dir(m).unwrap().next().is_none(),
        "something was mounted"
    );
}
