//! On-store format: key encoding and record codecs, with the format version.
//! Every record is validated before it is encoded and again after decoding;
//! a record that fails validation is reported as corruption, never trusted.
//!
//! Keys (big-endian integers so that key order is numeric order):
//!
//! ```text
//! superblock  'S'
//! inode       'I' | ino:u64
//! dentry      'D' | parent:u64 | hash:u64 | name bytes   (hash = dir_hash(name))
//! block       'B' | ino:u64 | block:u64
//! xattrs      'X' | ino:u64
//! unlinked    'U' | ino:u64
//! truncate    'T' | ino:u64                              (blocks from..to still to delete)
//! ```

use crate::error::{EngineError, Result};
use crate::types::{BlockNo, FileKind, Ino, Timespec};

/// Format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Magic at the start of the superblock record.
pub const MAGIC: &[u8; 8] = b"CHURNFS\0";
/// Size of one data block.
pub const BLOCK_SIZE: u64 = 64 * 1024;
/// Regular files up to this size keep their bytes inside the inode record.
pub const INLINE_MAX: u64 = 2048;
/// Largest file size: the kernel's own limit for FUSE (`MAX_LFS_FILESIZE`),
/// so that with the writeback cache the kernel refuses larger writes with
/// EFBIG itself instead of accepting them into the page cache.
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;
/// Longest name in a directory.
pub const NAME_MAX: usize = churnfs_vfs::NAME_MAX;
/// Longest symlink target.
pub const SYMLINK_MAX: usize = 4095;
/// Largest xattr value, and largest total of one inode's xattrs.
pub const XATTR_VALUE_MAX: usize = 64 * 1024;
pub const XATTR_TOTAL_MAX: usize = 64 * 1024;
pub const XATTR_NAME_MAX: usize = 255;

pub const TAG_SUPER: u8 = b'S';
pub const TAG_INODE: u8 = b'I';
pub const TAG_DENTRY: u8 = b'D';
pub const TAG_BLOCK: u8 = b'B';
pub const TAG_XATTR: u8 = b'X';
pub const TAG_UNLINKED: u8 = b'U';
pub const TAG_TRUNCATE: u8 = b'T';

/// Hash of a name for directory order and readdir cookies: 63 bits, never
/// below 3 (cookies 1 and 2 are `.` and `..`). xxh3 is a fixed algorithm, so
/// the order is part of the format.
pub fn dir_hash(name: &[u8]) -> u64 {
    let h = xxhash_rust::xxh3::xxh3_64(name) >> 1;
    h.max(3)
}

fn key_ino(tag: u8, ino: Ino) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(tag);
    k.extend_from_slice(&ino.0.to_be_bytes());
    k
}

pub fn super_key() -> Vec<u8> {
    vec![TAG_SUPER]
}
pub fn inode_key(ino: Ino) -> Vec<u8> {
    key_ino(TAG_INODE, ino)
}
pub fn xattr_key(ino: Ino) -> Vec<u8> {
    key_ino(TAG_XATTR, ino)
}
pub fn unlinked_key(ino: Ino) -> Vec<u8> {
    key_ino(TAG_UNLINKED, ino)
}
pub fn unlinked_prefix() -> Vec<u8> {
    vec![TAG_UNLINKED]
}
/// The pending deletion of a shrunk file's blocks (orphan.rs).
pub fn truncate_key(ino: Ino) -> Vec<u8> {
    key_ino(TAG_TRUNCATE, ino)
}
pub fn truncate_prefix() -> Vec<u8> {
    vec![TAG_TRUNCATE]
}
pub fn block_prefix(ino: Ino) -> Vec<u8> {
    key_ino(TAG_BLOCK, ino)
}
pub fn block_key(ino: Ino, b: BlockNo) -> Vec<u8> {
    let mut k = block_prefix(ino);
    k.extend_from_slice(&b.0.to_be_bytes());
    k
}
pub fn dentry_prefix(parent: Ino) -> Vec<u8> {
    key_ino(TAG_DENTRY, parent)
}
/// Key of a directory entry; also the start of a readdir scan when `name` is empty.
pub fn dentry_key(parent: Ino, hash: u64, name: &[u8]) -> Vec<u8> {
    // One allocation, sized for the whole key.
    let mut k = Vec::with_capacity(17 + name.len());
    k.push(TAG_DENTRY);
    k.extend_from_slice(&parent.0.to_be_bytes());
    k.extend_from_slice(&hash.to_be_bytes());
    k.extend_from_slice(name);
    k
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// A decoded key.
#[derive(Debug, PartialEq, Eq)]
pub enum Key {
    Super,
    Inode(Ino),
    Dentry {
        parent: Ino,
        hash: u64,
        name: Vec<u8>,
    },
    Block(Ino, BlockNo),
    Xattr(Ino),
    Unlinked(Ino),
    Truncate(Ino),
}

pub fn decode_key(k: &[u8]) -> Result<Key> {
    let bad = || {
        EngineError::corrupt(
            None,
            format!("malformed key {:02x?}", &k[..k.len().min(24)]),
        )
    };
    let (&tag, rest) = k.split_first().ok_or_else(bad)?;
    match tag {
        TAG_SUPER if rest.is_empty() => Ok(Key::Super),
        TAG_INODE if rest.len() == 8 => Ok(Key::Inode(Ino(be_u64(rest)))),
        TAG_XATTR if rest.len() == 8 => Ok(Key::Xattr(Ino(be_u64(rest)))),
        TAG_UNLINKED if rest.len() == 8 => Ok(Key::Unlinked(Ino(be_u64(rest)))),
        TAG_TRUNCATE if rest.len() == 8 => Ok(Key::Truncate(Ino(be_u64(rest)))),
        TAG_BLOCK if rest.len() == 16 => {
            Ok(Key::Block(Ino(be_u64(rest)), BlockNo(be_u64(&rest[8..]))))
        }
        TAG_DENTRY if rest.len() > 16 && rest.len() <= 16 + NAME_MAX => {
            let name = rest[16..].to_vec();
            let hash = be_u64(&rest[8..]);
            if hash != dir_hash(&name) || name.contains(&b'/') || name.contains(&0) {
                return Err(bad());
            }
            Ok(Key::Dentry {
                parent: Ino(be_u64(rest)),
                hash,
                name,
            })
        }
        _ => Err(bad()),
    }
}

/// Little-endian reader that reports truncation as corruption.
struct Reader<'a> {
    b: &'a [u8],
    ino: Option<Ino>,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(EngineError::corrupt(
                self.ino,
                format!("{} record truncated", self.what),
            ));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().unwrap_or_default(),
        ))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }
    fn time(&mut self) -> Result<Timespec> {
        let sec = self.u64()? as i64;
        let nsec = self.u32()?;
        Ok(Timespec { sec, nsec })
    }
    fn finish(&self) -> Result<()> {
        if !self.b.is_empty() {
            return Err(EngineError::corrupt(
                self.ino,
                format!("{} record has trailing bytes", self.what),
            ));
        }
        Ok(())
    }
}

fn put_time(v: &mut Vec<u8>, t: Timespec) {
    v.extend_from_slice(&(t.sec as u64).to_le_bytes());
    v.extend_from_slice(&t.nsec.to_le_bytes());
}

/// The superblock: identity and allocation state of a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    pub uuid: [u8; 16],
    pub created: Timespec,
    /// Every inode number below this has been handed out at some point.
    pub next_ino: u64,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(48);
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&self.version.to_le_bytes());
        v.extend_from_slice(&self.uuid);
        put_time(&mut v, self.created);
        v.extend_from_slice(&self.next_ino.to_le_bytes());
        v
    }

    /// Decodes the superblock. A wrong version is reported as `Ok` with that
    /// version so the caller can name it; malformed bytes are corruption.
    pub fn decode(b: &[u8]) -> Result<Superblock> {
        let mut r = Reader {
            b,
            ino: None,
            what: "superblock",
        };
        if r.take(8)? != MAGIC {
            return Err(EngineError::corrupt(None, "superblock magic is wrong"));
        }
        let version = r.u32()?;
        if version != FORMAT_VERSION {
            return Ok(Superblock {
                version,
                uuid: [0; 16],
                created: Timespec::default(),
                next_ino: 0,
            });
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(r.take(16)?);
        let created = r.time()?;
        let next_ino = r.u64()?;
        r.finish()?;
        if next_ino <= Ino::ROOT.0 || created.nsec >= 1_000_000_000 {
            return Err(EngineError::corrupt(None, "superblock fields out of range"));
        }
        Ok(Superblock {
            version,
            uuid,
            created,
            next_ino,
        })
    }
}

/// Flags in an inode record.
const F_HAS_XATTRS: u8 = 1;
const F_INLINE: u8 = 2;

/// An inode as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeRecord {
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
    /// Directories: the parent directory (the root is its own parent).
    pub parent: Ino,
    /// Directories: number of names in it (not counting `.` and `..`).
    pub entries: u64,
    pub has_xattrs: bool,
    /// Regular files no larger than `INLINE_MAX`: their bytes. Symlinks: the target.
    pub extra: Option<Vec<u8>>,
}

impl InodeRecord {
    /// A new, empty directory in `parent`, made at `now`.
    pub fn empty_dir(perm: u16, uid: u32, gid: u32, parent: Ino, now: Timespec) -> InodeRecord {
        InodeRecord {
            kind: FileKind::Directory,
            perm,
            nlink: 2,
            uid,
            gid,
            size: 0,
            atime: now,
            mtime: now,
            ctime: now,
            rdev: 0,
            parent,
            entries: 0,
            has_xattrs: false,
            extra: None,
        }
    }

    /// Checks the record's own invariants.
    pub fn validate(&self, ino: Ino) -> Result<()> {
        let bad = |what: &str| {
            Err(EngineError::corrupt(
                Some(ino),
                format!("inode record: {what}"),
            ))
        };
        if self.perm > 0o7777 {
            return bad("permission bits out of range");
        }
        for t in [self.atime, self.mtime, self.ctime] {
            if t.nsec >= 1_000_000_000 {
                return bad("nanoseconds out of range");
            }
        }
        if self.size > MAX_FILE_SIZE {
            return bad("size beyond the maximum file size");
        }
        match self.kind {
            FileKind::Regular => match &self.extra {
                Some(d) if self.size > INLINE_MAX || d.len() as u64 != self.size => {
                    return bad("inline data does not match size")
                }
                None if self.size <= INLINE_MAX && self.size > 0 => {
                    return bad("small file without inline data")
                }
                _ => {}
            },
            FileKind::Symlink => match &self.extra {
                Some(t)
                    if !t.is_empty() && t.len() <= SYMLINK_MAX && t.len() as u64 == self.size => {}
                _ => return bad("symlink target missing or wrong length"),
            },
            _ => {
                if self.extra.is_some() {
                    return bad("extra bytes on a kind that has none");
                }
            }
        }
        if self.kind == FileKind::Directory {
            if self.parent.0 == 0 {
                return bad("directory without parent");
            }
            if self.nlink != 0 && self.nlink < 2 {
                return bad("directory link count below 2");
            }
        } else if self.entries != 0 || self.parent.0 != 0 {
            return bad("non-directory with directory fields");
        }
        Ok(())
    }

    pub fn encode(&self, ino: Ino) -> Result<Vec<u8>> {
        self.validate(ino)?;
        let extra = self.extra.as_deref().unwrap_or(&[]);
        let mut v = Vec::with_capacity(96 + extra.len());
        v.push(1u8); // record version
        v.push(self.kind.to_u8());
        v.extend_from_slice(&self.perm.to_le_bytes());
        v.extend_from_slice(&self.nlink.to_le_bytes());
        v.extend_from_slice(&self.uid.to_le_bytes());
        v.extend_from_slice(&self.gid.to_le_bytes());
        v.extend_from_slice(&self.size.to_le_bytes());
        put_time(&mut v, self.atime);
        put_time(&mut v, self.mtime);
        put_time(&mut v, self.ctime);
        v.extend_from_slice(&self.rdev.to_le_bytes());
        v.extend_from_slice(&self.parent.0.to_le_bytes());
        v.extend_from_slice(&self.entries.to_le_bytes());
        let mut flags = 0u8;
        if self.has_xattrs {
            flags |= F_HAS_XATTRS;
        }
        if self.extra.is_some() {
            flags |= F_INLINE;
        }
        v.push(flags);
        v.extend_from_slice(&(extra.len() as u32).to_le_bytes());
        v.extend_from_slice(extra);
        Ok(v)
    }

    pub fn decode(ino: Ino, b: &[u8]) -> Result<InodeRecord> {
        let mut r = Reader {
            b,
            ino: Some(ino),
            what: "inode",
        };
        if r.u8()? != 1 {
            return Err(EngineError::corrupt(
                Some(ino),
                "unknown inode record version",
            ));
        }
        let kind = FileKind::from_u8(r.u8()?)
            .ok_or_else(|| EngineError::corrupt(Some(ino), "unknown inode kind"))?;
        let perm = r.u16()?;
        let nlink = r.u32()?;
        let uid = r.u32()?;
        let gid = r.u32()?;
        let size = r.u64()?;
        let atime = r.time()?;
        let mtime = r.time()?;
        let ctime = r.time()?;
        let rdev = r.u32()?;
        let parent = Ino(r.u64()?);
        let entries = r.u64()?;
        let flags = r.u8()?;
        if flags & !(F_HAS_XATTRS | F_INLINE) != 0 {
            return Err(EngineError::corrupt(Some(ino), "unknown inode flags"));
        }
        let n = r.u32()? as usize;
        let extra = r.take(n)?.to_vec();
        r.finish()?;
        let rec = InodeRecord {
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
            entries,
            has_xattrs: flags & F_HAS_XATTRS != 0,
            extra: if flags & F_INLINE != 0 {
                Some(extra)
            } else {
                None
            },
        };
        if flags & F_INLINE == 0 && n != 0 {
            return Err(EngineError::corrupt(
                Some(ino),
                "extra bytes without inline flag",
            ));
        }
        rec.validate(ino)?;
        Ok(rec)
    }
}

/// A directory entry's value: the child and its kind.
pub fn encode_dentry(ino: Ino, kind: FileKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(9);
    v.extend_from_slice(&ino.0.to_le_bytes());
    v.push(kind.to_u8());
    v
}

pub fn decode_dentry(parent: Ino, b: &[u8]) -> Result<(Ino, FileKind)> {
    let mut r = Reader {
        b,
        ino: Some(parent),
        what: "dentry",
    };
    let ino = Ino(r.u64()?);
    let kind = FileKind::from_u8(r.u8()?)
        .ok_or_else(|| EngineError::corrupt(Some(parent), "dentry with unknown kind"))?;
    r.finish()?;
    if ino.0 <= Ino::ROOT.0 {
        return Err(EngineError::corrupt(
            Some(parent),
            "dentry points at the root or ino 0",
        ));
    }
    Ok((ino, kind))
}

/// A block's value is its bytes (at most `BLOCK_SIZE`; a missing tail reads as zeros).
pub fn validate_block(ino: Ino, b: &[u8]) -> Result<()> {
    if b.len() as u64 > BLOCK_SIZE {
        return Err(EngineError::corrupt(
            Some(ino),
            "data block larger than the block size",
        ));
    }
    Ok(())
}

/// All xattrs of one inode, sorted by name.
pub type Xattrs = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

pub fn xattrs_bytes(x: &Xattrs) -> usize {
    x.iter().map(|(k, v)| k.len() + v.len()).sum()
}

pub fn encode_xattrs(ino: Ino, x: &Xattrs) -> Result<Vec<u8>> {
    validate_xattrs(ino, x)?;
    let mut v = Vec::new();
    v.extend_from_slice(&(x.len() as u32).to_le_bytes());
    for (k, val) in x {
        v.push(k.len() as u8);
        v.extend_from_slice(k);
        v.extend_from_slice(&(val.len() as u32).to_le_bytes());
        v.extend_from_slice(val);
    }
    Ok(v)
}

fn validate_xattrs(ino: Ino, x: &Xattrs) -> Result<()> {
    if xattrs_bytes(x) > XATTR_TOTAL_MAX {
        return Err(EngineError::corrupt(
            Some(ino),
            "xattrs exceed the per-inode total",
        ));
    }
    for (k, v) in x {
        if k.is_empty() || k.len() > XATTR_NAME_MAX || k.contains(&0) || v.len() > XATTR_VALUE_MAX {
            return Err(EngineError::corrupt(
                Some(ino),
                "xattr name or value out of range",
            ));
        }
    }
    Ok(())
}

pub fn decode_xattrs(ino: Ino, b: &[u8]) -> Result<Xattrs> {
    let mut r = Reader {
        b,
        ino: Some(ino),
        what: "xattr",
    };
    let n = r.u32()? as usize;
    let mut x = Xattrs::new();
    for _ in 0..n {
        let kl = r.u8()? as usize;
        let k = r.take(kl)?.to_vec();
        let vl = r.u32()? as usize;
        let v = r.take(vl)?.to_vec();
        if x.insert(k, v).is_some() {
            return Err(EngineError::corrupt(Some(ino), "duplicate xattr name"));
        }
    }
    r.finish()?;
    validate_xattrs(ino, &x)?;
    Ok(x)
}

/// The unlinked record's value: a version byte.
pub fn encode_unlinked() -> Vec<u8> {
    vec![1]
}

pub fn decode_unlinked(ino: Ino, b: &[u8]) -> Result<()> {
    if b != [1] {
        return Err(EngineError::corrupt(Some(ino), "unlinked record malformed"));
    }
    Ok(())
}

/// A truncate's pending block deletion: blocks `from..to` of the file are
/// garbage (record version 1, then both numbers little-endian).
pub fn encode_truncate(from: u64, to: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(17);
    v.push(1u8);
    v.extend_from_slice(&from.to_le_bytes());
    v.extend_from_slice(&to.to_le_bytes());
    v
}

pub fn decode_truncate(ino: Ino, b: &[u8]) -> Result<(u64, u64)> {
    let bad = |why: &str| EngineError::corrupt(Some(ino), format!("truncate record {why}"));
    if b.len() != 17 || b[0] != 1 {
        return Err(bad("malformed"));
    }
    let from = u64::from_le_bytes(b[1..9].try_into().expect("8 bytes"));
    let to = u64::from_le_bytes(b[9..17].try_into().expect("8 bytes"));
    if from >= to || to > MAX_FILE_SIZE.div_ceil(BLOCK_SIZE) {
        return Err(bad("has an empty or impossible block range"));
    }
    Ok((from, to))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn truncate_records_roundtrip_and_reject_bad_ranges() {
        let ino = Ino(9);
        assert_eq!(
            decode_truncate(ino, &encode_truncate(3, 70)).unwrap(),
            (3, 70)
        );
        assert!(decode_truncate(ino, &encode_truncate(5, 5)).is_err());
        assert!(decode_truncate(ino, &encode_truncate(0, u64::MAX)).is_err());
        assert!(decode_truncate(ino, &[1, 2, 3]).is_err());
        let mut v = encode_truncate(1, 2);
        v[0] = 2;
        assert!(decode_truncate(ino, &v).is_err());
        assert_eq!(decode_key(&truncate_key(ino)).unwrap(), Key::Truncate(ino));
    }

    /// A regular file's record of `size` bytes (inline up to `INLINE_MAX`).
    pub(crate) fn file(size: u64) -> InodeRecord {
        InodeRecord {
            kind: FileKind::Regular,
            perm: 0o644,
            nlink: 1,
            uid: 1,
            gid: 2,
            size,
            atime: Timespec { sec: 1, nsec: 2 },
            mtime: Timespec { sec: 3, nsec: 4 },
            ctime: Timespec { sec: -5, nsec: 6 },
            rdev: 0,
            parent: Ino(0),
            entries: 0,
            has_xattrs: true,
            extra: if size <= INLINE_MAX {
                Some(vec![7; size as usize])
            } else {
                None
            },
        }
    }

    #[test]
    fn inode_roundtrip() {
        for size in [0, 5, INLINE_MAX, INLINE_MAX + 1, 1 << 30] {
            let r = file(size);
            let b = r.encode(Ino(9)).unwrap();
            assert_eq!(InodeRecord::decode(Ino(9), &b).unwrap(), r);
        }
    }

    #[test]
    fn inode_decode_rejects_every_truncation_and_bad_kind() {
        let b = file(5).encode(Ino(9)).unwrap();
        for n in 0..b.len() {
            assert!(
                InodeRecord::decode(Ino(9), &b[..n]).is_err(),
                "prefix {n} accepted"
            );
        }
        let mut bad = b.clone();
        bad[1] = 99;
        assert!(InodeRecord::decode(Ino(9), &bad).is_err());
    }

    #[test]
    fn invalid_records_are_not_encoded() {
        let mut r = file(5);
        r.perm = 0o17777;
        assert!(r.encode(Ino(2)).is_err());
        let mut r = file(5);
        r.extra = Some(vec![1; 4]);
        assert!(r.encode(Ino(2)).is_err());
    }

    #[test]
    fn keys_roundtrip_and_order() {
        let k = dentry_key(Ino(7), dir_hash(b"abc"), b"abc");
        assert_eq!(
            decode_key(&k).unwrap(),
            Key::Dentry {
                parent: Ino(7),
                hash: dir_hash(b"abc"),
                name: b"abc".to_vec()
            }
        );
        assert!(block_key(Ino(1), BlockNo(2)) < block_key(Ino(1), BlockNo(256)));
        assert!(inode_key(Ino(255)) < inode_key(Ino(256)));
        assert_eq!(
            decode_key(&block_key(Ino(3), BlockNo(4))).unwrap(),
            Key::Block(Ino(3), BlockNo(4))
        );
        let mut forged = dentry_key(Ino(7), 12345, b"abc");
        assert!(decode_key(&forged).is_err());
        forged.truncate(3);
        assert!(decode_key(&forged).is_err());
    }

    #[test]
    fn dir_hash_leaves_room_for_dot_cookies() {
        for n in 0..10_000u32 {
            let h = dir_hash(&n.to_le_bytes());
            assert!((3..1 << 63).contains(&h));
        }
    }

    #[test]
    fn xattrs_and_superblock_roundtrip() {
        let mut x = Xattrs::new();
        x.insert(b"user.a".to_vec(), b"1".to_vec());
        x.insert(b"user.b".to_vec(), vec![]);
        let b = encode_xattrs(Ino(4), &x).unwrap();
        assert_eq!(decode_xattrs(Ino(4), &b).unwrap(), x);
        assert!(decode_xattrs(Ino(4), &b[..b.len() - 1]).is_err());
        let sb = Superblock {
            version: FORMAT_VERSION,
            uuid: [3; 16],
            created: Timespec { sec: 10, nsec: 0 },
            next_ino: 2,
        };
        assert_eq!(Superblock::decode(&sb.encode()).unwrap(), sb);
        let mut future = sb.encode();
        future[8] = 2;
        assert_eq!(Superblock::decode(&future).unwrap().version, 2);
    }
}

/// Property tests over arbitrary bytes: no decoder panics, and whatever a
/// decoder accepts re-encodes to the same bytes (one encoding per value).
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    const CASES: u32 = 20_000;

    fn valid_inode() -> Vec<u8> {
        InodeRecord {
            kind: FileKind::Regular,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 3,
            atime: Timespec::default(),
            mtime: Timespec::default(),
            ctime: Timespec::default(),
            rdev: 0,
            parent: Ino(0),
            entries: 0,
            has_xattrs: false,
            extra: Some(b"abc".to_vec()),
        }
        .encode(Ino(5))
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

        #[test]
        fn keys(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(k) = decode_key(&b) {
                let again = match k {
                    Key::Super => super_key(),
                    Key::Inode(i) => inode_key(i),
                    Key::Dentry { parent, hash, name } => dentry_key(parent, hash, &name),
                    Key::Block(i, n) => block_key(i, n),
                    Key::Xattr(i) => xattr_key(i),
                    Key::Unlinked(i) => unlinked_key(i),
                    Key::Truncate(i) => truncate_key(i),
                };
                prop_assert_eq!(again, b);
            }
        }

        #[test]
        fn truncate_records(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok((from, to)) = decode_truncate(Ino(5), &b) {
                prop_assert_eq!(encode_truncate(from, to), b);
            }
        }

        #[test]
        fn inode_records(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(r) = InodeRecord::decode(Ino(5), &b) {
                prop_assert_eq!(r.encode(Ino(5)).unwrap(), b);
            }
        }

        #[test]
        fn mutated_inode_records(pos in 0usize..200, byte in any::<u8>(), cut in 0usize..200) {
            let mut b = valid_inode();
            let p = pos % b.len();
            b[p] = byte;
            b.truncate(cut.max(1).min(b.len()));
            if let Ok(r) = InodeRecord::decode(Ino(5), &b) {
                prop_assert_eq!(r.encode(Ino(5)).unwrap(), b);
            }
        }

        #[test]
        fn dentries_xattrs_superblocks_unlinked(b in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok((ino, kind)) = decode_dentry(Ino(2), &b) {
                prop_assert_eq!(encode_dentry(ino, kind), b.clone());
            }
            if let Ok(x) = decode_xattrs(Ino(2), &b) {
                prop_assert_eq!(encode_xattrs(Ino(2), &x).unwrap(), b.clone());
            }
            if let Ok(sb) = Superblock::decode(&b) {
                if sb.version == FORMAT_VERSION {
                    prop_assert_eq!(sb.encode(), b.clone());
                }
            }
            if decode_unlinked(Ino(2), &b).is_ok() {
                prop_assert_eq!(encode_unlinked(), b.clone());
            }
            let _ = validate_block(Ino(2), &b);
        }

        #[test]
        fn superblock_with_magic(rest in proptest::collection::vec(any::<u8>(), 0..60)) {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&rest);
            if let Ok(sb) = Superblock::decode(&b) {
                if sb.version == FORMAT_VERSION {
                    prop_assert_eq!(sb.encode(), b);
                }
            }
        }
    }
}
