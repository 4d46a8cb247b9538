//! Which transport a mount serves: by default (`uring=auto`) FUSE over
//! io_uring exactly when the fuse module offers it (its `enable_uring`
//! parameter is on), /dev/fuse otherwise; `uring=0` never uses the ring.
//! The test reads the parameter and does not change it (the conformance
//! script's `uring` pass does, with the ring asked for explicitly).

use crate::support::{daemon_threads, stat_of, Mount};
use std::fs;

fn offered() -> bool {
    fs::read_to_string("/sys/module/fuse/parameters/enable_uring").is_ok_and(|v| v.trim() == "Y")
}

/// Requests that came over the ring after a little work on a fresh mount.
fn ring_requests(options: &str) -> (u64, bool) {
    let m = Mount::new(options);
    for i in 0..50 {
        fs::write(m.path(&format!("f{i}")), b"x").unwrap();
        assert!(fs::metadata(m.path(&format!("missing{i}"))).is_err());
    }
    let queue_threads = daemon_threads(&m)
        .iter()
        .any(|(comm, _)| comm.starts_with("churnfs-ring"));
    (stat_of(&m, "ring_requests"), queue_threads)
}

#[test]
fn the_default_serves_the_ring_exactly_when_the_kernel_offers_it() {
    let (by_default, threads) = ring_requests("");
    if offered() {
        assert!(
            by_default > 0,
            "enable_uring is on but no request came over the ring"
        );
        assert!(threads);
    } else {
        assert_eq!(by_default, 0);
        assert!(
            !threads,
            "ring queue threads started without the kernel's offer"
        );
    }
    let (off, threads) = ring_requests("uring=0");
    assert_eq!(off, 0, "uring=0 served requests over the ring");
    assert!(!threads);
}
