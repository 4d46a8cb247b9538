//! Everyday tools across two mounts of one volume: a tar extracted on one
//! is byte-identical on the other, and a git repository cloned and
//! committed to on one is clean for `git status` on the other.

use crate::support::Volume;
use std::path::Path;
use std::process::Command;

fn run(dir: &Path, cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-ec")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "`{cmd}` in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_tar_extracted_on_one_mount_is_identical_on_the_other() {
    // The data goes to an S3 server.
    let vol = Volume::on_s3(3);
    let a = vol.mount("");
    let b = vol.mount("");
    let src = tempfile::tempdir_in("/tmp").unwrap();
    // Small files, empty ones, a large one over several chunks, a
    // symlink, a hard link, nested directories, modes.
    run(
        src.path(),
        "mkdir -p t/a/b/c t/empty; \
         for i in $(seq 1 200); do head -c $((i * 37)) /dev/urandom > t/a/f$i; done; \
         : > t/zero; head -c 9000000 /dev/urandom > t/a/b/big; \
         ln -s a/f1 t/sym; ln t/a/f2 t/hard; chmod 700 t/a/b/c; chmod 4755 t/a/f3; \
         tar cf t.tar -C t .",
    );
    let tar = src.path().join("t.tar");
    run(
        &a.mnt,
        &format!("mkdir x && tar xpf {} -C x", tar.display()),
    );
    // b sees the tree at once after its opens (names may take the TTL: the
    // tree is new to b's kernel, so its lookups ask).
    run(
        &b.mnt,
        &format!("diff -r --no-dereference {}/t x", src.path().display()),
    );
    let ours = run(&b.mnt, "cd x && find . -printf '%p %m %s %n %l\\n' | sort");
    let theirs = run(
        src.path(),
        "cd t && find . -printf '%p %m %s %n %l\\n' | sort",
    );
    assert_eq!(
        ours, theirs,
        "modes, sizes or links differ on the other mount"
    );
    run(&b.mnt, "rm -rf x");
    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}

#[test]
fn git_on_one_mount_is_clean_for_git_status_on_the_other() {
    let vol = Volume::new(3);
    let a = vol.mount("");
    let b = vol.mount("");
    let origin = tempfile::tempdir_in("/tmp").unwrap();
    run(
        origin.path(),
        "git init -q r && cd r && for i in 1 2 3 4 5; do seq $i 5000 > f$i; done && \
         mkdir d && echo nested > d/n && git add . && \
         git -c user.email=t@t -c user.name=t commit -qm init",
    );
    run(
        &a.mnt,
        &format!("git clone -q {}/r repo", origin.path().display()),
    );
    let g = "git -c user.email=t@t -c user.name=t";
    run(
        &a.mnt.join("repo"),
        &format!(
            "echo change >> f1 && rm f2 && echo new > f9 && git add -A && {g} commit -qm change"
        ),
    );
    let status = run(&b.mnt.join("repo"), "git status --porcelain");
    assert_eq!(status, "", "git status on the other mount is not clean");
    let log = run(&b.mnt.join("repo"), "git log --oneline | wc -l");
    assert_eq!(log.trim(), "2");
    // And back: a commit on b is clean on a.
    run(
        &b.mnt.join("repo"),
        &format!("echo again >> d/n && {g} commit -qam again"),
    );
    assert_eq!(run(&a.mnt.join("repo"), "git status --porcelain"), "");
    run(
        &a.mnt,
        "git -C repo fsck --no-progress 2>&1 | grep -v dangling || true",
    );
    drop(a);
    drop(b);
    vol.assert_fsck_clean();
}
