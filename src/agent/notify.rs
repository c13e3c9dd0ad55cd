//! Telling systemd how the agent is (`sd_notify`, for `Type=notify`
//! units): READY once set up and again when a reload is done, STATUS
//! lines, RELOADING and STOPPING, and WATCHDOG pings when the unit sets
//! `WatchdogSec`. Datagrams to the socket systemd names in `NOTIFY_SOCKET`
//! (a path, or `@` for an abstract one); without it, nothing is sent.

use std::ffi::OsStr;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The agent's line to systemd.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From what systemd gave this process: `NOTIFY_SOCKET`, and
    /// `WATCHDOG_USEC` when `WATCHDOG_PID` is unset or this process.
    pub fn from_env() -> Notifier {
        let socket = std::env::var_os("NOTIFY_SOCKET");
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Notifier::new(socket.as_deref(), usec.as_deref(), pid.as_deref())
    }

    /// From the values of `NOTIFY_SOCKET`, `WATCHDOG_USEC` and
    /// `WATCHDOG_PID`.
    pub fn new(socket: Option<&OsStr>, usec: Option<&str>, pid: Option<&str>) -> Notifier {
        let socket = socket.and_then(|name| match address(name) {
            Ok(address) => match UnixDatagram::unbound() {
                Ok(datagram) => Some((datagram, address)),
                Err(e) => {
                    log::warn!("cannot tell systemd how ral agent is: {e}");
                    None
                }
            },
            Err(e) => {
                log::warn!("NOTIFY_SOCKET {}: {e}", name.to_string_lossy());
                None
            }
        });
        let mine = pid.is_none_or(|pid| pid.trim() == std::process::id().to_string());
        let watchdog = usec
            .and_then(|usec| usec.trim().parse::<u64>().ok())
            .filter(|&usec| usec > 0 && mine && socket.is_some())
            // Pinged at half the time systemd allows, as it advises.
            .map(|usec| Duration::from_micros(usec) / 2);
        Notifier { socket, watchdog }
    }

    /// How often the watchdog wants a ping, if it does.
    pub fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends `state` (`KEY=VALUE` lines); a failure is only logged.
    pub fn send(&self, state: &str) {
        let Some((socket, address)) = &self.socket else {
            return;
        };
        if let Err(e) = socket.send_to_addr(state.as_bytes(), address) {
            log::debug!("telling systemd {state:?}: {e}");
        }
    }

    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={}", one_line(status)));
    }

    pub fn reloading(&self) {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
    }

    pub fn stopping(&self) {
        self.send("STOPPING=1");
    }

    pub fn watchdog(&self) {
        if self.watchdog.is_some() {
            self.send("WATCHDOG=1");
        }
    }
}

/// A status is one line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// The socket `name` names: a path, or after `@` an abstract name.
fn address(name: &OsStr) -> std::io::Result<SocketAddr> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    match bytes.split_first() {
        Some((b'@', abstract_name)) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name)
        }
        Some((b'/', _)) => SocketAddr::from_pathname(name),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "neither a path nor an abstract name (@)",
        )),
    }
}

/// CLOCK_MONOTONIC now, in microseconds (what RELOADING=1 is stamped with).
fn monotonic_usec() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening() -> (tempfile::TempDir, UnixDatagram, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket.set_nonblocking(true).unwrap();
        (dir, socket, path)
    }

    fn received(socket: &UnixDatagram) -> Vec<String> {
        let mut got = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(n) = socket.recv(&mut buffer) {
            got.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
        got
    }

    #[test]
    fn systemd_hears_ready_status_and_watchdog_on_its_socket() {
        let (_dir, socket, path) = listening();
        let me = std::process::id().to_string();
        let notifier = Notifier::new(Some(path.as_os_str()), Some("4000000"), Some(&me));
        assert_eq!(notifier.watchdog_every(), Some(Duration::from_secs(2)));
        notifier.ready("converged\nnext run at 10:00");
        notifier.watchdog();
        notifier.stopping();
        assert_eq!(
            received(&socket),
            [
                "READY=1\nSTATUS=converged next run at 10:00",
                "WATCHDOG=1",
                "STOPPING=1"
            ]
        );
    }

    #[test]
    fn the_watchdog_is_another_process_s_when_its_pid_says_so() {
        let (_dir, socket, path) = listening();
        let notifier = Notifier::new(Some(path.as_os_str()), Some("4000000"), Some("1"));
        assert_eq!(notifier.watchdog_every(), None);
        notifier.watchdog();
        assert!(received(&socket).is_empty());
        // Without a socket there is nobody to ping.
        assert_eq!(
            Notifier::new(None, Some("4000000"), None).watchdog_every(),
            None
        );
    }

    #[test]
    fn an_abstract_socket_is_reached_by_its_name() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("ral-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let socket = UnixDatagram::bind_addr(&address).unwrap();
        socket.set_nonblocking(true).unwrap();
        let notifier = Notifier::new(Some(OsStr::new(&format!("@{name}"))), None, None);
        notifier.status("idle");
        assert_eq!(received(&socket), ["STATUS=idle"]);
        // A name that is neither: nothing is sent, nothing fails.
        Notifier::new(Some(OsStr::new("relative")), None, None).ready("x");
    }
}
