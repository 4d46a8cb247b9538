//! Identifiers and plain values that cross module and crate boundaries.
//! Nothing here knows about FUSE; the adapter converts these to protocol types.

use std::fmt;

/// Inode number. `Ino::ROOT` is the root directory; numbers are never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ino(pub u64);

impl Ino {
    pub const ROOT: Ino = Ino(1);
}

/// A map keyed by inode number. Inode numbers are ours (allocated in
/// sequence), so nobody can choose keys that collide: the map uses foldhash
/// rather than std's SipHash, which was 5 % of the daemon's time under W3.
/// Maps keyed by names keep SipHash.
pub type InoMap<V> = std::collections::HashMap<Ino, V, foldhash::fast::RandomState>;
/// A set of inode numbers (see `InoMap`).
pub type InoSet = std::collections::HashSet<Ino, foldhash::fast::RandomState>;

impl fmt::Display for Ino {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ino {}", self.0)
    }
}

/// Open file or directory handle handed to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fh(pub u64);

/// Index of a fixed-size data block inside one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockNo(pub u64);

/// Kind of an inode, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileKind {
    pub fn to_u8(self) -> u8 {
        match self {
            FileKind::Regular => 1,
            FileKind::Directory => 2,
            FileKind::Symlink => 3,
            FileKind::Fifo => 4,
            FileKind::Socket => 5,
            FileKind::CharDevice => 6,
            FileKind::BlockDevice => 7,
        }
    }

    pub fn from_u8(v: u8) -> Option<FileKind> {
        Some(match v {
            1 => FileKind::Regular,
            2 => FileKind::Directory,
            3 => FileKind::Symlink,
            4 => FileKind::Fifo,
            5 => FileKind::Socket,
            6 => FileKind::CharDevice,
            7 => FileKind::BlockDevice,
            _ => return None,
        })
    }

    /// Kind from the `S_IFMT` bits of a mode.
    pub fn from_mode(mode: u32) -> Option<FileKind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => FileKind::Regular,
            libc::S_IFDIR => FileKind::Directory,
            libc::S_IFLNK => FileKind::Symlink,
            libc::S_IFIFO => FileKind::Fifo,
            libc::S_IFSOCK => FileKind::Socket,
            libc::S_IFCHR => FileKind::CharDevice,
            libc::S_IFBLK => FileKind::BlockDevice,
            _ => return None,
        })
    }
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: u32,
}

impl Timespec {
    pub fn now() -> Timespec {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timespec {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        }
    }
}

/// A time given to setattr: a value, or "now" (UTIME_NOW).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    At(Timespec),
    Now,
}

/// Attributes of an inode as the kernel sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: Ino,
    pub kind: FileKind,
    /// Permission bits (`mode & 0o7777`).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Allocated 512-byte sectors.
    pub blocks: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub rdev: u32,
    pub blksize: u32,
}

/// Who is asking: the caller's credentials from the request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

impl Ctx {
    pub const ROOT: Ctx = Ctx {
        uid: 0,
        gid: 0,
        pid: 0,
    };
}

/// Fields to change in setattr; `None` leaves a field as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<SetTime>,
    pub mtime: Option<SetTime>,
    pub ctime: Option<Timespec>,
    /// Drop the set-ID bits as `perm::without_setid` says, unless `mode` is
    /// given (the frontend's decision: a chown, or an unprivileged
    /// truncate). Directories keep theirs.
    pub kill_setid: bool,
}

/// Flags of rename(2) / renameat2(2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
}

/// One entry produced by readdir. `offset` is the cookie that resumes the
/// listing after this entry.
#[derive(Clone, Debug)]
pub struct DirEntry<'a> {
    pub ino: Ino,
    pub offset: u64,
    pub kind: FileKind,
    pub name: &'a [u8],
    /// Present for readdirplus (`.` and `..` too, which take no kernel
    /// reference).
    pub attr: Option<Attr>,
}

/// A directory's place and size: what the adapter needs to decide whether the
/// kernel's cached names in it may be dropped all at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirShape {
    /// The directory holding it (the root is its own parent).
    pub parent: Ino,
    /// Names in it.
    pub entries: u64,
    /// How many of those names are directories (`nlink - 2`).
    pub subdirs: u32,
}

/// Answer to statfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub namelen: u32,
    pub frsize: u32,
}

/// fallocate modes the engine understands (Linux values).
pub mod falloc {
    pub const KEEP_SIZE: i32 = 0x01;
    pub const PUNCH_HOLE: i32 = 0x02;
    pub const ZERO_RANGE: i32 = 0x10;
}

/// setxattr flags (Linux values).
pub mod xattr_flags {
    pub const CREATE: i32 = 0x1;
    pub const REPLACE: i32 = 0x2;
}

/// Longest name in a directory, in bytes (both backends).
pub const NAME_MAX: usize = 255;

/// Largest link count of a file or directory (both backends).
pub const LINK_MAX: u32 = 65_000;

/// Checks a name given to a namespace operation: 1 to `NAME_MAX` bytes,
/// no `/` or NUL, not `.` or `..`.
pub fn check_name(name: &[u8]) -> crate::error::Result<()> {
    use crate::error::EngineError;
    if name.len() > NAME_MAX {
        return Err(EngineError::NameTooLong);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(EngineError::Invalid("bad name"));
    }
    if name == b"." || name == b".." {
        return Err(EngineError::Invalid("name is . or .."));
    }
    Ok(())
}
