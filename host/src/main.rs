//! `kernbench-host`: run benches on the simulated AHBM machine.

use anyhow::Result;
use clap::{Parser, Subcommand};
mod commands;
mod progress;

use commands::topology::TopoCmd;
use std::path::PathBuf;

#[global_allocator]
static HEAP: kernbench::heap::SplitHeap = kernbench::heap::SplitHeap;

#[derive(Parser)]
#[command(
    name = "kernbench-host",
    version,
    about = "Run collective-communication benches on the simulated AHBM accelerator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// One value per process, parsed once: boxing `Run` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Run a bench (built-in name or path to a .wasm component).
    Run(commands::run::RunArgs),
    /// Draw busbw and time against size from runs' JSON reports
    /// (`run ... --format json > a.json`), one line per run, collective
    /// and algorithm: how collectives and algorithms are compared.
    Plot {
        /// JSON reports of `kernbench-host run --format json`.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// The SVG file to write.
        #[arg(short, long, default_value = "busbw.svg")]
        output: PathBuf,
        /// The figure's title.
        #[arg(long, default_value = "KernBench collectives")]
        title: String,
    },
    /// What a component is (world, WIT version and whether this host runs
    /// it, metadata, producers, imports and exports, size, digest, what an
    /// algorithm implements) and whether its compiled code is cached.
    Inspect(commands::components::InspectArgs),
    /// The compiled-component cache: `show` where it is and what it
    /// holds, `clear` it.
    Cache {
        #[command(subcommand)]
        cmd: commands::components::CacheCmd,
    },
    /// List the built-in benches and algorithms, or (`--installed`) the
    /// installed components.
    List {
        #[arg(long)]
        ccl: Option<PathBuf>,
        /// The components installed with `install` instead.
        #[arg(long)]
        installed: bool,
    },
    /// Push a component to an OCI registry (the wasm artifact format `wkg`
    /// uses), with its metadata as annotations.
    Publish {
        /// The component (.wasm).
        file: PathBuf,
        /// Where: registry/repository:tag (e.g. ghcr.io/me/ring:1.0).
        reference: String,
    },
    /// Pull a component from an OCI registry (by tag or @sha256 digest),
    /// check its digests and write it to a file.
    Pull {
        reference: String,
        /// The file to write [default: <its name>.wasm].
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Install a component (a .wasm file or an OCI reference) into the
    /// per-user components directory, so that benches and ccl.yaml
    /// `module:` entries can name it.
    Install {
        /// A .wasm file or registry/repository:tag|@digest.
        source: String,
        /// Install under this name [default: the name it carries].
        #[arg(long)]
        name: Option<String>,
    },
    /// Remove an installed component.
    Remove { name: String },
    /// Run a bench over the product (or zip) of axes of topology.yaml and
    /// ccl.yaml keys, algorithms and bench arguments, on every core here or
    /// as a Slurm job array; one tidy table (CSV, JSON lines) of every
    /// point and size, and a plot (see docs/sweeps.md).
    Sweep(commands::sweep::SweepArgs),
    /// Inspect or check a topology.
    Topology {
        #[command(subcommand)]
        cmd: TopoCmd,
    },
    /// Build an algorithm or bench written in C (.c), Python (.py) or
    /// JavaScript (.js) into a component (see docs/guest-python.md,
    /// guest-javascript.md, guest-c.md).
    Build {
        /// The source: an algorithm in C or JavaScript, or an algorithm or
        /// bench in Python.
        source: PathBuf,
        /// The component to write.
        #[arg(short, long)]
        output: PathBuf,
        /// What the source is.
        #[arg(long, value_enum, default_value = "algorithm")]
        kind: kernbench::guest_build::Kind,
        /// Build afresh and keep nothing. Otherwise a Python or JavaScript
        /// source whose inputs (its project's sources, the SDK, the WIT,
        /// the tool) have not changed gets the bytes it built to before
        /// (also: KERNBENCH_NO_CACHE set).
        #[arg(long)]
        no_cache: bool,
    },
    /// Start a new algorithm or bench project that builds and runs as it is
    /// (the seed's ring all-reduce, or its ccl_hello bench), with a README
    /// of its commands.
    New {
        /// algorithm or bench.
        #[arg(value_enum)]
        kind: kernbench::guest_build::Kind,
        /// The project's name (a directory, module and ccl.yaml entry).
        name: String,
        #[arg(long, value_enum)]
        lang: kernbench::guest_build::scaffold::NewLang,
        /// Where to create it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// The toolchains of the Python, JavaScript and C guests: `install`
    /// them into the per-user directory, `show` where `build` looks.
    Toolchains {
        #[command(subcommand)]
        cmd: commands::toolchains::ToolchainsCmd,
    },
}

fn main() -> std::process::ExitCode {
    kernbench::heap::keep_freed_memory();
    // Rust ignores SIGPIPE, so printing into a closed pipe (`| head`)
    // panics; restore the default of command-line tools: end quietly.
    #[cfg(unix)]
    // SAFETY: at the start of main, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match real_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<()> {
    tracing_subscriber::fmt()
        // KERNBENCH_LOG picks what is shown; by default our warnings, and
        // nothing of the TLS verifier (its errors come back as ours).
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KERNBENCH_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,rustls_platform_verifier=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Run(args) => commands::run::run(args)?,
        Cmd::Plot {
            reports,
            output,
            title,
        } => commands::plot::run(&reports, &output, &title)?,
        Cmd::List {
            installed: true, ..
        } => commands::components::list_installed()?,
        Cmd::Publish { file, reference } => commands::components::publish(&file, &reference)?,
        Cmd::Pull { reference, output } => commands::components::pull(&reference, output)?,
        Cmd::Install { source, name } => commands::components::install(&source, name.as_deref())?,
        Cmd::Remove { name } => commands::components::remove(&name)?,
        Cmd::List { ccl, .. } => commands::list::run(ccl.as_deref())?,
        Cmd::Topology { cmd } => commands::topology::run(cmd)?,
        Cmd::Toolchains { cmd } => commands::toolchains::run(cmd)?,
        Cmd::Sweep(args) => commands::sweep::run(args)?,
        Cmd::Cache { cmd } => commands::components::run_cache(cmd)?,
        Cmd::Inspect(args) => commands::components::inspect(args)?,
        Cmd::Build {
            source,
            output,
            kind,
            no_cache,
        } => commands::build::run(&source, &output, kind, no_cache)?,
        Cmd::New {
            kind,
            name,
            lang,
            dir,
        } => commands::new::run(kind, &name, lang, &dir)?,
    }
    Ok(())
}

#[cfg(test)]
mod cli_reference {
    use super::Cli;

    /// The CLI reference page, generated from the clap definitions above.
    fn generated() -> String {
        let body = clap_markdown::help_markdown_custom::<Cli>(
            &clap_markdown::MarkdownOptions::new()
                .title("CLI reference".into())
                .show_footer(false),
        );
        // Help texts say `<name>.wasm`: outside code spans that is an
        // HTML tag to a Markdown renderer.
        let body: String = body
            .lines()
            .map(|l| {
                l.split('`')
                    .enumerate()
                    .map(|(i, part)| {
                        if i % 2 == 0 {
                            part.replace('<', "&lt;").replace('>', "&gt;")
                        } else {
                            part.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("`")
                    + "\n"
            })
            .collect();
        format!(
            "<!-- Generated from host/src/main.rs by the test `cli_reference`: do not edit.\n     \
             Regenerate: KERNBENCH_BLESS=1 cargo test -p kernbench-host --bin kernbench-host cli_reference -->\n\n{body}"
        )
    }

    /// docs/cli.md is what the clap definitions say: a new command, option
    /// or help text fails this test until the page is regenerated (with
    /// `KERNBENCH_BLESS=1`, which rewrites it).
    #[test]
    fn cli_reference_page_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
        let want = generated();
        if std::env::var_os("KERNBENCH_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/cli.md is stale (or missing): the CLI changed. Regenerate it with\n  \
             KERNBENCH_BLESS=1 cargo test -p kernbench-host --bin kernbench-host cli_reference\n\
             and commit the page."
        );
    }
}
