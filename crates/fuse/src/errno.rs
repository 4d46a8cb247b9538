//! The one place where engine errors become errno values.

use churnfs_vfs::EngineError;
use fuser::Errno;

/// Maps every engine error to the errno the kernel passes to the caller.
pub fn errno(e: &EngineError) -> Errno {
    let code = match e {
        EngineError::NotFound => libc::ENOENT,
        EngineError::Exists => libc::EEXIST,
        EngineError::NotDir => libc::ENOTDIR,
        EngineError::IsDir => libc::EISDIR,
        EngineError::NotEmpty => libc::ENOTEMPTY,
        EngineError::NameTooLong => libc::ENAMETOOLONG,
        EngineError::Invalid(_) => libc::EINVAL,
        EngineError::FileTooBig => libc::EFBIG,
        EngineError::NoAttr => libc::ENODATA,
        EngineError::Range => libc::ERANGE,
        EngineError::TooBig => libc::E2BIG,
        EngineError::NoSpace => libc::ENOSPC,
        EngineError::Perm => libc::EPERM,
        EngineError::Access => libc::EACCES,
        EngineError::TooManyLinks => libc::EMLINK,
        EngineError::NotSupported => libc::EOPNOTSUPP,
        EngineError::NoSuchOffset => libc::ENXIO,
        EngineError::Stopped => libc::EIO,
        EngineError::Corrupt { .. } => {
            tracing::error!("{e}");
            libc::EIO
        }
        EngineError::NotAStore(_) | EngineError::WrongVersion { .. } => libc::EIO,
        EngineError::Store(churnfs_vfs::StoreError::NoSpace) => libc::ENOSPC,
        EngineError::Store(_) => libc::EIO,
    };
    Errno::from_i32(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use churnfs_vfs::StoreError;

    #[test]
    fn every_error_maps_to_its_errno() {
        let table: Vec<(EngineError, i32)> = vec![
            (EngineError::NotFound, libc::ENOENT),
            (EngineError::Exists, libc::EEXIST),
            (EngineError::NotDir, libc::ENOTDIR),
            (EngineError::IsDir, libc::EISDIR),
            (EngineError::NotEmpty, libc::ENOTEMPTY),
            (EngineError::NameTooLong, libc::ENAMETOOLONG),
            (EngineError::Invalid("x"), libc::EINVAL),
            (EngineError::FileTooBig, libc::EFBIG),
            (EngineError::NoAttr, libc::ENODATA),
            (EngineError::Range, libc::ERANGE),
            (EngineError::TooBig, libc::E2BIG),
            (EngineError::NoSpace, libc::ENOSPC),
            (EngineError::Perm, libc::EPERM),
            (EngineError::Access, libc::EACCES),
            (EngineError::TooManyLinks, libc::EMLINK),
            (EngineError::NotSupported, libc::EOPNOTSUPP),
            (EngineError::NoSuchOffset, libc::ENXIO),
            (EngineError::Stopped, libc::EIO),
            (EngineError::corrupt(None, "x"), libc::EIO),
            (EngineError::NotAStore("x".into()), libc::EIO),
            (
                EngineError::WrongVersion {
                    found: 2,
                    expected: 1,
                },
                libc::EIO,
            ),
            (EngineError::Store(StoreError::NoSpace), libc::ENOSPC),
            (EngineError::Store(StoreError::Locked), libc::EIO),
            (EngineError::Store(StoreError::Poisoned), libc::EIO),
            (EngineError::Store(StoreError::Closed), libc::EIO),
            (
                EngineError::Store(StoreError::Unavailable("x".into())),
                libc::EIO,
            ),
            (EngineError::Store(StoreError::Fenced), libc::EIO),
        ];
        for (e, code) in table {
            assert_eq!(errno(&e).code(), code, "{e:?}");
        }
    }
}
