//! `processors` (`{count, physicalcount, models, isa}`, from
//! `/proc/cpuinfo` and `/sys/devices/system/cpu`) and `memory`
//! (`{system, swap}`, each `{total, available, used}` in bytes and as
//! Facter writes sizes, `23.44 GiB`, and `capacity`, `12.34%`, from
//! `/proc/meminfo`; `swap` only when there is some).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Map, Value as Json};

use super::sources::{machine_file, Facts};

/// What `/proc/cpuinfo` says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cpuinfo {
    /// Its `processor` entries.
    pub count: usize,
    /// The distinct `physical id`s.
    pub physical_ids: BTreeSet<String>,
    /// Each entry's `model name` (or `cpu`, on POWER).
    pub models: Vec<String>,
}

/// Reads a `/proc/cpuinfo`.
pub fn parse_cpuinfo(text: &str) -> Cpuinfo {
    let mut info = Cpuinfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "processor" => info.count += 1,
            "model name" | "cpu" => info.models.push(value.to_owned()),
            "physical id" => {
                info.physical_ids.insert(value.to_owned());
            }
            _ => {}
        }
    }
    info
}

/// What `/proc/meminfo` says, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meminfo {
    pub total: u64,
    /// `MemAvailable`, or on kernels without it free, buffers and cache.
    pub available: u64,
    pub swap_total: u64,
    pub swap_free: u64,
}

/// Reads a `/proc/meminfo` (`None` without `MemTotal`).
pub fn parse_meminfo(text: &str) -> Option<Meminfo> {
    let field = |name: &str| {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        })
    };
    let total = field("MemTotal")?;
    let available = field("MemAvailable").unwrap_or_else(|| {
        ["MemFree", "Buffers", "Cached"]
            .iter()
            .filter_map(|name| field(name))
            .sum()
    });
    Some(Meminfo {
        total,
        available: available.min(total),
        swap_total: field("SwapTotal").unwrap_or(0),
        swap_free: field("SwapFree").unwrap_or(0),
    })
}

/// A size as Facter writes it: two decimals and the binary unit
/// (`1.50 KiB`, `23.44 GiB`), plain bytes below 1 KiB.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    // The unit from the integer logarithm, exact for every size: a float
    // log2 was the last call into libm, which made every binary load it.
    let mut exponent = (bytes.ilog2() / 10) as i32;
    let mut number = (100.0 * (bytes as f64 / 1024f64.powi(exponent))).round() / 100.0;
    if (number - 1024.0).abs() < f64::EPSILON {
        exponent += 1;
        number = 1.0;
    }
    match UNITS.get((exponent - 1) as usize) {
        Some(unit) => format!("{number:.2} {unit}"),
        None => format!("{bytes} bytes"),
    }
}

/// The part of `total` in use, as Facter writes it (`12.34%`).
pub fn capacity(used: u64, total: u64) -> String {
    match total {
        0 => "0.00%".to_owned(),
        total => format!("{:.2}%", used as f64 / total as f64 * 100.0),
    }
}

/// One of `memory`'s entries.
fn usage(total: u64, available: u64) -> Json {
    let used = total.saturating_sub(available);
    let mut entry = Map::new();
    entry.insert("available".into(), Json::from(human_bytes(available)));
    entry.insert("available_bytes".into(), Json::from(available));
    entry.insert("capacity".into(), Json::from(capacity(used, total)));
    entry.insert("total".into(), Json::from(human_bytes(total)));
    entry.insert("total_bytes".into(), Json::from(total));
    entry.insert("used".into(), Json::from(human_bytes(used)));
    entry.insert("used_bytes".into(), Json::from(used));
    Json::Object(entry)
}

/// The `memory` fact.
pub(super) fn memory(info: &Meminfo) -> Json {
    let mut memory = Map::new();
    memory.insert("system".into(), usage(info.total, info.available));
    if info.swap_total > 0 {
        memory.insert("swap".into(), usage(info.swap_total, info.swap_free));
    }
    Json::Object(memory)
}

/// The `processors` fact: `physical_packages` counts the sockets when
/// cpuinfo names none (as on ARM).
pub(super) fn processors(
    info: &Cpuinfo,
    physical_packages: impl FnOnce() -> usize,
    isa: Option<&str>,
) -> Json {
    let mut processors = Map::new();
    processors.insert("count".into(), Json::from(info.count));
    let physical = match info.physical_ids.len() {
        0 => physical_packages(),
        n => n,
    };
    processors.insert("physicalcount".into(), Json::from(physical));
    processors.insert("models".into(), Json::from(info.models.clone()));
    if let Some(isa) = isa {
        processors.insert("isa".into(), Json::from(isa));
    }
    Json::Object(processors)
}

/// The distinct `physical_package_id`s of the CPUs `/sys` lists.
fn physical_packages(machine: &Path) -> usize {
    let dir = machine.join("sys/devices/system/cpu");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        log::debug!("facts: {} cannot be read", dir.display());
        return 0;
    };
    let mut packages = BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_cpu = name
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !is_cpu {
            continue;
        }
        let rel = format!("sys/devices/system/cpu/{name}/topology/physical_package_id");
        if let Some(id) = machine_file(machine, &rel) {
            packages.insert(id.trim().to_owned());
        }
    }
    packages.len()
}

/// Adds `processors` and `memory`; `isa` is the machine (uname's).
pub(super) fn insert(facts: &mut Facts, machine: &Path, isa: Option<&str>) {
    if let Some(text) = machine_file(machine, "proc/cpuinfo") {
        let info = parse_cpuinfo(&text);
        facts.insert(
            "processors".into(),
            processors(&info, || physical_packages(machine), isa),
        );
    }
    match machine_file(machine, "proc/meminfo").and_then(|text| parse_meminfo(&text)) {
        Some(info) => {
            facts.insert("memory".into(), memory(&info));
        }
        None => log::debug!("facts: no MemTotal in {}/proc/meminfo", machine.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n\
        physical id\t: 0\ncpu MHz\t\t: 2100.000\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Processor\n\
        physical id\t: 0\n\nprocessor\t: 2\nmodel name\t: Intel(R) Xeon(R) Processor\nphysical id\t: 1\n";

    const ARM: &str = "processor\t: 0\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd\n\nprocessor\t: 1\nBogoMIPS\t: 48.00\n";

    const MEMINFO: &str = "MemTotal:       24731400 kB\nMemFree:        22000000 kB\nMemAvailable:   24140120 kB\n\
        Buffers:          100000 kB\nCached:           500000 kB\nSwapTotal:       1048572 kB\nSwapFree:         524286 kB\n";

    #[test]
    fn cpuinfo_counts_processors_and_sockets() {
        let info = parse_cpuinfo(CPUINFO);
        assert_eq!(info.count, 3);
        assert_eq!(info.physical_ids.len(), 2);
        assert_eq!(info.models.len(), 3);
        assert_eq!(
            processors(&info, || unreachable!(), Some("x86_64")),
            json!({"count": 3, "physicalcount": 2, "isa": "x86_64",
                   "models": ["Intel(R) Xeon(R) Processor", "Intel(R) Xeon(R) Processor",
                              "Intel(R) Xeon(R) Processor"]})
        );
        // ARM names no model nor socket: /sys counts the sockets.
        let arm = parse_cpuinfo(ARM);
        assert_eq!(arm.count, 2);
        assert_eq!(processors(&arm, || 1, None)["physicalcount"], 1);
        assert_eq!(processors(&arm, || 1, None)["models"], json!([]));
    }

    #[test]
    fn meminfo_in_bytes_and_as_facter_writes_sizes() {
        let info = parse_meminfo(MEMINFO).unwrap();
        assert_eq!(info.total, 24731400 * 1024);
        assert_eq!(info.available, 24140120 * 1024);
        assert_eq!(
            memory(&info),
            json!({
                "system": {"available": "23.02 GiB", "available_bytes": 24719482880u64,
                           "capacity": "2.39%", "total": "23.59 GiB", "total_bytes": 25324953600u64,
                           "used": "577.42 MiB", "used_bytes": 605470720},
                "swap": {"available": "512.00 MiB", "available_bytes": 536868864,
                         "capacity": "50.00%", "total": "1.00 GiB", "total_bytes": 1073737728,
                         "used": "512.00 MiB", "used_bytes": 536868864}
            })
        );
        // Without MemAvailable (old kernels): free, buffers and cache.
        let old =
            parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 1 kB\n")
                .unwrap();
        assert_eq!(old.available, 111 * 1024);
        assert_eq!(memory(&old).get("swap"), None);
        assert_eq!(parse_meminfo("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn sizes_as_facter_writes_them() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(1023), "1023 bytes");
        assert_eq!(human_bytes(1024), "1.00 KiB");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(1024 * 1024 - 1), "1.00 MiB");
        assert_eq!(human_bytes(274_877_906_944), "256.00 GiB");
        assert_eq!(human_bytes(u64::MAX), "16.00 EiB");
        // Just below and at powers of 1024 (where a float log2 of the
        // size would round up to the power: 2^50 - 1, and 2^60 - 1 whose
        // conversion to f64 already does): the unit changes only where
        // the number would read 1024.00.
        assert_eq!(human_bytes((1 << 40) - 1), "1.00 TiB");
        assert_eq!(human_bytes((1 << 50) - 1), "1.00 PiB");
        assert_eq!(human_bytes(1 << 40), "1.00 TiB");
        assert_eq!(human_bytes((1 << 30) - (1 << 22)), "1020.00 MiB");
        assert_eq!(human_bytes((1 << 60) - 1), "1.00 EiB");
        assert_eq!(capacity(605_470_720, 25_324_953_600), "2.39%");
        assert_eq!(capacity(0, 0), "0.00%");
    }
}
