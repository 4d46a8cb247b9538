//! POSIX permission checks, for a frontend that checks access itself instead
//! of letting the kernel do it (FUSE without `default_permissions`).
//!
//! The rules follow Linux: `generic_permission` for read, write and search,
//! `check_sticky` for removal from sticky directories, and `setattr_prepare`
//! with `may_setattr` for chmod, chown and utimes. The caller's supplementary
//! groups and capabilities are asked for only when the uid and gid alone do
//! not decide, because finding them costs the frontend a read of /proc.

use crate::error::{EngineError, Result};
use crate::types::{Attr, FileKind};

/// Read, write and search/execute, as in access(2) (`R_OK`, `W_OK`, `X_OK`).
pub const MAY_READ: u32 = 4;
pub const MAY_WRITE: u32 = 2;
pub const MAY_EXEC: u32 = 1;

const S_ISUID: u16 = 0o4000;
const S_ISGID: u16 = 0o2000;
const S_ISVTX: u16 = 0o1000;
const S_IXGRP: u16 = 0o010;
const S_IXUGO: u16 = 0o111;

/// The Linux capabilities the checks consult (their bit numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    Chown = 0,
    DacOverride = 1,
    DacReadSearch = 2,
    Fowner = 3,
    Fsetid = 4,
}

/// Who asks. `in_group` and `capable` may be slow (the frontend reads them
/// once per request, on first use).
pub trait Caller {
    /// The filesystem uid the request runs as.
    fn uid(&self) -> u32;
    /// The filesystem gid the request runs as.
    fn gid(&self) -> u32;
    /// Whether `gid` is one of the caller's supplementary groups (the
    /// primary gid is checked before this is asked).
    fn in_supplementary(&mut self, gid: u32) -> bool;
    /// Whether the caller holds `cap` in its effective set.
    fn capable(&mut self, cap: Cap) -> bool;
}

fn in_group(c: &mut dyn Caller, gid: u32) -> bool {
    c.gid() == gid || c.in_supplementary(gid)
}

fn owner_or_capable(c: &mut dyn Caller, a: &Attr) -> bool {
    c.uid() == a.uid || c.capable(Cap::Fowner)
}

/// Whether the caller may read, write or search/execute (`mask`, any of
/// `MAY_*`) the inode with attributes `a`; `Access` if not.
pub fn access(c: &mut dyn Caller, a: &Attr, mask: u32) -> Result<()> {
    let mask = mask & (MAY_READ | MAY_WRITE | MAY_EXEC);
    if mask == 0 {
        return Ok(());
    }
    let class = if c.uid() == a.uid {
        a.perm >> 6
    } else if in_group(c, a.gid) {
        a.perm >> 3
    } else {
        a.perm
    };
    if mask & !(class as u32) & 7 == 0 {
        return Ok(());
    }
    // The mode bits say no; capabilities may override them.
    if a.kind == FileKind::Directory {
        if mask & MAY_WRITE == 0 && c.capable(Cap::DacReadSearch) {
            return Ok(());
        }
        if c.capable(Cap::DacOverride) {
            return Ok(());
        }
        return Err(EngineError::Access);
    }
    if mask == MAY_READ && c.capable(Cap::DacReadSearch) {
        return Ok(());
    }
    // Execution needs at least one execute bit, even for root.
    if (mask & MAY_EXEC == 0 || a.perm & S_IXUGO != 0) && c.capable(Cap::DacOverride) {
        return Ok(());
    }
    Err(EngineError::Access)
}

/// Creating a name in directory `dir` (create, mknod, mkdir, symlink, link,
/// the target of a rename).
pub fn may_create(c: &mut dyn Caller, dir: &Attr) -> Result<()> {
    access(c, dir, MAY_WRITE | MAY_EXEC)
}

/// Removing a name from `dir` (unlink, rmdir, the source of a rename, a
/// replaced target): write and search on the directory, and in a sticky
/// directory only the owner of the directory or of the victim (`Perm`
/// otherwise). `victim` gives the removed inode's attributes; it is asked
/// only in a sticky directory.
pub fn may_delete(
    c: &mut dyn Caller,
    dir: &Attr,
    victim: &mut dyn FnMut() -> Result<Attr>,
) -> Result<()> {
    access(c, dir, MAY_WRITE | MAY_EXEC)?;
    if dir.perm & S_ISVTX == 0 || c.uid() == dir.uid {
        return Ok(());
    }
    if c.uid() != victim()?.uid && !c.capable(Cap::Fowner) {
        return Err(EngineError::Perm);
    }
    Ok(())
}

/// A hard link to `a` made by someone who does not own it, as Linux allows
/// with `fs.protected_hardlinks` (on by default): only to a regular file
/// without set-ID bits that the caller may read and write (`Perm` otherwise).
pub fn may_link(c: &mut dyn Caller, a: &Attr) -> Result<()> {
    if owner_or_capable(c, a) {
        return Ok(());
    }
    let set_id = a.perm & S_ISUID != 0 || a.perm & (S_ISGID | S_IXGRP) == (S_ISGID | S_IXGRP);
    if a.kind == FileKind::Regular && !set_id && access(c, a, MAY_READ | MAY_WRITE).is_ok() {
        return Ok(());
    }
    Err(EngineError::Perm)
}

/// The permission bits `perm` keeps when Linux drops set-ID bits after a
/// chown, or after a write or truncate by a caller without CAP_FSETID: the
/// set-user-ID bit always, the set-group-ID bit only with group execute
/// (without it the bit marks mandatory locking, not a privilege).
pub fn without_setid(perm: u16) -> u16 {
    let mut p = perm & !S_ISUID;
    if p & S_IXGRP != 0 {
        p &= !S_ISGID;
    }
    p
}

/// Drops `perm`'s set-ID bits as `without_setid` says; whether any went.
pub fn drop_setid(perm: &mut u16) -> bool {
    let kept = without_setid(*perm);
    let dropped = kept != *perm;
    *perm = kept;
    dropped
}

/// A requested attribute change, as far as the checks need it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Change {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: bool,
    /// atime or mtime set to a given time.
    pub times_given: bool,
    /// atime or mtime set to now (and neither to a given time).
    pub times_now: bool,
    /// The change comes through an open file (ftruncate): its open already
    /// checked write access.
    pub through_handle: bool,
}

/// Checks an attribute change on the inode with attributes `a` and returns
/// the mode to store, which may lose its set-group-ID bit as chmod(2) says.
pub fn setattr(c: &mut dyn Caller, a: &Attr, ch: &Change) -> Result<Option<u32>> {
    if ch.size && !ch.through_handle {
        access(c, a, MAY_WRITE)?;
    }
    if let Some(uid) = ch.uid {
        let keeps_owner = c.uid() == a.uid && uid == a.uid;
        if !keeps_owner && !c.capable(Cap::Chown) {
            return Err(EngineError::Perm);
        }
    }
    if let Some(gid) = ch.gid {
        let owner_may = c.uid() == a.uid && (gid == a.gid || in_group(c, gid));
        if !owner_may && !c.capable(Cap::Chown) {
            return Err(EngineError::Perm);
        }
    }
    if ch.times_given && !owner_or_capable(c, a) {
        return Err(EngineError::Perm);
    }
    if ch.times_now && !ch.through_handle && !owner_or_capable(c, a) {
        access(c, a, MAY_WRITE)?;
    }
    let Some(mode) = ch.mode else {
        return Ok(None);
    };
    let mut mode = mode;
    if !owner_or_capable(c, a) {
        // The kernel clears set-ID bits after a write, a truncate or a chown
        // by sending the mode without them; whoever may write the file may
        // cause that, nothing else.
        let cleared = a.perm & !(S_ISUID | S_ISGID);
        let clears_only = mode & 0o7777 == cleared as u32 && cleared != a.perm;
        if !clears_only {
            return Err(EngineError::Perm);
        }
        if ch.uid.is_none() && ch.gid.is_none() {
            access(c, a, MAY_WRITE)?;
        }
        return Ok(Some(mode));
    }
    let gid = ch.gid.unwrap_or(a.gid);
    if mode as u16 & S_ISGID != 0 && !in_group(c, gid) && !c.capable(Cap::Fsetid) {
        mode &= !(S_ISGID as u32);
    }
    Ok(Some(mode))
}

/// Extended attributes: `user.*` need read (get) or write (set, remove)
/// access; the kernel has already decided for every other namespace.
/// `attr` gives the inode's attributes; it is asked only for `user.*`.
pub fn xattr(
    c: &mut dyn Caller,
    name: &[u8],
    write: bool,
    attr: &mut dyn FnMut() -> Result<Attr>,
) -> Result<()> {
    if !name.starts_with(b"user.") {
        return Ok(());
    }
    access(c, &attr()?, if write { MAY_WRITE } else { MAY_READ })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Ino, Timespec};

    struct Who {
        uid: u32,
        gid: u32,
        groups: Vec<u32>,
        caps: Vec<Cap>,
        asked: u32,
    }

    fn user(uid: u32, gid: u32) -> Who {
        Who {
            uid,
            gid,
            groups: Vec::new(),
            caps: Vec::new(),
            asked: 0,
        }
    }

    fn root() -> Who {
        Who {
            caps: vec![
                Cap::Chown,
                Cap::DacOverride,
                Cap::DacReadSearch,
                Cap::Fowner,
                Cap::Fsetid,
            ],
            ..user(0, 0)
        }
    }

    impl Caller for Who {
        fn uid(&self) -> u32 {
            self.uid
        }
        fn gid(&self) -> u32 {
            self.gid
        }
        fn in_supplementary(&mut self, gid: u32) -> bool {
            self.asked += 1;
            self.groups.contains(&gid)
        }
        fn capable(&mut self, cap: Cap) -> bool {
            self.asked += 1;
            self.caps.contains(&cap)
        }
    }

    fn node(kind: FileKind, perm: u16, uid: u32, gid: u32) -> Attr {
        Attr {
            ino: Ino(2),
            kind,
            perm,
            nlink: 1,
            uid,
            gid,
            size: 0,
            blocks: 0,
            atime: Timespec::default(),
            mtime: Timespec::default(),
            ctime: Timespec::default(),
            rdev: 0,
            blksize: 4096,
        }
    }

    fn file(perm: u16, uid: u32, gid: u32) -> Attr {
        node(FileKind::Regular, perm, uid, gid)
    }

    fn dir(perm: u16, uid: u32, gid: u32) -> Attr {
        node(FileKind::Directory, perm, uid, gid)
    }

    fn denied(r: Result<impl std::fmt::Debug>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(EngineError::Access) => "EACCES",
            Err(EngineError::Perm) => "EPERM",
            Err(_) => "other",
        }
    }

    #[test]
    fn only_the_class_the_caller_falls_in_counts() {
        // The owner is refused by the owner bits even when others may read.
        let f = file(0o044, 1000, 100);
        assert_eq!(denied(access(&mut user(1000, 100), &f, MAY_READ)), "EACCES");
        assert_eq!(denied(access(&mut user(1001, 100), &f, MAY_READ)), "ok");
        assert_eq!(denied(access(&mut user(1001, 200), &f, MAY_READ)), "ok");
        let g = file(0o604, 1000, 100);
        assert_eq!(denied(access(&mut user(1001, 100), &g, MAY_READ)), "EACCES");
        assert_eq!(denied(access(&mut user(1001, 200), &g, MAY_READ)), "ok");
        assert_eq!(
            denied(access(&mut user(1000, 1), &g, MAY_READ | MAY_WRITE)),
            "ok"
        );
        assert_eq!(denied(access(&mut user(1000, 1), &g, MAY_EXEC)), "EACCES");
    }

    #[test]
    fn supplementary_groups_are_asked_only_when_needed() {
        let f = file(0o640, 1000, 300);
        let mut owner = user(1000, 100);
        assert_eq!(denied(access(&mut owner, &f, MAY_READ)), "ok");
        assert_eq!(owner.asked, 0, "the owner's answer needs no groups");
        let mut member = Who {
            groups: vec![7, 300],
            ..user(1001, 100)
        };
        assert_eq!(denied(access(&mut member, &f, MAY_READ)), "ok");
        assert_eq!(denied(access(&mut member, &f, MAY_WRITE)), "EACCES");
        let mut stranger = Who {
            groups: vec![7],
            ..user(1001, 100)
        };
        assert_eq!(denied(access(&mut stranger, &f, MAY_READ)), "EACCES");
    }

    #[test]
    fn capabilities_override_as_linux_does() {
        let f = file(0o000, 1000, 100);
        assert_eq!(denied(access(&mut root(), &f, MAY_READ | MAY_WRITE)), "ok");
        // Root runs a file only if someone may.
        assert_eq!(denied(access(&mut root(), &f, MAY_EXEC)), "EACCES");
        assert_eq!(
            denied(access(&mut root(), &file(0o001, 1, 1), MAY_EXEC)),
            "ok"
        );
        // Root's directories: search and read with DAC_READ_SEARCH alone.
        let d = dir(0o000, 1000, 100);
        let mut reader = Who {
            caps: vec![Cap::DacReadSearch],
            ..user(5, 5)
        };
        assert_eq!(denied(access(&mut reader, &d, MAY_READ | MAY_EXEC)), "ok");
        assert_eq!(denied(access(&mut reader, &d, MAY_WRITE)), "EACCES");
        assert_eq!(denied(access(&mut reader, &f, MAY_READ)), "ok");
        assert_eq!(denied(access(&mut reader, &f, MAY_WRITE)), "EACCES");
        // A root whose capabilities were dropped is held to the mode bits.
        assert_eq!(denied(access(&mut user(0, 0), &f, MAY_READ)), "EACCES");
        assert_eq!(denied(access(&mut user(0, 0), &d, MAY_EXEC)), "EACCES");
    }

    #[test]
    fn sticky_directories_keep_strangers_from_removing() {
        let d = dir(0o1777, 0, 0);
        let asked = std::cell::Cell::new(0);
        let mut theirs = || {
            asked.set(asked.get() + 1);
            Ok(file(0o644, 1000, 100))
        };
        assert_eq!(
            denied(may_delete(&mut user(1001, 100), &d, &mut theirs)),
            "EPERM"
        );
        assert_eq!(
            denied(may_delete(&mut user(1000, 100), &d, &mut theirs)),
            "ok"
        );
        assert_eq!(denied(may_delete(&mut root(), &d, &mut theirs)), "ok");
        let owned = dir(0o1777, 1001, 100);
        assert_eq!(
            denied(may_delete(&mut user(1001, 100), &owned, &mut theirs)),
            "ok"
        );
        // Without write on the directory the answer is EACCES first.
        let closed = dir(0o1755, 0, 0);
        assert_eq!(
            denied(may_delete(&mut user(1000, 100), &closed, &mut theirs)),
            "EACCES"
        );
        // Outside a sticky directory the victim is never looked at.
        let plain = dir(0o777, 0, 0);
        let before = asked.get();
        assert_eq!(
            denied(may_delete(&mut user(1001, 100), &plain, &mut theirs)),
            "ok"
        );
        assert_eq!(asked.get(), before);
        assert_eq!(denied(may_create(&mut user(1000, 100), &closed)), "EACCES");
        assert_eq!(denied(may_create(&mut user(1000, 100), &d)), "ok");
    }

    #[test]
    fn chmod_is_the_owners_and_drops_sgid_outside_the_group() {
        let f = file(0o644, 1000, 300);
        let chmod = |m| Change {
            mode: Some(m),
            ..Change::default()
        };
        assert_eq!(
            denied(setattr(&mut user(1001, 300), &f, &chmod(0o600))),
            "EPERM"
        );
        assert_eq!(
            setattr(&mut user(1000, 100), &f, &chmod(0o2755)).unwrap(),
            Some(0o755),
            "not in group 300: the set-group-ID bit goes"
        );
        let mut member = Who {
            groups: vec![300],
            ..user(1000, 100)
        };
        assert_eq!(
            setattr(&mut member, &f, &chmod(0o2755)).unwrap(),
            Some(0o2755)
        );
        assert_eq!(
            setattr(&mut root(), &f, &chmod(0o6755)).unwrap(),
            Some(0o6755)
        );
    }

    #[test]
    fn a_writer_may_only_clear_set_id_bits() {
        let f = file(0o6777, 1000, 100);
        let to = |m| Change {
            mode: Some(m),
            ..Change::default()
        };
        assert_eq!(
            setattr(&mut user(1001, 200), &f, &to(0o777)).unwrap(),
            Some(0o777)
        );
        assert_eq!(
            denied(setattr(&mut user(1001, 200), &f, &to(0o775))),
            "EPERM"
        );
        let ro = file(0o6755, 1000, 100);
        assert_eq!(
            denied(setattr(&mut user(1001, 200), &ro, &to(0o755))),
            "EACCES"
        );
        assert_eq!(
            denied(setattr(
                &mut user(1001, 200),
                &file(0o644, 1000, 100),
                &to(0o644)
            )),
            "EPERM",
            "a mode that clears nothing is a chmod"
        );
    }

    #[test]
    fn chown_is_roots_and_chgrp_the_owners_within_their_groups() {
        let f = file(0o644, 1000, 100);
        let own = |u: Option<u32>, g: Option<u32>| Change {
            uid: u,
            gid: g,
            ..Change::default()
        };
        assert_eq!(
            denied(setattr(&mut user(1000, 100), &f, &own(Some(1001), None))),
            "EPERM"
        );
        assert_eq!(
            denied(setattr(&mut user(1000, 100), &f, &own(Some(1000), None))),
            "ok"
        );
        assert_eq!(
            denied(setattr(&mut user(1001, 100), &f, &own(Some(1000), None))),
            "EPERM"
        );
        assert_eq!(
            denied(setattr(&mut root(), &f, &own(Some(5), Some(5)))),
            "ok"
        );
        let mut owner = Who {
            groups: vec![300],
            ..user(1000, 100)
        };
        assert_eq!(denied(setattr(&mut owner, &f, &own(None, Some(300)))), "ok");
        assert_eq!(
            denied(setattr(&mut owner, &f, &own(None, Some(301)))),
            "EPERM"
        );
        assert_eq!(
            denied(setattr(&mut user(1001, 100), &f, &own(None, Some(100)))),
            "EPERM"
        );
    }

    #[test]
    fn times_need_ownership_or_for_now_write_access() {
        let f = file(0o666, 1000, 100);
        let given = Change {
            times_given: true,
            ..Change::default()
        };
        let now = Change {
            times_now: true,
            ..Change::default()
        };
        assert_eq!(denied(setattr(&mut user(1001, 200), &f, &given)), "EPERM");
        assert_eq!(denied(setattr(&mut user(1000, 200), &f, &given)), "ok");
        assert_eq!(denied(setattr(&mut user(1001, 200), &f, &now)), "ok");
        let ro = file(0o644, 1000, 100);
        assert_eq!(denied(setattr(&mut user(1001, 200), &ro, &now)), "EACCES");
        assert_eq!(denied(setattr(&mut user(1000, 200), &ro, &now)), "ok");
    }

    #[test]
    fn truncate_needs_write_unless_through_an_open_file() {
        let ro = file(0o444, 1000, 100);
        let by_path = Change {
            size: true,
            times_now: true,
            ..Change::default()
        };
        assert_eq!(
            denied(setattr(&mut user(1000, 100), &ro, &by_path)),
            "EACCES"
        );
        let by_handle = Change {
            through_handle: true,
            ..by_path
        };
        assert_eq!(denied(setattr(&mut user(1000, 100), &ro, &by_handle)), "ok");
    }

    #[test]
    fn user_xattrs_follow_the_mode_and_other_namespaces_the_kernel() {
        let mut f = || Ok(file(0o640, 1000, 100));
        let mut other = user(1001, 200);
        assert_eq!(
            denied(xattr(&mut other, b"user.a", false, &mut f)),
            "EACCES"
        );
        let mut unasked = || -> Result<Attr> { panic!("security.* needs no attributes") };
        assert_eq!(
            denied(xattr(
                &mut other,
                b"security.capability",
                false,
                &mut unasked
            )),
            "ok"
        );
        let mut member = user(1001, 100);
        assert_eq!(denied(xattr(&mut member, b"user.a", false, &mut f)), "ok");
        assert_eq!(
            denied(xattr(&mut member, b"user.a", true, &mut f)),
            "EACCES"
        );
    }

    #[test]
    fn hard_links_to_others_files_need_read_write_and_no_set_id() {
        let stranger = || user(1001, 200);
        for (mut who, mode, expect) in [
            (stranger(), 0o666, "ok"),
            (stranger(), 0o644, "EPERM"),
            (stranger(), 0o4666, "EPERM"),
            (stranger(), 0o2676, "EPERM"),
            (user(1000, 1), 0o000, "ok"),
            (root(), 0o4000, "ok"),
        ] {
            let f = file(mode, 1000, 100);
            assert_eq!(denied(may_link(&mut who, &f)), expect, "mode {mode:o}");
        }
    }

    #[test]
    fn dropping_set_id_keeps_setgid_without_group_execute() {
        for (mode, kept) in [
            (0o6755, 0o0755),
            (0o4644, 0o0644),
            (0o2745, 0o2745),
            (0o2775, 0o0775),
            (0o1777, 0o1777),
            (0o0644, 0o0644),
        ] {
            assert_eq!(without_setid(mode), kept, "mode {mode:o}");
        }
    }
}
