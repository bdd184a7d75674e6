//! The `topology` subcommands of the binary (validate, show, export,
//! path) and the loading of a topology file with its layout cache.

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use kernbench::config::{Origin, DEFAULT_TOPOLOGY_YAML};
use kernbench::routing::{metrics, PathRouter};
use kernbench::topology::{self, export, summary, LayoutCache, NodeId, Topology, View};
use kernbench::units::{ps_to_us, PS_PER_NS};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the cube layout cache lives.
#[derive(Args, Clone, Default)]
pub struct LayoutArgs {
    /// cube_mesh.yaml to reuse or write (default: cube_mesh.yaml beside the
    /// topology file; none for the embedded topology).
    #[arg(long, value_name = "FILE")]
    pub layout_cache: Option<PathBuf>,
    /// Compute the cube layout without reading or writing a cache.
    #[arg(long, conflicts_with = "layout_cache")]
    pub no_layout_cache: bool,
}

#[derive(Subcommand)]
pub enum TopoCmd {
    /// Compile a topology.yaml (default: the embedded one); exit status 1
    /// with the bad key named when it is invalid.
    Validate {
        file: Option<PathBuf>,
        #[command(flatten)]
        layout: LayoutArgs,
    },
    /// Summary: nodes and links per kind, diameter, bisection bandwidth.
    Show {
        file: Option<PathBuf>,
        #[command(flatten)]
        layout: LayoutArgs,
        #[arg(long, value_enum, default_value = "table")]
        format: ShowFormat,
    },
    /// Export the graph as Graphviz DOT or JSON.
    Export {
        file: Option<PathBuf>,
        #[command(flatten)]
        layout: LayoutArgs,
        #[arg(long, value_enum, default_value = "dot")]
        format: ExportFormat,
        /// Output file (default: standard output).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// The routed path between two nodes, e.g. `sip0.cube0.pe0 sip1.cube5.hbm0`.
    Path {
        from: String,
        to: String,
        /// topology.yaml (default: the embedded one).
        #[arg(long)]
        topology: Option<PathBuf>,
        #[command(flatten)]
        layout: LayoutArgs,
        /// View: full | noc | m_cpu_dma | cube_local.
        #[arg(long, default_value = "noc")]
        view: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ShowFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    Dot,
    Json,
}

/// Compile a topology file (or the embedded default) through all six
/// stages; returns the machine and the time it took.
pub fn load(file: Option<&Path>, layout: &LayoutArgs) -> Result<(Arc<Topology>, Duration)> {
    let (text, origin) = match file {
        Some(p) => (
            kernbench::files::read_text(p)?,
            Origin::File(p.to_path_buf()),
        ),
        None => (
            DEFAULT_TOPOLOGY_YAML.to_string(),
            Origin::Embedded("topology.yaml"),
        ),
    };
    let cache = match (&layout.layout_cache, layout.no_layout_cache, file) {
        (_, true, _) => LayoutCache::Off,
        (Some(p), _, _) => LayoutCache::File(p.clone()),
        (None, _, Some(f)) => {
            LayoutCache::File(f.parent().unwrap_or(Path::new(".")).join("cube_mesh.yaml"))
        }
        (None, _, None) => LayoutCache::Off,
    };
    let start = Instant::now();
    let t = topology::compile(&text, origin, &cache)?;
    Ok((Arc::new(t), start.elapsed()))
}

/// One line describing the machine.
pub fn machine_line(t: &Topology) -> String {
    let s = &t.spec;
    format!(
        "{} SIPs {} | {}x{} cubes/SIP | NoC {}x{} | {} PEs/cube",
        s.n_sips(),
        s.system.sips.topology.name(),
        s.sip.cube_mesh.w,
        s.sip.cube_mesh.h,
        s.cube.noc.w,
        s.cube.noc.h,
        s.pes_per_cube()
    )
}

fn write_out(
    output: Option<&Path>,
    f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    match output {
        Some(p) => {
            let file = std::fs::File::create(p)
                .with_context(|| format!("cannot create {}", p.display()))?;
            let mut w = std::io::BufWriter::new(file);
            f(&mut w)?;
            w.flush()?;
            eprintln!("# written to {}", p.display());
        }
        None => {
            let mut w = std::io::BufWriter::new(std::io::stdout().lock());
            f(&mut w)?;
            w.flush()?;
        }
    }
    Ok(())
}

pub fn run(cmd: TopoCmd) -> Result<()> {
    match cmd {
        TopoCmd::Validate { file, layout } => {
            let (t, took) = load(file.as_deref(), &layout)?;
            println!(
                "ok: {} | {} nodes, {} directed links | built in {:.1} ms | layout {}",
                machine_line(&t),
                t.node_count(),
                t.links.len(),
                took.as_secs_f64() * 1e3,
                t.layout_source
            );
        }
        TopoCmd::Show {
            file,
            layout,
            format,
        } => {
            let (t, took) = load(file.as_deref(), &layout)?;
            let sum = summary::summarize(&t);
            let router = PathRouter::new(t.clone());
            let diam = metrics::pe_diameter(&router);
            match format {
                ShowFormat::Json => println!(
                    "{}",
                    serde_json::json!({
                        "machine": machine_line(&t),
                        "build_ms": took.as_secs_f64() * 1e3,
                        "layout": t.layout_source.to_string(),
                        "summary": sum,
                        "diameter": diam,
                    })
                ),
                ShowFormat::Table => print!("{}", show_table(&t, &sum, diam.as_ref(), took)),
            }
        }
        TopoCmd::Export {
            file,
            layout,
            format,
            output,
        } => {
            let (t, _) = load(file.as_deref(), &layout)?;
            write_out(output.as_deref(), |w| match format {
                ExportFormat::Dot => export::write_dot(&t, w),
                ExportFormat::Json => export::write_json(&t, w),
            })?;
        }
        TopoCmd::Path {
            from,
            to,
            topology,
            layout,
            view,
        } => {
            let v = View::parse(&view).with_context(|| {
                format!("unknown view '{view}' (full | noc | m_cpu_dma | cube_local)")
            })?;
            let (t, _) = load(topology.as_deref(), &layout)?;
            let parse = |s: &str| s.parse::<NodeId>().map_err(anyhow::Error::msg);
            let r = PathRouter::new(t.clone());
            let path = r.find_path_in(v, parse(&from)?, parse(&to)?)?;
            for (i, &l) in path.iter().enumerate() {
                let link = &t.links[l as usize];
                let (from, to) = t.ends(link);
                println!(
                    "{:>3}  {} -> {}  {}  {:.1} GB/s  {:.3} ns",
                    i + 1,
                    from,
                    to,
                    link.kind.name(),
                    link.rate.giga_per_s(),
                    link.latency as f64 / PS_PER_NS as f64
                );
            }
            let d = r.distance(&path);
            println!(
                "{} hops, latency {:.3} ns, bottleneck {}",
                d.hops,
                d.latency_ps as f64 / PS_PER_NS as f64,
                d.bottleneck
                    .map_or("-".into(), |b| format!("{:.1} GB/s", b.giga_per_s()))
            );
        }
    }
    Ok(())
}

fn show_table(
    t: &Topology,
    sum: &summary::Summary,
    diam: Option<&metrics::Diameter>,
    took: Duration,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "machine:   {}", machine_line(t));
    let _ = writeln!(o, "layout:    {}", t.layout_source);
    let _ = writeln!(
        o,
        "graph:     {} nodes, {} directed links, built in {:.1} ms",
        sum.nodes,
        sum.directed_links,
        took.as_secs_f64() * 1e3
    );
    let _ = writeln!(o, "\nnodes by kind:");
    for (k, n) in &sum.nodes_by_kind {
        let _ = writeln!(o, "  {k:<16} {n:>8}");
    }
    let _ = writeln!(
        o,
        "\nlinks by kind (full duplex):  count      GB/s  latency ns"
    );
    for (k, n) in &sum.links_by_kind {
        let l = t
            .links
            .iter()
            .find(|l| l.kind.name() == *k)
            .expect("counted");
        let _ = writeln!(
            o,
            "  {k:<27} {n:>6} {:>9.1} {:>11.3}",
            l.rate.giga_per_s(),
            l.latency as f64 / PS_PER_NS as f64
        );
    }
    let _ = writeln!(o);
    match diam {
        Some(d) => {
            let _ = writeln!(
                o,
                "diameter:  {} hops, {:.3} us  ({} -> {}; exact, searched from {} PEs)",
                d.hops,
                ps_to_us(d.latency_ps),
                d.from,
                d.to,
                d.sources
            );
        }
        None => {
            let _ = writeln!(o, "diameter:  - (a single PE)");
        }
    }
    match &sum.bisection {
        Some(b) => {
            let _ = writeln!(
                o,
                "bisection: {:.1} GB/s per direction over {} links  ({}; halves {} | {})",
                b.bandwidth_gbps, b.links, b.cut, b.halves.0, b.halves.1
            );
        }
        None => {
            let _ = writeln!(o, "bisection: - (a single router)");
        }
    }
    o
}
