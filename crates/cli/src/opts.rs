//! Mount options: `-o key=value,...`, with defaults.

use crate::error::CliError;
use crate::Result;
use churnfs_engine::EngineConfig;
use churnfs_fuse::{AdapterConfig, Permissions, Uring};
use churnfs_shared::SharedConfig;
use std::time::Duration;

pub const MOUNT_OPTIONS_HELP: &str = "\
Mount options (-o key=value,...; defaults in brackets):
  commit_interval_ms=N     commit dirty state at least this often [5000]
  inodes_max=N             inodes cached in memory [100000]
  dentries_max=N           positive names cached [200000]
  negative_entries_max=N   negative names cached, bounded apart [10000]
  dirty_bytes_max=N        dirty file data before writers are pushed back [268435456]
  dirty_items_max=N        dirty inodes, names and blocks before a commit is forced [10000]
  entry_ttl_ms=N           how long the kernel trusts a name [1000]
  attr_ttl_ms=N            how long the kernel trusts attributes [1000]
  negative_ttl_ms=N        how long the kernel trusts that a name is missing [1000]
  kernel_negative_max=N    negative dentries the kernel may keep for this mount;
                           beyond it the oldest are invalidated (0: no limit) [10000]
  kernel_inodes_max=N      inodes the kernel may hold for this mount; beyond it the
                           longest known are pruned (Linux 6.18+; 0: no limit) [100000]
  threads=N                FUSE worker threads, one cloned fd each [number of
                           cores; 16 for a shared volume, whose requests wait on
                           the network]
  writeback_cache=0|1      kernel writeback cache [0]
  allow_other              let every user reach the mount
  permissions=auto|kernel|daemon
                           who checks permissions: the daemon on a private mount,
                           the kernel with allow_other [auto]
  default_permissions      the same as permissions=kernel
  xattr=0|1                extended attributes (user.*, ACLs, security labels); with
                           them a new file's first write and every truncate cost
                           one request more (the kernel's security.capability
                           probe); 0 saves it and refuses xattrs [1]
  metrics=ADDR:PORT        serve every counter and gauge, and FUSE request times
                           by opcode, for Prometheus at http://ADDR:PORT/metrics
  uring=0|1|auto           serve requests over FUSE-over-io_uring: 1 asks the kernel
                           for it, auto only when it is offered (Linux 6.14+, with
                           /sys/module/fuse/parameters/enable_uring set to Y) [auto]

Shared volumes only (etcd://...):
  session_ttl_ms=N         lease of this mount's session: a mount that dies is
                           noticed, and what it held reclaimed, this long after [10000]
  op_timeout_ms=N          how long an operation waits for the metadata engine or
                           the object store (no quorum, unreachable) before EIO [20000]
  object_cache_bytes=N     file data kept in memory for reads [67108864]
  cache_dir=PATH           where the read cache on local disk lives (a directory
                           per mount under it) [/var/cache/churnfs]
  cache_bytes=N            most bytes of file data the disk cache holds; 0: none
                           [1073741824]
  dirty_bytes_max=N        (as above) written data not yet uploaded [67108864]
  delegate=0|1             take the delegation of a directory this mount alone
                           changes: its creates and removes are committed in
                           batches, within delegate_flush_ms or at fsync [1]
  delegate_flush_ms=N      longest a delegated directory's change waits [100]";

/// The read cache's root unless `cache_dir` says.
const DEFAULT_CACHE_DIR: &str = "/var/cache/churnfs";

#[derive(Clone, Debug, Default)]
pub struct MountOpts {
    pub engine: EngineConfig,
    pub adapter: AdapterConfig,
    pub shared: SharedConfig,
    /// `threads` was given (a shared volume's default differs).
    pub threads_given: bool,
    /// Where the metrics endpoint listens (`metrics=ADDR:PORT`).
    pub metrics: Option<std::net::SocketAddr>,
    /// Options churnfs no longer has, given anyway (an old fstab line):
    /// accepted, ignored, and named in a warning at mount.
    pub retired: Vec<String>,
}

/// Reader tuning that was once a mount option and is now the fixed policy
/// of the FUSE worker threads (docs/design.md "Worker threads").
const RETIRED: [&str; 4] = ["lone_readers", "spin_us", "batch_sched", "spread_readers"];

fn num(key: &str, v: Option<&str>) -> Result<u64> {
    let v = v.ok_or_else(|| CliError::BadOptionValue(key.into(), "needs a value".into()))?;
    v.parse::<u64>()
        .map_err(|_| CliError::BadOptionValue(key.into(), format!("{v:?} is not a number")))
}

impl MountOpts {
    pub fn parse(groups: &[String]) -> Result<MountOpts> {
        let mut o = MountOpts::default();
        o.shared.cache_dir = Some(DEFAULT_CACHE_DIR.into());
        for item in groups
            .iter()
            .flat_map(|g| g.split(','))
            .filter(|s| !s.is_empty())
        {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            match k {
                "commit_interval_ms" => o.engine.commit_interval_ms = num(k, v)?.max(1),
                "inodes_max" => o.engine.inodes_max = num(k, v)?.max(1) as usize,
                "dentries_max" => o.engine.dentries_max = num(k, v)?.max(1) as usize,
                "negative_entries_max" => o.engine.negative_entries_max = num(k, v)? as usize,
                "dirty_bytes_max" => {
                    let n = num(k, v)?.max(1 << 20);
                    o.engine.dirty_bytes_max = n;
                    o.shared.dirty_bytes_max = n;
                }
                "session_ttl_ms" => {
                    o.shared.session_ttl = Duration::from_millis(num(k, v)?.max(2_000))
                }
                "op_timeout_ms" => o.shared.op_timeout = Duration::from_millis(num(k, v)?.max(100)),
                "object_cache_bytes" => o.shared.object_cache_bytes = num(k, v)? as usize,
                "cache_bytes" => o.shared.disk_cache_bytes = num(k, v)?,
                "delegate" => o.shared.delegation = num(k, v)? != 0,
                "delegate_flush_ms" => {
                    o.shared.delegation_flush = Duration::from_millis(num(k, v)?.clamp(1, 10_000))
                }
                "cache_dir" => match v {
                    Some(p) if p.starts_with('/') => o.shared.cache_dir = Some(p.into()),
                    _ => {
                        return Err(CliError::BadOptionValue(
                            k.into(),
                            "needs an absolute path".into(),
                        ))
                    }
                },
                "dirty_items_max" => o.engine.dirty_items_max = num(k, v)?.max(1_000) as usize,
                "entry_ttl_ms" => o.adapter.entry_ttl = Duration::from_millis(num(k, v)?),
                "attr_ttl_ms" => o.adapter.attr_ttl = Duration::from_millis(num(k, v)?),
                "negative_ttl_ms" => o.adapter.negative_ttl = Duration::from_millis(num(k, v)?),
                "kernel_negative_max" => o.adapter.kernel_negative_max = num(k, v)? as usize,
                "kernel_inodes_max" => o.adapter.kernel_inodes_max = num(k, v)? as usize,
                "threads" => {
                    o.adapter.threads = num(k, v)?.clamp(1, 64) as usize;
                    o.threads_given = true;
                }
                "writeback_cache" => o.adapter.writeback_cache = num(k, v)? != 0,
                "xattr" => o.adapter.xattrs = num(k, v)? != 0,
                "metrics" => {
                    let a = v.unwrap_or_default();
                    o.metrics = Some(a.parse().map_err(|_| {
                        CliError::BadOptionValue(
                            k.into(),
                            format!("{a:?} is not ADDRESS:PORT (127.0.0.1:9567, [::1]:9567)"),
                        )
                    })?);
                }
                "uring" => {
                    o.adapter.uring = match v {
                        Some("0") => Uring::Off,
                        Some("1") => Uring::On,
                        Some("auto") => Uring::Auto,
                        _ => {
                            return Err(CliError::BadOptionValue(
                                k.into(),
                                "is 0, 1 or auto".into(),
                            ))
                        }
                    }
                }
                "allow_other" if v.is_none() => o.adapter.allow_other = true,
                "permissions" => {
                    o.adapter.permissions = match v {
                        Some("auto") => Permissions::Auto,
                        Some("kernel") => Permissions::Kernel,
                        Some("daemon") => Permissions::Daemon,
                        _ => {
                            return Err(CliError::BadOptionValue(
                                k.into(),
                                "is auto, kernel or daemon".into(),
                            ))
                        }
                    }
                }
                "default_permissions" if v.is_none() => o.adapter.permissions = Permissions::Kernel,
                // Accepted so fstab-style option lists work.
                "rw" | "noatime" => {}
                k if RETIRED.contains(&k) => o.retired.push(k.into()),
                _ => return Err(CliError::UnknownOption(item.to_string())),
            }
        }
        if o.adapter.allow_other && o.adapter.permissions == Permissions::Daemon {
            return Err(CliError::BadOptionValue(
                "permissions".into(),
                "daemon needs a private mount: with allow_other the kernel lets \
                 users through names another user looked up, so use kernel"
                    .into(),
            ));
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_and_refuses_unknown() {
        let o = MountOpts::parse(&[
            "commit_interval_ms=100,allow_other".into(),
            "threads=3,spin_us=20,lone_readers=2".into(),
        ])
        .unwrap();
        assert_eq!(o.retired, ["spin_us", "lone_readers"]);
        assert_eq!(o.engine.commit_interval_ms, 100);
        assert!(o.adapter.allow_other);
        assert_eq!(o.adapter.threads, 3);
        assert!(matches!(
            MountOpts::parse(&["bogus=1".into()]),
            Err(CliError::UnknownOption(_))
        ));
        assert!(matches!(
            MountOpts::parse(&["inodes_max=x".into()]),
            Err(CliError::BadOptionValue(..))
        ));
    }

    #[test]
    fn delegation_is_on_unless_turned_off() {
        let d = MountOpts::parse(&[]).unwrap().shared;
        assert!(d.delegation);
        let o = MountOpts::parse(&["delegate=0,delegate_flush_ms=250".into()]).unwrap();
        assert!(!o.shared.delegation);
        assert_eq!(o.shared.delegation_flush, Duration::from_millis(250));
        assert!(MountOpts::parse(&["delegate=yes".into()]).is_err());
    }

    #[test]
    fn the_daemon_checks_permissions_only_on_a_private_mount() {
        let private = MountOpts::parse(&[]).unwrap();
        assert!(private.adapter.daemon_checks());
        let shared = MountOpts::parse(&["allow_other".into()]).unwrap();
        assert!(!shared.adapter.daemon_checks());
        let kernel = MountOpts::parse(&["default_permissions".into()]).unwrap();
        assert!(!kernel.adapter.daemon_checks());
        assert!(matches!(
            MountOpts::parse(&["allow_other,permissions=daemon".into()]),
            Err(CliError::BadOptionValue(..))
        ));
        assert!(matches!(
            MountOpts::parse(&["permissions=maybe".into()]),
            Err(CliError::BadOptionValue(..))
        ));
    }

    #[test]
    fn uring_is_off_on_or_auto() {
        let parse = |v: &str| MountOpts::parse(&[format!("uring={v}")]).map(|o| o.adapter.uring);
        assert_eq!(
            MountOpts::parse(&[]).unwrap().adapter.uring,
            Uring::default()
        );
        assert_eq!(parse("0").unwrap(), Uring::Off);
        assert_eq!(parse("1").unwrap(), Uring::On);
        assert_eq!(parse("auto").unwrap(), Uring::Auto);
        assert!(matches!(parse("yes"), Err(CliError::BadOptionValue(..))));
    }
}
