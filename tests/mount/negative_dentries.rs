//! The kernel's negative dentries for the mount stay within the budget: the
//! adapter tracks names the kernel may hold as negative (missing lookups,
//! unlinked names) and invalidates the oldest beyond `kernel_negative_max`.
//! Negative replies carry a TTL, and a name created later is seen at once.

use crate::support::{stat_of, Mount};
use std::fs;

#[test]
fn churned_and_missing_names_are_invalidated_beyond_the_budget() {
    let mut m = Mount::new("kernel_negative_max=500,negative_ttl_ms=60000");
    fs::create_dir(m.path("spool")).unwrap();
    for i in 0..3000 {
        let p = m.path(&format!("spool/job{i}"));
        fs::write(&p, b"payload").unwrap();
        fs::remove_file(&p).unwrap();
        assert!(fs::metadata(m.path(&format!("spool/missing{i}"))).is_err());
    }
    assert!(stat_of(&m, "kernel_negative_tracked") <= 500);
    // 6000 names noted, at most 500 tracked: the rest were handed to the
    // invalidation thread, which works in the background.
    let mut sent = 0;
    for _ in 0..200 {
        sent = stat_of(&m, "kernel_negative_invalidated")
            + stat_of(&m, "kernel_negative_inval_failed");
        if sent >= 5000 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(
        sent >= 5000,
        "only {sent} invalidations sent for 6000 negative names"
    );
    assert_eq!(stat_of(&m, "kernel_negative_dropped"), 0);
    // A name the kernel cached as missing (60 s TTL) is there once created.
    assert!(fs::metadata(m.path("spool/later")).is_err());
    fs::write(m.path("spool/later"), b"now").unwrap();
    assert_eq!(fs::read(m.path("spool/later")).unwrap(), b"now");
    fs::rename(m.path("spool/later"), m.path("spool/renamed")).unwrap();
    assert!(fs::metadata(m.path("spool/later")).is_err());
    assert_eq!(fs::read(m.path("spool/renamed")).unwrap(), b"now");
    m.unmount();
    m.assert_fsck_clean();
}
