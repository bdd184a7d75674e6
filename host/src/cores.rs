//! What this process may use of the machine's cores: the one question the
//! layers that start a helper thread (the router's searches, the data
//! plane, the kernel recorder) ask before they do.

/// Whether this process may use more than one core (asked once: the
/// answer reads the affinity mask and cgroup files).
pub fn more_than_one_core() -> bool {
    static CORES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}
