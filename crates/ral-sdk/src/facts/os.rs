//! The `os` fact: `{name, family, release: {full, major, minor}, distro:
//! {codename, id, release, description}}` (the caller adds
//! `architecture` and `hardware`), from `ROOT/etc/os-release` (or
//! `ROOT/usr/lib/os-release`) and the release files Facter reads beside
//! it: `debian_version` on the Debian family, `redhat-release` on Red
//! Hat's, `alpine-release` on Alpine. Names, families and releases follow
//! Facter 4's rules, its quirks included (Ubuntu's `os.release.major` is
//! `22.04`).

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json};

use super::sources::root_file;
use crate::files::Root;

/// An os-release file's `KEY=value` pairs, values unquoted.
pub fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    let mut pairs = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        // No real value is this long; a hostile root's would be copied
        // into several facts and outgrow the answer.
        if value.len() > MAX_VALUE {
            continue;
        }
        pairs.insert(key.to_owned(), unquote(value.trim()));
    }
    pairs
}

/// The longest os-release value read.
const MAX_VALUE: usize = 1024;

/// A value as the shell reads it: inside double quotes `\"`, `\\`, `\$`
/// and `` \` `` are the character; single quotes keep everything.
fn unquote(value: &str) -> String {
    let inner = |quote: char| {
        value
            .strip_prefix(quote)
            .and_then(|rest| rest.strip_suffix(quote))
            .filter(|_| value.len() >= 2)
    };
    if let Some(text) = inner('\'') {
        return text.to_owned();
    }
    let Some(text) = inner('"') else {
        return value.to_owned();
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next @ ('"' | '\\' | '$' | '`')) => out.push(next),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Facter's `os.name` from os-release's `NAME`: its first word (`Debian
/// GNU/Linux` is `Debian`), the first two joined for Red Hat, Oracle,
/// Arch and Manjaro (`RedHat`, `OracleLinux`, `Archlinux`), the last for
/// Mariner.
pub fn os_name(name: &str) -> String {
    let lower = name.to_lowercase();
    let words: Vec<&str> = name.split_whitespace().collect();
    let mut joined = if ["red", "oracle", "arch", "manjaro"]
        .iter()
        .any(|prefix| lower.starts_with(prefix))
    {
        words.iter().take(2).copied().collect::<String>()
    } else if lower.ends_with("mariner") {
        words.last().copied().unwrap_or_default().to_owned()
    } else {
        words.first().copied().unwrap_or_default().to_owned()
    };
    if lower.starts_with("arch") || lower.starts_with("manjaro") {
        joined = capitalize(&joined);
    }
    if lower.starts_with("virtuozzo") {
        joined.push_str("Linux");
    }
    joined
}

/// Which of Facter's hierarchies of distributions one belongs to: its
/// `os.release` and `os.distro` follow that hierarchy's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Branch {
    Debian,
    Ubuntu,
    RedHat,
    Suse,
    Alpine,
    Other,
}

impl Branch {
    /// The branch of an os-release `ID`, else of the first word of
    /// `ID_LIKE` that has one, as Facter's OS detector looks.
    fn of(id: &str, id_like: &str) -> Branch {
        std::iter::once(id)
            .chain(id_like.split_whitespace())
            .map(|word| Branch::of_word(&word.to_lowercase()))
            .find(|branch| *branch != Branch::Other)
            .unwrap_or(Branch::Other)
    }

    fn of_word(word: &str) -> Branch {
        match word {
            "debian" | "raspbian" | "devuan" | "elementary" => Branch::Debian,
            "ubuntu" | "linuxmint" => Branch::Ubuntu,
            "rhel" | "fedora" | "amzn" | "centos" | "ol" | "scientific" | "meego" | "oel"
            | "ovs" => Branch::RedHat,
            "sles" | "sled" | "opensuse" => Branch::Suse,
            word if word.starts_with("opensuse") => Branch::Suse,
            "alpine" => Branch::Alpine,
            _ => Branch::Other,
        }
    }
}

/// Facter's families, each with the words that name one of its
/// distributions, in the order Facter tries them.
const FAMILIES: &[(&str, &[&str])] = &[
    (
        "RedHat",
        &[
            "redhat",
            "rhel",
            "fedora",
            "centos",
            "scientific",
            "ascendos",
            "cloudlinux",
            "psbm",
            "oraclelinux",
            "ovs",
            "oel",
            "amazon",
            "xenserver",
            "xcp-ng",
            "virtuozzo",
            "photon",
            "mariner",
        ],
    ),
    (
        "Debian",
        &["debian", "ubuntu", "huaweios", "linuxmint", "devuan", "kde"],
    ),
    ("Suse", &["sles", "sled", "suse"]),
    ("Gentoo", &["gentoo"]),
    ("Archlinux", &["arch", "manjaro"]),
    ("Mandrake", &["mandrake", "mandriva", "mageia"]),
];

/// What the root says about its distribution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsRelease {
    /// os-release's pairs.
    pub pairs: BTreeMap<String, String>,
    /// `etc/debian_version`, trimmed.
    pub debian_version: Option<String>,
    /// `etc/redhat-release`, trimmed.
    pub redhat_release: Option<String>,
    /// `etc/alpine-release`, trimmed.
    pub alpine_release: Option<String>,
}

/// The distribution below `root`, or `None` when it has no os-release.
pub(super) fn read(root: &Root) -> Option<OsRelease> {
    let text = root_file(root, "etc/os-release").or_else(|| root_file(root, "usr/lib/os-release"));
    let Some(text) = text else {
        log::debug!(
            "facts: {} has no etc/os-release or usr/lib/os-release",
            root.path()
        );
        return None;
    };
    let trimmed = |rel: &str| {
        root_file(root, rel)
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    Some(OsRelease {
        pairs: parse_os_release(&text),
        debian_version: trimmed("etc/debian_version"),
        redhat_release: trimmed("etc/redhat-release"),
        alpine_release: trimmed("etc/alpine-release"),
    })
}

impl OsRelease {
    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn id(&self) -> &str {
        self.get("ID").unwrap_or("linux")
    }

    fn branch(&self) -> Branch {
        Branch::of(self.id(), self.get("ID_LIKE").unwrap_or_default())
    }

    /// Facter's `os.family`: `RedHat` and `Suse` for those hierarchies,
    /// otherwise the family whose words `ID_LIKE` (else `ID`) holds, or
    /// that word itself, capitalized (`Debian`, `Archlinux`, `Alpine`).
    pub fn family(&self) -> String {
        match self.branch() {
            Branch::RedHat => return "RedHat".to_owned(),
            Branch::Suse => return "Suse".to_owned(),
            _ => {}
        }
        let like = self.get("ID_LIKE").unwrap_or(self.id()).to_lowercase();
        let family = FAMILIES
            .iter()
            .find(|(_, words)| words.iter().any(|word| like.contains(word)))
            .map_or(like.as_str(), |(family, _)| family);
        capitalize(family)
    }

    /// Facter's `os.name`.
    fn name(&self) -> Option<String> {
        match self.get("NAME") {
            Some(name) => Some(os_name(name)),
            None => self.red_hat().map(|release| release.name),
        }
    }

    /// `etc/redhat-release`, read as Facter reads it.
    fn red_hat(&self) -> Option<RedHatRelease> {
        self.redhat_release.as_deref().map(RedHatRelease::parse)
    }

    /// Facter's `os.release`.
    fn release(&self) -> Option<Map<String, Json>> {
        let version_id = self.get("VERSION_ID");
        match self.branch() {
            Branch::Debian => self
                .debian_version
                .as_deref()
                .map(debian_release)
                .or_else(|| version_id.map(release_of)),
            // Facter's Ubuntu gives the whole version as the major one.
            Branch::Ubuntu => version_id.map(|v| {
                let mut release = Map::new();
                release.insert("full".into(), Json::from(v));
                release.insert("major".into(), Json::from(v));
                release
            }),
            Branch::RedHat => self
                .red_hat()
                .and_then(|release| release.version)
                .as_deref()
                .or(version_id)
                .map(release_of),
            Branch::Alpine => self
                .alpine_release
                .as_deref()
                .or(version_id)
                .map(release_of),
            Branch::Suse | Branch::Other => version_id.map(release_of),
        }
    }

    /// Facter's `os.distro`: on the Debian family from os-release and
    /// `debian_version`, on Red Hat's from `redhat-release`, elsewhere
    /// from os-release (where Facter runs `lsb_release`).
    fn distro(&self) -> Map<String, Json> {
        let mut distro = Map::new();
        let mut put = |key: &str, value: Option<Json>| {
            if let Some(value) = value {
                distro.insert(key.to_owned(), value);
            }
        };
        let text = |value: Option<&str>| value.map(Json::from);
        let release = |value: Option<Map<String, Json>>| value.map(Json::Object);
        match self.branch() {
            Branch::Debian | Branch::Ubuntu => {
                put("codename", text(self.codename().as_deref()));
                put("description", text(self.get("PRETTY_NAME")));
                put("id", Some(Json::from(capitalize(self.id()))));
                put(
                    "release",
                    release(self.debian_version.as_deref().map(debian_release)),
                );
            }
            Branch::RedHat if self.redhat_release.is_some() => {
                let red_hat = self.red_hat().unwrap_or_default();
                put("codename", text(red_hat.codename.as_deref()));
                put("description", text(self.redhat_release.as_deref()));
                put("id", Some(Json::from(red_hat.distributor_id)));
                put(
                    "release",
                    release(
                        red_hat
                            .version
                            .as_deref()
                            .or(self.get("VERSION_ID"))
                            .map(release_of),
                    ),
                );
            }
            Branch::Suse => {
                put(
                    "codename",
                    Some(Json::from(self.get("VERSION_CODENAME").unwrap_or("n/a"))),
                );
                put("description", text(self.get("PRETTY_NAME")));
                let version = self.get("VERSION_ID").unwrap_or_default();
                let id = if version.starts_with("12") {
                    "SUSE LINUX"
                } else {
                    "SUSE"
                };
                put("id", Some(Json::from(id)));
                put("release", release(self.get("VERSION_ID").map(release_of)));
            }
            _ => {
                put("codename", text(self.codename().as_deref()));
                put("description", text(self.get("PRETTY_NAME")));
                put("id", Some(Json::from(capitalize(self.id()))));
                put("release", release(self.get("VERSION_ID").map(release_of)));
            }
        }
        distro
    }

    /// `VERSION_CODENAME`, else the word in parentheses of `VERSION`
    /// (`12 (bookworm)`), else its first word followed by another
    /// (`22.04.3 LTS (Jammy Jellyfish)` has parentheses; `Jammy Jellyfish`
    /// alone gives `jammy`).
    fn codename(&self) -> Option<String> {
        if let Some(codename) = self.get("VERSION_CODENAME") {
            return Some(codename.to_owned());
        }
        let version = self.get("VERSION")?;
        if let (Some(open), true) = (version.rfind('('), version.ends_with(')')) {
            let inside = &version[open + 1..version.len() - 1];
            if !inside.is_empty() {
                return Some(inside.to_owned());
            }
        }
        let words: Vec<&str> = version.split_whitespace().collect();
        words
            .windows(2)
            .find(|pair| {
                pair.iter()
                    .all(|w| w.chars().all(|c| c.is_ascii_alphabetic()))
            })
            .map(|pair| pair[0].to_lowercase())
    }

    /// The `os` fact without `architecture` and `hardware`.
    pub fn facts(&self) -> Map<String, Json> {
        let mut os = Map::new();
        if let Some(name) = self.name() {
            os.insert("name".into(), Json::from(name));
        }
        os.insert("family".into(), Json::from(self.family()));
        if let Some(release) = self.release() {
            os.insert("release".into(), Json::Object(release));
        }
        let distro = self.distro();
        if !distro.is_empty() {
            os.insert("distro".into(), Json::Object(distro));
        }
        os
    }
}

/// Facter's release hash of a version: `full`, `major` (before the first
/// dot) and `minor` (after it, when there is one).
fn release_of(version: &str) -> Map<String, Json> {
    let mut parts = version.split('.');
    let mut release = Map::new();
    release.insert("full".into(), Json::from(version));
    release.insert("major".into(), Json::from(parts.next().unwrap_or_default()));
    if let Some(minor) = parts.next() {
        release.insert("minor".into(), Json::from(minor));
    }
    release
}

/// A `debian_version` (`12.11`, `trixie/sid`) as a release; a minor with
/// a leading zero loses it (`8.04` is minor `4`), as Facter has it.
fn debian_release(version: &str) -> Map<String, Json> {
    let mut release = release_of(version);
    if let Some(Json::String(minor)) = release.get_mut("minor") {
        let bytes = minor.as_bytes();
        if bytes.len() >= 2 && bytes[0] == b'0' && (b'1'..=b'9').contains(&bytes[1]) {
            minor.remove(0);
        }
    }
    release
}

/// `etc/redhat-release` (`Rocky Linux release 9.3 (Blue Onyx)`), as
/// Facter's RedHatRelease resolver reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RedHatRelease {
    name: String,
    distributor_id: String,
    version: Option<String>,
    codename: Option<String>,
}

impl RedHatRelease {
    fn parse(text: &str) -> RedHatRelease {
        let mut parts = text.splitn(2, "release");
        let before = parts.next().unwrap_or_default().trim();
        let after = parts.next().map(str::trim);
        let words: Vec<&str> = before
            .split_whitespace()
            .filter(|word| !word.eq_ignore_ascii_case("linux"))
            .collect();
        let codename = text
            .find("release")
            .and_then(|at| text[at..].rfind('(').map(|open| at + open))
            .and_then(|open| {
                let close = text[open..].find(')')? + open;
                Some(text[open + 1..close].to_owned())
            })
            .filter(|codename| !codename.is_empty());
        RedHatRelease {
            name: words.iter().take(2).copied().collect(),
            distributor_id: words.concat(),
            version: after
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned),
            codename,
        }
    }
}

/// Ruby's `String#capitalize`, which Facter applies to names: the first
/// character upper case, the rest lower case.
pub(super) fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_os_release_value_too_long_to_be_real_is_left_out() {
        let text = format!("ID=debian\nVERSION_ID=\"{}\"\n", "1".repeat(4096));
        let pairs = parse_os_release(&text);
        assert_eq!(pairs.get("ID").map(String::as_str), Some("debian"));
        assert!(!pairs.contains_key("VERSION_ID"));
    }

    const DEBIAN: &str = r#"PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
"#;

    const UBUNTU: &str = r#"PRETTY_NAME="Ubuntu 22.04.3 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.3 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=jammy
"#;

    const ROCKY: &str = r#"NAME="Rocky Linux"
VERSION="9.3 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.3"
PRETTY_NAME="Rocky Linux 9.3 (Blue Onyx)"
"#;

    const RHEL: &str = r#"NAME="Red Hat Enterprise Linux"
VERSION="8.9 (Ootpa)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="8.9"
PRETTY_NAME="Red Hat Enterprise Linux 8.9 (Ootpa)"
"#;

    const OPENSUSE: &str = r#"NAME="openSUSE Leap"
VERSION="15.5"
ID="opensuse-leap"
ID_LIKE="suse opensuse"
VERSION_ID="15.5"
PRETTY_NAME="openSUSE Leap 15.5"
"#;

    const ALPINE: &str =
        "NAME=\"Alpine Linux\"\nID=alpine\nVERSION_ID=3.19.1\nPRETTY_NAME=\"Alpine Linux v3.19\"\n";

    const ARCH: &str =
        "NAME=\"Arch Linux\"\nPRETTY_NAME=\"Arch Linux\"\nID=arch\nBUILD_ID=rolling\n";

    fn os(text: &str) -> OsRelease {
        OsRelease {
            pairs: parse_os_release(text),
            ..OsRelease::default()
        }
    }

    fn facts(release: &OsRelease) -> Json {
        Json::Object(release.facts())
    }

    #[test]
    fn os_release_values_are_unquoted_as_the_shell_reads_them() {
        let pairs = parse_os_release(
            "# comment\n\nA=\"x \\\"y\\\" \\$z\"\nB='a \\ b'\nC=plain\n D = spaced \nbad line\n=x\nE=\"\n",
        );
        assert_eq!(pairs["A"], "x \"y\" $z");
        assert_eq!(pairs["B"], "a \\ b");
        assert_eq!(pairs["C"], "plain");
        assert_eq!(pairs["D"], "spaced");
        assert_eq!(pairs["E"], "\"");
        assert_eq!(pairs.len(), 5);
    }

    #[test]
    fn names_as_facter_shortens_them() {
        assert_eq!(os_name("Debian GNU/Linux"), "Debian");
        assert_eq!(os_name("Ubuntu"), "Ubuntu");
        assert_eq!(os_name("Red Hat Enterprise Linux"), "RedHat");
        assert_eq!(os_name("Oracle Linux Server"), "OracleLinux");
        assert_eq!(os_name("Arch Linux"), "Archlinux");
        assert_eq!(os_name("Rocky Linux"), "Rocky");
        assert_eq!(os_name("CBL-Mariner"), "CBL-Mariner");
        assert_eq!(os_name("Common Base Linux Mariner"), "Mariner");
        assert_eq!(os_name("Virtuozzo"), "VirtuozzoLinux");
        assert_eq!(os_name(""), "");
    }

    #[test]
    fn debian_takes_its_release_from_debian_version() {
        let mut debian = os(DEBIAN);
        debian.debian_version = Some("12.11".into());
        assert_eq!(
            facts(&debian),
            serde_json::json!({
                "name": "Debian", "family": "Debian",
                "release": {"full": "12.11", "major": "12", "minor": "11"},
                "distro": {"codename": "bookworm", "description": "Debian GNU/Linux 12 (bookworm)",
                           "id": "Debian", "release": {"full": "12.11", "major": "12", "minor": "11"}}
            })
        );
        debian.debian_version = Some("8.04".into());
        assert_eq!(facts(&debian)["release"]["minor"], "4");
        debian.debian_version = None;
        assert_eq!(
            facts(&debian)["release"],
            serde_json::json!({"full": "12", "major": "12"})
        );
        assert!(facts(&debian)["distro"].get("release").is_none());
    }

    #[test]
    fn ubuntu_keeps_the_whole_version_as_major_as_facter_does() {
        let mut ubuntu = os(UBUNTU);
        ubuntu.debian_version = Some("bookworm/sid".into());
        let facts = facts(&ubuntu);
        assert_eq!(facts["name"], "Ubuntu");
        assert_eq!(facts["family"], "Debian");
        assert_eq!(
            facts["release"],
            serde_json::json!({"full": "22.04", "major": "22.04"})
        );
        assert_eq!(facts["distro"]["codename"], "jammy");
        assert_eq!(facts["distro"]["id"], "Ubuntu");
    }

    #[test]
    fn the_red_hat_family_reads_redhat_release() {
        let mut rocky = os(ROCKY);
        assert_eq!(rocky.family(), "RedHat");
        assert_eq!(facts(&rocky)["name"], "Rocky");
        assert_eq!(
            facts(&rocky)["release"],
            serde_json::json!({"full": "9.3", "major": "9", "minor": "3"})
        );
        rocky.redhat_release = Some("Rocky Linux release 9.3 (Blue Onyx)".into());
        let distro = &facts(&rocky)["distro"];
        assert_eq!(distro["codename"], "Blue Onyx");
        assert_eq!(distro["id"], "Rocky");
        assert_eq!(distro["description"], "Rocky Linux release 9.3 (Blue Onyx)");
        assert_eq!(distro["release"]["major"], "9");
        let rhel = os(RHEL);
        assert_eq!(rhel.family(), "RedHat");
        assert_eq!(facts(&rhel)["name"], "RedHat");
        let parsed = RedHatRelease::parse("Red Hat Enterprise Linux release 8.9 (Ootpa)");
        assert_eq!(parsed.name, "RedHat");
        assert_eq!(parsed.distributor_id, "RedHatEnterprise");
        assert_eq!(parsed.version.as_deref(), Some("8.9"));
        assert_eq!(parsed.codename.as_deref(), Some("Ootpa"));
        // Only the file: its name stands in for os-release's.
        let only_file = OsRelease {
            redhat_release: Some("CentOS Linux release 7.9.2009 (Core)".into()),
            pairs: parse_os_release("ID=centos\n"),
            ..OsRelease::default()
        };
        assert_eq!(facts(&only_file)["name"], "CentOS");
        assert_eq!(facts(&only_file)["release"]["minor"], "9");
    }

    #[test]
    fn other_families_as_facter_names_them() {
        let suse = os(OPENSUSE);
        assert_eq!(suse.family(), "Suse");
        assert_eq!(facts(&suse)["name"], "openSUSE");
        assert_eq!(facts(&suse)["distro"]["id"], "SUSE");
        assert_eq!(facts(&suse)["distro"]["codename"], "n/a");
        let mut alpine = os(ALPINE);
        assert_eq!(alpine.family(), "Alpine");
        assert_eq!(facts(&alpine)["name"], "Alpine");
        alpine.alpine_release = Some("3.19.1".into());
        assert_eq!(
            facts(&alpine)["release"],
            serde_json::json!({"full": "3.19.1", "major": "3", "minor": "19"})
        );
        let arch = os(ARCH);
        assert_eq!(arch.family(), "Archlinux");
        assert_eq!(facts(&arch)["name"], "Archlinux");
        assert!(facts(&arch).get("release").is_none());
        assert_eq!(os("ID=gentoo\nNAME=Gentoo\n").family(), "Gentoo");
        assert_eq!(os("ID=nixos\nNAME=NixOS\n").family(), "Nixos");
        assert_eq!(os("NAME=x\n").family(), "Linux");
    }

    #[test]
    fn a_codename_comes_from_version_when_not_given() {
        assert_eq!(
            os("VERSION=\"10 (buster)\"\n").codename().as_deref(),
            Some("buster")
        );
        assert_eq!(
            os("VERSION=\"Jammy Jellyfish\"\n").codename().as_deref(),
            Some("jammy")
        );
        assert_eq!(os("VERSION=\"12\"\n").codename(), None);
    }
}
