//! Finding the secret values in a credentials file.
//!
//! A value counts as a secret when its key names one (`…KEY`, `…TOKEN`, `PASSWORD`, …) or
//! when it looks random (long, mixing letters and digits). A URL is a secret only for what it
//! carries — a password in it (`postgres://app:pw@db/app`) or a secret-named query parameter —
//! whatever its key: `DATABASE_URL=postgres://localhost:5432/app` holds nothing to leak. Files
//! without `KEY=value` lines (private keys, token files) contribute their long lines.

/// Words in a key name that mark its value as a secret.
const SECRET_KEY_WORDS: [&str; 11] = ["KEY", "SECRET", "TOKEN", "PASS", "PWD", "CREDENTIAL", "AUTH", "PRIVATE", "DSN", "DATABASE_URL", "COOKIE"];
/// Shortest value treated as a secret: shorter ones occur by chance.
const MIN_LEN: usize = 8;

fn looks_random(v: &str) -> bool {
    v.len() >= 16 && v.chars().any(|c| c.is_ascii_digit()) && v.chars().any(|c| c.is_ascii_alphabetic()) && !v.contains(' ')
}

/// For a URL, whether it carries a secret: a password in its authority, a query parameter
/// named like a secret with a value, or a path segment that looks random (a webhook's
/// token); `None` when the value is not a URL.
fn url_secret(v: &str) -> Option<bool> {
    let (scheme, rest) = v.split_once("://")?;
    if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) || v.contains(' ') {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let password = authority.rsplit_once('@').is_some_and(|(user, _)| user.split_once(':').is_some_and(|(_, pw)| !pw.is_empty()));
    let query = rest.split_once('?').map_or("", |(_, q)| q.split('#').next().unwrap_or(""));
    let param = query.split('&').filter_map(|kv| kv.split_once('=')).any(|(k, val)| {
        let k = k.to_ascii_uppercase();
        !val.is_empty() && SECRET_KEY_WORDS.iter().any(|w| k.contains(w))
    });
    let path = rest.split(['?', '#']).next().unwrap_or("");
    let random_segment = path.split('/').skip(1).any(looks_random);
    Some(password || param || random_segment)
}

/// The secret values in a file's text, longest first, without repeats.
pub fn extract(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut any_pairs = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let line = line.strip_prefix("export ").unwrap_or(line);
        // `KEY=value`, `key: value` or a JSON member, split at whichever separator comes first
        // (a value may hold `=`, as base64 does).
        let pair = match (line.find('='), line.find(": ")) {
            (Some(e), Some(c)) if c < e => line.split_once(": "),
            (Some(_), _) => line.split_once('='),
            (None, Some(_)) => line.split_once(": "),
            (None, None) => None,
        };
        if let Some((key, value)) = pair
            && !key.trim().trim_matches(['"', '\'']).is_empty()
            && !key.trim().contains(' ')
        {
            any_pairs = true;
            let key = key.trim().trim_matches(['"', '\'']).to_ascii_uppercase();
            // JSON and YAML values keep their quotes and a trailing comma.
            let value = value.trim().trim_end_matches(',').trim().trim_matches(['"', '\'']).trim();
            let secret = match url_secret(value) {
                Some(carries) => carries,
                None => SECRET_KEY_WORDS.iter().any(|w| key.contains(w)) || looks_random(value),
            };
            if value.len() >= MIN_LEN && secret {
                out.push(value.to_string());
            }
        }
    }
    if !any_pairs {
        out.extend(text.lines().map(str::trim).filter(|l| l.len() >= 16 && !l.starts_with("-----")).map(str::to_string));
    }
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::extract;

    #[test]
    fn values_with_equals_signs_and_json_members_are_found_whole() {
        assert_eq!(extract("password: c2VjcmV0LXZhbHVl=="), vec!["c2VjcmV0LXZhbHVl==".to_string()]);
        assert_eq!(extract("API_KEY=abc=def=ghi123"), vec!["abc=def=ghi123".to_string()]);
        assert_eq!(extract("{\n  \"api_key\": \"sk-live-123456789\",\n  \"name\": \"demo\"\n}"), vec!["sk-live-123456789".to_string()]);
    }

    #[test]
    fn a_url_is_a_secret_for_what_it_carries() {
        assert!(extract("DATABASE_URL=postgres://localhost:5432/app").is_empty());
        assert!(extract("AUTH_URL=https://auth.example.com/login").is_empty());
        assert_eq!(extract("DATABASE_URL=postgres://app:s3cret-pw@db:5432/app"), vec!["postgres://app:s3cret-pw@db:5432/app".to_string()]);
        assert_eq!(extract("HOOK=https://hooks.example.com/x?token=abc123xyz"), vec!["https://hooks.example.com/x?token=abc123xyz".to_string()]);
        assert!(extract("REPO=https://github.com/acme/app?ref=main").is_empty());
        let hook = "https://hooks.slack.com/services/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";
        assert_eq!(extract(&format!("SLACK_WEBHOOK_URL={hook}")), vec![hook.to_string()]);
    }
}
