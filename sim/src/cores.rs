//! What this process may use of the machine's cores: the one question the
//! layers that start a helper thread (the router's searches, the data
//! plane, the kernel recorder) ask before they do.

/// The cores this process may use, at least 1 (asked once: the answer
/// reads the affinity mask and cgroup files).
pub fn count() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether this process may use more than one core.
pub fn more_than_one_core() -> bool {
    count() > 1
}
