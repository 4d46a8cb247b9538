//! Counters and gauges as named atomics, one struct per layer: each layer
//! declares its own with `counters!` and serves `snapshot()` beside the
//! others. Counters only grow; gauges are set by the part that owns the
//! structure they measure.

/// What one counter or gauge is: the catalogue `churnfs stats` groups by
/// and the metrics endpoint describes (HELP and TYPE) from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Desc {
    pub name: &'static str,
    /// The part of the filesystem it measures (a short word: `inodes`,
    /// `names`, `journal`, ...), as `churnfs stats` groups them.
    pub part: &'static str,
    /// What the part's counters count, in one line.
    pub help: &'static str,
    /// A gauge (a level, set by the owner of what it measures) rather than
    /// a counter (which only grows).
    pub gauge: bool,
}

/// Whether a field's marker (`#[gauge]` or none) makes it a gauge; any
/// other marker fails the build.
pub const fn is_gauge(marks: &[&str]) -> bool {
    match marks {
        [] => false,
        [m] => {
            assert!(
                matches!(m.as_bytes(), b"gauge"),
                "a counter's only marker is #[gauge]"
            );
            true
        }
        _ => panic!("one marker at most"),
    }
}

/// Declares a struct of `AtomicU64` fields, in parts, with `snapshot()`
/// (every value as `(name, value)`, in declaration order), `catalogue()`
/// (each field's part, help and kind) and the helpers `inc`, `add`, `sub`,
/// `set` and `max`. A part is `word "what it counts" { fields }`; a field
/// marked `#[gauge]` is a level, the others only grow.
#[macro_export]
macro_rules! counters {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $( $part:ident $help:literal { $( $(#[$kind:ident])? $field:ident ),* $(,)? } )*
    }) => {
        $(#[$meta])*
        #[derive(Default, Debug)]
        $vis struct $name {
            $($(pub $field: ::std::sync::atomic::AtomicU64,)*)*
        }

        #[allow(dead_code)]
        impl $name {
            /// All values as `(name, value)`, in declaration order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$($((stringify!($field), self.$field.load(::std::sync::atomic::Ordering::Relaxed)),)*)*]
            }

            /// Every name, in declaration order.
            pub fn names() -> &'static [&'static str] {
                &[$($(stringify!($field),)*)*]
            }

            /// What each field is, in declaration order.
            pub fn catalogue() -> &'static [$crate::counters::Desc] {
                const CATALOGUE: &[$crate::counters::Desc] = &[$($($crate::counters::Desc {
                    name: stringify!($field),
                    part: stringify!($part),
                    help: $help,
                    gauge: $crate::counters::is_gauge(&[$(stringify!($kind),)?]),
                },)*)*];
                CATALOGUE
            }

            pub fn inc(c: &::std::sync::atomic::AtomicU64) {
                c.fetch_add(1, ::std::sync::atomic::Ordering::Relaxed);
            }

            pub fn add(c: &::std::sync::atomic::AtomicU64, n: u64) {
                c.fetch_add(n, ::std::sync::atomic::Ordering::Relaxed);
            }

            /// Takes back what `inc` or `add` gave (gauges kept as sums of parts).
            pub fn sub(c: &::std::sync::atomic::AtomicU64, n: u64) {
                let old = c.fetch_sub(n, ::std::sync::atomic::Ordering::Relaxed);
                debug_assert!(old >= n, "gauge below zero");
            }

            pub fn set(c: &::std::sync::atomic::AtomicU64, n: u64) {
                c.store(n, ::std::sync::atomic::Ordering::Relaxed);
            }

            pub fn max(c: &::std::sync::atomic::AtomicU64, n: u64) {
                c.fetch_max(n, ::std::sync::atomic::Ordering::Relaxed);
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::counters! {
        struct Two {
            first "the first part" { a }
            second "the second part" { #[gauge] b }
        }
    }

    #[test]
    fn snapshot_names_every_field_in_order() {
        let t = Two::default();
        Two::inc(&t.a);
        Two::add(&t.b, 5);
        Two::sub(&t.b, 2);
        Two::max(&t.a, 4);
        assert_eq!(t.snapshot(), vec![("a", 4), ("b", 3)]);
        assert_eq!(Two::names(), &["a", "b"]);
        let c = Two::catalogue();
        assert_eq!((c[0].part, c[0].gauge), ("first", false));
        assert_eq!(
            (c[1].part, c[1].help, c[1].gauge),
            ("second", "the second part", true)
        );
    }
}
