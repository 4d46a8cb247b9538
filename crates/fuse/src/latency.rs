//! How long the daemon takes to answer a FUSE request, per opcode: from the
//! request read off /dev/fuse (or its ring entry) to its reply built. One
//! fixed-bucket histogram per opcode, of atomics (no lock on the request
//! path); served by the metrics endpoint as Prometheus histograms. Time a
//! request spends queued in the kernel is not the daemon's to see.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the buckets, in nanoseconds (the last bucket, +Inf,
/// takes the rest): from a cached lookup (a few microseconds in the
/// daemon) to a commit that waits on a remote engine.
pub const BOUNDS_NS: [u64; 17] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    50_000_000,
    100_000_000,
    1_000_000_000,
    5_000_000_000,
];

/// Opcodes below this have a histogram of their own; the rest share the
/// last slot (none that churnfs answers is that high).
const SLOTS: usize = 64;

#[derive(Default)]
struct Slot {
    /// Requests per bucket (not cumulative); the last is +Inf.
    buckets: [AtomicU64; BOUNDS_NS.len() + 1],
    sum_ns: AtomicU64,
}

/// The histograms of one mount.
pub struct Latency {
    slots: Box<[Slot]>,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency {
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
        }
    }
}

/// One opcode's histogram, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct OpLatency {
    pub opcode: u32,
    pub name: &'static str,
    /// (upper bound in seconds, requests in the bucket: over the bound
    /// before it, at or under this one), the last bound +Inf.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Latency {
    pub fn record(&self, opcode: u32, took: Duration) {
        let slot = &self.slots[(opcode as usize).min(SLOTS - 1)];
        let ns = took.as_nanos().min(u64::MAX as u128) as u64;
        let b = BOUNDS_NS.partition_point(|&bound| bound < ns);
        slot.buckets[b].fetch_add(1, Relaxed);
        slot.sum_ns.fetch_add(ns, Relaxed);
    }

    /// Every opcode that was served at least once.
    pub fn snapshot(&self) -> Vec<OpLatency> {
        let mut out = Vec::new();
        for (op, slot) in self.slots.iter().enumerate() {
            let mut acc = 0;
            let mut buckets = Vec::with_capacity(BOUNDS_NS.len() + 1);
            for (i, n) in slot.buckets.iter().enumerate() {
                let n = n.load(Relaxed);
                acc += n;
                let bound = BOUNDS_NS
                    .get(i)
                    .map_or(f64::INFINITY, |ns| *ns as f64 / 1e9);
                buckets.push((bound, n));
            }
            if acc == 0 {
                continue;
            }
            out.push(OpLatency {
                opcode: op as u32,
                name: opcode_name(op as u32),
                buckets,
                count: acc,
                sum_seconds: slot.sum_ns.load(Relaxed) as f64 / 1e9,
            });
        }
        out
    }
}

/// The kernel's name of an opcode, lower case (`fuse_opcode` in
/// include/uapi/linux/fuse.h).
pub fn opcode_name(op: u32) -> &'static str {
    match op {
        1 => "lookup",
        2 => "forget",
        3 => "getattr",
        4 => "setattr",
        5 => "readlink",
        6 => "symlink",
        8 => "mknod",
        9 => "mkdir",
        10 => "unlink",
        11 => "rmdir",
        12 => "rename",
        13 => "link",
        14 => "open",
        15 => "read",
        16 => "write",
        17 => "statfs",
        18 => "release",
        20 => "fsync",
        21 => "setxattr",
        22 => "getxattr",
        23 => "listxattr",
        24 => "removexattr",
        25 => "flush",
        26 => "init",
        27 => "opendir",
        28 => "readdir",
        29 => "releasedir",
        30 => "fsyncdir",
        31 => "getlk",
        32 => "setlk",
        33 => "setlkw",
        34 => "access",
        35 => "create",
        36 => "interrupt",
        37 => "bmap",
        38 => "destroy",
        39 => "ioctl",
        40 => "poll",
        41 => "notify_reply",
        42 => "batch_forget",
        43 => "fallocate",
        44 => "readdirplus",
        45 => "rename2",
        46 => "lseek",
        47 => "copy_file_range",
        48 => "setupmapping",
        49 => "removemapping",
        50 => "syncfs",
        51 => "tmpfile",
        52 => "statx",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_lands_in_the_first_bucket_that_holds_it() {
        let l = Latency::default();
        l.record(1, Duration::from_micros(3));
        l.record(1, Duration::from_micros(10));
        l.record(1, Duration::from_micros(11));
        l.record(1, Duration::from_secs(9));
        l.record(16, Duration::from_millis(2));
        let s = l.snapshot();
        assert_eq!(s.len(), 2, "only opcodes served");
        let lookup = &s[0];
        assert_eq!((lookup.opcode, lookup.name, lookup.count), (1, "lookup", 4));
        // 3 µs and 10 µs at or under 10 µs; 11 µs under 25 µs; 9 s only
        // under +Inf.
        assert_eq!(lookup.buckets[2], (5e-6, 1));
        assert_eq!(lookup.buckets[3], (10e-6, 1));
        assert_eq!(lookup.buckets[4], (25e-6, 1));
        assert_eq!(lookup.buckets[BOUNDS_NS.len() - 1], (5.0, 0));
        assert_eq!(lookup.buckets[BOUNDS_NS.len()], (f64::INFINITY, 1));
        assert!((lookup.sum_seconds - 9.000024).abs() < 1e-9);
        let write = &s[1];
        assert_eq!((write.name, write.count), ("write", 1));
        assert_eq!(write.buckets[9], (1e-3, 0));
        assert_eq!(write.buckets[10], (2.5e-3, 1));
    }

    #[test]
    fn an_opcode_past_the_table_shares_the_last_slot() {
        let l = Latency::default();
        l.record(4096, Duration::from_micros(1));
        let s = l.snapshot();
        assert_eq!((s[0].opcode, s[0].name), (63, "other"));
    }
}
