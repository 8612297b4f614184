//! Times as agents' streams and reports write them: RFC 3339 / ISO 8601 to and from Unix
//! microseconds.

/// Unix microseconds of an RFC 3339 / ISO 8601 time such as `2025-10-10T12:00:00.123Z` or
/// `2024-06-01T12:00:00.123456` (no zone: UTC). `None` if it does not parse.
pub fn iso_us(s: &str) -> Option<u64> {
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let (time, offset_s) = match time.find(['Z', '+']).or_else(|| time.rfind('-').filter(|&i| i >= 8)) {
        Some(i) => {
            let zone = &time[i..];
            let off = if zone == "Z" {
                0
            } else {
                let sign = if zone.starts_with('-') { -1 } else { 1 };
                let (hh, mm) = zone[1..].split_once(':').unwrap_or((&zone[1..], "0"));
                sign * (hh.parse::<i64>().ok()? * 3600 + mm.parse::<i64>().ok()? * 60)
            };
            (&time[..i], off)
        }
        None => (time, 0),
    };
    let mut t = time.split(':');
    let (hh, mm): (i64, i64) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    let sec = t.next()?;
    let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
    let ss: i64 = whole.parse().ok()?;
    let micros: i64 = format!("{:0<6}", &frac[..frac.len().min(6)]).parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // Days from the civil date (proleptic Gregorian), after Howard Hinnant's algorithm.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_s;
    u64::try_from(secs * 1_000_000 + micros).ok()
}

/// ISO 8601 (UTC, microseconds) of a Unix time in microseconds.
pub fn iso8601(t_us: u64) -> String {
    let secs = (t_us / 1_000_000) as i64;
    let micros = t_us % 1_000_000;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // The civil date of a day count: the inverse of the one in `iso_us`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
