//! The `networking` fact, as Facter 4 shapes it: every interface with
//! its `bindings` (IPv4) and `bindings6` (IPv6), each `{address,
//! netmask, network}` (and `scope6`), its first usable address of each
//! family as `ip`, `netmask`, `network` (`ip6`, ...), its `mac` and
//! `mtu`; the `primary` interface (the default route's, from
//! `/proc/net/route`, then `/proc/net/ipv6_route`, then the first with a
//! usable address), whose values are repeated at the top. Addresses come
//! from getifaddrs(3), MAC addresses and MTUs from `/sys/class/net`.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use serde_json::{Map, Value as Json};

use super::sources::machine_file;

/// One address of an interface, with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    pub ip: IpAddr,
    pub prefix: u32,
}

/// The networking fact of the machine (`machine` holds its `/proc` and
/// `/sys`), without the host's names.
pub(super) fn gather(machine: &Path) -> Map<String, Json> {
    let Some((names, addresses)) = interfaces() else {
        return Map::new();
    };
    let primary = machine_file(machine, "proc/net/route")
        .and_then(|text| default_route_v4(&text))
        .or_else(|| {
            machine_file(machine, "proc/net/ipv6_route").and_then(|text| default_route_v6(&text))
        });
    let link = |name: &str| {
        let read = |file: &str| {
            machine_file(machine, &format!("sys/class/net/{name}/{file}"))
                .map(|text| text.trim().to_owned())
        };
        let mac = read("address").filter(|mac| is_mac(mac));
        let mtu = read("mtu").and_then(|text| text.parse::<u64>().ok());
        (mac, mtu)
    };
    assemble(&names, &addresses, link, primary)
}

/// Builds the fact: `names` are the interfaces in the system's order,
/// `addresses` each interface's addresses, `link` an interface's MAC
/// address and MTU, `primary` the default route's interface.
pub(super) fn assemble(
    names: &[String],
    addresses: &Addresses,
    link: impl Fn(&str) -> (Option<String>, Option<u64>),
    primary: Option<String>,
) -> Map<String, Json> {
    let mut interfaces = Map::new();
    for name in names {
        let mut interface = Map::new();
        let own = addresses.get(name).map(Vec::as_slice).unwrap_or_default();
        for (v6, bindings_key, suffix) in [(false, "bindings", ""), (true, "bindings6", "6")] {
            let bindings: Vec<&Address> = own.iter().filter(|a| a.ip.is_ipv6() == v6).collect();
            if bindings.is_empty() {
                continue;
            }
            let chosen = bindings
                .iter()
                .find(|a| !ignored(a.ip))
                .unwrap_or(&bindings[0]);
            let main = binding(chosen.ip, chosen.prefix);
            for key in ["address", "netmask", "network"] {
                let fact = match key {
                    "address" => format!("ip{suffix}"),
                    other => format!("{other}{suffix}"),
                };
                interface.insert(fact, main[key].clone());
            }
            if let Some(scope) = main.get("scope6") {
                interface.insert("scope6".into(), scope.clone());
            }
            let list = bindings
                .iter()
                .map(|a| Json::Object(binding(a.ip, a.prefix)))
                .collect();
            interface.insert(bindings_key.into(), Json::Array(list));
        }
        let (mac, mtu) = link(name);
        if let Some(mac) = mac {
            interface.insert("mac".into(), Json::from(mac));
        }
        if let Some(mtu) = mtu {
            interface.insert("mtu".into(), Json::from(mtu));
        }
        interfaces.insert(name.clone(), Json::Object(interface));
    }
    // Without a default route, the first interface with a usable address.
    let primary = primary.filter(|p| interfaces.contains_key(p)).or_else(|| {
        names
            .iter()
            .find(|name| {
                addresses
                    .get(*name)
                    .is_some_and(|own| own.iter().any(|a| !ignored(a.ip)))
            })
            .cloned()
    });
    let mut networking = Map::new();
    if let Some(primary) = primary {
        if let Some(Json::Object(values)) = interfaces.get(&primary) {
            for (key, value) in values {
                if key != "bindings" && key != "bindings6" {
                    networking.insert(key.clone(), value.clone());
                }
            }
        }
        networking.insert("primary".into(), Json::from(primary));
    }
    networking.insert("interfaces".into(), Json::Object(interfaces));
    networking
}

/// One binding: the address, its netmask and its network (and, for
/// IPv6, its scope), as Facter writes them (`255.255.255.0`,
/// `ffff:ffff:ffff:ffff::`).
pub fn binding(ip: IpAddr, prefix: u32) -> Map<String, Json> {
    let mut binding = Map::new();
    let (netmask, network) = match ip {
        IpAddr::V4(ip) => {
            let mask = u32::MAX.checked_shl(32 - prefix.min(32)).unwrap_or(0);
            (
                Ipv4Addr::from(mask).to_string(),
                Ipv4Addr::from(u32::from(ip) & mask).to_string(),
            )
        }
        IpAddr::V6(ip) => {
            let mask = u128::MAX.checked_shl(128 - prefix.min(128)).unwrap_or(0);
            (
                Ipv6Addr::from(mask).to_string(),
                Ipv6Addr::from(u128::from(ip) & mask).to_string(),
            )
        }
    };
    binding.insert("address".into(), Json::from(ip.to_string()));
    binding.insert("netmask".into(), Json::from(netmask));
    binding.insert("network".into(), Json::from(network));
    if let IpAddr::V6(ip) = ip {
        binding.insert("scope6".into(), Json::from(scope6(ip)));
    }
    binding
}

/// An IPv6 address's scope as Facter names it: `link`, `site`, `host`
/// or `global`, after `compat,` for an IPv4-compatible one.
pub fn scope6(ip: Ipv6Addr) -> String {
    let segments = ip.segments();
    let compat = segments[..6].iter().all(|&s| s == 0) && !ip.is_loopback() && !ip.is_unspecified();
    let scope = if segments[0] & 0xffc0 == 0xfe80 {
        "link"
    } else if segments[0] & 0xffc0 == 0xfec0 {
        "site"
    } else if ip.is_loopback() {
        "host"
    } else {
        "global"
    };
    match compat {
        true => format!("compat,{scope}"),
        false => scope.to_owned(),
    }
}

/// Addresses Facter passes over when it picks an interface's `ip`:
/// loopback, link-local and unique local ones.
fn ignored(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => ip.is_loopback() || ip.is_link_local(),
        IpAddr::V6(ip) => {
            let first = ip.segments()[0];
            ip.is_loopback() || first & 0xffc0 == 0xfe80 || first & 0xfe00 == 0xfc00
        }
    }
}

/// Whether a `/sys` address is a MAC address worth reporting (not the
/// loopback's zeros).
fn is_mac(text: &str) -> bool {
    !text.is_empty() && text.chars().any(|c| c != '0' && c != ':')
}

/// The interface of the first IPv4 default route of a `/proc/net/route`
/// table (destination and mask 0, not the `*` of a blackhole).
pub fn default_route_v4(text: &str) -> Option<String> {
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() > 7 && fields[1] == "00000000" && fields[7] == "00000000" && fields[0] != "*")
            .then(|| fields[0].to_owned())
    })
}

/// The interface of the first IPv6 default route of a
/// `/proc/net/ipv6_route` table: `::/0`, not a reject route (the kernel
/// lists an unreachable one on `lo`).
pub fn default_route_v6(text: &str) -> Option<String> {
    const RTF_REJECT: u32 = 0x0200;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 10 || fields[0].bytes().any(|b| b != b'0') || fields[1] != "00" {
            return None;
        }
        let flags = u32::from_str_radix(fields[8], 16).ok()?;
        (flags & RTF_REJECT == 0 && fields[9] != "lo").then(|| fields[9].to_owned())
    })
}

/// Each interface's addresses, by name.
type Addresses = BTreeMap<String, Vec<Address>>;

/// The interfaces in the system's order, and each one's addresses, from
/// getifaddrs(3); `None` (logged) when it fails.
fn interfaces() -> Option<(Vec<String>, Addresses)> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes the head of a list it allocates into
    // `head` when it returns 0; freeifaddrs below frees it.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        log::debug!("facts: getifaddrs: {}", std::io::Error::last_os_error());
        return None;
    }
    let mut names: Vec<String> = Vec::new();
    let mut addresses = Addresses::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs made, alive
        // until freeifaddrs; its name is a NUL-terminated string, its
        // address and netmask null or sockaddrs of the family they say.
        let (name, address) = unsafe {
            let entry = &*cursor;
            cursor = entry.ifa_next;
            let name = CStr::from_ptr(entry.ifa_name)
                .to_string_lossy()
                .into_owned();
            (name, address_of(entry.ifa_addr, entry.ifa_netmask))
        };
        if !names.contains(&name) {
            names.push(name.clone());
        }
        if let Some(address) = address {
            addresses.entry(name).or_default().push(address);
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once; nothing
    // read from the list is kept but copies.
    unsafe { libc::freeifaddrs(head) };
    Some((names, addresses))
}

/// The IPv4 or IPv6 address at `addr` with the prefix length of `mask`.
///
/// # Safety
///
/// `addr` and `mask` are null or point to sockaddrs as getifaddrs(3)
/// fills them: of the size their family (the address's) says.
unsafe fn address_of(addr: *const libc::sockaddr, mask: *const libc::sockaddr) -> Option<Address> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: the caller's promise: each is a sockaddr of the address's
    // family, so the casts read within them.
    unsafe {
        match i32::from((*addr).sa_family) {
            libc::AF_INET => {
                let ip = Ipv4Addr::from(u32::from_be(
                    (*addr.cast::<libc::sockaddr_in>()).sin_addr.s_addr,
                ));
                let prefix = match mask.is_null() {
                    true => 32,
                    false => u32::from_be((*mask.cast::<libc::sockaddr_in>()).sin_addr.s_addr)
                        .count_ones(),
                };
                Some(Address {
                    ip: IpAddr::V4(ip),
                    prefix,
                })
            }
            libc::AF_INET6 => {
                let ip = Ipv6Addr::from((*addr.cast::<libc::sockaddr_in6>()).sin6_addr.s6_addr);
                let prefix = match mask.is_null() {
                    true => 128,
                    false => (*mask.cast::<libc::sockaddr_in6>())
                        .sin6_addr
                        .s6_addr
                        .iter()
                        .map(|byte| byte.count_ones())
                        .sum(),
                };
                Some(Address {
                    ip: IpAddr::V6(ip),
                    prefix,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        *\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";

    const ROUTE6: &str = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n\
        fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
        00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n";

    #[test]
    fn the_default_routes_name_the_primary_interface() {
        assert_eq!(default_route_v4(ROUTE).as_deref(), Some("eth0"));
        assert_eq!(default_route_v4("Iface\tDestination\n"), None);
        assert_eq!(default_route_v6(ROUTE6).as_deref(), Some("eth0"));
        assert_eq!(default_route_v6(ROUTE6.lines().next().unwrap()), None);
    }

    #[test]
    fn bindings_as_facter_writes_them() {
        assert_eq!(
            Json::Object(binding("192.0.2.2".parse().unwrap(), 24)),
            json!({"address": "192.0.2.2", "netmask": "255.255.255.0", "network": "192.0.2.0"})
        );
        assert_eq!(
            binding("10.1.2.3".parse().unwrap(), 0)["netmask"],
            "0.0.0.0"
        );
        assert_eq!(
            Json::Object(binding("fd00::2".parse().unwrap(), 64)),
            json!({"address": "fd00::2", "netmask": "ffff:ffff:ffff:ffff::",
                   "network": "fd00::", "scope6": "global"})
        );
        assert_eq!(
            binding("::1".parse().unwrap(), 128)["netmask"],
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
        );
        assert_eq!(scope6("fe80::1".parse().unwrap()), "link");
        assert_eq!(scope6("fec0::1".parse().unwrap()), "site");
        assert_eq!(scope6("::1".parse().unwrap()), "host");
        assert_eq!(scope6("::10.0.0.1".parse().unwrap()), "compat,global");
    }

    #[test]
    fn interfaces_and_the_primary_one_as_facter_shapes_them() {
        let names: Vec<String> = ["lo", "eth0", "ifb0"].map(String::from).to_vec();
        let address = |ip: &str, prefix| Address {
            ip: ip.parse().unwrap(),
            prefix,
        };
        let addresses = BTreeMap::from([
            (
                "lo".to_owned(),
                vec![address("127.0.0.1", 8), address("::1", 128)],
            ),
            (
                "eth0".to_owned(),
                vec![
                    address("169.254.0.9", 16),
                    address("192.0.2.2", 24),
                    address("fe80::1", 64),
                ],
            ),
        ]);
        let link = |name: &str| match name {
            "lo" => (None, Some(65536)),
            _ => (Some(format!("02:00:00:00:00:{}", name.len())), Some(1500)),
        };
        let with_route = assemble(&names, &addresses, link, Some("eth0".into()));
        let eth0 = &with_route["interfaces"]["eth0"];
        // The usable address, not the link-local one listed first.
        assert_eq!(eth0["ip"], "192.0.2.2");
        assert_eq!(eth0["bindings"].as_array().unwrap().len(), 2);
        // Only a link-local IPv6 address: that one.
        assert_eq!(eth0["ip6"], "fe80::1");
        assert_eq!(eth0["scope6"], "link");
        assert_eq!(with_route["primary"], "eth0");
        assert_eq!(with_route["ip"], "192.0.2.2");
        assert_eq!(with_route["mac"], "02:00:00:00:00:4");
        assert_eq!(with_route["mtu"], 1500);
        assert!(with_route.get("bindings").is_none());
        assert_eq!(
            with_route["interfaces"]["ifb0"],
            json!({"mac": "02:00:00:00:00:4", "mtu": 1500})
        );
        assert_eq!(with_route["interfaces"]["lo"]["ip6"], "::1");
        assert!(with_route["interfaces"]["lo"].get("mac").is_none());
        // No default route: the first interface with a usable address.
        let without = assemble(&names, &addresses, link, None);
        assert_eq!(without["primary"], "eth0");
        // A route through an interface not listed is no primary.
        let elsewhere = assemble(&names, &addresses, link, Some("tun9".into()));
        assert_eq!(elsewhere["primary"], "eth0");
        let only_lo = assemble(&names[..1], &addresses, link, None);
        assert!(only_lo.get("primary").is_none());
    }

    #[test]
    fn mac_addresses_of_zeros_are_none() {
        assert!(is_mac("02:fc:00:00:00:01"));
        assert!(!is_mac("00:00:00:00:00:00"));
        assert!(!is_mac(""));
    }

    #[test]
    fn getifaddrs_lists_the_loopback_interface() {
        let (names, addresses) = interfaces().expect("getifaddrs works");
        assert!(names.iter().any(|n| n == "lo"), "{names:?}");
        let lo = &addresses["lo"];
        assert!(lo.contains(&Address {
            ip: "127.0.0.1".parse().unwrap(),
            prefix: 8
        }));
    }
}
