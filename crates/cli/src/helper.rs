//! The mount(8) helper: `mount -t fuse.churnfs STORE MOUNTPOINT -o OPTIONS`
//! and fstab lines of type `fuse.churnfs` run
//! `/sbin/mount.fuse.churnfs STORE MOUNTPOINT [-sfnv] [-o OPTIONS]`, a link
//! to this binary (`make install`). It mounts as `churnfs mount
//! --background` does and returns once the mount is ready.
//!
//! Options meant for mount(8), systemd or the fstab line itself (`auto`,
//! `noauto`, `nofail`, `_netdev`, `user`, `x-systemd.*`, `comment=`, ...)
//! are dropped here; `data=URL` is `--data`; the rest are churnfs's own
//! (`churnfs mount --help`). With `-s` (sloppy) an option churnfs does
//! not know is dropped with a warning instead of refusing the mount.

use crate::error::CliError;
use crate::opts::MountOpts;
use crate::Result;
use std::path::PathBuf;

/// The names mount(8) finds the helper by.
pub const NAMES: [&str; 2] = ["mount.fuse.churnfs", "mount.churnfs"];

/// Is this binary running as the helper (by the name it was started as)?
pub fn called_as_helper(argv0: &str) -> bool {
    let name = std::path::Path::new(argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    NAMES.contains(&name)
}

/// What mount(8) asked for.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub store: String,
    pub mountpoint: PathBuf,
    /// churnfs's own options.
    pub options: Vec<String>,
    pub data: Option<String>,
    /// `-f`: do everything but mount.
    pub fake: bool,
}

/// Options that belong to mount(8), systemd or fstab, not to churnfs.
fn for_mount_itself(opt: &str) -> bool {
    const FLAGS: [&str; 13] = [
        "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev",
        "nofail", "rw", "async", "noatime",
    ];
    FLAGS.contains(&opt)
        || opt.starts_with("x-")
        || opt.starts_with("comment=")
        || opt.starts_with("helper=")
}

/// Parses the helper's arguments (after the program name).
pub fn parse(args: &[String]) -> Result<Request> {
    let usage = || {
        CliError::Other(
            "usage: mount.fuse.churnfs STORE MOUNTPOINT [-sfnv] [-o OPTIONS] (run by mount -t fuse.churnfs)"
                .into(),
        )
    };
    let mut positional = Vec::new();
    let mut raw_opts = Vec::new();
    let (mut fake, mut sloppy) = (false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" => raw_opts.push(it.next().ok_or_else(usage)?.clone()),
            // The type mount(8) was given: ours by construction.
            "-t" => {
                it.next().ok_or_else(usage)?;
            }
            "-N" => {
                return Err(CliError::Other(
                    "mount.fuse.churnfs: mounting in another namespace (-N) is not supported"
                        .into(),
                ))
            }
            s if s.starts_with("-o") && s.len() > 2 => raw_opts.push(s[2..].to_string()),
            s if s.starts_with('-') && s.len() > 1 => {
                for c in s[1..].chars() {
                    match c {
                        'f' => fake = true,
                        's' => sloppy = true,
                        // No mtab to skip; verbose changes nothing.
                        'n' | 'v' => {}
                        _ => {
                            return Err(CliError::Other(format!(
                                "mount.fuse.churnfs: unknown flag -{c}"
                            )))
                        }
                    }
                }
            }
            _ => positional.push(a.clone()),
        }
    }
    let [store, mountpoint] = <[String; 2]>::try_from(positional).map_err(|_| usage())?;
    let mut options = Vec::new();
    let mut data = None;
    for opt in raw_opts.iter().flat_map(|o| o.split(',')) {
        if opt.is_empty() || for_mount_itself(opt) {
            continue;
        }
        if let Some(url) = opt.strip_prefix("data=") {
            data = Some(url.to_string());
            continue;
        }
        if opt == "ro" {
            return Err(CliError::Other(
                "mount.fuse.churnfs: churnfs has no read-only mount (option ro)".into(),
            ));
        }
        if sloppy {
            if let Err(e) = MountOpts::parse(&[opt.to_string()]) {
                crate::err!("mount.fuse.churnfs: option {opt:?} dropped (-s): {e}");
                continue;
            }
        }
        options.push(opt.to_string());
    }
    Ok(Request {
        store,
        mountpoint: PathBuf::from(mountpoint),
        options: vec![options.join(",")],
        data,
        fake,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn mount_and_fstab_options_are_dropped_and_ours_kept() {
        let r = parse(&args(
            "/srv/store /mnt/x -n -o rw,noauto,_netdev,nofail,x-systemd.automount,x-systemd.requires=etcd.service,entry_ttl_ms=50,data=s3://b/p,allow_other",
        ))
        .expect("parse");
        assert_eq!(r.store, "/srv/store");
        assert_eq!(r.mountpoint, PathBuf::from("/mnt/x"));
        assert_eq!(r.options, vec!["entry_ttl_ms=50,allow_other".to_string()]);
        assert_eq!(r.data.as_deref(), Some("s3://b/p"));
        assert!(!r.fake);
        let f = parse(&args("s m -fv -t fuse.churnfs")).expect("parse");
        assert!(f.fake);
        assert_eq!(f.options, vec![String::new()]);
    }

    #[test]
    fn bad_lines_are_refused_with_one_message() {
        assert!(parse(&args("only-one")).is_err());
        assert!(parse(&args("a b c")).is_err());
        assert!(parse(&args("a b -o")).is_err());
        assert!(parse(&args("a b -x")).is_err());
        assert!(parse(&args("a b -o ro")).is_err());
        // An unknown option reaches the option parser (which refuses it),
        // unless sloppy.
        let r = parse(&args("a b -o bogus=1")).expect("parse");
        assert!(MountOpts::parse(&r.options).is_err());
        let s = parse(&args("a b -s -o bogus=1,threads=2")).expect("parse");
        assert_eq!(s.options, vec!["threads=2".to_string()]);
    }

    #[test]
    fn the_helper_is_known_by_its_names() {
        assert!(called_as_helper("/sbin/mount.fuse.churnfs"));
        assert!(called_as_helper("mount.churnfs"));
        assert!(!called_as_helper("/usr/local/bin/churnfs"));
    }
}
