//! `kernbench-host sweep --slurm` against a real single-node Slurm cluster
//! that this test starts on this machine (Debian's slurm-wlm and munge:
//! munged, slurmctld and slurmd in a temporary directory, on free ports):
//! a job array submitted, waited for and collected gives the table of the
//! same sweep run locally, byte for byte; a task cancelled before it ran
//! is named by `collect` (job and task id, no log) and the re-run it
//! prints fixes it. If the cluster cannot start, the test fails saying
//! why: it is never skipped.

use crate::common;
use common::{fails, kb, ok};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SWEEP: &str = "\
bench: ccl_allreduce
args: -b 1K -e 4K -f 4
axes:
  system.inter_sip_link.bandwidth_gbps: [50, 200]
  defaults.algorithm: [ring_allreduce, tree_allreduce]
";

/// A single-node Slurm cluster; stopped (and its daemons killed) on drop.
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

fn find(bin: &str) -> PathBuf {
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] {
        let p = Path::new(d).join(bin);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{bin} not found: this test needs Debian's slurm-wlm and munge \
         (apt-get install slurm-wlm munge; .ci/run installs them)"
    );
}

fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// MemTotal of /proc/meminfo, MB.
fn mem_total_mb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(1024, |kb| kb / 1024)
}

impl Cluster {
    fn start() -> Cluster {
        // slurmd runs jobs as their user and needs root for that.
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(
            euid, 0,
            "the Slurm test starts slurmd, which needs root (this test runs as uid {euid})"
        );
        let dir = tempfile::Builder::new()
            .prefix("kb-slurm")
            .tempdir()
            .unwrap();
        let d = dir.path();
        // munged wants its socket's directory reachable by everyone.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        for sub in ["state", "spool", "log"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        let key = d.join("munge.key");
        let mut bytes = [0u8; 1024];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").unwrap(),
            &mut bytes,
        )
        .unwrap();
        std::fs::write(&key, bytes).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
        let sock = d.join("munge.sock");
        run_ok(
            Command::new(find("munged"))
                .arg("--force")
                .arg(format!("--socket={}", sock.display()))
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--log-file={}", d.join("log/munged.log").display()))
                .arg(format!("--pid-file={}", d.join("munged.pid").display()))
                .arg(format!("--seed-file={}", d.join("munged.seed").display())),
            "munged",
        );
        let host = run_ok(&mut Command::new("hostname"), "hostname");
        let conf = d.join("slurm.conf");
        let p = |s: &str| d.join(s).display().to_string();
        // Two different ports: a controller and a node daemon on one port
        // never come up.
        let ports: [u16; 2] = common::free_ports();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=kbtest\n\
                 SlurmctldHost=localhost(127.0.0.1)\n\
                 SlurmctldPort={ctld}\n\
                 SlurmdPort={slurmd}\n\
                 SlurmUser=root\n\
                 SlurmdUser=root\n\
                 AuthType=auth/munge\n\
                 CredType=cred/munge\n\
                 AuthInfo=socket={sock}\n\
                 StateSaveLocation={state}\n\
                 SlurmdSpoolDir={spool}\n\
                 SlurmctldPidFile={ctld_pid}\n\
                 SlurmdPidFile={slurmd_pid}\n\
                 SlurmctldLogFile={ctld_log}\n\
                 SlurmdLogFile={slurmd_log}\n\
                 ProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\n\
                 JobCompType=jobcomp/none\n\
                 SchedulerType=sched/builtin\n\
                 SelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_Core_Memory\n\
                 ReturnToService=2\n\
                 MpiDefault=none\n\
                 SwitchType=switch/none\n\
                 NodeName=kbnode NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN\n\
                 PartitionName=kb Nodes=kbnode Default=YES MaxTime=INFINITE State=UP\n",
                ctld = ports[0],
                slurmd = ports[1],
                sock = sock.display(),
                state = p("state"),
                spool = p("spool"),
                ctld_pid = p("slurmctld.pid"),
                slurmd_pid = p("slurmd.pid"),
                ctld_log = p("log/slurmctld.log"),
                slurmd_log = p("log/slurmd.log"),
                host = host.trim(),
                // What the machine has (a node claiming more is drained).
                cpus = std::thread::available_parallelism().map_or(1, |n| n.get()),
                mem_mb = (mem_total_mb() / 2).clamp(512, 8000),
            ),
        )
        .unwrap();
        let c = Cluster { dir, conf };
        run_ok(
            Command::new(find("slurmctld")).arg("-f").arg(&c.conf),
            "slurmctld",
        );
        run_ok(
            Command::new(find("slurmd"))
                .arg("-f")
                .arg(&c.conf)
                .args(["-N", "kbnode"]),
            "slurmd",
        );
        // Up when the node is idle.
        let start = Instant::now();
        loop {
            let out = c.cmd("sinfo").args(["-h", "-o", "%T"]).output();
            if let Ok(o) = out {
                if String::from_utf8_lossy(&o.stdout).trim() == "idle" {
                    break;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the Slurm cluster did not come up in 60 s:\n{}",
                c.logs()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        c
    }

    /// A Slurm client command for this cluster.
    fn cmd(&self, bin: &str) -> Command {
        let mut c = Command::new(find(bin));
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// kernbench-host, talking to this cluster.
    fn kb(&self) -> Command {
        let mut c = kb();
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for f in ["log/slurmctld.log", "log/slurmd.log", "log/munged.log"] {
            let t = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
            let lines: Vec<&str> = t.lines().collect();
            s += &format!(
                "--- {f}\n{}\n",
                lines[lines.len().saturating_sub(15)..].join("\n")
            );
        }
        s
    }

    /// Wait until job `job` has left the queue.
    fn wait(&self, job: &str) {
        let start = Instant::now();
        loop {
            let out = run_ok(
                self.cmd("squeue").args(["-h", "-j", job, "-o", "%i %T"]),
                "squeue",
            );
            if out.trim().is_empty() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "job {job} still queued after 180 s: {out}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.cmd("scontrol").arg("shutdown").output();
        std::thread::sleep(Duration::from_millis(500));
        for pid in ["slurmd.pid", "slurmctld.pid", "munged.pid"] {
            if let Ok(p) = std::fs::read_to_string(self.dir.path().join(pid)) {
                if let Ok(p) = p.trim().parse::<i32>() {
                    // SAFETY: a signal to a daemon this test started.
                    unsafe {
                        libc::kill(p, libc::SIGTERM);
                    }
                }
            }
        }
    }
}

/// The job id in "submitted job array <id> ...".
fn job_of(stdout: &str) -> String {
    common::word_after(stdout, "array")
}

fn csv(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("results.csv")).unwrap()
}

#[test]
fn a_job_array_gives_the_local_table_and_a_killed_task_is_named_and_rerun() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("algos.yaml");
    std::fs::write(&file, SWEEP).unwrap();
    let local = tmp.path().join("local");
    ok(kb().arg("sweep").arg(&file).arg("-o").arg(&local));

    let cluster = Cluster::start();

    // Submitted, waited for, collected: the local table.
    let a = tmp.path().join("a");
    let out = ok(cluster
        .kb()
        .arg("sweep")
        .arg(&file)
        .arg("-o")
        .arg(&a)
        .args(["--slurm", "--submit", "--points-per-task", "2"]));
    let job = job_of(&out);
    cluster.wait(&job);
    ok(cluster.kb().args(["sweep", "collect"]).arg(&a));
    assert_eq!(
        csv(&a),
        csv(&local),
        "the cluster's table differs from the local one"
    );
    let script = std::fs::read_to_string(a.join("slurm/sweep.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --array=0-1"), "{script}");
    assert!(script.contains("#SBATCH --mem="), "{script}");

    // One point per task, held; task 2 cancelled before it runs.
    let b = tmp.path().join("b");
    ok(cluster
        .kb()
        .arg("sweep")
        .arg(&file)
        .arg("-o")
        .arg(&b)
        .args(["--slurm", "--points-per-task", "1"]));
    let out = ok(cluster
        .kb()
        .args(["sweep", "collect"])
        .arg(&b)
        .args(["--resubmit", "--sbatch-arg=--hold"]));
    let job = job_of(&out);
    run_ok(cluster.cmd("scancel").arg(format!("{job}_2")), "scancel");
    run_ok(
        cluster.cmd("scontrol").args(["release", &job]),
        "scontrol release",
    );
    cluster.wait(&job);
    let err = fails(cluster.kb().args(["sweep", "collect"]).arg(&b));
    assert!(
        err.contains(&format!(
            "point 2 (system.inter_sip_link.bandwidth_gbps=200, defaults.algorithm=ring_allreduce): no result from job {job} task 2"
        )),
        "{err}"
    );
    assert!(err.contains("--array=2 "), "{err}");
    assert!(err.contains("1 of 4 points have no result"), "{err}");
    for other in ["point 0 ", "point 1 ", "point 3 "] {
        assert!(!err.contains(other), "{other} named: {err}");
    }
    // The re-run it prints, then the table is whole and the local one.
    let out = ok(cluster
        .kb()
        .args(["sweep", "collect"])
        .arg(&b)
        .arg("--resubmit"));
    let rerun = job_of(&out);
    assert!(out.contains("(tasks 2)"), "{out}");
    cluster.wait(&rerun);
    ok(cluster.kb().args(["sweep", "collect"]).arg(&b));
    assert_eq!(csv(&b), csv(&local));
    let rec = std::fs::read_to_string(b.join("points/0000002.json")).unwrap();
    assert!(
        rec.contains(&format!("\"slurm\":{{\"job\":\"{rerun}\",\"task\":2}}")),
        "{rec}"
    );
}
