//! Mount options: `-o key=value,...`, with defaults.

use crate::error::CliError;
use crate::Result;
use churnfs_engine::EngineConfig;
use churnfs_fuse::AdapterConfig;
use std::time::Duration;

pub const MOUNT_OPTIONS_HELP: &str = "\
Mount options (-o key=value,...; defaults in brackets):
  commit_interval_ms=N     commit dirty state at least this often [5000]
  inodes_max=N             inodes cached in memory [100000]
  dentries_max=N           positive names cached [200000]
  negative_entries_max=N   negative names cached, bounded apart [10000]
  dirty_bytes_max=N        dirty file data before writers are pushed back [268435456]
  dirty_items_max=N        dirty inodes, names and blocks before a commit is forced [100000]
  entry_ttl_ms=N           how long the kernel trusts a name [1000]
  attr_ttl_ms=N            how long the kernel trusts attributes [1000]
  negative_ttl_ms=N        how long the kernel trusts that a name is missing [1000]
  kernel_negative_max=N    negative dentries the kernel may keep for this mount;
                           beyond it the oldest are invalidated (0: no limit) [10000]
  threads=N                FUSE worker threads, one cloned fd each [number of cores]
  writeback_cache=0|1      kernel writeback cache [0]
  allow_other              let every user reach the mount (permissions are checked by the kernel)";

#[derive(Clone, Debug, Default)]
pub struct MountOpts {
    pub engine: EngineConfig,
    pub adapter: AdapterConfig,
}

fn num(key: &str, v: Option<&str>) -> Result<u64> {
    let v = v.ok_or_else(|| CliError::BadOptionValue(key.into(), "needs a value".into()))?;
    v.parse::<u64>()
        .map_err(|_| CliError::BadOptionValue(key.into(), format!("{v:?} is not a number")))
}

impl MountOpts {
    pub fn parse(groups: &[String]) -> Result<MountOpts> {
        let mut o = MountOpts::default();
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
                "dirty_bytes_max" => o.engine.dirty_bytes_max = num(k, v)?.max(1 << 20),
                "dirty_items_max" => o.engine.dirty_items_max = num(k, v)?.max(1_000) as usize,
                "entry_ttl_ms" => o.adapter.entry_ttl = Duration::from_millis(num(k, v)?),
                "attr_ttl_ms" => o.adapter.attr_ttl = Duration::from_millis(num(k, v)?),
                "negative_ttl_ms" => o.adapter.negative_ttl = Duration::from_millis(num(k, v)?),
                "kernel_negative_max" => o.adapter.kernel_negative_max = num(k, v)? as usize,
                "threads" => o.adapter.threads = num(k, v)?.clamp(1, 64) as usize,
                "writeback_cache" => o.adapter.writeback_cache = num(k, v)? != 0,
                "allow_other" if v.is_none() => o.adapter.allow_other = true,
                // Always on; accepted so fstab-style option lists work.
                "default_permissions" | "rw" | "noatime" => {}
                _ => return Err(CliError::UnknownOption(item.to_string())),
            }
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
            "threads=3".into(),
        ])
        .unwrap();
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
}
