//! The caller of a request, for permission checks made in the daemon: uid and
//! gid from the request header; supplementary groups and effective
//! capabilities from `/proc/<pid>/status`, read on first need only. The FUSE
//! header carries no groups, and most checks never need them: the owner, or
//! a caller whose mode bits already allow, decides without the read.

use crate::stats::Stats;
use churnfs_vfs::perm::{Caller, Cap};

/// What `/proc/<pid>/status` says about a task's credentials.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ProcCreds {
    pub groups: Vec<u32>,
    pub cap_eff: u64,
}

impl ProcCreds {
    /// Parses the `Groups:` and `CapEff:` lines of a status file; what is
    /// missing or malformed counts as no groups and no capabilities.
    pub fn parse(status: &str) -> ProcCreds {
        let mut c = ProcCreds::default();
        for line in status.lines() {
            if let Some(v) = line.strip_prefix("Groups:") {
                c.groups = v
                    .split_whitespace()
                    .filter_map(|g| g.parse().ok())
                    .collect();
            } else if let Some(v) = line.strip_prefix("CapEff:") {
                c.cap_eff = u64::from_str_radix(v.trim(), 16).unwrap_or(0);
            }
        }
        c
    }

    /// Reads the task's status. A task that is gone (or hidden in another
    /// pid namespace, pid 0) has no groups and no capabilities: the checks
    /// then fall back to the header's uid and gid.
    fn read(pid: u32) -> ProcCreds {
        if pid == 0 {
            return ProcCreds::default();
        }
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| ProcCreds::parse(&s))
            .unwrap_or_default()
    }
}

/// One request's caller.
pub struct ReqCaller<'a> {
    uid: u32,
    gid: u32,
    pid: u32,
    creds: Option<ProcCreds>,
    stats: &'a Stats,
}

impl<'a> ReqCaller<'a> {
    pub fn new(uid: u32, gid: u32, pid: u32, stats: &'a Stats) -> ReqCaller<'a> {
        ReqCaller {
            uid,
            gid,
            pid,
            creds: None,
            stats,
        }
    }

    fn creds(&mut self) -> &ProcCreds {
        let (pid, stats) = (self.pid, self.stats);
        self.creds.get_or_insert_with(|| {
            Stats::inc(&stats.perm_proc_reads);
            ProcCreds::read(pid)
        })
    }
}

impl Caller for ReqCaller<'_> {
    fn uid(&self) -> u32 {
        self.uid
    }

    fn gid(&self) -> u32 {
        self.gid
    }

    fn in_supplementary(&mut self, gid: u32) -> bool {
        self.creds().groups.contains(&gid)
    }

    fn capable(&mut self, cap: Cap) -> bool {
        self.creds().cap_eff & (1 << cap as u32) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_groups_and_effective_capabilities() {
        let status = "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\n\
                      Groups:\t4 24 27 1000 \nCapInh:\t0000000000000000\n\
                      CapEff:\t000001ffffffffff\n";
        let c = ProcCreds::parse(status);
        assert_eq!(c.groups, vec![4, 24, 27, 1000]);
        assert_eq!(c.cap_eff, 0x1ff_ffff_ffff);
        let none = ProcCreds::parse("Groups:\t\nCapEff:\tzz\n");
        assert_eq!(none, ProcCreds::default());
    }

    #[test]
    fn reads_the_callers_status_once() {
        let stats = Stats::default();
        // SAFETY: getuid, getgid and gettid have no preconditions.
        let (uid, gid, tid) = unsafe { (libc::getuid(), libc::getgid(), libc::gettid()) };
        let expect =
            ProcCreds::parse(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
        let mut me = ReqCaller::new(uid, gid, tid as u32, &stats);
        assert_eq!(me.capable(Cap::DacOverride), expect.cap_eff & 2 != 0);
        assert_eq!(me.capable(Cap::Chown), expect.cap_eff & 1 != 0);
        for g in &expect.groups {
            assert!(me.in_supplementary(*g));
        }
        assert!(!me.in_supplementary(u32::MAX - 1));
        assert_eq!(
            stats
                .perm_proc_reads
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        let mut gone = ReqCaller::new(uid, gid, 0, &stats);
        assert!(!gone.capable(Cap::DacOverride), "pid 0 has no capabilities");
    }
}
