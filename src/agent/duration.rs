//! Durations as a person writes them on the agent's command line: a
//! number of seconds (`90`), or numbers with units, largest first
//! (`30m`, `1h30m`, `45s`, `250ms`, `2d`).

use std::time::Duration;

/// The longest duration taken: a year.
const LONGEST: Duration = Duration::from_secs(366 * 24 * 3600);

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a duration: {why} (say 90, 90s, 30m, 1h30m or 250ms)")]
pub struct BadDuration {
    pub text: String,
    pub why: &'static str,
}

/// Reads `text` as a duration.
pub fn parse(text: &str) -> Result<Duration, BadDuration> {
    let bad = |why| BadDuration {
        text: text.to_owned(),
        why,
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad("it is empty"));
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: u64 = trimmed.parse().map_err(|_| bad("it is too long"))?;
        return within(Duration::from_secs(seconds)).ok_or_else(|| bad("it is over a year"));
    }
    let mut total = Duration::ZERO;
    let mut rest = trimmed;
    // Each unit at most once, largest first: `1m1h` is a slip.
    let mut last_rank = usize::MAX;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("a unit must follow a number"));
        }
        let number: u64 = rest[..digits].parse().map_err(|_| bad("it is too long"))?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (rank, one) = match &rest[..unit_len] {
            "d" => (0, Duration::from_secs(86_400)),
            "h" => (1, Duration::from_secs(3600)),
            "m" => (2, Duration::from_secs(60)),
            "s" => (3, Duration::from_secs(1)),
            "ms" => (4, Duration::from_millis(1)),
            "" if rest.starts_with(['.', ',']) => {
                return Err(bad("it takes whole numbers: 1h30m, not 1.5h"))
            }
            "" => return Err(bad("a number within it has no unit")),
            _ => return Err(bad("its units are d, h, m, s and ms")),
        };
        if last_rank != usize::MAX && rank <= last_rank {
            return Err(bad(
                "its units go from the largest to the smallest, each once",
            ));
        }
        last_rank = rank;
        rest = &rest[unit_len..];
        let part = one
            .checked_mul(u32::try_from(number).map_err(|_| bad("it is over a year"))?)
            .ok_or_else(|| bad("it is over a year"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| bad("it is over a year"))?;
    }
    within(total).ok_or_else(|| bad("it is over a year"))
}

fn within(duration: Duration) -> Option<Duration> {
    (duration <= LONGEST).then_some(duration)
}

/// `duration` as [`parse`] reads it back, shortest form: `30m`, `1h30m`,
/// `250ms`, `0s`.
pub fn show(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    let mut out = String::new();
    let mut left = millis;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ] {
        if left >= size {
            out.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_seconds_and_units_add_up() {
        assert_eq!(parse("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(" 45s "), Ok(Duration::from_secs(45)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn what_is_not_a_duration_says_why() {
        for (text, why) in [
            ("", "it is empty"),
            ("m", "a unit must follow a number"),
            ("10x", "its units are d, h, m, s and ms"),
            (
                "1m1h",
                "its units go from the largest to the smallest, each once",
            ),
            (
                "1m1m",
                "its units go from the largest to the smallest, each once",
            ),
            ("1h30", "a number within it has no unit"),
            ("1.5h", "it takes whole numbers: 1h30m, not 1.5h"),
            ("400d", "it is over a year"),
            ("99999999999999999999999", "it is too long"),
            ("-5", "a unit must follow a number"),
        ] {
            assert_eq!(parse(text).map_err(|e| e.why), Err(why), "{text}");
        }
        let message = parse("10x").unwrap_err().to_string();
        assert!(
            message.starts_with("\"10x\" is not a duration"),
            "{message}"
        );
    }

    #[test]
    fn shown_durations_read_back() {
        for text in ["30m", "1h30m", "250ms", "0s", "2d3h4m5s6ms", "45s"] {
            assert_eq!(show(parse(text).unwrap()), text);
        }
    }
}
