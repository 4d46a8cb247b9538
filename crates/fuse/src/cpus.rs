//! The calling thread's CPU affinity: which CPUs it may run on, and
//! keeping it to one of them (the io_uring queue threads, ring.rs; the
//! /dev/fuse readers while several callers send requests, workers.rs).

/// The set of CPUs the calling thread may run on, and their numbers.
pub(crate) fn of_this_thread() -> Option<(libc::cpu_set_t, Vec<usize>)> {
    // SAFETY: a zeroed cpu_set_t is an empty set, passed with its size.
    let mut all: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&all), &mut all) };
    if r != 0 {
        return None;
    }
    let cpus = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i is below CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &all) })
        .collect();
    Some((all, cpus))
}

/// Lets the calling thread run on `set` only. False if the kernel refused.
pub(crate) fn set_this_thread(set: &libc::cpu_set_t) -> bool {
    // SAFETY: a valid set of its own size, for the calling thread (0).
    unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(set), set) == 0 }
}

/// Keeps the calling thread to `cpu` (below CPU_SETSIZE). False if the
/// kernel refused.
pub(crate) fn keep_this_thread_to(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is an empty set; cpu is below CPU_SETSIZE.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut one) };
    set_this_thread(&one)
}
