//! The compatibility contract of the guest interface (`wit/`): which
//! `kernbench:sim` versions this host runs, and the message when it does
//! not (docs/components.md, "Compatibility").
//!
//! The package follows semantic versioning as the component model applies
//! it (and wasmtime's linker resolves it): within one compatible line —
//! the same MAJOR from 1.0 on, the same 0.MINOR before — a later version
//! only adds (new functions, interfaces and types, each marked `@since`);
//! anything else — a changed function, a case added to an enum or variant,
//! a field or a parameter (wasmtime type-checks every imported function
//! exactly: a guest that only ever sends a 5-case enum still fails to link
//! against a 6-case one) — starts the next line. This host serves every
//! released version, each line by its last release (a guest of an earlier
//! version of the line imports a subset of it) and the lines before
//! today's by adapters (`runtime::shapes`). Anything else — an unreleased
//! version, one newer than the host's, a pre-release that is not exactly
//! the host's, no version — is refused before instantiation with both
//! versions and what to do. Every release is frozen under
//! `wit/history/<version>/` (a test pins their digests and keeps the live
//! file equal to its version's copy), and guests built against each one
//! (tests/fixtures/compat) prove it still runs.

use semver::Version;

/// The WIT package this host implements.
pub const WIT_PACKAGE: &str = "kernbench:sim";
/// Its version (the `package` line of `wit/kernbench.wit`).
pub const WIT_VERSION: &str = "0.8.4";
/// Released versions in semver order, each frozen under
/// `wit/history/<version>/`; the last is also `wit/kernbench.wit`.
///
/// The interface changed incompatibly five times while it was labelled
/// `0.1.0`; those states are 0.1.0 (as first released) to 0.6.0, and the
/// labels 0.1.1 to 0.1.3 were released on top of the last of them (they
/// are the interfaces of 0.6.1 to 0.6.3). Components in the wild carry
/// the old labels; the host serves each state (`runtime::shapes`).
pub const RELEASED: &[&str] = &[
    "0.1.0", "0.1.1", "0.1.2", "0.1.3", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.6.1",
    "0.6.2", "0.6.3", "0.6.4", "0.6.5", "0.7.0", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4",
];

/// Why a component's WIT version is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    #[error(
        "imports {WIT_PACKAGE} without a version ({name}); this host implements \
         {WIT_PACKAGE}@{WIT_VERSION}: rebuild the component against the guest SDK of this KernBench"
    )]
    Unversioned { name: String },
    #[error(
        "built against {WIT_PACKAGE}@{guest}, which is not a version ({name}); this host implements \
         {WIT_PACKAGE}@{WIT_VERSION}"
    )]
    Malformed { name: String, guest: String },
    #[error(
        "built against {WIT_PACKAGE}@{guest}, newer than this host's {WIT_PACKAGE}@{WIT_VERSION} \
         (kernbench-host {host_release}): it may call what this host lacks. Upgrade kernbench-host \
         to a release that implements {WIT_PACKAGE}@{guest} or later, or rebuild the component \
         against this release's guest SDK",
        host_release = env!("CARGO_PKG_VERSION")
    )]
    Newer { guest: String },
    #[error(
        "built against {WIT_PACKAGE}@{guest}, but this host implements {WIT_PACKAGE}@{WIT_VERSION} \
         and runs guests of {accepted} only ({why}). Rebuild the component against this release's \
         guest SDK, or run it with a KernBench release that implements {WIT_PACKAGE}@{guest}",
        accepted = accepted_range()
    )]
    OtherLine { guest: String, why: &'static str },
}

/// `kernbench:sim@<version>`.
pub fn package_at(version: &str) -> String {
    format!("{WIT_PACKAGE}@{version}")
}

/// `kernbench:sim/<interface>@<version>`: the name a component imports an
/// interface of the package by.
pub fn interface_at(interface: &str, version: &str) -> String {
    format!("{WIT_PACKAGE}/{interface}@{version}")
}

/// `torch.__version__`: `kernbench 0.1.0 (kernbench:sim@0.8.4)`.
pub fn host_description() -> String {
    format!(
        "kernbench {} ({WIT_PACKAGE}@{WIT_VERSION})",
        env!("CARGO_PKG_VERSION")
    )
}

/// The versions this host accepts, as a range (`0.1.0 ..= 0.8.4`):
/// every released version in it.
pub fn accepted_range() -> String {
    format!("{WIT_PACKAGE}@{} ..= {WIT_VERSION}", RELEASED[0])
}

fn host_version() -> Version {
    Version::parse(WIT_VERSION).expect("WIT_VERSION is a version")
}

/// The semver-compatible line of the component model: same major from
/// 1.0 on, same 0.minor before, the exact version for 0.0.x.
fn same_line(a: &Version, b: &Version) -> bool {
    match (a.major, b.major) {
        (0, 0) if a.minor == 0 || b.minor == 0 => a.minor == b.minor && a.patch == b.patch,
        (0, 0) => a.minor == b.minor,
        (x, y) => x == y,
    }
}

/// A linker's refusal of a component (wasmtime's words: "component
/// imports instance `I`, but a matching implementation was not found in
/// the linker: instance export `F` has the wrong type: D"), said for its
/// author: which function, the type difference, and what to rebuild
/// against. None when `raw` is not such a refusal.
///
/// A component that names a version this host accepts yet imports a
/// type no state of that version had (a hand-edited WIT, an unreleased
/// snapshot) links nowhere.
pub fn explain_link_failure(raw: &str) -> Option<String> {
    let (_, rest) = raw.split_once("component imports instance `")?;
    let (instance, rest) = rest.split_once('`')?;
    let (_, rest) = rest.split_once("instance export `")?;
    let (function, rest) = rest.split_once('`')?;
    let detail = rest
        .split_once("has the wrong type: ")
        .map_or(rest.trim(), |(_, d)| d.lines().next().unwrap_or("").trim());
    let guest = instance.split_once('@').map_or("(no version)", |(_, v)| v);
    Some(format!(
        "it imports `{function}` of `{instance}` with a type this host does not serve ({detail}). \
         No released state of {WIT_PACKAGE}@{guest} has that type: kernbench-host {} serves every \
         released version, {}, as frozen under wit/history/. Rebuild the component against this \
         release's guest SDK ({WIT_PACKAGE}@{WIT_VERSION})",
        env!("CARGO_PKG_VERSION"),
        accepted_range(),
    ))
}

/// How a guest's version relates to this host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// Built against this host's version.
    Current,
    /// Built against an earlier released version.
    Older(String),
}

/// The verdict on one import or export name of a component. Names outside
/// `kernbench:sim` (WASI, plain function exports) are not this contract's
/// business: None.
pub fn check_name(name: &str) -> Option<Result<Accepted, Incompatible>> {
    let rest = name.strip_prefix(WIT_PACKAGE)?.strip_prefix('/')?;
    let Some((_, ver)) = rest.split_once('@') else {
        return Some(Err(Incompatible::Unversioned {
            name: name.to_string(),
        }));
    };
    let Ok(guest) = Version::parse(ver) else {
        return Some(Err(Incompatible::Malformed {
            name: name.to_string(),
            guest: ver.to_string(),
        }));
    };
    Some(check_version(&guest))
}

/// The verdict on a guest built against `guest`.
pub fn check_version(guest: &Version) -> Result<Accepted, Incompatible> {
    let host = host_version();
    if *guest == host {
        return Ok(Accepted::Current);
    }
    let shown = guest.to_string();
    if !guest.pre.is_empty() || !host.pre.is_empty() {
        return Err(Incompatible::OtherLine {
            guest: shown,
            why: "a pre-release matches only itself",
        });
    }
    if *guest > host {
        return Err(Incompatible::Newer { guest: shown });
    }
    let released = || {
        RELEASED
            .iter()
            .map(|r| Version::parse(r).expect("RELEASED holds versions"))
    };
    match released().filter(|r| same_line(guest, r)).max() {
        Some(last) if *guest <= last => {}
        Some(_) => {
            return Err(Incompatible::OtherLine {
                guest: shown,
                why: "no release has that version; a line's later releases only add, so its \
                      last release serves its earlier ones",
            })
        }
        None => {
            return Err(Incompatible::OtherLine {
                guest: shown,
                why: if host.major == 0 {
                    "no release is on that line: before 1.0 each 0.MINOR line is incompatible \
                     with the others"
                } else {
                    "no release is on that line: each MAJOR line is incompatible with the others"
                },
            })
        }
    }
    Ok(Accepted::Older(shown))
}

/// The verdict on a whole component from its import and export names:
/// the first refusal, else the oldest version it was built against (None:
/// it names no `kernbench:sim` interface at all).
pub fn check_component<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<Option<Accepted>, Incompatible> {
    let mut verdict: Option<Accepted> = None;
    for n in names {
        match check_name(n) {
            None => {}
            Some(Err(e)) => return Err(e),
            Some(Ok(a)) => {
                verdict = Some(match (verdict, a) {
                    (Some(Accepted::Older(v)), _) | (_, Accepted::Older(v)) => Accepted::Older(v),
                    _ => Accepted::Current,
                })
            }
        }
    }
    Ok(verdict)
}

#[cfg(test)]
mod link_tests {
    #[test]
    fn a_linker_refusal_names_the_function_the_type_and_the_fix() {
        let raw = "component imports instance `kernbench:sim/tl@0.1.0`, but a matching \
                   implementation was not found in the linker: instance export `binary` has the \
                   wrong type: type mismatch with parameters: expected enum of 6 names, found 5 names";
        let said = super::explain_link_failure(raw).unwrap();
        assert!(
            said.contains("it imports `binary` of `kernbench:sim/tl@0.1.0`")
                && said.contains("expected enum of 6 names, found 5 names")
                && said.contains("Rebuild the component against this release's guest SDK"),
            "{said}"
        );
        assert_eq!(super::explain_link_failure("wasm trap: unreachable"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    /// The interface as a linker sees it: the text without comments and
    /// blank lines (an edited doc comment changes no type).
    fn interface_text(wit: &str) -> String {
        wit.lines()
            .map(|l| l.find("//").map_or(l, |i| &l[..i]).trim())
            .filter(|l| !l.is_empty())
            .fold(String::new(), |acc, l| acc + l + "\n")
    }

    fn digest(text: &str) -> String {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(text.as_bytes()))
    }

    /// Every released version's interface, frozen: the SHA-256 of its
    /// [`interface_text`]. A release never changes; a new one is added.
    const FROZEN: &[(&str, &str)] = &[
        (
            "0.1.0",
            "8525c1378a4ba25ef8d5deeb220a3ad29c3f14731e93e5fda9f9c2ce6779947c",
        ),
        (
            "0.1.1",
            "f4da8be0985484d674a89d3a4b8d0d9794ccabdc3c91de38b0b33a4003bbeac6",
        ),
        (
            "0.1.2",
            "098cd276059adc3fb6f40b072fe371aa4c8bf91727e49f565d112404949982e7",
        ),
        (
            "0.1.3",
            "17d533cb587f5b20f36c65bcab030ba614df47512148a3ca833bc5700664238e",
        ),
        (
            "0.2.0",
            "9f4411725e1242a4a584a95b536db77730352260fe02f282a4f6a0d7b0e158ce",
        ),
        (
            "0.3.0",
            "7ff97549ff58bc18b379902e1a64858e339169b7d9287aa67fd292a171f09d8c",
        ),
        (
            "0.4.0",
            "90937d224a359af20bc73aeb7ef2a3a059eb8d9e9f5c30d3d0e7084f30eacb2f",
        ),
        (
            "0.5.0",
            "557aa26887d4cfa41cad191f946301b7b57f4e60fe41d3749470459bf628dba1",
        ),
        (
            "0.6.0",
            "25670f4c51313d9dfe08c07e6a8f285b1b1f7edc4ac517cc956b75280e153727",
        ),
        (
            "0.6.1",
            "b1582d4c367a61ea83424a67c4639e4f757d7810d83b358b915904e710ffacfb",
        ),
        (
            "0.6.2",
            "502305450cc3da1b8e1ccd8441d2515f2e6e214106e8f86f94675838d2bd3619",
        ),
        (
            "0.6.3",
            "844a525b744808297b3b8b96d4977a33d2c8e7d2127717cc449dce5e92d82613",
        ),
        (
            "0.6.4",
            "5742869010baba93f041ac57994287018ee264596ee9fb2da9d39f868da02bb9",
        ),
        (
            "0.6.5",
            "71a3e79e3be8bb030e756be4f5e52571ed0fe200f51eb4c00139f9aa7f1edf7d",
        ),
        (
            "0.7.0",
            "92a4f371888f40451c3aec774683cb495592682ef225ed6acd0ced6bf94c5c74",
        ),
        (
            "0.8.0",
            "c0e922b9054c3ca1a21cf80e6e7fce0583b7784f9673530ee7674e2b9dd02d76",
        ),
        (
            "0.8.1",
            "004af65063ae8906ecb90d14aa94700167a1c83c29b8c9c2908ffbba169b2e49",
        ),
        (
            "0.8.2",
            "07ceadbee6abc144853fcef0a8524c4eb17b52a039571793ccb85d71d6f19ab0",
        ),
        (
            "0.8.3",
            "91a5770494176a4f3967f3c6cf7b4ea15d38938a6bf53e0dbb9c104f9801fc87",
        ),
        (
            "0.8.4",
            "c5fa732611264f0789e8cafb8ff5fe722253b47d5a30836a9b155240d6e0dca8",
        ),
    ];

    /// CI's guard on the contract: `wit/` does not change without a new
    /// version and a frozen copy, and a frozen copy never changes.
    #[test]
    fn the_wit_changes_only_with_a_new_version_and_a_frozen_copy() {
        let live = include_str!("../../../wit/kernbench.wit");
        assert!(
            live.contains(&format!("package {WIT_PACKAGE}@{WIT_VERSION};")),
            "wit/kernbench.wit must declare {WIT_PACKAGE}@{WIT_VERSION} (compat::WIT_VERSION)"
        );
        assert_eq!(RELEASED.last(), Some(&WIT_VERSION));
        assert_eq!(
            RELEASED,
            FROZEN
                .iter()
                .map(|(v, _)| *v)
                .collect::<Vec<_>>()
                .as_slice(),
            "every released version has a pinned digest in FROZEN"
        );
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../wit/history");
        for (r, pinned) in FROZEN {
            let frozen = std::fs::read_to_string(format!("{root}/{r}/kernbench.wit"))
                .unwrap_or_else(|e| panic!("wit/history/{r}/kernbench.wit: {e}"));
            assert!(
                frozen.contains(&format!("package {WIT_PACKAGE}@{r};")),
                "{r}"
            );
            assert_eq!(
                digest(&interface_text(&frozen)),
                *pinned,
                "wit/history/{r}/kernbench.wit changed: a released interface is frozen; \
                 restore it (git checkout) and give the change a new version"
            );
        }
        assert_eq!(
            interface_text(live),
            interface_text(
                &std::fs::read_to_string(format!("{root}/{WIT_VERSION}/kernbench.wit")).unwrap()
            ),
            "wit/kernbench.wit differs from its frozen copy wit/history/{WIT_VERSION}: a change \
             to the interface needs a new version (the next 0.MINOR for a change, the next patch \
             for an addition marked @since), wit/history/<version>/kernbench.wit, an entry in \
             RELEASED and its digest in FROZEN (docs/components.md, \"Compatibility\")"
        );
    }

    #[test]
    fn interface_text_ignores_comments_and_blank_lines_only() {
        let a = "/// doc\ninterface t {\n\n    f: func(); // why\n}\n";
        let b = "interface t {\n  f: func();\n}";
        assert_eq!(interface_text(a), interface_text(b));
        assert_ne!(
            interface_text(a),
            interface_text("interface t {\n f: func(x: u8);\n}")
        );
    }

    #[test]
    fn the_javascript_sdk_imports_the_current_version() {
        // JavaScript names the interface it imports in an import statement.
        let js = include_str!("../../../guest-sdk/js/kernbench.js");
        assert!(
            js.contains(&format!("\"{WIT_PACKAGE}/tl@{WIT_VERSION}\"")),
            "guest-sdk/js/kernbench.js must import {WIT_PACKAGE}/tl@{WIT_VERSION}"
        );
    }

    #[test]
    fn every_released_version_is_accepted() {
        assert_eq!(check_version(&v(WIT_VERSION)), Ok(Accepted::Current));
        for r in &RELEASED[..RELEASED.len() - 1] {
            assert_eq!(check_version(&v(r)), Ok(Accepted::Older(r.to_string())));
        }
        assert_eq!(
            accepted_range(),
            format!("{WIT_PACKAGE}@0.1.0 ..= {WIT_VERSION}")
        );
    }

    #[test]
    fn newer_unreleased_and_pre_releases_are_refused_with_both_versions() {
        // The next patch of today's version, and later lines.
        let (line, patch) = WIT_VERSION.rsplit_once('.').unwrap();
        let next = format!("{line}.{}", patch.parse::<u32>().unwrap() + 1);
        for g in [next.as_str(), "0.9.0", "1.0.0"] {
            let newer = check_version(&v(g)).unwrap_err().to_string();
            assert!(
                newer.contains(&format!(
                    "@{g}, newer than this host's kernbench:sim@{WIT_VERSION}"
                )) && newer.contains("Upgrade kernbench-host"),
                "{newer}"
            );
        }
        for (g, why) in [
            ("0.2.1", "no release has that version"),
            ("0.6.9", "no release has that version"),
            ("0.1.5", "no release has that version"),
            ("0.0.9", "no release is on that line"),
            ("0.6.3-rc.1", "a pre-release matches only itself"),
        ] {
            let e = check_version(&v(g)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("built against kernbench:sim@{g}"))
                    && e.contains(&format!("implements kernbench:sim@{WIT_VERSION}"))
                    && e.contains(&format!("0.1.0 ..= {WIT_VERSION}"))
                    && e.contains(why)
                    && e.contains("Rebuild"),
                "{g}: {e}"
            );
        }
    }

    #[test]
    fn lines_follow_the_component_model() {
        assert!(same_line(&v("1.2.0"), &v("1.0.3")));
        assert!(!same_line(&v("1.0.0"), &v("2.0.0")));
        assert!(same_line(&v("0.3.0"), &v("0.3.7")));
        assert!(!same_line(&v("0.3.0"), &v("0.4.0")));
        assert!(!same_line(&v("0.0.1"), &v("0.0.2")), "0.0.x: exact only");
    }

    #[test]
    fn a_component_is_judged_by_its_kernbench_names_only() {
        let tl = format!("kernbench:sim/tl@{WIT_VERSION}");
        let names = [
            "wasi:cli/stdout@0.2.6",
            tl.as_str(),
            "kernbench:sim/ccl@0.1.0",
            "kernel",
        ];
        assert_eq!(
            check_component(names),
            Ok(Some(Accepted::Older("0.1.0".into())))
        );
        assert_eq!(check_component(["kernel"]), Ok(None));
        assert!(matches!(
            check_component(["kernbench:sim/tl"]),
            Err(Incompatible::Unversioned { .. })
        ));
        assert!(matches!(
            check_component(["kernbench:sim/tl@x.y"]),
            Err(Incompatible::Malformed { .. })
        ));
    }
}
