//! Volume URLs: `etcd://HOST:PORT[,HOST:PORT...]/VOLUME`.

use crate::schema::check_volume_name;

/// Where a volume lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeUrl {
    /// `host:port` of each engine member.
    pub endpoints: Vec<String>,
    pub volume: String,
}

impl VolumeUrl {
    /// Whether `s` is meant as a volume URL (rather than a local store's
    /// directory).
    pub fn looks_like(s: &str) -> bool {
        s.starts_with("etcd://")
    }

    pub fn parse(s: &str) -> Result<VolumeUrl, String> {
        let rest = s.strip_prefix("etcd://").ok_or_else(|| {
            format!("{s:?} is not a volume URL (etcd://HOST:PORT[,HOST:PORT...]/VOLUME)")
        })?;
        let (hosts, volume) = rest
            .split_once('/')
            .ok_or_else(|| format!("{s:?} names no volume (etcd://HOST:PORT/VOLUME)"))?;
        check_volume_name(volume)?;
        let endpoints: Vec<String> = hosts.split(',').map(str::to_string).collect();
        for e in &endpoints {
            let ok = e
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(format!("{e:?} in {s:?} is not HOST:PORT"));
            }
        }
        Ok(VolumeUrl {
            endpoints,
            volume: volume.to_string(),
        })
    }
}

impl std::fmt::Display for VolumeUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "etcd://{}/{}", self.endpoints.join(","), self.volume)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_what_is_wrong() {
        let u = VolumeUrl::parse("etcd://127.0.0.1:2379,h2:2380/ci-cache").unwrap();
        assert_eq!(u.endpoints, vec!["127.0.0.1:2379", "h2:2380"]);
        assert_eq!(u.volume, "ci-cache");
        assert_eq!(u.to_string(), "etcd://127.0.0.1:2379,h2:2380/ci-cache");
        assert!(VolumeUrl::parse("etcd://h:1")
            .unwrap_err()
            .contains("names no volume"));
        assert!(VolumeUrl::parse("etcd://h/v")
            .unwrap_err()
            .contains("HOST:PORT"));
        assert!(VolumeUrl::parse("etcd://h:1/a/b").is_err());
        assert!(VolumeUrl::parse("/tmp/store").is_err());
    }
}
