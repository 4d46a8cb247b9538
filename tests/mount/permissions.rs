//! Permissions seen by unprivileged users on an `allow_other` mount: the
//! kernel checks modes (`default_permissions`) against the attributes the
//! engine keeps; the sticky bit protects a shared spool; a write by an
//! unprivileged user clears setuid/setgid; setgid directories pass on their group.

use crate::support::{stat_of, Mount};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Output};

const NOBODY: u32 = 65534;

fn uid_of(user: &str) -> u32 {
    let out = Command::new("id").arg("-u").arg(user).output().unwrap();
    assert!(
        out.status.success(),
        "user {user} missing: scripts/install-deps.sh creates it"
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// Runs `script` with `sh` as the user `uid` (its own group, no others).
fn as_user(uid: u32, dir: &std::path::Path, script: &str) -> Output {
    Command::new("setpriv")
        .args([
            format!("--reuid={uid}"),
            format!("--regid={uid}"),
            "--clear-groups".into(),
        ])
        .args(["sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn denied(o: &Output, what: &str, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{what} was allowed");
    assert!(
        err.contains(needle),
        "{what}: expected {needle:?}, got {err}"
    );
}

#[test]
fn unprivileged_users_get_eacces_eperm_and_the_sticky_bit() {
    let tests = uid_of("tests");
    let m = Mount::new("allow_other");
    fs::set_permissions(&m.mnt, fs::Permissions::from_mode(0o755)).unwrap();
    let root_dir = m.mnt.clone();

    // EACCES on a private file and directory.
    fs::write(m.path("secret"), b"root only").unwrap();
    fs::set_permissions(m.path("secret"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::create_dir(m.path("private")).unwrap();
    fs::set_permissions(m.path("private"), fs::Permissions::from_mode(0o700)).unwrap();
    denied(
        &as_user(NOBODY, &root_dir, "cat secret"),
        "read of a 0600 file",
        "Permission denied",
    );
    denied(
        &as_user(NOBODY, &root_dir, "ls private"),
        "listing a 0700 dir",
        "Permission denied",
    );
    denied(
        &as_user(NOBODY, &root_dir, "touch newfile"),
        "create in a 0755 root-owned dir",
        "Permission denied",
    );
    // EPERM: chmod and chown of someone else's file.
    denied(
        &as_user(NOBODY, &root_dir, "chmod 777 secret"),
        "chmod by a non-owner",
        "Operation not permitted",
    );
    denied(
        &as_user(NOBODY, &root_dir, "chown nobody secret"),
        "chown by a non-root user",
        "Operation not permitted",
    );

    // A shared spool: 1777. Users can add files but not remove each other's.
    fs::create_dir(m.path("spool")).unwrap();
    fs::set_permissions(m.path("spool"), fs::Permissions::from_mode(0o1777)).unwrap();
    let spool = m.path("spool");
    ok(
        &as_user(tests, &spool, "echo job > job.tests && chmod 666 job.tests"),
        "tests queues a job",
    );
    ok(
        &as_user(NOBODY, &spool, "echo job > job.nobody"),
        "nobody queues a job",
    );
    denied(
        &as_user(NOBODY, &spool, "rm -f job.tests"),
        "removing another user's job",
        "Operation not permitted",
    );
    denied(
        &as_user(NOBODY, &spool, "mv job.tests stolen"),
        "renaming another user's job",
        "Operation not permitted",
    );
    ok(
        &as_user(NOBODY, &spool, "echo more >> job.tests"),
        "writing a 0666 file in the spool",
    );
    ok(
        &as_user(tests, &spool, "rm job.tests"),
        "owner removes its own job",
    );
    fs::remove_file(spool.join("job.nobody")).unwrap();
    assert_eq!(fs::read_dir(&spool).unwrap().count(), 0);
    drop(m);
}

#[test]
fn write_by_unprivileged_user_clears_setuid_and_setgid() {
    let tests = uid_of("tests");
    let m = Mount::new("allow_other");
    fs::set_permissions(&m.mnt, fs::Permissions::from_mode(0o755)).unwrap();
    let p = m.path("tool");
    fs::write(&p, b"#!/bin/sh\n").unwrap();
    std::os::unix::fs::chown(&p, Some(tests), Some(tests)).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o6777)).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o7777, 0o6777);
    ok(
        &as_user(NOBODY, &m.mnt, "echo appended >> tool"),
        "nobody writes a 0777 file",
    );
    let mode = fs::metadata(&p).unwrap().mode() & 0o7777;
    assert_eq!(
        mode & 0o6000,
        0,
        "setuid/setgid survived a write by another user: {mode:o}"
    );
    assert_eq!(fs::read(&p).unwrap(), b"#!/bin/sh\nappended\n");

    // setgid directory: new entries take its group; new subdirectories keep g+s.
    fs::create_dir(m.path("shared")).unwrap();
    std::os::unix::fs::chown(m.path("shared"), None, Some(tests)).unwrap();
    fs::set_permissions(m.path("shared"), fs::Permissions::from_mode(0o2777)).unwrap();
    ok(
        &as_user(NOBODY, &m.path("shared"), "touch f && mkdir d"),
        "nobody creates in a setgid dir",
    );
    assert_eq!(fs::metadata(m.path("shared/f")).unwrap().gid(), tests);
    let d = fs::metadata(m.path("shared/d")).unwrap();
    assert_eq!(d.gid(), tests);
    assert_ne!(d.mode() & 0o2000, 0, "subdirectory lost setgid");
    drop(m);
}

/// Runs `script` as root without capabilities (empty bounding and
/// inheritable sets), with `groups` as supplementary groups. Such a caller
/// may use a private root mount, and the daemon must hold it to the mode
/// bits as the kernel would.
fn as_capless_root(dir: &std::path::Path, groups: &[u32], script: &str) -> Output {
    let groups = if groups.is_empty() {
        "--clear-groups".to_string()
    } else {
        let list: Vec<String> = groups.iter().map(u32::to_string).collect();
        format!("--groups={}", list.join(","))
    };
    Command::new("setpriv")
        .args([&groups, "--inh-caps=-all", "--bounding-set=-all"])
        .args(["sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
}

fn mount_options(mnt: &std::path::Path) -> String {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = mnt.to_string_lossy().to_string();
    mounts
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(want.as_str()))
        .map(|l| l.split(" - ").nth(1).unwrap_or("").to_string())
        .expect("mount listed")
}

#[test]
fn a_private_mount_checks_permissions_in_the_daemon() {
    let m = Mount::new("");
    assert!(
        !mount_options(&m.mnt).contains("default_permissions"),
        "a private mount leaves the checks to the daemon"
    );
    let shared = Mount::new("allow_other");
    assert!(mount_options(&shared.mnt).contains("default_permissions"));
    drop(shared);

    let d = m.mnt.clone();
    let set = |rel: &str, mode: u32| {
        fs::set_permissions(m.path(rel), fs::Permissions::from_mode(mode)).unwrap()
    };
    let own = |rel: &str, uid: u32, gid: u32| {
        std::os::unix::fs::chown(m.path(rel), Some(uid), Some(gid)).unwrap()
    };
    fs::write(m.path("zero"), b"nobody may").unwrap();
    set("zero", 0o000);
    fs::write(m.path("ro"), b"read only").unwrap();
    set("ro", 0o444);
    fs::write(m.path("grouped"), b"group 4242 reads").unwrap();
    own("grouped", 7, 4242);
    set("grouped", 0o640);
    fs::create_dir(m.path("closed")).unwrap();
    set("closed", 0o000);
    fs::create_dir(m.path("spool")).unwrap();
    own("spool", 8, 8);
    set("spool", 0o1777);
    fs::write(m.path("spool/theirs"), b"job").unwrap();
    own("spool/theirs", 7, 7);
    fs::write(m.path("open666"), b"anyone writes").unwrap();
    own("open666", 7, 7);
    set("open666", 0o666);
    fs::write(m.path("tool"), b"#!/bin/sh\necho ran\n").unwrap();
    set("tool", 0o455);

    // Root with its capabilities passes the mode bits, as with the kernel's
    // checks.
    assert_eq!(fs::read(m.path("zero")).unwrap(), b"nobody may");
    ok(
        &m.sh("ls closed && echo more >> ro"),
        "root with capabilities",
    );

    let no = |script: &str, needle: &str| {
        denied(&as_capless_root(&d, &[], script), script, needle);
    };
    no("cat zero", "Permission denied");
    no("echo x >> ro", "Permission denied");
    no("truncate -s 0 ro", "Permission denied");
    no(": > ro", "Permission denied");
    no("ls closed", "Permission denied");
    no("touch closed/new", "Permission denied");
    no("chown 5 ro", "Operation not permitted");
    no("chmod 666 grouped", "Operation not permitted");
    no("touch -d 2001-01-01 open666", "Operation not permitted");
    no("rm spool/theirs", "Operation not permitted");
    no("ln grouped linked", "Operation not permitted");
    no("cat grouped", "Permission denied");
    no("./tool", "Permission denied");
    no("test -w ro || exit 13; echo writable", "");

    let yes = |groups: &[u32], script: &str| {
        ok(&as_capless_root(&d, groups, script), script);
    };
    yes(
        &[],
        "cat ro && test -r ro && chmod 644 ro && echo again >> ro",
    );
    yes(&[4242], "cat grouped");
    yes(&[], "touch open666 && echo more >> open666");
    yes(
        &[],
        "touch -d 2001-01-01 ro && mkdir mine && touch mine/f && rm -r mine",
    );
    yes(&[], "echo mine > spool/mine && rm spool/mine");
    assert_eq!(fs::read(m.path("ro")).unwrap(), b"read onlymore\nagain\n");
    drop(m);
}

/// Set-ID bits drop as Linux drops them, on a private mount (the daemon
/// checks permissions) and on a shared one (the kernel does): any chown
/// drops setuid, and setgid where the group may execute; a write or a
/// truncate drops them only for a caller without CAP_FSETID. The daemon
/// does it (FUSE_HANDLE_KILLPRIV_V2), so a chown costs no GETATTR.
#[test]
fn set_id_bits_drop_after_chown_truncate_and_unprivileged_write() {
    use std::io::Write;
    for options in ["", "allow_other"] {
        let m = Mount::new(options);
        fs::set_permissions(&m.mnt, fs::Permissions::from_mode(0o755)).unwrap();
        let p = m.path("f");
        let mode = || fs::metadata(&p).unwrap().mode() & 0o7777;
        let set = |bits: u32| fs::set_permissions(&p, fs::Permissions::from_mode(bits)).unwrap();
        fs::write(&p, b"x").unwrap();

        set(0o6755);
        let mut f = fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"y").unwrap();
        f.set_len(1).unwrap();
        drop(f);
        assert_eq!(mode(), 0o6755, "{options:?}: root writes and truncates");

        std::os::unix::fs::chown(&p, Some(0), Some(0)).unwrap();
        assert_eq!(mode(), 0o755, "{options:?}: chown to the same owner");
        set(0o6755);
        std::os::unix::fs::chown(&p, None, None).unwrap();
        assert_eq!(mode(), 0o755, "{options:?}: chown(-1, -1)");
        set(0o6745);
        std::os::unix::fs::chown(&p, Some(0), None).unwrap();
        assert_eq!(mode(), 0o2745, "{options:?}: setgid without group execute");

        let getattrs = stat_of(&m, "op_getattr");
        for _ in 0..20 {
            std::os::unix::fs::chown(&p, Some(0), Some(0)).unwrap();
        }
        let sent = stat_of(&m, "op_getattr") - getattrs;
        assert!(sent < 20, "{options:?}: {sent} GETATTRs for 20 chowns");

        fs::create_dir(m.path("d")).unwrap();
        fs::set_permissions(m.path("d"), fs::Permissions::from_mode(0o2775)).unwrap();
        std::os::unix::fs::chown(m.path("d"), Some(0), Some(0)).unwrap();
        let d = fs::metadata(m.path("d")).unwrap().mode() & 0o7777;
        assert_eq!(d, 0o2775, "{options:?}: a directory keeps setgid");

        // Callers without CAP_FSETID: root without capabilities on the
        // private mount, nobody on the shared one.
        let run = |script: &str| {
            if options.is_empty() {
                as_capless_root(&m.mnt, &[], script)
            } else {
                as_user(NOBODY, &m.mnt, script)
            }
        };
        set(0o6777);
        ok(&run("echo z >> f"), "unprivileged write");
        assert_eq!(mode(), 0o777, "{options:?}: unprivileged write");
        set(0o6777);
        ok(&run("truncate -s 1 f"), "unprivileged truncate");
        assert_eq!(mode(), 0o777, "{options:?}: unprivileged truncate");
        set(0o6777);
        ok(&run(": > f"), "unprivileged open with O_TRUNC");
        assert_eq!(mode(), 0o777, "{options:?}: unprivileged O_TRUNC");
        assert!(
            stat_of(&m, "setid_cleared") >= 5,
            "{options:?}: the daemon dropped them"
        );
        drop(m);
    }
}
