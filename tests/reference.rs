//! A tiny in-memory reference filesystem and a driver that applies the same
//! random operation to it and to an engine, checking every answer, and
//! compares the two trees. The model and crash scenarios are built on it.
//!
//! The reference is a map of paths to nodes; a file node names a file
//! (contents and xattrs) that several paths may share (hard links).

use crate::{names, pattern, read_all, resolve, Rng, Target, CTX};
use churnfs_engine::{EngineError, FileKind, Ino, RenameFlags, SetAttr};
use churnfs_vfs::Backend;
use std::collections::BTreeMap;

/// Identity of a file in the reference (an inode, without its number).
pub type FileId = u64;

/// A node of the reference tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(FileId),
}

/// A file of the reference: contents and extended attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct File {
    pub data: Vec<u8>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The reference filesystem: every path but the root (`""`), `/`-separated,
/// and the files those paths name. A file no path names is dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub nodes: BTreeMap<String, Node>,
    pub files: BTreeMap<FileId, File>,
    next_id: FileId,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Parent path and last name of a path.
pub fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

fn depth(path: &str) -> usize {
    if path.is_empty() {
        0
    } else {
        path.matches('/').count() + 1
    }
}

/// Is `path` equal to `dir` or inside it?
fn within(path: &str, dir: &str) -> bool {
    path == dir || path.starts_with(&format!("{dir}/"))
}

impl Model {
    /// Direct children of `dir`, in name order.
    pub fn children(&self, dir: &str) -> Vec<(&str, Node)> {
        self.nodes
            .iter()
            .filter(|(p, _)| split(p).0 == dir)
            .map(|(p, n)| (split(p).1, *n))
            .collect()
    }

    fn is_dir(&self, path: &str) -> bool {
        path.is_empty() || self.nodes.get(path) == Some(&Node::Dir)
    }

    fn dirs(&self) -> Vec<String> {
        let mut v = vec![String::new()];
        v.extend(
            self.nodes
                .iter()
                .filter(|(_, n)| **n == Node::Dir)
                .map(|(p, _)| p.clone()),
        );
        v
    }

    fn files_paths(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| matches!(n, Node::File(_)))
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn paths(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// Number of names of a file.
    pub fn nlink(&self, id: FileId) -> usize {
        self.nodes
            .values()
            .filter(|n| **n == Node::File(id))
            .count()
    }

    /// The file a path names.
    pub fn file(&self, path: &str) -> Option<&File> {
        match self.nodes.get(path) {
            Some(Node::File(id)) => self.files.get(id),
            _ => None,
        }
    }

    fn file_mut(&mut self, path: &str) -> &mut File {
        match self.nodes.get(path) {
            Some(Node::File(id)) => self.files.get_mut(id).expect("named file exists"),
            other => panic!("model: {path} is not a file: {other:?}"),
        }
    }

    /// The errors a new name at `path` may get: `Exists` if it is taken.
    fn may_exist(&self, path: &str) -> &'static [&'static str] {
        if self.nodes.contains_key(path) {
            &["Exists"]
        } else {
            &[]
        }
    }

    fn create(&mut self, path: &str) {
        let id = self.next_id;
        self.next_id += 1;
        self.files.insert(id, File::default());
        self.nodes.insert(path.to_string(), Node::File(id));
    }

    /// Removes a name; a file losing its last name is dropped and returned.
    fn remove(&mut self, path: &str) -> Option<File> {
        match self.nodes.remove(path) {
            Some(Node::File(id)) if self.nlink(id) == 0 => self.files.remove(&id),
            _ => None,
        }
    }

    /// Moves `from` (and everything under it) to `to`, replacing `to`.
    fn rename(&mut self, from: &str, to: &str) {
        self.remove(to);
        let moved: Vec<String> = self
            .nodes
            .keys()
            .filter(|p| within(p, from))
            .cloned()
            .collect();
        for p in moved {
            let node = self.nodes.remove(&p).expect("listed path");
            let new = format!("{to}{}", &p[from.len()..]);
            self.nodes.insert(new, node);
        }
    }
}

/// One operation of the random workload.
#[derive(Clone, Debug)]
pub enum Op {
    Create {
        path: String,
    },
    Mkdir {
        path: String,
    },
    Link {
        from: String,
        to: String,
    },
    Write {
        path: String,
        off: u64,
        len: usize,
        seed: u64,
    },
    Truncate {
        path: String,
        size: u64,
    },
    SetXattr {
        path: String,
        name: String,
        len: usize,
        seed: u64,
    },
    RemoveXattr {
        path: String,
        name: String,
    },
    Unlink {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    /// Open a file, unlink it, and keep the handle (see `Driver::held`).
    UnlinkKeepOpen {
        path: String,
    },
    /// Write to, then close, the oldest held open-unlinked file.
    ReleaseHeld {
        seed: u64,
    },
    /// O_TMPFILE in a directory: a file born unlinked, written and held.
    Tmpfile {
        dir: String,
        len: usize,
        seed: u64,
    },
    /// linkat of the oldest held tmpfile: it gets the name `to`, then is
    /// closed.
    LinkHeld {
        to: String,
    },
    Fsync,
    Remount,
}

const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
const XATTRS: [&str; 3] = ["user.a", "user.b", "trusted.c"];

/// Drives an engine and the reference model with the same operations.
pub struct Driver {
    pub model: Model,
    /// Files unlinked while open (or made by O_TMPFILE), still open: inode,
    /// contents and the mount holding them.
    pub held: Vec<(Ino, Vec<u8>, usize)>,
    /// The held files made by O_TMPFILE: only they may be linked again
    /// (the kernel's I_LINKABLE), and none may come back after a crash.
    pub tmpfiles: std::collections::BTreeSet<Ino>,
    /// Tmpfiles given a name so far.
    pub tmpfiles_linked: u64,
    pub rng: Rng,
}

/// Name of an engine error's variant.
fn variant(e: &EngineError) -> String {
    let d = format!("{e:?}");
    d.split(['(', ' ', '{']).next().unwrap_or("").to_string()
}

impl Driver {
    pub fn new(seed: u64) -> Driver {
        Driver {
            model: Model::default(),
            held: Vec::new(),
            tmpfiles: Default::default(),
            tmpfiles_linked: 0,
            rng: Rng::new(seed),
        }
    }

    fn new_path(&mut self) -> String {
        let dirs = self.model.dirs();
        let shallow: Vec<String> = dirs.into_iter().filter(|d| depth(d) < 3).collect();
        let dir = self.rng.pick(&shallow).clone();
        let name = *self.rng.pick::<&str>(&NAMES);
        join(&dir, name)
    }

    fn offset(&mut self, size: u64) -> u64 {
        const B: u64 = 65_536;
        match self.rng.below(100) {
            0..=44 => self.rng.below(3000),
            45..=69 => B - 1500 + self.rng.below(3000),
            70..=79 => self.rng.below(140_000),
            _ => self.rng.below(size + 1),
        }
    }

    fn size_of(&self, path: &str) -> u64 {
        self.model.file(path).map_or(0, |f| f.data.len() as u64)
    }

    /// A random operation; `remount` allows `Op::Remount`.
    pub fn random_op(&mut self, remount: bool) -> Op {
        let files = self.model.files_paths();
        let single: Vec<String> = files
            .iter()
            .filter(|p| matches!(self.model.nodes[*p], Node::File(id) if self.model.nlink(id) == 1))
            .cloned()
            .collect();
        let paths = self.model.paths();
        let crowded = paths.len() > 40;
        loop {
            let op = match self.rng.below(100) {
                0..=15 if !crowded => Op::Create {
                    path: self.new_path(),
                },
                16..=22 if !crowded => Op::Mkdir {
                    path: self.new_path(),
                },
                23..=25 if !crowded && !files.is_empty() => Op::Link {
                    from: self.rng.pick(&files).clone(),
                    to: self.new_path(),
                },
                26..=45 if !files.is_empty() => {
                    let path = self.rng.pick(&files).clone();
                    let len = match self.rng.below(10) {
                        0 => 1 + self.rng.below(70_000) as usize,
                        _ => 1 + self.rng.below(3000) as usize,
                    };
                    Op::Write {
                        off: self.offset(self.size_of(&path)),
                        path,
                        len,
                        seed: self.rng.next_u64(),
                    }
                }
                46..=52 if !files.is_empty() => {
                    let path = self.rng.pick(&files).clone();
                    let size = self.size_of(&path);
                    let size = match self.rng.below(4) {
                        0 => 0,
                        1 => self.rng.below(size + 1),
                        _ => self.offset(size),
                    };
                    Op::Truncate { path, size }
                }
                53..=55 if !files.is_empty() => Op::SetXattr {
                    path: self.rng.pick(&files).clone(),
                    name: self.rng.pick::<&str>(&XATTRS).to_string(),
                    len: self.rng.below(300) as usize,
                    seed: self.rng.next_u64(),
                },
                56 if !files.is_empty() => Op::RemoveXattr {
                    path: self.rng.pick(&files).clone(),
                    name: self.rng.pick::<&str>(&XATTRS).to_string(),
                },
                57..=63 if !paths.is_empty() => Op::Unlink {
                    path: self.rng.pick(&paths).clone(),
                },
                64..=68 if !paths.is_empty() => Op::Rmdir {
                    path: self.rng.pick(&paths).clone(),
                },
                69..=83 if !paths.is_empty() => Op::Rename {
                    from: self.rng.pick(&paths).clone(),
                    to: self.new_path(),
                },
                84..=85 if !single.is_empty() => Op::UnlinkKeepOpen {
                    path: self.rng.pick(&single).clone(),
                },
                86 => Op::Tmpfile {
                    dir: self.rng.pick(&self.model.dirs()).clone(),
                    len: self.rng.below(5000) as usize,
                    seed: self.rng.next_u64(),
                },
                87..=88 if !self.held.is_empty() => Op::ReleaseHeld {
                    seed: self.rng.next_u64(),
                },
                89 if !crowded && !self.tmpfiles.is_empty() => Op::LinkHeld {
                    to: self.new_path(),
                },
                90..=97 => Op::Fsync,
                98..=99 if remount => Op::Remount,
                _ => continue,
            };
            break op;
        }
    }

    /// Applies `op` to the engine and the model, checking the engine's answer
    /// against the model's prediction. With several mounts, each operation
    /// goes to one picked at random (one holding a file, for operations on
    /// held files).
    pub fn apply(&mut self, fs: &mut dyn Target, op: &Op, ctx: &str) {
        let m = if fs.mounts() > 1 {
            self.rng.below(fs.mounts() as u64) as usize
        } else {
            0
        };
        let e: std::sync::Arc<dyn Backend> = fs.backend(m);
        let resolve = |e: &std::sync::Arc<dyn Backend>, path: &str| {
            resolve(&**e, path).unwrap_or_else(|err| panic!("{ctx}: resolving {path:?}: {err:?}"))
        };
        // Ok(()) when the model allows no error; otherwise one of `allowed`.
        let expect = |res: churnfs_engine::Result<()>, allowed: &[&str]| -> bool {
            match (res, allowed.is_empty()) {
                (Ok(()), true) => true,
                (Err(err), false) if allowed.contains(&variant(&err).as_str()) => false,
                (res, _) => panic!("{ctx}: {op:?} answered {res:?}, model expected {allowed:?}"),
            }
        };
        match op {
            Op::Create { path } | Op::Mkdir { path } => {
                let (dir, name) = split(path);
                let parent = resolve(&e, dir);
                let dir_op = matches!(op, Op::Mkdir { .. });
                let res = if dir_op {
                    e.mkdir(CTX, parent, name.as_bytes(), 0o755).map(|a| {
                        e.forget(a.ino, 1);
                    })
                } else {
                    e.create(CTX, parent, name.as_bytes(), 0o644).map(|(a, _)| {
                        e.release(a.ino).expect("release after create");
                        e.forget(a.ino, 1);
                    })
                };
                let allowed = self.model.may_exist(path);
                if expect(res, allowed) {
                    if dir_op {
                        self.model.nodes.insert(path.clone(), Node::Dir);
                    } else {
                        self.model.create(path);
                    }
                }
            }
            Op::Link { from, to } => {
                let ino = resolve(&e, from);
                let (dir, name) = split(to);
                let parent = resolve(&e, dir);
                let res = e.link(ino, parent, name.as_bytes()).map(|a| {
                    assert_eq!(a.ino, ino, "{ctx}: link answered another inode");
                    e.forget(a.ino, 1);
                });
                let allowed = self.model.may_exist(to);
                if expect(res, allowed) {
                    let node = self.model.nodes[from];
                    self.model.nodes.insert(to.clone(), node);
                }
            }
            Op::Write {
                path,
                off,
                len,
                seed,
            } => {
                let ino = resolve(&e, path);
                let data = pattern(*seed, *len);
                e.open(ino).expect("open");
                let n = e
                    .write(ino, *off, &data, false)
                    .unwrap_or_else(|err| panic!("{ctx}: write: {err:?}"));
                assert_eq!(n as usize, data.len(), "{ctx}: short write");
                e.flush(ino).expect("flush at close");
                e.release(ino).expect("release");
                let f = &mut self.model.file_mut(path).data;
                let end = *off as usize + data.len();
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[*off as usize..end].copy_from_slice(&data);
            }
            Op::Truncate { path, size } => {
                let ino = resolve(&e, path);
                let set = SetAttr {
                    size: Some(*size),
                    ..SetAttr::default()
                };
                let a = e
                    .setattr(ino, set)
                    .unwrap_or_else(|err| panic!("{ctx}: truncate: {err:?}"));
                assert_eq!(a.size, *size, "{ctx}: setattr answered another size");
                self.model.file_mut(path).data.resize(*size as usize, 0);
            }
            Op::SetXattr {
                path,
                name,
                len,
                seed,
            } => {
                let ino = resolve(&e, path);
                let value = pattern(*seed, *len);
                e.setxattr(ino, name.as_bytes(), &value, 0)
                    .unwrap_or_else(|err| panic!("{ctx}: setxattr: {err:?}"));
                self.model
                    .file_mut(path)
                    .xattrs
                    .insert(name.as_bytes().to_vec(), value);
            }
            Op::RemoveXattr { path, name } => {
                let ino = resolve(&e, path);
                let res = e.removexattr(ino, name.as_bytes());
                let x = &mut self.model.file_mut(path).xattrs;
                let allowed: &[&str] = if x.contains_key(name.as_bytes()) {
                    &[]
                } else {
                    &["NoAttr"]
                };
                if expect(res, allowed) {
                    x.remove(name.as_bytes());
                }
            }
            Op::Unlink { path } => {
                let (dir, name) = split(path);
                let parent = resolve(&e, dir);
                let res = e.unlink(parent, name.as_bytes());
                let allowed: &[&str] = if self.model.is_dir(path) {
                    &["IsDir"]
                } else {
                    &[]
                };
                if expect(res, allowed) {
                    self.model.remove(path);
                }
            }
            Op::Rmdir { path } => {
                let (dir, name) = split(path);
                let parent = resolve(&e, dir);
                let res = e.rmdir(parent, name.as_bytes());
                let allowed: &[&str] = if !self.model.is_dir(path) {
                    &["NotDir"]
                } else if !self.model.children(path).is_empty() {
                    &["NotEmpty"]
                } else {
                    &[]
                };
                if expect(res, allowed) {
                    self.model.remove(path);
                }
            }
            Op::Rename { from, to } => {
                let (fdir, fname) = split(from);
                let (tdir, tname) = split(to);
                let src_dir = self.model.is_dir(from);
                // Renaming onto another name of the same file does nothing.
                let same = from == to
                    || matches!(
                        (self.model.nodes.get(from), self.model.nodes.get(to)),
                        (Some(Node::File(a)), Some(Node::File(b))) if a == b
                    );
                let mut allowed: Vec<&str> = Vec::new();
                if !same {
                    if src_dir && within(to, from) {
                        allowed.push("Invalid");
                    }
                    match self.model.nodes.get(to) {
                        Some(Node::Dir) if !src_dir => allowed.push("IsDir"),
                        Some(Node::File(_)) if src_dir => allowed.push("NotDir"),
                        Some(Node::Dir) if !self.model.children(to).is_empty() => {
                            allowed.push("NotEmpty")
                        }
                        _ => {}
                    }
                }
                let fparent = resolve(&e, fdir);
                let tparent = resolve(&e, tdir);
                let res = e.rename(
                    fparent,
                    fname.as_bytes(),
                    tparent,
                    tname.as_bytes(),
                    RenameFlags::default(),
                );
                if expect(res, &allowed) && !same {
                    self.model.rename(from, to);
                }
            }
            Op::UnlinkKeepOpen { path } => {
                let (dir, name) = split(path);
                let parent = resolve(&e, dir);
                let ino = resolve(&e, path);
                e.open(ino).expect("open");
                e.unlink(parent, name.as_bytes())
                    .unwrap_or_else(|err| panic!("{ctx}: unlink of an open file: {err:?}"));
                let file = self
                    .model
                    .remove(path)
                    .unwrap_or_else(|| panic!("model: held {path} had other names"));
                self.held.push((ino, file.data, m));
            }
            Op::ReleaseHeld { seed } => {
                let (ino, mut data, hm) = self.held.remove(0);
                let e = fs.backend(hm);
                self.tmpfiles.remove(&ino);
                let extra = pattern(*seed, 100);
                let off = data.len() as u64 / 2;
                e.write(ino, off, &extra, false)
                    .unwrap_or_else(|err| panic!("{ctx}: write to an unlinked file: {err:?}"));
                let end = off as usize + extra.len();
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[off as usize..end].copy_from_slice(&extra);
                assert!(
                    read_all(&*e, ino) == data,
                    "{ctx}: open-unlinked {ino} lost its contents"
                );
                e.flush(ino).expect("flush at close");
                e.release(ino).expect("release");
                fs.settle();
                match e.getattr(ino) {
                    Err(EngineError::NotFound) => {}
                    other => panic!("{ctx}: {ino} outlived its last release: {other:?}"),
                }
            }
            Op::Tmpfile { dir, len, seed } => {
                let parent = resolve(&e, dir);
                let (a, _) = e
                    .tmpfile(CTX, parent, 0o644, true)
                    .unwrap_or_else(|err| panic!("{ctx}: tmpfile: {err:?}"));
                assert_eq!(a.nlink, 0, "{ctx}: a tmpfile with a link");
                // The driver keeps no kernel reference (see `compare`).
                e.forget(a.ino, 1);
                let data = pattern(*seed, *len);
                if !data.is_empty() {
                    e.write(a.ino, 0, &data, false)
                        .unwrap_or_else(|err| panic!("{ctx}: write to a tmpfile: {err:?}"));
                }
                self.held.push((a.ino, data, m));
                self.tmpfiles.insert(a.ino);
            }
            Op::LinkHeld { to } => {
                let i = self
                    .held
                    .iter()
                    .position(|(ino, _, _)| self.tmpfiles.contains(ino))
                    .expect("a held tmpfile");
                let ino = self.held[i].0;
                let e = fs.backend(self.held[i].2);
                let (dir, name) = split(to);
                let parent = resolve(&e, dir);
                let res = e.link(ino, parent, name.as_bytes()).map(|a| {
                    assert_eq!(a.ino, ino, "{ctx}: link answered another inode");
                    assert_eq!(a.nlink, 1, "{ctx}: a linked tmpfile's link count");
                    e.forget(a.ino, 1);
                });
                let allowed = self.model.may_exist(to);
                if expect(res, allowed) {
                    let (_, data, _) = self.held.remove(i);
                    self.tmpfiles.remove(&ino);
                    self.tmpfiles_linked += 1;
                    self.model.create(to);
                    self.model.file_mut(to).data = data;
                    e.flush(ino).expect("flush at close");
                    e.release(ino).expect("release of a linked tmpfile");
                    assert!(
                        e.getattr(ino).is_ok(),
                        "{ctx}: a linked tmpfile freed at close"
                    );
                }
            }
            Op::Fsync => e
                .fsync(Ino::ROOT)
                .unwrap_or_else(|err| panic!("{ctx}: fsync: {err:?}")),
            Op::Remount => {
                let gone = fs.remount(&mut self.rng);
                self.forget_held(fs, &gone, ctx);
            }
        }
    }

    /// After a remount of `mounts`: their held handles are gone, and so
    /// are their files.
    pub fn forget_held(&mut self, fs: &dyn Target, mounts: &[usize], ctx: &str) {
        let (gone, kept): (Vec<_>, Vec<_>) = self
            .held
            .drain(..)
            .partition(|(_, _, m)| mounts.contains(m));
        self.held = kept;
        let e = fs.backend(0);
        for (ino, _, _) in gone {
            self.tmpfiles.remove(&ino);
            match e.getattr(ino) {
                Err(EngineError::NotFound) => {}
                other => panic!("{ctx}: open-unlinked {ino} survived a remount: {other:?}"),
            }
        }
    }

    /// After a crash: a held file either is gone (its unlink was durable and
    /// recovery reclaimed it) or is back with a name (the unlink was lost);
    /// `compare_tree` checks the latter against the model. A held tmpfile
    /// never had a name: it must be gone.
    pub fn drop_held_after_crash(&mut self, fs: &dyn Target, ctx: &str) {
        let tmpfiles = std::mem::take(&mut self.tmpfiles);
        let e = fs.backend(0);
        for (ino, _, _) in self.held.drain(..) {
            match e.getattr(ino) {
                Err(EngineError::NotFound) => {}
                // A tmpfile never had a name to get back.
                Ok(a) if a.nlink > 0 && !tmpfiles.contains(&ino) => {}
                other => panic!("{ctx}: open-unlinked {ino} survived recovery: {other:?}"),
            }
        }
    }

    /// Compares the tree as every mount sees it, and the held files, with
    /// the model; then the backend's own bounds.
    pub fn compare(&self, fs: &dyn Target, ctx: &str) {
        for m in 0..fs.mounts() {
            let e = fs.backend(m);
            let ctx = if fs.mounts() > 1 {
                format!("{ctx} (mount {m})")
            } else {
                ctx.to_string()
            };
            compare_tree(&*e, &self.model, &ctx);
        }
        let mut held = vec![0u64; fs.mounts()];
        for (ino, data, m) in &self.held {
            held[*m] += 1;
            let e = fs.backend(*m);
            let a = e
                .getattr(*ino)
                .unwrap_or_else(|err| panic!("{ctx}: held {ino}: {err:?}"));
            assert_eq!(a.nlink, 0, "{ctx}: held {ino} has links");
            assert!(
                read_all(&*e, *ino) == *data,
                "{ctx}: held {ino} contents differ"
            );
        }
        fs.check(&held, ctx);
    }
}

/// Compares the engine's tree with `model`: names, kinds, inode numbers
/// (every name of a file is one inode, distinct files distinct inodes),
/// link counts, sizes, contents and xattrs.
pub fn compare_tree(fs: &dyn Backend, model: &Model, ctx: &str) {
    let mut inos: BTreeMap<FileId, Ino> = BTreeMap::new();
    walk(fs, Ino::ROOT, "", model, &mut inos, ctx);
    let distinct: std::collections::BTreeSet<Ino> = inos.values().copied().collect();
    assert_eq!(
        distinct.len(),
        inos.len(),
        "{ctx}: distinct files share an inode"
    );
    for (id, ino) in inos {
        let file = &model.files[&id];
        let a = fs
            .getattr(ino)
            .unwrap_or_else(|err| panic!("{ctx}: getattr {ino}: {err:?}"));
        assert_eq!(a.nlink as usize, model.nlink(id), "{ctx}: nlink of {ino}");
        assert_eq!(a.size, file.data.len() as u64, "{ctx}: size of {ino}");
        let got = read_all(fs, ino);
        if got != file.data {
            let i = got.iter().zip(&file.data).position(|(a, b)| a != b);
            panic!(
                "{ctx}: {ino} differs first at byte {i:?} of {}",
                file.data.len()
            );
        }
        let list = fs.listxattr(ino).unwrap();
        let mut want_list = Vec::new();
        for (k, v) in &file.xattrs {
            want_list.extend_from_slice(k);
            want_list.push(0);
            assert_eq!(
                fs.getxattr(ino, k).ok().as_ref(),
                Some(v),
                "{ctx}: xattr {} of {ino}",
                String::from_utf8_lossy(k)
            );
        }
        assert_eq!(list, want_list, "{ctx}: xattr names of {ino}");
    }
}

fn walk(
    fs: &dyn Backend,
    dir: Ino,
    path: &str,
    model: &Model,
    inos: &mut BTreeMap<FileId, Ino>,
    ctx: &str,
) {
    let got = names(fs, dir);
    let want = model.children(path);
    let kind = |n: Node| match n {
        Node::Dir => FileKind::Directory,
        Node::File(_) => FileKind::Regular,
    };
    assert_eq!(
        got.iter()
            .map(|(n, _, k)| (String::from_utf8_lossy(n).into_owned(), *k))
            .collect::<Vec<_>>(),
        want.iter()
            .map(|(n, node)| (n.to_string(), kind(*node)))
            .collect::<Vec<_>>(),
        "{ctx}: listing of /{path}"
    );
    let mut subdirs = 0;
    for ((name, ino, _), (_, node)) in got.iter().zip(&want) {
        let child = join(path, &String::from_utf8_lossy(name));
        match crate::ino(fs, dir, name) {
            Ok(i) if i == *ino => {}
            other => panic!("{ctx}: lookup of /{child} gave {other:?}, readdir said {ino}"),
        }
        match node {
            Node::Dir => {
                subdirs += 1;
                walk(fs, *ino, &child, model, inos, ctx);
            }
            Node::File(id) => {
                let known = *inos.entry(*id).or_insert(*ino);
                assert_eq!(
                    known, *ino,
                    "{ctx}: /{child} is not the inode of its other names"
                );
            }
        }
    }
    let a = fs
        .getattr(dir)
        .unwrap_or_else(|err| panic!("{ctx}: getattr /{path}: {err:?}"));
    assert_eq!(a.nlink, 2 + subdirs, "{ctx}: nlink of directory /{path}");
}

/// Seeds to run: `var` in the environment names one seed to replay;
/// otherwise `0..count`.
pub fn seeds(var: &str, count: u64) -> Vec<u64> {
    match std::env::var(var) {
        Ok(s) => vec![s
            .parse()
            .unwrap_or_else(|_| panic!("{var}={s} is not a seed"))],
        Err(_) => (0..count).collect(),
    }
}
