//! Tests against a real FUSE mount of the `churnfs` binary.

mod support;

mod bad_input;
mod corrupt_store;
mod durability;
mod enospc;
mod kill9_churn;
mod kill9_truncate;
mod mount_helper;
mod negative_dentries;
mod observe;
mod opens;
mod permissions;
mod posix_basics;
mod shared_contract;
mod shared_engine;
mod shared_failures;
mod shared_kill9;
mod shared_races;
mod shared_s3;
mod shared_tools;
mod store_reopen;
mod tmpfile;
mod tools;
mod transport;
mod workers;
