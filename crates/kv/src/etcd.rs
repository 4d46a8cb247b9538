//! `EtcdKv`: the engine trait on an etcd cluster (v3 API, 3.4 or later),
//! through the `etcd-client` crate. Calls block the calling thread on a
//! shared tokio runtime (`runtime`), each bounded by the request deadline.
//!
//! Mapping (docs/design.md §15):
//! - a version is the key's `mod_revision`; `get_many` is one read-only
//!   transaction (one snapshot; over 128 keys, later parts read at the
//!   first part's revision);
//! - `Cond::Rev` is `mod_revision == r`, `Exists` is `version > 0`,
//!   `Absent` is `version == 0`, and `Empty` is `version == 0` over a
//!   range, which etcd checks against every key in it (none: true);
//! - leases are etcd leases; a watch is an etcd watch with progress
//!   notifications, forwarded from a runtime task through a bounded queue.

use crate::{
    Cond, Entry, Event, KvError, LeaseId, Limits, MetaKv, Op, Outcome, Result, Rev, Txn, WatchItem,
    WatchStream,
};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, PutOptions,
    TxnOp, TxnOpResponse, WatchOptions,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Items a watch may queue before its reader takes them; beyond it the
/// forwarding task waits (etcd then buffers on its side).
pub const WATCH_QUEUE_MAX: usize = 1024;

/// The runtime every blocking call runs on: two worker threads, shared by
/// the metadata engine and the object store clients of one process.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("churnfs-io")
            .enable_all()
            .build()
            .expect("cannot start the I/O runtime")
    })
}

/// Runs `f` on the shared runtime from a thread outside it; None when it
/// did not finish within `deadline`.
pub fn block_on_within<T: Send>(
    deadline: Duration,
    f: impl Future<Output = T> + Send,
) -> Option<T> {
    runtime().block_on(async { tokio::time::timeout(deadline, f).await.ok() })
}

/// Runs `f` on the shared runtime from a thread outside it, at most
/// `deadline`.
pub fn block_on<T>(deadline: Duration, f: impl Future<Output = Result<T>> + Send) -> Result<T>
where
    T: Send,
{
    runtime().block_on(async {
        match tokio::time::timeout(deadline, f).await {
            Ok(r) => r,
            Err(_) => Err(KvError::Unavailable(format!(
                "no answer within {deadline:?}"
            ))),
        }
    })
}

/// An etcd cluster.
pub struct EtcdKv {
    client: Client,
    deadline: Duration,
    endpoints: Vec<String>,
    /// TTLs of the leases this process granted (at most 16).
    granted: Mutex<HashMap<LeaseId, Duration>>,
}

/// An etcd client error as the trait's. What is not a refusal of the
/// request itself (limits, space, an expired lease, a compacted revision,
/// an invalid argument) counts as unavailability, which callers retry
/// until their deadline: a member that dies mid-request answers with
/// transport errors of many shapes (reset, broken pipe, h2 errors), and
/// every commit is safe to retry.
fn err(e: etcd_client::Error) -> KvError {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(s) => {
            let msg = s.message().to_string();
            match s.code() {
                tonic::Code::ResourceExhausted if msg.contains("space") => KvError::NoSpace(msg),
                tonic::Code::InvalidArgument
                    if msg.contains("too many operations") || msg.contains("too large") =>
                {
                    KvError::TooLarge(msg)
                }
                tonic::Code::NotFound if msg.contains("lease") => KvError::LeaseExpired(0),
                tonic::Code::OutOfRange if msg.contains("compacted") => KvError::Compacted(0),
                tonic::Code::InvalidArgument
                | tonic::Code::PermissionDenied
                | tonic::Code::Unauthenticated
                | tonic::Code::Unimplemented => KvError::Engine(format!("{:?}: {msg}", s.code())),
                _ => KvError::Unavailable(format!("{:?}: {msg}", s.code())),
            }
        }
        E::LeaseKeepAliveError(m) if m.contains("not found") || m.contains("expired") => {
            KvError::LeaseExpired(0)
        }
        E::InvalidArgs(m) => KvError::Engine(m),
        E::InvalidUri(u) => KvError::Engine(u.to_string()),
        other => KvError::Unavailable(other.to_string()),
    }
}

fn entry(kv: &etcd_client::KeyValue) -> Entry {
    Entry {
        key: kv.key().to_vec(),
        value: kv.value().to_vec(),
        rev: kv.mod_revision() as Rev,
    }
}

fn compare(c: &Cond) -> Compare {
    match c {
        Cond::Rev(k, r) => Compare::mod_revision(k.clone(), CompareOp::Equal, *r as i64),
        Cond::Exists(k) => Compare::version(k.clone(), CompareOp::Greater, 0),
        Cond::Absent(k) => Compare::version(k.clone(), CompareOp::Equal, 0),
        Cond::Empty(a, b) => Compare::version(a.clone(), CompareOp::Equal, 0).with_range(b.clone()),
    }
}

fn txn_op(o: &Op) -> TxnOp {
    match o {
        Op::Put { key, value, lease } => TxnOp::put(
            key.clone(),
            value.clone(),
            lease.map(|l| PutOptions::new().with_lease(l)),
        ),
        Op::Delete(k) => TxnOp::delete(k.clone(), None),
        Op::DeleteRange { start, end } => TxnOp::delete(
            start.clone(),
            Some(DeleteOptions::new().with_range(end.clone())),
        ),
    }
}

impl EtcdKv {
    /// Connects to `endpoints` (`host:port`) and checks that the cluster
    /// answers within `connect`. Each later request gives up after
    /// `request` (callers retry, through another member if one is gone:
    /// keep it well below their own deadline).
    pub fn connect(endpoints: &[String], connect: Duration, request: Duration) -> Result<EtcdKv> {
        let eps: Vec<String> = endpoints
            .iter()
            .map(|e| {
                if e.contains("://") {
                    e.clone()
                } else {
                    format!("http://{e}")
                }
            })
            .collect();
        let opts = ConnectOptions::new()
            .with_connect_timeout(connect)
            .with_timeout(request)
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
        let e2 = eps.clone();
        let client = block_on(connect, async move {
            Client::connect(e2, Some(opts)).await.map_err(err)
        })?;
        let deadline = request;
        let kv = EtcdKv {
            client,
            deadline,
            endpoints: endpoints.to_vec(),
            granted: Mutex::new(HashMap::new()),
        };
        // Connecting is lazy: a read says whether anyone answers. One sent
        // to a member that is down or still starting fails at once (a
        // refused connection), and the next may go to another: tried
        // until `connect` has passed.
        let until = std::time::Instant::now() + connect;
        loop {
            match kv.get_many(&[b"churnfs-probe"]) {
                Ok(_) => return Ok(kv),
                Err(KvError::Unavailable(_)) if std::time::Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    fn call<T: Send, F>(&self, f: impl FnOnce(Client) -> F) -> Result<T>
    where
        F: Future<Output = Result<T>> + Send,
    {
        block_on(self.deadline, f(self.client.clone()))
    }
}

impl MetaKv for EtcdKv {
    fn get_many(&self, keys: &[&[u8]]) -> Result<(Vec<Option<Entry>>, Rev)> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        let max = self.limits().max_ops;
        self.call(|mut c| async move {
            let mut out = Vec::with_capacity(keys.len());
            let mut at: Option<i64> = None;
            for part in keys.chunks(max.max(1)) {
                let ops: Vec<TxnOp> = part
                    .iter()
                    .map(|k| {
                        let o = at.map(|r| GetOptions::new().with_revision(r));
                        TxnOp::get(k.clone(), o)
                    })
                    .collect();
                let r = c
                    .txn(etcd_client::Txn::new().and_then(ops))
                    .await
                    .map_err(err)?;
                let rev = r.header().map(|h| h.revision()).unwrap_or(0);
                at.get_or_insert(rev);
                for resp in r.op_responses() {
                    match resp {
                        TxnOpResponse::Get(g) => out.push(g.kvs().first().map(entry)),
                        _ => return Err(KvError::Engine("a read answered a write".into())),
                    }
                }
            }
            if out.len() != keys.len() {
                return Err(KvError::Engine(format!(
                    "{} answers to {} reads",
                    out.len(),
                    keys.len()
                )));
            }
            Ok((out, at.unwrap_or(0) as Rev))
        })
    }

    fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<(Vec<Entry>, Rev)> {
        let (start, end) = (start.to_vec(), end.to_vec());
        self.call(|mut c| async move {
            let opts = GetOptions::new()
                .with_range(end)
                .with_limit(limit.min(i64::MAX as usize) as i64);
            let r = c.get(start, Some(opts)).await.map_err(err)?;
            let rev = r.header().map(|h| h.revision()).unwrap_or(0) as Rev;
            Ok((r.kvs().iter().map(entry).collect(), rev))
        })
    }

    fn commit(&self, txn: &Txn) -> Result<Outcome> {
        let limits = self.limits();
        if txn.conds.len() > limits.max_ops || txn.ops.len() > limits.max_ops {
            return Err(KvError::TooLarge(format!(
                "{} conditions, {} writes",
                txn.conds.len(),
                txn.ops.len()
            )));
        }
        let t = etcd_client::Txn::new()
            .when(txn.conds.iter().map(compare).collect::<Vec<_>>())
            .and_then(txn.ops.iter().map(txn_op).collect::<Vec<_>>());
        self.call(|mut c| async move {
            let r = c.txn(t).await.map_err(err)?;
            if r.succeeded() {
                Ok(Outcome::Committed(
                    r.header().map(|h| h.revision()).unwrap_or(0) as Rev,
                ))
            } else {
                Ok(Outcome::Failed)
            }
        })
    }

    fn lease_grant(&self, ttl: Duration) -> Result<LeaseId> {
        let secs = ttl.as_secs().max(1) as i64;
        let id = self
            .call(|mut c| async move { Ok(c.lease_grant(secs, None).await.map_err(err)?.id()) })?;
        let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        // The leases of this process: one a mount's session (and the ones
        // it had before, if fenced); kept to the last few.
        if granted.len() >= 16 {
            granted.clear();
        }
        granted.insert(id, Duration::from_secs(secs as u64));
        Ok(id)
    }

    fn lease_keepalive(&self, lease: LeaseId) -> Result<Duration> {
        self.call(|mut c| async move {
            // One renewal: the client sends a keep-alive and reads its
            // answer, which says "not found" once the lease is gone.
            c.lease_keep_alive(lease).await.map_err(|e| match err(e) {
                KvError::LeaseExpired(_) => KvError::LeaseExpired(lease),
                other => other,
            })?;
            Ok(())
        })?;
        let granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        Ok(granted.get(&lease).copied().unwrap_or_default())
    }

    fn lease_revoke(&self, lease: LeaseId) -> Result<()> {
        self.granted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&lease);
        self.call(|mut c| async move {
            match c.lease_revoke(lease).await.map_err(err) {
                Ok(_) | Err(KvError::LeaseExpired(_)) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    fn watch(&self, prefix: &[u8], after: Rev) -> Result<Box<dyn WatchStream>> {
        let prefix = prefix.to_vec();
        let end = crate::prefix_end(&prefix);
        let (tx, rx) = sync_channel::<Result<WatchItem>>(WATCH_QUEUE_MAX);
        let mut stream = self.call(|mut c| async move {
            let opts = WatchOptions::new()
                .with_range(end)
                .with_start_revision(after as i64 + 1)
                .with_progress_notify();
            c.watch(prefix, Some(opts)).await.map_err(err)
        })?;
        runtime().spawn(async move {
            loop {
                let msg = match stream.message().await {
                    Ok(Some(m)) => m,
                    Ok(None) => {
                        let _ = tx.send(Err(KvError::Unavailable("watch ended".into())));
                        return;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(err(e)));
                        return;
                    }
                };
                if msg.canceled() {
                    let e = if msg.compact_revision() > 0 {
                        KvError::Compacted(msg.compact_revision() as Rev)
                    } else {
                        KvError::Unavailable(format!("watch canceled: {}", msg.cancel_reason()))
                    };
                    let _ = tx.send(Err(e));
                    return;
                }
                if msg.created() && msg.events().is_empty() {
                    continue;
                }
                let item = if msg.events().is_empty() {
                    WatchItem::Progress(msg.header().map(|h| h.revision()).unwrap_or(0) as Rev)
                } else {
                    WatchItem::Events(
                        msg.events()
                            .iter()
                            .filter_map(|e| {
                                let kv = e.kv()?;
                                Some(Event {
                                    key: kv.key().to_vec(),
                                    value: (e.event_type() == EventType::Put)
                                        .then(|| kv.value().to_vec()),
                                    rev: kv.mod_revision() as Rev,
                                })
                            })
                            .collect(),
                    )
                };
                // The reader is gone: end the watch (dropping the stream
                // cancels it on the server).
                let sent = tokio::task::block_in_place(|| tx.send(Ok(item)));
                if sent.is_err() {
                    return;
                }
            }
        });
        Ok(Box::new(EtcdWatch { rx }))
    }

    fn limits(&self) -> Limits {
        // etcd's defaults (--max-txn-ops 128, --max-request-bytes 1.5 MiB).
        Limits {
            max_ops: 128,
            max_bytes: 1_572_864,
        }
    }

    fn name(&self) -> &'static str {
        "etcd"
    }
}

struct EtcdWatch {
    rx: Receiver<Result<WatchItem>>,
}

impl WatchStream for EtcdWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchItem>> {
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(item)) => Ok(Some(item)),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(KvError::Unavailable("watch ended".into())),
        }
    }
}
