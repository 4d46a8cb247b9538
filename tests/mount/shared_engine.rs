//! The engine boundary against a real etcd: what shared mode relies on
//! and the in-memory engine imitates.

use churnfs_kv::{key_after, EtcdKv, MetaKv, Op, Outcome, Txn, WatchItem};
use churnfs_tests::etcd::EtcdCluster;
use std::time::Duration;

fn put(k: &str) -> Op {
    Op::Put {
        key: k.as_bytes().to_vec(),
        value: b"v".to_vec(),
        lease: None,
    }
}

/// A range deletion is one write of a commit, deletes its keys and only
/// them, shows a watch one change per key, and a commit that also puts a
/// key inside it is refused whole.
#[test]
fn a_range_deletion_deletes_its_keys_alone_and_a_watch_sees_each() {
    let etcd = EtcdCluster::start(1);
    let kv = EtcdKv::connect(
        &etcd.endpoints(),
        Duration::from_secs(10),
        Duration::from_secs(5),
    )
    .expect("connect");
    let keys = ["r/a", "r/b", "r/b0", "r/c", "r/d"];
    let Outcome::Committed(rev) = kv
        .commit(&Txn {
            conds: vec![],
            ops: keys.iter().map(|k| put(k)).collect(),
        })
        .expect("commit")
    else {
        panic!("an unconditional commit failed")
    };
    let mut w = kv.watch(b"r/", rev).expect("watch");
    let range = Op::DeleteRange {
        start: b"r/b".to_vec(),
        end: key_after(b"r/c"),
    };
    let with_put = Txn {
        conds: vec![],
        ops: vec![range.clone(), put("r/bb")],
    };
    assert!(kv.commit(&with_put).is_err(), "a put inside a range");
    let t = Txn {
        conds: vec![],
        ops: vec![range, put("s")],
    };
    assert!(matches!(kv.commit(&t), Ok(Outcome::Committed(_))));
    let left: Vec<Vec<u8>> = kv
        .scan(b"r/", b"r0", 10)
        .expect("scan")
        .0
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(left, vec![b"r/a".to_vec(), b"r/d".to_vec()]);
    let mut gone = Vec::new();
    while gone.len() < 3 {
        match w.next(Duration::from_secs(5)).expect("watch") {
            Some(WatchItem::Events(ev)) => {
                assert!(ev.iter().all(|e| e.value.is_none()), "{ev:?}");
                gone.extend(ev.into_iter().map(|e| e.key));
            }
            Some(WatchItem::Progress(_)) => {}
            None => panic!("the watch saw {} of 3 deletions", gone.len()),
        }
    }
    assert_eq!(
        gone,
        vec![b"r/b".to_vec(), b"r/b0".to_vec(), b"r/c".to_vec()]
    );
}

/// With one member of three down, connecting (what every mount and tool
/// does first) still succeeds, through the others, every time.
#[test]
fn connecting_with_a_member_down_goes_through_the_others() {
    let mut etcd = EtcdCluster::start(3);
    etcd.kill(0);
    for i in 0..10 {
        let kv = EtcdKv::connect(
            &etcd.endpoints(),
            Duration::from_secs(5),
            Duration::from_secs(2),
        );
        assert!(kv.is_ok(), "connect {i}: {:?}", kv.err());
    }
}
