//! Ordinary tools inside the mount: cp -a, tar, find, rm -rf, git.

use crate::support::Mount;

#[test]
fn cp_tar_find_rm() {
    let mut m = Mount::new("");
    let src = env!("CARGO_MANIFEST_DIR");
    m.sh(&format!("cp -a {src} copy && diff -r {src} copy"));
    m.sh(&format!(
        "tar -C {src} -cf - . | tar -xf - --one-top-level=untar && diff -r {src} untar"
    ));
    let n = m.sh("find . -type f | wc -l");
    assert!(
        String::from_utf8_lossy(&n.stdout)
            .trim()
            .parse::<u32>()
            .unwrap()
            > 4
    );
    m.sh("rm -rf copy && test ! -e copy");
    m.unmount();
    m.assert_fsck_clean();
    m.start();
    m.sh(&format!("diff -r {src} untar"));
    m.unmount();
}

#[test]
fn git_init_commit_status_clean() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("git is required for this test (scripts/install-deps.sh installs it)");
    }
    let mut m = Mount::new("");
    let src = env!("CARGO_MANIFEST_DIR");
    m.sh(&format!(
        "mkdir repo && cp -a {src}/. repo/ && cd repo && git init -q && git add -A && \
         git -c user.email=t@t -c user.name=t commit -qm init && git status --porcelain > ../status && \
         test ! -s ../status && git checkout -q -b other && git status --porcelain | wc -c | grep -qx 0"
    ));
    m.unmount();
    m.assert_fsck_clean();
}

/// A 10,000-file source tree: tar extracts it inside the mount, git commits
/// it, and after `git checkout` of another branch and back the tree is clean.
#[test]
fn tar_of_10k_files_and_git_checkout_clean() {
    let mut m = Mount::new("");
    let src = tempfile::tempdir_in("/tmp").unwrap();
    for d in 0..100 {
        let dir = src.path().join(format!("mod{d:03}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            let body = format!(
                "// module {d} file {f}\npub fn f{f}() -> u32 {{ {} }}\n",
                d * 1000 + f
            );
            std::fs::write(
                dir.join(format!("f{f:03}.rs")),
                body.repeat(1 + (f % 7) as usize),
            )
            .unwrap();
        }
    }
    let tarball = src.path().join("tree.tar");
    let st = std::process::Command::new("tar")
        .arg("-C")
        .arg(src.path())
        .arg("-cf")
        .arg(&tarball)
        .args((0..100).map(|d| format!("mod{d:03}")))
        .status()
        .unwrap();
    assert!(st.success());
    m.sh(&format!(
        "mkdir tree && tar -C tree -xf {tar} && test $(find tree -type f | wc -l) -eq 10000 && \
         cd tree && git init -q && git add -A && git -c user.email=t@t -c user.name=t commit -qm base && \
         git checkout -q -b side && echo changed > mod000/f000.rs && git -c user.email=t@t -c user.name=t commit -qam side && \
         git checkout -q - && test -z \"$(git status --porcelain)\" && git checkout -q side && \
         test -z \"$(git status --porcelain)\" && grep -qx changed mod000/f000.rs",
        tar = tarball.display()
    ));
    m.unmount();
    m.assert_fsck_clean();
}
