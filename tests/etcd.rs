//! A real etcd cluster for a test: `members` processes of the `etcd`
//! binary (Debian's etcd-server, installed by scripts/install-deps.sh) on
//! 127.0.0.1 ports picked free, data under a temporary directory. Members
//! can be killed (SIGKILL) and started again; on drop every member still
//! running is stopped by its PID (SIGTERM, then SIGKILL after 5 s) and the
//! data removed.

use std::io::Write;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Member {
    name: String,
    client: u16,
    peer: u16,
    child: Option<Child>,
}

pub struct EtcdCluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
    token: String,
}

/// The etcd binary: $CHURNFS_ETCD or `etcd` on the PATH.
pub fn etcd_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CHURNFS_ETCD") {
        return p.into();
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("etcd"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("etcd is not installed: run scripts/install-deps.sh (Debian package etcd-server)")
    })
}

/// etcdctl: beside the etcd binary, or on the PATH.
pub fn etcdctl_bin() -> PathBuf {
    let beside = etcd_bin().with_file_name("etcdctl");
    if beside.is_file() {
        return beside;
    }
    PathBuf::from("etcdctl")
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

impl EtcdCluster {
    /// Starts `n` members and waits until the cluster takes a write.
    pub fn start(n: usize) -> EtcdCluster {
        let dir = tempfile::Builder::new()
            .prefix("churnfs-etcd-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let members = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client: free_port(),
                peer: free_port(),
                child: None,
            })
            .collect();
        let token = format!(
            "churnfs-test-{}-{}",
            std::process::id(),
            dir.path().display().to_string().len()
        );
        let mut c = EtcdCluster {
            dir,
            members,
            token,
        };
        for i in 0..n {
            c.spawn(i, "new");
        }
        c.wait_ready(Duration::from_secs(60));
        c
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let cluster = self.initial_cluster();
        let m = &self.members[i];
        let data = self.dir.path().join(&m.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))
            .expect("etcd log");
        let client = format!("http://127.0.0.1:{}", m.client);
        let peer = format!("http://127.0.0.1:{}", m.peer);
        let child = Command::new(etcd_bin())
            .arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", &self.token])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// `host:port` of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client))
            .collect()
    }

    /// A volume URL naming every member.
    pub fn url(&self, volume: &str) -> String {
        format!("etcd://{}/{volume}", self.endpoints().join(","))
    }

    /// Puts `value` under `key` with etcdctl (a process of its own: the
    /// test process runs no client, so that no runtime thread of one is
    /// there when it forks the processes it tests).
    pub fn put(&self, key: &[u8], value: &[u8]) -> bool {
        let key = String::from_utf8(key.to_vec()).expect("a text key");
        let child = Command::new(etcdctl_bin())
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoints().join(",")))
            .arg("--dial-timeout=2s")
            .arg("--command-timeout=3s")
            .arg("put")
            .arg(key)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else { return false };
        let wrote = child
            .stdin
            .take()
            .map(|mut i| i.write_all(value).is_ok())
            .unwrap_or(false);
        child.wait().map(|s| s.success()).unwrap_or(false) && wrote
    }

    /// Waits until a write through every member's endpoint list succeeds.
    pub fn wait_ready(&self, limit: Duration) {
        let start = Instant::now();
        loop {
            if self.put(b"churnfs-test-ready", b"1") {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "etcd cluster not ready after {limit:?} (logs in {})",
                self.dir.path().display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills member `i` (SIGKILL), as a crash or a lost machine would.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again on its data.
    pub fn restart(&mut self, i: usize) {
        assert!(self.members[i].child.is_none(), "member {i} is running");
        self.spawn(i, "existing");
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                // SAFETY: a signal to our own child, by its PID.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                let start = Instant::now();
                loop {
                    if let Ok(Some(_)) = c.try_wait() {
                        break;
                    }
                    if start.elapsed() > Duration::from_secs(5) {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}
