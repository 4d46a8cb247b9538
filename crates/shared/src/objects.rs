//! File data in object storage, through the `object_store` crate: objects
//! are written once, read whole and checked against the checksum their
//! slice records (a damaged or cut object is corruption naming the file,
//! never data), and deleted in batches.
//!
//! Object names: `<volume>/<ino:016x>/<chunk:08x>/<session:016x>-<seq:016x>`:
//! who wrote it and in which chunk of which file it belongs, so that gc can
//! check one chunk record per object.
//!
//! The read cache (`ObjCache`) holds whole objects in memory, in LRU order,
//! at most `max_bytes`.

use crate::schema::{ObjId, ObjRef};
use crate::stats::Stats;
use bytes::Bytes;
use churnfs_kv::etcd::block_on_within;
use churnfs_vfs::{EngineError, Ino, Result, StoreError};
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Objects uploaded or deleted at once.
const PARALLEL: usize = 8;

/// An object as the store lists it.
#[derive(Clone, Debug)]
pub struct Listed {
    pub ino: Ino,
    pub chunk: u64,
    pub id: ObjId,
    pub size: u64,
    /// When the store finished writing it (the store's clock).
    pub modified: chrono::DateTime<chrono::Utc>,
}

/// Where a volume's file data lives.
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    volume: String,
    deadline: Duration,
    stats: Arc<Stats>,
    url: String,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> EngineError {
    EngineError::Store(StoreError::Unavailable(format!(
        "object store: {what}: {e}"
    )))
}

/// Parses a data URL into a store: `s3://BUCKET[/PREFIX][?endpoint=URL&region=R]`
/// (any S3-compatible service; credentials from the environment or the
/// shared credentials file, see `s3_store`), `file:///ABSOLUTE/PATH` (a
/// directory on this machine, shared by its mounts) or `memory://NAME` (one
/// process: simulation and tests; every mount of the process naming NAME
/// shares it).
pub fn open_store(url: &str) -> std::result::Result<Arc<dyn ObjectStore>, String> {
    if url.starts_with("s3://") {
        return s3_store(url);
    }
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(format!(
                "data URL {url:?} needs an absolute path (file:///…)"
            ));
        }
        std::fs::create_dir_all(path).map_err(|e| format!("data directory {path}: {e}"))?;
        let fs = object_store::local::LocalFileSystem::new_with_prefix(path)
            .map_err(|e| format!("data directory {path}: {e}"))?
            // fsync returns after the objects are on disk (the durability
            // contract), so every put syncs the file and its directory.
            .with_fsync(true);
        return Ok(Arc::new(fs));
    }
    if url.starts_with("memory://") {
        type Stores = Mutex<HashMap<String, Arc<object_store::memory::InMemory>>>;
        static MEMORY: OnceLock<Stores> = OnceLock::new();
        let mut m = MEMORY
            .get_or_init(Stores::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let s = m.entry(url.to_string()).or_default().clone();
        return Ok(s);
    }
    Err(format!(
        "data URL {url:?} is not one churnfs serves (s3://BUCKET/PREFIX?endpoint=URL or file:///PATH)"
    ))
}

/// An S3 data URL taken apart.
#[derive(Debug, PartialEq, Eq)]
struct S3Url {
    bucket: String,
    prefix: String,
    endpoint: Option<String>,
    region: Option<String>,
}

fn parse_s3_url(url: &str) -> std::result::Result<S3Url, String> {
    let rest = url.strip_prefix("s3://").unwrap_or(url);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
    if bucket.is_empty() {
        return Err(format!(
            "data URL {url:?} names no bucket (s3://BUCKET/PREFIX)"
        ));
    }
    let mut u = S3Url {
        bucket: bucket.to_string(),
        prefix: prefix.trim_matches('/').to_string(),
        endpoint: None,
        region: None,
    };
    for kv in query.split('&').filter(|p| !p.is_empty()) {
        match kv.split_once('=') {
            Some(("endpoint", v)) if v.starts_with("http://") || v.starts_with("https://") => {
                u.endpoint = Some(v.to_string())
            }
            Some(("region", v)) if !v.is_empty() => u.region = Some(v.to_string()),
            Some(("access_key_id" | "secret_access_key", _)) => {
                return Err(format!(
                    "data URL {url:?} carries a credential: give it in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the credentials file, never on the command line"
                ))
            }
            _ => {
                return Err(format!(
                    "{kv:?} in data URL {url:?} is not endpoint=http(s)://HOST:PORT or region=NAME"
                ))
            }
        }
    }
    Ok(u)
}

/// Keys from an AWS shared credentials file (`$AWS_SHARED_CREDENTIALS_FILE`
/// or `~/.aws/credentials`), profile `$AWS_PROFILE` or `default`.
fn credentials_file() -> Option<(String, String, Option<String>)> {
    let path = match std::env::var_os("AWS_SHARED_CREDENTIALS_FILE") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".aws/credentials"),
    };
    let ini = ini::Ini::load_from_file(&path).ok()?;
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let s = ini.section(Some(profile.as_str()))?;
    Some((
        s.get("aws_access_key_id")?.to_string(),
        s.get("aws_secret_access_key")?.to_string(),
        s.get("aws_session_token").map(str::to_string),
    ))
}

/// An S3 store. Credentials come from `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY` (and the other `AWS_*` variables the
/// `object_store` crate reads), else from the shared credentials file; with
/// neither, requests go unsigned (a server that allows anonymous access).
/// Never from instance metadata: churnfs reaches no address it was not
/// given. Retries are the crate's, cut short by each call's deadline.
fn s3_store(url: &str) -> std::result::Result<Arc<dyn ObjectStore>, String> {
    use object_store::aws::AmazonS3Builder;
    let u = parse_s3_url(url)?;
    let mut b = AmazonS3Builder::from_env()
        .with_bucket_name(&u.bucket)
        .with_region(u.region.clone().unwrap_or_else(|| {
            std::env::var("AWS_REGION")
                .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|_| "us-east-1".into())
        }))
        .with_client_options(
            object_store::ClientOptions::new()
                .with_connect_timeout(Duration::from_secs(5))
                .with_timeout(Duration::from_secs(60)),
        );
    if let Some(e) = &u.endpoint {
        b = b
            .with_endpoint(e)
            .with_allow_http(e.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
        match credentials_file() {
            Some((id, secret, token)) => {
                b = b.with_access_key_id(id).with_secret_access_key(secret);
                if let Some(t) = token {
                    b = b.with_token(t);
                }
            }
            None => b = b.with_skip_signature(true),
        }
    }
    let s3 = b.build().map_err(|e| format!("data URL {url:?}: {e}"))?;
    if u.prefix.is_empty() {
        Ok(Arc::new(s3))
    } else {
        Ok(Arc::new(object_store::prefix::PrefixStore::new(
            s3,
            u.prefix.as_str(),
        )))
    }
}

impl Blobs {
    pub fn new(
        store: Arc<dyn ObjectStore>,
        url: &str,
        volume: &str,
        deadline: Duration,
        stats: Arc<Stats>,
    ) -> Blobs {
        Blobs {
            store,
            volume: volume.to_string(),
            deadline,
            stats,
            url: url.to_string(),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// An object's name.
    pub fn path(&self, ino: Ino, chunk: u64, id: ObjId) -> Path {
        Path::from(format!(
            "{}/{:016x}/{:08x}/{:016x}-{:016x}",
            self.volume, ino.0, chunk, id.session, id.seq
        ))
    }

    /// Every object of the volume. A scan: only for gc and fsck.
    pub fn list(&self) -> Result<Vec<Listed>> {
        let store = self.store.clone();
        let prefix = Path::from(self.volume.clone());
        let metas = self.run("list", async move {
            let mut s = store.list(Some(&prefix));
            let mut out = Vec::new();
            while let Some(m) = s.next().await {
                out.push(m?);
            }
            Ok(out)
        })?;
        let mut out = Vec::with_capacity(metas.len());
        for m in metas {
            let parts: Vec<String> = m.location.parts().map(|p| p.as_ref().to_string()).collect();
            let parsed = (|| {
                if parts.len() != 4 {
                    return None;
                }
                let ino = u64::from_str_radix(&parts[1], 16).ok()?;
                let chunk = u64::from_str_radix(&parts[2], 16).ok()?;
                let (s, q) = parts[3].split_once('-')?;
                let id = ObjId {
                    session: u64::from_str_radix(s, 16).ok()?,
                    seq: u64::from_str_radix(q, 16).ok()?,
                };
                Some(Listed {
                    ino: Ino(ino),
                    chunk,
                    id,
                    size: m.size,
                    modified: m.last_modified,
                })
            })();
            match parsed {
                Some(p) => out.push(p),
                None => tracing::warn!("object {} is not one churnfs wrote", m.location),
            }
        }
        Ok(out)
    }

    fn run<T: Send>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = object_store::Result<T>> + Send,
    ) -> Result<T> {
        let deadline = self.deadline;
        let r = block_on_within(deadline, f);
        match r {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => {
                Stats::inc(&self.stats.object_errors);
                Err(unavailable(what, e))
            }
            None => {
                Stats::inc(&self.stats.object_errors);
                Err(unavailable(what, format!("no answer within {deadline:?}")))
            }
        }
    }

    /// Uploads objects, several at once; returns once every one is stored.
    pub fn put_many(&self, objs: Vec<(Path, Bytes)>) -> Result<()> {
        if objs.is_empty() {
            return Ok(());
        }
        let n = objs.len() as u64;
        let bytes: u64 = objs.iter().map(|(_, b)| b.len() as u64).sum();
        let store = self.store.clone();
        self.run("put", async move {
            let mut s = futures::stream::iter(objs)
                .map(|(p, b)| {
                    let store = store.clone();
                    async move { store.put(&p, PutPayload::from(b)).await }
                })
                .buffer_unordered(PARALLEL);
            while let Some(r) = s.next().await {
                r?;
            }
            Ok(())
        })?;
        Stats::add(&self.stats.objects_put, n);
        Stats::add(&self.stats.object_bytes_put, bytes);
        Ok(())
    }

    /// Reads a whole object and checks it against `r`.
    pub fn get(&self, ino: Ino, chunk: u64, r: &ObjRef) -> Result<Bytes> {
        let p = self.path(ino, chunk, r.id);
        let store = self.store.clone();
        let got = self.run("get", async move {
            match store.get(&p).await {
                Ok(g) => g.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        let Some(b) = got else {
            Stats::inc(&self.stats.corrupt_objects);
            return Err(EngineError::corrupt(
                Some(ino),
                format!("object {} of chunk {chunk} is missing", fmt_id(r.id)),
            ));
        };
        Stats::inc(&self.stats.objects_got);
        Stats::add(&self.stats.object_bytes_got, b.len() as u64);
        if b.len() as u64 != r.size as u64 || xxhash_rust::xxh3::xxh3_64(&b) != r.sum {
            Stats::inc(&self.stats.corrupt_objects);
            return Err(EngineError::corrupt(
                Some(ino),
                format!(
                    "object {} of chunk {chunk} is damaged ({} bytes, {} expected, or its checksum differs)",
                    fmt_id(r.id),
                    b.len(),
                    r.size
                ),
            ));
        }
        Ok(b)
    }

    /// Deletes objects with the store's bulk delete where it has one (S3's
    /// DeleteObjects, up to 1,000 keys a request); ones already gone count
    /// as deleted.
    pub fn delete_many(&self, paths: Vec<Path>) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        let n = paths.len() as u64;
        let store = self.store.clone();
        self.run("delete", async move {
            let locations = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
            let mut s = store.delete_stream(locations);
            while let Some(r) = s.next().await {
                match r {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })?;
        Stats::inc(&self.stats.object_delete_batches);
        Stats::add(&self.stats.objects_deleted, n);
        Ok(())
    }
}

pub fn fmt_id(id: ObjId) -> String {
    format!("{:016x}-{:016x}", id.session, id.seq)
}

/// Whole objects kept in memory for reads, in LRU order, at most
/// `max_bytes` (`object_cache_bytes`).
pub struct ObjCache {
    inner: Mutex<CacheInner>,
    max_bytes: usize,
    stats: Arc<Stats>,
}

struct CacheInner {
    lru: lru::LruCache<ObjId, Bytes>,
    bytes: usize,
}

impl ObjCache {
    pub fn new(max_bytes: usize, stats: Arc<Stats>) -> ObjCache {
        Stats::set(&stats.object_cache_bytes_max, max_bytes as u64);
        ObjCache {
            inner: Mutex::new(CacheInner {
                lru: lru::LruCache::unbounded(),
                bytes: 0,
            }),
            max_bytes,
            stats,
        }
    }

    pub fn get(&self, id: ObjId) -> Option<Bytes> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let hit = g.lru.get(&id).cloned();
        Stats::inc(if hit.is_some() {
            &self.stats.object_cache_hits
        } else {
            &self.stats.object_cache_misses
        });
        hit
    }

    pub fn put(&self, id: ObjId, b: Bytes) {
        if b.len() > self.max_bytes {
            return;
        }
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let n = b.len();
        if let Some(old) = g.lru.put(id, b) {
            g.bytes -= old.len();
        }
        g.bytes += n;
        while g.bytes > self.max_bytes {
            match g.lru.pop_lru() {
                Some((_, old)) => g.bytes -= old.len(),
                None => break,
            }
        }
        assert!(g.bytes <= self.max_bytes, "object cache over its bound");
        Stats::set(&self.stats.object_cache_bytes, g.bytes as u64);
    }

    pub fn forget(&self, ids: &[ObjId]) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for id in ids {
            if let Some(old) = g.lru.pop(id) {
                g.bytes -= old.len();
            }
        }
        Stats::set(&self.stats.object_cache_bytes, g.bytes as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_to_its_bound_in_lru_order() {
        let stats = Arc::new(Stats::default());
        let c = ObjCache::new(10, stats.clone());
        let id = |s| ObjId { session: 1, seq: s };
        c.put(id(1), Bytes::from(vec![0; 4]));
        c.put(id(2), Bytes::from(vec![0; 4]));
        assert!(c.get(id(1)).is_some());
        c.put(id(3), Bytes::from(vec![0; 4]));
        assert!(c.get(id(2)).is_none(), "the least recently used goes first");
        assert!(c.get(id(1)).is_some() && c.get(id(3)).is_some());
        assert_eq!(
            stats
                .object_cache_bytes
                .load(std::sync::atomic::Ordering::Relaxed),
            8
        );
        c.put(id(4), Bytes::from(vec![0; 11]));
        assert!(
            c.get(id(4)).is_none(),
            "an object over the bound is not kept"
        );
    }

    #[test]
    fn s3_urls_parse_or_say_what_is_wrong() {
        let u = parse_s3_url("s3://bkt/a/b/?endpoint=http://127.0.0.1:8333&region=eu-1").unwrap();
        assert_eq!(
            u,
            S3Url {
                bucket: "bkt".into(),
                prefix: "a/b".into(),
                endpoint: Some("http://127.0.0.1:8333".into()),
                region: Some("eu-1".into()),
            }
        );
        assert_eq!(parse_s3_url("s3://bkt").unwrap().prefix, "");
        assert!(parse_s3_url("s3:///x").unwrap_err().contains("no bucket"));
        assert!(parse_s3_url("s3://b?endpoint=ftp://h")
            .unwrap_err()
            .contains("endpoint=http"));
        assert!(parse_s3_url("s3://b?secret_access_key=x")
            .unwrap_err()
            .contains("never on the command line"));
        assert!(open_store("gs://b")
            .unwrap_err()
            .contains("not one churnfs serves"));
    }

    #[test]
    fn a_damaged_object_is_corruption_naming_the_file() {
        let stats = Arc::new(Stats::default());
        let b = Blobs::new(
            open_store("memory://").unwrap(),
            "memory://",
            "v",
            Duration::from_secs(5),
            stats,
        );
        let id = ObjId { session: 1, seq: 1 };
        let data = b"hello".to_vec();
        b.put_many(vec![(b.path(Ino(9), 0, id), Bytes::from(data.clone()))])
            .unwrap();
        let good = ObjRef {
            id,
            size: 5,
            sum: xxhash_rust::xxh3::xxh3_64(&data),
        };
        assert_eq!(&b.get(Ino(9), 0, &good).unwrap()[..], b"hello");
        let bad = ObjRef { sum: 1, ..good };
        match b.get(Ino(9), 0, &bad) {
            Err(EngineError::Corrupt { ino, .. }) => assert_eq!(ino, Some(Ino(9))),
            other => panic!("a damaged object read as {other:?}"),
        }
        b.delete_many(vec![b.path(Ino(9), 0, id)]).unwrap();
        b.delete_many(vec![b.path(Ino(9), 0, id)]).unwrap();
        assert!(matches!(
            b.get(Ino(9), 0, &good),
            Err(EngineError::Corrupt { .. })
        ));
        assert!(b.list().unwrap().is_empty());
    }
}
