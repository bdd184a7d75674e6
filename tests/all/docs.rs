//! The front door holds: README.md stays short and its tour runs, the book
//! under docs/ is complete and its links resolve, every design record the
//! code cites has a page, and commit hashes stay in the history page.
//!
//! Deliberately free of the `kernbench` library: this binary links only
//! std and the Markdown parser, and drives the CLI as a user does.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every Markdown file of the docs: README, CHANGELOG, CONTRIBUTING and
/// the book.
fn markdown_files() -> Vec<PathBuf> {
    let r = root();
    let mut v: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "CONTRIBUTING.md"]
        .iter()
        .map(|f| r.join(f))
        .collect();
    let mut book: Vec<PathBuf> = std::fs::read_dir(r.join("docs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    book.sort();
    v.extend(book);
    v
}

/// mdBook's heading anchor: lowercase, alphanumerics, `-` and `_` kept,
/// whitespace to `-`, everything else dropped; repeats get `-1`, `-2`.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    let mut heading: Option<String> = None;
    for ev in Parser::new(text) {
        match ev {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            // An explicit anchor: `<a id="name"></a>`.
            Event::Html(h) | Event::InlineHtml(h) => {
                let mut rest: &str = &h;
                while let Some(i) = rest.find("id=\"") {
                    rest = &rest[i + 4..];
                    if let Some(j) = rest.find('"') {
                        out.insert(rest[..j].to_string());
                        rest = &rest[j..];
                    }
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let h = heading.take().unwrap_or_default();
                let id: String = h
                    .trim()
                    .chars()
                    .filter_map(|c| {
                        if c.is_alphanumeric() || c == '_' || c == '-' {
                            Some(c.to_ascii_lowercase())
                        } else if c.is_whitespace() {
                            Some('-')
                        } else {
                            None
                        }
                    })
                    .collect::<String>()
                    .to_lowercase();
                let n = seen.entry(id.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    id.clone()
                } else {
                    format!("{id}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    out
}

/// The link targets of a Markdown text (links and images), outside code.
fn links(text: &str) -> Vec<String> {
    Parser::new(text)
        .filter_map(|ev| match ev {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_link_of_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for dest in links(&text) {
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match dest.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (dest.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {dest} (no such file)", file.display()));
                continue;
            }
            if let Some(a) = anchor {
                if target.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&target)).contains(a)
                {
                    broken.push(format!("{}: {dest} (no such heading)", file.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_summary_lists_every_page_of_the_book() {
    let docs = root().join("docs");
    let summary = read(&docs.join("SUMMARY.md"));
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let pages: BTreeSet<String> = std::fs::read_dir(&docs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    let unlisted: Vec<_> = pages.difference(&listed).collect();
    assert!(
        unlisted.is_empty(),
        "pages missing from docs/SUMMARY.md: {unlisted:?}"
    );
    assert!(listed.len() >= 10, "{listed:?}");
    assert!(docs.join("book.toml").exists());
}

#[test]
fn the_readme_stays_short() {
    let n = read(&root().join("README.md")).len();
    assert!(
        n <= 20_000,
        "README.md is {n} bytes; move detail into docs/ (limit 20,000)"
    );
}

/// A commit hash: 7 to 40 hex digits with at least one letter and one
/// digit, standing alone (not part of a longer word or number).
fn hashes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        let hex = word.len() >= 7
            && word.len() <= 40
            && word
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic());
        if hex {
            out.push(word.to_string());
        }
    }
    out
}

#[test]
fn commit_hashes_live_only_in_the_history_page() {
    let mut found = Vec::new();
    for file in markdown_files() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if name == "performance-history.md" {
            continue;
        }
        for h in hashes(&read(&file)) {
            found.push(format!("{name}: {h}"));
        }
    }
    assert!(
        found.is_empty(),
        "commit hashes outside docs/performance-history.md:\n{}",
        found.join("\n")
    );
}

/// Every design record (`ADR-` and four digits) cited in the sources or the docs.
fn cited_records() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    walk(&p, out);
                }
                continue;
            }
            let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
            if ![
                "rs", "md", "py", "js", "c", "h", "wit", "yaml", "toml", "sh",
            ]
            .contains(&ext)
            {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let mut rest = text.as_str();
            while let Some(i) = rest.find("ADR-") {
                let digits: String = rest[i + 4..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                if digits.len() == 4 {
                    out.insert(format!("adr-{digits}"));
                }
                rest = &rest[i + 4..];
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&root(), &mut out);
    out
}

#[test]
fn every_cited_design_record_has_a_section() {
    let page = anchors(&read(&root().join("docs/design-records.md")));
    let missing: Vec<_> = cited_records()
        .into_iter()
        .filter(|a| !page.contains(a))
        .collect();
    assert!(
        missing.is_empty(),
        "design records cited but without a section (`<a id=\"adr-nnnn\"></a>` and `## ADR-nnnn: title`) in docs/design-records.md: {missing:?}"
    );
}

/// The `kernbench-host …` lines of the README's tour, in order.
fn tour_commands() -> Vec<String> {
    let readme = read(&root().join("README.md"));
    let start = readme
        .find("## A five-minute tour")
        .expect("the README has a tour");
    let tour = &readme[start..];
    let end = tour[3..].find("\n## ").map_or(tour.len(), |i| i + 3);
    let mut cmds = Vec::new();
    let mut in_sh = false;
    for line in tour[..end].lines() {
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if in_sh && line.starts_with("kernbench-host ") {
            cmds.push(line.to_string());
        }
    }
    cmds
}

/// Every command of the README's tour runs, as written, in a fresh
/// directory (with the repository's configs beside it and nothing
/// installed), against the built binary.
#[test]
fn every_command_of_the_readme_tour_runs() {
    let cmds = tour_commands();
    assert!(cmds.len() >= 8, "{cmds:?}");
    let dir = std::env::temp_dir().join(format!("kernbench-readme-tour-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(root().join("configs"), dir.join("configs")).unwrap();
    let data = dir.join("data");
    // The guest toolchains: the ones the test command installed, so that
    // `toolchains install` finds them present instead of fetching them.
    let toolchains = std::env::var_os("KERNBENCH_TOOLCHAINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".toolchains"));
    for cmd in &cmds {
        let words = shell_words(cmd);
        let out = Command::new(env!("CARGO_BIN_EXE_kernbench-host"))
            .args(&words[1..])
            .current_dir(&dir)
            .env("KERNBENCH_DATA_DIR", &data)
            .env("KERNBENCH_TOOLCHAINS", &toolchains)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README tour command failed: {cmd}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Split a one-line command as a shell would (no quoting is used in the
/// tour; a `#` comment ends the line).
fn shell_words(line: &str) -> Vec<String> {
    line.split('#')
        .next()
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_heading_anchors_follow_mdbook() {
    let a = anchors(
        "# The two commands\n## `bound` and `eff`\n## The two commands\n<a id=\"adr-0050\"></a>\n## ADR-0050: Kernels (PE)\n",
    );
    let want: BTreeSet<String> = [
        "the-two-commands",
        "bound-and-eff",
        "the-two-commands-1",
        "adr-0050",
        "adr-0050-kernels-pe",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(a, want);
    assert_eq!(
        hashes("at c1162b0, not 2026 or 0xdeadbeef or abcdefg"),
        vec!["c1162b0"]
    );
}
