//! Counters and gauges as named atomics, one struct per layer: each layer
//! declares its own with `counters!` and serves `snapshot()` beside the
//! others. Counters only grow; gauges are set by the part that owns the
//! structure they measure.

/// Declares a struct of `AtomicU64` fields with `snapshot()` (every value as
/// `(name, value)`, in declaration order) and the helpers `inc`, `add`,
/// `sub`, `set` and `max`.
#[macro_export]
macro_rules! counters {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Default, Debug)]
        $vis struct $name {
            $(pub $field: ::std::sync::atomic::AtomicU64,)*
        }

        #[allow(dead_code)]
        impl $name {
            /// All values as `(name, value)`, in declaration order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field.load(::std::sync::atomic::Ordering::Relaxed)),)*]
            }

            /// Every name, in declaration order.
            pub fn names() -> &'static [&'static str] {
                &[$(stringify!($field),)*]
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
        struct Two { a, b }
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
    }
}
