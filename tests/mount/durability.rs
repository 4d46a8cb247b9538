//! What survives an unmount and a kill -9 of the daemon.

use crate::support::Mount;
use std::fs;
use std::io::Write;

#[test]
fn fsynced_data_survives_unmount_and_kill9() {
    let mut m = Mount::new("commit_interval_ms=600000");
    let mut f = fs::File::create(m.path("durable")).unwrap();
    f.write_all(b"acknowledged").unwrap();
    f.sync_all().unwrap();
    drop(f);
    fs::create_dir(m.path("dir")).unwrap();
    let d = fs::File::open(m.path("dir")).unwrap();
    fs::write(m.path("dir/inside"), b"named").unwrap();
    fs::File::open(m.path("dir/inside"))
        .unwrap()
        .sync_all()
        .unwrap();
    d.sync_all().unwrap();
    drop(d);
    m.unmount();
    m.assert_fsck_clean();
    m.start();
    assert_eq!(fs::read(m.path("durable")).unwrap(), b"acknowledged");
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(m.path("durable"))
        .unwrap();
    f.write_all(b" twice").unwrap();
    f.sync_all().unwrap();
    // Not fsynced: may or may not survive, but must not break anything.
    fs::write(m.path("volatile"), b"maybe").unwrap();
    m.kill9();
    m.assert_fsck_clean();
    m.start();
    assert_eq!(fs::read(m.path("durable")).unwrap(), b"acknowledged twice");
    assert_eq!(fs::read(m.path("dir/inside")).unwrap(), b"named");
    if let Ok(v) = fs::read(m.path("volatile")) {
        assert_eq!(v, b"maybe");
    }
    m.unmount();
    m.assert_fsck_clean();
}

#[test]
fn open_unlinked_file_is_reclaimed_after_kill9() {
    let mut m = Mount::new("commit_interval_ms=600000");
    let mut f = fs::File::create(m.path("victim")).unwrap();
    f.write_all(&vec![1u8; 500_000]).unwrap();
    fs::remove_file(m.path("victim")).unwrap();
    f.sync_all().unwrap();
    m.kill9();
    drop(f);
    m.start();
    // Asked at once: the stats socket must answer as soon as the mount is
    // seen (it is bound before the mount appears). The reclaim runs in the
    // background after the mount is ready, so the count may still be 0
    // then (it was, once, in CI under load); it must reach 1.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut recovered = crate::support::stat_of(&m, "recovered_unlinked");
    while recovered == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        recovered = crate::support::stat_of(&m, "recovered_unlinked");
    }
    assert_eq!(recovered, 1);
    m.unmount();
    m.assert_fsck_clean();
}

/// SIGTERM (and SIGINT) end the daemon cleanly: everything is committed and
/// the filesystem unmounted, with no fsync before.
#[test]
fn sigterm_and_sigint_commit_and_unmount() {
    let mut m = Mount::new("commit_interval_ms=600000");
    for (i, sig) in [libc::SIGTERM, libc::SIGINT].into_iter().enumerate() {
        let name = format!("unsynced{i}");
        fs::write(m.path(&name), b"committed at unmount").unwrap();
        let mut child = m.child.take().unwrap();
        // SAFETY: signalling our own child by its PID.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let st = crate::support::wait_timeout(&mut child, std::time::Duration::from_secs(30))
            .expect("daemon did not exit on the signal");
        assert!(st.success(), "daemon exited with {st} on signal {sig}");
        assert!(
            !crate::support::is_mounted(&m.mnt),
            "still mounted after signal {sig}"
        );
        m.assert_fsck_clean();
        m.start();
        assert_eq!(fs::read(m.path(&name)).unwrap(), b"committed at unmount");
    }
    m.unmount();
}
