//! The kernel's negative dentries for the mount stay within the budget: the
//! adapter tracks names the kernel may hold as negative (missing lookups,
//! unlinked names) and invalidates the oldest beyond `kernel_negative_max`.
//! Negative replies carry a TTL, and a name created later is seen at once.
//! The inodes the kernel holds stay near their bound too.

use crate::support::{stat_of, Mount};
use std::fs;

#[test]
fn churned_and_missing_names_are_invalidated_beyond_the_budget() {
    let mut m = Mount::new("kernel_negative_max=500,negative_ttl_ms=60000");
    fs::create_dir(m.path("spool")).unwrap();
    for i in 0..3000 {
        let p = m.path(&format!("spool/job{i}"));
        fs::write(&p, b"payload").unwrap();
        fs::remove_file(&p).unwrap();
        assert!(fs::metadata(m.path(&format!("spool/missing{i}"))).is_err());
    }
    assert!(stat_of(&m, "kernel_negative_tracked") <= 500);
    // 6000 names noted, at most 500 tracked: the rest were handed to the
    // invalidation thread, which works in the background.
    let mut sent = 0;
    for _ in 0..200 {
        sent = stat_of(&m, "kernel_negative_invalidated")
            + stat_of(&m, "kernel_negative_inval_enoent")
            + stat_of(&m, "kernel_negative_inval_failed");
        if sent >= 5000 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(
        sent >= 5000,
        "only {sent} invalidations sent for 6000 negative names"
    );
    assert_eq!(stat_of(&m, "kernel_negative_dropped"), 0);
    // A name the kernel cached as missing (60 s TTL) is there once created.
    assert!(fs::metadata(m.path("spool/later")).is_err());
    fs::write(m.path("spool/later"), b"now").unwrap();
    assert_eq!(fs::read(m.path("spool/later")).unwrap(), b"now");
    fs::rename(m.path("spool/later"), m.path("spool/renamed")).unwrap();
    assert!(fs::metadata(m.path("spool/later")).is_err());
    assert_eq!(fs::read(m.path("spool/renamed")).unwrap(), b"now");
    m.unmount();
    m.assert_fsck_clean();
}

/// A bind mount, undone when dropped, so that a failed assertion does not
/// leave it on top of the test's mount.
struct Bind(std::path::PathBuf);

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Waits up to 5 s for counter `key` to reach `at_least`; returns its value.
fn wait_for(m: &Mount, key: &str, at_least: u64) -> u64 {
    let mut v = 0;
    for _ in 0..200 {
        v = stat_of(m, key);
        if v >= at_least {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    v
}

/// Dropping a directory's cached names at once (one notification for the
/// directory) would make the kernel detach every mount below it; with a
/// mount on a file in the directory the names go one by one instead, and
/// once it is gone the directory goes whole. Lookups answer right either way.
#[test]
fn a_mount_in_a_churned_directory_is_never_detached() {
    let mut m = Mount::new("kernel_negative_max=200,negative_ttl_ms=60000");
    fs::create_dir(m.path("spool")).unwrap();
    fs::write(m.path("spool/keep"), b"under").unwrap();
    let over = m.dir.path().join("over");
    fs::write(&over, b"over").unwrap();
    let target = m.path("spool/keep");
    let st = std::process::Command::new("mount")
        .arg("--bind")
        .arg(&over)
        .arg(&target)
        .status()
        .unwrap();
    assert!(st.success(), "bind mount failed");
    let bind = Bind(target.clone());
    let miss = |from: usize| {
        for i in from..from + 1000 {
            assert!(fs::metadata(m.path(&format!("spool/missing{i}"))).is_err());
        }
    };
    miss(0);
    assert!(wait_for(&m, "kernel_negative_dir_flush_refused", 1) >= 1);
    assert!(wait_for(&m, "kernel_negative_invalidated", 700) >= 700);
    assert_eq!(stat_of(&m, "kernel_negative_dir_flushes"), 0);
    assert_eq!(
        fs::read(&target).unwrap(),
        b"over",
        "the bind mount is gone"
    );
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(mountinfo.contains(target.to_str().unwrap()));
    drop(bind);
    assert_eq!(fs::read(&target).unwrap(), b"under");
    miss(1000);
    assert!(wait_for(&m, "kernel_negative_dir_flushes", 1) >= 1);
    // After the directory went whole: its file, missing names and new names.
    assert_eq!(fs::read(&target).unwrap(), b"under");
    assert!(fs::metadata(m.path("spool/missing1999")).is_err());
    fs::write(m.path("spool/missing5"), b"now").unwrap();
    assert_eq!(fs::read(m.path("spool/missing5")).unwrap(), b"now");
    assert_eq!(stat_of(&m, "kernel_negative_dropped"), 0);
    m.unmount();
    m.assert_fsck_clean();
}

/// Four threads churn in four directories while the budget overflows and
/// directories are dropped whole; one directory is renamed halfway (its
/// learned name goes stale). Every answer stays right: a file just written
/// reads back, an unlinked or never-made name is missing, a kept file keeps
/// its bytes.
#[test]
fn churn_in_several_directories_stays_right_while_they_go_whole() {
    let mut m = Mount::new("kernel_negative_max=300,negative_ttl_ms=60000");
    let root = m.mnt.clone();
    std::thread::scope(|s| {
        for t in 0..4 {
            let root = root.clone();
            s.spawn(move || {
                let mut dir = root.join(format!("d{t}"));
                fs::create_dir(&dir).unwrap();
                fs::write(dir.join("keep"), format!("kept {t}")).unwrap();
                for i in 0..1500 {
                    if t == 0 && i == 750 {
                        let moved = root.join("d0-moved");
                        fs::rename(&dir, &moved).unwrap();
                        dir = moved;
                    }
                    let f = dir.join(format!("f{i}"));
                    fs::write(&f, i.to_string()).unwrap();
                    assert_eq!(fs::read_to_string(&f).unwrap(), i.to_string());
                    fs::remove_file(&f).unwrap();
                    assert!(fs::metadata(&f).is_err(), "{f:?} still there");
                    assert!(fs::metadata(dir.join(format!("never{i}"))).is_err());
                    if i % 250 == 0 {
                        assert_eq!(
                            fs::read_to_string(dir.join("keep")).unwrap(),
                            format!("kept {t}")
                        );
                    }
                }
                assert_eq!(
                    fs::read_to_string(dir.join("keep")).unwrap(),
                    format!("kept {t}")
                );
            });
        }
    });
    assert!(wait_for(&m, "kernel_negative_dir_flushes", 1) >= 1);
    assert!(stat_of(&m, "kernel_negative_tracked") <= 300);
    assert!(fs::metadata(m.path("d0")).is_err());
    assert_eq!(
        fs::read_to_string(m.path("d0-moved/keep")).unwrap(),
        "kept 0"
    );
    m.unmount();
    m.assert_fsck_clean();
}

/// A caller that works in the directory by relative names (a spool daemon
/// that changed into its spool) holds the directory's dentry; after each
/// whole-directory drop the side thread walks the directory's path, so the
/// kernel finds it by name again and every drop after the first works too.
#[test]
fn a_working_directory_goes_whole_again_and_again() {
    let mut m = Mount::new("kernel_negative_max=200,negative_ttl_ms=60000");
    fs::create_dir_all(m.path("a/spool")).unwrap();
    let st = std::process::Command::new("sh")
        .current_dir(m.path("a/spool"))
        .arg("-c")
        .arg("i=0; while [ $i -lt 1500 ]; do [ -e m$i ] && exit 1; i=$((i+1)); done")
        .status()
        .unwrap();
    assert!(st.success(), "a missing name was found");
    assert!(wait_for(&m, "kernel_negative_dir_flushes", 3) >= 3);
    assert_eq!(stat_of(&m, "kernel_negative_dir_flush_refused"), 0);
    m.unmount();
    m.assert_fsck_clean();
}

/// The inodes the kernel holds for the mount stay near
/// `kernel_inodes_max` however many files were created and listed
/// (FUSE_NOTIFY_PRUNE, Linux 6.18+); an older kernel refuses it and the
/// mount says so in its stats.
#[test]
fn the_inodes_the_kernel_holds_stay_near_their_bound() {
    let m = Mount::new("kernel_inodes_max=500");
    std::fs::create_dir(m.path("d")).unwrap();
    for i in 0..4000 {
        std::fs::write(m.path(&format!("d/f{i}")), b"").unwrap();
    }
    let mut listed = 0;
    for e in std::fs::read_dir(m.path("d")).unwrap() {
        assert!(e.unwrap().metadata().unwrap().is_file());
        listed += 1;
    }
    assert_eq!(listed, 4000);
    if stat_of(&m, "kernel_prune_unsupported") == 1 {
        assert_eq!(stat_of(&m, "kernel_prunes"), 0);
        return;
    }
    assert!(stat_of(&m, "kernel_prunes") > 0);
    // The last prunes' FORGETs come after their replies.
    let held = || stat_of(&m, "kernel_known_inodes");
    assert!(
        crate::support::eventually(std::time::Duration::from_secs(10), || held()
            <= 500 + 2 * 256),
        "the kernel holds {} inodes",
        held()
    );
}
