//! A volume's keys in the metadata engine and the codecs of its records.
//! Every record is validated when encoded and again when decoded; one that
//! fails is corruption (`EngineError::Corrupt`), never trusted.
//!
//! Keys, after the volume's prefix `churnfs/<volume>/` (integers big-endian,
//! so key order is numeric order; docs/design.md §15 has the byte layouts):
//!
//! ```text
//! S                          superblock
//! N                          next unallocated inode number (mounts take ranges)
//! C                          next session number
//! I ino                      inode record
//! I ino 't'                  a directory's mtime and ctime (written without a
//!                            condition by creates and removes in it)
//! D parent hash name         directory entry → child, kind
//! X ino                      extended attributes
//! B ino chunk                a chunk's slices: which objects hold its bytes
//! E session                  live session (attached to the session's lease)
//! G session                  session registered; removed once it ended and
//!                            everything it left was reclaimed
//! L session slot             a commit's idempotency mark (session's lease)
//! O session ino              file unlinked while this session had it open
//! Q session seq              delete queue: chunks and objects to free
//! ```

use churnfs_vfs::{EngineError, FileKind, Ino, Result, Timespec};

/// Format version of a volume this build reads and writes.
pub const VOLUME_VERSION: u32 = 2;
/// Magic at the start of the superblock.
pub const MAGIC: &[u8; 8] = b"CHURNVOL";
/// Bytes of file data one chunk key covers; objects never cross chunks.
pub const CHUNK_SIZE: u64 = 4 << 20;
/// Files whose data ends at or below this stay inline in the inode record.
pub const INLINE_MAX: u64 = 4096;
/// Most slices one chunk record holds; a flush that would pass it first
/// rewrites the chunk as one object.
pub const SLICES_MAX: usize = 32;
/// Largest file size (the kernel's own limit for FUSE).
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;
pub const NAME_MAX: usize = churnfs_vfs::NAME_MAX;
pub const SYMLINK_MAX: usize = 4095;
pub const XATTR_NAME_MAX: usize = 255;
pub const XATTR_VALUE_MAX: usize = 64 * 1024;
pub const XATTR_TOTAL_MAX: usize = 64 * 1024;
/// Longest volume name.
pub const VOLUME_NAME_MAX: usize = 64;

/// Hash of a name for directory order and readdir cookies: 63 bits, at
/// least 3 (cookies 1 and 2 are `.` and `..`). Same function as local mode.
pub fn dir_hash(name: &[u8]) -> u64 {
    (xxhash_rust::xxh3::xxh3_64(name) >> 1).max(3)
}

pub use churnfs_vfs::check_name;

/// Checks a volume name: 1..=64 of `[A-Za-z0-9._-]`, not starting with '.'.
pub fn check_volume_name(v: &str) -> std::result::Result<(), String> {
    if v.is_empty() || v.len() > VOLUME_NAME_MAX {
        return Err(format!(
            "volume name must be 1 to {VOLUME_NAME_MAX} characters"
        ));
    }
    if v.starts_with('.')
        || !v
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(format!(
            "volume name {v:?} may hold only letters, digits, '.', '_' and '-', and not start with '.'"
        ));
    }
    Ok(())
}

fn corrupt(what: impl Into<String>) -> EngineError {
    EngineError::corrupt(None, what)
}

fn corrupt_at(ino: Ino, what: impl Into<String>) -> EngineError {
    EngineError::corrupt(Some(ino), what)
}

// ---- keys ------------------------------------------------------------------

pub const T_SUPER: u8 = b'S';
pub const T_NEXT_INO: u8 = b'N';
pub const T_NEXT_SESSION: u8 = b'C';
pub const T_INODE: u8 = b'I';
pub const T_DENTRY: u8 = b'D';
pub const T_XATTR: u8 = b'X';
pub const T_CHUNK: u8 = b'B';
pub const T_SESSION: u8 = b'E';
pub const T_REGISTRY: u8 = b'G';
pub const T_SLOT: u8 = b'L';
pub const T_OPEN: u8 = b'O';
pub const T_QUEUE: u8 = b'Q';
pub const T_DELEG: u8 = b'Y';
pub const T_RECALL: u8 = b'R';
/// Suffix of a directory's times key after `I ino`.
pub const TIMES_SUFFIX: u8 = b't';

/// The keys of one volume.
#[derive(Clone, Debug)]
pub struct Keys {
    prefix: Vec<u8>,
}

/// A key of the volume, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Super,
    NextIno,
    NextSession,
    Inode(Ino),
    DirTimes(Ino),
    Dentry {
        parent: Ino,
        hash: u64,
        name: Vec<u8>,
    },
    Xattr(Ino),
    Chunk(Ino, u64),
    Session(u64),
    Registry(u64),
    Slot(u64, u16),
    Open(u64, Ino),
    Queue(u64, u64),
    /// A directory delegated to a session (its value: the session).
    Deleg(Ino),
    /// A mount asks the holder of a directory's delegation to give it back.
    Recall(Ino),
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

impl Keys {
    pub fn new(volume: &str) -> Keys {
        let mut prefix = b"churnfs/".to_vec();
        prefix.extend_from_slice(volume.as_bytes());
        prefix.push(b'/');
        Keys { prefix }
    }

    /// Every key of the volume starts with this.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    fn k(&self, tag: u8, parts: &[u64]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + 1 + 8 * parts.len());
        k.extend_from_slice(&self.prefix);
        k.push(tag);
        for p in parts {
            k.extend_from_slice(&p.to_be_bytes());
        }
        k
    }

    pub fn superblock(&self) -> Vec<u8> {
        self.k(T_SUPER, &[])
    }
    pub fn next_ino(&self) -> Vec<u8> {
        self.k(T_NEXT_INO, &[])
    }
    pub fn next_session(&self) -> Vec<u8> {
        self.k(T_NEXT_SESSION, &[])
    }
    pub fn inode(&self, ino: Ino) -> Vec<u8> {
        self.k(T_INODE, &[ino.0])
    }
    pub fn dir_times(&self, ino: Ino) -> Vec<u8> {
        let mut k = self.inode(ino);
        k.push(TIMES_SUFFIX);
        k
    }
    /// `[start, end)` holding an inode's record and, for a directory, its
    /// times key: one range read gets both.
    pub fn inode_range(&self, ino: Ino) -> (Vec<u8>, Vec<u8>) {
        let start = self.inode(ino);
        let end = churnfs_kv::prefix_end(&start);
        (start, end)
    }
    pub fn dentry(&self, parent: Ino, name: &[u8]) -> Vec<u8> {
        self.dentry_hashed(parent, dir_hash(name), name)
    }
    pub fn dentry_hashed(&self, parent: Ino, hash: u64, name: &[u8]) -> Vec<u8> {
        let mut k = self.k(T_DENTRY, &[parent.0, hash]);
        k.extend_from_slice(name);
        k
    }
    /// A directory's entries from cookie `hash` on.
    pub fn dentries_from(&self, parent: Ino, hash: u64) -> (Vec<u8>, Vec<u8>) {
        let start = self.k(T_DENTRY, &[parent.0, hash]);
        let end = churnfs_kv::prefix_end(&self.k(T_DENTRY, &[parent.0]));
        (start, end)
    }
    pub fn dentries(&self, parent: Ino) -> (Vec<u8>, Vec<u8>) {
        let start = self.k(T_DENTRY, &[parent.0]);
        let end = churnfs_kv::prefix_end(&start);
        (start, end)
    }
    pub fn xattrs(&self, ino: Ino) -> Vec<u8> {
        self.k(T_XATTR, &[ino.0])
    }
    pub fn chunk(&self, ino: Ino, chunk: u64) -> Vec<u8> {
        self.k(T_CHUNK, &[ino.0, chunk])
    }
    /// Chunk keys of `ino` in `[from, to)`.
    pub fn chunks(&self, ino: Ino, from: u64, to: u64) -> (Vec<u8>, Vec<u8>) {
        let start = self.chunk(ino, from);
        let end = if to == u64::MAX {
            churnfs_kv::prefix_end(&self.k(T_CHUNK, &[ino.0]))
        } else {
            self.chunk(ino, to)
        };
        (start, end)
    }
    pub fn session(&self, s: u64) -> Vec<u8> {
        self.k(T_SESSION, &[s])
    }
    pub fn registry(&self, s: u64) -> Vec<u8> {
        self.k(T_REGISTRY, &[s])
    }
    pub fn registries(&self) -> (Vec<u8>, Vec<u8>) {
        let start = self.k(T_REGISTRY, &[]);
        let end = churnfs_kv::prefix_end(&start);
        (start, end)
    }
    pub fn slot(&self, s: u64, slot: u16) -> Vec<u8> {
        let mut k = self.k(T_SLOT, &[s]);
        k.extend_from_slice(&slot.to_be_bytes());
        k
    }
    pub fn open(&self, s: u64, ino: Ino) -> Vec<u8> {
        self.k(T_OPEN, &[s, ino.0])
    }
    pub fn opens_of(&self, s: u64) -> (Vec<u8>, Vec<u8>) {
        let start = self.k(T_OPEN, &[s]);
        let end = churnfs_kv::prefix_end(&start);
        (start, end)
    }
    pub fn queue(&self, s: u64, seq: u64) -> Vec<u8> {
        self.k(T_QUEUE, &[s, seq])
    }
    pub fn queue_of(&self, s: u64) -> (Vec<u8>, Vec<u8>) {
        let start = self.k(T_QUEUE, &[s]);
        let end = churnfs_kv::prefix_end(&start);
        (start, end)
    }
    pub fn deleg(&self, dir: Ino) -> Vec<u8> {
        self.k(T_DELEG, &[dir.0])
    }
    pub fn recall(&self, dir: Ino) -> Vec<u8> {
        self.k(T_RECALL, &[dir.0])
    }
    pub fn recalls(&self) -> (Vec<u8>, Vec<u8>) {
        let start = self.k(T_RECALL, &[]);
        let end = churnfs_kv::prefix_end(&start);
        (start, end)
    }
    /// The directory whose entries a range starting at `start` reads (a
    /// `dentries` or `dentries_from` range).
    pub fn entries_range_dir(&self, start: &[u8]) -> Option<Ino> {
        let k = start.strip_prefix(self.prefix.as_slice())?;
        let (&tag, r) = k.split_first()?;
        (tag == T_DENTRY && (r.len() == 8 || r.len() == 16)).then(|| Ino(be64(r)))
    }
    /// The whole volume.
    pub fn all(&self) -> (Vec<u8>, Vec<u8>) {
        (self.prefix.clone(), churnfs_kv::prefix_end(&self.prefix))
    }

    /// Decodes a key of this volume; None for a key outside it or one no
    /// build writes.
    pub fn decode(&self, key: &[u8]) -> Option<Key> {
        let k = key.strip_prefix(self.prefix.as_slice())?;
        let (&tag, r) = k.split_first()?;
        Some(match (tag, r.len()) {
            (T_SUPER, 0) => Key::Super,
            (T_NEXT_INO, 0) => Key::NextIno,
            (T_NEXT_SESSION, 0) => Key::NextSession,
            (T_INODE, 8) => Key::Inode(Ino(be64(r))),
            (T_INODE, 9) if r[8] == TIMES_SUFFIX => Key::DirTimes(Ino(be64(r))),
            (T_DENTRY, n) if n > 16 => Key::Dentry {
                parent: Ino(be64(r)),
                hash: be64(&r[8..]),
                name: r[16..].to_vec(),
            },
            (T_XATTR, 8) => Key::Xattr(Ino(be64(r))),
            (T_CHUNK, 16) => Key::Chunk(Ino(be64(r)), be64(&r[8..])),
            (T_SESSION, 8) => Key::Session(be64(r)),
            (T_REGISTRY, 8) => Key::Registry(be64(r)),
            (T_SLOT, 10) => Key::Slot(be64(r), u16::from_be_bytes([r[8], r[9]])),
            (T_OPEN, 16) => Key::Open(be64(r), Ino(be64(&r[8..]))),
            (T_QUEUE, 16) => Key::Queue(be64(r), be64(&r[8..])),
            (T_DELEG, 8) => Key::Deleg(Ino(be64(r))),
            (T_RECALL, 8) => Key::Recall(Ino(be64(r))),
            _ => return None,
        })
    }
}

// ---- byte codec helpers ------------------------------------------------------

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn time(&mut self, t: Timespec) -> &mut Self {
        self.i64(t.sec).u32(t.nsec)
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
}

/// A reader over a record that fails (as corruption) instead of panicking.
struct R<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> R<'a> {
    fn new(b: &'a [u8], what: &'static str) -> R<'a> {
        R { b, what }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(corrupt(format!("{} record is truncated", self.what)));
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(self.u64()? as i64)
    }
    fn time(&mut self) -> Result<Timespec> {
        let sec = self.i64()?;
        let nsec = self.u32()?;
        if nsec >= 1_000_000_000 {
            return Err(corrupt(format!("{} record holds a bad time", self.what)));
        }
        Ok(Timespec { sec, nsec })
    }
    fn bytes(&mut self, max: usize) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(corrupt(format!(
                "{} record holds {n} bytes where at most {max} fit",
                self.what
            )));
        }
        self.take(n)
    }
    fn end(&self) -> Result<()> {
        if !self.b.is_empty() {
            return Err(corrupt(format!(
                "{} record has {} bytes past its end",
                self.what,
                self.b.len()
            )));
        }
        Ok(())
    }
}

// ---- superblock ----------------------------------------------------------------

/// What identifies a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    pub uuid: [u8; 16],
    pub created: Timespec,
    /// Where file data lives (`s3://…`, `file:///…`).
    pub data_url: String,
    /// Longest time from the start of an object's upload to the commit
    /// that names it; a mount that would take longer uploads again. gc
    /// removes only unnamed objects older than twice this.
    pub upload_window_ms: u32,
}

/// The upload window of a volume unless mkfs is told otherwise.
pub const UPLOAD_WINDOW_MS: u32 = 60_000;
/// The shortest upload window mkfs accepts.
pub const UPLOAD_WINDOW_MIN_MS: u32 = 1_000;

pub fn encode_superblock(s: &Superblock) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(64 + s.data_url.len()));
    w.0.extend_from_slice(MAGIC);
    w.u32(s.version);
    w.0.extend_from_slice(&s.uuid);
    w.time(s.created)
        .bytes(s.data_url.as_bytes())
        .u32(s.upload_window_ms);
    w.0
}

/// Decodes a superblock; `NotAStore` when the magic is not ours and
/// `WrongVersion` for another format version.
pub fn decode_superblock(b: &[u8]) -> Result<Superblock> {
    if b.len() < 12 || &b[..8] != MAGIC {
        return Err(EngineError::NotAStore(
            "its superblock is not a churnfs volume's".into(),
        ));
    }
    let mut r = R::new(&b[8..], "superblock");
    let version = r.u32()?;
    if version != VOLUME_VERSION {
        return Err(EngineError::WrongVersion {
            found: version,
            expected: VOLUME_VERSION,
        });
    }
    let mut uuid = [0u8; 16];
    uuid.copy_from_slice(r.take(16)?);
    let created = r.time()?;
    let url = r.bytes(4096)?;
    let upload_window_ms = r.u32()?;
    r.end()?;
    if upload_window_ms < UPLOAD_WINDOW_MIN_MS {
        return Err(corrupt("superblock's upload window is too short"));
    }
    let data_url = String::from_utf8(url.to_vec())
        .map_err(|_| corrupt("superblock's data URL is not UTF-8"))?;
    Ok(Superblock {
        version,
        uuid,
        created,
        data_url,
        upload_window_ms,
    })
}

pub fn encode_u64(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

pub fn decode_u64(b: &[u8], what: &'static str) -> Result<u64> {
    let mut r = R::new(b, what);
    let v = r.u64()?;
    r.end()?;
    Ok(v)
}

// ---- inodes --------------------------------------------------------------------

/// Blocks of a file freed by a shrink and not yet deleted: chunks
/// `[from, to)` whose record's stamp is below `stamp` hold garbage and read
/// as holes; the delete queue removes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Garbage {
    pub from: u64,
    pub to: u64,
    pub stamp: u64,
}

impl Garbage {
    /// Whether chunk `c` last written at `stamp` is garbage.
    pub fn hides(&self, c: u64, stamp: u64) -> bool {
        c >= self.from && c < self.to && stamp < self.stamp
    }
}

/// An inode as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub kind: FileKind,
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    pub rdev: u32,
    /// A directory's parent (the root is its own); 0 for anything else.
    pub parent: u64,
    pub has_xattrs: bool,
    /// A regular file's bytes live in `extra` (bytes past it up to `size`
    /// read as zeros); no chunk of it holds data.
    pub inline: bool,
    /// Stamp written into chunk records; a shrink that leaves garbage
    /// raises it.
    pub dseq: u64,
    pub garbage: Option<Garbage>,
    /// Inline bytes of a regular file, or a symlink's target.
    pub extra: Vec<u8>,
}

const F_XATTRS: u8 = 1;
const F_INLINE: u8 = 2;
const F_GARBAGE: u8 = 4;

impl Inode {
    /// Checks the record's own invariants.
    pub fn validate(&self, ino: Ino) -> Result<()> {
        let bad = |w: &str| Err(corrupt_at(ino, w.to_string()));
        if self.perm & !0o7777 != 0 {
            return bad("permission bits out of range");
        }
        match self.kind {
            FileKind::Directory => {
                if self.nlink < 2 {
                    return bad("directory with fewer than 2 links");
                }
                if self.parent == 0 {
                    return bad("directory without a parent");
                }
                if !self.extra.is_empty() || self.inline {
                    return bad("directory with data");
                }
            }
            FileKind::Regular => {
                if self.parent != 0 {
                    return bad("regular file with a parent");
                }
                if self.inline && self.extra.len() as u64 > self.size.min(INLINE_MAX) {
                    return bad("inline bytes past the size or the inline limit");
                }
                if !self.inline && !self.extra.is_empty() {
                    return bad("bytes in a file that is not inline");
                }
                if self.size > MAX_FILE_SIZE {
                    return bad("size past the largest file");
                }
            }
            FileKind::Symlink => {
                if self.extra.is_empty() || self.extra.len() > SYMLINK_MAX {
                    return bad("symlink target length");
                }
            }
            _ => {
                if !self.extra.is_empty() {
                    return bad("special file with data");
                }
            }
        }
        if let Some(g) = self.garbage {
            if g.from >= g.to || g.stamp == 0 || g.stamp > self.dseq {
                return bad("garbage range");
            }
        }
        Ok(())
    }
}

pub fn encode_inode(ino: Ino, i: &Inode) -> Vec<u8> {
    assert!(
        i.validate(ino).is_ok(),
        "encoding an invalid inode {ino}: {i:?}"
    );
    let mut flags = 0;
    if i.has_xattrs {
        flags |= F_XATTRS;
    }
    if i.inline {
        flags |= F_INLINE;
    }
    if i.garbage.is_some() {
        flags |= F_GARBAGE;
    }
    let mut w = W(Vec::with_capacity(96 + i.extra.len()));
    w.u8(1)
        .u8(i.kind.to_u8())
        .u16(i.perm)
        .u32(i.nlink)
        .u32(i.uid)
        .u32(i.gid)
        .u64(i.size)
        .time(i.atime)
        .time(i.mtime)
        .time(i.ctime)
        .u32(i.rdev)
        .u64(i.parent)
        .u8(flags)
        .u64(i.dseq);
    if let Some(g) = i.garbage {
        w.u64(g.from).u64(g.to).u64(g.stamp);
    }
    w.bytes(&i.extra);
    w.0
}

pub fn decode_inode(ino: Ino, b: &[u8]) -> Result<Inode> {
    let mut r = R::new(b, "inode");
    let wrap = |e: EngineError| match e {
        EngineError::Corrupt { what, .. } => corrupt_at(ino, what),
        e => e,
    };
    let v = r.u8().map_err(wrap)?;
    if v != 1 {
        return Err(corrupt_at(ino, format!("inode record version {v}")));
    }
    let kind_b = r.u8().map_err(wrap)?;
    let kind =
        FileKind::from_u8(kind_b).ok_or_else(|| corrupt_at(ino, format!("inode kind {kind_b}")))?;
    let mut read = || -> Result<Inode> {
        let perm = r.u16()?;
        let nlink = r.u32()?;
        let uid = r.u32()?;
        let gid = r.u32()?;
        let size = r.u64()?;
        let atime = r.time()?;
        let mtime = r.time()?;
        let ctime = r.time()?;
        let rdev = r.u32()?;
        let parent = r.u64()?;
        let flags = r.u8()?;
        if flags & !(F_XATTRS | F_INLINE | F_GARBAGE) != 0 {
            return Err(corrupt(format!("inode flags {flags:#x}")));
        }
        let dseq = r.u64()?;
        let garbage = if flags & F_GARBAGE != 0 {
            Some(Garbage {
                from: r.u64()?,
                to: r.u64()?,
                stamp: r.u64()?,
            })
        } else {
            None
        };
        let extra = r.bytes(SYMLINK_MAX.max(INLINE_MAX as usize))?.to_vec();
        r.end()?;
        Ok(Inode {
            kind,
            perm,
            nlink,
            uid,
            gid,
            size,
            atime,
            mtime,
            ctime,
            rdev,
            parent,
            has_xattrs: flags & F_XATTRS != 0,
            inline: flags & F_INLINE != 0,
            dseq,
            garbage,
            extra,
        })
    };
    let i = read().map_err(wrap)?;
    i.validate(ino)?;
    Ok(i)
}

/// A directory's mtime and ctime, kept apart from its record so that
/// creates and removes in it do not conflict with each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirTimes {
    pub mtime: Timespec,
    pub ctime: Timespec,
}

pub fn encode_dir_times(t: &DirTimes) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(25));
    w.u8(1).time(t.mtime).time(t.ctime);
    w.0
}

pub fn decode_dir_times(ino: Ino, b: &[u8]) -> Result<DirTimes> {
    let mut r = R::new(b, "directory times");
    let read = |r: &mut R<'_>| -> Result<DirTimes> {
        let v = r.u8()?;
        if v != 1 {
            return Err(corrupt(format!("directory times version {v}")));
        }
        let t = DirTimes {
            mtime: r.time()?,
            ctime: r.time()?,
        };
        r.end()?;
        Ok(t)
    };
    read(&mut r).map_err(|e| match e {
        EngineError::Corrupt { what, .. } => corrupt_at(ino, what),
        e => e,
    })
}

// ---- directory entries -----------------------------------------------------------

pub fn encode_dentry(child: Ino, kind: FileKind) -> Vec<u8> {
    assert!(child.0 != 0, "a directory entry naming inode 0");
    let mut w = W(Vec::with_capacity(9));
    w.u64(child.0).u8(kind.to_u8());
    w.0
}

pub fn decode_dentry(parent: Ino, b: &[u8]) -> Result<(Ino, FileKind)> {
    let mut r = R::new(b, "directory entry");
    let (child, k) = (|| -> Result<(u64, u8)> {
        let c = r.u64()?;
        let k = r.u8()?;
        r.end()?;
        Ok((c, k))
    })()
    .map_err(|_| corrupt_at(parent, "directory entry is malformed"))?;
    let kind = FileKind::from_u8(k)
        .ok_or_else(|| corrupt_at(parent, format!("directory entry of kind {k}")))?;
    if child == 0 {
        return Err(corrupt_at(parent, "directory entry names inode 0"));
    }
    Ok((Ino(child), kind))
}

// ---- extended attributes ----------------------------------------------------------

/// An inode's xattrs, in name order.
pub type Xattrs = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

pub fn xattrs_size(x: &Xattrs) -> usize {
    x.iter().map(|(k, v)| k.len() + v.len()).sum()
}

pub fn encode_xattrs(x: &Xattrs) -> Vec<u8> {
    assert!(xattrs_size(x) <= XATTR_TOTAL_MAX, "xattrs over their total");
    let mut w = W(Vec::with_capacity(4 + xattrs_size(x) + 8 * x.len()));
    w.u32(x.len() as u32);
    for (k, v) in x {
        assert!(!k.is_empty() && k.len() <= XATTR_NAME_MAX);
        w.u8(k.len() as u8);
        w.0.extend_from_slice(k);
        w.bytes(v);
    }
    w.0
}

pub fn decode_xattrs(ino: Ino, b: &[u8]) -> Result<Xattrs> {
    let mut r = R::new(b, "xattrs");
    let mut read = || -> Result<Xattrs> {
        let n = r.u32()?;
        let mut x = Xattrs::new();
        for _ in 0..n {
            let kl = r.u8()? as usize;
            if kl == 0 {
                return Err(corrupt("empty xattr name"));
            }
            let k = r.take(kl)?.to_vec();
            let v = r.bytes(XATTR_VALUE_MAX)?.to_vec();
            if x.insert(k, v).is_some() {
                return Err(corrupt("xattr named twice"));
            }
        }
        r.end()?;
        if xattrs_size(&x) > XATTR_TOTAL_MAX {
            return Err(corrupt("xattrs over their total"));
        }
        Ok(x)
    };
    read().map_err(|e| match e {
        EngineError::Corrupt { what, .. } => corrupt_at(ino, what),
        e => e,
    })
}

// ---- chunks ------------------------------------------------------------------------

/// An object of file data: written once by one session, never changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjId {
    pub session: u64,
    pub seq: u64,
}

/// Bytes `[off, off + len)` of a chunk come from bytes `[obj_off, obj_off +
/// len)` of an object (or are zeros when `obj` is None). Later slices of a
/// chunk cover earlier ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub off: u32,
    pub len: u32,
    pub obj: Option<ObjRef>,
    pub obj_off: u32,
}

impl Slice {
    /// A whole object placed at `off` of its chunk.
    pub fn object_at(off: u32, r: ObjRef) -> Slice {
        Slice {
            off,
            len: r.size,
            obj: Some(r),
            obj_off: 0,
        }
    }
}

/// An object as a slice names it: its id, its whole length and checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjRef {
    pub id: ObjId,
    pub size: u32,
    /// xxh3-64 of the object's bytes.
    pub sum: u64,
}

/// A chunk's record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// The file's `dseq` when the chunk was last written.
    pub stamp: u64,
    pub slices: Vec<Slice>,
}

impl Chunk {
    pub fn validate(&self, ino: Ino) -> Result<()> {
        if self.slices.len() > SLICES_MAX * 2 {
            return Err(corrupt_at(ino, "chunk with too many slices"));
        }
        for s in &self.slices {
            let end = s.off as u64 + s.len as u64;
            if s.len == 0 || end > CHUNK_SIZE {
                return Err(corrupt_at(ino, "slice out of its chunk"));
            }
            if let Some(o) = s.obj {
                if s.obj_off as u64 + s.len as u64 > o.size as u64 || o.size as u64 > CHUNK_SIZE {
                    return Err(corrupt_at(ino, "slice out of its object"));
                }
            } else if s.obj_off != 0 {
                return Err(corrupt_at(ino, "hole with an object offset"));
            }
        }
        Ok(())
    }

    /// Every object the chunk names.
    pub fn objects(&self) -> Vec<ObjRef> {
        let mut v: Vec<ObjRef> = self.slices.iter().filter_map(|s| s.obj).collect();
        v.sort_by_key(|o| o.id);
        v.dedup_by_key(|o| o.id);
        v
    }
}

pub fn encode_chunk(ino: Ino, c: &Chunk) -> Vec<u8> {
    assert!(
        c.validate(ino).is_ok(),
        "encoding an invalid chunk of {ino}"
    );
    let mut w = W(Vec::with_capacity(16 + 44 * c.slices.len()));
    w.u8(1).u64(c.stamp).u16(c.slices.len() as u16);
    for s in &c.slices {
        w.u32(s.off).u32(s.len).u32(s.obj_off);
        match s.obj {
            Some(o) => w
                .u8(1)
                .u64(o.id.session)
                .u64(o.id.seq)
                .u32(o.size)
                .u64(o.sum),
            None => w.u8(0),
        };
    }
    w.0
}

pub fn decode_chunk(ino: Ino, b: &[u8]) -> Result<Chunk> {
    let mut r = R::new(b, "chunk");
    let mut read = || -> Result<Chunk> {
        let v = r.u8()?;
        if v != 1 {
            return Err(corrupt(format!("chunk record version {v}")));
        }
        let stamp = r.u64()?;
        let n = r.u16()? as usize;
        let mut slices = Vec::with_capacity(n.min(SLICES_MAX * 2));
        for _ in 0..n {
            let off = r.u32()?;
            let len = r.u32()?;
            let obj_off = r.u32()?;
            let obj = match r.u8()? {
                0 => None,
                1 => Some(ObjRef {
                    id: ObjId {
                        session: r.u64()?,
                        seq: r.u64()?,
                    },
                    size: r.u32()?,
                    sum: r.u64()?,
                }),
                t => return Err(corrupt(format!("slice tag {t}"))),
            };
            slices.push(Slice {
                off,
                len,
                obj,
                obj_off,
            });
        }
        r.end()?;
        Ok(Chunk { stamp, slices })
    };
    let c = read().map_err(|e| match e {
        EngineError::Corrupt { what, .. } => corrupt_at(ino, what),
        e => e,
    })?;
    c.validate(ino)?;
    Ok(c)
}

// ---- sessions ------------------------------------------------------------------------

/// Who holds (or held) a session: written at mount, shown by `stats` and
/// `fsck`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub lease: i64,
    pub started: Timespec,
    pub pid: u32,
    pub host: String,
    pub mountpoint: String,
    /// In `G` only: the session reclaiming this one once it ended (0: none).
    pub reclaimer: u64,
}

pub fn encode_session(s: &SessionInfo) -> Vec<u8> {
    let mut w = W(Vec::with_capacity(64));
    w.u8(1)
        .i64(s.lease)
        .time(s.started)
        .u32(s.pid)
        .bytes(s.host.as_bytes())
        .bytes(s.mountpoint.as_bytes())
        .u64(s.reclaimer);
    w.0
}

pub fn decode_session(b: &[u8]) -> Result<SessionInfo> {
    let mut r = R::new(b, "session");
    let v = r.u8()?;
    if v != 1 {
        return Err(corrupt(format!("session record version {v}")));
    }
    let lease = r.i64()?;
    let started = r.time()?;
    let pid = r.u32()?;
    let host = String::from_utf8_lossy(r.bytes(1024)?).into_owned();
    let mountpoint = String::from_utf8_lossy(r.bytes(4096)?).into_owned();
    let reclaimer = r.u64()?;
    r.end()?;
    Ok(SessionInfo {
        lease,
        started,
        pid,
        host,
        mountpoint,
        reclaimer,
    })
}

// ---- delete queue ------------------------------------------------------------------

/// What the delete queue holds: work that frees space, done in the
/// background in bounded batches by the session that queued it (or, once
/// that session is gone, by whoever reclaims it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Delete chunk records of `ino` in `[from, to)` whose stamp is below
    /// `stamp`, and their objects; then, if the inode still names this
    /// range as garbage, clear it. A freed inode's whole data is
    /// `[0, u64::MAX)` with stamp `u64::MAX`.
    Chunks {
        ino: Ino,
        from: u64,
        to: u64,
        stamp: u64,
    },
    /// Delete these objects of `ino`'s chunk `chunk`, which no record names.
    Objects {
        ino: Ino,
        chunk: u64,
        objs: Vec<ObjId>,
    },
}

/// Most objects one queue item names.
pub const WORK_OBJECTS_MAX: usize = 256;

pub fn encode_work(w: &Work) -> Vec<u8> {
    let mut b = W(Vec::with_capacity(40));
    match w {
        Work::Chunks {
            ino,
            from,
            to,
            stamp,
        } => {
            assert!(from < to, "an empty chunk range queued");
            b.u8(1).u8(1).u64(ino.0).u64(*from).u64(*to).u64(*stamp);
        }
        Work::Objects { ino, chunk, objs } => {
            assert!(!objs.is_empty() && objs.len() <= WORK_OBJECTS_MAX);
            b.u8(1).u8(2).u64(ino.0).u64(*chunk).u32(objs.len() as u32);
            for o in objs {
                b.u64(o.session).u64(o.seq);
            }
        }
    }
    b.0
}

pub fn decode_work(b: &[u8]) -> Result<Work> {
    let mut r = R::new(b, "delete queue");
    let v = r.u8()?;
    if v != 1 {
        return Err(corrupt(format!("delete queue record version {v}")));
    }
    let w = match r.u8()? {
        1 => {
            let w = Work::Chunks {
                ino: Ino(r.u64()?),
                from: r.u64()?,
                to: r.u64()?,
                stamp: r.u64()?,
            };
            if let Work::Chunks { from, to, .. } = w {
                if from >= to {
                    return Err(corrupt("delete queue item with an empty range"));
                }
            }
            w
        }
        2 => {
            let ino = Ino(r.u64()?);
            let chunk = r.u64()?;
            let n = r.u32()? as usize;
            if n == 0 || n > WORK_OBJECTS_MAX {
                return Err(corrupt("delete queue item with a bad object count"));
            }
            let mut objs = Vec::with_capacity(n);
            for _ in 0..n {
                objs.push(ObjId {
                    session: r.u64()?,
                    seq: r.u64()?,
                });
            }
            Work::Objects { ino, chunk, objs }
        }
        t => return Err(corrupt(format!("delete queue item kind {t}"))),
    };
    r.end()?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sec: i64) -> Timespec {
        Timespec { sec, nsec: 5 }
    }

    fn file() -> Inode {
        Inode {
            kind: FileKind::Regular,
            perm: 0o644,
            nlink: 1,
            uid: 1,
            gid: 2,
            size: 10,
            atime: t(1),
            mtime: t(2),
            ctime: t(3),
            rdev: 0,
            parent: 0,
            has_xattrs: true,
            inline: true,
            dseq: 4,
            garbage: Some(Garbage {
                from: 1,
                to: 9,
                stamp: 4,
            }),
            extra: b"0123456789".to_vec(),
        }
    }

    #[test]
    fn records_round_trip() {
        let i = file();
        assert_eq!(decode_inode(Ino(7), &encode_inode(Ino(7), &i)).unwrap(), i);
        let c = Chunk {
            stamp: 3,
            slices: vec![
                Slice {
                    off: 0,
                    len: 10,
                    obj: Some(ObjRef {
                        id: ObjId { session: 2, seq: 9 },
                        size: 20,
                        sum: 77,
                    }),
                    obj_off: 5,
                },
                Slice {
                    off: 4,
                    len: 2,
                    obj: None,
                    obj_off: 0,
                },
            ],
        };
        assert_eq!(decode_chunk(Ino(7), &encode_chunk(Ino(7), &c)).unwrap(), c);
        let w = Work::Objects {
            ino: Ino(3),
            chunk: 1,
            objs: vec![ObjId { session: 1, seq: 2 }],
        };
        assert_eq!(decode_work(&encode_work(&w)).unwrap(), w);
        let s = Superblock {
            version: VOLUME_VERSION,
            uuid: [7; 16],
            created: t(9),
            data_url: "file:///tmp/x".into(),
            upload_window_ms: UPLOAD_WINDOW_MS,
        };
        assert_eq!(decode_superblock(&encode_superblock(&s)).unwrap(), s);
        let mut x = Xattrs::new();
        x.insert(b"user.a".to_vec(), b"v".to_vec());
        assert_eq!(decode_xattrs(Ino(1), &encode_xattrs(&x)).unwrap(), x);
    }

    #[test]
    fn damaged_records_are_corruption_not_panics() {
        let b = encode_inode(Ino(7), &file());
        for n in 0..b.len() {
            assert!(decode_inode(Ino(7), &b[..n]).is_err(), "cut at {n}");
        }
        let mut wrong = b.clone();
        wrong[1] = 99;
        assert!(matches!(
            decode_inode(Ino(7), &wrong),
            Err(EngineError::Corrupt { .. })
        ));
        assert!(matches!(
            decode_superblock(b"CHURNFS\0xxxxxxxx"),
            Err(EngineError::NotAStore(_))
        ));
        let mut sb = encode_superblock(&Superblock {
            version: VOLUME_VERSION,
            uuid: [0; 16],
            created: t(1),
            data_url: String::new(),
            upload_window_ms: UPLOAD_WINDOW_MS,
        });
        sb[8] = 9;
        assert!(matches!(
            decode_superblock(&sb),
            Err(EngineError::WrongVersion { found: 9, .. })
        ));
    }

    #[test]
    fn keys_decode_to_what_they_encode() {
        let k = Keys::new("vol");
        assert_eq!(k.decode(&k.inode(Ino(5))), Some(Key::Inode(Ino(5))));
        assert_eq!(k.decode(&k.dir_times(Ino(5))), Some(Key::DirTimes(Ino(5))));
        assert_eq!(
            k.decode(&k.dentry(Ino(1), b"x")),
            Some(Key::Dentry {
                parent: Ino(1),
                hash: dir_hash(b"x"),
                name: b"x".to_vec()
            })
        );
        assert_eq!(k.decode(&k.open(3, Ino(4))), Some(Key::Open(3, Ino(4))));
        assert_eq!(k.decode(&k.slot(3, 9)), Some(Key::Slot(3, 9)));
        assert_eq!(k.decode(b"churnfs/other/S"), None);
        let (a, b) = k.inode_range(Ino(5));
        assert!(k.dir_times(Ino(5)) >= a && k.dir_times(Ino(5)) < b);
        assert!(k.inode(Ino(6)) >= b);
        assert!(check_volume_name("ci-cache_1.0").is_ok());
        assert!(check_volume_name("../x").is_err());
        assert!(check_volume_name("").is_err());
    }
}
